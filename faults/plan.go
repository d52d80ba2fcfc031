package faults

import (
	"math"
	"strconv"

	"github.com/rocesim/rocesim/sim"
	"github.com/rocesim/rocesim/wire"
)

// Plan is a fault plan: an ordered list of rules. A rule is either a frame
// rule (Action is set: drop, dup, delay, reorder, corrupt, truncate,
// rewrite) or a link event (Event is set: down, partition). Rules are
// numbered from 1 in this order, frame rules and link events together;
// that number is the one a Verdict and a LinkChange carry, and it is the
// rule's position among the non-blank, non-comment lines of the plan's
// text.
//
// A Plan is plain data: build it in Go or with Parse, print it with
// String. Plans built in Go are checked by Validate (and by NewInjector,
// which panics on an invalid plan).
type Plan struct {
	Rules []Rule
}

// ActionKind is what a frame rule does to the frames it matches, and what
// a Verdict tells the fabric to do. The zero value, Pass, is "leave the
// frame alone".
type ActionKind uint8

// Actions. The order is fixed: traces and tests depend on it.
const (
	Pass      ActionKind = iota // let the frame through unchanged
	Drop                        // discard the frame
	Duplicate                   // send the frame and Verdict.Copies extra copies
	Delay                       // hold the frame Verdict.Delay before it enters the link
	Reorder                     // hold the frame until Verdict.Hold later frames have entered the link
	Corrupt                     // one bit of the frame was flipped in place
	Truncate                    // cut the frame to Verdict.Len bytes
	Rewrite                     // header fields were rewritten in place and the ICRC recomputed
	numActions
)

var actionNames = [numActions]string{"pass", "drop", "dup", "delay", "reorder", "corrupt", "truncate", "rewrite"}

var actionPast = [numActions]string{"passed", "dropped", "duplicated", "delayed", "reordered", "corrupted", "truncated", "rewritten"}

// String returns the action's verb as a plan writes it: "drop", "dup", ...
func (a ActionKind) String() string {
	if a < numActions {
		return actionNames[a]
	}
	return "action(" + strconv.Itoa(int(a)) + ")"
}

// EventKind marks a rule as a link event rather than a frame rule.
type EventKind uint8

// Link events.
const (
	EventNone      EventKind = iota // a frame rule
	EventDown                       // down link=X: every frame entering link X is dropped
	EventPartition                  // partition a,b|c,d: frames between the groups are dropped
	numEvents
)

var eventNames = [numEvents]string{"", "down", "partition"}

// String returns the event's verb ("down", "partition"; "" for EventNone).
func (e EventKind) String() string {
	if e < numEvents {
		return eventNames[e]
	}
	return "event(" + strconv.Itoa(int(e)) + ")"
}

// Class is a coarse kind of RoCE packet, the value of the class= key.
type Class uint8

// Classes. ClassAny (the zero value) means the key is absent.
const (
	ClassAny          Class = iota
	ClassRequest            // SEND, WRITE, READ request, CMP_SWAP, FETCH_ADD (RC, UC and UD)
	ClassResponse           // ACKNOWLEDGE (any syndrome), READ responses, ATOMIC_ACKNOWLEDGE
	ClassAck                // ACKNOWLEDGE with a positive (ACK) syndrome
	ClassNAK                // ACKNOWLEDGE with a NAK syndrome other than RNR
	ClassRNR                // ACKNOWLEDGE with an RNR NAK syndrome
	ClassReadResponse       // RDMA READ response first/middle/last/only
	ClassAtomic             // CMP_SWAP and FETCH_ADD requests and ATOMIC_ACKNOWLEDGE
	ClassUD                 // UD transport
	ClassCNP                // RoCE v2 congestion notification packet
	numClasses
)

var classNames = [numClasses]string{"any", "request", "response", "ack", "nak", "rnr", "read-response", "atomic", "ud", "cnp"}

// String returns the class as the class= key spells it ("any" for ClassAny).
func (c Class) String() string {
	if c < numClasses {
		return classNames[c]
	}
	return "class(" + strconv.Itoa(int(c)) + ")"
}

// Direction is the dir=A->B key: the frame was sent by From and is
// addressed to To. The zero value means the key is absent.
type Direction struct {
	From, To string
}

// PSNRange is the psn= key: the PSNs First through Last inclusive, compared
// wrap-aware (wire.PSN.InRange). A single PSN has First == Last. Last may
// be at most 2^23-1 after First.
type PSNRange struct {
	First, Last wire.PSN
}

// OnePSN returns the psn= value that matches exactly p.
func OnePSN(p wire.PSN) *PSNRange { return &PSNRange{p, p} }

// PSNs returns the psn= value that matches first through last.
func PSNs(first, last wire.PSN) *PSNRange { return &PSNRange{first, last} }

// Match holds a rule's match keys. Every key is optional (its zero value
// means "absent") and the present ones are ANDed. See the package
// documentation for the exact meaning of each key.
type Match struct {
	// Link (link=) restricts the rule to hops over this link, on every
	// such hop. Without it the rule judges a frame on its first hop only.
	Link string
	// Dir (dir=A->B) matches frames sent by Dir.From to Dir.To.
	Dir Direction
	// Src (src=) and Dst (dst=) match the sending and the addressed node.
	Src, Dst string
	// HasQP and QP (qp=) match the BTH destination QPN.
	HasQP bool
	QP    uint32
	// HasOp and Op (op=) match the BTH opcode.
	HasOp bool
	Op    wire.Opcode
	// Class (class=) matches a class of packets.
	Class Class
	// CM (cm=) matches a Communication Management MAD by the message it
	// carries: a UD SEND to QP1 whose MAD is a CM Send with this
	// attribute ID (wire.CMAttrREQ, ...); 0 is absent. CM messages ride
	// UD, so psn= and tx= say nothing useful about them: a MAD sent
	// again is a new datagram with a new PSN (count them with first=).
	CM wire.CMAttr
	// PSN (psn=) matches a PSN or a range of PSNs; nil means absent.
	PSN *PSNRange
	// Tx (tx=) matches the Tx-th transmission of a PSN (Hop.Tx); 0 is absent.
	Tx int
	// From (from=) and To (to=) bound the time window [From, To); To 0
	// means "forever".
	From, To sim.Time
	// Nth (nth=N) lets every N-th frame that matches the other keys through.
	Nth int
	// Prob (prob=P) lets a frame through with probability P (0 < P <= 1);
	// 0 is absent.
	Prob float64
	// First (first=N) lets only the first N frames that passed all other
	// keys act; 0 is absent.
	First int
}

// AssignMode says how a rewrite rule changes a field.
type AssignMode uint8

// Assignment modes.
const (
	AssignNone AssignMode = iota // the field is left alone
	AssignSet                    // the field becomes Value (set-psn=N)
	AssignAdd                    // Value is added to the field, modulo its width (set-psn=+N, set-psn=-N)
)

// Assign is one field assignment of a rewrite rule. Value is the value
// to set (a 64-bit field's bit pattern: set-va= of 2^63 or more is
// negative here) or the signed amount to add.
type Assign struct {
	Mode  AssignMode
	Value int64
}

// Rule is one line of a plan: a frame rule or a link event.
type Rule struct {
	// Action is the verb of a frame rule; Pass for a link event.
	Action ActionKind
	// Event is the verb of a link event; EventNone for a frame rule.
	Event EventKind
	// Match holds the keys. A down event uses only Link, From and To; a
	// partition only From and To.
	Match Match

	// Copies is dup's n= (extra copies, at least 1).
	Copies int
	// Delay is delay's duration (> 0).
	Delay sim.Duration
	// Hold is reorder's n= (how many later frames overtake this one, >= 1).
	Hold int
	// Len is truncate's len= (the new frame length); Cut is truncate's
	// cut= (bytes removed from the end). Exactly one is set.
	Len, Cut int
	// HasByte and Byte are corrupt's byte= (offset in the Ethernet frame);
	// without it corrupt flips a bit of the first ICRC byte.
	HasByte bool
	Byte    int
	// Bit is corrupt's bit= (0..7, 0 the least significant).
	Bit int
	// SetPSN, SetSyndrome, SetMSN and SetOpcode are rewrite's set-psn=,
	// set-syndrome=, set-msn= and set-opcode=. SetSyndrome and SetOpcode
	// are only ever AssignSet; SetOpcode may be any byte, a reserved
	// opcode too.
	SetPSN, SetSyndrome, SetMSN, SetOpcode Assign
	// SetQP (set-qp=, the BTH destination QPN), SetRKey (set-rkey=),
	// SetVA (set-va=; the RETH's or AtomicETH's), SetDMALen
	// (set-dmalen=, the RETH's DMA length), SetQKey (set-qkey=, the
	// DETH's), SetImm (set-imm=, the immediate data), SetPad (set-pad=,
	// the BTH pad count, 0..3) and SetECN (set-ecn=, the IP header's ECN
	// codepoint, 0..3: 3 is CE) are rewrite's other fields.
	SetQP, SetRKey, SetVA, SetDMALen, SetQKey, SetImm, SetPad, SetECN Assign
	// Fix is rewrite's and truncate's fix=: FixAll (the default)
	// recomputes lengths, checksums and the ICRC after the change,
	// FixNone leaves them stale.
	Fix FixMode

	// Groups are the node groups of a partition (two or more, each
	// non-empty, no node twice).
	Groups [][]string

	// After is a down event's after=K: the link carries the first K RoCE
	// frames that enter it (from From on, both directions, every hop
	// over it) and is down from then on, as if its cable were pulled
	// after the K-th frame; 0 means the event is timed (from=, to=).
	After int
}

// Down returns the link event "down link=link from=from to=to"; to 0
// means the link never comes back up.
func Down(link string, from, to sim.Time) Rule {
	return Rule{Event: EventDown, Match: Match{Link: link, From: from, To: to}}
}

// Partition returns the link event "partition g1|g2|... from=from to=to":
// while it holds, frames between nodes of different groups are dropped.
func Partition(from, to sim.Time, groups ...[]string) Rule {
	return Rule{Event: EventPartition, Match: Match{From: from, To: to}, Groups: groups}
}

// RuleError reports an invalid rule of a plan built in Go.
type RuleError struct {
	Rule int // 1-based
	Msg  string
}

// Error returns the message.
func (e *RuleError) Error() string { return "faults: rule " + strconv.Itoa(e.Rule) + ": " + e.Msg }

// Validate checks a plan built in Go: every rule has exactly one verb, the
// keys and arguments its verb takes and values in range, so that String
// prints it and Parse reads it back unchanged. Parse only returns valid
// plans.
func (p *Plan) Validate() error {
	if p == nil {
		return nil
	}
	for i := range p.Rules {
		if msg := p.Rules[i].check(); msg != "" {
			return &RuleError{Rule: i + 1, Msg: msg}
		}
	}
	return nil
}

// check returns why r is invalid, or "".
func (r *Rule) check() string {
	m := &r.Match
	switch r.Event {
	case EventNone:
		if r.Action == Pass {
			return "no action (a frame rule needs one of drop, dup, delay, reorder, corrupt, truncate, rewrite)"
		}
		if r.Action >= numActions {
			return "unknown action " + strconv.Itoa(int(r.Action))
		}
		if r.Groups != nil {
			return "node groups belong to partition only"
		}
	case EventDown, EventPartition:
		if r.Action != Pass {
			return "a link event (" + r.Event.String() + ") has no action"
		}
		if r.Event == EventDown && m.Link == "" {
			return "down needs link="
		}
		var only Match
		only.From, only.To = m.From, m.To
		if r.Event == EventDown {
			only.Link = m.Link
		}
		if !matchEqual(m, &only) {
			if r.Event == EventDown {
				return "down takes only link=, from= and to="
			}
			return "partition takes only node groups, from= and to="
		}
		if r.After != 0 && (r.Event != EventDown || m.To != 0 || r.After < 0 || r.After > math.MaxInt32) {
			switch {
			case r.Event != EventDown:
				return "after= belongs to down only"
			case m.To != 0:
				return "down after= takes no to= (a cut link stays down)"
			default:
				return "bad after " + strconv.Itoa(r.After) + ": " + countRule
			}
		}
		if r.Event == EventPartition {
			if msg := checkGroups(r.Groups); msg != "" {
				return msg
			}
		} else if r.Groups != nil {
			return "node groups belong to partition only"
		}
	default:
		return "unknown event " + strconv.Itoa(int(r.Event))
	}
	if msg := m.check(); msg != "" {
		return msg
	}
	if r.Event == EventNone && r.After != 0 {
		return "after= does not apply to " + r.Action.String()
	}
	if msg := r.checkExtra(); msg != "" {
		return msg
	}
	if r.Action != Rewrite && r.hasExtra() {
		return "set- fields belong to rewrite only"
	}
	if r.Fix != FixAll && r.Action != Rewrite && r.Action != Truncate {
		return "fix= belongs to rewrite and truncate only"
	}
	return r.checkArgs()
}

// check validates the values of the match keys.
func (m *Match) check() string {
	for _, n := range [...]struct{ key, v string }{{"link", m.Link}, {"src", m.Src}, {"dst", m.Dst}} {
		if n.v != "" && !validName(n.v) {
			return "bad " + n.key + " " + strconv.Quote(n.v) + ": " + nameRule
		}
	}
	if (m.Dir.From == "") != (m.Dir.To == "") {
		return "dir needs both nodes (dir=A->B)"
	}
	if m.Dir.From != "" && (!validName(m.Dir.From) || !validName(m.Dir.To)) {
		return "bad dir " + strconv.Quote(m.Dir.From+"->"+m.Dir.To) + ": " + nameRule
	}
	if m.HasQP && m.QP > wire.PSNMask {
		return "bad qp " + strconv.FormatUint(uint64(m.QP), 10) + ": a QPN has 24 bits"
	}
	if !m.HasQP && m.QP != 0 {
		return "QP is set but HasQP is false"
	}
	if m.HasOp && !m.Op.Valid() {
		return "bad op " + m.Op.String() + ": not an opcode rocesim knows"
	}
	if !m.HasOp && m.Op != 0 {
		return "Op is set but HasOp is false"
	}
	if m.Class >= numClasses {
		return "unknown class " + strconv.Itoa(int(m.Class))
	}
	if m.CM != 0 && cmIndex(m.CM) < 0 {
		return "unknown cm message " + m.CM.String()
	}
	if m.PSN != nil {
		if msg := checkPSNRange(*m.PSN); msg != "" {
			return msg
		}
	}
	for _, c := range [...]struct {
		key string
		v   int
	}{{"tx", m.Tx}, {"nth", m.Nth}, {"first", m.First}} {
		if c.v < 0 || c.v > math.MaxInt32 {
			return "bad " + c.key + " " + strconv.Itoa(c.v) + ": " + countRule
		}
	}
	if m.Prob != 0 && !(m.Prob > 0 && m.Prob <= 1) {
		return "bad prob " + formatProb(m.Prob) + ": " + probRule
	}
	if m.From < 0 {
		return "bad from " + formatDuration(sim.Duration(m.From)) + ": " + timeRule
	}
	if m.To < 0 {
		return "bad to " + formatDuration(sim.Duration(m.To)) + ": " + timeRule
	}
	if m.To != 0 && m.To <= m.From {
		return windowRule
	}
	return ""
}

// args is a rule's action arguments, for checking that an action has only
// the ones it takes.
type args struct {
	copies, hold, len, cut, byte, bit int
	hasByte                           bool
	delay                             sim.Duration
	setPSN, setSyndrome, setMSN       Assign
	setOpcode                         Assign
}

func (r *Rule) args() args {
	return args{r.Copies, r.Hold, r.Len, r.Cut, r.Byte, r.Bit, r.HasByte, r.Delay, r.SetPSN, r.SetSyndrome, r.SetMSN, r.SetOpcode}
}

// firstKey names the first argument set in a.
func (a *args) firstKey() string {
	switch {
	case a.copies != 0 || a.hold != 0:
		return "n="
	case a.len != 0:
		return "len="
	case a.cut != 0:
		return "cut="
	case a.byte != 0 || a.hasByte:
		return "byte="
	case a.bit != 0:
		return "bit="
	case a.delay != 0:
		return "a duration"
	case a.setPSN != Assign{}:
		return "set-psn="
	case a.setSyndrome != Assign{}:
		return "set-syndrome="
	case a.setOpcode != Assign{}:
		return "set-opcode="
	default:
		return "set-msn="
	}
}

// checkArgs validates the action's arguments and that no other action's
// arguments are set.
func (r *Rule) checkArgs() string {
	a := r.args()
	verb := r.Action.String()
	if r.Event != EventNone {
		verb = r.Event.String()
	}
	switch r.Action {
	case Duplicate:
		if r.Copies < 1 || r.Copies > math.MaxInt32 {
			return "bad n " + strconv.Itoa(r.Copies) + ": dup needs n >= 1"
		}
		a.copies = 0
	case Delay:
		if r.Delay <= 0 {
			return "bad delay " + formatDuration(r.Delay) + ": delay needs a duration > 0"
		}
		a.delay = 0
	case Reorder:
		if r.Hold < 1 || r.Hold > math.MaxInt32 {
			return "bad n " + strconv.Itoa(r.Hold) + ": reorder needs n >= 1"
		}
		a.hold = 0
	case Corrupt:
		if r.Byte < 0 || r.Byte > math.MaxInt32 || (!r.HasByte && r.Byte != 0) {
			return "bad byte " + strconv.Itoa(r.Byte) + ": want an offset >= 0 with HasByte"
		}
		if r.Bit < 0 || r.Bit > 7 {
			return "bad bit " + strconv.Itoa(r.Bit) + ": " + bitRule
		}
		a.byte, a.hasByte, a.bit = 0, false, 0
	case Truncate:
		switch {
		case r.Len != 0 && r.Cut != 0:
			return "truncate takes len= or cut=, not both"
		case r.Len == 0 && r.Cut == 0:
			return "truncate needs len=N or cut=N"
		case r.Len < 0 || r.Cut < 0 || r.Len > math.MaxInt32 || r.Cut > math.MaxInt32:
			return "bad truncate length: " + countRule
		}
		a.len, a.cut = 0, 0
	case Rewrite:
		if r.SetPSN == (Assign{}) && r.SetSyndrome == (Assign{}) && r.SetMSN == (Assign{}) && r.SetOpcode == (Assign{}) && !r.hasExtra() {
			return rewriteRule
		}
		for _, f := range [...]struct {
			key string
			a   Assign
		}{{"set-psn", r.SetPSN}, {"set-msn", r.SetMSN}} {
			if msg := checkAssign24(f.key, f.a); msg != "" {
				return msg
			}
		}
		for _, f := range [...]struct {
			key string
			a   Assign
		}{{"set-syndrome", r.SetSyndrome}, {"set-opcode", r.SetOpcode}} {
			if s := f.a; s.Mode > AssignSet || (s.Mode == AssignNone && s.Value != 0) || s.Value < 0 || s.Value > 0xFF {
				return "bad " + f.key + ": want AssignSet of a value 0..255"
			}
		}
		a.setPSN, a.setSyndrome, a.setMSN, a.setOpcode = Assign{}, Assign{}, Assign{}, Assign{}
	}
	if a != (args{}) {
		return a.firstKey() + " does not apply to " + verb
	}
	return ""
}

func checkAssign24(key string, a Assign) string {
	switch a.Mode {
	case AssignNone:
		if a.Value != 0 {
			return "bad " + key + ": Value set with AssignNone"
		}
	case AssignSet:
		if a.Value < 0 || a.Value > wire.PSNMask {
			return "bad " + key + " " + strconv.Itoa(int(a.Value)) + ": want 0..16777215"
		}
	case AssignAdd:
		if a.Value < -wire.PSNMask || a.Value > wire.PSNMask {
			return "bad " + key + " " + strconv.Itoa(int(a.Value)) + ": want +N or -N with N at most 16777215"
		}
	default:
		return "bad " + key + ": unknown mode " + strconv.Itoa(int(a.Mode))
	}
	return ""
}

func checkPSNRange(r PSNRange) string {
	if !r.First.Valid() || !r.Last.Valid() {
		return "bad psn: a PSN has 24 bits"
	}
	if r.Last.Diff(r.First) < 0 {
		return "bad psn " + r.First.String() + "-" + r.Last.String() + ": " + psnRangeRule
	}
	return ""
}

func checkGroups(groups [][]string) string {
	if len(groups) < 2 {
		return "partition needs two or more node groups"
	}
	for i, g := range groups {
		if len(g) == 0 {
			return "partition group " + strconv.Itoa(i+1) + " is empty"
		}
		for j, n := range g {
			if !validName(n) {
				return "bad node " + strconv.Quote(n) + ": " + nameRule
			}
			if groupOf(groups[:i+1], n) != i || indexOf(g[:j], n) >= 0 {
				return "node " + n + " appears twice in the partition"
			}
		}
	}
	return ""
}

func indexOf(s []string, v string) int {
	for i, x := range s {
		if x == v {
			return i
		}
	}
	return -1
}

// groupOf returns the index of the group holding node, or -1.
func groupOf(groups [][]string, node string) int {
	for i, g := range groups {
		if indexOf(g, node) >= 0 {
			return i
		}
	}
	return -1
}

// Messages shared by Parse and Validate.
const (
	nameRule     = "names use letters, digits and _ . : / -"
	countRule    = "want a whole number >= 1"
	probRule     = "want a probability 0 < P <= 1"
	timeRule     = "want a time >= 0"
	bitRule      = "want a bit number 0..7"
	windowRule   = "empty time window: to= must be after from="
	rewriteRule  = "rewrite needs a field to set: set-psn=, set-msn=, set-syndrome=, set-opcode=, set-qp=, set-rkey=, set-va=, set-dmalen=, set-qkey=, set-imm=, set-pad= or set-ecn="
	psnRangeRule = "range runs backwards (the last PSN is before the first, or more than 2^23-1 after it)"
)

// validName reports whether s can be a node or link name: non-empty ASCII
// letters, digits and _ . : / -. Names never hold '>' (so dir=A->B splits
// unambiguously), '=', ',', '|', '#' or white space.
func validName(s string) bool {
	if s == "" {
		return false
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		switch {
		case 'a' <= c && c <= 'z', 'A' <= c && c <= 'Z', '0' <= c && c <= '9':
		case c == '_' || c == '.' || c == ':' || c == '/' || c == '-':
		default:
			return false
		}
	}
	return true
}

// matchEqual compares two sets of match keys by value.
func matchEqual(a, b *Match) bool {
	x, y := *a, *b
	x.PSN, y.PSN = nil, nil
	if x != y {
		return false
	}
	if (a.PSN == nil) != (b.PSN == nil) {
		return false
	}
	return a.PSN == nil || *a.PSN == *b.PSN
}
