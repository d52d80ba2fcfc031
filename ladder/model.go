package ladder

import (
	"slices"
	"strconv"
	"strings"

	"github.com/rocesim/rocesim/sim"
)

// Building the model, in one pass over the trace:
//
//  1. Hosts are told from switches: a host is a node the NIC speaks for
//     (qp-state, completion, timer, async-event) or that receives a frame
//     (frame-rx); a switch forwards frames and does neither.
//  2. Each frame's life is followed hop by hop. The fabric judges a frame
//     as it enters a link (frame-dup, frame-delay, frame-hold, frame-alter,
//     frame-drop, queue-drop: "pending" on that link), serializes it
//     (frame-tx: "in flight" on the link) and delivers it at the far end
//     (frame-rx at a host; at a switch nothing is traced until it enters
//     the next link). A link direction delivers in order, so a frame-rx
//     is the oldest frame in flight on its link; a switch's events find
//     the frame among those in flight toward it by (destination QPN,
//     opcode, PSN, transmission count).
//  3. The frame is drawn once, from its sender at its first-hop frame-tx
//     (or where it was lost, if it never left) to its receiver at the
//     final frame-rx, or to a ✗ where it was dropped.
//  4. Notes: timers, QP state changes (a run of them at one instant
//     merged: RESET→INIT→RTR→RTS), async events, completions, link
//     changes.
//
// A lost frame's receiver is the far end of its last link when that is a
// host, or else the node that frames from the same sender to the same QPN
// reached.

// tone is what a piece of the drawing means, for colour.
type tone uint8

const (
	toneNone  tone = iota
	toneOK         // success: completions, ACKs
	toneErr        // loss and errors: drops, error completions, ERR
	toneWarn       // timers, NAKs
	toneFault      // fault-plan interventions: dup, delay, reorder, corrupt
	toneRetx       // retransmissions
	toneDim        // routine state changes
)

// itemKind tells the items of the model apart.
type itemKind uint8

const (
	itemFrame itemKind = iota // a frame's arrow starts (its row)
	itemEnd                   // a drawn frame ends later: delivered or dropped beyond the first hop
	itemNote                  // a note at a node (node -1: the fabric, for link events)
)

// item is one thing to draw, in trace order.
type item struct {
	kind itemKind
	t    sim.Time
	fr   *frame // itemFrame, itemEnd
	node int    // itemNote: the column, -1 for fabric-wide notes
	text string // itemNote
	tone tone   // itemNote
	evs  []int  // itemNote: the trace events it stands for (indexes)
	// qp-state merging: the QP and the last state of the run.
	qpn     uint32
	hasQPN  bool
	stateTo string
}

// mark is an annotation of a frame.
type mark struct {
	text  string // in full
	short string // when space is short; "" to leave it out then
	tone  tone
}

// frameKey is what identifies a frame across hops.
type frameKey struct {
	qpn       uint32
	hasQPN    bool
	op, psn   string
	tx        string
	ackreq    bool
	aeth, msn string
	cm        string // the connection manager's message a MAD to QP1 carries (REQ, REP, ...)
}

// frame is one frame's life, followed across hops.
type frame struct {
	key    frameKey
	origin string // the sending node
	from   int    // sender's column, -1 if not drawn
	to     int    // receiver's column, -1 if unknown or not drawn
	dst    string // the receiving node, "" if unknown
	length string

	started   bool     // its itemFrame is placed
	t         sim.Time // start of the arrow: first-hop frame-tx, or the loss if it never left
	end       sim.Time // arrival, or the drop
	delivered bool
	lost      bool
	lostAt    string // the node where it was dropped
	lostHop   int    // links crossed before the drop (0: at the sender)
	lostRule  string
	lostWhy   string
	lostCause sim.DropCause
	hops      int    // links it entered
	lastLink  string // the link it last entered
	marks     []mark
	evs       []int  // the trace events of its life (indexes), for SVG tooltips
	copyLeft  int    // frame-dup: copies still to come on lastLink
	copyMarks []mark // what a copy inherits
}

// model is a trace digested for drawing.
type model struct {
	evs     []sim.Event // the trace's
	nodes   []string
	items   []item
	latency sim.Duration // median first-tx-to-arrival time of delivered frames (0: none)
}

func (m *model) column(name string) int { return slices.Index(m.nodes, name) }

// frameKinds are the fabric's per-frame event kinds.
var frameKinds = map[sim.Kind]bool{
	"frame-tx": true, "frame-rx": true, "frame-drop": true, "queue-drop": true, "frame-dup": true,
	"frame-delay": true, "frame-hold": true, "frame-release": true, "frame-alter": true,
}

// nicKinds are the NIC's event kinds: a node that has them is a host.
var nicKinds = map[sim.Kind]bool{"qp-state": true, "completion": true, "timer": true, "async-event": true, "frame-loop": true, "rx-drop": true}

// lines returns the text of the events at idx, one a line.
func (m *model) lines(idx []int) string {
	var b []byte
	for i, x := range idx {
		if i > 0 {
			b = append(b, '\n')
		}
		b = m.evs[x].AppendText(b)
	}
	return string(b)
}

// builder holds the state of one pass.
type builder struct {
	m       *model
	hosts   map[string]bool // lookups only
	pending map[string][]*frame
	flight  map[string][]*frame
	links   []string // link directions in order of first appearance (never a map's order)
	frames  []*frame
	idx     int      // the event being read
	dups    []*frame // duplicated frames whose copies are still to come
	// flooded holds, per switch, the multicast frames (QPN 0xFFFFFF) it
	// forwarded: a switch floods one out of every other port, and each
	// further copy is a frame-tx of the switch with no frame in flight
	// toward it (lookups only).
	flooded map[string][]*frame
	// multiQP marks nodes whose notes name their QP (more than one QP
	// appears at the node).
	multiQP map[string]bool
	// lastRx is, per host, what it received last (lookups only): the
	// NIC takes a frame as the fabric delivers it, so an rx-drop is
	// about the arrival just before it at its node.
	lastRx map[string]arrival
}

// build digests tr. nodes, if not empty, fixes the columns.
func build(tr *sim.Trace, nodes []string) *model {
	evs := tr.Events()
	b := &builder{m: &model{}, hosts: map[string]bool{}, pending: map[string][]*frame{}, flight: map[string][]*frame{},
		multiQP: map[string]bool{}, flooded: map[string][]*frame{}, lastRx: map[string]arrival{}}
	qps := map[string]uint32{}
	// A node that only sends (a multicast sender in a fabric daemon's
	// trace, which has no NIC events) is a host too: it puts frames on a
	// link and no frame ever flies toward it, where a switch only sends
	// what came to it.
	sends, sentTo := map[string]bool{}, map[string]bool{}
	for i := range evs {
		e := &evs[i]
		if e.Node == "" {
			continue
		}
		if e.Kind == "frame-rx" || nicKinds[e.Kind] {
			b.hosts[e.Node] = true
		}
		if e.Kind == "frame-tx" {
			link, _ := e.Get("link")
			from, to, _ := strings.Cut(link, "->")
			sends[from], sentTo[to] = true, true
		}
		if !frameKinds[e.Kind] && e.HasQPN {
			if q, ok := qps[e.Node]; ok && q != e.QPN {
				b.multiQP[e.Node] = true
			}
			qps[e.Node] = e.QPN
		}
	}
	for i := range evs {
		// In trace order, so that the map decides nothing about order.
		if e := &evs[i]; e.Kind == "frame-tx" && sends[e.Node] && !sentTo[e.Node] {
			b.hosts[e.Node] = true
		}
	}
	if len(nodes) > 0 {
		b.m.nodes = slices.Clone(nodes)
	} else {
		for i := range evs {
			if n := evs[i].Node; n != "" && b.hosts[n] && !slices.Contains(b.m.nodes, n) {
				b.m.nodes = append(b.m.nodes, n)
			}
		}
	}
	b.m.evs = evs
	for i := range evs {
		e := &evs[i]
		b.idx = i
		switch {
		case frameKinds[e.Kind]:
			b.frameEvent(e)
		case e.Kind == "rx-drop":
			b.rxDrop(e)
		case e.Kind == "frame-loop":
			n := len(b.m.items)
			b.note(e)
			if len(b.m.items) > n { // its node is a column
				b.lastRx[e.Node] = arrival{t: e.Time, qpn: e.QPN, hasQPN: e.HasQPN, note: len(b.m.items)}
			}
		default:
			b.note(e)
		}
	}
	b.finish()
	return b.m
}

func keyOf(e *sim.Event) frameKey {
	k := frameKey{qpn: e.QPN, hasQPN: e.HasQPN}
	k.op, _ = e.Get("op")
	k.psn, _ = e.Get("psn")
	k.tx, _ = e.Get("tx")
	a, _ := e.Get("ackreq")
	k.ackreq = a == "1"
	k.aeth, _ = e.Get("aeth")
	k.msn, _ = e.Get("msn")
	k.cm, _ = e.Get("cm")
	return k
}

// sameFrame reports whether two keys may be one frame: the fields that
// survive a hop unchanged (an altered frame may differ in the others).
func sameFrame(a, b frameKey) bool {
	return a.qpn == b.qpn && a.hasQPN == b.hasQPN && a.op == b.op && a.psn == b.psn && a.tx == b.tx
}

// take removes and returns the first frame of q[link] with key k (any
// frame when anyKey and none matches).
func take(q map[string][]*frame, link string, k frameKey, anyKey bool) *frame {
	fs := q[link]
	i := slices.IndexFunc(fs, func(f *frame) bool { return sameFrame(f.key, k) })
	if i < 0 && anyKey && len(fs) > 0 {
		i = 0
	}
	if i < 0 {
		return nil
	}
	f := fs[i]
	q[link] = slices.Delete(fs, i, i+1)
	return f
}

// takeToward finds the frame in flight toward node (a switch) with key k.
func (b *builder) takeToward(node string, k frameKey) *frame {
	var best *frame
	var bestLink string
	for _, l := range b.links {
		if _, to, _ := strings.Cut(l, "->"); to != node {
			continue
		}
		for _, f := range b.flight[l] {
			if sameFrame(f.key, k) && (best == nil || f.t < best.t) {
				best, bestLink = f, l
			}
			if sameFrame(f.key, k) {
				break // the oldest on this link
			}
		}
	}
	if best != nil {
		take(b.flight, bestLink, best.key, false)
	}
	return best
}

func (b *builder) newFrame(e *sim.Event, origin string) *frame {
	f := &frame{key: keyOf(e), origin: origin, from: -1, to: -1, t: e.Time}
	f.length, _ = e.Get("len")
	b.frames = append(b.frames, f)
	return f
}

// start places the frame's arrow at e.
func (b *builder) start(f *frame, e *sim.Event) {
	if f.started {
		return
	}
	f.started, f.t = true, e.Time
	b.m.items = append(b.m.items, item{kind: itemFrame, t: e.Time, fr: f})
}

func (b *builder) frameEvent(e *sim.Event) {
	link, _ := e.Get("link")
	if !slices.Contains(b.links, link) {
		b.links = append(b.links, link)
	}
	from, to, _ := strings.Cut(link, "->")
	k := keyOf(e)
	why, _ := e.Get("why")
	rule, _ := e.Get("rule")
	cause, _ := e.Get("drop")
	var f *frame
	switch e.Kind {
	case "frame-tx":
		f = take(b.pending, link, k, false)
		if f == nil {
			f = b.copyOf(link, k)
		}
		if f == nil {
			f = b.arrive(e, from, k)
		}
		if !b.hosts[from] && k.hasQPN && k.qpn == multicastQPN && !slices.Contains(b.flooded[from], f) {
			b.flooded[from] = append(b.flooded[from], f)
		}
		f.hops++
		f.lastLink = link
		if f.origin == from && f.hops == 1 {
			b.start(f, e)
			if note, ok := e.Get("note"); ok {
				f.marks = append(f.marks, noteMarks(note)...)
			}
		}
		b.flight[link] = append(b.flight[link], f)
	case "frame-rx":
		f = take(b.flight, link, k, true)
		if f == nil {
			f = b.newFrame(e, from) // its start is not in the trace
		}
		f.delivered, f.end, f.dst = true, e.Time, e.Node
		b.lastRx[e.Node] = arrival{t: e.Time, qpn: f.key.qpn, hasQPN: f.key.hasQPN, f: f}
		if f.started {
			b.m.items = append(b.m.items, item{kind: itemEnd, t: e.Time, fr: f})
		}
	case "frame-drop", "queue-drop":
		f = take(b.pending, link, k, false)
		if f == nil {
			f = b.copyOf(link, k) // a copy lost as it entered the link
		}
		if f == nil && atSwitch(sim.DropCause(cause)) {
			f = take(b.flight, link, k, true) // lost on arrival at the switch
			if f != nil {
				f.hops++ // count the link it crossed
			}
		}
		if f == nil {
			f = b.arrive(e, from, k)
		}
		f.lost, f.end, f.lostAt, f.lostHop, f.lostRule, f.lostWhy = true, e.Time, from, f.hops, rule, why
		f.lostCause = sim.DropCause(cause)
		if atSwitch(f.lostCause) {
			f.lostAt = to
		}
		if f.origin == from && f.hops == 0 {
			b.start(f, e)
		} else if f.started {
			b.m.items = append(b.m.items, item{kind: itemEnd, t: e.Time, fr: f})
		}
	default: // frame-dup, frame-delay, frame-hold, frame-release, frame-alter
		f = take(b.pending, link, k, false)
		if f == nil {
			f = b.arrive(e, from, k)
		}
		f.key = k // an alteration may change it
		if l, ok := e.Get("len"); ok {
			f.length = l // and a truncation its length
		}
		if m, ok := faultMark(e.Kind, why, rule, from, f.origin); ok {
			f.marks = append(f.marks, m)
		}
		if e.Kind == "frame-dup" {
			f.copyLeft = dupCopies(why)
			f.lastLink = link
			b.dups = append(b.dups, f)
			f.copyMarks = []mark{{text: "copy" + bySuffix(rule), short: "copy" + bySuffix(rule), tone: toneFault}}
		}
		b.pending[link] = append(b.pending[link], f)
	}
	f.evs = append(f.evs, b.idx)
}

// arrival is a frame a host received: a frame-rx's frame, or a
// frame-loop's note (items[note-1]; 0: none).
type arrival struct {
	t      sim.Time
	qpn    uint32
	hasQPN bool
	f      *frame
	note   int
}

// rxDrop marks the frame a host received just before, at this instant
// and to this QP, as one its NIC threw away (a bad ICRC, no such QP, a QP
// in the wrong state, ...): on the wire it arrived, and only the
// receiver's drop says it went no further. An rx-drop that follows no
// such arrival (its delivery is not in the trace) marks nothing.
func (b *builder) rxDrop(e *sim.Event) {
	a := b.lastRx[e.Node]
	b.lastRx[e.Node] = arrival{} // one drop per frame
	if a.t != e.Time || a.f == nil && a.note == 0 || e.HasQPN && (!a.hasQPN || a.qpn != e.QPN) {
		return
	}
	why, _ := e.Get("why")
	if a.note > 0 {
		it := &b.m.items[a.note-1]
		it.text += " ✗ dropped by " + e.Node + ": " + why
		it.tone = toneErr
		it.evs = append(it.evs, b.idx)
		return
	}
	a.f.marks = append(a.f.marks, mark{text: "dropped by " + e.Node + ": " + why, short: "dropped by " + e.Node, tone: toneErr})
	a.f.evs = append(a.f.evs, b.idx)
}

// arrive finds the frame an event at node from is about: a new frame
// when from is a host (it originates there), else one in flight toward
// the switch; a frame whose history is not in the trace otherwise.
func (b *builder) arrive(e *sim.Event, from string, k frameKey) *frame {
	if !b.hosts[from] {
		// An alteration's event names the frame as it was before
		// (was_*: the fabric's): that first, then as it is now.
		if was, ok := wasKeyOf(e, k); ok {
			if f := b.takeToward(from, was); f != nil {
				return f
			}
		}
		if f := b.takeToward(from, k); f != nil {
			return f
		}
		if e.Kind == "frame-alter" {
			if f := b.takeAlteredToward(from, k); f != nil {
				return f
			}
		}
		if fs := b.flooded[from]; len(fs) > 0 {
			// A further copy of a multicast frame the switch floods.
			for i := len(fs) - 1; i >= 0; i-- {
				if sameFrame(fs[i].key, k) {
					return b.copyFrom(fs[i], k)
				}
			}
		}
	}
	return b.newFrame(e, from)
}

// multicastQPN is the destination QP of a datagram to a multicast group:
// a switch floods it, and the ladder draws an arrow to each receiver.
const multicastQPN = 0xFFFFFF

// wasKeyOf is the key of the frame a frame-alter event is about as it
// was before the fault plan altered it (the fabric's and rocesim
// switch's was_qpn, was_op,
// was_psn; the rest as now, which an alteration leaves), if the event
// says it.
func wasKeyOf(e *sim.Event, k frameKey) (frameKey, bool) {
	qpn, ok := e.Get("was_qpn")
	if !ok || e.Kind != "frame-alter" {
		return k, false
	}
	n, err := strconv.ParseUint(qpn, 10, 32)
	if err != nil {
		return k, false
	}
	k.qpn, k.hasQPN = uint32(n), true
	k.op, _ = e.Get("was_op")
	k.psn, _ = e.Get("was_psn")
	return k, true
}

// takeAlteredToward finds the frame a switch's frame-alter is about when
// neither the key it had nor the one it has matches a frame in flight
// toward the switch (a trace without was_*: one written before the
// fabric and rocesim switch gave them): a
// rewrite (set-psn=), a truncation that cuts into the BTH or a bit flip
// in it changes what the event says. A link delivers in order, so the
// frame that reached the switch is the oldest in flight on one of the
// links toward it: among those heads, the one that kept its QPN, opcode
// and transmission count (a rewrite keeps them), else the one sent
// first. A delay or reorder rule on the way in breaks that order.
func (b *builder) takeAlteredToward(node string, k frameKey) *frame {
	var best *frame
	var bestLink string
	bestKept := false
	for _, l := range b.links {
		if _, to, _ := strings.Cut(l, "->"); to != node || len(b.flight[l]) == 0 {
			continue
		}
		f := b.flight[l][0]
		kept := f.key.qpn == k.qpn && f.key.hasQPN == k.hasQPN && f.key.op == k.op && f.key.tx == k.tx
		if best == nil || kept && !bestKept || kept == bestKept && f.t < best.t {
			best, bestLink, bestKept = f, l, kept
		}
	}
	if best != nil {
		b.flight[bestLink] = b.flight[bestLink][1:]
	}
	return best
}

// copyOf returns a new frame for a copy made by frame-dup on link, if one
// is still due. A copy made at the sender starts its own arrow at its own
// frame-tx; one made beyond the first hop shares the original's start.
func (b *builder) copyOf(link string, k frameKey) *frame {
	for i, src := range b.dups {
		if src.lastLink != link || !sameFrame(src.key, k) {
			continue
		}
		if src.copyLeft--; src.copyLeft <= 0 {
			b.dups = slices.Delete(b.dups, i, i+1)
		}
		c := &frame{key: k, origin: src.origin, from: -1, to: -1, t: src.t, length: src.length, hops: src.hops - 1}
		c.marks = slices.Clone(src.copyMarks)
		c.evs = slices.Clone(src.evs)
		b.frames = append(b.frames, c)
		if from, _, _ := strings.Cut(link, "->"); from != src.origin && src.started {
			b.shareStart(c, src)
		}
		return c
	}
	return nil
}

// copyFrom returns a new frame for a copy of src that a switch made
// (a flood): it shares src's start and its marks, and is drawn beside it.
func (b *builder) copyFrom(src *frame, k frameKey) *frame {
	c := &frame{key: k, origin: src.origin, from: -1, to: -1, t: src.t, length: src.length, hops: src.hops - 1}
	c.evs = slices.Clone(src.evs)
	b.frames = append(b.frames, c)
	if src.started {
		b.shareStart(c, src)
	}
	return c
}

// shareStart starts copy c's arrow where src's starts, with src's marks
// but a dup rule's (the copy is not the duplicated frame).
func (b *builder) shareStart(c, src *frame) {
	for _, m := range src.marks {
		if !strings.HasPrefix(m.text, "dup ") {
			c.marks = append(c.marks, m)
		}
	}
	c.started = true
	at := slices.IndexFunc(b.m.items, func(it item) bool { return it.kind == itemFrame && it.fr == src })
	b.m.items = slices.Insert(b.m.items, at+1, item{kind: itemFrame, t: src.t, fr: c})
}

// dupCopies reads the number of copies from a dup rule's text
// ("duplicated by rule 1: dup n=2 psn=3"); the default is one.
func dupCopies(why string) int {
	_, text, _ := strings.Cut(why, ": ")
	for _, w := range strings.Fields(text) {
		if v, ok := strings.CutPrefix(w, "n="); ok {
			if n, err := strconv.Atoi(v); err == nil && n > 0 {
				return n
			}
		}
	}
	return 1
}

func (b *builder) note(e *sim.Event) {
	it := item{kind: itemNote, t: e.Time, node: -1, qpn: e.QPN, hasQPN: e.HasQPN}
	if e.Node != "" {
		if it.node = b.m.column(e.Node); it.node < 0 {
			return
		}
	}
	qp := ""
	if e.HasQPN && b.multiQP[e.Node] {
		qp = " qp 0x" + strconv.FormatUint(uint64(e.QPN), 16)
	}
	switch e.Kind {
	case "qp-state":
		from, _ := e.Get("from")
		to, _ := e.Get("to")
		if n := len(b.m.items); n > 0 {
			last := &b.m.items[n-1]
			if last.kind == itemNote && last.stateTo != "" && last.stateTo == from && last.node == it.node &&
				last.t == it.t && last.qpn == it.qpn && last.hasQPN == it.hasQPN {
				last.text = strings.TrimSuffix(last.text, qp) + "→" + to + qp
				last.stateTo, last.tone = to, stateTone(to)
				last.evs = append(last.evs, b.idx)
				return
			}
		}
		it.text, it.stateTo, it.tone = from+"→"+to+qp, to, stateTone(to)
	case "completion":
		it.text, it.tone = completionText(e)
		it.text += qp
	case "timer":
		which, _ := e.Get("timer")
		it.text, it.tone = "⏱ "+which+qp, toneWarn
	case "async-event":
		ev, _ := e.Get("event")
		ev = strings.TrimPrefix(ev, "IBV_EVENT_")
		it.text, it.tone = "⚠ "+ev+qp, toneWarn
		if strings.Contains(ev, "ERR") || strings.Contains(ev, "FATAL") {
			it.tone = toneErr
		}
	case "frame-loop":
		// A host's own multicast datagram, handed back to it off the
		// wire (verbs.Host's loop-back): a note, there is no arrow.
		op, _ := e.Get("op")
		psn, _ := e.Get("psn")
		it.text, it.tone = "↺ "+op+" psn="+psn+" looped back", toneDim
	case "link-down", "link-up":
		link, _ := e.Get("link")
		rule, _ := e.Get("rule")
		it.text, it.tone = "link "+link+" down"+ruleSuffix(rule), toneErr
		if e.Kind == "link-up" {
			it.text, it.tone = "link "+link+" up"+ruleSuffix(rule), toneOK
		}
		it.node = -1
	default:
		return // kinds a ladder has no place for
	}
	it.evs = []int{b.idx}
	b.m.items = append(b.m.items, it)
}

func stateTone(to string) tone {
	if to == "ERR" || to == "SQE" {
		return toneErr
	}
	return toneDim
}

// finish resolves columns and receivers and drops what cannot be drawn.
func (b *builder) finish() {
	// Where frames from a sender to a QPN went, learnt from those that
	// arrived (the first one wins).
	type flow struct {
		origin string
		qpn    uint32
	}
	learnt := map[flow]string{} // lookups only
	var lat []sim.Duration
	for _, f := range b.frames {
		if f.delivered {
			if _, ok := learnt[flow{f.origin, f.key.qpn}]; !ok {
				learnt[flow{f.origin, f.key.qpn}] = f.dst
			}
			if f.started {
				lat = append(lat, f.end.Sub(f.t))
			}
		}
	}
	if len(lat) > 0 {
		slices.Sort(lat)
		b.m.latency = lat[len(lat)/2]
	}
	for _, f := range b.frames {
		if f.dst == "" {
			if _, to, _ := strings.Cut(f.lastLink, "->"); b.hosts[to] {
				f.dst = to
			} else {
				f.dst = learnt[flow{f.origin, f.key.qpn}]
			}
		}
		f.from, f.to = b.m.column(f.origin), b.m.column(f.dst)
	}
	keep := b.m.items[:0]
	for _, it := range b.m.items {
		if it.kind == itemFrame && it.fr.from >= 0 && it.fr.to == it.fr.from {
			it = loopNote(it) // a frame a host sent itself, through a switch
		}
		if it.kind == itemNote || drawable(it.fr) {
			keep = append(keep, it)
		}
	}
	b.m.items = keep
}

// loopNote turns the item of a frame whose sender and receiver are one
// column (two QPs of one device; a switch sent it back down the
// device's link) into a note at that column: there is no arrow to draw
// from a bar to itself. It says what an arrow's label would, and where
// the frame was lost.
func loopNote(it item) item {
	f := it.fr
	text, tone := "↺ "+f.labels()[0], f.tone()
	if tone == toneNone {
		tone = toneDim
	}
	if f.lost {
		text += " ✗" + ruleSuffix(f.lostRule)
		if f.lostAt != "" && f.lostAt != f.origin {
			text += " at " + f.lostAt
		}
	}
	return item{kind: itemNote, t: it.t, node: f.from, text: text, tone: tone, evs: f.evs}
}

// drawable reports whether f has a place in the drawing: its sender is a
// column, and so is its receiver, unless it was lost before anyone could
// tell where it went (then it ends at its ✗, toward a neighbour column).
func drawable(f *frame) bool {
	if f.from < 0 || f.to == f.from {
		return false
	}
	return f.to >= 0 || f.dst == "" && f.lost
}

// atSwitch reports whether a frame lost for cause was lost on arrival at
// a switch (sim/fabric's arrive), after crossing its link, rather than
// at the egress of the link it was traced on.
func atSwitch(cause sim.DropCause) bool {
	return cause == sim.DropNoRoute || cause == sim.DropRunt
}
