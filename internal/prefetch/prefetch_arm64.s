#include "textflag.h"

// func lines(first, more uintptr)
// PRFM PLDL1KEEP the line at first and the more lines after it (span has
// counted them, clipped at the top of the address space).
TEXT ·lines(SB), NOSPLIT|NOFRAME, $0-16
	MOVD first+0(FP), R0
	MOVD more+8(FP), R1
loop:
	PRFM (R0), PLDL1KEEP
	ADD  $64, R0
	SUBS $1, R1, R1
	BCS  loop // until the count goes below zero (no carry: a borrow)
	RET
