package nic

import "github.com/rocesim/rocesim/wire"

// Named values for what used to be note text or positional booleans. The
// retransmission notes of the pcapng capture and the ladder are derived
// from these (retryReason.String), never compared back.

// retryReason is why a go-back-N round started (rewind): the completer
// decides on it (rxe counts timeout and NAK retries in
// completer_retry_err, not RNR ones) and the retransmission note names it.
type retryReason uint8

const (
	retryNone         retryReason = iota // no round yet: a fresh requester
	retryACKTimeout                      // the ACK timer ran out (rxe's COMPST_ERROR_RETRY from the timer)
	retryNAK                             // a NAK PSN sequence error
	retryImpliedNAK                      // a response past a READ or atomic still unanswered (rxe's check_psn)
	retryLostResponse                    // a READ response or atomic ACK missing behind a later response
	retryRNR                             // the RNR NAK timer ran out: resend from the NAKed PSN
)

// retryReasonNotes are the note texts, byte for byte those the captures
// and ladders in testdata were made with.
var retryReasonNotes = [...]string{
	retryNone:         "",
	retryACKTimeout:   "after ACK timeout",
	retryNAK:          "after NAK",
	retryImpliedNAK:   "after an implied NAK",
	retryLostResponse: "after a lost response",
	retryRNR:          "after RNR wait",
}

// String returns the reason as it appears in a retransmission note.
func (r retryReason) String() string { return noteText(retryReasonNotes[:], r, "retryReason") }

// noteText is the note of reason r, or typ(r) for a value without one.
func noteText[R ~uint8](notes []string, r R, typ string) string {
	if int(r) < len(notes) {
		return notes[r]
	}
	return typ + "(" + itoa(int(r)) + ")"
}

// ackBound says whether an acknowledgement of a PSN covers that PSN (an
// ACK: rxe's check_ack on ACK syndromes) or only the PSNs before it (a
// NAK or RNR NAK of the PSN, or a response that implies everything before
// it was received).
type ackBound uint8

const (
	ackBefore  ackBound = iota // PSNs strictly before the one named
	ackThrough                 // the PSN named and every one before it
)

// cqSide says which queue a completion retires: it decides what a CQ
// overflow does to the QP under ProfileRXE (see pushCQE).
type cqSide uint8

const (
	recvSide cqSide = iota // a receive (or SRQ) WQE: the responder's RESPST_ERR_CQ_OVERFLOW
	sendSide               // a send WQE: rxe_comp.c ignores the failed post
)

// solicitation says whether a receive completion carries the Solicited
// Event bit (IBTA vol. 1 §9.2.2 SE), which wakes a CQ armed for solicited
// completions only (ibv_req_notify_cq(cq, 1)).
type solicitation uint8

const (
	unsolicited solicitation = iota
	solicited
)

// arrival says whether a request is new, to execute, or a duplicate of
// one executed already, answered again from what was saved and never
// executed twice (IBTA vol. 1 §9.7.5.1.3; rxe's duplicate_request).
type arrival uint8

const (
	newRequest arrival = iota
	duplicateRequest
)

// dataFlow says which way bytes move between a message and the memory
// its SGEs name: out of it (a SEND or WRITE source, gathered) or into it
// (a receive buffer, a READ or atomic destination, scattered), which the
// region must allow with LOCAL_WRITE (IBTA vol. 1 §10.6.3.2; rxe's
// copy_data takes IB_ACCESS_LOCAL_WRITE for RXE_TO_MR_OBJ).
type dataFlow uint8

const (
	fromMemory dataFlow = iota // gathered: the device reads the memory
	intoMemory                 // scattered: the device writes it
)

// String names the copy, for messages: gather or scatter.
func (f dataFlow) String() string {
	if f == intoMemory {
		return "scatter"
	}
	return "gather"
}

// isRdAtomic reports whether o is a READ or an atomic: an operation that
// asks for data back, completes on its response rather than on an ACK,
// and needs a LOCAL_WRITE destination.
func (o WROpcode) isRdAtomic() bool {
	return o == WRRDMARead || o.isAtomic()
}

// localFlow is which way the WR's local memory is used: a READ or an
// atomic writes its result into it; every other opcode with SGEs reads it.
func (o WROpcode) localFlow() dataFlow {
	if o.isRdAtomic() {
		return intoMemory
	}
	return fromMemory
}

// hasImm reports whether o's message carries immediate data.
func (o WROpcode) hasImm() bool {
	return o == WRSendWithImm || o == WRRDMAWriteWithImm
}

// segment is the position in its message (IBTA vol. 1 §9.2: FIRST,
// MIDDLE, LAST or ONLY) of a packet that is, or is not, its message's
// first and last.
func segment(first, last bool) wire.Position {
	switch {
	case first && last:
		return wire.PosOnly
	case first:
		return wire.PosFirst
	case last:
		return wire.PosLast
	}
	return wire.PosMiddle
}

// isAtomic reports whether o is one of the two atomic operations.
func (o WROpcode) isAtomic() bool {
	return o == WRAtomicCmpAndSwp || o == WRAtomicFetchAndAdd
}

// name is the opcode's name without the IBV_WR_ prefix, for packet notes
// ("wr 7 RDMA_WRITE, packet 1 of 3").
func (o WROpcode) name() string {
	if int(o) < len(wrOpcodeNames) {
		return wrOpcodeNames[o]
	}
	return o.String()
}

// solicitationOf names the BTH's SE bit.
func solicitationOf(se bool) solicitation {
	if se {
		return solicited
	}
	return unsolicited
}

// wcReason is why a work request completed in error, as the trace's why=
// field (and from it the ladder's completion note) words it: a kind
// naming the check that failed, with the numbers it names, or the words
// of a memory, bind or invalidation check (detail). The zero value is no
// reason. String gives the text the traces were made with; nothing
// compares it back.
type wcReason struct {
	kind   wcReasonKind
	n, max uint64 // lengths: the message's (n) and the buffer's (max)
	detail string // a check's own words (memTable.resolve, bindMW, invalidate)
}

// wcReasonKind is the check a wcReason names.
type wcReasonKind uint8

const (
	whyNone             wcReasonKind = iota
	whyMemCheck                      // detail: what a memory or bind check found
	whyMessageOver2G                 // n: a send message longer than 2^31 bytes (post_send)
	whyUDOverMTU                     // n: a UD message longer than the path MTU (post_send)
	whyRecvTooShort                  // max: a message longer than the receive buffer
	whyDatagramTooLong               // n, max: a datagram (with its GRH) longer than the buffer
	whyRecvDeregistered              // the receive buffer deregistered mid-message
	whyUCLostPacket                  // a UC message broken by a lost packet
	whyUCOpcodeSequence              // a UC message broken by an opcode out of sequence
	whySendInvalidate                // detail: the IETH's invalidation failed
	whyLocalInvalidate               // detail: a LOCAL_INV's invalidation failed
)

// memCheck is the reason for what a memory or bind check found, msg
// (none when msg is empty: the check passed).
func memCheck(msg string) wcReason {
	if msg == "" {
		return wcReason{}
	}
	return wcReason{kind: whyMemCheck, detail: msg}
}

// String returns the reason as the trace's why= field gives it.
func (r wcReason) String() string {
	switch r.kind {
	case whyNone:
		return ""
	case whyMemCheck:
		return r.detail
	case whyMessageOver2G:
		return "post_send: message of " + itoa(int(r.n)) + " bytes over 2^31"
	case whyUDOverMTU:
		return "post_send: UD message of " + itoa(int(r.n)) + " bytes over the path MTU"
	case whyRecvTooShort:
		return "message longer than the receive buffer of " + itoa(int(r.max)) + " bytes"
	case whyDatagramTooLong:
		return "datagram of " + itoa(int(r.n)) + " bytes (with the GRH) longer than the receive buffer of " + itoa(int(r.max)) + " bytes"
	case whyRecvDeregistered:
		return "receive buffer deregistered while in use"
	case whyUCLostPacket:
		return "UC message broken by a lost packet"
	case whyUCOpcodeSequence:
		return "UC message broken by an opcode out of sequence"
	case whySendInvalidate:
		return "send with invalidate: " + r.detail
	case whyLocalInvalidate:
		return "local_inv: " + r.detail
	}
	return "wcReason(" + itoa(int(r.kind)) + ")"
}

// msgDropReason is why the responder dropped a whole UC message without a
// completion (traceMessageDrop): nothing else shows that it arrived.
type msgDropReason uint8

const (
	dropAfterBrokenWrite msgDropReason = iota // rxe keeps a broken WRITE's opcode: every later message fails check_op_seq
	dropAfterBrokenMsg                        // the message after a broken one fails check_op_seq (a LAST missing)
)

// msgDropReasonNotes are the trace texts, byte for byte those the traces
// were made with.
var msgDropReasonNotes = [...]string{
	dropAfterBrokenWrite: "UC: dropped, a WRITE broke earlier (rxe keeps its opcode as the last one seen)",
	dropAfterBrokenMsg:   "UC: the message after a broken one is dropped (rxe check_op_seq: LAST missing)",
}

// String returns the reason as the trace's why= field gives it.
func (r msgDropReason) String() string {
	return noteText(msgDropReasonNotes[:], r, "msgDropReason")
}
