package ladder_test

import (
	"testing"

	"github.com/stretchr/testify/assert"

	"github.com/rocesim/rocesim/ladder"
	"github.com/rocesim/rocesim/sim"
)

// TestDropCauseLabels: a frame the fabric lost is labelled by its event's
// drop= field (sim.DropCause), never by the words of its why= field. Each
// row's why= here names another cause, or none, so a ladder that read
// the words would label it wrongly; in a narrow ladder the short label is
// the one shown.
func TestDropCauseLabels(t *testing.T) {
	for _, c := range []struct {
		cause sim.DropCause
		short string
	}{
		{sim.DropQueueFull, "queue full"},
		{sim.DropMTU, "MTU"},
		{sim.DropLinkDown, "link down"},
		{sim.DropNoRoute, "no route"},
		{"", "dropped"},
	} {
		t.Run(string(c.cause), func(t *testing.T) {
			why := "dropped: switch s has no port for 02:00:00:00:00:02"
			if c.cause == sim.DropNoRoute {
				why = "dropped: egress queue of a->b full, link went down, exceeds the MTU"
			}
			tr := &sim.Trace{}
			tr.Add(sim.Event{Node: "b", Kind: "qp-state", QPN: 0x11, HasQPN: true,
				Fields: []sim.Field{{Key: "from", Value: "RTR"}, {Key: "to", Value: "RTS"}}})
			f := []sim.Field{{Key: "link", Value: "a->b"}, {Key: "op", Value: "RC_SEND_ONLY"}, {Key: "psn", Value: "7"},
				{Key: "len", Value: "100"}, {Key: "why", Value: why}}
			if c.cause != "" {
				f = append(f, c.cause.Field())
			}
			tr.Add(sim.Event{Time: 10, Node: "a", Kind: "frame-drop", QPN: 0x11, HasQPN: true, Fields: f})
			tr.Add(sim.Event{Time: 20, Node: "a", Kind: "qp-state", QPN: 0x11, HasQPN: true,
				Fields: []sim.Field{{Key: "from", Value: "RTS"}, {Key: "to", Value: "ERR"}}})
			out := text(t, tr, ladder.Options{Width: 40})
			assert.Contains(t, out, c.short+" ✗", out)
		})
	}
}
