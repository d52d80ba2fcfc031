package fabric_test

import (
	"runtime"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/rocesim/rocesim/sim/fabric"
)

// TestBuffersSizedToFrame queues a burst of ACK-sized frames on a link:
// the fabric's copies of them take memory in proportion to the frames,
// not a jumbo frame's 9014 bytes apiece (issue 14 item 6: a 64 MiB READ's
// responses once held 590 MB of fabric buffers).
func TestBuffersSizedToFrame(t *testing.T) {
	w := newWorld(t, 2, nil, 1, nil)
	cfg := fabric.DefaultLinkConfig()
	cfg.QueueBytes = 0 // unbounded: every frame of the burst is held
	_, err := w.f.Connect("n0-n1", w.nodes[0].Port(0), w.nodes[1].Port(0), cfg)
	require.NoError(t, err)
	const burst = 2000
	frame := roce(t, 0, 1, 1, 0) // 62 bytes, an ACK's size
	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	for range burst {
		require.NoError(t, w.nodes[0].Send(0, frame, nil))
	}
	runtime.ReadMemStats(&after)
	perFrame := (after.TotalAlloc - before.TotalAlloc) / burst
	require.Less(t, perFrame, uint64(512), "bytes allocated per queued %d-byte frame", len(frame))
	require.NoError(t, w.sched.Run())
	require.Len(t, w.sinks[1].times, burst)
}
