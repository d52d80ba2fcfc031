package ladder_test

import (
	"strconv"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

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
		{sim.DropRunt, "runt"},
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

// TestCMLabels: a connection manager's MAD is labelled with its message
// (the trace's cm field), not as the UD SEND to QP1 that carries it: "CM
// REQ psn=0 A" in a wide ladder, "CM REQ" in a narrow one.
func TestCMLabels(t *testing.T) {
	tr := &sim.Trace{}
	for i, m := range []struct{ from, to, link, cm string }{
		{"a", "b", "a->b", "REQ"}, {"b", "a", "b->a", "REP"}, {"a", "b", "a->b", "RTU"},
	} {
		f := []sim.Field{{Key: "link", Value: m.link}, {Key: "op", Value: "UD_SEND_ONLY"}, {Key: "psn", Value: strconv.Itoa(i)},
			{Key: "ackreq", Value: "1"}, {Key: "cm", Value: m.cm}, {Key: "len", Value: "330"}}
		at := sim.Time(100 * (i + 1))
		tr.Add(sim.Event{Time: at, Node: m.from, Kind: "frame-tx", QPN: 1, HasQPN: true, Fields: f})
		tr.Add(sim.Event{Time: at + 10, Node: m.to, Kind: "frame-rx", QPN: 1, HasQPN: true, Fields: f})
	}
	wide := text(t, tr, ladder.Options{Width: 100})
	for i, m := range []string{"REQ", "REP", "RTU"} {
		assert.Contains(t, wide, "CM "+m+" psn="+strconv.Itoa(i)+" A", wide)
	}
	assert.NotContains(t, wide, "UD_SEND_ONLY")
	narrow := text(t, tr, ladder.Options{Width: 30})
	for _, m := range []string{"CM REQ", "CM REP", "CM RTU"} {
		assert.Contains(t, narrow, m, narrow)
	}
}

// TestSendOnlyNodeIsAColumn: in a fabric daemon's trace (frames only, no
// NIC events) a node that only sends, as a multicast sender does, is a
// column with its arrows, through a switch or not; the switch is none.
func TestSendOnlyNodeIsAColumn(t *testing.T) {
	for _, links := range [][]string{{"client->server"}, {"client->sw", "sw->server"}} {
		tr := &sim.Trace{}
		for i, psn := range []string{"0", "1"} {
			at := sim.Time(i * 16)
			f := []sim.Field{{Key: "op", Value: "UD_SEND_ONLY"}, {Key: "psn", Value: psn}}
			for hop, l := range links {
				from, _, _ := strings.Cut(l, "->")
				tr.Add(sim.Event{Time: at + sim.Time(hop*1000), Node: from, Kind: "frame-tx", QPN: 0xffffff, HasQPN: true,
					Fields: append([]sim.Field{{Key: "link", Value: l}}, f...)})
			}
			tr.Add(sim.Event{Time: at + sim.Time(len(links)*1000), Node: "server", Kind: "frame-rx", QPN: 0xffffff, HasQPN: true,
				Fields: append([]sim.Field{{Key: "link", Value: links[len(links)-1]}}, f...)})
		}
		out := text(t, tr, ladder.Options{Width: 60})
		ls := strings.Split(out, "\n")
		require.Contains(t, ls[0], "client", "%v:\n%s", links, out)
		require.Contains(t, ls[0], "server")
		assert.NotContains(t, ls[0], "sw")
		rowIndex(t, ls, 1, "UD_SEND_ONLY psn=0", "▶")
		rowIndex(t, ls, 1, "UD_SEND_ONLY psn=1", "▶")
	}
}

// TestMulticastFlood: a switch floods a datagram to the multicast QPN
// out of every other port; the ladder draws one arrow from the sender to
// each receiver, all starting where the sender sent it.
func TestMulticastFlood(t *testing.T) {
	tr := &sim.Trace{}
	ev := func(at sim.Time, node, kind, link string) {
		tr.Add(sim.Event{Time: at, Node: node, Kind: sim.Kind(kind), QPN: 0xffffff, HasQPN: true,
			Fields: []sim.Field{{Key: "link", Value: link}, {Key: "op", Value: "UD_SEND_ONLY"}, {Key: "psn", Value: "7"}}})
	}
	ev(0, "a", "frame-tx", "a->sw")
	ev(1000, "sw", "frame-tx", "sw->b")
	ev(1000, "sw", "frame-tx", "sw->c")
	ev(1000, "sw", "frame-tx", "sw->d")
	ev(2000, "b", "frame-rx", "sw->b")
	ev(2000, "c", "frame-rx", "sw->c")
	ev(2000, "d", "frame-rx", "sw->d")
	out := text(t, tr, ladder.Options{Width: 80})
	ls := strings.Split(out, "\n")
	require.Equal(t, []string{"time", "a", "b", "c", "d"}, strings.Fields(ls[0]), out)
	var arrows int
	for _, l := range ls[1:] {
		if strings.Contains(l, "UD_SEND_ONLY") && strings.Contains(l, "▶") {
			assert.True(t, strings.HasPrefix(strings.TrimSpace(l), "0s"), "every copy's arrow starts when a sent it: %q", l)
			arrows++
		}
	}
	assert.Equal(t, 3, arrows, "one arrow to each of b, c and d:\n%s", out)
	assert.NotContains(t, out, "✗", out)
}

// TestLoopNote: a host's own multicast datagram handed back to it
// (frame-loop) is a note at the host, not an arrow.
func TestLoopNote(t *testing.T) {
	tr := &sim.Trace{}
	tr.Add(sim.Event{Time: 0, Node: "a", Kind: "qp-state", QPN: 0x11, HasQPN: true,
		Fields: []sim.Field{{Key: "from", Value: "RESET"}, {Key: "to", Value: "INIT"}}})
	tr.Add(sim.Event{Time: 0, Node: "b", Kind: "qp-state", QPN: 0x11, HasQPN: true,
		Fields: []sim.Field{{Key: "from", Value: "RESET"}, {Key: "to", Value: "INIT"}}})
	tr.Add(sim.Event{Time: 5, Node: "a", Kind: "frame-loop", QPN: 0xffffff, HasQPN: true,
		Fields: []sim.Field{{Key: "op", Value: "UD_SEND_ONLY"}, {Key: "psn", Value: "3"}}})
	out := text(t, tr, ladder.Options{Width: 60})
	assert.Contains(t, out, "↺ UD_SEND_ONLY psn=3 looped back", out)
	assert.NotContains(t, out, "▶", out)
}

// TestSelfFrame: a frame between two QPs of one host, which a switch sent
// back down the host's link, is a note at the host saying what an arrow
// would (it had no arrow, and was not drawn at all), and where it was
// lost.
func TestSelfFrame(t *testing.T) {
	tr := &sim.Trace{}
	ev := func(at sim.Time, node, kind, link, psn string, extra ...sim.Field) {
		tr.Add(sim.Event{Time: at, Node: node, Kind: sim.Kind(kind), QPN: 0x12, HasQPN: true,
			Fields: append([]sim.Field{{Key: "link", Value: link}, {Key: "op", Value: "RC_SEND_ONLY"}, {Key: "psn", Value: psn}}, extra...)})
	}
	ev(0, "a", "frame-tx", "a->sw", "1")
	ev(1000, "sw", "frame-tx", "sw->a", "1")
	ev(2000, "a", "frame-rx", "sw->a", "1")
	ev(3000, "a", "frame-drop", "a->sw", "2", sim.Field{Key: "why", Value: "dropped by rule 1: drop psn=2"}, sim.Field{Key: "rule", Value: "1"})
	out := text(t, tr, ladder.Options{Width: 60})
	ls := strings.Split(out, "\n")
	require.Equal(t, []string{"time", "a"}, strings.Fields(ls[0]), out)
	rowIndex(t, ls, 1, "↺ SEND_ONLY psn=1")
	rowIndex(t, ls, 1, "↺ SEND_ONLY psn=2", "✗ (rule 1)")
	assert.NotContains(t, out, "▶", out)
	var svg strings.Builder
	require.NoError(t, ladder.SVG(&svg, tr, ladder.Options{}, "self"))
	assert.Contains(t, svg.String(), "↺ SEND_ONLY psn=1")
}

// TestReceiverDrop: a frame that arrived and that its receiver's NIC
// threw away (rx-drop at the instant of its frame-rx) says so on its
// arrow, with why; an rx-drop at another instant marks nothing.
func TestReceiverDrop(t *testing.T) {
	tr := &sim.Trace{}
	ev := func(at sim.Time, node, kind, link, psn string) {
		tr.Add(sim.Event{Time: at, Node: node, Kind: sim.Kind(kind), QPN: 0x11, HasQPN: true,
			Fields: []sim.Field{{Key: "link", Value: link}, {Key: "op", Value: "RC_SEND_ONLY"}, {Key: "psn", Value: psn}}})
	}
	ev(0, "a", "frame-tx", "a->b", "1")
	ev(1000, "b", "frame-rx", "a->b", "1")
	tr.Add(sim.Event{Time: 1000, Node: "b", Kind: "rx-drop", QPN: 0x11, HasQPN: true, Fields: []sim.Field{{Key: "why", Value: "qp-state"}}})
	ev(2000, "a", "frame-tx", "a->b", "2")
	ev(3000, "b", "frame-rx", "a->b", "2")
	tr.Add(sim.Event{Time: 3500, Node: "b", Kind: "rx-drop", Fields: []sim.Field{{Key: "why", Value: "malformed"}}})
	out := text(t, tr, ladder.Options{Width: 100})
	ls := strings.Split(out, "\n")
	rowIndex(t, ls, 1, "SEND_ONLY psn=1 · dropped by b: qp-state", "▶")
	i := rowIndex(t, ls, 1, "SEND_ONLY psn=2", "▶")
	assert.NotContains(t, ls[i], "dropped", out)
	// In colour the dropped frame is red, the other one not.
	cout := text(t, tr, ladder.Options{Width: 100, Color: true})
	cls := strings.Split(cout, "\n")
	assert.Contains(t, cls[rowIndex(t, cls, 1, "dropped by b")], "\x1b[31m", "a frame its receiver dropped is red")
	assert.NotContains(t, cls[rowIndex(t, cls, 1, "psn=2")], "\x1b[31m")

	// A frame a arrives from b at the instant a's own looped frame,
	// to another QP, is dropped: the loop is marked, not the arrow
	// (the reviewer's case); an rx-drop naming another QP than the
	// arrival before it marks nothing.
	tr = &sim.Trace{}
	tr.Add(sim.Event{Time: 0, Node: "b", Kind: "frame-tx", QPN: 0x11, HasQPN: true,
		Fields: []sim.Field{{Key: "link", Value: "b->a"}, {Key: "op", Value: "RC_SEND_ONLY"}, {Key: "psn", Value: "200"}}})
	tr.Add(sim.Event{Time: 1000, Node: "a", Kind: "frame-rx", QPN: 0x11, HasQPN: true,
		Fields: []sim.Field{{Key: "link", Value: "b->a"}, {Key: "op", Value: "RC_SEND_ONLY"}, {Key: "psn", Value: "200"}}})
	tr.Add(sim.Event{Time: 1000, Node: "a", Kind: "frame-loop", QPN: 0x13, HasQPN: true,
		Fields: []sim.Field{{Key: "op", Value: "RC_SEND_ONLY"}, {Key: "psn", Value: "5000"}}})
	tr.Add(sim.Event{Time: 1000, Node: "a", Kind: "rx-drop", QPN: 0x13, HasQPN: true, Fields: []sim.Field{{Key: "why", Value: "qp-state"}}})
	tr.Add(sim.Event{Time: 2000, Node: "b", Kind: "frame-tx", QPN: 0x11, HasQPN: true,
		Fields: []sim.Field{{Key: "link", Value: "b->a"}, {Key: "op", Value: "RC_SEND_ONLY"}, {Key: "psn", Value: "201"}}})
	tr.Add(sim.Event{Time: 3000, Node: "a", Kind: "frame-rx", QPN: 0x11, HasQPN: true,
		Fields: []sim.Field{{Key: "link", Value: "b->a"}, {Key: "op", Value: "RC_SEND_ONLY"}, {Key: "psn", Value: "201"}}})
	tr.Add(sim.Event{Time: 3000, Node: "a", Kind: "rx-drop", QPN: 0x99, HasQPN: true, Fields: []sim.Field{{Key: "why", Value: "no-qp"}}})
	out = text(t, tr, ladder.Options{Width: 120, Nodes: []string{"a", "b"}})
	ls = strings.Split(out, "\n")
	i = rowIndex(t, ls, 1, "SEND_ONLY psn=200")
	assert.NotContains(t, ls[i], "dropped", out)
	rowIndex(t, ls, 1, "↺ RC_SEND_ONLY psn=5000 looped back ✗ dropped by a: qp-state")
	i = rowIndex(t, ls, 1, "SEND_ONLY psn=201")
	assert.NotContains(t, ls[i], "dropped", out)
}
