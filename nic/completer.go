package nic

import (
	"encoding/binary"

	"github.com/rocesim/rocesim/sim"
	"github.com/rocesim/rocesim/wire"
)

// The completer handles responses at the requester (IBTA §9.7.5.1, rxe's
// rxe_comp.c), in order:
//
//  1. State: responses count in RTS, SQD and SQE (and ERR drops them).
//  2. Check the PSN: a response before the oldest unacknowledged PSN is
//     a stale duplicate and dropped; one for a PSN never sent is a ghost
//     and dropped too, but under the rxe profile, when the oldest WQE is
//     a READ or atomic still waiting for its response, it is an implied
//     NAK as any response past that WQE is (rxe's check_psn).
//  3. Check the ACK: a positive ACK acknowledges every SEND and WRITE up
//     to its PSN; a READ response or atomic ACK completes its WQE (and
//     acknowledges everything before it); a NAK PSN sequence error
//     acknowledges everything before its PSN and rewinds the requester
//     there (go-back-N); an RNR NAK does the same after the RNR wait; other
//     NAKs fail the WQE with the matching remote error and move the QP to
//     ERR. A response past a READ or atomic whose response has not come
//     is an implied NAK: the response was lost, retry from it.
//  4. Complete, from the head of the send queue, every WQE that is done,
//     in posting order; a valid response resets the retry counters.
//
// The timers: the ACK timeout retransmits from the oldest unacknowledged
// PSN (error-retry), the RNR timer after an RNR NAK (rnr-retry); each
// retry spends one count, and an exhausted count fails the head WQE with
// RETRY_EXC_ERR or RNR_RETRY_EXC_ERR. A NAK sequence error and an implied
// NAK go through error-retry too (rxe's COMPST_ERROR_RETRY): one count per
// go-back-N round, and none started while a round runs (startedRetry).

// compState names the completer's states (rxe's COMPST_*), one per step
// of the flow above; the two timer states run from Advance.
type compState uint8

const (
	compCheckQPState compState = iota // 1: is the QP expecting responses?
	compCheckPSN                      // 2: a response to something sent and not yet acknowledged?
	compCheckAck                      // 3: which kind of response
	compAck                           // 3: positive ACK: acknowledge up to its PSN
	compNAKSequence                   // 3: go back to the NAK's PSN
	compRNRNAK                        // 3: wait the RNR time, then go back
	compRemoteError                   // 3: fail the WQE with the remote error
	compRead                          // 3: place a READ response
	compAtomic                        // 3: store an atomic's original value
	compErrorRetry                    // timer: ACK timeout, retransmit from the oldest unacknowledged PSN
	compRNRRetry                      // timer: RNR wait over, retransmit
	compDone
)

var compStateNames = [...]string{"check-qp-state", "check-psn", "check-ack", "ack", "nak-sequence",
	"rnr-nak", "remote-error", "read", "atomic", "error-retry", "rnr-retry", "done"}

// String returns the state's name, for traces and messages.
func (s compState) String() string { return compStateNames[s] }

// receiveResponse handles a response packet for qp.
func (d *Device) receiveResponse(now sim.Time, qp *QP, p *wire.Packet) {
	for st := compCheckQPState; st != compDone; {
		st = d.complete(now, qp, p, st)
	}
}

// complete runs one completer state for a response and returns the next.
func (d *Device) complete(now sim.Time, qp *QP, p *wire.Packet, st compState) compState {
	r := &qp.req
	psn := p.BTH.PSN()
	switch st {
	case compCheckQPState:
		switch qp.state {
		case QPStateRTS, QPStateSQD, QPStateSQE:
			return compCheckPSN
		}
		return compDone

	case compCheckPSN:
		if !r.sentAny() {
			return compDone // nothing outstanding: a stale response
		}
		if psn.Less(qp.sq.at(0).firstPSN) {
			return compDone // before the oldest unacknowledged
		}
		if !psn.Less(r.highest) {
			// Never sent. rxe's check_psn only compares it with the oldest
			// WQE: past a READ or atomic still waiting, it is an implied
			// NAK like any later response.
			if d.cfg.Profile == ProfileRXE && qp.sq.at(0).wr.Opcode.isRdAtomic() && !qp.sq.at(0).done {
				d.errorRetry(now, qp, retryImpliedNAK)
			}
			return compDone
		}
		return compCheckAck

	case compCheckAck:
		switch p.Info.Kind {
		case wire.KindReadResponse:
			return compRead
		case wire.KindAtomicAck:
			return compAtomic
		case wire.KindAck:
			switch syn := p.AETH.Syndrome(); {
			case syn.IsACK():
				return compAck
			case syn.IsRNRNAK():
				return compRNRNAK
			case syn.IsNAK() && syn.NAKCode() == wire.NAKPSNSequenceError:
				return compNAKSequence
			case syn.IsNAK():
				return compRemoteError
			}
		}
		return compDone

	case compAck:
		// Only an ACK past the last one acknowledged is progress and
		// restores the retry budgets (rxe's check_psn drops an older
		// one before check_ack resets them): a responder re-ACKing a
		// duplicate must not keep a dead exchange retrying forever.
		if !r.hasAcked || r.acked.Less(psn) {
			d.resetRetries(qp)
		}
		d.ackUpTo(now, qp, psn, ackThrough)
		return compDone

	case compRNRNAK:
		d.counters.Add(CounterRcvdRNRErr, 1)
		d.ackUpTo(now, qp, psn, ackBefore)
		if d.headBefore(qp, psn) {
			return compDone // an implied NAK for the READ or atomic before it
		}
		if r.rnrRetries == 0 {
			d.failHead(now, qp, WCRNRRetryExcErr)
			d.counters.Add(CounterRetryRNRExceededErr, 1)
			return compDone
		}
		if r.rnrRetries != 7 {
			r.rnrRetries--
		}
		r.rnrUntil = now.Add(sim.Duration(wire.RNRDelay(p.AETH.Syndrome().RNRTimerCode())))
		r.ackDue = sim.Never
		d.retime(qp)
		d.rewind(qp, psn, retryRNR)
		return compDone

	case compNAKSequence:
		d.counters.Add(CounterRcvdSeqErr, 1)
		d.ackUpTo(now, qp, psn, ackBefore)
		if d.headBefore(qp, psn) || r.rnrUntil != sim.Never {
			return compDone // an implied NAK, or the RNR wait resends anyway
		}
		d.errorRetry(now, qp, retryNAK)
		return compDone

	case compRemoteError:
		d.ackUpTo(now, qp, psn, ackBefore)
		if d.headBefore(qp, psn) {
			return compDone // an implied NAK for the READ or atomic before it
		}
		switch p.AETH.Syndrome().NAKCode() {
		case wire.NAKRemoteAccess:
			d.failHead(now, qp, WCRemAccessErr)
		case wire.NAKRemoteOperation:
			d.failHead(now, qp, WCRemOpErr)
		default:
			d.failHead(now, qp, WCRemInvReqErr)
		}
		return compDone

	case compRead:
		d.readResponse(now, qp, p)
		return compDone

	case compAtomic:
		d.atomicAck(now, qp, p)
		return compDone
	}
	panic("nic: completer in state " + st.String() + " for a response")
}

// headBefore reports, after ackUpTo(psn), whether the oldest outstanding
// WQE ends before psn, which leaves a READ or atomic whose response has not
// come, or whether the QP has nothing outstanding or is in ERR. A NAK or
// a response for a later PSN then says nothing about that WQE: rxe's
// check_psn turns it into COMPST_ERROR_RETRY, a go-back to the READ or
// atomic (ackUpTo has already called errorRetry), and neither fails the
// READ with the NAK's status nor places a later WQE's data before the
// READ's.
func (d *Device) headBefore(qp *QP, psn wire.PSN) bool {
	if qp.state == QPStateErr || qp.sq.empty() {
		return true
	}
	return qp.sq.at(0).lastPSN().Less(psn)
}

// errorRetry is rxe's COMPST_ERROR_RETRY, reached from the ACK timeout
// (timer), a NAK PSN sequence error and an implied NAK (a response past a
// READ or atomic whose response has not come): go back to the oldest
// unacknowledged PSN, spending one retry_cnt count, and fail the oldest
// WQE with RETRY_EXC_ERR when none is left. A NAK or an implied NAK while
// a round already runs (startedRetry: no valid response since it began)
// is ignored: the responder answering every packet of one go-back-N round
// with the same NAK, or the later READs' responses behind one lost READ
// response, must not start a round each (IBTA vol. 1 §9.7.5.1.4: one
// retry per NAK-started round).
func (d *Device) errorRetry(now sim.Time, qp *QP, why retryReason) {
	r := &qp.req
	timer := why == retryACKTimeout
	if qp.state == QPStateErr || !r.sentAny() {
		return
	}
	if r.startedRetry && !timer {
		return
	}
	if !d.spendRetry(now, qp) {
		return
	}
	r.startedRetry = true
	d.rewind(qp, d.oldestUnacked(qp), why)
	d.requesterRun(now, qp)
}

// resetRetries restores the retry budgets and ends the running go-back-N
// round on a valid response (rxe's reset_retry_counters).
func (d *Device) resetRetries(qp *QP) {
	r := &qp.req
	r.retries, r.rnrRetries = int(r.retryCnt), int(r.rnrRetry)
	r.startedRetry = false
}

// ackUpTo marks done every started SEND/WRITE WQE whose last PSN is at or
// before psn (inclusive when bound is ackThrough, strictly before when
// ackBefore), completes from
// the head and restarts or stops the ACK timer. The retry counters are
// reset by the callers that carry a positive acknowledgement (an ACK, a
// READ response, an atomic ACK), not by NAKs.
func (d *Device) ackUpTo(now sim.Time, qp *QP, psn wire.PSN, bound ackBound) {
	r := &qp.req
	incl := bound == ackThrough
	// A NAK or RNR NAK of psn acknowledges everything before it, as an
	// ACK of psn-1 would (rxe moves comp.psn to it).
	if top := psn; incl || psn != qp.sq.at(0).firstPSN {
		if !incl {
			top = psn.Sub(1)
		}
		if !r.hasAcked || r.acked.Less(top) {
			r.acked, r.hasAcked = top, true
		}
	}
	// What a READ or atomic held back may already be acknowledged.
	lim, inc := psn, incl
	if r.hasAcked && (psn.Less(r.acked) || psn == r.acked) {
		lim, inc = r.acked, true
	}
	implied := false
	for i := 0; i < r.next; i++ {
		w := qp.sq.at(i)
		if w.done {
			continue
		}
		last := w.lastPSN()
		if last.Less(lim) || inc && last == lim {
			if !w.wr.Opcode.isRdAtomic() {
				w.done = true
				// This response lies past the SEND or WRITE: valid for it,
				// whatever its kind (a NAK too). rxe's check_psn resets the
				// retry counters before COMPST_COMP_WQE, which ends the
				// running round: a NAK past it starts the next.
				if last.Less(psn) || incl && last == psn {
					d.resetRetries(qp)
				}
				continue
			}
			// This response lies past a READ or atomic whose response has
			// not come: that one was lost (an implied NAK), retry from the
			// first missing response PSN (errorRetry, below, once the WQEs
			// before it are complete). Only this response's own PSN says
			// so: an older ACK remembered in r.acked has said it already.
			implied = last.Less(psn) || incl && last == psn
		}
		break
	}
	d.completeHead(now, qp)
	if implied {
		d.errorRetry(now, qp, retryLostResponse)
	}
	d.requesterRun(now, qp) // room for READ/ATOMIC or a fence may have opened
	d.armAckTimer(now, qp)
}

// completeHead completes, in order, the done WQEs at the head of the send
// queue; a WQE that failed at post time fails here, taking the QP to ERR.
func (d *Device) completeHead(now sim.Time, qp *QP) {
	r := &qp.req
	for !qp.sq.empty() {
		w := qp.sq.at(0)
		if !w.done {
			return
		}
		if w.status != WCSuccess {
			d.sendQueueError(now, qp)
			return
		}
		// Retire the WQE before its completion: a full send CQ under the
		// spec profile moves the QP to ERR, whose flush must not meet it
		// again. Its slot keeps its contents until the next post.
		if w.wr.Opcode.isRdAtomic() {
			r.rdAtomic--
		}
		qp.sq.shift()
		if r.next > 0 {
			r.next--
		} else {
			r.pkt = 0 // the WQE waiting to be sent again is done
		}
		d.completeSend(now, qp, w, WCSuccess)
		if qp.state == QPStateErr {
			return
		}
	}
	if qp.state == QPStateSQD && !r.sentAny() && qp.attr.EnSQDAsyncNotify {
		d.raise(AsyncEvent{Type: EventSQDrained, QP: qp, Time: now})
	}
}

// failHead fails the oldest outstanding WQE with st and moves the QP to ERR.
func (d *Device) failHead(now sim.Time, qp *QP, st WCStatus) {
	w := qp.sq.at(0)
	w.done, w.status = true, st
	d.toError(now, qp)
}

// sendQueueError handles a WQE that failed at the head of the send
// queue: an RC QP goes to ERR (flushing both queues, the failed WQE with
// its own status); a UC or UD QP goes to SQE (IBTA §10.3.1.4): the failed
// WQE completes with its status, the rest of the send queue is flushed,
// and receives go on.
func (d *Device) sendQueueError(now sim.Time, qp *QP) {
	if qp.init.Type == QPTypeRC {
		if qp.state != QPStateErr {
			d.toError(now, qp) // flush completes it with its own status
		}
		return
	}
	if qp.state.flushesSends() {
		return
	}
	d.transition(now, qp, QPStateSQE)
	for first := true; !qp.sq.empty(); first = false {
		w := qp.sq.at(0)
		st := WCWRFlushErr
		if first {
			st = w.status
		}
		qp.sq.shift() // first: a CQ overflow may flush the queue (see completeHead)
		d.completeSend(now, qp, w, st)
	}
	qp.req = requester{psn: qp.req.psn, highest: qp.req.highest}
	d.retime(qp)
}

// rewind points the requester at psn for go-back-N.
func (d *Device) rewind(qp *QP, psn wire.PSN, why retryReason) {
	r := &qp.req
	r.why = why
	for i := 0; i < r.sending(qp); i++ {
		w := qp.sq.at(i)
		if w.done || !w.started {
			continue
		}
		if psn.InRange(w.firstPSN, w.lastPSN()) || psn.Less(w.firstPSN) {
			if psn.Less(w.firstPSN) {
				psn = w.firstPSN
			}
			r.next = i
			r.pkt = uint32(psn.Diff(w.firstPSN))
			r.nRetrans++
			if r.rounds == nil {
				r.rounds = new(roundLog)
			}
			r.rounds.start(r.nRetrans, r.highest)
			if why != retryRNR { // rxe counts timeout and NAK retries, not RNR ones
				d.counters.Add(CounterCompleterRetryErr, 1)
			}
			return
		}
	}
}

// readResponse places a READ response's payload and completes the READ
// on its last packet. Responses must come in PSN order: a later or an
// earlier one is dropped, and a READ missing a response is asked again,
// from the first missing PSN, when the ACK timer fires.
func (d *Device) readResponse(now sim.Time, qp *QP, p *wire.Packet) {
	r := &qp.req
	psn := p.BTH.PSN()
	for i := 0; i < r.next; i++ {
		w := qp.sq.at(i)
		if w.done || !psn.InRange(w.firstPSN, w.lastPSN()) {
			continue
		}
		if w.wr.Opcode != WRRDMARead {
			d.unexpectedResponse(now, qp, w)
			return
		}
		if psn != w.firstPSN.Add(w.rdRcvd) {
			// A response lost before this one (or a duplicate): dropped, as
			// rxe's check_psn does; the ACK timeout asks for the rest.
			return
		}
		d.ackUpTo(now, qp, w.firstPSN, ackBefore) // everything before the READ is acknowledged
		if d.headBefore(qp, w.firstPSN) {
			return // an earlier READ or atomic still waits for its response
		}
		// Valid only now: rxe's check_psn sends a response past an older
		// READ to COMPST_ERROR_RETRY before check_ack resets anything.
		d.resetRetries(qp)
		off := uint64(w.rdRcvd) * uint64(qp.pmtu())
		if !d.memStillValid(qp, w.wr.SGList, intoMemory) || off+uint64(len(p.Payload)) > w.length {
			d.failHead(now, qp, WCLocProtErr)
			return
		}
		d.mem.scatter(w.wr.SGList, off, p.Payload)
		w.rdRcvd++
		if r.waitPSN && !p.Info.Position.Ends() {
			// The response moved the oldest unacknowledged PSN on: a
			// requester stopped at the window goes on (rxe_comp.c
			// COMPST_UPDATE_COMP reschedules a waiting requester).
			d.requesterRun(now, qp)
		}
		if p.Info.Position.Ends() {
			w.done = true
			d.completeHead(now, qp)
			d.requesterRun(now, qp)
			d.armAckTimer(now, qp)
		}
		return
	}
}

// atomicAck stores the original value and completes the atomic.
func (d *Device) atomicAck(now sim.Time, qp *QP, p *wire.Packet) {
	r := &qp.req
	psn := p.BTH.PSN()
	for i := 0; i < r.next; i++ {
		w := qp.sq.at(i)
		if w.done || w.firstPSN != psn {
			continue
		}
		if !w.wr.Opcode.isAtomic() {
			return
		}
		d.ackUpTo(now, qp, psn, ackBefore)
		if d.headBefore(qp, psn) {
			return // an earlier READ or atomic still waits for its response
		}
		d.resetRetries(qp) // valid only now, as for a READ response

		if !d.memStillValid(qp, w.wr.SGList, intoMemory) {
			d.failHead(now, qp, WCLocProtErr)
			return
		}
		var b [8]byte
		binary.LittleEndian.PutUint64(b[:], p.AtomicAckETH.OrigRemoteData())
		d.mem.scatter(w.wr.SGList, 0, b[:])
		w.done = true
		d.completeHead(now, qp)
		d.requesterRun(now, qp) // a READ or atomic slot is free again
		d.armAckTimer(now, qp)
		return
	}
}

// timerState runs a completer timer state.
func (d *Device) timerState(now sim.Time, qp *QP, st compState) {
	r := &qp.req
	switch st {
	case compRNRRetry:
		r.rnrUntil = sim.Never
		d.retime(qp)
		d.traceTimer(now, qp, "rnr-timer")
		d.requesterRun(now, qp)
	case compErrorRetry:
		r.ackDue = sim.Never
		d.retime(qp)
		d.traceTimer(now, qp, "ack-timeout")
		d.errorRetry(now, qp, retryACKTimeout)
	default:
		panic("nic: completer timer in state " + st.String())
	}
}

// spendRetry spends one retry_cnt count before a retransmission, or,
// with none left, fails the oldest WQE with RETRY_EXC_ERR (the QP goes to
// ERR) and reports false. retry_cnt 7 is never spent under the rxe
// profile: rxe, like most hardware, takes it for "retry forever".
func (d *Device) spendRetry(now sim.Time, qp *QP) bool {
	r := &qp.req
	if r.retries == 0 {
		d.counters.Add(CounterRetryExceededErr, 1)
		d.failHead(now, qp, WCRetryExcErr)
		return false
	}
	if r.retries != 7 || d.cfg.Profile == ProfileSpec {
		r.retries--
	}
	return true
}

// oldestUnacked returns the oldest PSN not acknowledged: the first PSN of
// the oldest not-done WQE, past the responses a READ already has and past
// the packets of a SEND or WRITE an ACK already covered (rxe resends from
// comp.psn, the PSN after the last one acknowledged).
func (d *Device) oldestUnacked(qp *QP) wire.PSN {
	r := &qp.req
	for i := 0; i < r.sending(qp); i++ {
		if w := qp.sq.at(i); !w.done && w.started {
			psn := w.firstPSN.Add(w.rdRcvd)
			if r.hasAcked && r.acked.InRange(psn, w.lastPSN()) && r.acked != w.lastPSN() {
				psn = r.acked.Add(1)
			}
			return psn
		}
	}
	return r.psn
}

// unexpectedResponse handles a READ response whose PSN falls in a WQE
// that is not a READ (a responder that took a WRITE for a READ: fault
// plan rewrite set-opcode=). rxe's check_ack fails that WQE with
// IBV_WC_FATAL_ERR once it is the oldest (seen on real rxe: differential
// scenario read-request-with-payload); the IBTA calls a response of the
// wrong kind a bad response (vol. 1 §9.9.2, requester errors:
// IBV_WC_BAD_RESP_ERR).
// Either way the QP goes to ERR.
func (d *Device) unexpectedResponse(now sim.Time, qp *QP, w *sendWQE) {
	d.ackUpTo(now, qp, w.firstPSN, ackBefore)
	if d.headBefore(qp, w.firstPSN) || qp.sq.at(0) != w {
		return // an earlier WQE still waits
	}
	st := WCBadRespErr
	if d.cfg.Profile == ProfileRXE {
		st = WCFatalErr
	}
	d.failHead(now, qp, st)
}
