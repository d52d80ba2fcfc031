package verbs

import (
	"fmt"

	"github.com/rocesim/rocesim/wire"
)

// WatchBySend reports whether the world's stall watch still reads each
// frame when its host sends it (stallWatch.bySend): for tests.
func (w *World) WatchBySend() bool { return w.watch.bySend }

// WatchState is the stall watch's records as text, to compare two runs
// of one workload: for tests.
func (w *World) WatchState() string {
	return fmt.Sprintf("reqs %+v\nhot %+v\nrnrs %+v", w.watch.reqs, w.watch.hot, w.watch.rnrs)
}

// RxErrors is the device's count of frames dropped as malformed, by
// code (nic.Device.RxErrors): for tests.
func (h *Host) RxErrors(code wire.ErrorCode) uint64 { return h.dev.RxErrors(code) }
