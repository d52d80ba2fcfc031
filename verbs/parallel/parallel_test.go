package parallel_test

import (
	"fmt"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"

	"github.com/rocesim/rocesim/verbs/parallel"
)

// TestEach: every step runs exactly once, whatever the workers, and Each
// returns only when all have returned.
func TestEach(t *testing.T) {
	for _, workers := range []int{0, 1, 2, 3, 16} {
		for _, n := range []int{0, 1, 2, 7} {
			runs := make([]atomic.Int32, n)
			var done atomic.Int32
			parallel.Each(workers)(n, func(p int) {
				runs[p].Add(1)
				done.Add(1)
			})
			assert.Equal(t, int32(n), done.Load(), "workers=%d n=%d", workers, n)
			for p := range runs {
				assert.Equal(t, int32(1), runs[p].Load(), "workers=%d n=%d part %d", workers, n, p)
			}
		}
	}
}

// TestEachPanics: a step that panics on a worker does not end the
// process; every other step still runs, and the lowest panicking part's
// value is raised on the caller's goroutine, whichever goroutine ran it.
func TestEachPanics(t *testing.T) {
	for range 50 {
		var ran atomic.Int32
		func() {
			defer func() {
				assert.Equal(t, "part 1", recover())
			}()
			parallel.Each(4)(6, func(p int) {
				ran.Add(1)
				if p == 1 || p == 4 {
					panic(fmt.Sprintf("part %d", p))
				}
			})
			t.Error("Each returned without the panic")
		}()
		assert.Equal(t, int32(6), ran.Load(), "every step ran")
	}
}

// goid is the calling goroutine's number, from its stack's header.
func goid() int {
	var buf [64]byte
	n := runtime.Stack(buf[:], false)
	id, _, _ := strings.Cut(strings.TrimPrefix(string(buf[:n]), "goroutine "), " ")
	k, _ := strconv.Atoi(id)
	return k
}

// TestEachKeepsItsWorkers: calls that follow one another closely, as a
// cluster's steps do, are run by the goroutines the first call started,
// not by new ones each time; once calls stop, those goroutines end.
func TestEachKeepsItsWorkers(t *testing.T) {
	each, alive := parallel.EachWithWorkers(2)
	const calls = 200
	seen := map[int]bool{}
	var mu sync.Mutex
	for range calls {
		each(4, func(int) {
			// Long enough for the worker to take parts too (busy: a
			// sleep this short takes a millisecond on some machines,
			// as long as a worker waits).
			for start := time.Now(); time.Since(start) < 100*time.Microsecond; {
			}
			id := goid()
			mu.Lock()
			seen[id] = true
			mu.Unlock()
		})
	}
	// The caller and one worker, and more when the machine held the
	// caller off longer than a worker waits (under two busy loops on two
	// cores, up to 46): a goroutine per call would be about calls+1.
	assert.Less(t, len(seen), calls/2, "goroutines that ran the parts of %d calls", calls)
	assert.Greater(t, len(seen), 1, "the parts ran on the caller's goroutine alone")
	deadline := time.Now().Add(5 * time.Second)
	for alive() > 0 && time.Now().Before(deadline) {
		time.Sleep(time.Millisecond)
	}
	assert.Zero(t, alive(), "workers still running 5 s after the last call")
}

// TestEachAllocatesNothing: a call to a team that has run one allocates
// nothing (a cluster makes one per step).
func TestEachAllocatesNothing(t *testing.T) {
	each := parallel.Each(2)
	var sum atomic.Int64
	step := func(p int) { sum.Add(int64(p)) }
	each(4, step)
	assert.Zero(t, testing.AllocsPerRun(100, func() { each(4, step) }))
}

// TestEachGoexit: a part that ends its goroutine (runtime.Goexit, as a
// test's FailNow does) does not leave Each waiting for it: the call
// returns, or ends the caller's goroutine if the caller ran that part,
// and every other part runs.
func TestEachGoexit(t *testing.T) {
	each := parallel.Each(2)
	for k := range 20 {
		var ran [4]atomic.Int32
		finished := make(chan struct{})
		go func() {
			defer close(finished)
			each(len(ran), func(p int) {
				if p == 1 {
					runtime.Goexit()
				}
				for start := time.Now(); time.Since(start) < 50*time.Microsecond; {
				}
				ran[p].Add(1)
			})
		}()
		select {
		case <-finished:
		case <-time.After(5 * time.Second):
			t.Fatalf("call %d: Each still waiting 5 s after a part ended its goroutine", k)
		}
		// If the caller ran part 1, its goroutine ended there, and the
		// worker is still at the others.
		others := func() int32 { return ran[0].Load() + ran[2].Load() + ran[3].Load() }
		for deadline := time.Now().Add(5 * time.Second); others() < 3 && time.Now().Before(deadline); {
			time.Sleep(time.Millisecond)
		}
		for _, p := range []int{0, 2, 3} {
			assert.Equal(t, int32(1), ran[p].Load(), "call %d, part %d", k, p)
		}
	}
}

// TestEachConcurrentCalls: one Each called from several goroutines at
// once (two clusters given the same one) still runs every step of every
// call exactly once.
func TestEachConcurrentCalls(t *testing.T) {
	each := parallel.Each(3)
	var wg sync.WaitGroup
	for g := range 4 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for k := range 200 {
				runs := make([]atomic.Int32, 5)
				each(len(runs), func(p int) { runs[p].Add(1) })
				for p := range runs {
					if n := runs[p].Load(); n != 1 {
						t.Errorf("goroutine %d, call %d: part %d ran %d times", g, k, p, n)
					}
				}
			}
		}()
	}
	wg.Wait()
}
