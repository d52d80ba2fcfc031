#include "textflag.h"

// func lines(dst, src *byte, n uintptr)
// Copies n bytes (a multiple of 64, n > 0) from src to dst, dst aligned
// to 16 bytes, with non-temporal stores, left unfenced (see Copy).
TEXT ·lines(SB), NOSPLIT|NOFRAME, $0-24
	MOVQ dst+0(FP), DI
	MOVQ src+8(FP), SI
	MOVQ n+16(FP), CX
loop:
	MOVOU 0(SI), X0
	MOVOU 16(SI), X1
	MOVOU 32(SI), X2
	MOVOU 48(SI), X3
	MOVNTO X0, 0(DI)
	MOVNTO X1, 16(DI)
	MOVNTO X2, 32(DI)
	MOVNTO X3, 48(DI)
	ADDQ $64, SI
	ADDQ $64, DI
	SUBQ $64, CX
	JNZ  loop
	RET

// func Fence()
// Waits until the non-temporal stores before it are globally visible.
TEXT ·Fence(SB), NOSPLIT|NOFRAME, $0-0
	SFENCE
	RET
