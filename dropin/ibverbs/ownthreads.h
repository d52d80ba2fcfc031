//go:build cgo && linux

/* The TIDs of the threads this library made (ownthreads.c). */
#ifndef ROCESIM_OWNTHREADS_H
#define ROCESIM_OWNTHREADS_H

#include <stdint.h>

#define RS_OWN_MAX 256

/* rs_own_tids holds, in any order, the TID of each live thread the
 * library made (> 0), of one that is exiting (< 0: -TID, freed by the Go
 * side once gone from /proc), or 0 for a free slot; read and write them
 * atomically. */
extern int32_t rs_own_tids[RS_OWN_MAX];
/* Threads being made, not yet noted. */
extern int32_t rs_own_making;

#endif
