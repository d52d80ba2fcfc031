package verbs

import (
	"errors"
	"fmt"
	"strconv"
	"unsafe"

	"github.com/rocesim/rocesim/faults"
	"github.com/rocesim/rocesim/sim"
	"github.com/rocesim/rocesim/sim/fabric"
	"github.com/rocesim/rocesim/wire"
)

// A large world on several cores
//
// A Cluster is one world cut into parts, each a World of its own (its
// scheduler, fabric, devices and stall watch) that one goroutine runs at
// a time, advanced side by side in steps of one link propagation delay
// (conservative parallel simulation: a frame that leaves a wire now
// reaches the far end no sooner than that, so nothing one part does
// within a step can reach another part before the step ends). Between
// steps the cluster hands each frame that crossed from one part to
// another to its destination, where it arrives at the time it would have
// (fabric.Link.Divert and Deliver).
//
// Hosts go to the parts in turn (host i to part (i-1) mod Parts), or in
// blocks when the cluster is told how many will come (ClusterConfig.Hosts),
// or where the program puts them (AddHostIn); every other part has a
// stand-in for the host, and every part knows every host's addresses.
// The switch (ConnectSwitch) is in every part, each copy owning the ports
// toward the part's own hosts: a frame for a host of another part
// crosses its sender's link in the sender's part and arrives at the
// switch in its destination's part (fabric.Link.Divert), where it queues
// for its egress port with the frames from everywhere else. A switch
// forwards at once, so each egress queue sees the frames, and the times,
// it would in one World, and the switch's work is shared by the parts
// (in part 0 alone, it was a sixth more work for that part at N = 256,
// and the one part every other part's frames crossed to and from).
//
// The result depends on the seed, the program and the number of parts,
// never on how many goroutines run them (ClusterConfig.Each, package
// verbs/parallel) nor on how the operating system schedules them: within a step the parts share
// nothing, and between steps the crossings are delivered in a fixed
// order (by sending part, then in the order each part sent them). A
// cluster of one part runs exactly as a World does. With more, events
// at the same instant in different parts may be taken in another order
// than one World would take them, and each part draws its fault plan's
// random numbers from a stream of its own, so a run with 4 parts is not
// byte for byte the run with 1, but the same every time.

// ClusterConfig describes a cluster.
type ClusterConfig struct {
	// World is every part's configuration. Capture gets every part's
	// frames, Trace every part's events and Observe every part's frame
	// records, handed on between steps from the caller's goroutine in
	// time order (clusterCapture, clusterTrace, clusterObserve), so that
	// a ladder can be drawn from the trace; Progress is called by Run
	// between steps, from its caller's goroutine; MaxEvents bounds each
	// part's events.
	World WorldConfig
	// Parts is how many parts the world is cut into (at least 1).
	Parts int
	// Each runs step(p) once for every part p of a step, in any order
	// and on any goroutines, and returns when all have returned: package
	// verbs/parallel's Each runs them on several cores (this package
	// starts no goroutine). nil runs them one after another on the
	// caller's goroutine. The result does not depend on it.
	Each func(n int, step func(p int))
	// Hosts, if not 0, is how many hosts AddHost will add: they go to
	// the parts in contiguous blocks of ⌈Hosts/Parts⌉ (the first block
	// to part 0, and so on; hosts past Hosts to the last part), so that each part's hosts were made together and its
	// memory is apart from the others' (hosts dealt in turn put hosts of
	// two parts side by side in memory, and the two cores then fight
	// over shared cache lines: 15% slower for the alltoall at N = 256).
	// 0 deals them in turn.
	Hosts int
	// EachAfter is the fewest events (over all parts) a step must fire
	// for the next step to go to Each; after a smaller step the next
	// runs its parts in turn on the caller's goroutine, since handing
	// parts to other goroutines costs a few microseconds a step (a
	// goroutine woken on another core), the time of a few dozen events.
	// The first step of each Run or RunTo goes to Each whatever the
	// step before it fired: it carries what the program did between
	// runs (a round of posts scheduled for its start, for instance),
	// which the last step of the run before says nothing of. 0 means
	// 256; a negative value sends every step to Each. The result does
	// not depend on it.
	EachAfter int
}

// Cluster is a world cut into parts run on several cores (see the
// comment above). Like a World, it is driven from one goroutine; virtual
// time moves only inside Run and RunTo.
type Cluster struct {
	cfg    ClusterConfig
	parts  []*World
	hosts  []*Host
	partOf []int // partOf[i]: the part of hosts[i]
	// standIn[p][i] is part p's stand-in for hosts[i] (nil in the host's
	// own part), which ConnectSwitch links to part p's switch.
	standIn [][]*fabric.Node
	// hostAt[p][k] is the host whose node (or stand-in) is node k of
	// part p's fabric.
	hostAt [][]int32
	// links[p][i] is part p's copy of the link of hosts[i] to the switch.
	links     [][]*fabric.Link
	lookahead sim.Duration
	// mail[g][p] holds the frames part p's remote directions sent in a
	// step of generation g (steps alternate 0, 1, 0, …): each part
	// writes only its own, in its step, and reads the others' of the
	// step before at the start of its next, so that delivering runs in
	// parallel too. gen is the generation written now: the current
	// step's, or between steps the last one's, whose frames the next
	// step delivers (a verb called between runs may send some).
	mail [2][]mailbox
	gen  int
	// inStep is set when a RunTo stopped inside a step, which ends at
	// stepEnd: the next RunTo finishes it before it starts another.
	inStep  bool
	stepEnd sim.Time
	// stepping is set while the parts run a step, perhaps on several
	// goroutines: a part then reads no other part's state (the hints of
	// QPs connected meanwhile stay within their part: World.peerHint).
	stepping bool
	// progress is the event count at which Progress is called next.
	progress uint64
	// end is where the step being run stops; stepFn and resumeFn run
	// part p's share of a new step and of one an earlier RunTo stopped
	// inside, each leaving its error in errs[p]. Made once, so that a
	// run allocates nothing for them.
	end              sim.Time
	stepFn, resumeFn func(p int)
	errs             []error
	// firedBefore is the parts' events fired before the last step, and
	// lastStep how many that step fired; eachAfter is
	// ClusterConfig.EachAfter in force.
	firedBefore, lastStep, eachAfter uint64
	// capture is the program's WorldConfig.Capture, which the parts
	// record into through their own taps (nil without one); trace is
	// its Trace, which the parts record into through their own.
	capture *clusterCapture
	trace   *clusterTrace
	observe *clusterObserve
}

// mailbox is what one part sent toward the others in one step. It is
// written at every crossing, so it fills two cache lines of its own: two
// parts' mailboxes side by side in one line would bounce it between
// their cores at every frame.
type mailbox struct {
	to    [][]crossing // to[q]: toward part q, in the order sent
	bytes []byte       // the group frames' bytes and notes, one after another
	minAt sim.Time     // the earliest arrival among them (sim.Never: none)
	// back[q] are the buffers part q lent with frames this part is done
	// with (fabric.Link.DeliverLent), in the order it released them, for
	// q to take back at the start of its next step.
	back [][]fabric.Loan
	_    [128 - 80]byte
}

// toPad is how many slice headers (24 bytes each) a mailbox's list of
// lists leaves unused at each end: more than a cache line.
const toPad = 3

// crossing is a frame on its way from one part to another.
type crossing struct {
	at   sim.Time
	link *fabric.Link // the destination part's copy of the sender's link, entered from its stand-in (direction 0)
	// frame and note are its bytes and its note: in the sending part's
	// buffer, lent until the sending part takes it back (loan), or, for
	// a group frame (loan 0), copied into the sending part's mailbox.
	frame, note []byte
	loan        fabric.Loan
	sealed      bool
	tx          int32
	fault       string
	// to is the node it was sent to, in the destination part
	// (fabric.RemoteFrame.To), -1 for a group frame.
	to     int32
	hint   fabric.Hint
	dstMAC wire.MAC
}

// NewCluster returns an empty cluster at time 0.
func NewCluster(cfg ClusterConfig) (*Cluster, error) {
	wc := cfg.World
	switch {
	case cfg.Parts < 1:
		return nil, fmt.Errorf("verbs: cluster: Parts is %d, at least 1 is needed", cfg.Parts)
	case cfg.Hosts < 0:
		return nil, fmt.Errorf("verbs: cluster: Hosts is %d (0 if not known)", cfg.Hosts)
	}
	if wc.Link.Bandwidth == 0 {
		wc.Link = fabric.DefaultLinkConfig()
	}
	if cfg.Parts > 1 {
		if err := clusterPlan(wc.Plan); err != nil {
			return nil, err
		}
	}
	if wc.Link.Propagation <= 0 {
		return nil, fmt.Errorf("verbs: cluster: the links' propagation delay is %v; parts advance by it, so it must be positive", wc.Link.Propagation)
	}
	c := &Cluster{cfg: cfg, lookahead: wc.Link.Propagation, progress: progressEvery, eachAfter: eachAfter,
		standIn: make([][]*fabric.Node, cfg.Parts), hostAt: make([][]int32, cfg.Parts), links: make([][]*fabric.Link, cfg.Parts)}
	switch {
	case cfg.EachAfter < 0:
		c.eachAfter = 0
	case cfg.EachAfter > 0:
		c.eachAfter = uint64(cfg.EachAfter)
	}
	for g := range c.mail {
		c.mail[g] = make([]mailbox, cfg.Parts)
		for p := range c.mail[g] {
			// The headers sit in the middle of their array, a cache
			// line clear of its ends: the next small allocation may be
			// another part's, and every crossing writes its header.
			to := make([][]crossing, cfg.Parts+2*toPad)
			back := make([][]fabric.Loan, cfg.Parts+2*toPad)
			c.mail[g][p] = mailbox{to: to[toPad : toPad+cfg.Parts], back: back[toPad : toPad+cfg.Parts], minAt: sim.Never}
		}
	}
	c.errs = make([]error, cfg.Parts)
	c.stepFn = func(p int) { c.errs[p] = c.stepPart(p, c.end) }
	c.resumeFn = func(p int) { c.errs[p] = c.parts[p].run(c.end, false) }
	progress := wc.Progress
	wc.Progress = nil
	if wc.Capture != nil {
		c.capture = &clusterCapture{tap: wc.Capture, ifaces: map[string]int{}}
	}
	if wc.Trace != nil {
		c.trace = &clusterTrace{out: wc.Trace}
	}
	if wc.Observe != nil {
		c.observe = &clusterObserve{out: wc.Observe}
	}
	for p := range cfg.Parts {
		stream := "faults"
		if p > 0 {
			stream = "faults/part " + strconv.Itoa(p)
		}
		pc := wc
		if c.capture != nil {
			t := &partTap{c: c.capture}
			c.capture.parts = append(c.capture.parts, t)
			pc.Capture = t
		}
		if c.trace != nil {
			// Emptied at every step: no limit of its own (the
			// program's trace has it).
			t := &sim.Trace{Limit: -1}
			c.trace.parts = append(c.trace.parts, t)
			pc.Trace = t
		}
		if c.observe != nil {
			o := &partObserve{}
			c.observe.parts = append(c.observe.parts, o)
			pc.Observe = o.record
		}
		w := newWorld(pc, stream)
		w.part, w.cluster = p+1, c
		// A frame from another part stays in the buffer its part lent
		// with it until this part is done with it (stepPart); then the
		// loan goes into this part's mailbox of the step, or, between
		// steps, of the last one, for the lender's next step.
		w.fab.SetRepay(func(lender int32, l fabric.Loan) {
			m := &c.mail[c.gen][p]
			m.back[lender] = append(m.back[lender], l)
		})
		c.parts = append(c.parts, w)
	}
	c.cfg.World = wc
	c.cfg.World.Progress = progress
	return c, nil
}

// clusterPlan refuses the rules whose counts span the whole world: each
// part judges the frames of its own links with an injector of its own,
// so nth=, first= and a down event's after= would count each part's
// frames apart, and mean something else than in a World.
func clusterPlan(p *faults.Plan) error {
	if p == nil {
		return nil
	}
	for i, r := range p.Rules {
		key := ""
		switch {
		case r.Match.Nth != 0:
			key = "nth="
		case r.Match.First != 0:
			key = "first="
		case r.After != 0:
			key = "after="
		}
		if key != "" {
			return fmt.Errorf("verbs: cluster: rule %d: %s counts frames over the whole world, and a cluster's parts count theirs apart: not supported in a cluster of more than one part", i+1, key)
		}
	}
	return nil
}

// AddHost adds a host with the addresses World.AddHost gives the i-th
// (HostAddrOf, or its link-local GID), in part (i-1) mod Parts, or in its block of
// ClusterConfig.Hosts; the other parts get a stand-in for it.
func (c *Cluster) AddHost(name string) *Host {
	i := len(c.hosts)
	part := i % len(c.parts)
	if n := c.cfg.Hosts; n > 0 {
		per := (n + len(c.parts) - 1) / len(c.parts)
		part = min(i/per, len(c.parts)-1)
	}
	h, err := c.AddHostIn(part, name)
	if err != nil {
		// As World.AddHost once traffic has started (fabric.AddNode).
		panic(err)
	}
	return h
}

// AddHostIn adds a host as AddHost does, in part part.
func (c *Cluster) AddHostIn(part int, name string) (*Host, error) {
	if part < 0 || part >= len(c.parts) {
		return nil, fmt.Errorf("verbs: cluster: no part %d (the cluster has %d)", part, len(c.parts))
	}
	for _, w := range c.parts {
		if w.fab.Started() {
			return nil, fmt.Errorf("verbs: cluster: host %s: %w", name, fabric.ErrStarted)
		}
	}
	i := len(c.hosts) + 1
	w := c.parts[part]
	a := w.hostAddr(i)
	h := w.addHost(name, a, i)
	w.addNeighbours(h)
	w.index(h)
	gids := h.dev.GIDs()
	hi := int32(len(c.hosts))
	for q, o := range c.parts {
		var in *fabric.Node
		if q == part {
			c.setHostAt(q, h.node.Index(), hi)
		} else {
			in = o.fab.AddNode(name, a.port())
			in.SetElsewhere()
			o.learn(gids, a.MAC, h.dev, false)
			o.addPeer(peer{name: name, node: in.Index(), gids: gids})
			c.setHostAt(q, in.Index(), hi)
		}
		c.standIn[q] = append(c.standIn[q], in)
	}
	c.hosts = append(c.hosts, h)
	c.partOf = append(c.partOf, part)
	return h, nil
}

// setHostAt records that node k of part p's fabric is hosts[i]'s.
func (c *Cluster) setHostAt(p int, k, i int32) {
	for int(k) >= len(c.hostAt[p]) {
		c.hostAt[p] = append(c.hostAt[p], -1)
	}
	c.hostAt[p][k] = i
}

// ConnectSwitch joins every host added so far to one switch named "sw",
// which every part has (see the comment above): in part p, the switch's
// port i leads to host i, or to part p's stand-in for it, and host i's
// link diverts the frames for the hosts of other parts to theirs.
func (c *Cluster) ConnectSwitch() error {
	if c.parts[0].sw != nil {
		// Refused before anything changes: the first call's links
		// divert their frames through what that call made.
		return fmt.Errorf("verbs: cluster: the switch is connected already: %w", fabric.ErrConnected)
	}
	cfg := c.parts[0].cfg.Link
	for p, w := range c.parts {
		w.sw = w.fab.AddSwitch("sw", len(c.hosts))
		c.links[p] = c.links[p][:0]
		for i, h := range c.hosts {
			node := h.node
			if c.partOf[i] != p {
				node = c.standIn[p][i]
			}
			l, err := w.fab.Connect(h.name+"-sw", node.Port(0), w.sw.Port(i), cfg)
			if err != nil {
				return err
			}
			c.links[p] = append(c.links[p], l)
			if c.partOf[i] == p {
				// Direction 0 leaves the first port given to Connect.
				l.DivertLent(0, c.divert(p, i))
			}
		}
	}
	return nil
}

// divert returns what host i's link in its part p calls with each frame
// for a host of another part (and each group frame): the frame is kept
// for the destination's part (every other part, for a group frame) until
// the next step delivers it through that part's copy of the link, from
// its stand-in for host i toward its switch.
func (c *Cluster) divert(p, i int) func(fabric.RemoteFrame) {
	return func(r fabric.RemoteFrame) {
		if r.Reaches >= 0 {
			q := c.partOf[c.hostAt[p][r.Reaches]]
			c.post(p, q, c.links[q][i], r)
			return
		}
		for q := range c.parts {
			if q != p {
				c.post(p, q, c.links[q][i], r)
			}
		}
	}
}

// nodeIn returns the node of hosts[i] in part p's fabric: the host's own
// or p's stand-in for it.
func (c *Cluster) nodeIn(p, i int) *fabric.Node {
	if n := c.standIn[p][i]; n != nil {
		return n
	}
	return c.hosts[i].node
}

// post keeps frame r, sent by part from, for direction 0 of link to in
// part toPart, until the next step delivers it.
func (c *Cluster) post(from, toPart int, to *fabric.Link, r fabric.RemoteFrame) {
	m := &c.mail[c.gen][from]
	// The destination part names the frame's addressee by its own node,
	// which is not the one a rule that rewrote the MAC sends it to.
	addressee := int32(-1)
	if r.To >= 0 {
		addressee = c.nodeIn(toPart, int(c.hostAt[from][r.To])).Index()
	}
	x := crossing{at: r.At, link: to, frame: r.Frame, note: r.Note, loan: r.Loan, sealed: r.Sealed, tx: r.Tx,
		fault: r.Fault, to: addressee, hint: r.Hint, dstMAC: r.DstMAC}
	if r.Loan == 0 {
		// A group frame, handed over for the call only: its bytes are
		// copied. A slice taken before the mailbox's storage moves
		// keeps the old storage, whose bytes do not change.
		k := len(m.bytes)
		m.bytes = append(append(m.bytes, r.Frame...), r.Note...)
		x.frame, x.note = m.bytes[k:k+len(r.Frame):k+len(r.Frame)], m.bytes[k+len(r.Frame):len(m.bytes):len(m.bytes)]
	}
	m.to[toPart] = append(m.to[toPart], x)
	m.minAt = min(m.minAt, r.At)
}

// Parts returns the cluster's parts, in order: each part's fabric and
// counters are read through its World (read them between runs only).
func (c *Cluster) Parts() []*World { return c.parts }

// Hosts returns the hosts in the order they were added.
func (c *Cluster) Hosts() []*Host { return c.hosts }

// Now returns the latest time any part has reached.
func (c *Cluster) Now() sim.Time {
	var t sim.Time
	for _, w := range c.parts {
		t = max(t, w.sched.Now())
	}
	return t
}

// Pending returns how many events the parts have scheduled, with the
// frames waiting between two parts: 0 once the cluster has nothing left
// to do (a part's own Scheduler().Pending() misses the frames that cross).
func (c *Cluster) Pending() int {
	n := 0
	for p, w := range c.parts {
		n += w.sched.Pending()
		// The frames sent since the current step began; those of the
		// mailbox before it are in the parts' schedulers already.
		for _, to := range c.mail[c.gen][p].to {
			n += len(to)
		}
	}
	return n
}

// Run runs the cluster until nothing is left to happen in any part.
func (c *Cluster) Run() error { return c.RunTo(sim.Never) }

// RunTo runs every event due at or before t in every part, in steps of
// one propagation delay, the parts of a step run by ClusterConfig.Each. A
// part that spends its event budget ends the run with its
// *RunawayError (the lowest such part's, if several do in one step).
func (c *Cluster) RunTo(t sim.Time) error {
	each := c.cfg.Each
	if each == nil {
		each = inTurn
	}
	// Frames a verb sent, and events it traced, between runs are
	// written first.
	c.flush()
	defer c.flush()
	for first := true; ; first = false {
		var full sim.Time
		if c.inStep {
			// A step an earlier RunTo stopped inside: its frames were
			// delivered when it began; the parts finish it, so that how
			// the program cuts a run into RunTo calls changes nothing.
			full = c.stepEnd
			c.end = min(full, t)
			c.stepping = true
			each(len(c.parts), c.resumeFn)
			c.stepping = false
		} else {
			// The next step starts at the earliest event of any part
			// or arrival of a frame waiting to cross.
			next := sim.Never
			for p, w := range c.parts {
				next = min(next, w.sched.NextAt(), c.mail[c.gen][p].minAt)
			}
			if next == sim.Never || next > t {
				return c.settle(t)
			}
			full = next.Add(c.lookahead - 1)
			c.end = min(full, t)
			c.gen ^= 1
			c.stepping = true
			if c.lastStep < c.eachAfter && !first {
				// A sparse stretch: waking goroutines for a step of
				// a few events costs more than the events. (A run's
				// first step may be the program's round of posts:
				// the alltoall at N = 256 as 2 parts ran each round's
				// posts in turn, 7% of its time.)
				inTurn(len(c.parts), c.stepFn)
			} else {
				each(len(c.parts), c.stepFn)
			}
			c.stepping = false
		}
		fired := c.fired()
		c.lastStep, c.firedBefore = fired-c.firedBefore, fired
		c.flush()
		for _, err := range c.errs {
			if err == nil {
				continue
			}
			var runaway *RunawayError
			if errors.As(err, &runaway) {
				return c.runaway(runaway)
			}
			return err
		}
		c.reportProgress()
		c.inStep, c.stepEnd = c.end < full, full
		if c.inStep {
			return c.settle(t)
		}
	}
}

// inTurn runs step(0) … step(n-1) one after another on the caller's
// goroutine: ClusterConfig.Each when none is given.
func inTurn(n int, step func(int)) {
	for p := range n {
		step(p)
	}
}

// eachAfter is ClusterConfig.EachAfter's default: at N = 256 the
// alltoall's steps fire thousands of events; a stream between two hosts
// of two parts, a dozen (BenchmarkClusterStream: 35% slower on two
// goroutines than on one, before steps this small ran in turn).
const eachAfter = 256

// fired returns how many events the parts have fired in all.
func (c *Cluster) fired() uint64 {
	var n uint64
	for _, w := range c.parts {
		n += w.sched.Fired()
	}
	return n
}

// settle ends a run: every part ends at one time, the cluster's (t, or
// the last event any part fired, as a World's clock stops at its last
// event), so that what the program does next happens at one instant
// everywhere.
func (c *Cluster) settle(t sim.Time) error {
	if t == sim.Never {
		t = c.Now()
	}
	for _, w := range c.parts {
		if err := w.run(t, true); err != nil {
			return err
		}
	}
	return nil
}

// stepPart is part p's share of a step: it empties its mailbox of the
// step's generation, takes the frames the others sent it in the step
// before (by sending part, in the order each sent them), then runs its
// events through end.
func (c *Cluster) stepPart(p int, end sim.Time) error {
	own := &c.mail[c.gen][p]
	w := c.parts[p]
	// This mailbox's frames were delivered, and its loans taken back,
	// in the step before: the lists start again.
	for q, xs := range own.to {
		clear(xs) // nothing kept alive through the list
		own.to[q] = xs[:0]
	}
	for q := range own.back {
		own.back[q] = own.back[q][:0]
	}
	own.bytes, own.minAt = own.bytes[:0], sim.Never
	for q := range c.mail[c.gen^1] {
		m := &c.mail[c.gen^1][q]
		// The buffers this part lent, which part q is done with.
		for _, l := range m.back[p] {
			if err := w.fab.Return(l); err != nil {
				return fmt.Errorf("verbs: cluster: part %d, from part %d: %w", p, q, err)
			}
		}
		for _, x := range m.to[p] {
			r := fabric.RemoteFrame{At: x.at, Frame: x.frame, Note: x.note, Sealed: x.sealed, Tx: x.tx, Fault: x.fault, To: x.to, Hint: x.hint, DstMAC: x.dstMAC}
			var err error
			if x.loan != 0 {
				// Kept where it is, in part q's buffer, until done with.
				r.Loan = x.loan
				err = x.link.DeliverLent(0, r, int32(q))
			} else {
				err = x.link.Deliver(0, r)
			}
			if err != nil {
				// A frame that cannot arrive in time would be a broken
				// step (the lookahead): never in a working cluster.
				return fmt.Errorf("verbs: cluster: a frame from part %d to part %d: %w", q, p, err)
			}
		}
	}
	return w.run(end, false)
}

// reportProgress calls WorldConfig.Progress when the parts have fired
// another progressEvery events since it was last called.
func (c *Cluster) reportProgress() {
	fn := c.cfg.World.Progress
	if fn == nil {
		return
	}
	var pr Progress
	for _, w := range c.parts {
		pr.Events += w.sched.Fired()
		pr.Now = max(pr.Now, w.sched.Now())
	}
	if pr.Events < c.progress {
		return
	}
	for _, w := range c.parts {
		pr.Frames += w.Frames()
	}
	c.progress = pr.Events + progressEvery
	fn(pr)
}

// flush hands what the parts captured and traced since the last flush
// to the program's capture and trace.
func (c *Cluster) flush() {
	c.capture.flush()
	c.trace.flush()
	c.observe.flush()
}

// clusterTrace writes a cluster's events to the program's trace: each
// part records into a trace of its own during a step, and between steps
// the events of all parts go to the program's trace in time order (then
// by part, then in the order each part recorded them), as the capture's
// frames do, so the trace, and a ladder drawn from it, is the same
// whatever the goroutines, and its Hook runs on the program's goroutine.
// Events a verb traces between runs reach it when the next run starts.
type clusterTrace struct {
	out   *sim.Trace
	parts []*sim.Trace
	m     merger
}

func (c *clusterTrace) flush() {
	if c == nil {
		return
	}
	c.m.merge(len(c.parts), func(p int) int { return len(c.parts[p].Events()) },
		func(p, i int) sim.Time { return c.parts[p].Events()[i].Time },
		func(p, i int) { c.out.Add(c.parts[p].Events()[i]) })
	// Once the program's trace takes no more, the parts' emitters stop
	// building events for it, as a World's do (Trace.Enabled).
	off := !c.out.Enabled()
	for _, t := range c.parts {
		t.Clear()
		t.Off = off
	}
}

// clusterObserve gives a cluster's frame records to the program's
// Observe: each part keeps copies of its records during a step (the
// record's frame and comment are valid during the call only), and
// between steps the program's Observe gets them all in time order, on
// its own goroutine, as a World's would in one run.
type clusterObserve struct {
	out   func(*fabric.FrameRecord)
	parts []*partObserve
	m     merger
	rec   fabric.FrameRecord // the one handed on, reused
}

// partObserve is one part's records since the last flush.
type partObserve struct {
	recs []observed
	buf  []byte // the records' frames, each followed by its comment
}

// observed is a record kept, its frame and comment in partObserve.buf.
type observed struct {
	rec         fabric.FrameRecord // Frame and Comment unset
	off, n, cmt int32
}

// record keeps a copy of r until the flush.
func (o *partObserve) record(r *fabric.FrameRecord) {
	k := observed{rec: *r, off: int32(len(o.buf)), n: int32(len(r.Frame)), cmt: int32(len(r.Comment))}
	k.rec.Frame, k.rec.Comment = nil, ""
	o.recs = append(o.recs, k)
	o.buf = append(append(o.buf, r.Frame...), r.Comment...)
}

func (c *clusterObserve) flush() {
	if c == nil {
		return
	}
	c.m.merge(len(c.parts), func(p int) int { return len(c.parts[p].recs) },
		func(p, i int) sim.Time { return c.parts[p].recs[i].rec.Time },
		func(p, i int) {
			o := c.parts[p]
			k := &o.recs[i]
			c.rec = k.rec
			c.rec.Frame = o.buf[k.off : k.off+k.n : k.off+k.n]
			cmt := o.buf[k.off+k.n : k.off+k.n+k.cmt]
			c.rec.Comment = unsafe.String(unsafe.SliceData(cmt), len(cmt))
			c.out(&c.rec)
		})
	for _, o := range c.parts {
		clear(o.recs) // the records' strings are the fabric's names
		o.recs, o.buf = o.recs[:0], o.buf[:0]
	}
}

// clusterCapture writes a cluster's frames to the program's capture: each
// part records into a partTap of its own during a step, and between steps
// the records of all parts go to the program's tap in time order (then by
// part, then in the order each part recorded them), so the file is the
// same whatever the goroutines, and in time order as a World's is. A link
// exists in two parts; its directions get one interface each, by name
// (each direction is serialized, and recorded, in one part only).
type clusterCapture struct {
	tap    fabric.Tap
	ifaces map[string]int // direction name -> the program's interface; looked up only
	parts  []*partTap
	m      merger
}

// partTap is one part's tap: what the part recorded since the last flush.
type partTap struct {
	c    *clusterCapture
	recs []tapRecord
	buf  []byte // the records' frames, each followed by its comment
}

// tapRecord is one frame a part recorded.
type tapRecord struct {
	ns          int64
	iface       int
	off, n, cmt int32 // the frame's bytes in partTap.buf, then cmt bytes of comment
}

// AddInterface gives the direction named name its interface in the
// program's capture, once for the two parts that have the link (it is
// called while the cluster is built, on the program's goroutine).
func (t *partTap) AddInterface(name, description string) (int, error) {
	if id, ok := t.c.ifaces[name]; ok {
		return id, nil
	}
	id, err := t.c.tap.AddInterface(name, description)
	if err != nil {
		return 0, err
	}
	t.c.ifaces[name] = id
	return id, nil
}

// WriteFrame keeps a copy of the frame and its comment until the flush.
func (t *partTap) WriteFrame(ns int64, iface int, frame []byte, comment string) error {
	t.recs = append(t.recs, tapRecord{ns: ns, iface: iface, off: int32(len(t.buf)), n: int32(len(frame)), cmt: int32(len(comment))})
	t.buf = append(append(t.buf, frame...), comment...)
	return nil
}

// flush writes every part's records to the program's tap, merged in time
// order, and empties the parts' taps. A capture that fails to write does
// not change the run; the writer reports its error when it is closed, as
// a World's does.
func (c *clusterCapture) flush() {
	if c == nil {
		return
	}
	c.m.merge(len(c.parts), func(p int) int { return len(c.parts[p].recs) },
		func(p, i int) sim.Time { return sim.Time(c.parts[p].recs[i].ns) },
		func(p, i int) {
			t := c.parts[p]
			r := &t.recs[i]
			frame := t.buf[r.off : r.off+r.n]
			cmt := t.buf[r.off+r.n : r.off+r.n+r.cmt]
			_ = c.tap.WriteFrame(r.ns, r.iface, frame, unsafe.String(unsafe.SliceData(cmt), len(cmt)))
		})
	for _, t := range c.parts {
		t.recs, t.buf = t.recs[:0], t.buf[:0]
	}
}

// merger hands on, between steps, what the parts recorded during one (a
// capture's frames, a trace's events, an observer's records): in time
// order, then by part, then in the order each part recorded them, so
// that what the program gets is the same whatever the goroutines.
type merger struct {
	next []int // each part's next item, during a merge
}

// merge calls emit(p, i) for every item i of every part p, in that
// order; part p has n(p) items, and at(p, i) is the time of its item i
// (a part's items are in time order).
func (m *merger) merge(parts int, n func(p int) int, at func(p, i int) sim.Time, emit func(p, i int)) {
	if len(m.next) != parts {
		m.next = make([]int, parts)
	}
	clear(m.next)
	for {
		best := -1
		var bestAt sim.Time
		for p := range parts {
			if i := m.next[p]; i < n(p) && (best < 0 || at(p, i) < bestAt) {
				best, bestAt = p, at(p, i)
			}
		}
		if best < 0 {
			return
		}
		emit(best, m.next[best])
		m.next[best]++
	}
}

// Stalls is World.Stalls over the whole cluster: a requester's
// retransmissions are seen in its own part and the RNR NAKs it was sent
// in its responder's, so the patterns of every part are joined by QP
// (host and QPN), and each one's cause is found in the requester's part.
func (c *Cluster) Stalls() []Stall {
	type qpKey struct {
		host string
		qpn  uint32
	}
	var all []Stall
	at := map[qpKey]int{} // looked up only
	for _, w := range c.parts {
		for _, s := range w.stalls() {
			k := qpKey{s.Host, s.QPN}
			i, ok := at[k]
			if !ok || s.QPN == 0 {
				at[k] = len(all)
				all = append(all, s)
				continue
			}
			m := &all[i]
			m.RNRNAKs += s.RNRNAKs
			if s.Retransmits > m.Retransmits {
				m.Peer, m.PeerQPN, m.PSN, m.Retransmits, m.Interval = s.Peer, s.PeerQPN, s.PSN, s.Retransmits, s.Interval
			}
		}
	}
	for i := range all {
		s := &all[i]
		if h := c.host(s.Host); h != nil && s.QPN != 0 {
			s.Cause = h.w.cause(h.w.qpByNum(h.ix, s.QPN), s)
		}
	}
	return worst(all)
}

// host returns the cluster's host named name, nil if none (the first,
// if several share it).
func (c *Cluster) host(name string) *Host {
	for _, h := range c.hosts {
		if h.name == name {
			return h
		}
	}
	return nil
}

// FaultSummary is World.FaultSummary over every part's links.
func (c *Cluster) FaultSummary() string {
	var sum faultCounts
	for _, w := range c.parts {
		sum.add(w.faultCounts())
	}
	return sum.String()
}

// Diagnose is World.Diagnose over the whole cluster.
func (c *Cluster) Diagnose(name func(host string, qpn uint32) string) string {
	return describe(c.Stalls(), c.FaultSummary(), name)
}

// runaway is the error for a run a part's event budget ended, with the
// diagnosis of the whole cluster in place of that part's.
func (c *Cluster) runaway(e *RunawayError) error {
	var fired uint64
	for _, w := range c.parts {
		fired += w.sched.Fired()
	}
	return &RunawayError{Events: fired, At: c.Now(), Pending: c.Pending(), Stalls: c.Stalls(), Faults: c.FaultSummary(), Name: e.Name}
}
