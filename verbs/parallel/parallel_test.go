package parallel_test

import (
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
