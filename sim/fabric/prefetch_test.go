package fabric_test

import (
	"fmt"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/rocesim/rocesim/sim/fabric"
)

// TestPrefetchChangesNothing: a fabric large enough for its scheduler's
// prefetch hint (40 nodes on one switch; sim.Scheduler.SetPrefetch) turns
// it on, a small one does not, and the hint changes nothing a user sees:
// every frame arrives with the same bytes at the same time with it or
// without it, through queues that hold several frames at once, and the
// fabric's trace of every hop is the same text.
func TestPrefetchChangesNothing(t *testing.T) {
	const n = 40
	run := func(hint bool) *world {
		w := newWorld(t, n, nil, 1, nil)
		sw := w.f.AddSwitch("sw", n)
		for i := range n {
			_, err := w.f.Connect(fmt.Sprintf("n%d-sw", i), w.nodes[i].Port(0), sw.Port(i), fabric.DefaultLinkConfig())
			require.NoError(t, err)
		}
		for i := range n {
			for k, d := range []int{1, 7, 13} {
				j := (i + d) % n
				require.NoError(t, w.nodes[i].Send(0, roce(t, i, j, uint32(k), 64+300*k), nil))
			}
		}
		assert.True(t, w.sched.Prefetching(), "a fabric of %d nodes turns the hint on", n)
		w.sched.SetPrefetch(hint)
		require.NoError(t, w.sched.Run())
		return w
	}
	with, without := run(true), run(false)
	assert.NotZero(t, with.sched.Hints(), "the links were asked for their next frames")
	assert.Zero(t, without.sched.Hints())
	require.NotEmpty(t, with.trace.Events())
	assert.Equal(t, without.trace.Text(), with.trace.Text(), "the fabric's trace: every hop at the same time")
	for i := range n {
		assert.Len(t, with.sinks[i].frames, 3)
		assert.Equal(t, without.sinks[i].frames, with.sinks[i].frames, "frames at n%d", i)
		assert.Equal(t, without.sinks[i].times, with.sinks[i].times, "arrival times at n%d", i)
	}

	small := newWorld(t, 2, nil, 1, nil)
	_, err := small.f.Connect("n0-n1", small.nodes[0].Port(0), small.nodes[1].Port(0), fabric.DefaultLinkConfig())
	require.NoError(t, err)
	require.NoError(t, small.nodes[0].Send(0, roce(t, 0, 1, 1, 64), nil))
	assert.False(t, small.sched.Prefetching(), "a 2-node fabric's state stays in the caches: no hint")
}
