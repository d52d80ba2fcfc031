package conformance

// Flow of a frame through the fault switch:
//   1. VM A's QEMU sends an Ethernet frame as one UDP datagram to the
//      switch's port A (VMConfig.RemotePort = Switch.PortA()); B likewise
//      to port B.
//   2. The frame is decoded with wire.Packet.DecodeHeaders; a frame that is
//      not RoCE v2 (ARP, ICMP, the TCP of ibv_rc_pingpong's handshake) is
//      judged with pkt nil, as sim/fabric does, so only link and node
//      keys can touch it.
//   3. For RoCE v2 frames the injector numbers the transmission of the PSN
//      (CountTx), then Decide gives the verdict, exactly as sim/fabric
//      judges a frame on its first hop.
//   4. The verdict is carried out: pass, drop, extra copies, a wall-clock
//      delay, a hold until N later frames (reorder), or the frame altered
//      in place (corrupt, truncate, rewrite).
//   5. Every frame sent on, and every frame dropped, is written to the
//      pcapng capture with the wall-clock time, on the interface of its
//      direction, with the verdict as the packet comment.
//   6. The frame leaves through the other port's socket, so the VM sees it
//      come from the address it sends to.

import (
	"errors"
	"fmt"
	"math/rand/v2"
	"net"
	"runtime"
	"sync"
	"time"

	"github.com/rocesim/rocesim/faults"
	"github.com/rocesim/rocesim/sim"
	"github.com/rocesim/rocesim/wire"
	"github.com/rocesim/rocesim/wire/capture"
)

// maxFrame is the largest datagram read: QEMU's dgram backend carries one
// Ethernet frame per datagram, and rxe frames are at most MTU+headers.
const maxFrame = 65536

// SwitchConfig describes a fault switch between two VMs.
type SwitchConfig struct {
	// PortA and PortB are the UDP ports on 127.0.0.1 the switch listens
	// on, where VM A and VM B send their frames (0: pick a free port).
	PortA, PortB int
	// PeerA and PeerB are the VMs' own ports (their VMConfig.LocalPort),
	// where the switch delivers frames.
	PeerA, PeerB int
	// NameA and NameB are the node names the plan's src=, dst=, dir= and
	// partition see for the two sides (default "a" and "b").
	NameA, NameB string
	// Plan is the fault plan applied to every frame; nil applies none.
	Plan *faults.Plan
	// Rand is the stream prob= rules draw from; nil uses a fixed seed.
	Rand *rand.Rand
	// CapturePath, if set, receives a capture of every frame (pcapng when
	// the name ends in .pcapng) with the fault verdicts as comments.
	CapturePath string
}

// SwitchStats counts what the switch did, over both directions.
type SwitchStats struct {
	Frames     uint64 // frames received from the VMs
	RoCE       uint64 // of which RoCE v2
	Forwarded  uint64 // frames sent on (copies included)
	Dropped    uint64 // dropped by the plan
	Duplicated uint64 // extra copies sent
	Delayed    uint64 // held back for a delay or a reorder
	Altered    uint64 // corrupted, truncated or rewritten
	SendErrors uint64 // datagrams the socket refused
}

// Switch is a fault-injecting Ethernet switch between two QEMU VMs whose
// links are UDP datagrams on 127.0.0.1. It applies a faults.Plan to the
// frames the way sim/fabric does, with the wall clock since NewSwitch as
// the plan's time, and captures them. Its methods are safe for concurrent
// use.
type Switch struct {
	cfg   SwitchConfig
	link  string
	start time.Time
	conns [2]*net.UDPConn
	peers [2]*net.UDPAddr
	wg    sync.WaitGroup

	mu     sync.Mutex // guards everything below
	closed bool
	inj    *faults.Injector
	pkt    wire.Packet
	capw   capture.Writer
	ifaces [2]int
	held   [2][]heldDatagram
	timers []*time.Timer
	stats  SwitchStats
	last   time.Time // when the last frame arrived
	// The plan's clock: wall time since start, less the time it was
	// held (Hold, Release); while held it stands at heldAt.
	held0   time.Time // when Hold was called; zero when running
	heldAt  sim.Time
	heldFor time.Duration
	judged  sim.Time // plan time of the last frame judged
	tids    [2]int   // the OS threads of the two serve loops
	capErr  error
	readErr error
}

// heldDatagram is a frame held back by a reorder verdict until after more
// frames have gone the same way.
type heldDatagram struct {
	frame   []byte
	after   int
	comment string
}

// NewSwitch opens the switch's two ports and starts forwarding.
func NewSwitch(cfg SwitchConfig) (*Switch, error) {
	if cfg.PeerA <= 0 || cfg.PeerB <= 0 {
		return nil, errors.New("conformance: switch needs both VMs' ports (PeerA, PeerB)")
	}
	if cfg.NameA == "" {
		cfg.NameA = "a"
	}
	if cfg.NameB == "" {
		cfg.NameB = "b"
	}
	if cfg.Rand == nil {
		cfg.Rand = sim.NewSeeds(1).Stream("faults")
	}
	if cfg.Plan != nil {
		if err := cfg.Plan.Validate(); err != nil {
			return nil, fmt.Errorf("conformance: switch plan: %w", err)
		}
	}
	s := &Switch{cfg: cfg, link: cfg.NameA + "-" + cfg.NameB}
	s.inj = faults.NewInjector(cfg.Plan, cfg.Rand)
	s.peers[0] = &net.UDPAddr{IP: net.IPv4(127, 0, 0, 1), Port: cfg.PeerA}
	s.peers[1] = &net.UDPAddr{IP: net.IPv4(127, 0, 0, 1), Port: cfg.PeerB}
	for i, p := range []int{cfg.PortA, cfg.PortB} {
		c, err := net.ListenUDP("udp4", &net.UDPAddr{IP: net.IPv4(127, 0, 0, 1), Port: p})
		if err != nil {
			s.closeConns()
			return nil, fmt.Errorf("conformance: switch port %d: %w", p, err)
		}
		s.conns[i] = c
	}
	if err := s.openCapture(cfg.CapturePath, cfg.Plan); err != nil {
		s.closeConns()
		return nil, err
	}
	s.start = time.Now()
	for i := range 2 {
		s.wg.Go(func() { s.serve(i) })
	}
	return s, nil
}

// openCapture starts a capture at path (none if path is empty). The
// caller holds s.mu or has not started serving.
func (s *Switch) openCapture(path string, plan *faults.Plan) error {
	s.capw = nil
	if path == "" {
		return nil
	}
	w, err := capture.Create(path, capture.PcapngOptions{
		Comment: "rocesim conformance switch " + s.link + ", plan:\n" + planText(plan)})
	if err != nil {
		return err
	}
	names := [2]string{s.cfg.NameA, s.cfg.NameB}
	for i := range 2 {
		id, err := w.AddInterface(names[i]+"->"+names[1-i],
			fmt.Sprintf("switch port %d (VM %s) to VM %s", s.Port(i), names[i], names[1-i]))
		if err != nil {
			w.Close()
			return err
		}
		s.ifaces[i] = id
	}
	s.capw = w
	return nil
}

// Reset starts over with a new plan, random stream and capture, keeping
// the ports (the VMs stay connected): frames delayed or held under the
// old plan are dropped unrecorded, the old capture is closed, the
// counters and the plan's clock restart at zero. It returns the old
// capture's first error. rnd nil uses a fixed seed.
func (s *Switch) Reset(plan *faults.Plan, rnd *rand.Rand, capturePath string) error {
	if plan != nil {
		if err := plan.Validate(); err != nil {
			return fmt.Errorf("conformance: switch plan: %w", err)
		}
	}
	if rnd == nil {
		rnd = sim.NewSeeds(1).Stream("faults")
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return errors.New("conformance: switch closed")
	}
	for _, t := range s.timers {
		t.Stop()
	}
	s.timers = nil
	s.held = [2][]heldDatagram{}
	err := s.capErr
	s.capErr = nil
	if s.capw != nil {
		if cerr := s.capw.Close(); err == nil {
			err = cerr
		}
	}
	s.cfg.Plan, s.cfg.Rand = plan, rnd
	s.inj = faults.NewInjector(plan, rnd)
	s.stats = SwitchStats{}
	s.start = time.Now()
	s.last = time.Time{}
	s.held0, s.heldAt, s.heldFor, s.judged = time.Time{}, 0, 0, 0
	if cerr := s.openCapture(capturePath, plan); err == nil {
		err = cerr
	}
	return err
}

// planTime is the plan's clock at wall time now. The caller holds s.mu.
func (s *Switch) planTime(now time.Time) sim.Time {
	if !s.held0.IsZero() {
		return s.heldAt
	}
	return sim.Time(now.Sub(s.start) - s.heldFor)
}

// PlanTime returns the plan's clock: the wall time since NewSwitch or
// Reset, less the time it was held.
func (s *Switch) PlanTime() sim.Time {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.planTime(time.Now())
}

// Hold stops the plan's clock at t, or at the time it has reached if
// that is earlier, but never before a frame already judged (the clock
// does not go back), until Release. The rig holds it while a step due at
// t is typed on a guest's console and done: in the simulation a step
// takes no time, so the frames it makes must be judged at t however
// long the console takes on a busy host.
func (s *Switch) Hold(t sim.Time) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if !s.held0.IsZero() {
		return
	}
	now := time.Now()
	s.heldAt = max(min(t, s.planTime(now)), s.judged)
	s.held0 = now
}

// Release restarts the plan's clock from where Hold stopped it.
func (s *Switch) Release() {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.held0.IsZero() {
		return
	}
	now := time.Now()
	// From now on planTime(now) must read heldAt.
	s.heldFor = now.Sub(s.start) - time.Duration(s.heldAt)
	s.held0 = time.Time{}
}

// LastFrame returns when the switch last received a frame (zero if none
// since NewSwitch or Reset).
func (s *Switch) LastFrame() time.Time {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.last
}

func planText(p *faults.Plan) string {
	if p == nil {
		return "(none)"
	}
	return p.String()
}

func (s *Switch) closeConns() {
	for _, c := range s.conns {
		if c != nil {
			c.Close()
		}
	}
}

// Threads returns the IDs of the OS threads that receive and forward
// the frames (none where gettid gives 0).
func (s *Switch) Threads() []int {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := []int{} // not nil: a meteredProc with nil tids means all threads
	for _, t := range s.tids {
		if t != 0 {
			out = append(out, t)
		}
	}
	return out
}

// Port returns the UDP port of side i (0: A, 1: B), where that side's VM
// sends.
func (s *Switch) Port(i int) int { return s.conns[i].LocalAddr().(*net.UDPAddr).Port }

// PortA returns the port VM A must send to (its VMConfig.RemotePort).
func (s *Switch) PortA() int { return s.Port(0) }

// PortB returns the port VM B must send to (its VMConfig.RemotePort).
func (s *Switch) PortB() int { return s.Port(1) }

// Stats returns the counters so far.
func (s *Switch) Stats() SwitchStats {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.stats
}

// Hits returns how many times rule (1-based, as in Verdict.Rule) acted.
func (s *Switch) Hits(rule int) uint64 {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.inj.Hits(rule)
}

// Close stops the switch: frames still delayed or held are dropped
// unrecorded, the capture is flushed and closed. It returns the first
// error of the capture or of a socket read.
func (s *Switch) Close() error {
	s.mu.Lock()
	if s.closed {
		s.mu.Unlock()
		return nil
	}
	s.closed = true
	for _, t := range s.timers {
		t.Stop()
	}
	s.mu.Unlock()
	s.closeConns()
	s.wg.Wait()
	s.mu.Lock()
	defer s.mu.Unlock()
	err := s.capErr
	if s.capw != nil {
		if cerr := s.capw.Close(); err == nil {
			err = cerr
		}
	}
	if err == nil {
		err = s.readErr
	}
	return err
}

// serve reads the frames side i's VM sends and forwards them to the other
// side.
func (s *Switch) serve(i int) {
	// On a thread of its own, whose waits for a CPU the rig measures
	// (Threads, cpuwait.go) apart from the rest of the test process.
	runtime.LockOSThread()
	s.mu.Lock()
	s.tids[i] = gettid()
	s.mu.Unlock()
	buf := make([]byte, maxFrame)
	for {
		n, _, err := s.conns[i].ReadFromUDP(buf)
		if err != nil {
			if errors.Is(err, net.ErrClosed) {
				return
			}
			s.mu.Lock()
			if s.readErr == nil {
				s.readErr = fmt.Errorf("conformance: switch port %d: %w", s.Port(i), err)
			}
			s.mu.Unlock()
			return
		}
		s.handle(i, append([]byte(nil), buf[:n]...))
	}
}

// handle judges one frame from side i and carries out the verdict, as
// sim/fabric's enter does on a frame's first hop.
func (s *Switch) handle(i int, frame []byte) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return
	}
	s.stats.Frames++
	s.last = time.Now()
	var roce *wire.Packet
	if s.pkt.DecodeHeaders(frame) == nil {
		roce = &s.pkt
		s.stats.RoCE++
	}
	names := [2]string{s.cfg.NameA, s.cfg.NameB}
	hop := faults.Hop{Link: s.link, From: names[i], To: names[1-i], First: true}
	if roce != nil {
		hop.Tx = s.inj.CountTx(hop, roce)
	}
	now := s.planTime(s.last)
	s.judged = now
	v := s.inj.Decide(now, hop, frame, roce)
	switch v.Action {
	case faults.Pass:
		s.send(i, frame, "")
	case faults.Drop:
		s.stats.Dropped++
		s.record(i, frame, v.String())
	case faults.Duplicate:
		s.stats.Duplicated += uint64(v.Copies)
		s.send(i, frame, v.String())
		for c := range v.Copies {
			s.send(i, frame, v.CopyNote(c+1))
		}
	case faults.Delay:
		s.stats.Delayed++
		why := v.String()
		t := time.AfterFunc(time.Duration(v.Delay), func() {
			s.mu.Lock()
			defer s.mu.Unlock()
			if !s.closed {
				s.send(i, frame, why)
			}
		})
		s.timers = append(s.timers, t)
	case faults.Reorder:
		s.stats.Delayed++
		s.held[i] = append(s.held[i], heldDatagram{frame: frame, after: v.Hold, comment: v.String()})
	case faults.Truncate:
		frame = frame[:min(len(frame), max(v.Len, 0))]
		fallthrough
	case faults.Corrupt, faults.Rewrite:
		s.stats.Altered++
		s.send(i, frame, v.String())
	default:
		panic(fmt.Sprintf("conformance: fault verdict with unknown action %d", v.Action))
	}
}

// send records frame and sends it to the VM opposite side i, then
// releases the frames held for reordering that were waiting for it. The
// caller holds s.mu.
func (s *Switch) send(i int, frame []byte, comment string) {
	s.record(i, frame, comment)
	// Out of the other side's socket: that VM sends to it, so that is
	// where it expects its peer's frames from.
	if _, err := s.conns[1-i].WriteToUDP(frame, s.peers[1-i]); err != nil {
		s.stats.SendErrors++
	} else {
		s.stats.Forwarded++
	}
	if len(s.held[i]) == 0 {
		return
	}
	keep := s.held[i][:0]
	var due []heldDatagram
	for _, h := range s.held[i] {
		h.after--
		if h.after <= 0 {
			due = append(due, h)
		} else {
			keep = append(keep, h)
		}
	}
	s.held[i] = keep
	for _, h := range due {
		s.send(i, h.frame, h.comment)
	}
}

// record writes frame to the capture on side i's interface at the wall
// clock time. The caller holds s.mu.
func (s *Switch) record(i int, frame []byte, comment string) {
	if s.capw == nil {
		return
	}
	if err := s.capw.WriteFrame(time.Now().UnixNano(), s.ifaces[i], frame, comment); err != nil && s.capErr == nil {
		s.capErr = err
	}
}
