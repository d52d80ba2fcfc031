package sim_test

import (
	"fmt"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/rocesim/rocesim/sim"
)

// hinted records its events' Prefetch and Fire calls in order.
type hinted struct{ calls *[]string }

func (h hinted) Fire(now sim.Time, arg uint64) {
	*h.calls = append(*h.calls, fmt.Sprintf("fire %d", arg))
}
func (h hinted) Prefetch(arg uint64) { *h.calls = append(*h.calls, fmt.Sprintf("prefetch %d", arg)) }

// TestPrefetcher: with the hint on, Step asks the next event's handler
// (a Prefetcher) for that event before it fires the current one, so the
// next event's memory arrives while the current one works; a handler
// that is no Prefetcher is not asked; with the hint off nobody is. The
// events fire in the same order either way.
func TestPrefetcher(t *testing.T) {
	for _, on := range []bool{false, true} {
		t.Run(fmt.Sprint(on), func(t *testing.T) {
			var calls []string
			s := sim.NewScheduler()
			s.SetPrefetch(on)
			assert.Equal(t, on, s.Prefetching())
			h := hinted{&calls}
			plain := sim.HandlerFunc(func(_ sim.Time, arg uint64) { calls = append(calls, fmt.Sprintf("fire %d", arg)) })
			s.Schedule(30, h, 3)
			s.Schedule(10, h, 1)
			s.Schedule(20, plain, 2)
			s.Schedule(40, h, 4)
			require.NoError(t, s.Run())
			var want []string
			if on {
				// 1 fires with the plain 2 next (not asked); 2 with 3
				// next; 3 with 4 next; 4 last.
				want = []string{"fire 1", "prefetch 3", "fire 2", "prefetch 4", "fire 3", "fire 4"}
			} else {
				want = []string{"fire 1", "fire 2", "fire 3", "fire 4"}
			}
			assert.Equal(t, want, calls)
			hints := uint64(0)
			if on {
				hints = 2
			}
			assert.Equal(t, hints, s.Hints())
		})
	}
}
