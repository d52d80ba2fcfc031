package nic

import (
	"encoding/binary"
	"strconv"

	"github.com/rocesim/rocesim/sim"
	"github.com/rocesim/rocesim/wire"
)

// The responder handles request packets (IBTA §9.7.5, rxe's rxe_resp.c),
// in order:
//
//  1. State: packets are processed in RTR, RTS, SQD and SQE; in RESET,
//     INIT and ERR they are dropped silently.
//  2. PSN (RC): the expected PSN is processed; an earlier one is a
//     duplicate (re-acknowledged, a READ replayed, an atomic answered from
//     its saved result, never executed twice); a later one means packets
//     were lost: one NAK (PSN sequence error, carrying the expected PSN)
//     per gap, later packets dropped silently until the gap fills.
//     (UC: a gap drops the rest of the message, resuming at the next
//     FIRST or ONLY.)
//  3. Opcode sequence and lengths: MIDDLE and LAST only inside a message
//     of their kind, FIRST and ONLY only outside one; FIRST and MIDDLE
//     carry exactly one path MTU, LAST 1..PMTU; the operation is enabled
//     in the QP's access flags (rxe's check_op_valid). Violations: NAK
//     invalid request.
//  4. Execute: SEND places data in the receive WQE (RNR NAK if there is
//     none); WRITE checks the R_Key at FIRST/ONLY and writes; READ and
//     ATOMIC check the R_Key and answer. R_Key failures: NAK remote
//     access error; a READ's responses are built as the port takes them
//     (readReply), and requests that arrive meanwhile wait for them; a
//     WRITE whose payload is not its RETH length, or a
//     misaligned atomic: NAK invalid request; a SEND longer than its
//     receive buffer: see placeSend. Each moves the QP to ERR (UC: no
//     NAK; a refused WRITE is dropped and the QP stays).
//  5. Complete the receive at the end of a SEND (or WRITE with
//     immediate); MSN counts messages, READ requests and atomics.
//  6. ACK when the packet asked for one (the ACK carries its PSN: it
//     acknowledges everything up to it).

type responder struct {
	epsn    wire.PSN // expected PSN
	msn     uint32   // message sequence number (24 bits)
	nakSent bool     // a PSN sequence NAK is out for the current gap
	commEst bool     // COMM_EST raised
	// The message in progress.
	inSend, inWrite bool
	ucDrop          bool // UC: dropping the rest of a broken message
	ucBroken        bool // UC, rxe: a message broke mid-way; the next start is dropped too
	ucStuck         bool // UC, rxe: a WRITE broke mid-way; every later message is dropped
	rwqe            *recvWQE
	srqWQE          *recvWQE // a WQE taken from an SRQ (made with the QP if it has one)
	off             uint64   // bytes of the message placed so far
	wva             uint64   // WRITE: target address of the next byte
	wmr             *MR
	wkey            uint32 // WRITE: the R_Key of its first packet, checked again for every later one
	wlen            uint64
	// rd is what answering READs and atomics needs, made at the first
	// one: 160 bytes an idle QP, or one that only SENDs and WRITEs, does
	// without (issue 20: at most 1 KiB of heap per idle QP).
	rd *rdState
}

// rdState is a responder's READ and atomic state.
type rdState struct {
	// The responder resources (IBTA §9.7.5.1.7, rxe's resp.resources): the
	// last max_dest_rd_atomic READs and atomics answered, so a duplicate
	// can be answered again without executing anything twice.
	res  []rdResource
	resN int
	// The READ being answered, and the requests that arrived meanwhile
	// (copies of their frames, run in order once it is out).
	reply    readReply
	held     [][]byte
	heldHead int
	// rdOut (spec profile): for each READ or atomic answered whose
	// responses have not all left the port, the QP's txBuilt after its
	// last response; see tooManyRdAtomic.
	rdOut ring[uint64]
}

// rdState returns the responder's READ and atomic state, made on first use.
func (r *responder) rdState() *rdState {
	if r.rd == nil {
		r.rd = new(rdState)
	}
	return r.rd
}

// replying reports whether a READ reply is being built.
func (r *responder) replying() bool { return r.rd != nil && r.rd.reply.active }

// rdResource is one answered READ or atomic.
type rdResource struct {
	used        bool
	kind        rdKind
	first, last wire.PSN // the PSNs of the READ's responses (first == last for an atomic)
	va          uint64   // READ: the address of its first byte
	length      uint64   // READ: its length
	orig        uint64   // atomic: the value the target held before
}

// keep records a resource, replacing the oldest once max_dest_rd_atomic
// are held.
func (r *responder) keep(qp *QP, x rdResource) {
	s := r.rdState()
	if len(s.res) < max(1, int(qp.attr.MaxDestRdAtomic)) {
		s.res = append(s.res, rdResource{})
	}
	s.res[s.resN%len(s.res)] = x
	s.resN++
}

// rdKind says what a responder resource answered: a READ or an atomic.
type rdKind uint8

const (
	rdRead rdKind = iota
	rdAtomicOp
)

// find returns the resource of that kind whose PSNs hold psn, or nil.
func (r *responder) find(psn wire.PSN, kind rdKind) *rdResource {
	if r.rd == nil {
		return nil
	}
	for i := range r.rd.res {
		x := &r.rd.res[i]
		if x.used && x.kind == kind && psn.InRange(x.first, x.last) {
			return x
		}
	}
	return nil
}

// respState names the responder's states (rxe's RESPST_*), one per step
// of the flow above. receiveRequest runs them in a loop until respDone.
type respState uint8

const (
	respCheckQPState  respState = iota // 1: is the QP accepting requests?
	respCheckPSN                       // 2: expected, duplicate or out of sequence
	respDuplicate                      // 2: answer a duplicate without executing it
	respOutOfSequence                  // 2: one NAK per gap, later packets dropped
	respCheckOpSeq                     // 3: opcode sequence and lengths
	respExecute                        // 4: place data, answer READ/ATOMIC
	respUpdate                         // 5: advance the expected PSN and the MSN
	respAcknowledge                    // 6: ACK when asked
	respDone
)

var respStateNames = [...]string{"check-qp-state", "check-psn", "duplicate", "out-of-sequence",
	"check-op-seq", "execute", "update", "acknowledge", "done"}

// String returns the state's name, for traces and messages.
func (s respState) String() string { return respStateNames[s] }

// receiveRequest handles a request packet for qp.
func (d *Device) receiveRequest(now sim.Time, qp *QP, p *wire.Packet) {
	for st := respCheckQPState; st != respDone; {
		st = d.respond(now, qp, p, st)
	}
}

// flushesSends reports whether a QP in state s completes its send work
// requests with WR_FLUSH_ERR instead of executing them: ERR, and SQE (the
// send queue in error, IBTA vol. 1 §10.3.1).
func (s QPState) flushesSends() bool { return s == QPStateErr || s == QPStateSQE }

// receives reports whether a QP in state s processes requests: RTR,
// RTS, SQD and SQE (IBTA §10.3.1; rxe's resp.state ready).
func (s QPState) receives() bool {
	switch s {
	case QPStateRTR, QPStateRTS, QPStateSQD, QPStateSQE:
		return true
	}
	return false
}

// respond runs one responder state and returns the next.
func (d *Device) respond(now sim.Time, qp *QP, p *wire.Packet, st respState) respState {
	r := &qp.resp
	psn := p.BTH.PSN()
	switch st {
	case respCheckQPState:
		if !qp.state.receives() {
			return respDone // RESET, INIT, ERR: dropped silently
		}
		if qp.state == QPStateRTR && !r.commEst {
			// IBTA §11.6.3: the first packet a QP receives in RTR.
			r.commEst = true
			d.raise(AsyncEvent{Type: EventCommEst, QP: qp, Time: now})
		}
		if qp.init.Type == QPTypeUC {
			d.receiveUC(now, qp, p)
			return respDone
		}
		return respCheckPSN

	case respCheckPSN:
		switch diff := psn.Diff(r.epsn); {
		case diff > 0:
			return respOutOfSequence
		case diff < 0:
			return respDuplicate
		}
		r.nakSent = false
		return respCheckOpSeq

	case respOutOfSequence:
		if !r.nakSent { // once per gap, as rxe counts it
			d.counters.Add(CounterOutOfSeqRequest, 1)
			r.nakSent = true
			note := ""
			if d.explaining() {
				note = "NAK: PSN " + r.epsn.String() + " expected, PSN " + psn.String() + " received"
			}
			d.sendAck(qp, wire.NAKSyndrome(wire.NAKPSNSequenceError), r.epsn, note)
		}
		return respDone

	case respDuplicate:
		d.counters.Add(CounterDuplicateRequest, 1)
		d.duplicate(now, qp, p)
		return respDone

	case respCheckOpSeq:
		if !d.checkSequence(qp, p) || !opEnabled(qp, p) {
			d.remoteError(now, qp, wire.NAKInvalidRequest, psn, EventQPReqErr)
			return respDone
		}
		return respExecute

	case respExecute:
		switch p.Info.Kind {
		case wire.KindSend:
			if !d.placeSend(now, qp, p) {
				return respDone
			}
		case wire.KindWrite:
			if !d.placeWrite(now, qp, p) {
				return respDone
			}
		case wire.KindReadRequest:
			d.answerRead(now, qp, p, newRequest) // answers, and updates ePSN and MSN itself
			return respDone
		case wire.KindCompareSwap, wire.KindFetchAdd:
			d.answerAtomic(now, qp, p)
			return respDone
		default:
			return respDone
		}
		if qp.state == QPStateErr {
			return respDone // the receive completion overflowed its CQ: no ACK (rxe: RESPST_ERR_CQ_OVERFLOW)
		}
		return respUpdate

	case respUpdate:
		r.epsn = r.epsn.Next()
		if p.Info.Position.Ends() {
			r.msn = (r.msn + 1) & wire.PSNMask
		}
		return respAcknowledge

	case respAcknowledge:
		if p.BTH.AckReq() {
			d.sendAck(qp, wire.ACKSyndrome(wire.CreditsUnlimited), psn, "")
		}
		return respDone
	}
	panic("nic: responder in state " + st.String())
}

// checkSequence applies step 3 to an RC request.
func (d *Device) checkSequence(qp *QP, p *wire.Packet) bool {
	r := &qp.resp
	if p.StrayPayload() && d.cfg.Profile != ProfileRXE {
		// A READ request or an atomic that carries a payload: "payload
		// length not consistent with the opcode" is an invalid request
		// (IBTA vol. 1 §9.9.3, responder errors, class C). rxe never
		// looks at it and answers the request (Receive, step 1).
		return false
	}
	info := p.Info
	n := len(p.Payload)
	m := qp.pmtu()
	in := r.inSend && info.Kind == wire.KindSend || r.inWrite && info.Kind == wire.KindWrite
	switch info.Position {
	case wire.PosFirst:
		return !r.inSend && !r.inWrite && n == m
	case wire.PosMiddle:
		return in && n == m
	case wire.PosLast:
		return in && n >= 1 && n <= m
	default:
		if r.inSend || r.inWrite {
			return false
		}
		return info.Kind == wire.KindReadRequest || info.Kind == wire.KindCompareSwap || info.Kind == wire.KindFetchAdd || n <= m
	}
}

// opEnabled reports whether the QP's qp_access_flags let a peer run the
// packet's operation at all: RDMA READ needs REMOTE_READ, WRITE
// REMOTE_WRITE, an atomic REMOTE_ATOMIC. rxe (check_op_valid) refuses one
// that is not enabled as an unsupported operation, NAK invalid request
// (class C: REM_INV_REQ_ERR at the requester), before it looks at the
// length or the R_Key, so even a zero-length WRITE is refused; libibverbs
// documents REM_INV_REQ_ERR for "the operation is not supported by this
// receive queue (qp_access_flags)". A failing R_Key is the other error,
// NAK remote access (placeWrite, answerRead, answerAtomic).
func opEnabled(qp *QP, p *wire.Packet) bool {
	var need AccessFlags
	switch p.Info.Kind {
	case wire.KindReadRequest:
		need = AccessRemoteRead
	case wire.KindWrite:
		need = AccessRemoteWrite
	case wire.KindCompareSwap, wire.KindFetchAdd:
		need = AccessRemoteAtomic
	}
	return qp.attr.QPAccessFlags&need == need
}

// takeRecv takes the next receive WQE from the SRQ or the receive queue.
func (d *Device) takeRecv(qp *QP) *recvWQE {
	if s := qp.init.SRQ; s != nil {
		w, ok := s.take(qp.dev, qp.resp.srqWQE)
		if !ok {
			return nil
		}
		return w
	}
	if qp.rq.empty() {
		return nil
	}
	return qp.rq.at(0)
}

// doneRecv retires the receive WQE in use.
func (qp *QP) doneRecv() {
	if qp.init.SRQ == nil {
		qp.rq.shift()
	}
	qp.resp.rwqe = nil
}

// placeSend puts a SEND packet's payload in the receive buffer; false if
// the packet was refused (RNR, length or protection error).
func (d *Device) placeSend(now sim.Time, qp *QP, p *wire.Packet) bool {
	r := &qp.resp
	pos := p.Info.Position
	if pos.Starts() {
		w := d.takeRecv(qp)
		if w == nil {
			if qp.init.Type == QPTypeRC {
				d.rnr(qp, p.BTH.PSN())
			} else {
				r.ucDrop = pos == wire.PosFirst // UC: no receive, the message is lost
			}
			return false
		}
		r.rwqe, r.off = w, 0
		r.inSend = pos == wire.PosFirst
	}
	w := r.rwqe
	if w.status != WCSuccess || r.off+uint64(len(p.Payload)) > w.length {
		// A receive buffer the device cannot write is a malformed WQE:
		// NAK remote operational error. A message longer than the buffer
		// is a length error, NAK invalid request, in the IBTA (class C)
		// and in rxe's RESPST_ERR_LENGTH; but rxe 6.1 never gets there:
		// its copy_data answers an overflow with -EINVAL, which
		// send_data_in takes for a malformed WQE. So under rxe both
		// complete the receive with LOC_QP_OP_ERR and NAK remote
		// operational error (the requester sees REM_OP_ERR), on RC and
		// UC alike, and the QP goes to ERR (checked against real rxe:
		// conformance TestLongMessageMatchesRxe). The IBTA profile
		// completes with the local error itself, LOC_PROT_ERR or
		// LOC_LEN_ERR.
		st, why, nak := w.status, w.why, wire.NAKRemoteOperation
		if st == WCSuccess {
			st, why = WCLocLenErr, wcReason{kind: whyRecvTooShort, max: w.length}
			if d.cfg.Profile != ProfileRXE {
				nak = wire.NAKInvalidRequest
			}
		}
		if d.cfg.Profile == ProfileRXE {
			st = WCLocQPOpErr
		}
		d.failRecv(now, qp, w, st, why)
		d.remoteError(now, qp, nak, p.BTH.PSN(), EventQPFatal)
		return false
	}
	if !d.memStillValid(qp, w.sges, intoMemory) {
		// The receive buffer was deregistered while in use.
		d.failRecv(now, qp, w, WCLocProtErr, wcReason{kind: whyRecvDeregistered})
		d.remoteError(now, qp, wire.NAKRemoteOperation, p.BTH.PSN(), EventQPFatal)
		return false
	}
	d.mem.scatter(w.sges, r.off, p.Payload)
	r.off += uint64(len(p.Payload))
	if pos.Ends() {
		r.inSend = false
		if p.IETH != nil && !d.invalidateForSend(now, qp, w, p) {
			return false
		}
		wc := WC{WRID: w.wrid, Opcode: WCRecv, ByteLen: uint32(r.off), QPNum: qp.num, WCFlags: recvFlags(d.cfg.Profile)}
		if p.ImmDt != nil {
			wc.ImmData, wc.WCFlags = p.ImmDt.Value(), wc.WCFlags|WCFlagWithImm
		}
		if p.IETH != nil {
			wc.ImmData, wc.WCFlags = p.IETH.RKey(), wc.WCFlags|invalidatedFlag(d.cfg.Profile)
		}
		if qp.init.Type == QPTypeUD {
			wc.SrcQP, wc.WCFlags = p.DETH.SrcQP(), wc.WCFlags|WCFlagGRH
		}
		qp.doneRecv()
		d.counters.Add(CounterRDMARecvs, 1)
		d.completeRecv(now, qp, wc, solicitationOf(p.BTH.SolicitedEvent()))
	}
	return true
}

// placeWrite writes a WRITE packet's payload; false if refused.
func (d *Device) placeWrite(now sim.Time, qp *QP, p *wire.Packet) bool {
	r := &qp.resp
	pos := p.Info.Position
	if pos.Starts() {
		va, rkey, length := p.RETH.VA(), p.RETH.RKey(), uint64(p.RETH.DMALength())
		mr, ok, _ := d.mem.remote(qp, rkey, va, length, AccessRemoteWrite)
		if !ok || qp.attr.QPAccessFlags&AccessRemoteWrite == 0 {
			if qp.init.Type == QPTypeUC {
				// UC: the message is dropped, the QP stays (rxe: check_op_valid
				// drop_msg; an R_Key violation is class E, IBTA §9.9.3).
				r.ucDrop = pos == wire.PosFirst
				return false
			}
			d.remoteError(now, qp, wire.NAKRemoteAccess, p.BTH.PSN(), EventQPAccessErr)
			return false
		}
		r.wmr, r.wkey, r.wva, r.wlen, r.off = mr, rkey, va, length, 0
		r.inWrite = pos == wire.PosFirst
	}
	if n := r.off + uint64(len(p.Payload)); n > r.wlen || pos.Ends() && n != r.wlen {
		// The message must be exactly the RETH's DMA length: a packet past
		// it, or a last packet short of it (a pad count that lies), is a
		// length error, NAK invalid request (rxe's check_rkey:
		// RESPST_ERR_LENGTH, class C; UC drops the message).
		if qp.init.Type == QPTypeUC {
			r.inWrite, r.ucDrop = false, !pos.Ends()
			return false
		}
		d.remoteError(now, qp, wire.NAKInvalidRequest, p.BTH.PSN(), EventQPReqErr)
		return false
	}
	if p.ImmDt != nil {
		// WRITE with immediate consumes a receive WQE (RNR if none).
		w := d.takeRecv(qp)
		if w == nil {
			d.rnr(qp, p.BTH.PSN())
			return false
		}
		r.rwqe = w
	}
	if len(p.Payload) > 0 {
		mr := r.wmr
		if mr != nil && !pos.Starts() {
			// rxe's check_rkey runs for every packet of a WRITE, with the
			// R_Key and the next address of the first (qp->resp.rkey,
			// resp.va): a window invalidated or a region deregistered
			// since then refuses the rest of the message (seen on real
			// rxe: differential scenario mw-invalidated-mid-write).
			mr, _, _ = d.mem.remote(qp, r.wkey, r.wva+r.off, r.wlen-r.off, AccessRemoteWrite)
		}
		if mr == nil {
			// A zero-length WRITE FIRST (no MR checked) followed by data,
			// or the R_Key no longer valid mid-message.
			d.remoteError(now, qp, wire.NAKRemoteAccess, p.BTH.PSN(), EventQPAccessErr)
			return false
		}
		start := r.wva - mr.Addr + r.off
		d.mem.write(mr.buf[start:start+uint64(len(p.Payload))], p.Payload)
	}
	r.off += uint64(len(p.Payload))
	if pos.Ends() {
		r.inWrite = false
		if p.ImmDt != nil {
			w := r.rwqe
			qp.doneRecv()
			d.counters.Add(CounterRDMARecvs, 1) // as for a SEND: rxe counts every successful receive CQE
			d.completeRecv(now, qp, WC{WRID: w.wrid, Opcode: WCRecvRDMAWithImm, ByteLen: uint32(r.off),
				ImmData: p.ImmDt.Value(), WCFlags: recvFlags(d.cfg.Profile) | WCFlagWithImm, QPNum: qp.num}, solicitationOf(p.BTH.SolicitedEvent()))
		}
	}
	return true
}

// answerRead starts the READ response packets for a request (a replay
// of a duplicate: its PSN is already behind ePSN). readReplyRun builds
// them.
func (d *Device) answerRead(now sim.Time, qp *QP, p *wire.Packet, a arrival) {
	dup := a == duplicateRequest
	r := &qp.resp
	psn := p.BTH.PSN()
	va, rkey, length := p.RETH.VA(), p.RETH.RKey(), uint64(p.RETH.DMALength())
	if qp.attr.MaxDestRdAtomic == 0 || !dup && d.tooManyRdAtomic(qp) {
		d.remoteError(now, qp, wire.NAKInvalidRequest, psn, EventQPReqErr)
		return
	}
	mr, ok, _ := d.mem.remote(qp, rkey, va, length, AccessRemoteRead)
	if length > 0 && !ok {
		d.remoteError(now, qp, wire.NAKRemoteAccess, psn, EventQPAccessErr)
		return
	}
	m := uint64(qp.pmtu())
	npkts := uint32(max(1, (length+m-1)/m))
	midStart := false
	if dup {
		// A replay from the middle of the original READ continues its
		// response: MIDDLE packets, then LAST (rxe's replay state).
		x := r.find(psn, rdRead)
		midStart = x != nil && psn != x.first
	} else {
		r.msn = (r.msn + 1) & wire.PSNMask
		r.epsn = psn.Add(npkts)
		r.keep(qp, rdResource{used: true, kind: rdRead, first: psn, last: psn.Add(npkts - 1), va: va, length: length})
	}
	d.tx[qp.tx].wake = true // TxDone resumes the reply
	r.rdState().reply = readReply{active: true, dup: dup, midStart: midStart, mr: mr, va: va, length: length, psn: psn, n: npkts}
	d.readReplyRun(now, qp)
}

// readReply is the READ the responder is answering. Its response packets
// are built as the port takes them, at most inflightHigh of the QP's
// frames waiting there (TxDone resumes it below inflightLow, as for the
// requester), so a READ of any size holds a bounded number of frames in
// the device and the fabric. The port keeps inflightLow frames queued when
// it resumes, so the link never idles for it and the wire timing is that
// of sending every packet at once. rxe's responder likewise builds one
// response per run of read_reply, re-entering while res->read.resid > 0,
// and takes no new request (get_req) until the reply is out; requests that
// arrive meanwhile wait (see holdRequest).
type readReply struct {
	active   bool
	dup      bool // a replay of a resource
	midStart bool // a replay from the middle: no FIRST packet
	mr       *MR
	va       uint64   // address of the READ's first byte
	length   uint64   // its length
	psn      wire.PSN // PSN of its first response
	i, n     uint32   // packets built, packets in all
}

// readReplyRun builds the current READ's next response packets, then,
// once the reply is complete, runs the requests held meanwhile.
func (d *Device) readReplyRun(now sim.Time, qp *QP) {
	r := &qp.resp
	x := &r.rdState().reply
	for x.active {
		if !qp.state.receives() || qp.dead {
			x.active = false // RESET or ERR: the rest is not sent
			break
		}
		if d.skbOut(qp) >= inflightHigh {
			return // TxDone resumes it
		}
		if x.length > 0 && x.mr.dead {
			// rxe rechecks the R_Key's MR for every packet after the first
			// (rxe_recheck_mr): deregistered meanwhile, the READ fails.
			x.active = false
			d.remoteError(now, qp, wire.NAKRemoteAccess, x.psn.Add(x.i), EventQPAccessErr)
			break
		}
		d.buildReadResponse(qp, x)
		x.i++
		x.active = x.i < x.n
		if !x.active && !x.dup {
			d.rdAtomicAnswered(qp)
		}
	}
	d.runHeld(now, qp)
}

// buildReadResponse builds response packet x.i of the READ x.
func (d *Device) buildReadResponse(qp *QP, x *readReply) {
	var f wire.Frame
	d.frameTo(&f, qp, &qp.attr.AHAttr, qp.attr.DestQPNum)
	m := uint64(qp.pmtu())
	i := x.i
	off := uint64(i) * m
	if x.length > 0 {
		start := x.va - x.mr.Addr + off
		f.Payload = x.mr.buf[start : start+min(m, x.length-off)]
	}
	switch segment(i == 0 && !x.midStart, i == x.n-1) {
	case wire.PosOnly:
		f.BTH.Opcode = wire.OpRCReadResponseOnly
	case wire.PosFirst:
		f.BTH.Opcode = wire.OpRCReadResponseFirst
	case wire.PosLast:
		f.BTH.Opcode = wire.OpRCReadResponseLast
	default:
		f.BTH.Opcode = wire.OpRCReadResponseMiddle
	}
	f.BTH.PSN = x.psn.Add(i)
	f.AETH = wire.AETHFields{Syndrome: wire.ACKSyndrome(wire.CreditsUnlimited), MSN: qp.resp.msn}
	note := ""
	switch {
	case x.dup:
		note = "replayed READ response"
	case d.cfg.Annotate:
		b := strconv.AppendInt(append(d.noteBuf[:0], "READ response "...), int64(i)+1, 10)
		note = d.note(strconv.AppendInt(append(b, " of "...), int64(x.n), 10))
	}
	d.emit(qp, &f, note, frameMark{})
}

// tooManyRdAtomic reports, under the spec profile, whether a new READ or
// atomic would exceed the responder's max_dest_rd_atomic: "too many RDMA
// READ or ATOMIC requests: more requests received and not acknowledged
// than allowed for the connection" is an invalid request (IBTA vol. 1
// §9.9.3, responder errors, class C: NAK invalid request, the QP to ERR).
// The responder counts a READ or atomic as not yet acknowledged until its
// last response has left the port: a requester that keeps to the limit
// (max_rd_atomic <= the peer's max_dest_rd_atomic) sends the next one only
// after a response came back, so it never trips this. rxe 6.1 has no such
// check and answers them all, reusing its oldest resource (seen on real
// rxe: differential scenarios read-over-max-dest-rd-atomic and
// atomic-over-max-dest-rd-atomic), so the rxe profile does too.
func (d *Device) tooManyRdAtomic(qp *QP) bool {
	if d.cfg.Profile == ProfileRXE {
		return false
	}
	r := qp.resp.rdState()
	gone := qp.txBuilt - uint64(d.tx[qp.tx].out)
	for !r.rdOut.empty() && *r.rdOut.at(0) <= gone {
		r.rdOut.shift()
	}
	return r.rdOut.size >= int(qp.attr.MaxDestRdAtomic)
}

// rdAtomicAnswered records, under the spec profile, that a READ or
// atomic's last response has been built (see tooManyRdAtomic).
func (d *Device) rdAtomicAnswered(qp *QP) {
	if d.cfg.Profile == ProfileRXE {
		return
	}
	r := qp.resp.rdState()
	if n := max(1, int(qp.attr.MaxDestRdAtomic)); r.rdOut.limit != n {
		r.rdOut.init(n)
	}
	if r.rdOut.full() {
		r.rdOut.shift() // cannot happen: tooManyRdAtomic refused the request
	}
	*r.rdOut.grow() = qp.txBuilt
}

// maxHeld bounds the requests one QP holds while it answers a READ
// (4096 frames of at most maxFrameLen bytes, 17 MiB): a peer's window is
// far smaller; only a flood (a duplicating fault) reaches it, and then the
// excess is dropped and counted (DropBusy) rather than held without limit.
const maxHeld = 4096

// holdRequest keeps a copy of a request frame for qp while its responder
// is answering a READ (rxe's req_pkts queue); false if the queue is full.
func (d *Device) holdRequest(qp *QP, frame []byte) bool {
	r := qp.resp.rdState()
	if len(r.held)-r.heldHead >= maxHeld {
		return false
	}
	buf := d.outbox.buffer()
	if len(frame) > len(buf) {
		buf = make([]byte, len(frame)) // larger than any frame the model builds: a foreign jumbo frame
	}
	r.held = append(r.held, buf[:copy(buf, frame)])
	return true
}

// busy reports whether requests for qp must wait: a READ reply is being
// built, or earlier requests wait already.
func (r *responder) busy() bool {
	return r.rd != nil && (r.rd.reply.active || r.rd.heldHead < len(r.rd.held))
}

// runHeld runs the held requests, in order, until one starts a READ reply
// that has to wait for the port.
func (d *Device) runHeld(now sim.Time, qp *QP) {
	r := qp.resp.rd
	if r == nil {
		return
	}
	for !r.reply.active && r.heldHead < len(r.held) {
		h := r.held[r.heldHead]
		r.held[r.heldHead] = nil
		r.heldHead++
		if r.heldHead == len(r.held) {
			r.held, r.heldHead = r.held[:0], 0
		}
		p := &d.rxHeld
		// Receive decoded it and checked its ICRC and headers already.
		if forQP(p.DecodeHeaders(h), p) {
			d.receiveRequest(now, qp, p)
		}
		if cap(h) == maxFrameLen {
			d.outbox.free = append(d.outbox.free, h[:maxFrameLen])
		}
	}
}

// answerAtomic executes an atomic once and answers it.
func (d *Device) answerAtomic(now sim.Time, qp *QP, p *wire.Packet) {
	r := &qp.resp
	psn := p.BTH.PSN()
	a := p.AtomicETH
	if qp.attr.MaxDestRdAtomic == 0 || d.tooManyRdAtomic(qp) {
		d.remoteError(now, qp, wire.NAKInvalidRequest, psn, EventQPReqErr)
		return
	}
	mr, ok, _ := d.mem.remote(qp, a.RKey(), a.VA(), 8, AccessRemoteAtomic)
	if !ok {
		d.remoteError(now, qp, wire.NAKRemoteAccess, psn, EventQPAccessErr)
		return
	}
	if a.VA()%8 != 0 {
		// A misaligned target (IBTA §9.4.5: atomics are on naturally
		// aligned 64-bit words) is refused after the R_Key and range
		// checks pass, as rxe's atomic_reply does: RESPST_ERR_MISALIGNED_ATOMIC,
		// NAK invalid request (class C).
		d.remoteError(now, qp, wire.NAKInvalidRequest, psn, EventQPReqErr)
		return
	}
	// Memory holds the 64-bit value in host (little-endian) order, as a
	// C program on x86 sees it; the wire carries it big-endian.
	cell := mr.buf[a.VA()-mr.Addr:][:8]
	orig := binary.LittleEndian.Uint64(cell)
	if p.Info.Kind == wire.KindFetchAdd {
		binary.LittleEndian.PutUint64(cell, orig+a.SwapAddData())
	} else if orig == a.CompareData() {
		binary.LittleEndian.PutUint64(cell, a.SwapAddData())
	}
	r.keep(qp, rdResource{used: true, kind: rdAtomicOp, first: psn, last: psn, orig: orig})
	r.msn = (r.msn + 1) & wire.PSNMask
	r.epsn = psn.Next()
	d.sendAtomicAck(qp, psn, orig, "")
	d.rdAtomicAnswered(qp)
}

func (d *Device) sendAtomicAck(qp *QP, psn wire.PSN, orig uint64, note string) {
	var f wire.Frame
	d.frameTo(&f, qp, &qp.attr.AHAttr, qp.attr.DestQPNum)
	f.BTH.Opcode = wire.OpRCAtomicAcknowledge
	f.BTH.PSN = psn
	f.AETH = wire.AETHFields{Syndrome: wire.ACKSyndrome(wire.CreditsUnlimited), MSN: qp.resp.msn}
	f.AtomicAckETH = orig
	if note == "" && d.cfg.Annotate {
		note = d.note(strconv.AppendUint(append(d.noteBuf[:0], "atomic executed: the target held "...), orig, 10))
	}
	d.emit(qp, &f, note, frameMark{})
}

// duplicate handles a request whose PSN is behind the expected one.
func (d *Device) duplicate(now sim.Time, qp *QP, p *wire.Packet) {
	psn := p.BTH.PSN()
	switch p.Info.Kind {
	case wire.KindReadRequest:
		// Replayed only from a resource that holds it, and only if it asks
		// for a part of what that READ read (a re-read from a later PSN
		// asks for the rest); otherwise dropped (rxe's find_resource).
		x := qp.resp.find(psn, rdRead)
		if x == nil {
			return
		}
		skip := uint64(psn.Diff(x.first)) * uint64(qp.pmtu())
		va, n := p.RETH.VA(), uint64(p.RETH.DMALength())
		if va < x.va+skip || va+n > x.va+x.length {
			return
		}
		d.answerRead(now, qp, p, duplicateRequest)
	case wire.KindCompareSwap, wire.KindFetchAdd:
		if x := qp.resp.find(psn, rdAtomicOp); x != nil {
			d.sendAtomicAck(qp, psn, x.orig, "replayed atomic result")
		}
		// No saved result: dropped silently (counted as a duplicate).
	default:
		// rxe re-acknowledges every duplicate SEND or WRITE packet
		// (duplicate_request, citing C9-105); the model under the spec
		// profile only those that ask for an ACK.
		if p.BTH.AckReq() || d.cfg.Profile == ProfileRXE {
			note := ""
			if d.explaining() {
				note = "duplicate PSN " + psn.String() + ": re-acknowledged, not delivered"
			}
			d.sendAck(qp, wire.ACKSyndrome(wire.CreditsUnlimited), qp.resp.epsn.Sub(1), note)
		}
	}
}

// rnr refuses a packet for want of a receive WQE: RNR NAK carrying its
// PSN and the QP's min_rnr_timer (IBTA §9.7.5.2.8).
func (d *Device) rnr(qp *QP, psn wire.PSN) {
	d.counters.Add(CounterSendRNRErr, 1)
	note := ""
	if d.explaining() {
		note = "RNR NAK: no receive posted, retry in " + sim.Duration(wire.RNRDelay(qp.attr.MinRNRTimer)).String()
	}
	d.sendAck(qp, wire.RNRNAKSyndrome(qp.attr.MinRNRTimer), psn, note)
	// The expected PSN stays: the packets already behind the refused one
	// arrive out of sequence and get the usual one NAK per gap, which is
	// the RNR NAK + sequence NAK pair the real captures show.
}

// remoteError answers a request the responder cannot execute: a NAK, and
// the QP to ERR with the async event given.
func (d *Device) remoteError(now sim.Time, qp *QP, code wire.NAKCode, psn wire.PSN, ev AsyncEventType) {
	if qp.init.Type == QPTypeRC { // UC has no acknowledgements (rxe: do_complete goes to cleanup)
		note := ""
		if d.explaining() {
			note = "NAK: " + code.String()
		}
		d.sendAck(qp, wire.NAKSyndrome(code), psn, note)
	}
	// The IBTA has the responder raise an affiliated asynchronous error
	// (§11.6.3); rxe 6.1 raises none (do_class_ac_error and rxe_qp_error
	// call no event handler: checked against real rxe in the conformance
	// differential runs).
	if d.cfg.Profile == ProfileRXE {
		d.toError(now, qp)
		return
	}
	d.toErrorRaising(now, qp, ev)
}

// sendAck sends an ACKNOWLEDGE with the syndrome and PSN given.
func (d *Device) sendAck(qp *QP, syn wire.Syndrome, psn wire.PSN, note string) {
	if note == "" && d.cfg.Annotate {
		note = d.note(strconv.AppendUint(append(d.noteBuf[:0], "ACK of everything up to PSN "...), uint64(psn), 10))
	}
	var f wire.Frame
	d.frameTo(&f, qp, &qp.attr.AHAttr, qp.attr.DestQPNum)
	f.BTH.Opcode = wire.OpRCAcknowledge
	f.BTH.PSN = psn
	f.AETH = wire.AETHFields{Syndrome: syn, MSN: qp.resp.msn}
	d.emit(qp, &f, note, frameMark{rnrNAK: syn.IsRNRNAK()})
}

// receiveUC handles a UC request: no ACKs, and a gap drops the rest of
// the message.
func (d *Device) receiveUC(now sim.Time, qp *QP, p *wire.Packet) {
	r := &qp.resp
	psn := p.BTH.PSN()
	pos := p.Info.Position
	rxe := d.cfg.Profile == ProfileRXE
	if psn != r.epsn {
		d.counters.Add(CounterOutOfSeqRequest, 1)
		if r.inSend || r.inWrite {
			r.ucDrop = true
			if rxe && r.inWrite {
				r.ucStuck = true
			}
			r.inSend, r.inWrite = false, false
			if rxe {
				r.ucBroken = true // the WQE waits for the next start (below)
			} else {
				d.abandonUCMessage(now, qp, whyUCLostPacket)
			}
		}
	}
	r.epsn = psn.Next()
	start := pos.Starts()
	if r.ucDrop && !start {
		return
	}
	r.ucDrop = false
	if r.ucStuck {
		// rxe resets the last opcode seen (to accept a new message) only
		// when a receive WQE was in use, which a WRITE has none of; so
		// after a UC WRITE broke mid-way every later message fails
		// check_op_seq and is dropped, until the QP is reset (seen on
		// real rxe: differential scenario uc-write-loss).
		r.ucDrop = pos == wire.PosFirst
		d.traceMessageDrop(now, qp, dropAfterBrokenWrite)
		return
	}
	if r.ucBroken && start {
		// rxe keeps the broken message's opcode as the last one seen, so
		// the next message's first packet fails check_op_seq (a LAST is
		// missing: class D1) and is dropped too, with the rest of its
		// message; the receive WQE is reset for the message after (seen
		// on real rxe: differential scenario uc-loss). On an SRQ it is
		// class E: the broken message's receive completes with
		// REM_INV_REQ_ERR.
		r.ucBroken = false
		d.abandonUCMessage(now, qp, whyUCLostPacket)
		r.ucDrop = pos == wire.PosFirst
		d.traceMessageDrop(now, qp, dropAfterBrokenMsg)
		return
	}
	if !d.checkSequence(qp, p) {
		// An opcode out of sequence at the expected PSN (a FIRST or ONLY
		// inside a message, a MIDDLE or LAST outside one): the packet is
		// dropped with the rest of its message, and a message in progress
		// is given up (rxe: class D1E).
		if r.inSend || r.inWrite {
			d.abandonUCMessage(now, qp, whyUCOpcodeSequence)
		}
		if rxe && r.inWrite {
			r.ucStuck = true // see above
		}
		r.inSend, r.inWrite, r.ucDrop = false, false, true
		return
	}
	switch p.Info.Kind {
	case wire.KindSend:
		d.placeSend(now, qp, p)
	case wire.KindWrite:
		d.placeWrite(now, qp, p)
	}
}

// abandonUCMessage gives up the receive of a UC message that will not
// complete. Without an SRQ the WQE stays at the head of the receive queue
// for the next message; on an SRQ it was taken from the shared queue, so
// it completes with REM_INV_REQ_ERR (rxe's class E) rather than vanish.
func (d *Device) abandonUCMessage(now sim.Time, qp *QP, why wcReasonKind) {
	if w := qp.resp.rwqe; w != nil && qp.init.SRQ != nil {
		d.failRecv(now, qp, w, WCRemInvReqErr, wcReason{kind: why})
	}
	qp.resp.rwqe = nil
}
