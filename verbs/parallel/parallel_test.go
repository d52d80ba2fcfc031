package parallel_test

import (
	"fmt"
	"sync/atomic"
	"testing"

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
