package main

import (
	"os"
	"regexp"
	"runtime"
	"slices"
	"sort"
	"strings"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

// fakeThreads is a program's threads as a test sets them: what the
// kernel says of each, which one is calling, and a wall clock.
type fakeThreads struct {
	self   int32
	states map[int32]threadState // absent: exited
	now    time.Time
	inside int32
}

func newWatch(f *fakeThreads) *threadWatch {
	return &threadWatch{
		self: func() int32 { return f.self },
		read: func(tid int32) (threadState, bool) {
			st, ok := f.states[tid]
			return st, ok
		},
		now:    func() time.Time { return f.now },
		inside: &f.inside,
	}
}

// call makes tid the calling thread, noted as a call of the library
// would note it.
func (f *fakeThreads) call(w *threadWatch, tid int32) {
	f.self = tid
	w.note(tid)
}

// TestThreadWatch: a thread about to wait is held while another thread
// of the program runs, is in a call of the library and not waiting
// there, or was woken and has not taken the lock; not for a thread
// asleep outside the library, in a wait of the library, spinning on
// empty polls, or spinning (or computing) without calls for spinCPU of
// its CPU time; and never for longer than holdLimit.
func TestThreadWatch(t *testing.T) {
	const main, cm = 10, 11
	setup := func() (*fakeThreads, *threadWatch) {
		f := &fakeThreads{states: map[int32]threadState{main: {}, cm: {}}, now: time.Unix(1, 0)}
		w := newWatch(f)
		f.call(w, main)
		f.call(w, cm) // the CM thread calls rdma_get_cm_event, and would wait
		f.inside = 1  // its own call
		return f, w
	}

	t.Run("asleep outside the library", func(t *testing.T) {
		_, w := setup()
		if w.othersRunning() {
			t.Errorf("held with the main thread asleep in sem_wait: %v", w)
		}
	})
	t.Run("running", func(t *testing.T) {
		f, w := setup()
		f.states[main] = threadState{running: true, cpu: time.Second}
		if !w.othersRunning() {
			t.Errorf("not held with the main thread runnable (sem_post woke it): %v", w)
		}
		f.states[main] = threadState{}
		if w.othersRunning() {
			t.Errorf("still held once it sleeps again: %v", w)
		}
	})
	t.Run("in a call, asleep on the way in", func(t *testing.T) {
		f, w := setup()
		f.inside = 2 // the main thread's rdma_connect, parked on the runtime's futex
		if !w.othersRunning() {
			t.Errorf("not held with a call of another thread in progress: %v", w)
		}
		// The same thread waiting in the library (ibv_get_cq_event's
		// wait, a nap) is waiting.
		f.self = main
		w.enterWait()
		f.self = cm
		if w.othersRunning() {
			t.Errorf("held by a call that waits in the library: %v", w)
		}
		f.self = main
		w.leaveWait()
		f.self = cm
		if !w.othersRunning() {
			t.Errorf("not held once that call is back at work: %v", w)
		}
	})
	t.Run("woken", func(t *testing.T) {
		f, w := setup()
		f.self = main
		w.enterWait()
		f.inside = 2
		f.self = cm
		if w.othersRunning() {
			t.Errorf("held by a thread in a wait nothing has woken: %v", w)
		}
		w.wokeAll() // a step of the world brought what main waits for
		if !w.othersRunning() {
			t.Errorf("not held with a woken waiter that has not taken the lock: %v", w)
		}
		f.self = main
		w.leaveWait()
		f.inside = 1 // its call returned
		f.self = cm
		if w.othersRunning() {
			t.Errorf("held after the woken waiter took the lock and returned: %v", w)
		}
		// A wait the step did not span is not woken by it.
		f.self = main
		w.enterWait()
		if th := w.find(main); !th.waiting || th.woken {
			t.Errorf("a wait begun after the step: %+v", *th)
		}
		w.leaveWait()
	})
	t.Run("spinning on empty polls", func(t *testing.T) {
		f, w := setup()
		f.self = main
		w.polled()
		f.self = cm
		f.states[main] = threadState{running: true, cpu: time.Second}
		if w.othersRunning() {
			t.Errorf("held by a thread whose last call was a poll that found nothing: %v", w)
		}
		f.call(w, main) // it posts
		f.self = cm
		if !w.othersRunning() {
			t.Errorf("not held by a thread whose last call was a post: %v", w)
		}
	})
	t.Run("spinning", func(t *testing.T) {
		f, w := setup()
		f.states[main] = threadState{running: true, cpu: time.Second}
		if !w.othersRunning() {
			t.Fatalf("not held by a running thread: %v", w)
		}
		f.now = f.now.Add(time.Millisecond)
		f.call(w, main) // it calls between its runs: the hold goes on counting
		f.self = cm
		f.states[main] = threadState{running: true, cpu: time.Second + spinCPU - time.Microsecond}
		if !w.othersRunning() {
			t.Errorf("not held before spinCPU of its CPU time in the hold: %v", w)
		}
		f.states[main] = threadState{running: true, cpu: time.Second + spinCPU}
		if w.othersRunning() {
			t.Errorf("held after spinCPU of its CPU time in the hold: %v", w)
		}
		if w.othersRunning() {
			t.Errorf("a second look in the same hold (the settle's) held again: %v", w)
		}
		// The wait moves time; the next one holds afresh.
		w.endHold()
		f.now = f.now.Add(time.Millisecond)
		f.states[main] = threadState{running: true, cpu: 2 * time.Second}
		if !w.othersRunning() {
			t.Errorf("not held at the next wait: %v", w)
		}
	})
	t.Run("hold limit", func(t *testing.T) {
		f, w := setup()
		f.inside = 2 // a call that never comes back (wall time only)
		if !w.othersRunning() {
			t.Fatalf("not held: %v", w)
		}
		f.now = f.now.Add(holdLimit - time.Millisecond)
		if !w.othersRunning() {
			t.Errorf("not held before holdLimit: %v", w)
		}
		f.now = f.now.Add(time.Millisecond)
		if w.othersRunning() {
			t.Errorf("held after holdLimit: %v", w)
		}
		if !w.settled() {
			t.Errorf("a wait past holdLimit waits for a second look (which would hold again)")
		}
		if !w.othersRunning() {
			t.Errorf("the next look does not start a new hold: %v", w)
		}
	})
	t.Run("exited", func(t *testing.T) {
		f, w := setup()
		delete(f.states, main)
		w.othersRunning()
		if len(w.threads) != 1 || w.threads[0].tid != cm {
			t.Errorf("an exited thread is still watched: %v", w)
		}
	})
	t.Run("one thread", func(t *testing.T) {
		f := &fakeThreads{states: map[int32]threadState{main: {running: true}}, now: time.Unix(1, 0), inside: 1}
		w := newWatch(f)
		f.call(w, main)
		if w.othersRunning() {
			t.Errorf("a program of one thread held by itself: %v", w)
		}
	})
	t.Run("bounded", func(t *testing.T) {
		f := &fakeThreads{states: map[int32]threadState{}, now: time.Unix(1, 0)}
		w := newWatch(f)
		for tid := int32(1); tid <= 2*maxThreads; tid++ {
			if tid > maxThreads/2 {
				delete(f.states, tid-maxThreads/2) // threads come and go
			}
			f.states[tid] = threadState{}
			f.call(w, tid)
		}
		if len(w.threads) > maxThreads {
			t.Errorf("%d threads watched, at most %d", len(w.threads), maxThreads)
		}
		if w.find(2*maxThreads) == nil {
			t.Errorf("the newest thread is not watched")
		}
	})
	t.Run("young thread", func(t *testing.T) {
		f, w := setup()
		const cq = 12 // made by main, not yet at its first call
		f.states[cq] = threadState{running: true, cpu: time.Millisecond}
		w.list = func() []int32 { return []int32{main, cm, cq} }
		if !w.othersRunning() {
			t.Errorf("not held by a thread just made that runs toward its first call: %v", w)
		}
		f.states[cq] = threadState{}
		if w.othersRunning() {
			t.Errorf("held by a young thread asleep: %v", w)
		}
		f.states[cq] = threadState{running: true, cpu: 2 * time.Millisecond}
		f.now = f.now.Add(youngFor)
		if w.othersRunning() {
			t.Errorf("held by a thread that never called the library, %v after it showed: %v", youngFor, w)
		}
	})
	t.Run("settled", func(t *testing.T) {
		_, w := setup()
		if w.settled() {
			t.Errorf("a program of two threads moves time at the first still look")
		}
		if !w.settled() {
			t.Errorf("nor at the second")
		}
		if w.settled() {
			t.Errorf("a settle is used once")
		}
		w.note(cm) // a call between the looks voids it
		if w.settled() {
			t.Errorf("a settle survived a call")
		}
		f := &fakeThreads{states: map[int32]threadState{main: {}}, now: time.Unix(1, 0), inside: 1}
		w = newWatch(f)
		f.call(w, main)
		if !w.settled() {
			t.Errorf("a program of one thread waits for a second look")
		}
	})
	t.Run("idle", func(t *testing.T) {
		f, w := setup()
		const idle = 99 // the idle wake's own thread
		f.states[idle] = threadState{running: true}
		w.list = func() []int32 { return []int32{main, cm, idle} }
		if !w.idleBusy(time.Millisecond, idle) {
			t.Errorf("idle wake while a call is in the library")
		}
		f.inside = 0
		w.idleQuiet()
		if w.idleBusy(time.Millisecond, idle) {
			t.Errorf("no idle wake with every thread asleep")
		}
		w.idleQuiet()
		f.states[main] = threadState{running: true, cpu: time.Second}
		if !w.idleBusy(time.Millisecond, idle) {
			t.Errorf("idle wake with a runnable thread at the first look")
		}
		f.states[main] = threadState{running: true, cpu: time.Second + 400*time.Microsecond}
		if !w.idleBusy(time.Millisecond, idle) {
			t.Errorf("idle wake with a runnable thread that has had little CPU (a loaded machine)")
		}
		f.states[main] = threadState{running: true, cpu: time.Second + 500*time.Microsecond}
		if w.idleBusy(time.Millisecond, idle) {
			t.Errorf("no idle wake for a thread that spins on memory")
		}
	})
	t.Run("not watched", func(t *testing.T) {
		var w threadWatch // a process without the C side (the model's tests)
		w.note(1)
		w.polled()
		if w.othersRunning() || w.programInside() {
			t.Errorf("a watch without self holds")
		}
	})
}

// TestProcThread reads real threads from /proc: this test's own thread
// (locked to it) is running and has had CPU time; a thread blocked in a
// read of an empty pipe sleeps; a TID that does not exist is gone.
func TestProcThread(t *testing.T) {
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	st, ok := procThread(int32(unix.Gettid()))
	if !ok || !st.running || st.cpu <= 0 {
		t.Errorf("the calling thread: %+v, found %v; want running with CPU time", st, ok)
	}

	var p [2]int
	if err := unix.Pipe2(p[:], unix.O_CLOEXEC); err != nil {
		t.Fatal(err)
	}
	defer unix.Close(p[1])
	tids := make(chan int32)
	go func() {
		runtime.LockOSThread() // the thread dies with the goroutine
		tids <- int32(unix.Gettid())
		var b [1]byte
		unix.Read(p[0], b[:]) // blocks until the write below
		unix.Close(p[0])
	}()
	tid := <-tids
	asleep := false
	for end := time.Now().Add(10 * time.Second); time.Now().Before(end) && !asleep; time.Sleep(time.Millisecond) {
		st, ok := procThread(tid)
		asleep = ok && !st.running
	}
	if !asleep {
		t.Errorf("a thread blocked in read(2) of an empty pipe never read as asleep")
	}
	unix.Write(p[1], []byte{1})

	if _, ok := procThread(1 << 30); ok {
		t.Error("a TID that does not exist read as a thread")
	}
}

// TestOwnThreads: every thread the Go runtime makes is noted as the
// library's own (ownthreads.c), the new ones too, and nothing else is:
// in the test's process (linked as the library is) that is every thread
// but the first, which the kernel made, and the first is all the watch
// lists as the program's (programThreads). A thread that exits gives its
// note back, so the notes last however many threads come and go; and
// while the runtime makes threads, every look finds each listed thread
// noted.
func TestOwnThreads(t *testing.T) {
	// More threads: each goroutine holds one while it blocks in read(2)
	// (one may be the first thread, which runs goroutines too).
	var p [2]int
	if err := unix.Pipe2(p[:], unix.O_CLOEXEC); err != nil {
		t.Fatal(err)
	}
	defer unix.Close(p[0])
	defer unix.Close(p[1])
	blocked := func() int32 {
		tid := make(chan int32)
		go func() {
			runtime.LockOSThread()
			tid <- int32(unix.Gettid())
			var b [1]byte
			unix.Read(p[0], b[:])
		}()
		return <-tid
	}
	// look reads the threads as programThreads does, the list first,
	// then the notes (which frees the notes of threads gone from the
	// list), and checks that every thread but the first is noted; and
	// that programThreads, the watch's list, is the first thread alone.
	look := func(why string) []int32 {
		t.Helper()
		listed := listTasks()
		own := ownTIDs(nil, listed)
		for _, tid := range listed {
			if first := tid == int32(os.Getpid()); first == slices.Contains(own, tid) {
				t.Errorf("%s: thread %d (the process's first: %v) noted %v (%d noted)", why, tid, first, !first, len(own))
			}
		}
		if prog := programThreads(); !slices.Equal(prog, []int32{int32(os.Getpid())}) {
			t.Errorf("%s: the program's threads are %v, want the first alone (%d)", why, prog, os.Getpid())
		}
		return own
	}
	const more = 4
	for range more {
		if tid := blocked(); tid != int32(os.Getpid()) && !slices.Contains(look("blocked threads"), tid) {
			t.Errorf("thread %d, made for a locked goroutine, is not noted", tid)
		}
	}
	unix.Write(p[1], make([]byte, more))

	// exiting makes a thread that exits (a goroutine that ends locked
	// takes its thread with it) and returns its TID.
	exiting := func() int32 {
		tid := make(chan int32)
		go func() {
			runtime.LockOSThread() // never unlocked
			tid <- int32(unix.Gettid())
		}()
		return <-tid
	}
	// Three times as many threads as there are notes, one after
	// another: each exits and is looked at gone. (A new goroutine may
	// run on an idle thread rather than a new one, so the check that
	// the notes were given back is the last part's: without it, its
	// threads find every note taken.)
	for i := range 3 * ownMax {
		tid := exiting()
		if tid == int32(os.Getpid()) {
			// The goroutine ran on the first thread, which the runtime
			// parks rather than ends (runtime.mexit wedges m0): it stays.
			continue
		}
		for end := time.Now().Add(5 * time.Second); slices.Contains(listTasks(), tid); time.Sleep(50 * time.Microsecond) {
			if time.Now().After(end) {
				t.Fatalf("thread %d (the %d-th made) still listed 5 s after its goroutine ended", tid, i+1)
			}
		}
		look("threads coming and going")
	}
	if tid := blocked(); tid != int32(os.Getpid()) && !slices.Contains(look("after many threads"), tid) {
		t.Errorf("thread %d, made after %d threads came and went, is not noted: the notes were not given back", tid, 3*ownMax)
	}
	unix.Write(p[1], []byte{1})

	// Looks while the runtime makes threads (fewer than the notes, so
	// that none is lost between two looks).
	done := make(chan struct{})
	go func() {
		defer close(done)
		for range ownMax / 4 {
			exiting()
		}
	}()
	for looks := 0; ; looks++ {
		select {
		case <-done:
			if looks == 0 {
				t.Error("no look while threads were being made")
			}
			return
		default:
			look("while threads were being made")
		}
	}
}

// TestCallsCounted: every export the C glue calls is counted while it
// runs (calls.h, rocesim_cm.h's macros), and every export takes the
// process lock, so that the watch of the program's threads sees each
// call from its first instant to its last.
func TestCallsCounted(t *testing.T) {
	read := func(name string) string {
		b, err := os.ReadFile(name)
		if err != nil {
			t.Fatal(err)
		}
		return string(b)
	}
	exports := map[string]string{} // name → body
	goFiles, _ := os.ReadDir(".")
	for _, e := range goFiles {
		if !strings.HasSuffix(e.Name(), ".go") || strings.HasSuffix(e.Name(), "_test.go") {
			continue
		}
		src := read(e.Name())
		for _, m := range regexp.MustCompile(`(?m)^//export (\w+)\nfunc \w+\(`).FindAllStringSubmatchIndex(src, -1) {
			name := src[m[2]:m[3]]
			end := strings.Index(src[m[1]:], "\n}\n")
			exports[name] = src[m[1] : m[1]+end]
		}
	}
	if len(exports) < 40 {
		t.Fatalf("found %d exports; the test no longer reads them", len(exports))
	}
	for name, body := range exports {
		n := len(regexp.MustCompile(`\block\(\)`).FindAllString(body, -1))
		if strings.Contains(body, "postRecvC(") {
			n++
		}
		if n != 1 {
			t.Errorf("%s: takes the process lock %d times, want once (the count of calls in progress is read under it)", name, n)
		}
	}
	macros := func(header, prefix string) map[string]bool {
		m := map[string]bool{}
		for _, x := range regexp.MustCompile(`#define (`+prefix+`\w+)\(\.\.\.\)`).FindAllStringSubmatch(read(header), -1) {
			m[x[1]] = true
		}
		return m
	}
	check := func(cfiles []string, header string, wrapped map[string]bool) {
		var missing []string
		for _, f := range cfiles {
			src := read(f)
			for name := range exports {
				if regexp.MustCompile(`\b`+name+`\(`).MatchString(src) && !wrapped[name] {
					missing = append(missing, f+": "+name)
				}
			}
		}
		sort.Strings(missing)
		for _, m := range missing {
			t.Errorf("%s is called from C but not counted in %s", m, header)
		}
	}
	check([]string{"glue.c", "extended.c"}, "calls.h", macros("calls.h", "rs_"))
	check([]string{"../rdmacm/shim/rdmacm.c"}, "rocesim_cm.h", macros("../rdmacm/shim/rocesim_cm.h", "rs_cm_"))
	for _, f := range []string{"glue.c", "extended.c"} {
		if !strings.Contains(read(f), `#include "calls.h"`) {
			t.Errorf("%s does not include calls.h", f)
		}
	}
}
