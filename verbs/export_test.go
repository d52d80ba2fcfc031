package verbs

import "fmt"

// WatchBySend reports whether the world's stall watch still reads each
// frame when its host sends it (stallWatch.bySend): for tests.
func (w *World) WatchBySend() bool { return w.watch.bySend }

// WatchState is the stall watch's records as text, to compare two runs
// of one workload: for tests.
func (w *World) WatchState() string {
	return fmt.Sprintf("reqs %+v\nhot %+v\nrnrs %+v", w.watch.reqs, w.watch.hot, w.watch.rnrs)
}
