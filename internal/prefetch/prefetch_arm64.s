#include "textflag.h"

// func lines(p, n uintptr)
// PRFM PLDL1KEEP the line of each 64 bytes from p's line to p+n-1's,
// counted rather than compared against an end address, which would wrap
// at the top of the address space.
TEXT ·lines(SB), NOSPLIT|NOFRAME, $0-16
	MOVD p+0(FP), R0
	MOVD n+8(FP), R1
	ADD  R0, R1, R1
	SUB  $1, R1, R1 // the last byte
	LSR  $6, R1, R1
	LSR  $6, R0, R2
	SUB  R2, R1, R1 // lines after the first
	AND  $~63, R0   // the first line
loop:
	PRFM (R0), PLDL1KEEP
	ADD  $64, R0
	SUBS $1, R1, R1
	BGE  loop       // until the count goes below zero
	RET
