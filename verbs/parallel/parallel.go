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
)

// Each returns a verbs.ClusterConfig.Each that runs step(0) … step(n-1)
// on up to workers goroutines (0: GOMAXPROCS), the caller's among them:
// each goroutine takes the next part not yet taken until none is left,
// and Each returns when every step has returned. A step that panics does
// not take the process down from a worker: the others finish, and the
// panic of the lowest such part is raised again on the caller's
// goroutine, as if the parts had run there one after another.
func Each(workers int) func(n int, step func(p int)) {
	return func(n int, step func(p int)) {
		w := workers
		if w <= 0 {
			w = runtime.GOMAXPROCS(0)
		}
		w = min(w, n)
		if w <= 1 {
			for p := range n {
				step(p)
			}
			return
		}
		var next atomic.Int32
		panics := make([]any, n)
		panicked := make([]bool, n)
		run := func(p int) {
			defer func() {
				// Since Go 1.21 a panic never recovers as nil.
				if r := recover(); r != nil {
					panics[p], panicked[p] = r, true
				}
			}()
			step(p)
		}
		work := func() {
			for {
				p := int(next.Add(1)) - 1
				if p >= n {
					return
				}
				run(p)
			}
		}
		var wg sync.WaitGroup
		wg.Add(w - 1)
		for range w - 1 {
			go func() {
				defer wg.Done()
				work()
			}()
		}
		work()
		wg.Wait()
		for p := range n {
			if panicked[p] {
				panic(panics[p])
			}
		}
	}
}
