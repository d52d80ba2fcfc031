// Package parallel runs the parts of a verbs.Cluster on several cores:
// it is the driver that brings goroutines to a simulation whose packages
// have none (sim, nic, faults, the fabric and verbs run on one goroutine
// each, and the determinism test holds them to it).
//
//	c, _ := verbs.NewCluster(verbs.ClusterConfig{World: cfg, Parts: 4, Each: parallel.Each(0)})
//
// A cluster's parts share nothing within a step, so which goroutine runs
// which part, and when, changes nothing in the result.
package parallel

import (
	"runtime"
	"sync"
	"sync/atomic"
	"time"
)

// Each returns a verbs.ClusterConfig.Each that runs step(0) … step(n-1)
// on up to workers goroutines (0: GOMAXPROCS), the caller's among them:
// each goroutine takes the next part not yet taken until none is left,
// and Each returns when every step has returned. A step that panics does
// not take the process down from a worker: the others finish, and the
// panic of the lowest such part is raised again on the caller's
// goroutine, as if the parts had run there one after another.
//
// A cluster calls Each once a step, with a moment of its own work in
// between. The goroutines Each starts therefore stay for the next call,
// waiting for it awake (yielding their core to any goroutine that needs
// it, runtime.Gosched) rather than asleep, and the caller waits for them
// the same way (TestEachKeepsItsWorkers): a goroutine started for each
// call began its part 0.1–0.2 ms after the caller began its own on the
// development machine (the operating system waking the other core), and
// a sparse cluster's steps on two goroutines took 40–100% longer than in
// turn on one, 15–20% now (BenchmarkClusterStream). A worker no call has
// come for in idleWait ends; the next call starts another. A call
// allocates nothing once the team has run one (TestEachAllocatesNothing);
// a call made while another runs, from another goroutine (two clusters
// given one Each), gets a team of its own, made for it.
func Each(workers int) func(n int, step func(p int)) {
	t := &team{workers: workers}
	return t.each
}

// idleWait is how long a worker waits, awake, for the next call before
// it ends.
const idleWait = time.Millisecond

// team is the goroutines one Each keeps between its calls, and the call
// they work on. A call allocates nothing: it is the team's fields, and
// its number and its count of parts ride with the next part to take in
// one word (next), so that a worker still leaving one call can neither
// take a part of the next nor read the next's count half written.
type team struct {
	workers int
	// busy is set while a call runs: a call made meanwhile from another
	// goroutine (two clusters given one Each) gets a team of its own.
	busy atomic.Bool
	// step is the current call's, written before the call is published
	// in next, and read only by a goroutine that took one of its parts.
	step func(p int)
	// next is the call's number, its count of parts and the next part
	// to take (word).
	next atomic.Uint64
	done atomic.Int32 // parts of the current call returned
	// alive counts the workers started and not ended (or about to).
	alive atomic.Int32
	// The lowest part of the call that panicked (n: none) and its panic.
	mu        sync.Mutex
	panicPart int
	panicked  any
}

// The fields of team.next: a call's number (the bits above), its count
// of parts and the next part to take (partBits each).
const (
	partBits = 20
	partMask = 1<<partBits - 1
	genShift = 2 * partBits
	genMask  = 1<<(64-genShift) - 1
)

// word is team.next for part p of call gen of n parts.
func word(gen uint64, n, p int) uint64 { return gen<<genShift | uint64(n)<<partBits | uint64(p) }

// parts returns the call's number, count of parts and next part in v.
func parts(v uint64) (gen uint64, n, p int) {
	return v >> genShift, int(v >> partBits & partMask), int(v & partMask)
}

func (t *team) each(n int, step func(p int)) {
	w := t.workers
	if w <= 0 {
		w = runtime.GOMAXPROCS(0)
	}
	w = min(w, n)
	if w <= 1 || n > partMask {
		for p := range n {
			step(p)
		}
		return
	}
	if !t.busy.CompareAndSwap(false, true) {
		(&team{workers: t.workers}).each(n, step)
		return
	}
	defer t.busy.Store(false)
	gen := (t.next.Load()>>genShift + 1) & genMask
	t.step, t.panicPart, t.panicked = step, n, nil
	t.done.Store(0)
	t.next.Store(word(gen, n, 0)) // published: workers take its parts from here
	for t.alive.Load() < int32(w-1) {
		t.alive.Add(1)
		go t.worker(gen)
	}
	t.work(gen)
	// The parts workers took: each is as long as the caller's own, so
	// the wait is short, and waking from a sleep would be longer.
	for t.done.Load() < int32(n) {
		runtime.Gosched()
	}
	t.step = nil
	if t.panicPart < n {
		panic(t.panicked)
	}
}

// work takes the parts of call gen not yet taken, one after another.
func (t *team) work(gen uint64) {
	for {
		v := t.next.Load()
		g, n, p := parts(v)
		if g != gen || p >= n {
			return
		}
		if !t.next.CompareAndSwap(v, v+1) {
			continue
		}
		t.run(p)
	}
}

// run runs part p, keeping its panic for the caller, and counts it done
// however it ends: returned, panicked, or ended its goroutine
// (runtime.Goexit: a test's FailNow in a part a worker ran), so that the
// caller never waits for a part that is over.
func (t *team) run(p int) {
	defer func() {
		// Since Go 1.21 a panic never recovers as nil.
		if r := recover(); r != nil {
			t.mu.Lock()
			if p < t.panicPart {
				t.panicPart, t.panicked = p, r
			}
			t.mu.Unlock()
		}
		t.done.Add(1)
	}()
	t.step(p)
}

// worker takes part in call gen, then in each later call, until none
// comes for idleWait, or a part ends its goroutine. A call made just as
// it leaves counted it among the living and runs without it: on the
// caller, which takes every part no one else has.
func (t *team) worker(gen uint64) {
	defer t.alive.Add(-1)
	for {
		t.work(gen)
		next, ok := t.await(gen)
		if !ok {
			return
		}
		gen = next
	}
}

// await waits for a call after call gen, awake, for idleWait at most,
// and returns its number; false if none came.
func (t *team) await(gen uint64) (uint64, bool) {
	start := time.Now()
	for i := 0; ; i++ {
		if next := t.next.Load() >> genShift; next != gen {
			return next, true
		}
		if i%64 == 63 && time.Since(start) > idleWait {
			return 0, false
		}
		runtime.Gosched()
	}
}
