package nic

import (
	"github.com/rocesim/rocesim/sim"
	"github.com/rocesim/rocesim/wire"
)

// Receive takes one frame from the wire (IBTA Annex A17 receive rules, as
// rxe applies them): frames that do not decode or fail their ICRC are
// dropped silently (rxe does not even count them), then the packet goes
// to its QP's responder (requests) or completer (responses).
func (d *Device) Receive(now sim.Time, frame []byte) {
	p := &d.rx
	if err := p.Decode(frame); err != nil {
		d.rxErrors[errCode(err)]++
		return
	}
	if !d.isLocal(p.Dst().Unmap()) {
		return
	}
	d.counters.Add(CounterRcvdPkts, 1)
	if p.Info.Transport == wire.TransportCNP {
		return
	}
	qp := d.qpByNum(p.BTH.DestQP())
	if qp == nil {
		return
	}
	switch {
	case qp.init.Type == QPTypeUD:
		if p.Info.Transport == wire.TransportUD {
			d.receiveUD(now, qp, p)
		}
	case qp.init.Type == QPTypeUC && p.Info.Transport == wire.TransportUC,
		qp.init.Type == QPTypeRC && p.Info.Transport == wire.TransportRC:
		if p.Info.Kind.IsRequest() {
			d.receiveRequest(now, qp, p)
		} else if qp.init.Type == QPTypeRC {
			d.receiveResponse(now, qp, p)
		}
	}
}

// grhLen is the GRH area at the start of every UD receive buffer (IBTA
// §11.4.1.2): RoCE v2 fills it with the IP header (IPv4 in its last 20
// bytes, as rxe does).
const grhLen = 40

// receiveUD handles a UD packet: Q_Key check, a receive WQE, the GRH area
// then the payload.
func (d *Device) receiveUD(now sim.Time, qp *QP, p *wire.Packet) {
	switch qp.state {
	case QPStateRTR, QPStateRTS, QPStateSQD, QPStateSQE:
	default:
		return
	}
	if p.DETH.QKey() != qp.attr.QKey {
		d.qkeyDrops++
		return
	}
	w := d.takeRecv(qp)
	if w == nil {
		return // UD has no RNR: the datagram is lost
	}
	n := uint64(len(p.Payload))
	wc := WC{WRID: w.wrid, Opcode: WCRecv, ByteLen: uint32(grhLen + n), QPNum: qp.num,
		SrcQP: p.DETH.SrcQP(), WCFlags: WCFlagGRH}
	if w.status != WCSuccess || grhLen+n > w.length {
		wc.Status, wc.ByteLen = WCLocLenErr, 0
		if w.status != WCSuccess {
			wc.Status = w.status
		}
	} else {
		var grh [grhLen]byte
		if p.IPv4 != nil {
			copy(grh[20:], p.IPv4)
		} else {
			copy(grh[:], p.IPv6)
		}
		d.mem.scatter(w.sges, 0, grh[:])
		d.mem.scatter(w.sges, grhLen, p.Payload)
		if p.ImmDt != nil {
			wc.ImmData, wc.WCFlags = p.ImmDt.Value(), wc.WCFlags|WCFlagWithImm
		}
	}
	qp.doneRecv()
	d.completeRecv(now, qp, wc, p.BTH.SolicitedEvent())
}
