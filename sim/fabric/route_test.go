package fabric_test

import (
	"fmt"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/rocesim/rocesim/faults"
	"github.com/rocesim/rocesim/sim"
	"github.com/rocesim/rocesim/sim/fabric"
)

// TestSwitchRoutesAlteredFrame: the fabric looks a frame's destination MAC
// up once, at Send, and a switch forwards by what it found; a fault that
// changes the frame's bytes on the first hop (here a bit of its
// destination MAC: n1's 02:..:02 becomes n2's 02:..:03, then 02:..:06,
// which no node has) makes the switch read them again, as a real switch
// forwards by the MAC it receives.
func TestSwitchRoutesAlteredFrame(t *testing.T) {
	for _, c := range []struct {
		plan    string
		n1, n2  int    // frames that reach n1 and n2
		unknown uint64 // frames the switch has no port for
	}{
		{"", 1, 0, 0},
		{"corrupt byte=5 bit=0 link=n0-sw\n", 0, 1, 0},
		{"corrupt byte=5 bit=2 link=n0-sw\n", 0, 0, 1},
		{"corrupt byte=5 bit=0 link=n1-sw\n", 1, 0, 0}, // the last hop: delivered as it is
	} {
		t.Run(c.plan, func(t *testing.T) {
			var plan *faults.Plan
			if c.plan != "" {
				var err error
				plan, err = faults.Parse(c.plan)
				require.NoError(t, err)
			}
			w := newWorld(t, 3, plan, 1, nil)
			sw := w.f.AddSwitch("sw", 3)
			for i := range 3 {
				_, err := w.f.Connect(fmt.Sprintf("n%d-sw", i), w.nodes[i].Port(0), sw.Port(i), fabric.DefaultLinkConfig())
				require.NoError(t, err)
			}
			// Two frames to n1: the second is sent after the first was
			// altered, and must not take its route from it.
			require.NoError(t, w.nodes[0].Send(0, roce(t, 0, 1, 5, 64), nil))
			require.NoError(t, w.sched.Run())
			require.NoError(t, w.nodes[2].Send(0, roce(t, 2, 1, 6, 64), nil))
			require.NoError(t, w.sched.Run())
			assert.Len(t, w.sinks[1].frames, c.n1+1, "frames at n1")
			assert.Len(t, w.sinks[2].frames, c.n2, "frames at n2")
			assert.Equal(t, c.unknown, sw.UnknownDrops())
		})
	}
}

// TestReceiverSetAfterConnect: a link's far end hands frames to the
// receiver its node has when they arrive, set before or after Connect
// and changed between frames (the direction keeps a copy of it, which
// SetReceiver must keep current), and TxDone likewise.
func TestReceiverSetAfterConnect(t *testing.T) {
	w := newWorld(t, 2, nil, 1, nil)
	_, err := w.f.Connect("n0-n1", w.nodes[0].Port(0), w.nodes[1].Port(0), fabric.DefaultLinkConfig())
	require.NoError(t, err)
	later := &sink{}
	w.nodes[1].SetReceiver(later)
	var done int
	w.nodes[0].SetTxDone(func(sim.Time) { done++ })
	require.NoError(t, w.nodes[0].Send(0, roce(t, 0, 1, 1, 64), nil))
	require.NoError(t, w.sched.Run())
	last := &sink{}
	w.nodes[1].SetReceiver(last)
	require.NoError(t, w.nodes[0].Send(0, roce(t, 0, 1, 2, 64), nil))
	require.NoError(t, w.sched.Run())
	assert.Empty(t, w.sinks[1].frames, "the receiver set before Connect, replaced since")
	assert.Len(t, later.frames, 1)
	assert.Len(t, last.frames, 1)
	assert.Equal(t, 2, done)
}
