package nic

import "github.com/rocesim/rocesim/wire"

// What a device would take in silence: input a driver whose port is far
// away (procfabric's daemon) may hold back and hand over later, in order
// and before any other input, with the device ending as it would have
// and nothing it sends or completes moving in time.
//
//  1. TxSlack (ready.go): tx-dones that free nothing a QP waits for.
//  2. RxSlack: the middle packets of a message a RC QP is receiving. A
//     SEND_MIDDLE or RDMA_WRITE_MIDDLE in sequence, a full path MTU of
//     payload, no AckReq, is placed and counted and nothing else: no
//     ACK, no completion, no event. Anything else the QP might do with
//     it (a NAK for a gap, a length error past the buffer or the RETH's
//     length, an R_Key gone, REMOTE_WRITE taken away, a request held
//     behind a READ reply) is ruled out when the slack is counted, and
//     cannot come about later: the QP changes only with other input,
//     which ends the slack, or with a verb (a program thread's while
//     another waits runs before the held input is applied: procfabric's
//     documentation says what that moves). The
//     driver holding the frames must hold only frames the device will
//     take: one the device drops (a bad ICRC, a foreign P_Key) leaves
//     the expected PSN where it was (procfabric's quietFrame).
//
// The candidates are the QPs that last received requests (rxRecent), so
// that counting the slack never scans the device's QPs.

// rxRecentN is how many of the QPs that last received a request RxSlack
// looks at (a program streaming into more QPs at once wakes for the
// others' frames as before).
const rxRecentN = 4

// noteRx records that QP n received a request (most recent first).
func (d *Device) noteRx(n uint32) {
	r := &d.rxRecent
	if r[0] == n {
		return
	}
	i := 1
	for i < rxRecentN-1 && r[i] != n {
		i++
	}
	copy(r[1:i+1], r[:i])
	r[0] = n
}

// RxSlack appends to b what the device would take in silence now: for
// each of the QPs that last received requests and is in the middle of
// a message, the run of middle packets that may still come before its
// last.
func (d *Device) RxSlack(b []wire.PacketRun) []wire.PacketRun {
	for _, n := range d.rxRecent {
		if n == 0 {
			continue
		}
		if s, ok := d.rxSlack(d.qpByNum(n)); ok {
			b = append(b, s)
		}
	}
	return b
}

// rxSlack is RxSlack for one QP.
func (d *Device) rxSlack(qp *QP) (wire.PacketRun, bool) {
	if !d.liveQP(qp) || qp.init.Type != QPTypeRC || qp.resp.busy() {
		return wire.PacketRun{}, false
	}
	// RTR before its first packet raises COMM_EST on the next one.
	if !(qp.state == QPStateRTS || qp.state.receives() && qp.resp.commEst) {
		return wire.PacketRun{}, false
	}
	r := &qp.resp
	m := uint64(qp.pmtu())
	s := wire.PacketRun{QPN: qp.num, PSN: r.epsn, Len: int(m)}
	switch {
	case r.inWrite:
		if r.wmr == nil || r.off >= r.wlen {
			return wire.PacketRun{}, false
		}
		if mr, _, _ := d.mem.remote(qp, r.wkey, r.wva+r.off, r.wlen-r.off, AccessRemoteWrite); mr == nil ||
			qp.attr.QPAccessFlags&AccessRemoteWrite == 0 {
			return wire.PacketRun{}, false // the next packet is refused: a NAK (placeWrite, opEnabled)
		}
		s.Opcode, s.Count = wire.OpRCWriteMiddle, int((r.wlen-r.off)/m)
	case r.inSend:
		w := r.rwqe
		if w == nil || w.status != WCSuccess || r.off >= w.length || !d.memStillValid(qp, w.sges, intoMemory) {
			return wire.PacketRun{}, false
		}
		s.Opcode, s.Count = wire.OpRCSendMiddle, int((w.length-r.off)/m)
	}
	return s, s.Count > 0
}
