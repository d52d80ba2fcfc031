package verbstest

import (
	"fmt"
	"strings"

	"github.com/rocesim/rocesim/faults"
	"github.com/rocesim/rocesim/sim/fabric"
	"github.com/rocesim/rocesim/wire"
)

// Frame is a frame the fabric recorded: one per frame per link it
// started onto, and one where a fault (or a full queue, or the MTU)
// dropped it. The capture file holds the same frames with the same
// comments. The embedded record gives its time, link and direction,
// sender and addressee, whether this is its first hop (a filter without
// link= selects only those, so a frame crossing a switch counts once),
// its transmission number (tx=), whether it was dropped here, its
// comment, and its bytes (Frame, the test's own copy).
type Frame struct {
	fabric.FrameRecord
	// Packet is the frame decoded (headers and payload), or nil if it is
	// not RoCE v2.
	Packet *wire.Packet
}

// String is one line: time, direction, packet, transmission and comment.
func (f *Frame) String() string {
	var b strings.Builder
	fmt.Fprintf(&b, "%v %s", f.Time, f.Dir)
	if p := f.Packet; p != nil {
		fmt.Fprintf(&b, " %s qp=0x%x psn=%d", p.Info.Name, p.BTH.DestQP(), uint32(p.BTH.PSN()))
		if p.AETH != nil {
			fmt.Fprintf(&b, " aeth=%v", p.AETH.Syndrome())
		}
		if f.Tx > 1 {
			fmt.Fprintf(&b, " tx=%d", f.Tx)
		}
	} else {
		fmt.Fprintf(&b, " non-RoCE %d bytes", len(f.Frame))
	}
	if f.Comment != "" {
		fmt.Fprintf(&b, " (%s)", f.Comment)
	}
	return b.String()
}

// observe keeps a copy of every frame the fabric records.
func (w *World) observe(r *fabric.FrameRecord) {
	if len(w.frames) == w.maxFrames {
		w.overflow++
		return
	}
	f := Frame{FrameRecord: *r}
	f.Frame, f.Comment = append([]byte(nil), r.Frame...), strings.Clone(r.Comment)
	var p wire.Packet
	if p.DecodeHeaders(f.Frame) == nil {
		f.Packet = &p
	}
	w.frames = append(w.frames, f)
}

// Frames returns the frames recorded so far that filter selects, in the
// order they were recorded. A filter is written with the match keys of a
// fault plan (package faults): "class=nak src=b", "psn=2 tx=2",
// "op=RC_RDMA_WRITE_MIDDLE dir=server->client", "link=a-sw". Without
// link= it selects a frame on its first hop only; "" selects every frame
// once (but a frame dropped after its first hop, at a switch's egress by
// a down link or the MTU, is recorded on that later hop: select it with
// link=). The counting keys (nth= prob= first=) have no meaning here and
// are refused. A bad filter fails the test, and so does a frame log that
// overflowed Options.MaxFrames.
func (w *World) Frames(filter string) []Frame {
	w.t.Helper()
	return w.frameList(fmt.Sprintf("Frames(%q)", filter), filter)
}

// frameList selects frames for call (the method the test called, for
// messages).
func (w *World) frameList(call, filter string) []Frame {
	w.t.Helper()
	m, err := faults.ParseMatch(filter)
	if err != nil {
		w.fatalf("verbstest: %s: frame filter: %v", call, err)
	}
	if w.overflow > 0 {
		w.fatalf("verbstest: %s: the frame log kept the first %d frames and missed %d more; raise Options.MaxFrames",
			call, w.maxFrames, w.overflow)
	}
	var out []Frame
	for i := range w.frames {
		f := &w.frames[i]
		hop := faults.Hop{Link: f.Link, From: f.From, To: f.To, First: f.First, Tx: f.Tx}
		if m.Matches(f.Time, &hop, f.Packet) {
			out = append(out, *f)
		}
	}
	return out
}

// listFrames formats frames for a failure message, at most 20.
func listFrames(fs []Frame) string {
	var b strings.Builder
	for i := range fs {
		if i == 20 {
			fmt.Fprintf(&b, "\n  ... and %d more", len(fs)-20)
			break
		}
		b.WriteString("\n  ")
		b.WriteString(fs[i].String())
	}
	return b.String()
}
