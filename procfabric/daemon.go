package procfabric

import (
	"errors"
	"fmt"
	"io"
	"maps"
	"net"
	"net/netip"
	"os"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/rocesim/rocesim/faults"
	"github.com/rocesim/rocesim/sim"
	"github.com/rocesim/rocesim/sim/fabric"
	"github.com/rocesim/rocesim/wire"
)

// The daemon's loop, one goroutine (Serve), the only one that touches the
// scheduler, the fabric and the slots:
//
//  1. take one event: a message a reader goroutine parsed off a
//     connection, a connection that ended, or the hold-limit tick;
//  2. apply it to the node's slot (attach, hold a frame, wait, detach);
//  3. if every attached process now waits (round): put the held frames
//     on the fabric in node order, pick the next instant, fire the
//     fabric's events up to it, and wake the processes with input then.

// Defaults.
const (
	// DefaultHoldLimit is how long a process may run without waiting
	// before the daemon detaches it (Config.HoldLimit).
	DefaultHoldLimit = 10 * time.Second
	// DefaultIdleLimit is how long a daemon with ExitWhenIdle waits for
	// a first process (Config.IdleLimit).
	DefaultIdleLimit = 30 * time.Second
	// DefaultWriteTimeout bounds one write to a process.
	DefaultWriteTimeout = 5 * time.Second
	// DefaultQuietReport is how long every process may wait with
	// nothing left to happen before the daemon says so
	// (Config.QuietReport).
	DefaultQuietReport = 10 * time.Second
)

// Config describes a fabric daemon.
type Config struct {
	// Name names the fabric: its socket is Dir/Name.sock.
	Name string
	// Dir is the socket directory; "" means SocketDir().
	Dir string
	// Nodes names the fabric's nodes, at least two; node i (from 1) has
	// MAC 02:00:00:00:00:i, IPv4 10.0.0.i and IPv6 the link-local
	// address of the MAC (fe80::ff:fe00:i), as rxe's GID 0. Two nodes
	// are joined by one link "a-b", more by a switch "sw".
	Nodes []string
	// Count, when Nodes is nil, lets the processes name the nodes: the
	// first Count distinct names attached become the nodes, in the
	// names' order, and no attach is answered before all Count are.
	Count int
	// Link configures every link; zero means fabric.DefaultLinkConfig.
	Link fabric.LinkConfig
	// Plan is the fault plan; nil for none.
	Plan *faults.Plan
	// Seed is the master seed of the plan's random draws.
	Seed uint64
	// Tap receives every frame (a wire/capture pcapng writer); nil for none.
	Tap fabric.Tap
	// Trace collects the fabric's events (the ladder's input); nil for none.
	Trace *sim.Trace
	// HoldLimit is the wall time a process may run without waiting
	// before it is detached; 0 means DefaultHoldLimit, negative no bound.
	HoldLimit time.Duration
	// WriteTimeout bounds one write to a process, and how long a new
	// connection may take to send its attach; 0 means
	// DefaultWriteTimeout.
	WriteTimeout time.Duration
	// Deadline, if not zero, ends the run at that virtual time: every
	// process is sent bye and detached (a QP that retries forever, as
	// rxe's retry_cnt 7 does, would otherwise never let the run end).
	// A run stuck before it (every process waits, nothing left to
	// happen, for QuietReport of wall time) ends at it then.
	Deadline sim.Time
	// ExitWhenIdle makes Serve return once every node has attached and
	// every process has detached again, or once no process has been
	// attached for IdleLimit (a daemon nobody came to).
	ExitWhenIdle bool
	// IdleLimit is that wall time; 0 means DefaultIdleLimit.
	IdleLimit time.Duration
	// Log receives one line per refusal, detach and bound hit; nil
	// discards them.
	Log io.Writer
	// QuietReport: when every attached process has waited this long of
	// wall time, none due anything and nothing left to happen in
	// virtual time, the log says so once, naming how each waits (the
	// usual reason a run hangs: a program blocked in a verb for an
	// event no one will cause). 0 means DefaultQuietReport, negative
	// never.
	QuietReport time.Duration
	// Held starts the clock held at 0, as though Hold(0) had been
	// called before anyone attached: it moves only through Hold. For a
	// driver that prepares its processes (resources, connections)
	// before its first step, while they wait idle now and then: without
	// it, every process waiting lets the clock run to the fabric's next
	// event, a fault plan's link cut at 50 ms say, before the step at 0.
	Held bool

	// uid is the UID allowed to attach: os.Getuid() unless a test says.
	uid int
	// maxHeld bounds the frame bytes a process may send in one turn
	// (between two waits): DefaultMaxHeld unless a test says.
	maxHeld int
}

// DefaultMaxHeld bounds the frame bytes one process may send between two
// waits: far more than a NIC's send queues hold, so only a process that
// sends without ever waiting reaches it, and the daemon's memory stays
// bounded while it holds the clock.
const DefaultMaxHeld = 64 << 20

// Stats counts what the daemon refused and dropped.
type Stats struct {
	// Attaches counts successful attaches, Detaches processes that left
	// or were sent away.
	Attaches, Detaches uint64
	// Refused counts connections closed for a malformed or out-of-place
	// message; RefusedUID those of another user (SO_PEERCRED).
	Refused, RefusedUID uint64
	// HeldTooLong counts processes detached by the hold limit.
	HeldTooLong uint64
	// Undelivered counts frames that arrived at a node no process holds;
	// KernelAnswers the CM messages among them its kernel answered
	// (kernel.go).
	Undelivered, KernelAnswers uint64
	// Wills counts the wills sent for processes that left without
	// detaching (Port.SetWill).
	Wills uint64
	// Delivered counts the frames delivered to processes, Wakes the
	// wake-ups that carried them and everything else (each a round trip
	// with a process; slack makes them far fewer than the frames).
	Delivered, Wakes uint64
}

// Daemon is a running fabric: see the package documentation.
type Daemon struct {
	cfg    Config
	ln     *net.UnixListener
	lock   *os.File
	sched  *sim.Scheduler
	fab    *fabric.Fabric
	slots  []*slot
	events chan event
	quit   chan struct{}
	once   sync.Once

	claims  []claim     // Count mode: the names attached before the fabric is built
	ctl     chan func() // Hold's requests, run by the loop (hold.go)
	holding bool        // a Hold is in force: the clock stops at holdAt
	holdAt  sim.Time
	reached chan sim.Time // the pending Hold's answer; nil once given
	started bool          // every node has attached once: the clock may move
	ended   bool          // Config.Deadline was reached
	// quietSince is the wall time every process has waited since with
	// nothing left to happen (zero: not so); reported says the log
	// has said so (reportQuiet).
	quietSince time.Time
	reported   bool
	// firstAttach is when the first process attached (zero: none yet);
	// toldMissing says the log has named the nodes the clock waits for
	// (reportMissing).
	firstAttach time.Time
	toldMissing bool
	// ticks counts the wake-ups Port.Tick asked for, which are no
	// activity (reportQuiet subtracts them from Stats.Wakes).
	ticks uint64
	// quietWakes is Stats.Wakes less ticks when quietSince was set: a wake-up
	// since means the processes ran between two ticks (a burst between
	// two exchanges over TCP), and the quiet period starts again.
	quietWakes uint64

	mu    sync.Mutex // guards stats and conns, which other goroutines touch
	stats Stats
	conns map[*conn]bool // open connections, closed at exit (never iterated for output)
}

// slot is one node of the fabric and the process attached to it, if any.
type slot struct {
	d        *Daemon
	index    int // from 1
	info     NodeInfo
	node     *fabric.Node
	c        *conn // nil: no process
	attached bool  // ever
	waiting  bool
	// polling: the wait is a poll's (msgPollWait); quietAt is the
	// instant the process attached now was last woken from such a wait
	// for lack of anything to happen (round), sim.Never if it was not.
	polling  bool
	quietAt  sim.Time
	deadline sim.Time
	since    time.Time // wall time the process started running
	pending  []byte    // deliver and txdone messages not yet sent
	// due: pending holds something the process must be woken for (a
	// frame past its rx slack, or a tx-done past its slack); slack: how
	// many more tx-dones its wait said it need not be woken for
	// (Port.SetTxSlack); rx: the frames it need not be woken for
	// (Port.SetRxSlack), each entry's PSN and count moved on as they
	// come; pkt decodes a frame to match it against them.
	due   bool
	slack uint32
	rx    []wire.PacketRun
	pkt   wire.Packet
	held  []heldFrame
	// heldBytes counts the bytes held this turn, bounded by maxHeld.
	heldBytes int
	// will: the frames to send for the process, in key order, if its
	// connection ends without a detach (Port.SetWill), bounded by
	// maxHeld too. Its keys are sorted before it is sent, never
	// iterated otherwise.
	will      map[uint32]heldFrame
	willBytes int
	// at is the instant the process was last woken at (hold.go).
	at sim.Time
	// answer is the buffer of the node's kernel's answers (kernel.go),
	// kept for its capacity: the fabric copies what it sends.
	answer []byte
	// inPort counts the node's frames in its port (put on the fabric,
	// not yet finished); stale of them, or of held, were sent before
	// the attached process came (by one that died, or by the node's
	// kernel). So many tx-dones are not passed on: the first ones, which
	// are the old frames' unless the port reports a frame out of order
	// (one it drops at once, ahead of frames queued; one a delay rule
	// holds), in which case the process is told of one of its own frames
	// later than it left, and of one of the old ones instead; the count
	// balances either way.
	inPort, stale int
	// oldHeld is how many of held (the first) the process before the
	// attached one left: refuse drops only the attached one's.
	oldHeld int
}

type heldFrame struct {
	note  []byte
	frame []byte
}

// claim is a process waiting for a Count-mode fabric to be built.
type claim struct {
	c    *conn
	name string
}

// conn is one connection; slot is set once it has attached.
type conn struct {
	c    *net.UnixConn
	slot *slot
	gone bool
}

// event is what a reader goroutine hands the loop.
type event struct {
	c    *conn
	t    msgType
	body []byte // a copy
	err  error  // the connection ended; ErrProtocol if it misbehaved
}

// Listen creates the fabric: it takes the socket (replacing a stale one)
// and builds the simulated fabric. Serve runs it.
func Listen(cfg Config) (*Daemon, error) {
	if err := checkName("fabric name", cfg.Name); err != nil {
		return nil, err
	}
	if cfg.Nodes == nil && cfg.Count != 0 {
		if cfg.Count < 2 || cfg.Count > maxNodes {
			return nil, fmt.Errorf("procfabric: %d nodes, want 2 to %d", cfg.Count, maxNodes)
		}
	} else if err := checkNodes(cfg.Nodes); err != nil {
		return nil, err
	}
	if err := cfg.Plan.Validate(); err != nil {
		return nil, err
	}
	if cfg.Dir == "" {
		cfg.Dir = SocketDir()
	}
	if cfg.Link.Bandwidth == 0 {
		cfg.Link = fabric.DefaultLinkConfig()
	}
	if cfg.HoldLimit == 0 {
		cfg.HoldLimit = DefaultHoldLimit
	}
	if cfg.IdleLimit == 0 {
		cfg.IdleLimit = DefaultIdleLimit
	}
	if cfg.WriteTimeout == 0 {
		cfg.WriteTimeout = DefaultWriteTimeout
	}
	if cfg.QuietReport == 0 {
		cfg.QuietReport = DefaultQuietReport
	}
	if cfg.Log == nil {
		cfg.Log = io.Discard
	}
	if cfg.uid == 0 {
		cfg.uid = os.Getuid()
	}
	if cfg.maxHeld == 0 {
		cfg.maxHeld = DefaultMaxHeld
	}
	d := &Daemon{cfg: cfg, events: make(chan event, 64), quit: make(chan struct{}), conns: map[*conn]bool{}, ctl: make(chan func())}
	d.holding = cfg.Held // at 0: a Hold with no one told (hold.go)
	d.sched = sim.NewScheduler()
	d.sched.SetEventLimit(0) // the daemon runs as long as its processes do
	if cfg.Nodes != nil {
		if err := d.build(cfg.Nodes); err != nil {
			return nil, err
		}
		// The nodes are known: a rule naming a link or node the fabric
		// lacks could never match, and is refused as a scenario's is.
		if err := cfg.Plan.CheckNames(d.fab.Names()); err != nil {
			return nil, fmt.Errorf("procfabric: fault plan: %w", err)
		}
	}
	var err error
	if d.ln, d.lock, err = listen(cfg.Dir, cfg.Name); err != nil {
		return nil, err
	}
	return d, nil
}

// maxNodes bounds a fabric's nodes: the attach reply counts them in 16
// bits. Node i's addresses carry i in three bytes (nodeAddr).
const maxNodes = 1<<16 - 1

// checkNodes checks a list of node names.
func checkNodes(nodes []string) error {
	if len(nodes) < 2 || len(nodes) > maxNodes {
		return fmt.Errorf("procfabric: %d nodes, want 2 to %d", len(nodes), maxNodes)
	}
	for i, n := range nodes {
		if err := checkName("node name", n); err != nil {
			return err
		}
		if slices.Contains(nodes[:i], n) {
			return fmt.Errorf("%w: node %q named twice", ErrName, n)
		}
	}
	return nil
}

// nodeAddr is node i's (from 1) addresses: i, big-endian, in the low
// three bytes of MAC 02:00:00:00:00:00 and of IPv4 10.0.0.0, as the
// simulated world numbers its hosts (verbs.HostAddrOf; nodes 1 to 254
// keep the one-byte numbers 02:00:00:00:00:0i and 10.0.0.i); IPv6 is the
// MAC's link-local address, so that a device's GID 0 is the one a real
// rxe port lists first (the drop-in library's -g 0).
func nodeAddr(name string, i int) NodeInfo {
	b2, b1, b0 := byte(i>>16), byte(i>>8), byte(i)
	mac := wire.MAC{0x02, 0, 0, b2, b1, b0}
	return NodeInfo{Name: name, MAC: mac, IPv4: netip.AddrFrom4([4]byte{10, b2, b1, b0}), IPv6: mac.LinkLocal()}
}

// build makes the fabric's nodes, in the order of names, and its links.
func (d *Daemon) build(names []string) error {
	d.fab = fabric.New(fabric.Config{Sched: d.sched, Trace: d.cfg.Trace, Tap: d.cfg.Tap, Plan: d.cfg.Plan,
		Rand: sim.NewSeeds(d.cfg.Seed).Stream("faults")})
	for i, name := range names {
		s := &slot{d: d, index: i + 1, deadline: sim.Never, quietAt: sim.Never, info: nodeAddr(name, i+1)}
		s.node = d.fab.AddNode(name, fabric.PortConfig{MAC: s.info.MAC, IPv4: s.info.IPv4, IPv6: s.info.IPv6})
		s.node.SetReceiver(s)
		s.node.SetTxDone(s.txDone)
		d.slots = append(d.slots, s)
	}
	if len(d.slots) == 2 {
		_, err := d.fab.Connect(names[0]+"-"+names[1], d.slots[0].node.Port(0), d.slots[1].node.Port(0), d.cfg.Link)
		return err
	}
	sw := d.fab.AddSwitch("sw", len(d.slots))
	for i, s := range d.slots {
		if _, err := d.fab.Connect(s.info.Name+"-sw", s.node.Port(0), sw.Port(i), d.cfg.Link); err != nil {
			return err
		}
	}
	return nil
}

// Path returns the daemon's socket.
func (d *Daemon) Path() string { return SocketPath(d.cfg.Dir, d.cfg.Name) }

// Stats returns the daemon's counters so far.
func (d *Daemon) Stats() Stats {
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.stats
}

// Fabric returns the simulated fabric, for its link statistics once
// Serve has returned; nil while a Count-mode fabric waits for its nodes.
func (d *Daemon) Fabric() *fabric.Fabric { return d.fab }

// NodeNames returns the fabric's nodes in their order (node 1 first),
// the columns of its ladder; nil while a Count-mode fabric waits for its
// nodes. Call it once Serve has returned.
func (d *Daemon) NodeNames() []string {
	var names []string
	for _, s := range d.slots {
		names = append(names, s.info.Name)
	}
	return names
}

// Close stops Serve, closes every connection and removes the socket.
// It may be called from any goroutine, more than once.
func (d *Daemon) Close() error {
	d.once.Do(func() { close(d.quit) })
	return nil
}

func (d *Daemon) count(f func(*Stats)) {
	d.mu.Lock()
	f(&d.stats)
	d.mu.Unlock()
}

func (d *Daemon) logf(format string, args ...any) {
	fmt.Fprintf(d.cfg.Log, "rocesim fabric %s: %s\n", d.cfg.Name, fmt.Sprintf(format, args...))
}

// Serve runs the fabric until Close, or until it is idle when
// Config.ExitWhenIdle is set. It returns the virtual time reached.
func (d *Daemon) Serve() sim.Time {
	defer d.shutdown()
	if d.cfg.Nodes != nil {
		d.logf("serving nodes %s on %s", strings.Join(d.cfg.Nodes, ", "), d.Path())
	} else {
		d.logf("serving %d nodes, named as processes attach, on %s", d.cfg.Count, d.Path())
	}
	go d.accept()
	var tick <-chan time.Time
	if d.cfg.HoldLimit > 0 || d.cfg.ExitWhenIdle || d.cfg.QuietReport > 0 {
		every := time.Duration(1<<63 - 1)
		for _, b := range []time.Duration{d.cfg.HoldLimit, d.cfg.QuietReport} {
			if b > 0 {
				every = min(every, b/8)
			}
		}
		if d.cfg.ExitWhenIdle {
			every = min(every, d.cfg.IdleLimit/8)
		}
		t := time.NewTicker(max(every, time.Millisecond))
		defer t.Stop()
		tick = t.C
	}
	idleSince := time.Now()
	for {
		d.round()
		idle := d.idle() && len(d.claims) == 0
		if !idle {
			idleSince = time.Time{}
		} else if idleSince.IsZero() {
			idleSince = time.Now()
		}
		if d.cfg.ExitWhenIdle && d.started && idle || d.ended {
			return d.sched.Now()
		}
		select {
		case ev := <-d.events:
			d.handle(ev)
		case f := <-d.ctl:
			f()
		case <-tick:
			d.checkHolds()
			d.reportMissing()
			d.reportQuiet()
			if d.cfg.ExitWhenIdle && idle && time.Since(idleSince) > d.cfg.IdleLimit {
				// Nobody came: a daemon started by a client that lost
				// the race to another's, or whose client died first.
				d.logf("exiting: no process attached for %v", d.cfg.IdleLimit)
				return d.sched.Now()
			}
		case <-d.quit:
			return d.sched.Now()
		}
	}
}

// shutdown closes the listener, every connection and the lock.
func (d *Daemon) shutdown() {
	d.once.Do(func() { close(d.quit) })
	d.ln.Close() // removes the socket file
	d.mu.Lock()
	for c := range d.conns {
		c.c.Close()
	}
	d.mu.Unlock()
	d.lock.Close() // releases the flock
}

// idle reports whether no process is attached.
func (d *Daemon) idle() bool {
	for _, s := range d.slots {
		if s.c != nil {
			return false
		}
	}
	return true
}

// accept takes connections until the listener closes: another user's
// process is refused before it can say anything.
func (d *Daemon) accept() {
	for {
		uc, err := d.ln.AcceptUnix()
		if err != nil {
			return
		}
		if uid, err := peerUID(uc); err != nil || uid != d.cfg.uid {
			d.count(func(s *Stats) { s.RefusedUID++ })
			d.logf("refused a connection from uid %d (err %v): the fabric belongs to uid %d", uid, err, d.cfg.uid)
			uc.Close()
			continue
		}
		c := &conn{c: uc}
		d.mu.Lock()
		d.conns[c] = true
		d.mu.Unlock()
		go d.read(c)
	}
}

// read parses c's messages and hands them to the loop, until c ends.
func (d *Daemon) read(c *conn) {
	r := reader{r: c.c}
	// A connection that never says attach would hold a goroutine and a
	// socket for ever: it has WriteTimeout to say it.
	c.c.SetReadDeadline(time.Now().Add(d.cfg.WriteTimeout))
	for first := true; ; first = false {
		t, body, err := r.next()
		if first && err == nil {
			c.c.SetReadDeadline(time.Time{})
		}
		if first && errors.Is(err, os.ErrDeadlineExceeded) {
			err = protoErr("no attach within %v of connecting", d.cfg.WriteTimeout)
		}
		ev := event{c: c, t: t, err: err}
		if err == nil {
			ev.body = append([]byte(nil), body...)
		}
		select {
		case d.events <- ev:
		case <-d.quit:
			return
		}
		if err != nil {
			return
		}
	}
}

// handle applies one event to its connection's slot.
func (d *Daemon) handle(ev event) {
	c := ev.c
	if c.gone {
		return
	}
	if ev.err != nil {
		if errors.Is(ev.err, io.ErrUnexpectedEOF) && c.slot != nil {
			// An attached process whose stream ends inside a message
			// was killed inside a write: it died, it did not misbehave.
			// What it sent before stays held, and its will goes.
			d.logf("node %s: its connection ended inside a message (the process died while writing?)", c.slot.info.Name)
			d.drop(c, "")
			return
		}
		if errors.Is(ev.err, ErrProtocol) {
			d.refuse(c, ev.err.Error())
			return
		}
		d.drop(c, "")
		return
	}
	s := c.slot
	switch ev.t {
	case msgAttach:
		if s != nil {
			d.refuse(c, "a second attach")
			return
		}
		d.attach(c, string(ev.body))
	case msgFrame:
		if s == nil || s.waiting {
			d.refuse(c, "a frame from a process that is not running (not attached, or waiting)")
			return
		}
		note, frame, err := parseFrame(ev.body)
		if err != nil {
			d.refuse(c, err.Error())
			return
		}
		if s.heldBytes += len(frame) + len(note); s.heldBytes > d.cfg.maxHeld {
			d.refuse(c, fmt.Sprintf("more than %d bytes of frames sent in one turn without waiting", d.cfg.maxHeld))
			return
		}
		s.held = append(s.held, heldFrame{note: note, frame: frame})
	case msgWait, msgPollWait:
		if s == nil || s.waiting {
			d.refuse(c, "a wait from a process that is not running")
			return
		}
		t, slack, rx, err := parseWait(ev.t, ev.body, s.rx[:0])
		s.rx = rx
		if err != nil {
			d.refuse(c, err.Error())
			return
		}
		s.waiting, s.deadline, s.polling = true, max(t, d.sched.Now()), ev.t == msgPollWait
		s.slack, s.due = slack, len(s.pending) > 0
	case msgPoll:
		if s == nil || len(ev.body) != 0 {
			d.refuse(c, "a poll unattached or with a body")
			return
		}
		// The wait another thread of the process is in is a poll's
		// from now on (round wakes it when nothing is left to happen).
		// One that crosses the wake-up that ended that wait finds the
		// process running, and does nothing.
		if s.waiting {
			s.polling = true
		}
	case msgDetach, msgResume, msgTick:
		if s == nil || len(ev.body) != 0 {
			d.refuse(c, fmt.Sprintf("message type %d unattached or with a body", ev.t))
			return
		}
		if ev.t == msgDetach {
			s.voidWill()
			d.drop(c, "")
		} else if s.waiting {
			// Another thread of the process has work: it runs now, at
			// the current instant. A resume that crosses the wake-up
			// it asked for finds the process running, and does nothing.
			// A tick is the library's housekeeping: no activity for
			// reportQuiet.
			if ev.t == msgTick {
				d.ticks++
			}
			d.wake(s, d.sched.Now())
		}
	case msgWill:
		// Taken while the process waits too, unlike a frame: a will
		// is kept, not put on the fabric (the client sends its changes
		// with its next wait, or at once while it runs).
		if s == nil {
			d.refuse(c, "a will from a process not attached")
			return
		}
		key, note, frame, err := parseWill(ev.body)
		if err != nil {
			d.refuse(c, err.Error())
			return
		}
		if old, ok := s.will[key]; ok {
			s.willBytes -= len(old.frame) + len(old.note)
			delete(s.will, key)
		}
		if frame == nil {
			return
		}
		if s.willBytes += len(frame) + len(note); s.willBytes > d.cfg.maxHeld {
			s.voidWill() // a process sent away for its will leaves none
			d.refuse(c, fmt.Sprintf("a will of more than %d bytes", d.cfg.maxHeld))
			return
		}
		if s.will == nil {
			s.will = map[uint32]heldFrame{}
		}
		s.will[key] = heldFrame{note: note, frame: frame}
	default:
		d.refuse(c, fmt.Sprintf("message type %d, which only the daemon sends", ev.t))
	}
}

// attach gives the process on c the node called name. On a fabric of
// Config.Count nodes not yet built, the name is claimed and the answer
// waits until Count names are: the nodes are then made in the names'
// order, so their addresses do not depend on who came first.
func (d *Daemon) attach(c *conn, name string) {
	if err := checkName("node name", name); err != nil {
		d.refuse(c, fmt.Sprintf("bad node name %q", name))
		return
	}
	if d.firstAttach.IsZero() {
		d.firstAttach = time.Now()
	}
	if d.fab == nil {
		for _, o := range d.claims {
			if o.name == name {
				d.refuse(c, fmt.Sprintf("node %q is attached by another process", name))
				return
			}
		}
		d.claims = append(d.claims, claim{c: c, name: name})
		if len(d.claims) < d.cfg.Count {
			return
		}
		slices.SortFunc(d.claims, func(a, b claim) int { return strings.Compare(a.name, b.name) })
		names := make([]string, len(d.claims))
		for i, o := range d.claims {
			names[i] = o.name
		}
		claims := d.claims
		d.claims = nil
		if err := d.build(names); err != nil {
			panic(fmt.Sprintf("procfabric: building checked nodes %q: %v", names, err)) // names are checked and distinct
		}
		d.logf("nodes %s attached: the fabric is built", strings.Join(names, ", "))
		if err := d.cfg.Plan.CheckNames(d.fab.Names()); err != nil {
			// The processes named the nodes: too late to refuse the
			// plan, not too late to say that a rule will not match.
			d.logf("warning: fault plan: %v: the rule will never match", err)
		}
		for _, o := range claims {
			if !o.c.gone {
				d.attach(o.c, o.name)
			}
		}
		return
	}
	var s *slot
	for _, o := range d.slots {
		if o.info.Name == name {
			s = o
		}
	}
	var why string
	switch {
	case s == nil:
		names := make([]string, len(d.slots))
		for i, o := range d.slots {
			names[i] = o.info.Name
		}
		why = fmt.Sprintf("no node %q on this fabric (its nodes: %s)", name, strings.Join(names, ", "))
	case s.c != nil:
		why = fmt.Sprintf("node %q is attached by another process", name)
	case d.ended:
		why = "the fabric's run has ended"
	}
	if why != "" {
		d.refuse(c, why)
		return
	}
	c.slot, s.c, s.attached = s, c, true
	// The frames still in the port, or held to enter it at the next
	// round, are a dead process's or the kernel's: the process is not
	// told of them (its device would count them off its own frames, and
	// skew its tx slack).
	s.stale, s.oldHeld, s.heldBytes = s.inPort+len(s.held), len(s.held), 0
	s.waiting, s.deadline, s.since, s.at, s.quietAt = false, sim.Never, time.Now(), d.sched.Now(), sim.Never
	d.count(func(st *Stats) { st.Attaches++ })
	infos := make([]NodeInfo, len(d.slots))
	for i, o := range d.slots {
		infos[i] = o.info
	}
	if !d.started {
		d.started = true
		for _, o := range d.slots {
			d.started = d.started && o.attached
		}
	}
	d.write(s, appendAttached(nil, s.index, d.sched.Now(), infos))
}

// refuse counts and logs a misbehaving connection and closes it.
func (d *Daemon) refuse(c *conn, why string) {
	d.count(func(s *Stats) { s.Refused++ })
	who := "an unattached process"
	if c.slot != nil {
		who = "node " + c.slot.info.Name
	}
	d.logf("refused %s: %s", who, why)
	if s := c.slot; s != nil {
		// A misbehaving process's frames of this turn are not sent;
		// those of the process before it (and its will) still are.
		clear(s.held[s.oldHeld:])
		s.held, s.heldBytes = s.held[:s.oldHeld], 0
	}
	if c.slot == nil {
		// Say why, if the peer listens: best effort, bounded.
		c.c.SetWriteDeadline(time.Now().Add(d.cfg.WriteTimeout))
		c.c.Write(appendText(nil, msgBye, why))
	}
	d.drop(c, why)
}

// drop detaches c's process, if any, and closes c. A reason, if given,
// is sent to the process first (bye). The frames it sent before stay
// held and go onto the fabric with its round.
func (d *Daemon) drop(c *conn, reason string) {
	if c.gone {
		return
	}
	c.gone = true
	d.claims = slices.DeleteFunc(d.claims, func(o claim) bool { return o.c == c })
	if s := c.slot; s != nil {
		if reason != "" {
			d.write(s, appendText(nil, msgBye, reason))
		}
		s.c, s.waiting, s.deadline, s.pending, s.due, s.slack, s.rx = nil, false, sim.Never, s.pending[:0], false, 0, s.rx[:0]
		d.count(func(st *Stats) { st.Detaches++ })
		if len(s.will) > 0 {
			// The process left without detaching: its will goes with
			// the frames it sent, in this round, in key order.
			why := "ended without detaching"
			if reason != "" {
				// Sent away alive (refused, held the clock too long):
				// it has left the fabric all the same.
				why = "was sent away"
			}
			d.logf("node %s: its process %s: sending its will (%d frames)", s.info.Name, why, len(s.will))
			suffix := []byte(" (sent by the fabric: node " + s.info.Name + "'s process " + why + ")")
			keys := slices.Sorted(maps.Keys(s.will))
			for _, k := range keys {
				w := s.will[k]
				s.held = append(s.held, heldFrame{note: append(w.note[:len(w.note):len(w.note)], suffix...), frame: w.frame})
			}
			d.count(func(st *Stats) { st.Wills++ })
			s.voidWill()
		}
	}
	d.mu.Lock()
	delete(d.conns, c)
	d.mu.Unlock()
	c.c.Close()
}

// voidWill forgets s's will.
func (s *slot) voidWill() {
	clear(s.will)
	s.willBytes = 0
}

// write sends b to s's process, bounded in wall time; a process that
// does not take it is detached.
func (d *Daemon) write(s *slot, b []byte) {
	c := s.c
	c.c.SetWriteDeadline(time.Now().Add(d.cfg.WriteTimeout))
	if _, err := c.c.Write(b); err != nil {
		if !c.gone {
			d.logf("detached node %s: %v", s.info.Name, err)
			d.drop(c, "")
		}
	}
}

// checkHolds detaches processes that have held the clock longer than
// the hold limit: run, without waiting, while the clock runs and another
// process waits on them. A process that runs while nobody waits holds
// nobody up (a server blocked in accept() before its client came, two
// programs trading QP numbers over TCP), so its time restarts.
func (d *Daemon) checkHolds() {
	someoneWaits := false
	for _, s := range d.slots {
		someoneWaits = someoneWaits || s.c != nil && s.waiting
	}
	for _, s := range d.slots {
		if s.c == nil || s.waiting {
			continue
		}
		if !d.started || !someoneWaits {
			s.since = time.Now()
			continue
		}
		if held := time.Since(s.since); held > d.cfg.HoldLimit {
			why := fmt.Sprintf("node %s held virtual time at %v for %v of wall time without waiting in a verbs call "+
				"(the hold limit is %v; a program that computes longer between verbs calls needs --hold-limit)",
				s.info.Name, d.sched.Now(), held.Round(time.Millisecond), d.cfg.HoldLimit)
			d.logf("detached: %s", why)
			d.count(func(st *Stats) { st.HeldTooLong++ })
			d.drop(s.c, why)
		}
	}
}

// missingReport is how long after the first process attached
// reportMissing speaks, unless Config.QuietReport is shorter.
const missingReport = 3 * time.Second

// reportMissing logs, once, that the clock has not started
// missingReport after the first process attached, because nodes of
// the fabric have no process yet: a program run alone under `rocesim
// exec`, or its peer started on another fabric's name, otherwise waits
// in silence.
func (d *Daemon) reportMissing() {
	if d.cfg.QuietReport < 0 { // the user asked for no reports
		return
	}
	if d.started || d.toldMissing || d.firstAttach.IsZero() || time.Since(d.firstAttach) < min(d.cfg.QuietReport, missingReport) {
		return
	}
	d.toldMissing = true
	var missing []string
	n := 0
	if d.fab == nil {
		n = d.cfg.Count - len(d.claims)
		missing = append(missing, fmt.Sprintf("%d of its %d nodes", n, d.cfg.Count))
	} else {
		for _, s := range d.slots {
			if !s.attached {
				missing = append(missing, "node "+s.info.Name)
			}
		}
		n = len(missing)
	}
	verb := "have"
	if n == 1 {
		verb = "has"
	}
	d.logf("virtual time has not started after %v of wall time: it starts once every node has a process, and %s %s none yet "+
		"(run a program on each with rocesim exec --name %s --node NAME; one program on its own needs no fabric: run it with "+
		"LD_LIBRARY_PATH naming the drop-in library, and ROCESIM_FAULTS, ROCESIM_PCAP or ROCESIM_LADDER for a fault plan, a capture or a ladder)",
		time.Since(d.firstAttach).Round(time.Second), strings.Join(missing, ", "), verb, d.cfg.Name)
}

// reportQuiet logs, once, that every attached process has waited for
// Config.QuietReport of wall time with nothing left to happen: nobody is
// due input, no deadline is set and the fabric has no event. Unless a
// program waits for something outside the fabric (a TCP message, a
// timer of its own), the run is stuck: each node's line says whether it
// waits in a poll (woken at once when quiet, so its program is
// polling again and again) or in a blocking wait (a verb such as
// ibv_get_cq_event or rdma_get_cm_event, or the library's idle wait while
// its program is busy outside it).
func (d *Daemon) reportQuiet() {
	// A Hold at sim.Never holds nothing back.
	held := d.holding && d.holdAt != sim.Never
	quiet := d.started && !d.ended && !held && d.sched.NextAt() == sim.Never
	anyone := false
	for _, s := range d.slots {
		if s.c == nil {
			continue
		}
		anyone = true
		quiet = quiet && s.waiting && !s.due && len(s.pending) == 0 && s.deadline == sim.Never
	}
	if !quiet || !anyone {
		d.quietSince, d.reported = time.Time{}, false
		return
	}
	if wakes := d.Stats().Wakes - d.ticks; d.quietSince.IsZero() || wakes != d.quietWakes {
		d.quietSince, d.quietWakes, d.reported = time.Now(), wakes, false
		return
	}
	if d.reported || time.Since(d.quietSince) < d.cfg.QuietReport {
		return
	}
	d.reported = true
	var ways []string
	for _, s := range d.slots {
		switch {
		case s.c == nil:
			ways = append(ways, fmt.Sprintf("node %s has no process", s.info.Name))
		case s.polling:
			ways = append(ways, fmt.Sprintf("node %s waits in a poll", s.info.Name))
		default:
			ways = append(ways, fmt.Sprintf("node %s in a blocking wait", s.info.Name))
		}
	}
	d.logf("nothing has happened for %v of wall time: at virtual time %v every process waits and nothing is left to happen (%s); "+
		"unless a program waits for something outside the fabric (a TCP message, a timer of its own), the run is stuck",
		time.Since(d.quietSince).Round(time.Second), d.sched.Now(), strings.Join(ways, ", "))
	if d.cfg.Deadline != 0 && d.sched.Now() < d.cfg.Deadline {
		// A run given a deadline is bounded: one stuck before it (a
		// server waiting for the DREQ its departed client lost, as a
		// host's would) ends there, the clock moved to the deadline
		// with nothing left to happen on the way, rather than waiting
		// for ever in wall time.
		d.logf("the run is bounded by its deadline: the clock goes there, nothing happening on the way")
		d.sched.RunUntil(d.cfg.Deadline) // nothing is pending: cannot fail
		d.end()
	}
}

// round moves virtual time as far as it can: while every attached
// process waits, it puts their held frames on the fabric, fires the
// fabric's events up to the next instant anyone cares about, and wakes
// the processes with input at that instant. It returns when a process
// runs or nothing is left to happen.
func (d *Daemon) round() {
	if !d.started || d.ended {
		return
	}
	for {
		for _, s := range d.slots {
			if s.c != nil && !s.waiting {
				return
			}
		}
		// What processes did at this instant enters the fabric in node
		// order, then in the order each sent it.
		for _, s := range d.slots {
			for _, h := range s.held {
				// A frame the port refuses is lost (as Host.send does)
				// and its sender told it left, so its NIC does not stall.
				s.inPort++
				if err := s.node.Send(0, h.frame, h.note); err != nil {
					d.logf("node %s: frame lost: %v", s.info.Name, err)
					s.txDone(d.sched.Now())
				}
			}
			clear(s.held)
			s.held, s.heldBytes, s.oldHeld = s.held[:0], 0, 0
		}
		now, t, anyone := d.sched.Now(), d.sched.NextAt(), false
		for _, s := range d.slots {
			if s.c == nil {
				continue
			}
			anyone = true
			t = min(t, s.deadline)
			if s.due {
				t = now
			}
		}
		if anyone && d.held(t) {
			return // the clock stands at a Hold (hold.go)
		}
		if !anyone || t == sim.Never {
			// Nobody to run for, or nothing will ever happen. A poll
			// on a real NIC would return 0 now, and its program may
			// have something to do then (perftest's UD server polls
			// once more after its last message, finds nothing, and
			// only then answers its client on TCP): each process
			// waiting in a poll is woken at this instant, once.
			d.wakeQuiet(now)
			return
		}
		if d.cfg.Deadline != 0 && t > d.cfg.Deadline {
			// Nothing happens before the next event, past the deadline:
			// the clock stands at the deadline the run ended at, as the
			// summary then says.
			d.sched.RunUntil(d.cfg.Deadline) // no event limit: cannot fail
			d.end()
			return
		}
		d.sched.RunUntil(t) // no event limit: cannot fail
		woke := false
		for _, s := range d.slots {
			if s.c != nil && (s.due || s.deadline <= t) {
				d.wake(s, t)
				woke = true
			}
		}
		if woke {
			return
		}
	}
}

// wakeQuiet wakes, in node order, the processes waiting in a poll (a
// PollWait) that have not been woken for lack of anything to happen at
// instant now already: a program that polls again at the same instant
// sleeps until something happens, rather than spinning.
//
// A process that waits with input held as its slack (a message's
// middle packets whose last never came: its sender died) is woken too,
// whatever its wait: nothing else would, and the bytes belong in its
// program's memory. (While anything else goes on, such input waits for
// it: a link's retries elsewhere keep it held.)
func (d *Daemon) wakeQuiet(now sim.Time) {
	for _, s := range d.slots {
		if s.c == nil || !s.waiting {
			continue
		}
		if len(s.pending) > 0 {
			if s.polling {
				s.quietAt = now // this wake is the poll's quiet one too
			}
			d.wake(s, now)
		} else if s.polling && s.quietAt != now {
			s.quietAt = now
			d.wake(s, now)
		}
	}
}

// wake sends s's process its pending input and now(t): it runs.
func (d *Daemon) wake(s *slot, t sim.Time) {
	d.count(func(st *Stats) { st.Wakes++ })
	s.pending = appendTime(s.pending, msgNow, t)
	s.waiting, s.deadline, s.since, s.at = false, sim.Never, time.Now(), t
	s.due, s.slack, s.rx = false, 0, s.rx[:0]
	b := s.pending
	s.pending = s.pending[:0]
	d.write(s, b)
}

// end detaches every process at Config.Deadline.
func (d *Daemon) end() {
	d.ended = true
	why := fmt.Sprintf("the fabric's run ended at its deadline, virtual time %v", d.cfg.Deadline)
	d.logf("%s", why)
	for _, s := range d.slots {
		if s.c != nil {
			s.voidWill() // sent away, not dead: and the clock has stopped
			d.drop(s.c, why)
		}
	}
}

// Receive is the node's fabric receiver: the frame waits for the
// process's next wake-up.
func (s *slot) Receive(now sim.Time, _ int, frame []byte) {
	if s.c == nil {
		s.d.count(func(st *Stats) { st.Undelivered++ })
		var note string
		if s.answer, note = kernelAnswer(s.answer, frame); s.answer != nil {
			// A port takes it or loses it; the node has nobody to tell.
			if s.node.Send(0, s.answer, []byte(note)) == nil {
				s.inPort++
				s.d.count(func(st *Stats) { st.KernelAnswers++ })
			}
		}
		return
	}
	s.pending = appendDeliver(s.pending, now, frame)
	s.d.count(func(st *Stats) { st.Delivered++ })
	if !s.due && (len(s.pending) > maxSlackBytes || !s.quietFrame(frame)) {
		s.due = true
	}
}

// maxSlackBytes bounds the input held for a waiting process as its rx
// slack: a WRITE of a gigabyte is a million middle packets, and its
// receiver is woken every 256 KiB of them rather than held for all.
const maxSlackBytes = 256 << 10

// quietFrame reports whether frame is the next of a run of the waiting
// process's rx slack, and takes it off the run if so. Only a frame the
// NIC will take counts: one it would drop (a bad ICRC, after a corrupt
// rule; a P_Key of another partition; an address not the node's) leaves
// the QP's expected PSN where it was, so the run must not move past it
// either, or the next packet, which the NIC answers with a NAK, would be
// held as silent.
func (s *slot) quietFrame(frame []byte) bool {
	if len(s.rx) == 0 || s.pkt.Decode(frame) != nil {
		return false
	}
	if !wire.PKeyMatch(s.pkt.BTH.PKey(), wire.DefaultPKey) {
		return false
	}
	if dst := s.pkt.Dst().Unmap(); dst != s.info.IPv4 && dst != s.info.IPv6 {
		return false
	}
	for i := range s.rx {
		if s.rx[i].Take(s.pkt.BTH, len(s.pkt.Payload)) {
			return true
		}
	}
	return false
}

// txDone tells the process (at its next wake-up) that its port finished
// a frame.
func (s *slot) txDone(now sim.Time) {
	s.inPort--
	if s.stale > 0 {
		s.stale-- // a frame sent before the process attached
		return
	}
	if s.c != nil {
		s.pending = appendTime(s.pending, msgTxDone, now)
		if s.slack > 0 {
			s.slack-- // nothing waits on it: it comes with the next wake
		} else {
			s.due = true
		}
	}
}
