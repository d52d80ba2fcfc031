package nic

import (
	"strconv"

	"github.com/rocesim/rocesim/sim"
)

// traceState records a QP state change.
func (d *Device) traceState(now sim.Time, qp *QP, from, to QPState) {
	if !d.trace.Enabled() || from == to {
		return
	}
	d.trace.Add(sim.Event{Time: now, Node: d.cfg.Node, QPN: qp.num, HasQPN: true, Kind: "qp-state",
		Fields: []sim.Field{{Key: "from", Value: from.String()}, {Key: "to", Value: to.String()}}})
}

// traceCompletion records a completion.
func (d *Device) traceCompletion(now sim.Time, qp *QP, wc WC, why wcReason) {
	if !d.trace.Enabled() {
		return
	}
	f := []sim.Field{{Key: "wr_id", Value: strconv.FormatUint(wc.WRID, 10)},
		{Key: "status", Value: wc.Status.Name()}, {Key: "opcode", Value: wc.Opcode.String()}}
	if wc.Status == WCSuccess {
		f = append(f, sim.Field{Key: "byte_len", Value: strconv.FormatUint(uint64(wc.ByteLen), 10)})
	}
	if wc.WCFlags&WCFlagWithImm != 0 {
		f = append(f, sim.Field{Key: "imm", Value: "0x" + strconv.FormatUint(uint64(wc.ImmData), 16)})
	}
	if why.kind != whyNone {
		f = append(f, sim.Field{Key: "why", Value: why.String()})
	}
	d.trace.Add(sim.Event{Time: now, Node: d.cfg.Node, QPN: qp.num, HasQPN: true, Kind: "completion", Fields: f})
}

// traceTimer records a timer firing.
func (d *Device) traceTimer(now sim.Time, qp *QP, which string) {
	if !d.trace.Enabled() {
		return
	}
	d.trace.Add(sim.Event{Time: now, Node: d.cfg.Node, QPN: qp.num, HasQPN: true, Kind: "timer",
		Fields: []sim.Field{{Key: "timer", Value: which}}})
}

// traceMessageDrop records a message the responder dropped without a
// completion: nothing else shows that it arrived.
func (d *Device) traceMessageDrop(now sim.Time, qp *QP, why msgDropReason) {
	if !d.trace.Enabled() {
		return
	}
	d.trace.Add(sim.Event{Time: now, Node: d.cfg.Node, QPN: qp.num, HasQPN: true, Kind: "message-drop",
		Fields: []sim.Field{{Key: "why", Value: why.String()}}})
}
