#include "textflag.h"

// func lines(p, n uintptr)
// PREFETCHT0 the line of each 64 bytes from p's line to p+n-1's, counted
// rather than compared against an end address, which would wrap at the
// top of the address space.
TEXT ·lines(SB), NOSPLIT|NOFRAME, $0-16
	MOVQ p+0(FP), AX
	MOVQ n+8(FP), CX
	LEAQ -1(AX)(CX*1), CX // the last byte
	SHRQ $6, CX
	MOVQ AX, DX
	SHRQ $6, DX
	SUBQ DX, CX           // lines after the first
	ANDQ $~63, AX         // the first line
loop:
	PREFETCHT0 (AX)
	ADDQ $64, AX
	SUBQ $1, CX
	JCC  loop             // until the count goes below zero
	RET
