package fabric_test

import (
	"fmt"
	"testing"
	"unsafe"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/rocesim/rocesim/sim/fabric"
)

// TestPrefetchChangesNothing: a fabric large enough for its scheduler's
// prefetch hint (40 nodes on one switch; sim.Scheduler.SetPrefetch) turns
// it on, a small one does not, and the hint changes nothing a user sees:
// every frame arrives with the same bytes at the same time with it or
// without it, through queues that hold several frames at once, and the
// fabric's trace of every hop is the same text. So do the hints a sender
// gives its frames (SendHinted), the wrong ones too: one that names
// memory far from anything a receiver reads, one that names no memory
// at all, and none.
func TestPrefetchChangesNothing(t *testing.T) {
	const n = 40
	var somewhere [4096]byte
	hints := []fabric.Hint{
		{Addr: uintptr(unsafe.Pointer(&somewhere)), Len: uint32(len(somewhere))},
		{Addr: 0xdead0000, Len: 1 << 20}, // mapped or not, a prefetch never faults
		{},
	}
	run := func(hint, hinted bool) *world {
		w := newWorld(t, n, nil, 1, nil)
		sw := w.f.AddSwitch("sw", n)
		for i := range n {
			_, err := w.f.Connect(fmt.Sprintf("n%d-sw", i), w.nodes[i].Port(0), sw.Port(i), fabric.DefaultLinkConfig())
			require.NoError(t, err)
		}
		for i := range n {
			for k, d := range []int{1, 7, 13} {
				j := (i + d) % n
				f := roce(t, i, j, uint32(k), 64+300*k)
				if hinted {
					require.NoError(t, w.nodes[i].SendHinted(0, f, nil, hints[(i+k)%len(hints)]))
				} else {
					require.NoError(t, w.nodes[i].SendSealed(0, f, nil))
				}
			}
		}
		assert.True(t, w.sched.Prefetching(), "a fabric of %d nodes turns the hint on", n)
		w.sched.SetPrefetch(hint)
		require.NoError(t, w.sched.Run())
		return w
	}
	with, without, hinted := run(true, false), run(false, false), run(true, true)
	assert.NotZero(t, with.sched.Hints(), "the links were asked for their next frames")
	assert.Zero(t, without.sched.Hints())
	require.NotEmpty(t, with.trace.Events())
	assert.Equal(t, without.trace.Text(), with.trace.Text(), "the fabric's trace: every hop at the same time")
	for i := range n {
		assert.Len(t, with.sinks[i].frames, 3)
		assert.Equal(t, without.sinks[i].frames, with.sinks[i].frames, "frames at n%d", i)
		assert.Equal(t, without.sinks[i].times, with.sinks[i].times, "arrival times at n%d", i)
		assert.Equal(t, without.sinks[i].frames, hinted.sinks[i].frames, "frames at n%d, hinted", i)
		assert.Equal(t, without.sinks[i].times, hinted.sinks[i].times, "arrival times at n%d, hinted", i)
	}
	assert.Equal(t, without.trace.Text(), hinted.trace.Text(), "the fabric's trace, hinted")

	small := newWorld(t, 2, nil, 1, nil)
	_, err := small.f.Connect("n0-n1", small.nodes[0].Port(0), small.nodes[1].Port(0), fabric.DefaultLinkConfig())
	require.NoError(t, err)
	require.NoError(t, small.nodes[0].Send(0, roce(t, 0, 1, 1, 64), nil))
	assert.False(t, small.sched.Prefetching(), "a 2-node fabric's state stays in the caches: no hint")
}
