package fabric_test

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/rocesim/rocesim/sim/fabric"
)

// TestDupCostsWhatTheQueueHolds: "dup n=100000000" makes the copies one
// by one until the egress queue is full and counts the rest as tail drops
// at once, so it costs a queue's worth of frames, not a hundred million
// buffers (which ran out of memory).
func TestDupCostsWhatTheQueueHolds(t *testing.T) {
	const n = 100_000_000
	w := pair(t, "dup n=100000000")
	frame := roce(t, 0, 1, 7, 32)
	require.NoError(t, w.nodes[0].Send(0, frame, nil))
	require.NoError(t, w.sched.Run())
	st := w.f.Links()[0].Stats(0)
	assert.Equal(t, uint64(n), st.Duplicated)
	held := fabric.DefaultLinkConfig().QueueBytes / len(frame)
	assert.InDelta(t, held, int(st.TxFrames), 2, "the original and the copies the queue held went out")
	assert.Equal(t, uint64(n+1), st.TxFrames+st.QueueDrops, "every copy is sent or counted as a tail drop")
	assert.Equal(t, int(st.TxFrames), len(w.sinks[1].psns(t)))
}
