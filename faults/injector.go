package faults

import (
	"math/rand/v2"
	"strconv"

	"github.com/rocesim/rocesim/sim"
	"github.com/rocesim/rocesim/wire"
)

// Deciding one frame on one hop (Decide), in order:
//
//  1. Link events, in plan order: a down event covering this hop's link at
//     now, or a partition active at now that puts Hop.From and Hop.To in
//     different groups, drops the frame (on every hop, so a frame queued
//     before the link went down is still caught at the next one).
//  2. Frame rules, in plan order. A rule without link= is judged only on
//     the frame's first hop; with link=X only on hops over X.
//  3. For each rule, the deterministic keys (time window, nodes, QPN,
//     opcode, class, PSN, tx) and the action's own precondition (see
//     applies); only if all hold, the stateful keys in the order nth,
//     prob, first — each advancing or drawing only for frames that passed
//     everything before it.
//  4. The first rule that passes acts: Corrupt and Rewrite change the
//     frame in place, the others only describe what the fabric must do.
//
// Nothing in this path allocates.

// Hop describes a frame at the moment it enters a link.
type Hop struct {
	Link  string // the link's name, e.g. "a-b" or "a-sw"
	From  string // node that originally sent the frame
	To    string // node the frame is addressed to ("" if unknown)
	First bool   // true on the sender's own link (the frame's first hop), false at a switch egress
	Tx    int    // which transmission of this PSN the frame is (1 = first); from CountTx on the first hop, carried to later hops
}

// Verdict is what the plan decides for one frame on one hop.
type Verdict struct {
	Action ActionKind
	// Rule is the 1-based index in Plan.Rules of the rule that decided
	// (frame rules and link events numbered together); 0 if none matched.
	Rule int
	// Copies is, for Duplicate, how many extra copies to send.
	Copies int
	// Delay is, for Delay, how long to hold the frame before it enters the link.
	Delay sim.Duration
	// Hold is, for Reorder, how many later frames must enter the same link
	// in the same direction before this one does.
	Hold int
	// Len is, for Truncate, the frame's new length: cut it to frame[:Len].
	Len int
	// Text is the deciding rule's canonical text ("drop psn=2 tx=1").
	Text string
	// Cut is set (Cut.Rule > 0) when a "down after=K" event took its
	// link down with this frame, the K-th it let through: the fabric
	// reports the change as it does a timed one.
	Cut LinkChange
}

// String describes the verdict for traces and capture comments: "dropped
// by rule 3: drop psn=2 tx=1", or "passed" when no rule acted.
func (v Verdict) String() string {
	if v.Action == Pass || v.Action >= numActions {
		return "passed"
	}
	return actionPast[v.Action] + " by rule " + strconv.Itoa(v.Rule) + ": " + v.Text
}

// CopyNote is the comment on the i-th extra copy (from 1) a Duplicate
// verdict made: "copy 1 of 2 made by rule 3: dup copies=2".
func (v Verdict) CopyNote(i int) string {
	return "copy " + strconv.Itoa(i) + " of " + strconv.Itoa(v.Copies) + " made by rule " + strconv.Itoa(v.Rule) + ": " + v.Text
}

// Injector is the runtime state of one plan on one fabric: the rules'
// counters, the random stream prob= draws from and the transmission
// counts of CountTx. It is not safe for concurrent use (nothing in a
// simulation is concurrent).
type Injector struct {
	rules  []Rule
	texts  []string
	events []int // indexes of the link events in rules
	frames []int // indexes of the frame rules in rules
	state  []ruleState
	rng    *rand.Rand
	tx     txFlows // CountTx's windows

	scratch wire.Packet // decodes a frame after fix recomputes its lengths
}

// ruleState is a frame rule's counters.
type ruleState struct {
	seen uint64 // frames that reached nth= (all deterministic keys held)
	used uint64 // frames that passed nth= and prob= (counted against first=)
	hits uint64 // times the rule acted
	cut  bool   // a down after= event: its K frames have passed, the link is down
}

// NewInjector prepares p to judge frames. rng is the stream prob= draws
// from: the "faults" stream of the simulation's sim.Seeds. A nil plan
// passes every frame. The injector keeps its own copy of the plan.
//
// NewInjector panics if p is invalid (see Plan.Validate; Parse never
// returns an invalid plan) or if p uses prob= and rng is nil.
func NewInjector(p *Plan, rng *rand.Rand) *Injector {
	in := &Injector{rng: rng, tx: newTxFlows()}
	in.SetPlan(p)
	return in
}

// SetPlan replaces the plan the injector applies, for a plan changed in
// the middle of a run. The new rules start with fresh counters (nth=,
// first=, Hits); the random stream and the transmission counts of CountTx
// carry on, since they belong to the traffic, not to the plan: a
// retransmission sent after the change is still tx=2. It panics as
// NewInjector does on an invalid plan or a prob= rule without rng.
func (in *Injector) SetPlan(p *Plan) {
	in.rules, in.texts, in.events, in.frames, in.state = nil, nil, nil, nil, nil
	if p == nil {
		return
	}
	if err := p.Validate(); err != nil {
		panic(err.Error() + " (check plans built in Go with Plan.Validate)")
	}
	n := len(p.Rules)
	in.rules = make([]Rule, n)
	in.texts = make([]string, n)
	in.state = make([]ruleState, n)
	for i, r := range p.Rules {
		if r.Match.PSN != nil {
			psn := *r.Match.PSN
			r.Match.PSN = &psn
		}
		if r.Groups != nil {
			g := make([][]string, len(r.Groups))
			for j := range g {
				g[j] = append([]string(nil), r.Groups[j]...)
			}
			r.Groups = g
		}
		in.rules[i] = r
		in.texts[i] = r.String()
		if r.Event != EventNone {
			in.events = append(in.events, i)
			continue
		}
		in.frames = append(in.frames, i)
		if r.Match.Prob != 0 && in.rng == nil {
			panic("faults: NewInjector: rule " + strconv.Itoa(i+1) + " uses prob= but rng is nil (pass the \"faults\" stream of sim.Seeds)")
		}
	}
}

// Decide judges frame as it enters hop.Link at now and returns the
// verdict. pkt is frame decoded with wire.Packet.DecodeHeaders, or nil if
// the frame is not RoCE v2 (then only link=, dir=, src=, dst=, from=, to=
// and the stateful keys can match it). Corrupt and Rewrite modify frame
// in place before Decide returns; unless the rule says fix=none, Rewrite
// recomputes the IPv4 header checksum, the ICRC and a non-zero UDP
// checksum so the rewritten frame is valid, and Truncate makes the IP
// and UDP lengths, the IPv4 checksum and the ICRC describe
// frame[:Verdict.Len] (the fabric then cuts it there).
//
// Each call on a first hop or on a link= rule's link can advance counters
// and draw from the random stream, so the fabric calls Decide exactly once
// per frame per hop; copies made by Duplicate and frames released after
// Delay or Reorder are not decided again on the same hop.
func (in *Injector) Decide(now sim.Time, hop Hop, frame []byte, pkt *wire.Packet) Verdict {
	if in == nil {
		return Verdict{}
	}
	if pkt != nil && (pkt.BTH == nil || pkt.Info == nil) {
		pkt = nil // not decoded: treat as non-RoCE
	}
	var cut LinkChange
	for _, i := range in.events {
		r := &in.rules[i]
		if !r.Match.inWindow(now) {
			continue
		}
		if r.After != 0 {
			if r.Match.Link != hop.Link {
				continue
			}
			st := &in.state[i]
			if st.cut {
				st.hits++
				return Verdict{Action: Drop, Rule: i + 1, Text: in.texts[i]}
			}
			if pkt != nil {
				st.seen++
				if st.seen >= uint64(r.After) {
					// This frame is the K-th: it passes, and the link
					// is down from now on.
					st.cut = true
					st.hits++ // the cut is a decision too: the rule has acted
					cut = LinkChange{Time: now, Link: r.Match.Link, Rule: i + 1, Text: in.texts[i]}
				}
			}
			continue
		}
		if r.Event == EventDown && r.Match.Link == hop.Link ||
			r.Event == EventPartition && separates(r.Groups, hop.From, hop.To) {
			in.state[i].hits++
			return Verdict{Action: Drop, Rule: i + 1, Text: in.texts[i]}
		}
	}
	for _, i := range in.frames {
		r := &in.rules[i]
		if !r.matches(now, &hop, pkt) || !r.applies(frame, pkt) || !in.pass(r, &in.state[i]) {
			continue
		}
		in.state[i].hits++
		v := in.act(i, frame, pkt)
		v.Cut = cut
		return v
	}
	return Verdict{Cut: cut}
}

// inWindow reports whether now lies in [From, To) (To 0: no end).
func (m *Match) inWindow(now sim.Time) bool {
	return now >= m.From && (m.To == 0 || now < m.To)
}

// matches evaluates the deterministic match keys.
func (r *Rule) matches(now sim.Time, hop *Hop, pkt *wire.Packet) bool {
	return r.Match.Matches(now, hop, pkt)
}

// Matches reports whether the deterministic keys of m (link dir src dst
// qp op class cm psn tx from to) hold for a frame on hop at now; pkt is the
// frame decoded with wire.Packet.DecodeHeaders, or nil if it is not RoCE
// v2. The stateful keys (nth prob first) are not evaluated: they belong
// to an Injector. As in a plan, a Match without link= holds only on a
// frame's first hop. Tools that look back at recorded frames (a test's
// "how many NAKs did b send?") use it with a Match from ParseMatch.
func (m *Match) Matches(now sim.Time, hop *Hop, pkt *wire.Packet) bool {
	if m.Link == "" {
		if !hop.First {
			return false
		}
	} else if m.Link != hop.Link {
		return false
	}
	if !m.inWindow(now) {
		return false
	}
	if m.Dir.From != "" && (hop.From != m.Dir.From || hop.To != m.Dir.To) {
		return false
	}
	if m.Src != "" && hop.From != m.Src || m.Dst != "" && hop.To != m.Dst {
		return false
	}
	if !m.HasQP && !m.HasOp && m.Class == ClassAny && m.CM == 0 && m.PSN == nil && m.Tx == 0 {
		return true
	}
	if pkt == nil {
		return false
	}
	if m.HasQP && pkt.BTH.DestQP() != m.QP {
		return false
	}
	if m.HasOp && pkt.BTH.Opcode() != m.Op {
		return false
	}
	if m.Class != ClassAny && !classMatches(m.Class, pkt) {
		return false
	}
	if m.CM != 0 && !cmMatches(m.CM, pkt) {
		return false
	}
	if m.PSN != nil && !pkt.BTH.PSN().InRange(m.PSN.First, m.PSN.Last) {
		return false
	}
	return m.Tx == 0 || hop.Tx == m.Tx
}

// cmMatches reports whether pkt is a CM MAD carrying message attr: a UD
// SEND to QP1 (the GSI QP, IBTA §13.5.1) whose payload is a CM Send MAD
// with that attribute ID (IBTA §12.6).
func cmMatches(attr wire.CMAttr, pkt *wire.Packet) bool {
	if pkt.Info.Transport != wire.TransportUD || pkt.BTH.DestQP() != wire.GSIQPN {
		return false
	}
	return wire.MAD(pkt.Payload).CMAttr() == attr
}

// classMatches reports whether pkt belongs to class c.
func classMatches(c Class, pkt *wire.Packet) bool {
	k := pkt.Info.Kind
	switch c {
	case ClassRequest:
		return k.IsRequest()
	case ClassResponse:
		return k.IsResponse()
	case ClassAck, ClassNAK, ClassRNR:
		if k != wire.KindAck || pkt.AETH == nil {
			return false
		}
		s := pkt.AETH.Syndrome()
		switch c {
		case ClassAck:
			return s.IsACK()
		case ClassNAK:
			return s.IsNAK()
		default:
			return s.IsRNRNAK()
		}
	case ClassReadResponse:
		return k == wire.KindReadResponse
	case ClassAtomic:
		return k == wire.KindCompareSwap || k == wire.KindFetchAdd || k == wire.KindAtomicAck
	case ClassUD:
		return pkt.Info.Transport == wire.TransportUD
	case ClassCNP:
		return k == wire.KindCNP
	}
	return false
}

// applies reports whether the action can act on this frame: corrupt needs
// its byte inside the frame, truncate a frame longer than the result,
// rewrite a RoCE frame carrying every field it assigns (an AETH for
// set-syndrome= and set-msn=). A rule whose action does not apply does
// not match, and its stateful keys do not advance.
func (r *Rule) applies(frame []byte, pkt *wire.Packet) bool {
	switch r.Action {
	case Corrupt:
		if r.HasByte {
			return r.Byte < len(frame)
		}
		return len(frame) > 0
	case Truncate:
		if r.Len != 0 {
			return len(frame) > r.Len
		}
		return len(frame) > r.Cut
	case Rewrite:
		if pkt == nil || pkt.ICRC == nil {
			return false
		}
		if (r.SetSyndrome.Mode != AssignNone || r.SetMSN.Mode != AssignNone) && pkt.AETH == nil {
			return false
		}
		if !r.extraApplies(pkt) {
			return false
		}
	}
	return true
}

// pass evaluates the stateful keys nth, prob, first, in that order, for a
// frame that matched everything else.
func (in *Injector) pass(r *Rule, st *ruleState) bool {
	m := &r.Match
	if m.First != 0 && st.used >= uint64(m.First) {
		return false // spent for good: no counting, no draw
	}
	if m.Nth != 0 {
		st.seen++
		if st.seen%uint64(m.Nth) != 0 {
			return false
		}
	}
	if m.Prob != 0 && !(in.rng.Float64() < m.Prob) {
		return false
	}
	st.used++
	return true
}

// act applies rule i's action to the frame and returns the verdict.
func (in *Injector) act(i int, frame []byte, pkt *wire.Packet) Verdict {
	r := &in.rules[i]
	v := Verdict{Action: r.Action, Rule: i + 1, Text: in.texts[i]}
	switch r.Action {
	case Duplicate:
		v.Copies = r.Copies
	case Delay:
		v.Delay = r.Delay
	case Reorder:
		v.Hold = r.Hold
	case Truncate:
		v.Len = r.Len
		if r.Len == 0 {
			v.Len = len(frame) - r.Cut
		}
		if r.Fix == FixAll && pkt != nil {
			// The frame is cut in place by the fabric; its headers are
			// made to describe what is left.
			fix(frame[:v.Len], pkt, &in.scratch)
		}
	case Corrupt:
		bit := byte(1) << r.Bit
		switch {
		case r.HasByte:
			frame[r.Byte] ^= bit
		case pkt != nil && pkt.ICRC != nil:
			pkt.ICRC[0] ^= bit // the ICRC no longer verifies; nothing else changes
		default:
			frame[len(frame)-1] ^= bit
		}
	case Rewrite:
		bth := pkt.BTH
		switch r.SetPSN.Mode {
		case AssignSet:
			bth.SetPSN(wire.PSN(r.SetPSN.Value))
		case AssignAdd:
			bth.SetPSN(bth.PSN().Add(uint32(r.SetPSN.Value)))
		}
		if r.SetSyndrome.Mode == AssignSet {
			pkt.AETH.SetSyndrome(wire.Syndrome(r.SetSyndrome.Value))
		}
		switch r.SetMSN.Mode {
		case AssignSet:
			pkt.AETH.SetMSN(uint32(r.SetMSN.Value))
		case AssignAdd:
			pkt.AETH.SetMSN((pkt.AETH.MSN() + uint32(r.SetMSN.Value)) & wire.PSNMask)
		}
		if r.SetOpcode.Mode == AssignSet {
			bth.SetOpcode(wire.Opcode(r.SetOpcode.Value))
		}
		r.rewriteExtra(pkt)
		if r.Fix == FixAll {
			fix(frame, pkt, &in.scratch)
		}
	}
	return v
}

// separates reports whether a and b are in different groups.
func separates(groups [][]string, a, b string) bool {
	ga := groupOf(groups, a)
	if ga < 0 {
		return false
	}
	gb := groupOf(groups, b)
	return gb >= 0 && gb != ga
}

// LinkUp reports whether link is up at now: no down event covers it.
func (in *Injector) LinkUp(now sim.Time, link string) bool {
	if in == nil {
		return true
	}
	for _, i := range in.events {
		r := &in.rules[i]
		if r.Event == EventDown && r.Match.Link == link && r.Match.inWindow(now) && (r.After == 0 || in.state[i].cut) {
			return false
		}
	}
	return true
}

// Partitioned reports whether a partition active at now separates nodes
// from and to (in either direction).
func (in *Injector) Partitioned(now sim.Time, from, to string) bool {
	if in == nil {
		return false
	}
	for _, i := range in.events {
		r := &in.rules[i]
		if r.Event == EventPartition && r.Match.inWindow(now) && separates(r.Groups, from, to) {
			return true
		}
	}
	return false
}

// Hits returns how many times rule (1-based, as in Verdict.Rule) has
// decided a frame: acted, for a frame rule; dropped, for a link event.
// It returns 0 for a rule number outside the plan.
func (in *Injector) Hits(rule int) uint64 {
	if in == nil || rule < 1 || rule > len(in.state) {
		return 0
	}
	return in.state[rule-1].hits
}

// FrameDecoder decodes recorded frames for Match.Matches, reusing one
// buffer, for tools that look back at frames (an "expect frames" claim)
// without importing package wire themselves.
type FrameDecoder struct{ pkt wire.Packet }

// Decode returns frame's headers (wire.Packet.DecodeHeaders), or nil if
// frame is not RoCE v2. The result is valid until the next Decode.
func (d *FrameDecoder) Decode(frame []byte) *wire.Packet {
	if d.pkt.DecodeHeaders(frame) != nil {
		return nil
	}
	return &d.pkt
}
