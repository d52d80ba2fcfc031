package nic

import (
	"errors"

	"github.com/rocesim/rocesim/sim"
	"github.com/rocesim/rocesim/wire"
)

// Receive takes one frame from the wire (IBTA Annex A17 receive rules, as
// rxe's rxe_rcv and hdr_check apply them), in order:
//
//  1. Frames that do not decode or fail their ICRC are dropped (rxe drops
//     them silently; rocesim counts them by wire error code, RxErrors):
//     truncated, not RoCE, bad IP header, checksum, lengths or pad, a
//     reserved or unknown opcode (rxe drops opcode 0x1f silently: seen on
//     real rxe, differential scenario reserved-opcode), TVer not 0, bad
//     ICRC. One exception: a request whose only fault is a payload its
//     opcode does not carry (a READ request or an atomic with data,
//     wire.Packet.StrayPayload) goes on to its QP, whose responder judges
//     it: rxe's hdr_check and responder never look at a READ request's
//     length and answer it (seen on real rxe: differential scenarios
//     read-request-with-payload, and atomic-request-with-payload, where
//     the responder's R_Key check is what refuses it); the spec profile
//     NAKs it invalid
//     request (checkSequence). A response with a stray payload is still
//     dropped here (rxe's behaviour for it is not checked).
//  2. A frame for another IP address is dropped (rxe_chk_dgid), and so
//     is one for a multicast group none of the device's QPs is attached
//     to (a port's filter would not have taken it). A datagram for the
//     multicast QPN is counted in rcvd_pkts and offered to each QP
//     attached to the group of its destination (receiveMcast).
//  3. hdr_check: the destination QP exists; the opcode is of the QP's
//     transport; the QP is ready for it (a request in RTR, RTS, SQD or
//     SQE, a response in RTS, SQD or SQE: rxe's resp.state and
//     req.state); the P_Key matches the port's only one, 0xFFFF
//     (IBTA §9.6.1.1 C9-42, rxe's pkey_match); a UD datagram carries the
//     QP's Q_Key (§9.6.1.2 C9-49). Each failure is a silent drop, counted
//     by reason (RxDrops; rxe counts the last two in the port's
//     bad_pkey_cntr and qkey_viol_cntr).
//  4. Only then is the frame counted in rcvd_pkts (as rxe counts it) and
//     handed to its QP's responder (requests) or completer (responses).
//     An RC request that arrives while the responder is still building
//     a READ's responses is held (a copy) and run after them, as rxe
//     queues it in req_pkts; past maxHeld held requests it is dropped
//     (DropBusy).
//
// So every frame given to Receive lands in exactly one of RxErrors,
// RxDrops and rcvd_pkts.
func (d *Device) Receive(now sim.Time, frame []byte) { d.receive(now, frame, false) }

// ReceiveSealed is Receive for a frame whose ICRC is known to be right:
// built by a device's wire.Encode and carried unchanged (a fabric's
// sealed frame: sim/fabric.Node.SendSealed). Step 1 then skips the CRC
// over the frame, the same answer for less work; everything else is as
// for Receive.
func (d *Device) ReceiveSealed(now sim.Time, frame []byte) { d.receive(now, frame, true) }

func (d *Device) receive(now sim.Time, frame []byte, sealed bool) {
	// The decoded view is the call's own, on its stack, which stays in
	// the core's first-level cache: in a large world a device is cold at
	// each frame, and a view kept in the device (424 bytes) cost seven
	// cache misses to write (issue 20). Nothing keeps it past the call
	// (a held request keeps a copy of the frame).
	var rx wire.Packet
	p := &rx
	var err error
	if sealed {
		err = p.DecodeHeaders(frame)
	} else {
		err = p.Decode(frame)
	}
	if !forQP(err, p) {
		d.rxError(now, err)
		return
	}
	if dst := p.Dst().Unmap(); !d.isLocal(dst) && !(dst.IsMulticast() && d.inGroup(dst)) {
		// A group no QP here is attached to is not the device's either:
		// a real port's filter would not have taken the frame.
		d.dropRx(now, p, DropNotLocal)
		return
	}
	if p.Info.Transport == wire.TransportCNP {
		d.counters.Add(CounterRcvdPkts, 1)
		return
	}
	if p.BTH.DestQP() == wire.GSIQPN {
		d.receiveMAD(now, p)
		return
	}
	if p.BTH.DestQP() == wire.MulticastQPN {
		// rxe counts it once, then offers it to the group's QPs.
		d.counters.Add(CounterRcvdPkts, 1)
		d.receiveMcast(now, p)
		return
	}
	qp := d.qpByNum(p.BTH.DestQP())
	if why, ok := d.checkHeaders(qp, p); !ok {
		d.dropRx(now, p, why)
		return
	}
	if p.Info.Kind.IsRequest() && qp.init.Type == QPTypeRC && qp.resp.busy() {
		// The responder is answering a READ: the request waits its turn.
		if !d.holdRequest(qp, frame) {
			d.dropRx(now, p, DropBusy)
			return
		}
		d.counters.Add(CounterRcvdPkts, 1)
		return
	}
	d.counters.Add(CounterRcvdPkts, 1)
	switch {
	case qp.init.Type == QPTypeUD:
		d.receiveUD(now, qp, p)
	case p.Info.Kind.IsRequest():
		if qp.init.Type == QPTypeRC {
			d.noteRx(qp.num)
		}
		d.receiveRequest(now, qp, p)
	default:
		d.receiveResponse(now, qp, p)
	}
}

// checkHeaders applies step 3 of Receive to a decoded frame for qp (nil
// if no QP has its number): false and the reason if it is dropped.
func (d *Device) checkHeaders(qp *QP, p *wire.Packet) (RxDrop, bool) {
	if qp == nil {
		return DropNoQP, false
	}
	t := p.Info.Transport
	switch qp.init.Type {
	case QPTypeRC:
		if t != wire.TransportRC {
			return DropQPType, false
		}
	case QPTypeUC:
		if t != wire.TransportUC || !p.Info.Kind.IsRequest() {
			return DropQPType, false
		}
	case QPTypeUD:
		if t != wire.TransportUD {
			return DropQPType, false
		}
	}
	switch qp.state {
	case QPStateRTS, QPStateSQD, QPStateSQE:
	case QPStateRTR:
		if !p.Info.Kind.IsRequest() {
			return DropQPState, false // rxe: req.state is not ready before RTS
		}
	default:
		return DropQPState, false // RESET, INIT, ERR
	}
	if !wire.PKeyMatch(p.BTH.PKey(), wire.DefaultPKey) {
		return DropPKey, false
	}
	if qp.init.Type == QPTypeUD && p.DETH.QKey() != qp.attr.QKey {
		return DropQKey, false
	}
	return 0, true
}

// RxDrop is why a frame that decoded was dropped before any QP processed
// it (see Receive, step 3).
type RxDrop uint8

// Reasons for RxDrops.
const (
	DropNotLocal RxDrop = iota // IP destination is not the device's (rxe_chk_dgid)
	DropNoQP                   // no QP has the destination QPN
	DropQPType                 // the opcode's transport is not the QP's
	DropQPState                // the QP is not ready for the packet (RESET, INIT, ERR; a response in RTR)
	DropPKey                   // P_Key mismatch (the port's bad_pkey_cntr)
	DropQKey                   // UD Q_Key mismatch (the port's qkey_viol_cntr)
	DropBusy                   // the responder already holds maxHeld requests while it answers a READ
	DropBadMAD                 // a datagram for QP1 that is not one 256-byte MAD (gsi.go)
	numRxDrops
)

// NumRxDrops is the number of RxDrop reasons.
const NumRxDrops = int(numRxDrops)

var rxDropNames = [numRxDrops]string{"not-local", "no-qp", "qp-type", "qp-state", "bad-pkey", "bad-qkey", "responder-busy", "bad-mad"}

// String returns a short kebab-case name for the reason.
func (r RxDrop) String() string {
	if r < numRxDrops {
		return rxDropNames[r]
	}
	return "RxDrop(" + itoa(int(r)) + ")"
}

// rxError counts a frame the device dropped as it came in, because it
// did not decode or failed its ICRC (Receive, step 1), and traces it:
// silent on the wire, so only the trace (the ladder's "dropped by") shows
// it.
func (d *Device) rxError(now sim.Time, err error) {
	d.rxErrors[errCode(err)]++
	if !d.trace.Enabled() {
		return
	}
	why := "malformed"
	if err != nil {
		why = err.Error()
	}
	d.trace.Add(sim.Event{Time: now, Node: d.cfg.Node, Kind: "rx-drop", Fields: []sim.Field{{Key: "why", Value: why}}})
}

// dropRx counts a frame that decoded but that no QP took (Receive, steps
// 2 and 3; a bad MAD for QP1), by why, and traces it, but for a group
// frame the host's filter refuses: a switch floods a group's frames to
// every port, and a host refusing one is routine, not news.
func (d *Device) dropRx(now sim.Time, p *wire.Packet, why RxDrop) {
	d.rxDrops[why]++
	if !d.trace.Enabled() || why == DropNotLocal && p.Dst().IsMulticast() {
		return
	}
	d.trace.Add(sim.Event{Time: now, Node: d.cfg.Node, QPN: p.BTH.DestQP(), HasQPN: true, Kind: "rx-drop",
		Fields: []sim.Field{{Key: "why", Value: why.String()}}})
}

// grhLen is the GRH area at the start of every UD receive buffer (IBTA
// §11.4.1.2): RoCE v2 fills it with the IP header (IPv4 in its last 20
// bytes, as rxe does).
const grhLen = 40

// receiveUD handles a UD packet: Q_Key check, a receive WQE, the GRH area
// then the payload.
func (d *Device) receiveUD(now sim.Time, qp *QP, p *wire.Packet) {
	// Receive has checked the QP's state and the Q_Key.
	w := d.takeRecv(qp)
	if w == nil {
		return // UD has no RNR: the datagram is lost
	}
	n := uint64(len(p.Payload))
	wc := WC{WRID: w.wrid, Opcode: WCRecv, ByteLen: uint32(grhLen + n), QPNum: qp.num,
		SrcQP: p.DETH.SrcQP(), WCFlags: WCFlagGRH}
	// A buffer deregistered since the post is found only now, as rxe's
	// copy_data finds it (the RC responder's memStillValid).
	gone := w.status == WCSuccess && !d.memStillValid(qp, w.sges, intoMemory)
	if d.cfg.Profile == ProfileRXE && (w.status != WCSuccess || gone || grhLen+n > w.length) {
		// rxe 6.1 copies a datagram with the same send_data_in as RC and
		// UC (placeSend): a buffer too small, or one it cannot write, is a
		// malformed WQE, class A: the receive completes with LOC_QP_OP_ERR
		// and the QP goes to ERR.
		why := w.why
		switch {
		case gone:
			why = wcReason{kind: whyRecvDeregistered}
		case w.status == WCSuccess:
			why = wcReason{kind: whyDatagramTooLong, n: grhLen + n, max: w.length}
			if w.length >= grhLen {
				// rxe copies the GRH area first, and that copy fits; the
				// payload's copy is the one refused (seen on real rxe).
				var grh [grhLen]byte
				d.mem.scatter(w.sges, 0, udGRH(&grh, p))
			}
		}
		d.failRecv(now, qp, w, WCLocQPOpErr, why)
		d.toError(now, qp) // rxe raises no event (see remoteError)
		return
	}
	if w.status != WCSuccess || gone || grhLen+n > w.length {
		wc.Status, wc.ByteLen = WCLocLenErr, 0
		switch {
		case w.status != WCSuccess:
			wc.Status = w.status
		case gone:
			wc.Status = WCLocProtErr
		}
	} else {
		var grh [grhLen]byte
		d.mem.scatter(w.sges, 0, udGRH(&grh, p))
		d.mem.scatter(w.sges, grhLen, p.Payload)
		if p.ImmDt != nil {
			wc.ImmData, wc.WCFlags = p.ImmDt.Value(), wc.WCFlags|WCFlagWithImm
		}
		// rxe's do_complete counts every successful receive CQE,
		// whatever the QP type.
		d.counters.Add(CounterRDMARecvs, 1)
	}
	qp.doneRecv()
	d.completeRecv(now, qp, wc, solicitationOf(p.BTH.SolicitedEvent()))
}

// udGRH fills grh with the 40-byte GRH area a UD receive starts with:
// the IPv4 header in its last 20 bytes (RoCE v2 over IPv4), or the IPv6
// header. The caller's array keeps it off the heap.
func udGRH(grh *[grhLen]byte, p *wire.Packet) []byte {
	if p.IPv4 != nil {
		copy(grh[20:], p.IPv4)
	} else {
		copy(grh[:], p.IPv6)
	}
	return grh[:]
}

// forQP reports whether a decoded frame goes on to its QP: it decoded
// cleanly, or it is a request whose only fault is a payload its opcode
// does not carry (rxe's hdr_check never looks at a READ request's length;
// the responder decides, see wire.Packet.StrayPayload). Receive and the
// requests held behind a READ (runHeld) both ask it, so a held request is
// judged as it was when it arrived.
func forQP(err error, p *wire.Packet) bool {
	// A stray payload is the only fault forgiven: Decode checks the ICRC
	// of such a frame too and then reports ErrICRC, which drops it as
	// rxe_rcv's rxe_icrc_check does every packet whose ICRC is wrong.
	return err == nil || (!errors.Is(err, wire.ErrICRC) && p.StrayPayload() && p.Info.Kind.IsRequest())
}
