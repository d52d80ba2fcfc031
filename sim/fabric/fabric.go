package fabric

import (
	"errors"
	"fmt"
	"math/rand/v2"
	"net/netip"
	"strings"

	"github.com/rocesim/rocesim/faults"
	"github.com/rocesim/rocesim/sim"
	"github.com/rocesim/rocesim/wire"
)

// Receiver is what sits behind a node's ports: the NIC model. Receive is
// called when a frame has fully arrived; frame is only valid during the
// call (the fabric reuses its buffer).
type Receiver interface {
	Receive(now sim.Time, port int, frame []byte)
}

// A SealedReceiver is a Receiver that is told which frames are sealed:
// sent with SendSealed and not changed since (no fault altered them), so
// that their ICRC is right without computing it again. ReceiveSealed
// gets those, Receive every other frame.
type SealedReceiver interface {
	Receiver
	ReceiveSealed(now sim.Time, port int, frame []byte)
}

// Tap records the frames the fabric puts on its links: a capture file.
// wire/capture's writers satisfy it. The fabric adds one interface per
// link direction and writes every frame as it starts onto the link, with
// a comment saying why it exists or what a fault did to it. The frame and
// the comment are valid only during the call (the comment shares the
// fabric's storage, so that noting every frame allocates nothing): a tap
// copies what it keeps (strings.Clone for the comment).
type Tap interface {
	AddInterface(name, description string) (int, error)
	WriteFrame(ns int64, iface int, frame []byte, comment string) error
}

// Config is what a fabric is built from.
type Config struct {
	Sched *sim.Scheduler // required
	Trace *sim.Trace     // nil: no trace
	Tap   Tap            // nil: no whole-fabric capture (links may still have their own)
	// Plan is the fault plan applied to every frame; nil applies none.
	Plan *faults.Plan
	// Rand is the stream the plan's probabilistic rules draw from (the
	// "faults" stream of the simulation's sim.Seeds).
	Rand *rand.Rand
	// LinkHook, if set, is told when the plan takes a link down or up, so
	// the NICs at its ends can report their port state.
	LinkHook func(now sim.Time, link string, up bool)
	// Observe, if set, sees every frame the fabric records, as it writes
	// its taps (see FrameRecord): test tools that count frames use it.
	Observe func(*FrameRecord)
	// ObserveFirst, if set, sees the frames the fabric records on their
	// first hop only (FrameRecord.First), before Observe sees the same
	// record: a watcher of what nodes send (package verbs' stall watch)
	// then costs nothing on the hops beyond, and, with Observe nil,
	// nothing is built for them (a frame through a switch is recorded
	// twice).
	ObserveFirst func(*FrameRecord)
	// CountTx numbers the transmissions of every PSN (tx=) even while the
	// plan is empty, so that a plan set later with SetPlan counts a
	// retransmission as one. Without a plan and without CountTx the
	// fabric skips that work.
	CountTx bool
}

// FrameRecord is a frame as the fabric records it: one per frame per
// link direction it starts onto, and one where the fabric dropped it (a
// fault drop at the time the frame would have started onto the link, in
// wire order: see the package documentation).
// Frame, Comment and the record itself are valid only during the Observe
// call: Comment shares the fabric's storage (strings.Clone keeps it).
type FrameRecord struct {
	Time sim.Time
	// Link is the link's name ("a-b") and Dir the direction's ("a->b").
	Link, Dir string
	// From is the node that sent the frame and To the node it is
	// addressed to ("" if no node owns its destination MAC).
	From, To string
	// FromNode and ToNode are From's and To's Node.Index (-1 for none):
	// a watcher keeps per-node state in a slice by them, where a map by
	// name would hash a string per frame.
	FromNode, ToNode int32
	// First is true on the sender's own link, the frame's first hop.
	First bool
	// Tx is the transmission number of its PSN (faults.Injector.CountTx),
	// 0 if it is not RoCE or no transmissions are counted.
	Tx int
	// Dropped is true when the fabric dropped the frame here.
	Dropped bool
	// Looped is true for a frame its node turned round itself on a
	// direct link (Node.Send): it crossed no link, and it is recorded
	// when it comes back, at the instant it was sent, ahead of frames
	// the node sent before it that still wait for the wire.
	Looped bool
	// Copy is 0 for a frame a node sent, i for the i-th copy a dup rule
	// of the fault plan made of one (not a retransmission).
	Copy int
	// Comment is the capture comment: why the frame exists and what a
	// fault did to it.
	Comment string
	Frame   []byte
}

// Errors.
var (
	ErrNoPort       = errors.New("fabric: no such port")
	ErrNotConnected = errors.New("fabric: port is not connected to a link")
	ErrFrameSize    = errors.New("fabric: frame larger than the fabric's largest frame buffer")
	ErrRunt         = errors.New("fabric: frame shorter than an Ethernet header")
	ErrStarted      = errors.New("fabric: topology cannot change once traffic has started")
	ErrConnected    = errors.New("fabric: port already connected")
)

// MaxFrame is the largest frame the fabric carries: a 9000-byte jumbo IP
// packet plus the Ethernet header.
const MaxFrame = 9000 + wire.EthernetLen

// Fabric is the simulated network: nodes, switches and the links between
// them. It is driven entirely by its sim.Scheduler.
type Fabric struct {
	sched    *sim.Scheduler
	plan     *faults.Plan
	trace    *sim.Trace
	tap      Tap
	inj      *faults.Injector
	nodes    []*Node
	switches []*Switch
	links    []*Link
	// names are the nodes' names by index (frameBuf.from, .to).
	names []string
	// txDone are the nodes' SetTxDone functions by index (frameBuf.owner),
	// here rather than only in the Node, which a frame need not reach.
	txDone []func(now sim.Time)
	// repayFn takes back the loans of the frames DeliverLent kept, once
	// released (SetRepay).
	repayFn func(lender int32, l Loan)
	// macIdx finds a node port's MAC (macKey) in macs: a frame's
	// destination is looked up once, at Send, and carried as its index
	// (frameBuf.dst). Lookups only, never iterated.
	macIdx   map[uint64]int32
	macs     []macEntry
	started  bool
	pool     bufPool
	pkt      wire.Packet // scratch decode of the frame being handled
	delayH   delayHandler
	loopH    loopHandler
	changesH changeHandler
	changes  []faults.LinkChange
	changeT  []sim.Timer // the pending change events, cancelled by SetPlan
	linkHook func(now sim.Time, link string, up bool)
	downNow  map[string]bool // links the LinkHook was last told are down (looked up, never iterated)
	observe  func(*FrameRecord)
	obsFirst func(*FrameRecord)
	obsRec   FrameRecord // reused for every Observe and ObserveFirst call
	countTx  bool
	// away marks the nodes that are stand-ins for nodes of another
	// fabric (Node.SetElsewhere), and quietFirst those whose first hops
	// obsFirst does not see (Node.SkipObserveFirst), by index. At the
	// end, so that the fields every frame reads before them keep their
	// places and lines.
	away       []bool
	quietFirst []bool
}

// New returns an empty fabric.
func New(cfg Config) *Fabric {
	if cfg.Sched == nil {
		panic("fabric: Config.Sched is required")
	}
	f := &Fabric{
		plan:     cfg.Plan,
		sched:    cfg.Sched,
		trace:    cfg.Trace,
		tap:      cfg.Tap,
		inj:      faults.NewInjector(cfg.Plan, cfg.Rand),
		macIdx:   map[uint64]int32{},
		linkHook: cfg.LinkHook,
		downNow:  map[string]bool{},
		observe:  cfg.Observe,
		obsFirst: cfg.ObserveFirst,
		countTx:  cfg.CountTx,
	}
	f.delayH.f = f
	f.loopH.f = f
	f.changesH.f = f
	f.scheduleChanges(-1)
	return f
}

// scheduleChanges schedules the plan's link changes later than after.
func (f *Fabric) scheduleChanges(after sim.Time) {
	f.changes = f.plan.Changes()
	f.changeT = f.changeT[:0]
	for i, c := range f.changes {
		if c.Time > after {
			f.changeT = append(f.changeT, f.sched.Schedule(c.Time, &f.changesH, uint64(i)))
		}
	}
}

// SetPlan replaces the fault plan from now on, for a test that changes
// its faults in the middle of a run ("now cut the server's link"). Times
// in the plan are still virtual times since the start of the run. The new
// rules start with fresh counters; transmission counts carry on (see
// faults.Injector.SetPlan). A link the new plan holds down, and the old
// one did not, goes down now (and the other way round), with the same
// LinkHook calls and trace events as a change the plan had scheduled; the
// old plan's later changes are cancelled. Frames already held back by a
// delay or reorder rule stay held. A nil plan applies none.
func (f *Fabric) SetPlan(p *faults.Plan) error {
	if err := p.Validate(); err != nil {
		return err
	}
	now := f.sched.Now()
	f.plan = p
	f.inj.SetPlan(p)
	for _, t := range f.changeT {
		t.Cancel()
	}
	f.scheduleChanges(now)
	if f.trace.Enabled() {
		text := strings.Join(strings.Fields(strings.ReplaceAll(strings.TrimSpace(p.String()), "\n", " ; ")), " ")
		if text == "" {
			text = "(none)"
		}
		f.trace.Add(sim.Event{Time: now, Kind: "plan", Fields: []sim.Field{{Key: "plan", Value: text}}})
	}
	// Compare with what the ends of each link were last told, not with
	// the old plan's LinkUp(now): a change of the old plan due now may
	// not have fired yet, and it has just been cancelled.
	for _, l := range f.links {
		if up := f.inj.LinkUp(now, l.name); up == f.downNow[l.name] {
			f.linkChange(now, faults.LinkChange{Time: now, Link: l.name, Up: up, Text: "fault plan set at " + now.String()})
		}
	}
	return nil
}

// PortConfig gives a port its addresses. ARP is not simulated: peers are
// configured with each other's addresses, and the fabric forwards by MAC.
type PortConfig struct {
	MAC  wire.MAC
	IPv4 netip.Addr // zero if none
	IPv6 netip.Addr // zero if none
}

// macEntry is a MAC some node port has.
type macEntry struct {
	port *Port // the port last added with it
	node int32 // its node's index
}

// macKey is m as a map key: a uint64 key takes the map's fast path.
func macKey(m wire.MAC) uint64 {
	return uint64(m[0])<<40 | uint64(m[1])<<32 | uint64(m[2])<<24 | uint64(m[3])<<16 | uint64(m[4])<<8 | uint64(m[5])
}

// lookupMAC returns the index in f.macs of MAC m, noMAC if no node port
// has it.
func (f *Fabric) lookupMAC(m wire.MAC) int32 {
	if i, ok := f.macIdx[macKey(m)]; ok {
		return i
	}
	return noMAC
}

// dstIndex is what a switch forwards a frame for MAC m by: floodMAC for
// a group address, else its index in f.macs (noMAC if none).
func (f *Fabric) dstIndex(m wire.MAC) int32 {
	if m.IsGroup() {
		return floodMAC
	}
	return f.lookupMAC(m)
}

// Node is an endpoint with Ethernet ports and a Receiver (its NIC).
type Node struct {
	f     *Fabric
	name  string
	idx   int32 // in f.nodes
	ports []*Port
	recv  Receiver
	// The last destination looked up (see destination), valid once
	// lastIsValid is set.
	lastMAC     wire.MAC
	lastDst     int32
	lastTo      int32
	lastIsValid bool
}

// SkipObserveFirst keeps the frames n sends from Config.ObserveFirst,
// whose watcher hears of them from n itself (package verbs' stall watch
// hears a host's NIC as it sends): the fabric then builds no record for
// their first hop unless Config.Observe wants it. Observe, the taps and
// the trace still see them.
func (n *Node) SkipObserveFirst() { n.f.quietFirst[n.idx] = true }

// SetTxDone sets a function called once for every frame the node sends,
// when that frame has left the node's port: it started serializing onto
// the link, or the port dropped it (fault, full queue, MTU). A NIC uses it
// to bound the frames it has handed to the port, as rxe bounds the skbs a
// QP has in the network stack.
func (n *Node) SetTxDone(fn func(now sim.Time)) { n.f.txDone[n.idx] = fn }

// Port is one Ethernet port of a node or switch.
type Port struct {
	owner  string // node or switch name
	index  int
	cfg    PortConfig
	node   *Node   // nil for a switch port
	sw     *Switch // nil for a node port
	out    *direction
	linked *Link
	// floods: a switch's port a group frame is flooded out of (toward a
	// node, or on the switches' spanning tree: floodTree).
	floods bool
}

// farNode returns the node at the far end of p's link, noNode if a
// switch (or nothing) is there.
func (p *Port) farNode() int32 {
	if p.out == nil || p.out.to == nil || p.out.to.node == nil {
		return noNode
	}
	return p.out.to.node.idx
}

// AddNode adds a node with the given ports.
func (f *Fabric) AddNode(name string, ports ...PortConfig) *Node {
	if f.started {
		panic(ErrStarted)
	}
	n := &Node{f: f, name: name, idx: int32(len(f.nodes))}
	for i, pc := range ports {
		p := &Port{owner: name, index: i, cfg: pc, node: n}
		n.ports = append(n.ports, p)
		k := macKey(pc.MAC)
		if j, ok := f.macIdx[k]; ok {
			f.macs[j] = macEntry{p, n.idx} // the later port wins, as in a map by MAC
		} else {
			f.macIdx[k] = int32(len(f.macs))
			f.macs = append(f.macs, macEntry{p, n.idx})
		}
	}
	f.nodes = append(f.nodes, n)
	f.names = append(f.names, name)
	f.txDone = append(f.txDone, nil)
	f.away = append(f.away, false)
	f.quietFirst = append(f.quietFirst, false)
	return n
}

// Name returns the node's name.
func (n *Node) Name() string { return n.name }

// Index returns the node's place in the order nodes were added (Nodes),
// from 0: FrameRecord.FromNode and ToNode.
func (n *Node) Index() int32 { return n.idx }

// Port returns port i, or nil.
func (n *Node) Port(i int) *Port {
	if i < 0 || i >= len(n.ports) {
		return nil
	}
	return n.ports[i]
}

// SetReceiver sets what receives the node's frames.
func (n *Node) SetReceiver(r Receiver) {
	n.recv = r
	for _, p := range n.ports {
		if l := p.linked; l != nil {
			for i := range l.dirs {
				if d := &l.dirs[i]; d.to == p {
					d.setReceiver(r)
				}
			}
		}
	}
}

// Config returns the port's addresses.
func (p *Port) Config() PortConfig { return p.cfg }

// Link returns the link the port is attached to, or nil.
func (p *Port) Link() *Link { return p.linked }

// GIDs returns the port's RoCE v2 GIDs in rxe's order: the IPv6 address
// (if any), then the IPv4 address as an IPv4-mapped IPv6 address (if any).
func (p *Port) GIDs() []netip.Addr {
	var g []netip.Addr
	if p.cfg.IPv6.IsValid() {
		g = append(g, p.cfg.IPv6)
	}
	if p.cfg.IPv4.IsValid() {
		g = append(g, netip.AddrFrom16(p.cfg.IPv4.As16()))
	}
	return g
}

// String returns the name of the Port, for traces and messages.
func (p *Port) String() string { return fmt.Sprintf("%s port %d", p.owner, p.index) }

// Send puts frame on the wire from port: it is copied, judged by the fault
// plan, queued at the port's egress and serialized onto the link. note, if
// not empty, says why the frame exists ("retransmission #2"); it goes into
// the trace and the frame's capture comment, and is copied as the frame
// is (a NIC's notes live in its batch: nic.OutFrame). A frame longer than
// MaxFrame (ErrFrameSize) or shorter than an Ethernet header (ErrRunt) is
// refused.
//
// A frame for the sending port's own MAC on a direct link to another
// node comes back to the port instead, at the same instant, as rxe
// loops a packet for a local address back (rxe_net.c, rxe_loopback): it
// never reaches the link, so neither the fault plan nor the capture
// sees it, as a capture of a real rxe port would not (see loopHandler).
// Toward a switch it goes out as every frame does, and the switch sends
// it back down the same port.
func (n *Node) Send(port int, frame, note []byte) error {
	return n.send(port, frame, note, false, Hint{})
}

// SendSealed is Send for a frame whose ICRC its sender vouches for: a NIC
// model that encoded it (wire.Encode). A SealedReceiver gets it through
// ReceiveSealed, and may skip the check (the CRC of every byte of a
// frame that has crossed the fabric, gone cold in a large world), unless
// a fault plan's rule changed its bytes on the way.
func (n *Node) SendSealed(port int, frame, note []byte) error {
	return n.send(port, frame, note, true, Hint{})
}

// SendHinted is SendSealed with a hint for the frame's receiver: the
// memory its Receiver will read first for this frame (Hint).
func (n *Node) SendHinted(port int, frame, note []byte, h Hint) error {
	return n.send(port, frame, note, true, h)
}

func (n *Node) send(port int, frame, note []byte, sealed bool, h Hint) error {
	p := n.Port(port)
	if p == nil {
		return fmt.Errorf("%w: %s has no port %d", ErrNoPort, n.name, port)
	}
	if p.out == nil {
		return fmt.Errorf("%w: %s", ErrNotConnected, p)
	}
	if err := checkFrameLen(len(frame)); err != nil {
		return err
	}
	f := n.f
	f.start()
	b := f.pool.get(len(frame))
	b.n = f.pool.fill(b, frame)
	b.from = n.idx
	if m := wire.Ethernet(frame).Dst(); n.lastIsValid && m == n.lastMAC {
		b.to, b.dst = n.lastTo, n.lastDst // a NIC mostly talks to one peer
	} else {
		b.to, b.dst = n.destination(m)
	}
	if b.dst == floodMAC {
		b.to = p.farNode() // a direct link's far end; none toward a switch
	}
	f.pool.setNote(b, note)
	b.tx = 0
	b.owner = n.idx
	b.sealed = sealed
	if b.to == n.idx && p.farNode() != noNode && wire.Ethernet(frame).Dst() == p.cfg.MAC {
		f.loopH.loop(p.out, b) // for the sending port itself
		return nil
	}
	f.enter(p.out, b, true, h)
	return nil
}

// checkFrameLen refuses a frame of n bytes the fabric cannot carry: one
// longer than MaxFrame (ErrFrameSize), or one with no whole Ethernet
// header, whose destination MAC reading would run past it (ErrRunt: a
// sender's bug, refused as an oversized frame is).
func checkFrameLen(n int) error {
	switch {
	case n > MaxFrame:
		return fmt.Errorf("%w: %d bytes", ErrFrameSize, n)
	case n < wire.EthernetLen:
		return fmt.Errorf("%w: %d bytes, %d needed", ErrRunt, n, wire.EthernetLen)
	}
	return nil
}

// destination returns the node owning MAC m (noNode if none) and m's
// index in f.macs (noMAC if none, floodMAC for a group MAC, which no one
// node owns), and remembers the answer for Send.
func (n *Node) destination(m wire.MAC) (to, dst int32) {
	to, dst = n.f.owner(m)
	n.lastMAC, n.lastTo, n.lastDst, n.lastIsValid = m, to, dst, true
	return to, dst
}

// Addressee returns the Index of the node a frame n sends is addressed
// to, as its records name it (FrameRecord.ToNode): the node that owns
// its destination MAC, -1 if none (a group MAC, an unknown one, a runt).
func (n *Node) Addressee(frame []byte) int32 {
	if len(frame) < wire.EthernetLen {
		return noNode
	}
	to, _ := n.f.owner(wire.Ethernet(frame).Dst())
	return to
}

// owner returns the node owning MAC m (noNode if none) and m's index in
// f.macs (noMAC if none, floodMAC for a group MAC).
func (f *Fabric) owner(m wire.MAC) (to, dst int32) {
	to, dst = noNode, f.dstIndex(m)
	if dst >= 0 {
		to = f.macs[dst].node
	}
	return to, dst
}

// name returns the name of node i, "" for noNode.
func (f *Fabric) name(i int32) string {
	if i == noNode {
		return ""
	}
	return f.names[i]
}

// Started reports whether the topology is frozen: a frame has been sent,
// and nodes, switches and links can no longer be added.
func (f *Fabric) Started() bool { return f.started }

// start freezes the topology at the first frame and computes switch
// forwarding tables.
func (f *Fabric) start() {
	if f.started {
		return
	}
	f.started = true
	for _, s := range f.switches {
		s.buildTable(f)
	}
	f.floodTree()
	if f.Large() {
		f.sched.SetPrefetch(true)
	}
}

// Large reports whether the fabric has prefetchNodes nodes or more:
// about where a world's state outgrows the caches, so that what the
// next event will touch is asked for ahead (its scheduler's prefetch,
// on from the first frame) and a driver may write what it will not read
// soon past the caches (verbs: nic.Device.SetStreamingWrites).
func (f *Fabric) Large() bool { return len(f.nodes) >= prefetchNodes }

// prefetchNodes is the number of nodes from which a fabric's scheduler
// asks each link's next event for the frame it will touch
// (direction.Prefetch): about where a world's state outgrows the caches
// (tools/scale: the alltoall at N = 64 takes 9% less time with it, at
// N = 32 about the same; a 2-node stream 5-10% more).
const prefetchNodes = 32

// floodTree marks the ports switches flood group frames out of: every
// port toward a node, and the ports of a spanning tree of the switches
// (breadth-first from the first switch of each connected part, in port
// order), so that a flood reaches every node once and never goes round a
// loop of switches, as the spanning tree protocol leaves an Ethernet
// with redundant links.
func (f *Fabric) floodTree() {
	seen := map[*Switch]bool{} // lookups only
	for _, root := range f.switches {
		if seen[root] {
			continue
		}
		seen[root] = true
		queue := []*Switch{root}
		for len(queue) > 0 {
			s := queue[0]
			queue = queue[1:]
			for _, p := range s.ports {
				if p.linked == nil || p.out == nil || p.out.to == nil {
					continue
				}
				switch far := p.out.to; {
				case far.node != nil:
					// A node elsewhere gets the flood from its own
					// fabric's copy of the switch.
					p.floods = !f.away[far.node.idx]
				case far.sw != nil && !seen[far.sw]:
					seen[far.sw] = true
					p.floods, far.floods = true, true
					queue = append(queue, far.sw)
				}
			}
		}
	}
}

// Nodes returns the nodes in the order they were added.
func (f *Fabric) Nodes() []*Node { return f.nodes }

// Links returns the links in the order they were connected.
func (f *Fabric) Links() []*Link { return f.links }

// Names returns the names a fault plan may use for this fabric: its
// links', and its nodes' and switches' (faults.Plan.CheckNames), in the
// order they were added.
func (f *Fabric) Names() (links, nodes []string) {
	for _, l := range f.links {
		links = append(links, l.name)
	}
	nodes = append(nodes, f.names...)
	for _, s := range f.switches {
		nodes = append(nodes, s.name)
	}
	return links, nodes
}

// Now returns the fabric's current time.
func (f *Fabric) Now() sim.Time { return f.sched.Now() }

// RuleHits returns how many decisions rule (1-based, as in the plan) has
// made so far (faults.Injector.Hits); 0 for a rule outside the plan.
func (f *Fabric) RuleHits(rule int) uint64 { return f.inj.Hits(rule) }

// FaultHits returns how many decisions the fault plan's rules have made
// so far, summed over the rules (faults.Injector.Hits): frames dropped,
// duplicated, delayed, held back for reordering or altered, and frames
// lost to a down link or a partition.
func (f *Fabric) FaultHits() uint64 {
	if f.plan == nil {
		return 0
	}
	var n uint64
	for i := range f.plan.Rules {
		n += f.inj.Hits(i + 1)
	}
	return n
}

// TxEvictions returns how many flows the fault plan's transmission
// counting has forgotten to bound its memory (faults.Injector.TxEvictions):
// when it is not 0, a tx= rule may have taken a retransmission of an
// evicted flow for a first transmission. 0 in any ordinary simulation.
func (f *Fabric) TxEvictions() uint64 { return f.inj.TxEvictions() }

// LimitTx lowers the bounds of the fault plan's transmission counting
// (faults.Injector.LimitTx): for a fabric that must use less memory, and
// for tests of what reports TxEvictions.
func (f *Fabric) LimitTx(maxFlows, maxEntries int) { f.inj.LimitTx(maxFlows, maxEntries) }
