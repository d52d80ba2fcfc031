package main

import (
	"bytes"
	"fmt"
	"os"
	"strconv"
	"sync/atomic"
	"time"

	"golang.org/x/sys/unix"
)

// Virtual time waits for every thread of the program.
//
// Virtual time moves when the program waits in a verb: a poll that finds
// nothing, a blocking ibv_get_cq_event, rdma_get_cm_event or
// ibv_get_async_event. In a program of one thread that is when it has
// nothing to do until the network answers. In a program of several it
// need not be: rping's CM thread goes back into rdma_get_cm_event as
// soon as it has woken the main thread (sem_post) to act on the event it
// took, and the main thread's rdma_connect or first post comes
// microseconds of wall time later. Had the CM thread's wait moved the
// clock meanwhile, the connect would happen after whatever the world had
// next (a fault plan's link change at 5 s, a peer's retry timer), where
// on a host it happens at once: a timed fault plan could not aim at such
// a program, and two runs of it could differ.
//
// So a thread about to wait (waitStep) first looks at the program's other
// threads, those that have called the library, and the process counts
// as running while one of them
//
//   - runs: R, running or runnable, in the kernel's
//     /proc/self/task/TID/stat (a futex wake makes the woken thread
//     runnable before sem_post returns, so rping's main thread is R from
//     the moment its CM thread posts the semaphore);
//   - is in a call of the library and not waiting there (C counts the
//     calls in progress, calls.h): on its way in or out it may sleep on
//     the Go runtime's futexes (its scheduler, the process lock), which
//     the kernel shows as any sleep;
//   - was woken from a wait of the library, or napped through a step of
//     the world, and has not taken the lock again (woken): what it
//     waits for may have come.
//
// A thread the program has just made, on its way to its first call, is
// watched too, by the kernel's list of the process's threads, for
// youngFor after it shows (rping's server makes its CQ thread before
// rdma_accept; on a loaded machine the first completion came before the
// thread had run).
//
// The thread then naps (holdNap) with the lock released and looks again.
// A thread asleep in the kernel outside the library (sem_wait, read,
// poll(2), nanosleep) or in a verb's wait counts as waiting, and so does
// one whose last call was a poll that found nothing (a thread that spins
// on ibv_poll_cq waits as its polls do). In a program of several
// threads a blocking wait moves time only after two looks, a nap apart,
// have found the others still (settled): a thread may sleep a moment on
// its way to act, on a lock of libc's.
//
// A thread may run for long: it computes, or spins on memory for a WRITE
// to land, with or without verb calls between. Time must move for it, so
// a waiting thread yields to another for spinCPU of that one's CPU time
// (schedstat) in one hold, then moves time anyway, one step, and holds
// again. A hold lasts from the first look that holds until the thread
// moves time; holdLimit of wall time ends it, and the thread moves time
// at once.
//
// The library's idle wake (idle.go) acts only while no call is in the
// library at all: a program with a thread waiting in a verb moves time
// through that thread, under the rules above. Nor while a thread of the
// process is runnable but has not had the CPU since the program's last
// call (idleBusy): on a loaded machine the quiet period is the
// scheduler's, not the program's.
//
// Threads older than youngFor that never call the library are not
// watched, and a thread that sleeps with a wall-clock timeout (usleep, a
// poll(2) with a timeout) counts as waiting: the world may move before
// its timer ends, as it always could. Over UDP the clock is the wall
// clock, which moves whatever the threads do: nothing is held there.

// holdNap is how long a thread that would wait sleeps before it looks at
// the others again.
const holdNap = 50 * time.Microsecond

// spinCPU is the CPU time a running thread may use in one hold of a
// waiting thread's before the waiter takes it for one that spins or
// computes rather than one about to act; holdLimit ends any hold in wall
// time.
const (
	spinCPU   = 10 * time.Millisecond
	holdLimit = 2 * time.Second
)

// maxThreads bounds the threads watched: past it, threads that have
// exited are forgotten, and a new one is not watched if none has.
const maxThreads = 256

// threadState is what the kernel says of a thread.
type threadState struct {
	running bool          // R: running or runnable
	cpu     time.Duration // time on a CPU (schedstat)
}

// progThread is one of the program's threads that called the library.
type progThread struct {
	tid int32
	// polling: its last call was a poll that found nothing.
	polling bool
	// cpu0 is its CPU time when a look of the hold that began at base
	// first saw it running (othersRunning).
	base time.Time
	cpu0 time.Duration
	// holdSince is when its own current hold began (zero: none); a
	// poll's hold goes on through the polls that follow it.
	holdSince time.Time
	// settled: it found the others still once and napped since
	// (settled).
	settled bool
	// waiting: it is in a wait of the library (await, nap); woken: a
	// step of the world came since (a broadcast woke it, or its nap
	// spanned one) and it has not taken the lock again.
	waiting, woken bool
}

// threadWatch is the process's view of the program's threads, guarded by
// the process lock (inside, C's count, is read atomically).
type threadWatch struct {
	// self is the calling thread's kernel TID (the C side's gettid,
	// cached per thread); nil: threads are not watched (tests of the
	// model, a process without the C side).
	self func() int32
	// read asks the kernel for a thread's state; false if it has
	// exited. procThread unless a test replaces it.
	read func(tid int32) (threadState, bool)
	// now is the wall clock (time.Now unless a test replaces it).
	now     func() time.Time
	threads []progThread
	// list returns the TIDs of the process's threads but the library's
	// own (programThreads, or listTasks in a process without the C side,
	// unless a test replaces it; nil: only the threads that called are
	// looked at).
	list func() []int32
	// tasks are the threads of the process as last listed, when each
	// first showed (youngRunning); tasksNext is the next list's room.
	tasks, tasksNext []taskSeen
	// idleCPU holds the CPU time of each thread of the process at the
	// idle wake's first look at it after the program's last call
	// (idleBusy).
	idleCPU []taskCPU
	// inside counts the calls of the library in progress, from C's
	// side (calls.h; nil: none counted): those of program threads
	// not waiting in the library are at work, though the kernel may
	// show them asleep on the Go runtime's futexes on their way in or
	// out.
	inside *int32
}

// enterWait marks the calling program thread as in a wait of the
// library (the library's own goroutines are not watched).
func (w *threadWatch) enterWait() {
	if t := w.caller(); t != nil {
		t.waiting, t.woken = true, false
	}
}

// leaveWait marks the calling program thread as out of its wait, the
// lock taken again.
func (w *threadWatch) leaveWait() {
	if t := w.caller(); t != nil {
		t.waiting, t.woken = false, false
	}
}

// caller returns the calling thread's entry, nil if it is not watched.
func (w *threadWatch) caller() *progThread {
	if w.self == nil {
		return nil
	}
	return w.find(w.self())
}

// wokeAll records a step of the world: every program thread in a wait
// may find what it waits for.
func (w *threadWatch) wokeAll() {
	for i := range w.threads {
		if w.threads[i].waiting {
			w.threads[i].woken = true
		}
	}
}

// find returns the watched thread tid, or nil.
func (w *threadWatch) find(tid int32) *progThread {
	for i := range w.threads {
		if w.threads[i].tid == tid {
			return &w.threads[i]
		}
	}
	return nil
}

// note records that the thread tid holds the lock for a call of the
// program: a hold of its own ends unless the call before was a poll that
// found nothing (a poll may follow it), and so does a first still look.
func (w *threadWatch) note(tid int32) {
	t := w.find(tid)
	if t == nil {
		if len(w.threads) >= maxThreads {
			w.forgetExited()
			if len(w.threads) >= maxThreads {
				return
			}
		}
		w.threads = append(w.threads, progThread{tid: tid})
		t = &w.threads[len(w.threads)-1]
	}
	if !t.polling {
		t.holdSince = time.Time{}
	}
	t.polling, t.settled = false, false
}

// forgetExited drops the threads the kernel no longer knows.
func (w *threadWatch) forgetExited() {
	kept := w.threads[:0]
	for _, t := range w.threads {
		if _, ok := w.read(t.tid); ok {
			kept = append(kept, t)
		}
	}
	clear(w.threads[len(kept):])
	w.threads = kept
}

// polled records that the calling thread's call was a poll that found
// nothing. The thread is looked up by its TID: the lock may have been
// released during the call (a poll that waited) and others' calls noted
// since.
func (w *threadWatch) polled() {
	if t := w.caller(); t != nil {
		t.polling = true
	}
}

// othersRunning reports whether a program thread other than the caller
// is about to act (see above), so that the caller must not wait yet.
// The caller holds the process lock.
func (w *threadWatch) othersRunning() bool {
	if w.self == nil {
		return false
	}
	me := w.find(w.self())
	// A running thread holds the caller for spinCPU of its CPU time in
	// one hold of the caller's, which key names (the hold's start).
	now := w.now()
	key := now
	if me != nil && !me.holdSince.IsZero() {
		key = me.holdSince
	}
	// The count of calls is read before the threads' states and again
	// after: a thread the kernel shows asleep on its way into or out of
	// the library was inside at one of the two reads.
	busy := w.atWork()
	gone := false
	for i := range w.threads {
		if busy {
			break
		}
		t := &w.threads[i]
		if t == me {
			continue
		}
		if t.woken {
			busy = true
			break
		}
		if t.polling || t.waiting {
			continue
		}
		st, ok := w.read(t.tid)
		if !ok {
			gone = true
			continue
		}
		if !st.running {
			continue
		}
		if t.base != key {
			t.base, t.cpu0 = key, st.cpu
		}
		busy = st.cpu-t.cpu0 < spinCPU
	}
	busy = busy || w.youngRunning(w.self(), key) || w.atWork()
	if gone {
		w.forgetExited()
		me = w.find(w.self())
	}
	if me == nil {
		return busy
	}
	if !busy {
		return false
	}
	me.settled = false
	if me.holdSince.IsZero() {
		me.holdSince = now
	} else if now.Sub(me.holdSince) >= holdLimit {
		// The bound: the thread moves time now, without the second
		// look (which would begin another hold).
		me.holdSince, me.settled = time.Time{}, true
		return false
	}
	return true
}

// youngFor is how long a thread of the process that has not called the
// library is watched after it first shows: one the program has just
// made, on its way to its first call, is about to act while it runs
// (rping's server makes its CQ thread before rdma_accept; on a loaded
// machine a completion came before that thread had run, and the CM
// thread's wait let the clock run to the fault plan's next event).
// Older threads that never call are the program's own business; the
// Go runtime's threads, young or old, are not in the list
// (programThreads).
const youngFor = 100 * time.Millisecond

// taskSeen is a thread of the process as the watch first saw it.
type taskSeen struct {
	tid  int32
	born time.Time
	base time.Time // as progThread's
	cpu0 time.Duration
}

// youngRunning reports whether a thread of the process younger than
// youngFor that has not called the library (so is not in threads), other
// than me, runs, under the same spinCPU rule as the program's threads
// (key names the caller's hold).
func (w *threadWatch) youngRunning(me int32, key time.Time) bool {
	if w.list == nil {
		return false
	}
	now := w.now()
	next := w.tasksNext[:0]
	busy := false
	for _, tid := range w.list() {
		i := 0
		for i < len(w.tasks) && w.tasks[i].tid != tid {
			i++
		}
		var t taskSeen
		if i < len(w.tasks) {
			t = w.tasks[i]
		} else if len(next) < maxThreads {
			t = taskSeen{tid: tid, born: now}
		} else {
			continue
		}
		if !busy && tid != me && now.Sub(t.born) < youngFor && w.find(tid) == nil {
			if st, ok := w.read(tid); ok && st.running {
				if t.base != key {
					t.base, t.cpu0 = key, st.cpu
				}
				busy = st.cpu-t.cpu0 < spinCPU
			}
		}
		next = append(next, t)
	}
	w.tasks, w.tasksNext = next, w.tasks
	return busy
}

// endHold ends the calling thread's hold: it moves time now.
func (w *threadWatch) endHold() {
	if t := w.caller(); t != nil {
		t.holdSince, t.settled = time.Time{}, false
	}
}

// settled reports whether the calling thread, which has just found the
// program's other threads still (othersRunning), may move time: in a
// program of one thread at once; in one of several only if it found them
// still before too, with a nap between (the caller naps and looks again
// when it is not). A thread that sleeps a moment on its way to act (on a
// lock of libc's, a page of its stack) looks still to one look; two
// looks apart are far less likely to both catch it so.
func (w *threadWatch) settled() bool {
	me := w.caller()
	if me == nil || len(w.threads) < 2 {
		return true
	}
	if me.settled {
		me.settled = false
		return true
	}
	me.settled = true
	return false
}

// taskCPU is a thread's CPU time at a look.
type taskCPU struct {
	tid int32
	cpu time.Duration
}

// idleQuiet starts a quiet period for idleBusy: the program has just
// made a call.
func (w *threadWatch) idleQuiet() { w.idleCPU = w.idleCPU[:0] }

// idleBusy reports whether the program, which has made no call for the
// idle wake's grace, may still be about to make one: a call of it is in
// the library, or a thread of the process is runnable but has had less
// than half the grace of CPU time since the first look of the quiet
// period (at the first look, any runnable thread). Such a thread has not
// been run by a busy machine: its next call is late, not absent. One
// that spins on memory or computes has had the CPU, and one asleep (in a
// TCP read, in poll(2), in sem_wait) waits: for those the idle wake
// acts. Every thread of the process is looked at, not only those that
// have called the library: a thread just created, on its way to its
// first call, is one of those a loaded machine has not run (rping's CM
// thread, while its main thread waits on a semaphore). The idle wake's
// own thread (me) is left out, as the list leaves out the library's
// other threads (programThreads).
func (w *threadWatch) idleBusy(grace time.Duration, me int32) bool {
	if w.programInside() {
		return true
	}
	if w.self == nil || w.list == nil {
		return false
	}
	busy := false
	for _, tid := range w.list() {
		if tid == me {
			continue
		}
		st, ok := w.read(tid)
		if !ok {
			continue
		}
		i := 0
		for i < len(w.idleCPU) && w.idleCPU[i].tid != tid {
			i++
		}
		if i == len(w.idleCPU) {
			if len(w.idleCPU) >= maxThreads {
				continue
			}
			w.idleCPU = append(w.idleCPU, taskCPU{tid, st.cpu})
			busy = busy || st.running
			continue
		}
		if st.running && st.cpu-w.idleCPU[i].cpu < grace/2 {
			busy = true
		}
	}
	return busy
}

// listTasks lists /proc/self/task.
func listTasks() []int32 {
	es, err := os.ReadDir("/proc/self/task")
	if err != nil {
		return nil
	}
	tids := make([]int32, 0, len(es))
	for _, e := range es {
		if n, err := strconv.Atoi(e.Name()); err == nil {
			tids = append(tids, int32(n))
		}
	}
	return tids
}

// programInside reports whether any call of the program is in the
// library (calls.h), waiting there or not.
func (w *threadWatch) programInside() bool {
	return w.inside != nil && atomic.LoadInt32(w.inside) > 0
}

// atWork reports whether a call of the library other than the caller's
// is in progress and not waiting in the library (calls.h).
func (w *threadWatch) atWork() bool {
	if w.inside == nil {
		return false
	}
	n := atomic.LoadInt32(w.inside) - 1
	for _, t := range w.threads {
		if t.waiting {
			n--
		}
	}
	return n > 0
}

// procThread reads a thread's state from /proc/self/task/TID: its stat's
// state letter and, when it runs, its schedstat's time on a CPU.
func procThread(tid int32) (threadState, bool) {
	var buf [512]byte
	dir := "/proc/self/task/" + strconv.Itoa(int(tid))
	b, ok := readSmall(dir+"/stat", buf[:])
	if !ok {
		return threadState{}, false
	}
	// "tid (comm) S ...": the name may hold spaces and parentheses, so
	// the state is the letter after the last ')'.
	i := bytes.LastIndexByte(b, ')')
	if i < 0 || i+2 >= len(b) {
		return threadState{}, false
	}
	st := threadState{running: b[i+2] == 'R'}
	if b, ok := readSmall(dir+"/schedstat", buf[:]); ok {
		f := bytes.Fields(b)
		if len(f) > 0 {
			if ns, err := strconv.ParseInt(string(f[0]), 10, 64); err == nil {
				st.cpu = time.Duration(ns)
			}
		}
	}
	return st, true
}

// readSmall reads a small file whole into buf.
func readSmall(path string, buf []byte) ([]byte, bool) {
	fd, err := unix.Open(path, unix.O_RDONLY|unix.O_CLOEXEC, 0)
	if err != nil {
		return nil, false
	}
	defer unix.Close(fd)
	n, err := unix.Read(fd, buf)
	if err != nil || n <= 0 {
		return nil, false
	}
	return buf[:n], true
}

// String names the watched threads and how each was last seen (for a
// test's failure message).
func (w *threadWatch) String() string {
	s := "threads:"
	for _, t := range w.threads {
		s += fmt.Sprintf(" %d(polling %v, waiting %v, woken %v)", t.tid, t.polling, t.waiting, t.woken)
	}
	return s
}
