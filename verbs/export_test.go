package verbs

import (
	"fmt"

	"github.com/rocesim/rocesim/nic"
	"github.com/rocesim/rocesim/wire"
)

// PeerHint is the hint q's frames carry (nic.QP.PeerHint): for tests.
func (q *QP) PeerHint() nic.Hint { return q.qp.PeerHint() }

// QPHint is h's device's hint for a frame to its QP qpn: for tests.
func (h *Host) QPHint(qpn uint32) nic.Hint { return h.dev.QPHint(qpn) }

// StreamsWrites reports whether h's device writes what it receives past
// the caches (nic.Device.SetStreamingWrites): for tests.
func (h *Host) StreamsWrites() bool { return h.dev.StreamingWrites() }

// WatchState is the stall watch's records as text, to compare two runs
// of one workload: for tests. Each flow is named as "from:F to:T
// destQPN:Q ", found through its destination's chain (byDest, reqIdx):
// a flow a NIC sends is known from its first resend, one of a node
// outside the world's hosts from its first request.
func (w *World) WatchState() string {
	sw := &w.watch
	named := make([]string, len(sw.hot))
	chain := func(to int32, qpn uint32, head int32) {
		for j := head; j >= 0; j = sw.hot[j].sibling {
			named[j] = fmt.Sprintf("from:%d to:%d destQPN:%d ", sw.hot[j].from, to, qpn)
		}
	}
	for h, t := range sw.byDest {
		for qpn, v := range t {
			if v != 0 {
				chain(int32(h), uint32(qpn), v-1)
			}
		}
	}
	for k, head := range sw.reqIdx { // each flow's name goes to its own index: any order
		chain(int32(k>>32), uint32(k), head)
	}
	return fmt.Sprintf("flows %q\nreqs %+v\nhot %+v\nslow %v\nrnrs %+v", named, sw.reqs, sw.hot, sw.slow, sw.rnrs)
}

// WatchRecords returns how many flows the stall watch follows and how
// many of them have a record of their rounds (those that resent): for
// tests.
func (w *World) WatchRecords() (flows, records int) { return len(w.watch.hot), len(w.watch.reqs) }

// RxErrors is the device's count of frames dropped as malformed, by
// code (nic.Device.RxErrors): for tests.
func (h *Host) RxErrors(code wire.ErrorCode) uint64 { return h.dev.RxErrors(code) }

// SetFence replaces what ends every run (fence, internal/ntcopy.Fence)
// until the returned function puts it back: for tests.
func SetFence(f func()) (restore func()) {
	old := fence
	fence = f
	return func() { fence = old }
}
