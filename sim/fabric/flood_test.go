package fabric_test

import (
	"fmt"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/rocesim/rocesim/sim/fabric"
)

// group makes frame a multicast one: its destination MAC a group's.
func group(frame []byte) []byte {
	copy(frame, []byte{0x01, 0x00, 0x5e, 0x01, 0x01, 0x01})
	return frame
}

// TestFloodReachesEveryNodeOnce: a switch floods a frame for a group MAC
// out of every other port; with two switches joined by two links (a
// loop), each other node still gets exactly one copy and the run ends,
// as a spanning tree leaves one path between any two switches.
func TestFloodReachesEveryNodeOnce(t *testing.T) {
	w := newWorld(t, 4, nil, 1, nil)
	s1, s2 := w.f.AddSwitch("s1", 4), w.f.AddSwitch("s2", 4)
	connect := func(name string, a, b *fabric.Port) {
		_, err := w.f.Connect(name, a, b, fabric.DefaultLinkConfig())
		require.NoError(t, err)
	}
	connect("n0-s1", w.nodes[0].Port(0), s1.Port(0))
	connect("n1-s1", w.nodes[1].Port(0), s1.Port(1))
	connect("n2-s2", w.nodes[2].Port(0), s2.Port(0))
	connect("n3-s2", w.nodes[3].Port(0), s2.Port(1))
	connect("s1-s2", s1.Port(2), s2.Port(2))
	connect("s1-s2b", s1.Port(3), s2.Port(3)) // a second, redundant link
	w.sched.SetEventLimit(10000)
	require.NoError(t, w.nodes[0].Send(0, group(roce(t, 0, 1, 5, 64)), nil))
	require.NoError(t, w.sched.Run(), "a flood around the loop would run past the event limit")
	for i := 1; i < 4; i++ {
		assert.Len(t, w.sinks[i].frames, 1, "frames at n%d", i)
	}
	assert.Empty(t, w.sinks[0].frames, "the sender's own port gets none back")
	assert.Zero(t, s1.UnknownDrops()+s2.UnknownDrops())
}

// TestFloodOnOnePortSwitch: a switch of one host has no other port to
// flood to; the frame reaches no one and no drop is recorded (the drop-in
// library's one device sits on such a switch).
func TestFloodOnOnePortSwitch(t *testing.T) {
	w := newWorld(t, 1, nil, 1, nil)
	sw := w.f.AddSwitch("sw", 1)
	_, err := w.f.Connect("n0-sw", w.nodes[0].Port(0), sw.Port(0), fabric.DefaultLinkConfig())
	require.NoError(t, err)
	require.NoError(t, w.nodes[0].Send(0, group(roce(t, 0, 0, 1, 64)), nil))
	require.NoError(t, w.sched.Run())
	assert.Empty(t, w.sinks[0].frames)
	assert.Zero(t, sw.UnknownDrops())
	for _, e := range w.trace.Events() {
		assert.NotEqual(t, "frame-drop", string(e.Kind), fmt.Sprint(e))
	}
}
