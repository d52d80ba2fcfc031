package fabric

import (
	"strconv"

	"github.com/rocesim/rocesim/sim"
	"github.com/rocesim/rocesim/wire"
)

// record traces a frame the fabric did not carry on (dropped: kind, with
// its cause) and writes it to the taps at the sender's side with the
// reason as its comment, so the capture shows it where it vanished.
func (f *Fabric) record(d *direction, b *frameBuf, kind sim.Kind, cause sim.DropCause, why string, rule int) {
	f.pool.setFault(b, why)
	f.writeTaps(d, b, f.pool.comment(b), true)
	if !f.trace.Enabled() {
		return
	}
	extra := []sim.Field{cause.Field()}
	if rule > 0 {
		extra = append(extra, sim.Field{Key: "rule", Value: strconv.Itoa(rule)})
	}
	f.traceFrame(d, b, kind, why, extra...)
}

func (f *Fabric) writeTaps(d *direction, b *frameBuf, comment string, dropped bool) {
	for _, t := range d.tapIDs {
		// A capture that fails to write must not change the simulation;
		// the writer reports its error when it is closed.
		_ = t.tap.WriteFrame(int64(f.sched.Now()), t.id, b.bytes(), comment)
	}
	f.observeFrame(d, b, comment, dropped, false)
}

// observeFrame gives the observers the record of frame b on d, or, when
// looped, of b turned round by its node instead of leaving by d
// (loopHandler).
func (f *Fabric) observeFrame(d *direction, b *frameBuf, comment string, dropped, looped bool) {
	first := d.node == b.from
	toFirst := first && f.obsFirst != nil && !f.quietFirst[b.from]
	if f.observe == nil && !toFirst {
		return
	}
	dir := d.name
	if looped {
		dir = f.loopH.dir(d)
	}
	r := &f.obsRec
	*r = FrameRecord{Time: f.sched.Now(), Link: d.linkName, Dir: dir, From: f.names[b.from], To: f.name(b.to),
		FromNode: b.from, ToNode: b.to, First: first, Tx: int(b.tx), Dropped: dropped, Copy: int(b.copy),
		Comment: comment, Frame: b.bytes(), Looped: looped}
	if toFirst {
		f.obsFirst(r)
	}
	if f.observe != nil {
		f.observe(r)
	}
}

// traceFrame adds a frame event: at the sending side of d for tx, drops
// and faults, at the receiving side for frame-rx.
func (f *Fabric) traceFrame(d *direction, b *frameBuf, kind sim.Kind, why string, extra ...sim.Field) {
	if !f.trace.Enabled() {
		return
	}
	node := d.from.owner
	if kind == "frame-rx" {
		node = d.to.owner
	}
	note := ""
	if kind == "frame-tx" {
		note = f.pool.note(b)
	}
	e := FrameEvent(f.sched.Now(), node, kind, d.name, b.bytes(), int(b.tx), note, why)
	e.Fields = append(e.Fields, extra...)
	f.trace.Add(e)
}

// FrameEvent returns the trace event of a frame of kind crossing link
// (named "from->to") at node: its QPN, the fields link, op, psn, ackreq,
// aeth, msn and tx (a retransmission) a RoCE v2 frame has, cm (REQ, REP,
// RTU, ...) for a connection manager's MAD to QP1, len, note and why when
// not empty. Package ladder draws frames from these fields;
// rocesim switch (package rswitch) traces the real frames it forwards
// with it, so its ladder is drawn as the fabric's.
func FrameEvent(now sim.Time, node string, kind sim.Kind, link string, frame []byte, tx int, note, why string) sim.Event {
	e := sim.Event{Time: now, Node: node, Kind: kind}
	e.Fields = append(e.Fields, sim.Field{Key: "link", Value: link})
	var p wire.Packet
	if p.DecodeHeaders(frame) == nil {
		e.QPN, e.HasQPN = p.BTH.DestQP(), true
		e.Fields = append(e.Fields,
			sim.Field{Key: "op", Value: p.Info.Name},
			sim.Field{Key: "psn", Value: p.BTH.PSN().String()})
		if p.BTH.AckReq() {
			e.Fields = append(e.Fields, sim.Field{Key: "ackreq", Value: "1"})
		}
		if p.AETH != nil {
			e.Fields = append(e.Fields, sim.Field{Key: "aeth", Value: p.AETH.Syndrome().String()},
				sim.Field{Key: "msn", Value: strconv.FormatUint(uint64(p.AETH.MSN()), 10)})
		}
		if tx > 1 {
			e.Fields = append(e.Fields, sim.Field{Key: "tx", Value: strconv.Itoa(tx)})
		}
		if p.BTH.DestQP() == wire.GSIQPN {
			if a := wire.MAD(p.Payload).CMAttr(); a != 0 {
				e.Fields = append(e.Fields, sim.Field{Key: "cm", Value: a.String()})
			}
		}
	}
	e.Fields = append(e.Fields, sim.Field{Key: "len", Value: strconv.Itoa(len(frame))})
	if note != "" {
		e.Fields = append(e.Fields, sim.Field{Key: "note", Value: note})
	}
	if why != "" {
		e.Fields = append(e.Fields, sim.Field{Key: "why", Value: why})
	}
	return e
}
