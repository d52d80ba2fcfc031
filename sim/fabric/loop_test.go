package fabric_test

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/rocesim/rocesim/faults"
	"github.com/rocesim/rocesim/sim"
	"github.com/rocesim/rocesim/sim/fabric"
)

// TestLoopBack: on a direct link, a frame a node sends to its own MAC
// comes back to it at the instant it was sent, in the order sent, with
// TxDone once; it is not on the link (no link statistics, no capture),
// the plan does not judge it, and its record says Looped; frames for the
// peer go as ever.
func TestLoopBack(t *testing.T) {
	plan, err := faults.Parse("drop psn=2")
	require.NoError(t, err)
	var recs []fabric.FrameRecord
	tap := &commentTap{}
	w := newWorldWith(fabric.Config{Plan: plan, Rand: sim.NewSeeds(1).Stream("faults"), Tap: tap,
		Observe: func(r *fabric.FrameRecord) { c := *r; c.Frame = nil; recs = append(recs, c) }}, "n0", "n1")
	l, err := w.f.Connect("n0-n1", w.nodes[0].Port(0), w.nodes[1].Port(0), fabric.DefaultLinkConfig())
	require.NoError(t, err)
	txDone := 0
	w.nodes[0].SetTxDone(func(sim.Time) { txDone++ })

	require.NoError(t, w.nodes[0].Send(0, roce(t, 0, 1, 1, 1000), nil)) // to n1: on the wire
	require.NoError(t, w.nodes[0].Send(0, roce(t, 0, 0, 2, 1000), nil)) // to itself: PSN 2, which the plan would drop
	require.NoError(t, w.nodes[0].Send(0, roce(t, 0, 0, 3, 1000), nil))
	require.NoError(t, w.sched.RunUntil(sim.Never))

	assert.Equal(t, []uint32{2, 3}, w.sinks[0].psns(t), "n0 gets its own frames back, the plan's rule notwithstanding")
	assert.Equal(t, []sim.Time{0, 0}, w.sinks[0].times, "at the instant sent")
	assert.Equal(t, []uint32{1}, w.sinks[1].psns(t))
	assert.Equal(t, 3, txDone, "TxDone once a frame")
	assert.Equal(t, uint64(1), l.Stats(0).TxFrames, "only the frame for n1 crossed the link")
	assert.Len(t, tap.lens, 1, "only the frame for n1 is captured")
	assert.Equal(t, uint64(0), w.f.RuleHits(1))
	var looped int
	for _, r := range recs {
		if r.Looped {
			looped++
			assert.Equal(t, "n0->n0", r.Dir)
			assert.True(t, r.First)
		}
	}
	assert.Equal(t, 2, looped, "%+v", recs)
	var loops int
	for _, e := range w.trace.Events() {
		if e.Kind == "frame-loop" {
			loops++
		}
	}
	assert.Equal(t, 2, loops)
}
