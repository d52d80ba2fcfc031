package procfabric

import (
	"errors"
	"fmt"
	"math"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"sync"
	"syscall"
	"time"

	"github.com/rocesim/rocesim/sim"
	"github.com/rocesim/rocesim/sim/fabric"
	"github.com/rocesim/rocesim/wire"
)

// A process's life on the fabric (the client side):
//
//  1. Attach: connect, send attach(node), read attached: the process
//     runs, at the virtual time the reply gives;
//  2. while it runs: Send buffers the frames its NIC built, and writes
//     them out past writeAt bytes; frames sent from another goroutine
//     while the owner waits stay buffered (the daemon refuses a frame
//     from a waiting process) up to MaxPending bytes, where Send wakes
//     the wait (as Interrupt does) and blocks until it has ended;
//  3. Wait(deadline): flush the frames and wait(deadline), then read the
//     batch up to now(t): the process runs again, at t;
//  4. Close: detach and close.

// MaxPending bounds the frame bytes a Port holds while its owner waits
// in another goroutine (at most one frame more): a Send that finds this
// many held wakes the Wait (a resume, as Interrupt sends) and blocks until
// the Wait has returned and the frames can go with the next wait, or the
// port fails or closes. It cannot deadlock: the resume makes the daemon
// wake the process at once, whatever the rest of the fabric does. 1 MiB
// is some 1000 full frames, far more than a program thread posts between
// two turns of a progress thread, and far below the 64 MiB a process may
// send in one turn (DefaultMaxHeld).
const MaxPending = 1 << 20

// writeAt is how many frame bytes Send buffers while the process runs
// before it writes them out.
const writeAt = 64 << 10

// ErrDetached is returned by Wait when the daemon sent the process away;
// the error's text says why (the hold limit, the run's deadline).
var ErrDetached = errors.New("procfabric: detached by the fabric")

// CloseWait bounds the wall time Close waits for the daemon to take the
// frames a blocked Wait held (it answers at once unless it is stuck).
const CloseWait = 10 * time.Second

// Port is a process's attachment to a fabric node: its NIC's one port.
// One goroutine waits in it at a time; Send, SetWill, Interrupt and
// Close may be called from any goroutine, also while another waits.
type Port struct {
	mu          sync.Mutex       // guards writes, waiting and interrupted (Interrupt's state)
	waiting     bool             // a wait message is out and its now(t) not yet read
	resumed     bool             // Send sent a resume during this wait (MaxPending)
	waitEnded   sync.Cond        // on mu: broadcast when a wait ends or the port closes
	maxPending  int              // MaxPending (tests lower it)
	closeWait   time.Duration    // CloseWait (tests lower it)
	interrupted bool             // Interrupt came while the process ran: the next Wait returns at once
	slack       uint32           // SetTxSlack's, for the next wait
	rxSlack     []wire.PacketRun // SetRxSlack's, for the next wait
	closed      bool             // Close was called
	c           *net.UnixConn
	r           reader
	out         []byte
	self        int
	nodes       []NodeInfo
	now         sim.Time
	in          Inputs
	arena       []byte
	err         error
}

// Input is one thing that happened at the node's port: a frame that
// arrived (Frame, valid until the next Wait; at least 1 byte, and shorter
// than an Ethernet header if a fault cut it so) or, if Frame is nil, a
// frame of the node's that the port finished (the NIC's TxDone).
type Input struct {
	At    sim.Time
	Frame []byte
}

// Inputs is what one Wait returns: the port's inputs in the order they
// happened, then the virtual time the process runs at.
type Inputs struct {
	Events []Input
	Now    sim.Time
}

// Attach attaches this process to the node called node on the fabric
// called name (socket in SocketDir()). With ErrNoFabric no daemon
// answers: see Start.
func Attach(name, node string) (*Port, error) { return AttachDir("", name, node) }

// AttachDir is Attach with the socket directory given ("": SocketDir()).
func AttachDir(dir, name, node string) (*Port, error) {
	if err := checkName("fabric name", name); err != nil {
		return nil, err
	}
	if err := checkName("node name", node); err != nil {
		return nil, err
	}
	c, err := dial(dir, name)
	if err != nil {
		return nil, err
	}
	p := &Port{c: c, r: reader{r: c}, maxPending: MaxPending, closeWait: CloseWait}
	p.waitEnded.L = &p.mu
	if _, err := c.Write(appendAttach(nil, node)); err != nil {
		c.Close()
		return nil, err
	}
	t, body, err := p.r.next()
	if err == nil && t == msgBye {
		err = fmt.Errorf("%w: attach %s on fabric %s: %s", ErrDetached, node, name, body)
	} else if err == nil && t != msgAttached {
		err = protoErr("attach answered by message type %d", t)
	}
	var total int
	if err == nil {
		p.self, p.now, total, p.nodes, err = parseAttached(body)
	}
	for err == nil && len(p.nodes) < total {
		// The rest of a large fabric's nodes (appendAttached).
		if t, body, err = p.r.next(); err == nil && t != msgNodes {
			err = protoErr("attach reply continued by message type %d", t)
		}
		var more []NodeInfo
		if err == nil {
			more, err = parseNodes(body)
		}
		p.nodes = append(p.nodes, more...)
	}
	if err == nil && len(p.nodes) != total {
		err = protoErr("attached: %d nodes listed of %d", len(p.nodes), total)
	}
	if err != nil {
		c.Close()
		return nil, err
	}
	return p, nil
}

// Self returns the node this process attached to: its name and
// addresses, which the process's NIC takes.
func (p *Port) Self() NodeInfo { return p.nodes[p.self-1] }

// Index returns the node's index, from 1 (node order on the fabric).
func (p *Port) Index() int { return p.self }

// Nodes returns every node of the fabric in order, this one included:
// the NIC's neighbours (ARP is not simulated).
func (p *Port) Nodes() []NodeInfo { return p.nodes }

// Now returns the virtual time the process runs at.
func (p *Port) Now() sim.Time { return p.now }

// Send puts a frame the NIC built on the port, at the process's current
// virtual time; note (at most MaxNote bytes) says why it exists and goes
// into the capture's comment. The frame and the note are copied. Called while another
// goroutine waits in the port, it may block: see MaxPending.
func (p *Port) Send(frame, note []byte) error {
	p.mu.Lock()
	defer p.mu.Unlock()
	if len(frame) < wire.EthernetLen || len(frame) > fabric.MaxFrame {
		return fmt.Errorf("procfabric: Send: frame of %d bytes, want %d to %d", len(frame), wire.EthernetLen, fabric.MaxFrame)
	}
	for {
		if p.closed {
			return net.ErrClosed
		}
		if p.err != nil {
			return p.err
		}
		if !p.waiting || len(p.out) < p.maxPending {
			break
		}
		// Held to the cap while the owner waits: the daemon detaches a
		// waiting process for a frame, so they cannot be written now.
		// Wake the wait and let it end; the owner's next wait (or this
		// Send, if the owner runs on without one) writes them out.
		if !p.resumed {
			if _, err := p.c.Write(appendEmpty(nil, msgResume)); err != nil {
				return err // the waiting goroutine reads why
			}
			p.resumed = true
		}
		p.waitEnded.Wait()
	}
	if len(note) > MaxNote {
		note = note[:MaxNote]
	}
	p.out = appendFrame(p.out, note, frame)
	if len(p.out) >= writeAt && !p.waiting {
		// Written out early to bound the buffer, but only while the
		// process runs: while another goroutine waits in the port, the
		// daemon holds the process waiting and detaches it for a frame;
		// those frames go with the next wait, after the Interrupt that
		// must follow them (or the wake-up at MaxPending above).
		return p.flush()
	}
	return nil
}

func (p *Port) flush() error {
	if len(p.out) == 0 {
		return nil
	}
	_, err := p.c.Write(p.out)
	p.out = p.out[:0]
	if err != nil {
		p.err = p.why(err)
	}
	return p.err
}

// why returns the reason the daemon gave for closing the connection (its
// bye, which may sit unread behind the failed write), else err.
func (p *Port) why(err error) error {
	p.c.SetReadDeadline(time.Now().Add(time.Second))
	for {
		t, body, rerr := p.r.next()
		if rerr != nil {
			return err
		}
		if t == msgBye {
			return fmt.Errorf("%w: %s", ErrDetached, body)
		}
	}
}

// WillEntry is a change to a process's will: the frame that goes under
// Key, with its note, or a nil Frame to take Key's frame out.
type WillEntry struct {
	Key         uint32
	Frame, Note []byte
}

// SetWill changes the frames the process leaves with the daemon, each
// under a key of the caller's (the drop-in's: one per rdma_cm ID): if
// the process's connection ends without Close (the process was killed,
// or crashed), the daemon puts them on the fabric for it, in the order
// of their keys, as a kernel sends what a dead process's connections
// owe (the CM's DREQs of its rdma_cm IDs). Close voids the will. The
// changes go to the daemon at once, after the frames sent before them,
// while the process runs; while another goroutine waits in the port,
// with the next wait. The frames are copied.
func (p *Port) SetWill(entries []WillEntry) error {
	p.mu.Lock()
	defer p.mu.Unlock()
	for _, e := range entries {
		if e.Frame != nil && (len(e.Frame) < wire.EthernetLen || len(e.Frame) > fabric.MaxFrame) {
			return fmt.Errorf("procfabric: SetWill: frame of %d bytes, want %d to %d", len(e.Frame), wire.EthernetLen, fabric.MaxFrame)
		}
	}
	if p.closed {
		return net.ErrClosed
	}
	if p.err != nil {
		return p.err
	}
	p.out = appendWill(p.out, entries)
	if !p.waiting {
		return p.flush()
	}
	return nil
}

// SetTxSlack says how many of the port's next tx-dones the next Wait or
// PollWait may leave pending: the daemon wakes the process for none of
// them (it holds them, and they come, in order, with whatever wakes it):
// only for the tx-done after them, a frame past the rx slack, the
// deadline, a resume, or an instant with nothing left to happen. A NIC
// passes what nothing waits on (nic.Device.TxSlack): a stream's sender
// is then woken once for many frames rather than once a frame, and gets
// what it would have got.
func (p *Port) SetTxSlack(n int) {
	p.mu.Lock()
	p.slack = uint32(min(max(n, 0), math.MaxUint32))
	p.mu.Unlock()
}

// MaxRxSlack bounds the runs of one wait's frame slack.
const MaxRxSlack = 16

// SetRxSlack says which frames the next Wait or PollWait need not be
// woken for (at most MaxRxSlack runs; the rest are left out): the
// daemon holds a frame that arrives for the node while the process
// waits if it is the next of a run (wire.PacketRun.Take: a NIC's
// nic.Device.RxSlack, the middle packets of messages), and wakes the
// process at the first frame that is not, with those before it, in
// order. A receiver of a stream is then woken once per message rather
// than once per packet.
func (p *Port) SetRxSlack(rx []wire.PacketRun) {
	p.mu.Lock()
	p.rxSlack = p.rxSlack[:0]
	for _, r := range rx {
		// What the wire cannot say is left out: a run the daemon would
		// refuse, or one it would read as another.
		if len(p.rxSlack) < MaxRxSlack && r.Count > 0 && r.Len >= 0 && r.Len <= math.MaxUint16 && r.PSN <= wire.PSNMask {
			r.Count = min(r.Count, math.MaxInt32)
			p.rxSlack = append(p.rxSlack, r)
		}
	}
	p.mu.Unlock()
}

// Wait says the process waits until deadline (its NIC's next deadline;
// sim.Never to wait for input only) and blocks until the fabric wakes it:
// input arrived, or virtual time reached deadline. The result is valid
// until the next Wait.
func (p *Port) Wait(deadline sim.Time) (*Inputs, error) { return p.wait(msgWait, deadline) }

// PollWait is Wait for a program's poll that found nothing: it is also
// woken, once per instant, when every process waits and nothing is left
// to happen, with no input, as a poll on a quiet NIC returns 0 (see
// Daemon's round). Wait leaves such a process asleep.
func (p *Port) PollWait(deadline sim.Time) (*Inputs, error) { return p.wait(msgPollWait, deadline) }

func (p *Port) wait(kind msgType, deadline sim.Time) (*Inputs, error) {
	p.mu.Lock()
	if p.closed || p.err != nil {
		err := p.err
		if p.closed {
			err = net.ErrClosed
		}
		p.mu.Unlock()
		return nil, err
	}
	if p.interrupted {
		deadline, p.interrupted = 0, false // the daemon takes it as now
	}
	p.out = appendWait(p.out, kind, max(deadline, 0), p.slack, p.rxSlack)
	p.slack, p.rxSlack = 0, p.rxSlack[:0]
	err := p.flush()
	p.waiting, p.resumed = err == nil, false
	p.mu.Unlock()
	if err != nil {
		return nil, err
	}
	defer func() {
		p.mu.Lock()
		p.waiting = false
		p.waitEnded.Broadcast() // a Send held at MaxPending goes on
		p.mu.Unlock()
	}()
	p.in.Events, p.arena = p.in.Events[:0], p.arena[:0]
	for {
		t, body, err := p.r.next()
		if err != nil {
			return p.fail(err)
		}
		switch t {
		case msgDeliver:
			// Any length from 1 byte: a truncate rule may cut a frame
			// below its Ethernet header on a direct link, and the NIC
			// counts such a runt (the fabric never makes an empty
			// frame, and an empty Frame would read as a TxDone).
			if len(body) <= 8 {
				return p.fail(protoErr("deliver: %d bytes", len(body)))
			}
			at, _ := parseTime(t, body[:8])
			p.arena = append(p.arena, body[8:]...)
			p.in.Events = append(p.in.Events, Input{At: at, Frame: body[8:]}) // re-pointed below
		case msgTxDone:
			at, err := parseTime(t, body)
			if err != nil {
				return p.fail(err)
			}
			p.in.Events = append(p.in.Events, Input{At: at})
		case msgNow:
			now, err := parseTime(t, body)
			if err != nil {
				return p.fail(err)
			}
			p.now, p.in.Now = now, now
			// The arena may have moved while it grew: point the frames
			// at their final place.
			off := 0
			for i := range p.in.Events {
				if f := p.in.Events[i].Frame; f != nil {
					p.in.Events[i].Frame = p.arena[off : off+len(f) : off+len(f)]
					off += len(f)
				}
			}
			return &p.in, nil
		case msgBye:
			return p.fail(fmt.Errorf("%w: %s", ErrDetached, body))
		default:
			return p.fail(protoErr("message type %d from the daemon", t))
		}
	}
}

// fail records err as the port's for good (Wait reads without p.mu held;
// Send, SetWill and Close read p.err under it) and returns it.
func (p *Port) fail(err error) (*Inputs, error) {
	p.mu.Lock()
	p.err = err
	p.mu.Unlock()
	return nil, err
}

// Interrupt ends a Wait blocked in another goroutine: the process runs
// again at once, at the current virtual time, with whatever input has
// come (for a program thread that posts while a progress thread waits).
// Called while the process runs, it makes the next Wait return at once.
func (p *Port) Interrupt() error { return p.resume(msgResume) }

// resume ends a Wait blocked in another goroutine with a message of type
// t (msgResume, msgTick), or makes the next Wait return at once.
func (p *Port) resume(t msgType) error {
	p.mu.Lock()
	defer p.mu.Unlock()
	if !p.waiting {
		p.interrupted = true
		return nil
	}
	_, err := p.c.Write(appendEmpty(nil, t))
	return err
}

// Tick is Interrupt for the library's own housekeeping, not for its
// program's work (a blocking wait that wakes every few milliseconds of
// wall time to see whether its thread was cancelled): the daemon wakes
// the process as for Interrupt, but a run where every process waits
// and only ticks come is still quiet (Config.QuietReport).
func (p *Port) Tick() error { return p.resume(msgTick) }

// Poll makes a Wait blocked in another goroutine a PollWait: the daemon
// also wakes it, once per instant, when every process waits and nothing
// is left to happen (for a program thread whose poll finds nothing while
// another thread waits in a plain Wait, as one in ibv_get_cq_event
// does). Unlike Interrupt it does not end the wait: a poll repeated at
// the same instant sleeps until something happens, as a PollWait's
// would. Called while no Wait blocks, it does nothing.
func (p *Port) Poll() error {
	p.mu.Lock()
	defer p.mu.Unlock()
	if !p.waiting || p.closed || p.err != nil {
		return nil
	}
	_, err := p.c.Write(appendEmpty(nil, msgPoll))
	return err
}

// Close sends the frames not yet sent, detaches and closes the
// connection, and voids the will (SetWill). The node goes silent; its
// peers see their QPs time out.
// It may be called from any goroutine: a Wait blocked in another then
// returns an error. Frames sent while that Wait blocks (a program's
// last words at exit, its CM's DREQs, while its progress thread waits)
// go too: the Wait is resumed first, as Send does at MaxPending, for the
// daemon takes frames only from a process that runs; a daemon that does
// not answer within CloseWait loses them, and Close goes on.
func (p *Port) Close() error {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.closed {
		return net.ErrClosed
	}
	// Close's own writes are bounded too: a stuck daemon whose socket
	// buffer is full would block them.
	p.c.SetWriteDeadline(time.Now().Add(p.closeWait))
	if p.waiting && len(p.out) > 0 && p.err == nil {
		if !p.resumed {
			if _, err := p.c.Write(appendEmpty(nil, msgResume)); err == nil {
				p.resumed = true
			}
		}
		// The daemon's answer, or the connection's end; a daemon alive
		// but silent gets closeWait, and the frames are lost.
		late := false
		t := time.AfterFunc(p.closeWait, func() {
			p.mu.Lock()
			late = true
			p.waitEnded.Broadcast()
			p.mu.Unlock()
		})
		for p.resumed && p.waiting && p.err == nil && !late {
			p.waitEnded.Wait()
		}
		t.Stop()
	}
	p.closed = true
	p.waitEnded.Broadcast() // a Send held at MaxPending returns
	if p.waiting {
		// The owner is blocked reading; its frames went out with its wait.
		p.c.Write(appendEmpty(nil, msgDetach))
	} else if p.err == nil {
		p.out = appendEmpty(p.out, msgDetach)
		p.c.Write(p.out)
		p.out = p.out[:0]
	}
	return p.c.Close()
}

// AttachOrStart attaches to node on the fabric called name, starting the
// fabric first with Start(dir, name, argv, timeout) if no daemon answers:
// what a client library calls when its user started no fabric.
func AttachOrStart(dir, name, node string, argv []string, timeout time.Duration) (*Port, error) {
	p, err := AttachDir(dir, name, node)
	if !errors.Is(err, ErrNoFabric) {
		return p, err
	}
	if err := Start(dir, name, argv, timeout); err != nil {
		return nil, err
	}
	return AttachDir(dir, name, node)
}

// Start starts a daemon for the fabric called name if none answers, by
// running argv (for instance: the rocesim executable, "fabric", "--name",
// name, "--exit-when-idle", "--nodes", "a,b"), detached from the
// caller's session, with its output appended to name.log in the socket
// directory. It returns once the socket answers, or with the log's end
// if it does not within timeout. dir "" means SocketDir().
func Start(dir, name string, argv []string, timeout time.Duration) error {
	_, err := StartOwn(dir, name, argv, timeout)
	return err
}

// StartOwn is Start that also says whether the daemon that answers is
// the one it started: not when one already answered, nor when another
// client's daemon, started at the same time, won the fabric's lock.
func StartOwn(dir, name string, argv []string, timeout time.Duration) (own bool, err error) {
	if c, err := dial(dir, name); err == nil {
		c.Close()
		return false, nil
	}
	if dir == "" {
		dir = SocketDir()
	}
	if err := privateDir(dir); err != nil {
		return false, err
	}
	logPath := filepath.Join(dir, name+".log")
	log, err := os.OpenFile(logPath, os.O_WRONLY|os.O_CREATE|os.O_APPEND, 0o600)
	if err != nil {
		return false, err
	}
	defer log.Close()
	cmd := exec.Command(argv[0], argv[1:]...)
	cmd.Stdout, cmd.Stderr = log, log
	cmd.SysProcAttr = &syscall.SysProcAttr{Setsid: true}
	if err := cmd.Start(); err != nil {
		return false, err
	}
	exited := make(chan error, 1)
	go func() { exited <- cmd.Wait() }() // reaps it whenever it ends
	end := time.Now().Add(timeout)
	for time.Now().Before(end) {
		if c, err := dial(dir, name); err == nil {
			// Whose daemon answers: this one's, or (it lost the lock
			// and is exiting) another client's.
			cred, err := peerCred(c)
			c.Close()
			return err == nil && int(cred.Pid) == cmd.Process.Pid, nil
		}
		select {
		case err := <-exited:
			// Another client's daemon may have won the race for the
			// lock: this one exits, and the winner answers.
			for range 100 {
				if c, derr := dial(dir, name); derr == nil {
					c.Close()
					return false, nil
				}
				time.Sleep(10 * time.Millisecond)
			}
			tail, _ := os.ReadFile(logPath)
			return false, fmt.Errorf("%w: %s exited (%v); %s says: %s", ErrNoFabric, argv[0], err, logPath, lastLines(tail, 5))
		case <-time.After(10 * time.Millisecond):
		}
	}
	return false, fmt.Errorf("%w: %s did not answer within %v (see %s)", ErrNoFabric, name, timeout, logPath)
}

func lastLines(b []byte, n int) string {
	i := len(b)
	for ; i > 0 && n >= 0; i-- {
		if b[i-1] == '\n' {
			n--
		}
	}
	return string(b[i:])
}
