package rswitch

// Flow of a frame through the switch:
//   1. Endpoint A's transport (realnet.Transport: a datagram link to a
//      QEMU VM, an AF_PACKET socket on an interface, a UDP socket on port
//      4791) receives a batch of frames into the switch's buffers; B's
//      likewise, each on a goroutine of its own.
//   2. With UDP endpoints (Config.Endpoints) the switch stands between two
//      RoCE v2 hosts as each one's peer: a frame from A, rebuilt by the
//      transport with A's address as source and the address of B's stand-in
//      as destination, is given the stand-in of A as source and B as
//      destination, and its ICRC follows the addresses without losing an
//      error it carried (see translate). A frame from any other address is
//      dropped and counted (Stats.Foreign): the switch forwards only between
//      the two endpoints it was given.
//   3. The frame is decoded with wire.Packet.DecodeHeaders; a frame that is
//      not RoCE v2 (ARP, ICMP, the TCP of ibv_rc_pingpong's handshake) is
//      judged with pkt nil, as sim/fabric does, so only link and node keys
//      can touch it.
//   4. For RoCE v2 frames whose ICRC verifies the injector numbers the
//      transmission of the PSN (CountTx); then Decide gives the verdict,
//      exactly as sim/fabric judges a frame on its first hop.
//   5. The verdict is carried out: pass, drop, extra copies, a wall-clock
//      delay, a hold until N later frames (reorder), or the frame altered
//      in place (corrupt, truncate, rewrite).
//   6. The frame leaves through the other endpoint's transport; every
//      frame sent on (as the transport sent it) and every frame dropped is
//      written to the pcapng capture with the wall-clock time, on the
//      interface of its direction, with the verdict as the packet comment,
//      and traced as sim/fabric traces a link (Config.Trace), for a ladder.

import (
	"errors"
	"fmt"
	"math/rand/v2"
	"net/netip"
	"runtime"
	"strconv"
	"sync"
	"time"

	"github.com/rocesim/rocesim/faults"
	"github.com/rocesim/rocesim/realnet"
	"github.com/rocesim/rocesim/sim"
	"github.com/rocesim/rocesim/sim/fabric"
	"github.com/rocesim/rocesim/wire"
	"github.com/rocesim/rocesim/wire/capture"
)

// Config describes a switch between two endpoints.
type Config struct {
	// A and B carry the two endpoints' frames; the switch owns them from
	// New on and closes them. Both carry whole frames (realnet.Dgram,
	// realnet.Packet), or both transport packets (realnet.UDP, with
	// Endpoints set).
	A, B realnet.Transport
	// NameA and NameB are the node names the plan's src=, dst=, dir= and
	// partition see for the two sides (default "a" and "b").
	NameA, NameB string
	// Endpoints, required with UDP transports, are the two RoCE v2 hosts'
	// own addresses. Each sees the other at a stand-in address: A sends
	// to the address transport A listens on, and the switch sends A's
	// frames on to B from transport B's address, where B sends its own.
	// Only frames from A's address are taken on transport A, and B's on B.
	Endpoints *Endpoints
	// Plan is the fault plan applied to every frame; nil applies none.
	Plan *faults.Plan
	// Rand is the stream prob= rules draw from; nil uses a fixed seed.
	Rand *rand.Rand
	// CapturePath, if set, receives a capture of every frame (pcapng when
	// the name ends in .pcapng) with the fault verdicts as comments.
	CapturePath string
	// Trace, if set, receives a frame event for every frame (the kinds and
	// fields sim/fabric writes for a link), so that package ladder draws
	// what crossed the switch. It is written under the switch's lock: read
	// it after Close.
	Trace *sim.Trace
}

// Endpoints are the addresses of two RoCE v2 hosts on UDP transports.
type Endpoints struct {
	A, B netip.Addr
}

// Stats counts what the switch did, over both directions.
type Stats struct {
	Frames     uint64 // frames received from the endpoints
	RoCE       uint64 // of which RoCE v2
	Forwarded  uint64 // frames sent on (copies included)
	Dropped    uint64 // dropped by the plan
	Duplicated uint64 // extra copies sent
	Delayed    uint64 // held back for a delay or a reorder
	Altered    uint64 // corrupted, truncated or rewritten
	Foreign    uint64 // from an address that is not the endpoint's, dropped unjudged
	BadICRC    uint64 // RoCE v2 frames whose ICRC does not verify: judged and forwarded as they are, not numbered (tx=)
	SendErrors uint64 // frames the transport refused
	// Runts are frames shorter than an Ethernet header, received so or
	// cut so by a truncate rule: dropped, as a switch drops a runt.
	Runts uint64
	// TxEvictions is how many flows the plan's transmission counting
	// forgot to bound its memory (faults.Injector.TxEvictions): when not
	// 0, a tx= rule may have taken a retransmission for a first
	// transmission.
	TxEvictions uint64
}

// Switch is a fault-injecting switch between two endpoints. It applies a
// faults.Plan to the frames the way sim/fabric does, with the wall clock
// since New as the plan's time, and captures them. Its methods are safe
// for concurrent use.
type Switch struct {
	cfg   Config
	link  string
	names [2]string
	tr    [2]realnet.Transport
	start time.Time
	wg    sync.WaitGroup

	mu     sync.Mutex // guards everything below
	closed bool
	inj    *faults.Injector
	pkt    wire.Packet
	out    [1][]byte // the batch of one frame handed to a transport's Send
	capw   capture.Writer
	ifaces [2]int
	held   [2][]heldFrame
	notes  map[noteKey]string // the plan's verdict comments, by rule (note)
	timers []*time.Timer
	stats  Stats
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

// noteKey names one capture comment of a plan's verdicts: its rule and
// action, and for the extra copies of a dup, which copy of how many; for
// a runt's drop (dropRunt) its length (runt > 0), rule 0 when no rule cut
// it.
type noteKey struct {
	rule   int
	action faults.ActionKind
	copy   int
	copies int
	runt   int // a runt's length plus one: 0 for every other note
}

// heldFrame is a frame held back by a reorder verdict until after more
// frames have gone the same way.
type heldFrame struct {
	frame   []byte
	after   int
	comment string
}

// New starts a switch between cfg.A and cfg.B. On an error it closes
// both transports.
func New(cfg Config) (*Switch, error) {
	s, err := newSwitch(cfg)
	if err != nil {
		for _, t := range []realnet.Transport{cfg.A, cfg.B} {
			if t != nil {
				t.Close()
			}
		}
		return nil, err
	}
	return s, nil
}

func newSwitch(cfg Config) (*Switch, error) {
	if cfg.A == nil || cfg.B == nil {
		return nil, errors.New("rswitch: a switch needs both endpoints' transports (A, B)")
	}
	if ca, cb := cfg.A.Carries(), cfg.B.Carries(); ca != cb {
		return nil, fmt.Errorf("rswitch: endpoint A's transport carries %v, B's %v: a switch joins two of a kind", ca, cb)
	}
	if cfg.A.Carries() == realnet.TransportPackets {
		e := cfg.Endpoints
		if e == nil || !e.A.IsValid() || !e.B.IsValid() {
			return nil, errors.New("rswitch: UDP endpoints need their addresses (Endpoints)")
		}
		for _, t := range []realnet.Transport{cfg.A, cfg.B} {
			if _, ok := t.(interface{ LocalAddr() netip.AddrPort }); !ok {
				return nil, fmt.Errorf("rswitch: transport %T does not tell its address", t)
			}
		}
	}
	if cfg.NameA == "" {
		cfg.NameA = "a"
	}
	if cfg.NameB == "" {
		cfg.NameB = "b"
	}
	if cfg.NameA == cfg.NameB {
		return nil, fmt.Errorf("rswitch: both endpoints are named %q", cfg.NameA)
	}
	if cfg.Rand == nil {
		cfg.Rand = sim.NewSeeds(1).Stream("faults")
	}
	if cfg.Plan != nil {
		if err := cfg.Plan.Validate(); err != nil {
			return nil, fmt.Errorf("rswitch: plan: %w", err)
		}
	}
	s := &Switch{cfg: cfg, link: cfg.NameA + "-" + cfg.NameB, names: [2]string{cfg.NameA, cfg.NameB},
		tr: [2]realnet.Transport{cfg.A, cfg.B}}
	s.inj = faults.NewInjector(cfg.Plan, cfg.Rand)
	s.notes = map[noteKey]string{}
	if err := s.openCapture(cfg.CapturePath, cfg.Plan); err != nil {
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
		Comment: "rocesim switch " + s.link + ", plan:\n" + planText(plan)})
	if err != nil {
		return err
	}
	for i := range 2 {
		id, err := w.AddInterface(s.names[i]+"->"+s.names[1-i],
			fmt.Sprintf("switch port %s (endpoint %s) to endpoint %s", s.PortName(i), s.names[i], s.names[1-i]))
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
// the transports (the endpoints stay connected): frames delayed or held
// under the old plan are dropped unrecorded, the old capture is closed,
// the counters and the plan's clock restart at zero. It returns the old
// capture's first error. rnd nil uses a fixed seed.
func (s *Switch) Reset(plan *faults.Plan, rnd *rand.Rand, capturePath string) error {
	if plan != nil {
		if err := plan.Validate(); err != nil {
			return fmt.Errorf("rswitch: plan: %w", err)
		}
	}
	if rnd == nil {
		rnd = sim.NewSeeds(1).Stream("faults")
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return errors.New("rswitch: switch closed")
	}
	s.stopTimers()
	s.held = [2][]heldFrame{}
	err := s.capErr
	s.capErr = nil
	if s.capw != nil {
		if cerr := s.capw.Close(); err == nil {
			err = cerr
		}
	}
	s.cfg.Plan, s.cfg.Rand = plan, rnd
	s.inj = faults.NewInjector(plan, rnd)
	clear(s.notes)
	s.stats = Stats{}
	s.start = time.Now()
	s.last = time.Time{}
	s.held0, s.heldAt, s.heldFor, s.judged = time.Time{}, 0, 0, 0
	if cerr := s.openCapture(capturePath, plan); err == nil {
		err = cerr
	}
	return err
}

func (s *Switch) stopTimers() {
	for _, t := range s.timers {
		t.Stop()
	}
	s.timers = nil
}

// planTime is the plan's clock at wall time now. The caller holds s.mu.
func (s *Switch) planTime(now time.Time) sim.Time {
	if !s.held0.IsZero() {
		return s.heldAt
	}
	return sim.Time(now.Sub(s.start) - s.heldFor)
}

// PlanTime returns the plan's clock: the wall time since New or Reset,
// less the time it was held.
func (s *Switch) PlanTime() sim.Time {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.planTime(time.Now())
}

// Hold stops the plan's clock at t, or at the time it has reached if
// that is earlier, but never before a frame already judged (the clock
// does not go back), until Release. The conformance rig holds it while a
// step due at t is typed on a guest's console and done: in the
// simulation a step takes no time, so the frames it makes must be judged
// at t however long the console takes on a busy host.
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
// since New or Reset).
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

// Threads returns the IDs of the OS threads that receive and forward
// the frames (none where gettid gives 0).
func (s *Switch) Threads() []int {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := []int{} // not nil: the conformance rig reads nil as all threads
	for _, t := range s.tids {
		if t != 0 {
			out = append(out, t)
		}
	}
	return out
}

// LocalAddr returns the address side i's transport listens on (0: A, 1:
// B), where that side's endpoint sends; the zero value for a transport
// with no address (AF_PACKET).
func (s *Switch) LocalAddr(i int) netip.AddrPort {
	if t, ok := s.tr[i].(interface{ LocalAddr() netip.AddrPort }); ok {
		return t.LocalAddr()
	}
	return netip.AddrPort{}
}

// PortName names side i's port in the capture: its address, or its
// transport's type.
func (s *Switch) PortName(i int) string {
	if a := s.LocalAddr(i); a.IsValid() {
		return a.String()
	}
	return fmt.Sprintf("%T", s.tr[i])
}

// Names returns the endpoints' names, A's first: the columns of a
// ladder drawn from the switch's trace (ladder.Options.Nodes).
func (s *Switch) Names() []string { return s.names[:] }

// Stats returns the counters so far.
func (s *Switch) Stats() Stats {
	s.mu.Lock()
	defer s.mu.Unlock()
	st := s.stats
	st.TxEvictions = s.inj.TxEvictions()
	return st
}

// Hits returns how many times rule (1-based, as in Verdict.Rule) acted.
func (s *Switch) Hits(rule int) uint64 {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.inj.Hits(rule)
}

// Close stops the switch and closes both transports: frames still
// delayed or held are dropped unrecorded, the capture is flushed and
// closed. It returns the first error of the capture or of a receive.
func (s *Switch) Close() error {
	s.mu.Lock()
	if s.closed {
		s.mu.Unlock()
		return nil
	}
	s.closed = true
	s.stopTimers()
	s.mu.Unlock()
	for _, t := range s.tr {
		t.Close()
	}
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

// serve receives the frames side i's endpoint sends and forwards them to
// the other side.
func (s *Switch) serve(i int) {
	// On a thread of its own, whose waits for a CPU the conformance rig
	// measures (Threads) apart from the rest of the test process.
	runtime.LockOSThread()
	s.mu.Lock()
	s.tids[i] = gettid()
	s.mu.Unlock()
	msgs := make([]realnet.Msg, s.tr[i].BatchSize())
	for k := range msgs {
		msgs[k].Buf = make([]byte, realnet.BufLen)
	}
	for {
		n, err := s.tr[i].Receive(msgs)
		if err != nil {
			s.mu.Lock()
			if !s.closed && s.readErr == nil {
				s.readErr = fmt.Errorf("rswitch: endpoint %s: %w", s.names[i], err)
			}
			s.mu.Unlock()
			return
		}
		s.mu.Lock()
		for k := range n {
			s.handle(i, msgs[k].Buf[:msgs[k].N])
		}
		s.mu.Unlock()
	}
}

// handle judges one frame from side i and carries out the verdict, as
// sim/fabric's enter does on a frame's first hop. The frame is the
// receive buffer's: it is copied when it must outlive the call. The
// caller holds s.mu.
func (s *Switch) handle(i int, frame []byte) {
	if s.closed {
		return
	}
	s.stats.Frames++
	s.last = time.Now()
	if len(frame) < wire.EthernetLen {
		// Only a whole-frame transport (a VM's link, an interface) can
		// deliver one; nothing in it can be judged or forwarded.
		s.dropRunt(s.planTime(s.last), i, frame, faults.Verdict{}, 0)
		return
	}
	var roce *wire.Packet
	var icrcErr uint32
	if s.pkt.DecodeHeaders(frame) == nil {
		roce = &s.pkt
		s.stats.RoCE++
		if icrcErr = roce.ICRCError(); icrcErr != 0 {
			s.stats.BadICRC++
		}
	}
	if s.cfg.Endpoints != nil && !s.translate(i, roce, icrcErr) {
		s.stats.Foreign++
		return
	}
	hop := faults.Hop{Link: s.link, From: s.names[i], To: s.names[1-i], First: true}
	if roce != nil && icrcErr == 0 {
		// Only frames an endpoint would accept are numbered: the
		// injector keeps a window of counters per (QP, direction), and
		// garbage with random QPNs and PSNs would otherwise grow it
		// without bound (a flood of it grew the heap by some 30 bytes a
		// frame). A RoCE endpoint (rxe, the model) only sends good
		// ICRCs, as every frame in a simulation has on its first hop,
		// so the plan's tx= keys see the same numbers as there.
		hop.Tx = s.inj.CountTx(hop, roce)
	}
	now := s.planTime(s.last)
	s.judged = now
	was := fabric.WasOf(roce) // before a rule rewrites the frame in place
	v := s.inj.Decide(now, hop, frame, roce)
	switch v.Action {
	case faults.Pass:
		s.send(i, frame, "", hop.Tx)
	case faults.Drop:
		s.stats.Dropped++
		s.record(i, frame, s.note(v, 0))
		s.trace(now, i, frame, "frame-drop", "", s.note(v, 0), hop.Tx, sim.DropFault.Field(), ruleField(v))
	case faults.Duplicate:
		s.stats.Duplicated += uint64(v.Copies)
		s.trace(now, i, frame, "frame-dup", "", s.note(v, 0), hop.Tx, ruleField(v))
		s.send(i, frame, s.note(v, 0), hop.Tx)
		for c := range v.Copies {
			s.send(i, frame, s.note(v, c+1), hop.Tx)
		}
	case faults.Delay:
		s.stats.Delayed++
		why := v.String()
		s.trace(now, i, frame, "frame-delay", "", why, hop.Tx, ruleField(v))
		// A copy of its own for the closure: were frame itself captured,
		// it would live on the heap for every frame, delayed or not.
		late := append([]byte(nil), frame...)
		tx := hop.Tx
		t := time.AfterFunc(time.Duration(v.Delay), func() {
			s.mu.Lock()
			defer s.mu.Unlock()
			if !s.closed {
				s.send(i, late, why, tx)
			}
		})
		s.timers = append(s.timers, t)
	case faults.Reorder:
		s.stats.Delayed++
		s.trace(now, i, frame, "frame-hold", "", v.String(), hop.Tx, ruleField(v))
		s.held[i] = append(s.held[i], heldFrame{frame: append([]byte(nil), frame...), after: v.Hold, comment: v.String()})
	case faults.Truncate:
		frame = frame[:min(len(frame), max(v.Len, 0))]
		if len(frame) < wire.EthernetLen {
			// Cut inside its Ethernet header: the far side's switch
			// (or NIC) would discard it as a runt, so it goes no
			// further than here.
			s.stats.Altered++
			s.traceAlter(now, i, frame, v, hop.Tx, was)
			s.dropRunt(now, i, frame, v, hop.Tx)
			return
		}
		fallthrough
	case faults.Corrupt, faults.Rewrite:
		s.stats.Altered++
		s.traceAlter(now, i, frame, v, hop.Tx, was)
		s.send(i, frame, s.note(v, 0), hop.Tx)
	default:
		panic(fmt.Sprintf("rswitch: fault verdict with unknown action %d", v.Action))
	}
}

// dropRunt drops frame, from side i and shorter than an Ethernet header,
// as a switch drops a runt: counted, captured and traced with why (after
// verdict v, if a truncate rule cut it: v.Rule > 0). The comment is made
// once per rule and length and kept, as note does: a VM sending runts
// costs no allocation per frame. The caller holds s.mu.
func (s *Switch) dropRunt(now sim.Time, i int, frame []byte, v faults.Verdict, tx int) {
	s.stats.Runts++
	k := noteKey{rule: v.Rule, action: v.Action, runt: len(frame) + 1}
	why, ok := s.notes[k]
	if !ok {
		why = "dropped: a runt of " + strconv.Itoa(len(frame)) + " bytes, shorter than an Ethernet header"
		if v.Rule > 0 {
			why = s.note(v, 0) + "; " + why
		}
		s.notes[k] = why
	}
	s.record(i, frame, why)
	s.trace(now, i, frame, "frame-drop", "", why, tx, sim.DropRunt.Field())
}

// note returns the capture comment of verdict v (copy 0) or of its
// copy-th extra copy, made once per rule and kept: the text depends only
// on the rule, so a rule acting on every frame of a long run costs no
// allocation per frame (issue 17). The caller holds s.mu.
func (s *Switch) note(v faults.Verdict, copy int) string {
	k := noteKey{rule: v.Rule, action: v.Action, copy: copy, copies: v.Copies}
	if n, ok := s.notes[k]; ok {
		return n
	}
	n := v.String()
	if copy > 0 {
		n = v.CopyNote(copy)
	}
	s.notes[k] = n
	return n
}

// translate makes a RoCE v2 frame from UDP endpoint i, addressed to the
// stand-in of the other endpoint, one from the stand-in of endpoint i to
// the other endpoint, as a router with two faces would forward it if it
// also rewrote addresses: the other endpoint sees its peer at the
// address it sends to. The ICRC (IBTA vol. 1 Annex A17.8) covers both
// addresses, so it is recomputed, keeping whatever error the frame came
// with: the CRC is linear, so the error (received XOR computed) carries
// over to the new headers unchanged (icrcErr, the frame's ICRCError), and
// a frame that failed the check at the sender's peer fails it at the
// other endpoint too. It reports
// false for a frame from another address than endpoint i's (or not RoCE
// v2: nothing else reaches a UDP transport). The caller holds s.mu.
func (s *Switch) translate(i int, p *wire.Packet, icrcErr uint32) bool {
	from, to := s.cfg.Endpoints.A, s.cfg.Endpoints.B
	if i == 1 {
		from, to = to, from
	}
	if p == nil || p.Src() != from {
		return false
	}
	src := s.LocalAddr(1 - i).Addr()
	if p.IPv6 != nil {
		s16, d16 := src.As16(), to.As16()
		copy(p.IPv6[8:24], s16[:])
		copy(p.IPv6[24:40], d16[:])
	} else {
		s4, d4 := src.As4(), to.As4()
		copy(p.IPv4[12:16], s4[:])
		copy(p.IPv4[16:20], d4[:])
		p.IPv4.SetChecksum()
	}
	p.UpdateICRCWithError(icrcErr)
	return true
}

// send sends frame to the endpoint opposite side i, records it as sent,
// then releases the frames held for reordering that were waiting for it.
// The caller holds s.mu.
func (s *Switch) send(i int, frame []byte, comment string, tx int) {
	s.out[0] = frame
	// A UDP transport rewrites the outer headers it sends with in place:
	// record after sending, so the capture shows the wire.
	if _, err := s.tr[1-i].Send(s.out[:]); err != nil {
		s.stats.SendErrors++
	} else {
		s.stats.Forwarded++
	}
	s.out[0] = nil
	s.record(i, frame, comment)
	if s.cfg.Trace.Enabled() {
		now := s.planTime(time.Now())
		s.trace(now, i, frame, "frame-tx", comment, "", tx)
		s.trace(now, i, frame, "frame-rx", "", "", tx)
	}
	if len(s.held[i]) == 0 {
		return
	}
	keep := s.held[i][:0]
	var due []heldFrame
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
		s.send(i, h.frame, h.comment, tx)
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

// trace adds a frame event of kind for a frame crossing from side i, as
// sim/fabric traces one on a link (fabric.FrameEvent), so that package
// ladder draws the switch's frames as it draws the fabric's: frame-tx at the sender,
// frame-rx at the receiver, the fault kinds at the sender. The caller
// holds s.mu.
func (s *Switch) trace(now sim.Time, i int, frame []byte, kind sim.Kind, note, why string, tx int, extra ...sim.Field) {
	if !s.cfg.Trace.Enabled() {
		return
	}
	node := s.names[i]
	if kind == "frame-rx" {
		node = s.names[1-i]
	}
	e := fabric.FrameEvent(now, node, kind, s.names[i]+"->"+s.names[1-i], frame, tx, note, why)
	e.Fields = append(e.Fields, extra...)
	s.cfg.Trace.Add(e)
}

// traceAlter traces a frame verdict v altered, with its identity from
// before (was_qpn, was_op, was_psn), as the fabric does: the ladder marks
// the frame it altered by it, not by guessing among the frames in
// flight.
func (s *Switch) traceAlter(now sim.Time, i int, frame []byte, v faults.Verdict, tx int, was fabric.Was) {
	if s.cfg.Trace.Enabled() {
		s.trace(now, i, frame, "frame-alter", "", s.note(v, 0), tx, was.Fields([]sim.Field{ruleField(v)})...)
	}
}

func ruleField(v faults.Verdict) sim.Field {
	return sim.Field{Key: "rule", Value: strconv.Itoa(v.Rule)}
}

// VMLinks opens the two datagram links of a switch between two QEMU VMs
// (-netdev dgram, as the conformance harness boots them) on host: side i
// listens on ports[i] (0 picks a free port: that VM's remote port, see
// LocalAddr) and delivers to peers[i] (that VM's local port). Frames
// leave through the other side's socket, so each VM sees them come from
// the address it sends to.
func VMLinks(host netip.Addr, ports, peers [2]int) (a, b *realnet.Dgram, err error) {
	var d [2]*realnet.Dgram
	for i := range 2 {
		if peers[i] <= 0 || peers[i] > 0xFFFF || ports[i] < 0 || ports[i] > 0xFFFF {
			err = fmt.Errorf("rswitch: VM %c: port %d, peer port %d", 'a'+i, ports[i], peers[i])
		} else {
			d[i], err = realnet.NewDgram(realnet.DgramConfig{Local: netip.AddrPortFrom(host, uint16(ports[i])),
				Peer: netip.AddrPortFrom(host, uint16(peers[i]))})
		}
		if err != nil {
			if i == 1 {
				d[0].Close()
			}
			return nil, nil, err
		}
	}
	return d[0], d[1], nil
}
