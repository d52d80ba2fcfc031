package verbs

import (
	"cmp"
	"errors"
	"fmt"
	"slices"
	"strings"

	"github.com/rocesim/rocesim/nic"
	"github.com/rocesim/rocesim/sim"
	"github.com/rocesim/rocesim/sim/fabric"
	"github.com/rocesim/rocesim/wire"
)

// What keeps a run going
//
// A run that never settles is a normal thing to write: rxe's retry_cnt 7
// retries forever, rnr_retry 7 too, a link may stay down, a test may
// forget a receive. The world's stall watch hears from the NICs what they
// resend: each device marks the requests it sends again
// (nic.OutFrame.Round, ConnectedAt), and its host tells the watch of those,
// and of the RNR NAKs it sends, as it puts them on its port (heard),
// reading their BTH and AETH where they lie (wire.Peek) while the bytes
// are in cache. A request sent for the first time, nearly every frame of
// a run, costs the watch nothing: it keeps no record of a flow (sending
// host, destination host, destination QPN: a QPN alone names a QP only
// on its own host) until the flow first resends. Frames no host of the
// world sent (a node added to the fabric directly) are read where the
// fabric records them on their first hop (fabric.Config.ObserveFirst),
// found by their PSNs as before the NICs said (request).
//
//  1. for requests: the NIC's retransmission rounds; rounds that start
//     at the same PSN are counted, with the time of the first and the
//     last, so the interval between them is known (the ACK timeout, or
//     the RNR timer). Without the NIC's word, the next PSN never sent
//     yet: a request below it is a retransmission, and one that does
//     not continue the previous one (PSN+1) starts a round.
//  2. for responses: how many RNR NAKs the host sent to that QP.
//
// When a run is cut off (its event budget spent, or a test's wait),
// Diagnose turns the worst flows into Stalls, each named by the QP that
// keeps retrying, and says which of its attributes makes it go on, equal
// ones in the order their QPs were connected (RTR to RTS; at one instant,
// by host, then destination; QPs refused with RNR NAKs alone after them,
// in the order of their first NAK). The state is one small record per
// flow that resent, found
// through a table indexed by the destination's host and QPN (a map for
// the QPNs beyond it) that is only looked up (never iterated: the
// records sit in a slice in the order they were made), so the diagnosis
// is deterministic; what a fault plan does on the wire (a copy, a
// rewritten PSN) is not the NIC's resending and changes none of it.

// Stall is one pattern that keeps a run going: a QP that retransmits the
// same PSN round after round, or one that is refused with RNR NAKs.
type Stall struct {
	// Host and QPN name the requester QP that retries (QPN 0 if the
	// world could not find it); Peer and PeerQPN its destination.
	Host    string
	QPN     uint32
	Peer    string
	PeerQPN uint32
	// Retransmits is how many go-back-N rounds started at PSN, and
	// Interval the mean time between them.
	PSN         wire.PSN
	Retransmits uint64
	Interval    sim.Duration
	// RNRNAKs is how many RNR NAKs the peer sent to the QP.
	RNRNAKs uint64
	// Cause says what keeps it going and how to end it ("retry_cnt 7
	// retries forever under the rxe profile; set a deadline or a finite
	// retry_cnt").
	Cause string
}

// Describe is the stall as a sentence, with the QP called name ("a.q");
// "" names it by host and QPN ("a QP 0x000011").
func (s *Stall) Describe(name string) string {
	if name == "" {
		name = fmt.Sprintf("%s QP 0x%06x", s.Host, s.QPN)
		if s.QPN == 0 {
			name = fmt.Sprintf("%s's QP to %s QP 0x%06x", s.Host, s.Peer, s.PeerQPN)
		}
	}
	var what string
	if s.RNRNAKs >= s.Retransmits && s.RNRNAKs > 0 {
		what = fmt.Sprintf("%s was refused with %d RNR NAKs by %s", name, s.RNRNAKs, s.Peer)
		if s.Retransmits > 1 {
			what += fmt.Sprintf(", resending PSN %v every %v", s.PSN, s.Interval)
		}
	} else {
		what = fmt.Sprintf("%s retransmitted PSN %v %d times", name, s.PSN, s.Retransmits)
		if s.Retransmits > 1 {
			what += fmt.Sprintf(", every %v", s.Interval)
		}
		if s.RNRNAKs > 0 {
			what += fmt.Sprintf(" (%d RNR NAKs from %s)", s.RNRNAKs, s.Peer)
		}
	}
	if s.Cause != "" {
		what += ": " + s.Cause
	}
	return what
}

// RunawayError is what Run, RunFor, RunUntil and RunTo return when the
// world's event budget (WorldConfig.MaxEvents, or the scheduler's event
// limit) runs out before the run settles. It wraps sim.ErrEventLimit.
type RunawayError struct {
	// Events is how many events had fired, At the virtual time reached,
	// Pending how many events were still scheduled.
	Events  uint64
	At      sim.Time
	Pending int
	// Stalls are the patterns found, worst first (at most three).
	Stalls []Stall
	// Faults summarises what the fault plan did ("the fault plan dropped
	// 12 frames"), or is "".
	Faults string
	// Name, if set, names a QP in Error's message ("a.q"); nil or "" falls
	// back to Stall.Describe's host and QPN.
	Name func(host string, qpn uint32) string
}

// Error says that the budget ran out and what kept the run going.
func (e *RunawayError) Error() string {
	return fmt.Sprintf("%v: %d events fired by %v, %d still pending; %s", sim.ErrEventLimit, e.Events, e.At, e.Pending, e.Why())
}

// Why is the diagnosis alone: what kept the run going.
func (e *RunawayError) Why() string {
	return describe(e.Stalls, e.Faults, e.Name)
}

// Unwrap makes errors.Is(err, sim.ErrEventLimit) hold.
func (e *RunawayError) Unwrap() error { return sim.ErrEventLimit }

func describe(stalls []Stall, faults string, name func(string, uint32) string) string {
	var parts []string
	for i := range stalls {
		n := ""
		if name != nil && stalls[i].QPN != 0 {
			n = name(stalls[i].Host, stalls[i].QPN)
		}
		parts = append(parts, stalls[i].Describe(n))
	}
	if faults != "" {
		parts = append(parts, faults)
	}
	if len(parts) == 0 {
		return "no QP retransmits and no RNR NAK was sent: something else keeps scheduling events (a link held down? a workload step?)"
	}
	return strings.Join(parts, "; ")
}

// qpKey names a QP by its host's index and its QPN, packed in one word so
// that the maps keyed by it take the 64-bit fast path.
func qpKey(host int32, qpn uint32) uint64 { return uint64(uint32(host))<<32 | uint64(qpn) }

// reqFlow is what the world keeps about one requester's flow of requests
// and the RNR NAKs it was sent. A flow is named by its sending host and
// its destination QP (host and QPN): a QPN alone names a QP only on its
// own host, and two QPs of one host may send to QPs of the same number on
// two hosts (every host numbers its QPs from the same first QPN), which
// must stay two flows, each with its own PSNs. The flows are found by
// their destination QP (stallWatch.flowTo), then by sender along
// reqHot.sibling: an RC QP has one requester, so the chain is one flow
// long unless several hosts send to one QP.
type reqFlow struct {
	from, to int32 // host indexes
	destQPN  uint32
	// seenAt is when the flow's QP was connected (what its NIC said,
	// nic.OutFrame.ConnectedAt; for a flow no NIC sends, when its first
	// request was recorded): equal stalls are named in its order.
	seenAt sim.Time
	// nicRound is the NIC's retransmission round of the last request
	// the flow resent (resent): a request of another round starts one.
	nicRound   uint32
	last       wire.PSN // the last retransmitted PSN (a round continues at last+1)
	round      wire.PSN // the PSN the current run of rounds starts at
	rounds     uint64
	first, end sim.Time
	// best is the longest run of rounds at one PSN so far.
	bestPSN    wire.PSN
	bestRounds uint64
	bestFirst  sim.Time
	bestEnd    sim.Time
}

// reqHot is the part of flow i's record (stallWatch.hot[i]) that finds
// the flow and, for a flow no NIC sends (request), tells a new PSN from
// a resent one. Kept apart from reqFlow, four to a cache line; reqFlow
// is made at a flow's first resend (stallWatch.slow). A flow a NIC sends
// has neither until it resends: a world of a million flows that never
// resend keeps none (they cost 24 bytes each when every flow was known
// from its first request, and 80 MB at the alltoall's N = 1024 before
// that).
type reqHot struct {
	from    int32    // the sending host's index
	sibling int32    // the next flow to the same destination QP, or -1
	next    wire.PSN // one past the highest request PSN sent
	seen    bool     // next is set
	retrans bool     // the last request was a retransmission
}

// rnrFlow counts RNR NAKs sent to a requester QP (keyed by the requester's
// host and its own QPN, which the NAK carries).
type rnrFlow struct {
	host, peer int32
	qpn        uint32
	naks       uint64
}

// stallWatch is the world's per-flow record of retransmissions and RNR
// NAKs (see the comment at the top of this file).
type stallWatch struct {
	// byDest[h][qpn] is 1 + the latest flow to QP qpn of host h (0:
	// none), for QPNs below denseQPNs: a slice index where a map lookup
	// would miss the cache once per request frame in a world of
	// thousands of flows. reqIdx, keyed by qpKey, holds the rest (a QPN
	// a fault plan rewrote, a frame to no known host); looked up only.
	byDest [][]int32
	reqIdx map[uint64]int32
	hot    []reqHot
	hotAt  []sim.Time // hotAt[i]: flow i's reqFlow.seenAt, for its record
	// slow[i] is 1 + the index in reqs of flow i's record, 0 until the
	// flow first resends (only a flow no NIC sends is known before);
	// reqs are in the order flows first resent.
	slow   []int32
	reqs   []reqFlow
	rnrIdx map[uint64]int32 // qpKey of the requester QP; looked up only
	rnrs   []rnrFlow
	hostIx map[string]int32 // host name -> index; looked up only
	// nodeHost[i] is the index of the host whose fabric node is node i
	// (Node.Index), as hostIx would give it by the node's name: the
	// world's hosts are its nodes, so a record's sender and destination
	// are found without hashing their names.
	nodeHost []int32
}

// sentFrame is what the watch needs of a frame.
type sentFrame struct {
	destQP uint32
	psn    wire.PSN
	kind   sentKind
}

// sentKind says what the watch does with a frame.
type sentKind uint8

const (
	sentOther   sentKind = iota // not RoCE RC or UC, or neither a request nor an RNR NAK
	sentRequest                 // an RC or UC request
	sentRNRNAK                  // an RC or UC RNR NAK
)

// peekSent reads what the watch needs of a frame.
func peekSent(frame []byte) sentFrame {
	var f sentFrame
	bth, info, aeth, ok := wire.Peek(frame)
	if !ok || info.Transport != wire.TransportRC && info.Transport != wire.TransportUC {
		return f
	}
	switch {
	case info.Kind.IsRequest():
		f.kind = sentRequest
	case info.Kind == wire.KindAck && aeth != nil && aeth.Syndrome().IsRNRNAK():
		f.kind = sentRNRNAK
	default:
		return f
	}
	f.destQP, f.psn = bth.DestQP(), bth.PSN()
	return f
}

// heard is told of a request the NIC of host from resends (round and
// connectedAt: nic.OutFrame.Round, ConnectedAt), or of an RNR NAK it
// sends, to host to, as the host puts it on its port.
func (sw *stallWatch) heard(from, to int32, frame []byte, round uint32, connectedAt, now sim.Time) {
	f := peekSent(frame)
	switch f.kind {
	case sentRequest:
		if round != 0 {
			sw.resent(from, to, f.destQP, f.psn, round, connectedAt, now)
		}
	case sentRNRNAK:
		sw.rnrNAK(from, to, f.destQP)
	}
}

// hostOf returns the index of the host whose fabric node is node, -1 if
// none (a node the world did not add as a host).
func (sw *stallWatch) hostOf(node int32) int32 {
	if sw.hears(node) {
		return sw.nodeHost[node]
	}
	return -1
}

// hears reports whether the frames fabric node node sends are heard from
// its NIC (heard): it is a host's, or a stand-in for a host of another
// part of a cluster (whose frames have their first hop there).
func (sw *stallWatch) hears(node int32) bool {
	return node >= 0 && int(node) < len(sw.nodeHost) && sw.nodeHost[node] != nodeByName
}

// host returns the index of the host of fabric node node, named name:
// from nodeHost for the nodes the world added, by name for any other (a
// node added to the fabric directly, or none: -1 unless a host has that
// name), as every frame was once looked up.
func (sw *stallWatch) host(node int32, name string) int32 {
	if node >= 0 && int(node) < len(sw.nodeHost) && sw.nodeHost[node] != nodeByName {
		return sw.nodeHost[node]
	}
	if i, ok := sw.hostIx[name]; ok {
		return i
	}
	return -1
}

// nodeByName marks a fabric node the world did not add as a host
// (stallWatch.nodeHost).
const nodeByName = -2

// setNodeHost makes host ix the host of fabric node node.
func (sw *stallWatch) setNodeHost(node, ix int32) {
	for int(node) >= len(sw.nodeHost) {
		sw.nodeHost = append(sw.nodeHost, nodeByName)
	}
	sw.nodeHost[node] = ix
}

// frame is the fabric's ObserveFirst: it records one frame on its first
// hop that no host's NIC sent. The frames of a node the watch hears
// (heard) never reach it: World.addPeer marks each such node
// (fabric.Node.SkipObserveFirst) as it tells the watch of it. Only
// requests and RNR NAKs of RC and UC are looked at further, and their
// destination host looked up.
func (sw *stallWatch) frame(r *fabric.FrameRecord) {
	from := sw.host(r.FromNode, r.From)
	f := peekSent(r.Frame)
	switch f.kind {
	case sentRequest:
		if r.Copy > 0 {
			return // a copy the fault plan made is not the sender's retransmission
		}
		sw.request(from, sw.host(r.ToNode, r.To), f.destQP, f.psn, r.Time)
	case sentRNRNAK:
		sw.rnrNAK(from, sw.host(r.ToNode, r.To), f.destQP)
	}
}

// rnrNAK counts an RNR NAK host from sent to QP qpn of host to: the
// NAK's destination QP is the requester's own QP on the host the NAK
// reaches, one QP, one count.
func (sw *stallWatch) rnrNAK(from, to int32, qpn uint32) {
	k := qpKey(to, qpn)
	i, ok := sw.rnrIdx[k]
	if !ok {
		i = int32(len(sw.rnrs))
		sw.rnrIdx[k] = i
		sw.rnrs = append(sw.rnrs, rnrFlow{host: to, peer: from, qpn: qpn})
	}
	sw.rnrs[i].naks++
}

// request records a request of flow (from, to, destQPN) with PSN psn.
//
// It is the watch's judgement for a frame no NIC marked (frame): by the
// PSNs the flow has sent.
func (sw *stallWatch) request(from, to int32, destQPN uint32, psn wire.PSN, now sim.Time) {
	i := sw.flow(from, to, destQPN, now)
	h := &sw.hot[i]
	if !h.seen || !psn.Less(h.next) {
		h.next, h.seen, h.retrans = psn.Next(), true, false
		return
	}
	f := sw.record(i, from, to, destQPN)
	continues := h.retrans && psn == f.last.Next()
	f.last, h.retrans = psn, true
	if !continues {
		f.startRound(psn, now)
	}
}

// resent records a request of flow (from, to, destQPN), PSN psn, that
// its NIC resends in its retransmission round round, the flow's QP
// having been connected at connectedAt: the round's first request
// starts a go-back-N round of the flow, the others continue it.
func (sw *stallWatch) resent(from, to int32, destQPN uint32, psn wire.PSN, round uint32, connectedAt, now sim.Time) {
	i := sw.flow(from, to, destQPN, connectedAt)
	f := sw.record(i, from, to, destQPN)
	continues := f.nicRound == round
	if f.seenAt != connectedAt {
		// The QP was reset and connected again to the same QP: its
		// NIC numbers its rounds from 1 again, and a run of rounds
		// does not span the two connections.
		f.seenAt, f.rounds, continues = connectedAt, 0, false
	}
	f.last, f.nicRound = psn, round
	if !continues {
		f.startRound(psn, now)
	}
}

// flow returns the index of flow (from, to, destQPN), which it makes if
// it is new, its order among equal stalls seen (reqFlow.seenAt): at the
// head of its destination's chain.
func (sw *stallWatch) flow(from, to int32, destQPN uint32, seen sim.Time) int32 {
	head, known := sw.flowTo(to, destQPN)
	if known {
		for j := head; j >= 0; j = sw.hot[j].sibling {
			if sw.hot[j].from == from {
				return j
			}
		}
	}
	sibling := int32(-1)
	if known {
		sibling = head
	}
	i := int32(len(sw.hot))
	sw.setFlowTo(to, destQPN, i)
	sw.hot = append(sw.hot, reqHot{from: from, sibling: sibling})
	sw.hotAt = append(sw.hotAt, seen)
	sw.slow = append(sw.slow, 0)
	return i
}

// record returns the record of the rounds of flow i, (from, to,
// destQPN), made at its first resend.
func (sw *stallWatch) record(i, from, to int32, destQPN uint32) *reqFlow {
	if sw.slow[i] == 0 {
		sw.reqs = append(sw.reqs, reqFlow{from: from, to: to, destQPN: destQPN, seenAt: sw.hotAt[i]})
		sw.slow[i] = int32(len(sw.reqs))
	}
	return &sw.reqs[sw.slow[i]-1]
}

// startRound starts a go-back-N round at psn, at now: the requester
// resends from the oldest unacknowledged PSN (rxe's req_retry), so the
// rounds of one stall start at the same PSN.
func (f *reqFlow) startRound(psn wire.PSN, now sim.Time) {
	if f.rounds > 0 && psn == f.round {
		f.rounds++
		f.end = now
	} else {
		f.round, f.rounds, f.first, f.end = psn, 1, now, now
	}
	if f.rounds > f.bestRounds {
		f.bestPSN, f.bestRounds, f.bestFirst, f.bestEnd = f.round, f.rounds, f.first, f.end
	}
}

// denseQPNs bounds the QPNs stallWatch.byDest indexes: every QPN a device
// hands out while it has fewer than 65536 QPs (nic numbers them from 0x11
// upward, rxe's xa_alloc_cyclic), in at most 256 KiB per host.
const denseQPNs = 1 << 16

// flowTo returns the latest flow to QP qpn of host h, if any.
func (sw *stallWatch) flowTo(h int32, qpn uint32) (int32, bool) {
	if h < 0 || qpn >= denseQPNs {
		i, ok := sw.reqIdx[qpKey(h, qpn)]
		return i, ok
	}
	if int(h) < len(sw.byDest) {
		if t := sw.byDest[h]; int(qpn) < len(t) && t[qpn] != 0 {
			return t[qpn] - 1, true
		}
	}
	return -1, false
}

// setFlowTo makes flow i the latest to QP qpn of host h.
func (sw *stallWatch) setFlowTo(h int32, qpn uint32, i int32) {
	if h < 0 || qpn >= denseQPNs {
		sw.reqIdx[qpKey(h, qpn)] = i
		return
	}
	if int(h) >= len(sw.byDest) {
		sw.byDest = append(sw.byDest, make([][]int32, int(h)+1-len(sw.byDest))...)
	}
	t := sw.byDest[h]
	if int(qpn) >= len(t) {
		t = append(t, make([]int32, int(qpn)+1-len(t))...)
		sw.byDest[h] = t
	}
	t[qpn] = i + 1
}

// maxStalls is how many stalls a diagnosis names.
const maxStalls = 3

// Stalls returns what keeps the run going, worst first: the QPs that
// retransmit one PSN round after round, or are refused with RNR NAKs, at
// least three times (at most three QPs; none if no QP did).
func (w *World) Stalls() []Stall { return worst(w.stalls()) }

// stalls is every pattern the world's watch holds, each with its cause
// where the world has the requester QP, in the order their QPs were
// connected (seenOrder).
func (w *World) stalls() []Stall {
	sw := &w.watch
	var out []Stall
	for _, k := range sw.seenOrder() {
		f := &sw.reqs[k]
		if f.bestRounds == 0 {
			continue
		}
		s := Stall{Host: w.hostName(f.from), Peer: w.hostName(f.to), PeerQPN: f.destQPN,
			PSN: f.bestPSN, Retransmits: f.bestRounds}
		if f.bestRounds > 1 {
			s.Interval = f.bestEnd.Sub(f.bestFirst) / sim.Duration(f.bestRounds-1)
		}
		qp := w.requesterQP(f.from, f.to, f.destQPN)
		if qp != nil {
			s.QPN = qp.Num()
		}
		for j := range sw.rnrs {
			if r := &sw.rnrs[j]; r.host == f.from && qp != nil && r.qpn == qp.Num() {
				s.RNRNAKs = r.naks
			}
		}
		s.Cause = w.cause(qp, &s)
		out = append(out, s)
	}
	for j := range sw.rnrs {
		r := &sw.rnrs[j]
		known := false
		for i := range out {
			if out[i].Host == w.hostName(r.host) && out[i].QPN == r.qpn {
				known = true
			}
		}
		if known {
			continue
		}
		s := Stall{Host: w.hostName(r.host), QPN: r.qpn, Peer: w.hostName(r.peer), RNRNAKs: r.naks}
		s.Cause = w.cause(w.qpByNum(r.host, r.qpn), &s)
		out = append(out, s)
	}
	return out
}

// seenOrder returns the indexes of the flows' records in the order their
// QPs were connected (reqFlow.seenAt), at one instant by sending host,
// then destination host and QPN: the order equal stalls are named in.
func (sw *stallWatch) seenOrder() []int {
	order := make([]int, len(sw.reqs))
	for i := range order {
		order[i] = i
	}
	slices.SortStableFunc(order, func(a, b int) int {
		x, y := &sw.reqs[a], &sw.reqs[b]
		return cmp.Or(cmp.Compare(x.seenAt, y.seenAt), cmp.Compare(x.from, y.from), cmp.Compare(x.to, y.to), cmp.Compare(x.destQPN, y.destQPN))
	})
	return order
}

// worst orders patterns worst first and keeps the ones that repeat, at
// most maxStalls.
func worst(out []Stall) []Stall {
	// Worst first: the most rounds or RNR NAKs; a stable insertion sort
	// keeps seenOrder among equals.
	weight := func(s *Stall) uint64 { return max(s.Retransmits, s.RNRNAKs) }
	for i := 1; i < len(out); i++ {
		for j := i; j > 0 && weight(&out[j]) > weight(&out[j-1]); j-- {
			out[j], out[j-1] = out[j-1], out[j]
		}
	}
	// A pattern is something that repeats: a QP that resent once or
	// twice is not what keeps a run going (a flood of copies may be).
	n := 0
	for n < len(out) && weight(&out[n]) >= minStallRepeats {
		n++
	}
	return out[:min(n, maxStalls)]
}

// minStallRepeats is how often a QP must have resent one PSN, or been
// refused, for Stalls to name it.
const minStallRepeats = 3

// cause says which attribute of qp lets the stall go on for ever.
func (w *World) cause(qp *nic.QP, s *Stall) string {
	if qp == nil {
		return ""
	}
	attr, _ := qp.Query()
	if s.RNRNAKs > 0 && s.RNRNAKs >= s.Retransmits {
		if attr.RNRRetry == 7 {
			return fmt.Sprintf("rnr_retry 7 retries forever and %s never has a receive posted for it; post a receive, set a deadline or a finite rnr_retry", s.Peer)
		}
		return fmt.Sprintf("rnr_retry %d", attr.RNRRetry)
	}
	if attr.RetryCnt == 7 && w.cfg.Profile == nic.ProfileRXE {
		return "retry_cnt 7 retries forever under the rxe profile; set a deadline or a finite retry_cnt"
	}
	return fmt.Sprintf("retry_cnt %d, state %v: %s never acknowledges it", attr.RetryCnt, qp.State(), s.Peer)
}

// requesterQP finds the QP on host from whose destination is destQPN on
// host to (the same QPN may exist on several hosts: the GID tells).
func (w *World) requesterQP(from, to int32, destQPN uint32) *nic.QP {
	if from < 0 || int(from) >= len(w.peers) || w.peers[from].h == nil {
		return nil
	}
	var gids []string
	if to >= 0 && int(to) < len(w.peers) {
		p := &w.peers[to]
		pg := p.gids
		if p.h != nil {
			pg = p.h.dev.GIDs()
		}
		for _, g := range pg {
			gids = append(gids, g.Unmap().String())
		}
	}
	var found *nic.QP
	w.peers[from].h.dev.EachQP(func(qp *nic.QP) {
		if found != nil {
			return
		}
		attr, _ := qp.Query()
		if attr.DestQPNum != destQPN {
			return
		}
		dgid := attr.AHAttr.GRH.DGID.Unmap().String()
		for _, g := range gids {
			if g == dgid {
				found = qp
			}
		}
		if len(gids) == 0 {
			found = qp
		}
	})
	return found
}

// qpByNum finds QP qpn on host h.
func (w *World) qpByNum(h int32, qpn uint32) *nic.QP {
	if h < 0 || int(h) >= len(w.peers) || w.peers[h].h == nil {
		return nil
	}
	var found *nic.QP
	w.peers[h].h.dev.EachQP(func(qp *nic.QP) {
		if qp.Num() == qpn {
			found = qp
		}
	})
	return found
}

func (w *World) hostName(i int32) string {
	if i < 0 || int(i) >= len(w.peers) {
		return "?"
	}
	return w.peers[i].name
}

// FaultSummary says what the fault plan did to the frames so far ("the
// fault plan dropped 12 frames, duplicated 3"), or "" if nothing.
func (w *World) FaultSummary() string { return w.faultCounts().String() }

// faultCounts is what the fault plan did, summed over the links.
type faultCounts struct{ drops, dups, alters, queue uint64 }

func (w *World) faultCounts() faultCounts {
	var c faultCounts
	for _, l := range w.fab.Links() {
		for dir := range 2 {
			st := l.Stats(dir)
			c.add(faultCounts{st.FaultDrops, st.Duplicated, st.Altered, st.QueueDrops})
		}
	}
	return c
}

func (c *faultCounts) add(o faultCounts) {
	c.drops, c.dups, c.alters, c.queue = c.drops+o.drops, c.dups+o.dups, c.alters+o.alters, c.queue+o.queue
}

// String is FaultSummary's sentence.
func (c faultCounts) String() string {
	var parts []string
	if c.drops > 0 {
		parts = append(parts, fmt.Sprintf("dropped %d frames", c.drops))
	}
	if c.alters > 0 {
		parts = append(parts, fmt.Sprintf("corrupted, truncated or rewrote %d", c.alters))
	}
	if c.dups > 0 {
		parts = append(parts, fmt.Sprintf("made %d extra copies", c.dups))
	}
	if len(parts) == 0 {
		return ""
	}
	s := "the fault plan " + strings.Join(parts, ", ")
	if c.queue > 0 {
		s += fmt.Sprintf(" (%d frames tail-dropped at full queues)", c.queue)
	}
	return s
}

// Diagnose says what keeps the run going: Stalls and FaultSummary as one
// line, with QPs named by name (nil: by host and QPN).
func (w *World) Diagnose(name func(host string, qpn uint32) string) string {
	return describe(w.Stalls(), w.FaultSummary(), name)
}

// runaway builds the error for a run whose budget ran out.
func (w *World) runaway() error {
	return &RunawayError{Events: w.sched.Fired(), At: w.sched.Now(), Pending: w.sched.Pending(),
		Stalls: w.Stalls(), Faults: w.FaultSummary(), Name: w.cfg.QPName}
}

// Progress is what WorldConfig.Progress is told while a run goes on.
type Progress struct {
	Now    sim.Time // virtual time reached
	Events uint64   // events fired so far
	Frames uint64   // frames put on a link or dropped so far, per hop
}

// progressEvery is how many events pass between calls of
// WorldConfig.Progress (a few milliseconds of wall time).
const progressEvery = 1 << 16

// Frames returns how many frames the fabric put on a link or dropped so
// far, per hop (a frame through a switch counts twice).
func (w *World) Frames() uint64 {
	var n uint64
	for _, l := range w.fab.Links() {
		for dir := range 2 {
			st := l.Stats(dir)
			n += st.TxFrames + st.QueueDrops + st.FaultDrops + st.MTUDrops
		}
	}
	return n
}

// RunTo runs every event due at or before t, then moves the clock to t
// (unless t is sim.Never). It fails with a *RunawayError when the event
// budget (WorldConfig.MaxEvents, or the scheduler's event limit) runs out
// first; WorldConfig.Progress is called every 65536 events meanwhile.
func (w *World) RunTo(t sim.Time) error {
	if err := w.partOnly("RunTo"); err != nil {
		return err
	}
	return w.run(t, true)
}

// run is RunTo; with advance false it leaves the clock at the last event
// fired rather than at t (a cluster's step, Cluster.RunTo).
func (w *World) run(t sim.Time, advance bool) error {
	// A large world's fabric and devices copy frames and payloads with
	// non-temporal stores, unfenced (internal/ntcopy): a run ends with
	// them visible to every core, for the goroutine that reads the
	// receive areas next, or a cluster's part that takes this step's
	// frames, whatever else synchronizes them.
	defer fence()
	s := w.sched
	total := s.EventLimit()
	for {
		end, final := s.Fired()+progressEvery, false
		if total != 0 && total <= end {
			end, final = total, true
		}
		s.SetEventLimit(end)
		var err error
		if advance {
			err = s.RunUntil(t)
		} else {
			err = s.RunThrough(t)
		}
		s.SetEventLimit(total)
		if err == nil {
			return nil
		}
		if !errors.Is(err, sim.ErrEventLimit) {
			return err
		}
		if final {
			return w.runaway()
		}
		if w.cfg.Progress != nil {
			w.cfg.Progress(Progress{Now: s.Now(), Events: s.Fired(), Frames: w.Frames()})
		}
	}
}
