//go:build cgo && linux

/*
 * The library's own threads.
 *
 * threads.go looks at every thread of the process to tell whether the
 * program is about to act (a thread just made, on its way to its first
 * verb, holds a poll that would move virtual time). The Go runtime in
 * this library makes threads of its own, at load and whenever it needs
 * one (the collector's workers, its monitor); they run when they please
 * and are not the program's. Left in, one that ran during a poll held
 * it: the program's virtual time then depended on when the collector
 * ran (seen in CI: a pyverbs run whose RNR NAK came or not).
 *
 * The runtime makes its threads with pthread_create. This library is
 * linked with --wrap=pthread_create (exports.go), which sends its own
 * calls of it, and only those, to __wrap_pthread_create below; the
 * program's calls reach libc as before. The new thread notes its TID
 * before it runs what it was made for, and the maker waits for that.
 * Between the clone and the note the thread shows in /proc unnoted:
 * rs_own_making counts the makings in progress, and the Go side waits
 * for none before it reads the notes (ownTIDs).
 */

#include <errno.h>
#include <pthread.h>
#include <semaphore.h>
#include <stdint.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "ownthreads.h"

int32_t rs_own_tids[RS_OWN_MAX];
int32_t rs_own_making;

int __real_pthread_create(pthread_t *thread, const pthread_attr_t *attr,
			  void *(*start)(void *), void *arg);

struct rs_own_start {
	void *(*start)(void *);
	void *arg;
	sem_t noted;
};

/* rs_own_note takes a free slot for tid; -1 if every slot is taken (the
 * thread then counts as the program's, as every thread did before). */
static int rs_own_note(int32_t tid)
{
	for (int i = 0; i < RS_OWN_MAX; i++) {
		int32_t free_slot = 0;

		if (__atomic_compare_exchange_n(&rs_own_tids[i], &free_slot, tid, 0,
						__ATOMIC_SEQ_CST, __ATOMIC_SEQ_CST))
			return i;
	}
	return -1;
}

/* rs_own_exit marks the thread's slot as its thread's last moments
 * (-TID): it still shows in /proc while it exits, and must not pass for
 * a young thread of the program then. The Go side frees the slot once
 * the TID has left /proc (ownTIDs). It runs when the start routine
 * returns, and on pthread_exit. */
static void rs_own_exit(void *slot)
{
	int i = (int)(intptr_t)slot;

	if (i >= 0)
		__atomic_store_n(&rs_own_tids[i], -__atomic_load_n(&rs_own_tids[i], __ATOMIC_SEQ_CST),
				 __ATOMIC_SEQ_CST);
}

/* rs_own_thread runs first in every thread the library makes: it notes
 * the thread's TID, lets its maker go on (the maker's struct is not
 * touched after sem_post), runs the thread's own start routine, and
 * marks the note when that ends. */
static void *rs_own_thread(void *p)
{
	struct rs_own_start *s = p;
	void *(*start)(void *) = s->start;
	void *arg = s->arg;
	void *ret;
	int slot = rs_own_note((int32_t)syscall(SYS_gettid));

	sem_post(&s->noted);
	pthread_cleanup_push(rs_own_exit, (void *)(intptr_t)slot);
	ret = start(arg);
	pthread_cleanup_pop(1);
	return ret;
}

int __wrap_pthread_create(pthread_t *thread, const pthread_attr_t *attr,
			  void *(*start)(void *), void *arg)
{
	struct rs_own_start s = { .start = start, .arg = arg };
	int err;

	if (sem_init(&s.noted, 0, 0))
		return EAGAIN;
	__atomic_add_fetch(&rs_own_making, 1, __ATOMIC_SEQ_CST);
	err = __real_pthread_create(thread, attr, rs_own_thread, &s);
	if (!err)
		while (sem_wait(&s.noted) && errno == EINTR)
			;
	__atomic_sub_fetch(&rs_own_making, 1, __ATOMIC_SEQ_CST);
	sem_destroy(&s.noted);
	return err;
}
