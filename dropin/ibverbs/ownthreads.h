//go:build cgo && linux

/* The TIDs of the threads this library made (ownthreads.c). */
#ifndef ROCESIM_OWNTHREADS_H
#define ROCESIM_OWNTHREADS_H

#include <stdint.h>

#define RS_OWN_MAX 256

/* rs_own_tids[0 .. min(rs_own_count, RS_OWN_MAX)) are set, each once,
 * atomically; read them atomically. */
extern int32_t rs_own_tids[RS_OWN_MAX];
extern int32_t rs_own_count;
/* Threads being made, not yet noted. */
extern int32_t rs_own_making;

#endif
