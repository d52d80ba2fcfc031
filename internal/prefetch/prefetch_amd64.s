#include "textflag.h"

// func lines(first, more uintptr)
// PREFETCHT0 the line at first and the more lines after it (span has
// counted them, clipped at the top of the address space).
TEXT ·lines(SB), NOSPLIT|NOFRAME, $0-16
	MOVQ first+0(FP), AX
	MOVQ more+8(FP), CX
loop:
	PREFETCHT0 (AX)
	ADDQ $64, AX
	SUBQ $1, CX
	JCC  loop // until the count goes below zero (a borrow)
	RET
