package nic

import (
	"strconv"

	"github.com/rocesim/rocesim/sim"
	"github.com/rocesim/rocesim/wire"
)

// The requester turns send WQEs into request packets (IBTA §9.4, rxe's
// rxe_req.c). In order, for the WQE at next:
//
//  1. Stop if the QP is not in RTS, if an RNR wait is running, or if the
//     WQE failed at post time (it completes with its error when it
//     reaches the head of the queue).
//  2. FENCE waits until no READ or ATOMIC is outstanding; a READ or
//     ATOMIC waits while max_rd_atomic of them are.
//  3. The first time, the WQE gets its first PSN and its packet count:
//     one per path MTU of payload for SEND and WRITE (at least one), one
//     request taking as many PSNs as the response has packets for READ,
//     one for an atomic.
//  4. Packets go out FIRST/MIDDLE/LAST or ONLY, an RC packet only while
//     its PSN is at most 128 past the oldest unacknowledged one (rxe's
//     window, maxUnackedPSNs); the last packet of a message, and one
//     more than 65 packets after the last that asked (rxe), asks for an
//     ACK.
//  5. RC arms the ACK timer; UC completes a WQE once its last packet is
//     sent, UD once its only packet is.
//
// Retransmission (go-back-N) rewinds next and pkt to a PSN inside an
// already-started WQE and runs the same steps again. A packet's PSN is
// always its WQE's first PSN plus its index, so a WQE acknowledged while
// it waited to be sent again is simply skipped.

type requester struct {
	psn   wire.PSN // the first PSN of the next new WQE
	next  int      // index (from the head of the SQ) of the WQE being sent
	pkt   uint32   // next packet of that WQE
	noAck int      // packets sent since the last AckReq (rxe's noack_pkts)
	// waitPSN: the requester stopped at the window of unacknowledged
	// PSNs (rxe's wait_psn); a response that moves the window runs it.
	waitPSN    bool
	rdAtomic   int      // READ/ATOMIC WQEs sent and not completed
	retries    int      // timeout retries left
	rnrRetries int      // RNR retries left
	ackDue     sim.Time // ACK timeout deadline, sim.Never when nothing is unacknowledged
	// idleDue (rxe profile) is when the retransmit timer, still running
	// after everything was acknowledged, expires; 0 for none. rxe never
	// stops its timer: it expires idle, or fires for what was sent since
	// (see armAckTimer).
	idleDue  sim.Time
	rnrUntil sim.Time    // end of the RNR wait, sim.Never when not waiting
	nRetrans int         // go-back-N rounds so far, for capture notes
	highest  wire.PSN    // one past the highest PSN ever sent
	why      retryReason // why the last go-back-N round started, for notes
	rounds   *roundLog   // where each go-back-N round ended, for notes (made at the first round: 208 bytes an idle QP does without)
	// A go-back-N round started by a NAK, an implied NAK or the ACK
	// timeout, and no valid response since (rxe's comp.started_retry):
	// another NAK or implied NAK is ignored until one comes, so that one
	// loss costs one retry (IBTA vol. 1 §9.7.5.1.4); the ACK timeout
	// retries regardless.
	startedRetry bool
	// The highest PSN a positive ACK has covered: WQEs after a READ or
	// atomic complete with it once the READ or atomic does.
	acked    wire.PSN
	hasAcked bool
	armed    bool // retry counters loaded
	// The QP's retry_cnt, rnr_retry and timeout (copies of attr's, set
	// with them by apply): every message reloads the budgets and arms
	// the ACK timer, and here they share the requester's cache line
	// rather than costing a miss on the attributes' last line (issue 20).
	retryCnt, rnrRetry, timeout uint8
}

// sentAny reports whether any packet is out and not yet acknowledged: a
// WQE sent whole and not completed, or part of the one being sent (one
// the window of unacknowledged PSNs, or the port, stopped mid-message).
func (r *requester) sentAny() bool { return r.next > 0 || r.pkt > 0 }

// sending returns how many WQEs from the head of the send queue have
// packets out: those sent whole, and the one being sent if it has begun.
func (r *requester) sending(qp *QP) int {
	if r.pkt > 0 {
		return min(r.next+1, qp.sq.size)
	}
	return r.next
}

// pmtu returns the QP's path MTU in bytes.
func (qp *QP) pmtu() int {
	if b := qp.attr.PathMTU.Bytes(); b > 0 {
		return b
	}
	return 1024
}

// packets returns how many PSNs a WQE of this length takes.
func (qp *QP) packets(w *sendWQE) uint32 {
	switch w.wr.Opcode {
	case WRAtomicCmpAndSwp, WRAtomicFetchAndAdd:
		return 1
	}
	if qp.init.Type == QPTypeUD || w.length == 0 {
		return 1
	}
	m := uint64(qp.pmtu())
	return uint32((w.length + m - 1) / m)
}

// lastPSN returns the last PSN a started WQE uses.
func (w *sendWQE) lastPSN() wire.PSN { return w.firstPSN.Add(w.npkts - 1) }

// requesterRun sends what the send queue allows now.
func (d *Device) requesterRun(now sim.Time, qp *QP) {
	r := &qp.req
	r.waitPSN = false
	if !r.armed {
		r.retries, r.rnrRetries = int(r.retryCnt), int(r.rnrRetry)
		r.ackDue, r.rnrUntil, r.armed = sim.Never, sim.Never, true
		d.retime(qp)
	}
	if qp.state != QPStateRTS || r.rnrUntil != sim.Never {
		return
	}
	for r.next < qp.sq.size {
		if d.skbOut(qp) >= inflightHigh {
			d.block(qp) // TxDone resumes it
			break
		}
		w := qp.sq.at(r.next)
		if w.done && w.status == WCSuccess {
			// Acknowledged while it waited to be sent again.
			r.next++
			r.pkt = 0
			continue
		}
		if w.done && w.status != WCSuccess {
			// It completes with its error once it is the oldest WQE.
			if r.next == 0 {
				d.sendQueueError(now, qp)
				return
			}
			break
		}
		rdAtomic := w.wr.Opcode.isRdAtomic()
		if !w.started {
			if w.wr.Flags&SendFence != 0 && r.rdAtomic > 0 {
				break
			}
			if rdAtomic && r.rdAtomic >= max(1, int(qp.attr.MaxRdAtomic)) {
				break
			}
			if isLocalOp(w.wr.Opcode) {
				// rxe_do_local_ops: a BIND_MW or LOCAL_INV runs when the
				// requester reaches it, without waiting for what is in
				// flight before it, and takes no PSN; it completes in
				// order, once everything before it has.
				w.started, w.firstPSN, w.npkts, w.done = true, r.psn, 0, true
				if why := d.localOp(qp, w); why.kind != whyNone {
					// Failed: it completes with its status once it is the
					// oldest, and nothing after it is sent (rxe moves the
					// requester to its error state).
					w.why = why
					continue
				}
				r.next++
				r.pkt = 0
				if qp.sq.at(0) == w {
					d.completeHead(now, qp)
					if qp.state != QPStateRTS {
						return
					}
				}
				continue
			}
			w.started, w.firstPSN, w.npkts = true, r.psn, qp.packets(w)
			r.psn = r.psn.Add(w.npkts)
			r.pkt = 0
			if rdAtomic {
				r.rdAtomic++
			}
		}
		if rdAtomic {
			if d.pastWindow(qp, w.firstPSN.Add(r.pkt)) {
				break
			}
			d.sendRdAtomic(now, qp, w)
		} else {
			for r.pkt < w.npkts {
				if d.pastWindow(qp, w.firstPSN.Add(r.pkt)) {
					break
				}
				if d.skbOut(qp) >= inflightHigh {
					d.block(qp) // resume mid-message when TxDone frees room
					break
				}
				if !d.sendPacket(now, qp, w, r.pkt) {
					return
				}
				r.pkt++
			}
			if r.pkt < w.npkts {
				break
			}
		}
		r.next++
		r.pkt = 0
		switch qp.init.Type {
		case QPTypeUD, QPTypeUC:
			// No ACKs: the WQE is done once sent.
			w.done = true
		}
	}
	if qp.init.Type != QPTypeRC {
		d.completeHead(now, qp)
		return
	}
	// rxe arms the timer with the first packet it sends (update_state),
	// so a WQE stopped mid-message (at the window) has it running too.
	if r.sentAny() && r.ackDue == sim.Never {
		if r.idleDue > now {
			r.ackDue = r.idleDue // rxe: the timer is still pending, not re-armed
			d.retime(qp)
		} else {
			d.armAckTimer(now, qp)
		}
		r.idleDue = 0
	}
}

// pastWindow reports whether an RC packet of PSN psn must wait for the
// window of unacknowledged PSNs to move (maxUnackedPSNs), and marks the
// requester waiting if so. The head WQE's first PSN bounds the oldest
// unacknowledged one from below, so the exact PSN is computed only when
// that many are in flight.
func (d *Device) pastWindow(qp *QP, psn wire.PSN) bool {
	if qp.init.Type != QPTypeRC {
		return false
	}
	if head := qp.sq.at(0); head.started && psn.Diff(head.firstPSN) <= maxUnackedPSNs {
		return false
	}
	if psn.Diff(d.oldestUnacked(qp)) <= maxUnackedPSNs {
		return false
	}
	qp.req.waitPSN = true
	return true
}

// armAckTimer (re)starts the local ACK timeout (Profile.ACKTimeout; 0
// meaning none, IBTA §9.7.6.1.3, and in rxe_qp_from_attr a timer never
// armed), or stops it when nothing is outstanding.
//
// rxe arms its retrans_timer when it sends a packet and the timer is not
// pending (rxe_req.c update_state), pushes it out after each response
// that leaves something unacknowledged (rxe_comp.c COMPST_EXIT's
// mod_timer), and never stops it. So under the rxe profile the timer
// stopped here keeps its expiry in idleDue, and a request sent before
// then is retried at that expiry, not one timeout after it was sent:
// measured on real rxe (conformance scenarios timer-idle-gap and
// timer-ack-loss-stream, conformance/README.md).
func (d *Device) armAckTimer(now sim.Time, qp *QP) {
	r := &qp.req
	if r.timeout == 0 || !r.sentAny() {
		if d.cfg.Profile == ProfileRXE && r.ackDue != sim.Never {
			r.idleDue = r.ackDue
		}
		r.ackDue = sim.Never
		d.retime(qp)
		return
	}
	r.ackDue = now.Add(d.cfg.Profile.ACKTimeout(r.timeout))
	d.retime(qp)
}

// rxeJiffy is one tick of the kernel clock rxe's timers run on: 4 ms,
// Debian 6.1's CONFIG_HZ=250 (the conformance kernel's config).
const rxeJiffy = sim.Second / 250

// ACKTimeout is how long the requester waits for a response under
// profile p before it retries, for the 5-bit local ACK timeout code
// (timeout 0, no timer, is the caller's business).
//
// ProfileSpec waits the IBTA's 4.096 µs × 2^timeout (vol. 1 §9.7.6.1.3,
// C9-140). rxe converts that to jiffies once, when the QP is modified
// (rxe_qp.c rxe_qp_from_attr: nsecs_to_jiffies, which at HZ=250 divides
// by 4 ms and rounds down, and 1 jiffy where that gives 0), and arms its
// retrans_timer for that many jiffies (mod_timer in rxe_req.c
// update_state). So ProfileRXE waits whole jiffies: timeout 14 (67.1 ms)
// is 16 jiffies, 64 ms; every timeout up to 10 (4.2 ms) is 1 jiffy, 4 ms.
// The phase of the jiffy clock when the timer is armed is unknowable, so
// the model takes the full count of jiffies; real rxe fires up to one
// jiffy earlier, or later by the timer wheel's slack (measured in
// conformance/README.md).
func (p Profile) ACKTimeout(code uint8) sim.Duration {
	exact := sim.Duration(4096) << (code & 31)
	if p != ProfileRXE {
		return exact
	}
	return max(exact/rxeJiffy, 1) * rxeJiffy
}

// sendPacket sends packet i of a SEND or WRITE WQE; false if the WQE
// failed instead (its memory was deregistered since the post).
func (d *Device) sendPacket(now sim.Time, qp *QP, w *sendWQE, i uint32) bool {
	var f wire.Frame
	av, dest := &qp.attr.AHAttr, qp.attr.DestQPNum
	if qp.init.Type == QPTypeUD {
		av, dest = &w.wr.AH.Attr, w.wr.RemoteQPN
	}
	d.frameTo(&f, qp, av, dest)
	m := uint64(qp.pmtu())
	off := uint64(i) * m
	n := min(m, w.length-off)
	if qp.init.Type == QPTypeUD {
		n = w.length
	}
	if !w.isInline && !d.memStillValid(qp, w.wr.SGList, fromMemory) {
		d.localProtErr(now, qp, w)
		return false
	}
	pos := segment(i == 0, i == w.npkts-1)
	last := pos.Ends()
	f.BTH.Opcode = requestOpcode(qp.init.Type, w.wr.Opcode, pos)
	// The payload goes straight into the frame's buffer, where Encode
	// finds it in place: one copy of the message's bytes, not two.
	buf := d.outbox.buffer()
	at := f.PayloadOffset()
	payload := buf[at : at+int(n)]
	if w.isInline {
		copy(payload, w.inline[off:off+n])
	} else {
		d.mem.gatherAt(w.wr.SGList, off, payload)
	}
	f.Payload = payload
	f.BTH.PSN = w.firstPSN.Add(i)
	info := f.BTH.Opcode.Info()
	if info.Has(wire.HasRETH) {
		f.RETH = wire.RETHFields{VA: w.wr.RemoteAddr, RKey: w.wr.RKey, DMALength: uint32(w.length)}
	}
	if info.Has(wire.HasImmDt) {
		f.ImmDt = w.wr.ImmData
	}
	if info.Has(wire.HasIETH) {
		f.IETH = w.wr.InvalidateRKey
	}
	if info.Has(wire.HasDETH) {
		f.DETH = wire.DETHFields{QKey: w.wr.RemoteQKey, SrcQP: qp.num}
		if w.wr.RemoteQKey&0x80000000 != 0 {
			f.DETH.QKey = qp.attr.QKey // a Q_Key with the high bit set means "use the QP's"
		}
	}
	if last && w.wr.Flags&SendSolicited != 0 {
		f.BTH.SolicitedEvent = true
	}
	if d.cfg.TestHooks != nil && d.skipRetransmit(qp, f.BTH.PSN) {
		d.outbox.free = append(d.outbox.free, buf)
		return true // the planted bug: believed sent, never sent
	}
	if qp.init.Type == QPTypeRC {
		if last || qp.req.noAck > maxPktPerAck {
			f.BTH.AckReq = true
			qp.req.noAck = 0
		} else {
			qp.req.noAck++
		}
	}
	mark := qp.resendMark(f.BTH.PSN)
	note := qp.req.noteFor(f.BTH.PSN, d.explaining())
	if note == "" && d.cfg.Annotate {
		b := append(d.noteBuf[:0], "wr "...)
		b = strconv.AppendUint(b, w.wr.WRID, 10)
		b = append(append(append(b, ' '), w.wr.Opcode.name()...), ", packet "...)
		b = strconv.AppendInt(b, int64(i)+1, 10)
		b = strconv.AppendInt(append(b, " of "...), int64(w.npkts), 10)
		note = d.note(b)
	}
	d.emitIn(buf, qp, &f, note, mark)
	return true
}

// sendRdAtomic sends the request of a READ or an atomic, from the first
// PSN not yet answered (a READ retried mid-response asks only for the
// rest, as rxe does).
func (d *Device) sendRdAtomic(now sim.Time, qp *QP, w *sendWQE) {
	var f wire.Frame
	d.frameTo(&f, qp, &qp.attr.AHAttr, qp.attr.DestQPNum)
	f.BTH.AckReq = true
	qp.req.noAck = 0
	switch w.wr.Opcode {
	case WRRDMARead:
		skip := uint64(qp.req.pkt) * uint64(qp.pmtu())
		f.BTH.Opcode = wire.OpRCReadRequest
		f.BTH.PSN = w.firstPSN.Add(qp.req.pkt)
		f.RETH = wire.RETHFields{VA: w.wr.RemoteAddr + skip, RKey: w.wr.RKey, DMALength: uint32(w.length - skip)}
	case WRAtomicCmpAndSwp:
		f.BTH.Opcode = wire.OpRCCompareSwap
		f.BTH.PSN = w.firstPSN
		f.AtomicETH = wire.AtomicETHFields{VA: w.wr.RemoteAddr, RKey: w.wr.RKey, SwapAddData: w.wr.Swap, CompareData: w.wr.CompareAdd}
	default:
		f.BTH.Opcode = wire.OpRCFetchAdd
		f.BTH.PSN = w.firstPSN
		f.AtomicETH = wire.AtomicETHFields{VA: w.wr.RemoteAddr, RKey: w.wr.RKey, SwapAddData: w.wr.CompareAdd}
	}
	mark := qp.resendMark(f.BTH.PSN)
	note := qp.req.noteFor(f.BTH.PSN, d.explaining())
	if note == "" && d.cfg.Annotate {
		b := strconv.AppendUint(append(d.noteBuf[:0], "wr "...), w.wr.WRID, 10)
		b = append(append(b, ' '), w.wr.Opcode.name()...)
		if w.wr.Opcode == WRRDMARead {
			b = strconv.AppendUint(append(b, " of "...), uint64(w.length), 10)
			b = strconv.AppendInt(append(b, " bytes ("...), int64(w.npkts), 10)
			b = append(b, " responses)"...)
		}
		note = d.note(b)
	}
	d.emit(qp, &f, note, mark)
	// A READ's responses use all its PSNs: they count as sent.
	if end := w.firstPSN.Add(w.npkts); qp.req.highest.Less(end) {
		qp.req.highest = end
	}
}

// frameMark is what OutFrame says of a resent request (its
// retransmission round and when the QP was connected) or of an RNR NAK;
// zero for any other frame.
type frameMark struct {
	round       uint32
	connectedAt sim.Time
	rnrNAK      bool // an RNR NAK the responder sends (OutFrame.RNRNAK)
}

// resendMark returns the OutFrame marks of a request with PSN psn about
// to be sent (before noteFor records it): if psn was sent before, the
// current go-back-N round and when the QP was connected (read only then:
// it lies on the QP's last line, which a first transmission leaves
// alone).
func (qp *QP) resendMark(psn wire.PSN) frameMark {
	r := &qp.req
	if !psn.Less(r.highest) {
		return frameMark{}
	}
	return frameMark{round: uint32(max(r.nRetrans, 1)), connectedAt: qp.connectedAt}
}

// noteFor records that psn is being sent and returns the capture note: a
// PSN below the highest ever sent is a retransmission, numbered by how
// many go-back-N rounds have covered it (not by rounds of the QP: a PSN
// first sent during round 2 and resent in round 3 is on its first).
// Without explain it only records, and returns "".
func (r *requester) noteFor(psn wire.PSN, explain bool) string {
	if psn.Less(r.highest) {
		if !explain {
			return ""
		}
		return "retransmission #" + strconv.Itoa(r.rounds.covering(psn, r.nRetrans)) + " of PSN " + psn.String() + " " + r.why.String()
	}
	r.highest = psn.Next()
	return ""
}

// roundLog remembers, for recent go-back-N rounds, the PSN each round
// resends up to (the highest PSN sent when it began), so that a
// retransmission can say how many times its PSN has been resent. Rounds
// start at the oldest unacknowledged PSN, which never goes back, and
// their ends never go back either, so the rounds that cover a PSN are the
// latest ones, from the first whose end lies beyond it. Rounds ending at
// the same PSN share an entry; only the latest roundLogSize distinct ends
// are kept, enough for every window a test builds (older ends would only
// make a count too low).
type roundLog struct {
	end   [roundLogSize]wire.PSN // one past the last PSN each round resends
	first [roundLogSize]int      // the first round with that end
	n     int                    // entries in use
	head  int                    // index of the oldest entry
}

const roundLogSize = 16

// start records that round number round begins, resending below end.
func (l *roundLog) start(round int, end wire.PSN) {
	if l.n > 0 && l.end[(l.head+l.n-1)%roundLogSize] == end {
		return
	}
	if l.n == roundLogSize {
		l.head = (l.head + 1) % roundLogSize
		l.n--
	}
	i := (l.head + l.n) % roundLogSize
	l.end[i], l.first[i] = end, round
	l.n++
}

// covering returns how many of the rounds so far (current is the latest)
// have resent psn: the rounds from the first whose end lies beyond psn.
func (l *roundLog) covering(psn wire.PSN, current int) int {
	if l == nil {
		return current // no round yet
	}
	for k := 0; k < l.n; k++ {
		i := (l.head + k) % roundLogSize
		if psn.Less(l.end[i]) {
			return current - l.first[i] + 1
		}
	}
	return current
}

// requestOpcode picks the BTH opcode for the packet at pos of a WR.
func requestOpcode(t QPType, op WROpcode, pos wire.Position) wire.Opcode {
	var base wire.Opcode
	switch t {
	case QPTypeUC:
		base = ucOpcodeBase
	case QPTypeUD:
		if op == WRSendWithImm {
			return wire.OpUDSendOnlyImm
		}
		return wire.OpUDSendOnly
	}
	switch op {
	case WRSend, WRSendWithImm:
		return base + rcSendOps.pick(pos, op)
	case WRSendWithInv:
		// RC only (post refuses it elsewhere): the IETH rides on the last
		// packet (IBTA §9.4.1.1, SEND LAST/ONLY WITH INVALIDATE).
		switch pos {
		case wire.PosOnly:
			return wire.OpRCSendOnlyWithInvalidate
		case wire.PosLast:
			return wire.OpRCSendLastWithInvalidate
		}
		return rcSendOps.pick(pos, op)
	case WRRDMAWrite, WRRDMAWriteWithImm:
		return base + rcWriteOps.pick(pos, op)
	}
	return base
}

// ucOpcodeBase is what a UC opcode adds to the RC one of the same
// operation: the OpCode's top three bits name the transport (IBTA vol. 1
// §9.2: RC 000, UC 001).
const ucOpcodeBase = wire.OpUCSendFirst - wire.OpRCSendFirst

// segmentOps are the RC opcodes of one message kind by the packet's place
// in the message; the UC ones are the same plus 0x20.
type segmentOps struct {
	first, middle, last, lastImm, only, onlyImm wire.Opcode
}

var (
	rcSendOps = segmentOps{wire.OpRCSendFirst, wire.OpRCSendMiddle, wire.OpRCSendLast,
		wire.OpRCSendLastImm, wire.OpRCSendOnly, wire.OpRCSendOnlyImm}
	rcWriteOps = segmentOps{wire.OpRCWriteFirst, wire.OpRCWriteMiddle, wire.OpRCWriteLast,
		wire.OpRCWriteLastImm, wire.OpRCWriteOnly, wire.OpRCWriteOnlyImm}
)

// pick is the opcode of the packet at pos of a message of opcode op,
// which says whether the message carries an immediate (on its last
// packet).
func (s *segmentOps) pick(pos wire.Position, op WROpcode) wire.Opcode {
	imm := op.hasImm()
	switch {
	case pos == wire.PosOnly && imm:
		return s.onlyImm
	case pos == wire.PosOnly:
		return s.only
	case pos == wire.PosFirst:
		return s.first
	case pos == wire.PosLast && imm:
		return s.lastImm
	case pos == wire.PosLast:
		return s.last
	}
	return s.middle
}

// isLocalOp reports whether a send opcode acts on the local device only
// (rxe's WR_LOCAL_OP_MASK): no packet, no PSN.
func isLocalOp(op WROpcode) bool { return op == WRBindMW || op == WRLocalInv }

// localOp executes a BIND_MW or LOCAL_INV WQE and sets its status; it
// returns why it failed, or no reason. A failed bind completes with
// MW_BIND_ERR, a failed invalidation with LOC_QP_OP_ERR (rxe_do_local_ops).
func (d *Device) localOp(qp *QP, w *sendWQE) wcReason {
	if w.wr.Opcode == WRBindMW {
		why := memCheck(d.mem.bindMW(qp, &w.wr.BindMW))
		if why.kind != whyNone {
			w.status = WCMWBindErr
		}
		return why
	}
	if why := d.mem.invalidate(w.wr.InvalidateRKey); why != "" {
		w.status = WCLocQPOpErr
		return wcReason{kind: whyLocalInvalidate, detail: why}
	}
	return wcReason{}
}
