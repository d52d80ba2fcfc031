package verbs

import (
	"fmt"
	"net/netip"

	"github.com/rocesim/rocesim/faults"
	"github.com/rocesim/rocesim/internal/ntcopy"
	"github.com/rocesim/rocesim/nic"
	"github.com/rocesim/rocesim/sim"
	"github.com/rocesim/rocesim/sim/fabric"
	"github.com/rocesim/rocesim/wire"
)

// WorldConfig describes a simulated cluster.
type WorldConfig struct {
	// Seed is the master seed: the same program and seed give the same run.
	Seed uint64
	// Plan is the fault plan the fabric applies; nil for none.
	Plan *faults.Plan
	// Trace collects the structured event log; nil for none.
	Trace *sim.Trace
	// Capture receives every frame (a wire/capture writer); nil for none.
	Capture fabric.Tap
	// Profile is the NIC behaviour profile (rxe by default).
	Profile nic.Profile
	// MaxQP, if not 0, is every device's max_qp in place of rxe's
	// 1,048,560: more QPs on one device than a real rxe device allows,
	// only when asked for (nic.Config.MaxQP; AddHost panics on a value
	// above nic.MaxQPLimit or below 0).
	MaxQP int
	// Link is the configuration of every link; zero means
	// fabric.DefaultLinkConfig (100 Gb/s, 1 µs, MTU 1500: path MTU 1024).
	Link fabric.LinkConfig
	// TestHooks plants deliberate bugs in every device (nic.TestHooks),
	// for tests of the invariant swarm; nil in every real use.
	TestHooks *nic.TestHooks
	// Observe, if set, sees every frame the fabric records
	// (fabric.Config.Observe): a test's frame log. The record, its
	// frame and its comment are valid during the call only: copy what
	// you keep (verbstest's frame log does).
	Observe func(*fabric.FrameRecord)
	// CountTx numbers transmissions even without a plan, so a plan set
	// later with SetPlan can match tx= (fabric.Config.CountTx).
	CountTx bool
	// MaxEvents bounds the events Run, RunFor, RunUntil and RunTo may
	// fire in all (the scheduler's event limit); 0 leaves
	// sim.DefaultEventLimit. A run that spends it ends with a
	// *RunawayError that says what kept it going.
	MaxEvents uint64
	// Progress, if set, is called every 65536 events of a run: a driver
	// that shows progress (it may read the wall clock; the world does not).
	Progress func(Progress)
	// QPName, if set, names a QP in a RunawayError's message ("a.q").
	QPName func(host string, qpn uint32) string
	// LinkLocalGID gives each host the IPv6 link-local address the
	// kernel derives from its MAC (LinkLocal) instead of fd00::i, so
	// GID 0 is what it is on real rxe (the drop-in library's devices).
	LinkLocalGID bool
	// Annotate makes the devices note why each frame exists even without
	// a Capture (nic.Config.Annotate): for a host whose frames another
	// fabric captures (AddPortHost).
	Annotate bool
}

// World is a simulated RDMA cluster: hosts with one RoCE device each, the
// fabric between them and the clock. It is not safe for concurrent use; a
// test drives it from one goroutine, and virtual time only moves inside
// Run, RunFor and RunUntil.
type World struct {
	cfg   WorldConfig
	sched *sim.Scheduler
	fab   *fabric.Fabric
	hosts []*Host
	nbr   map[netip.Addr]neighbour // every host's GIDs (unmapped) -> its MAC and device; looked up only
	sw    *fabric.Switch
	watch stallWatch
	// part is, in a Cluster, 1 + the world's index among its parts (0:
	// a world of its own), and cluster that cluster: the cluster alone
	// runs it and changes its topology (partOnly).
	part    int
	cluster *Cluster
	// peers are the hosts the stall watch knows, by their index there
	// (Host.ix): the world's own, and in a part of a Cluster the
	// stand-ins for the hosts of the other parts.
	peers []peer
	// streaming is how many of hosts write what they receive past the
	// caches (streamLarge).
	streaming int
}

// peer is a host the stall watch can name: one of the world's (h), or a
// stand-in for a host in another part of a cluster (h nil, its GIDs
// copied: that host's device belongs to another goroutine).
type peer struct {
	name string
	node int32 // its fabric node
	h    *Host
	gids []netip.Addr
}

// NewWorld returns an empty world at time 0.
func NewWorld(cfg WorldConfig) *World { return newWorld(cfg, "faults") }

// newWorld is NewWorld with the fault plan's random numbers drawn from the
// master seed's stream named faults (a cluster's parts each have their
// own).
func newWorld(cfg WorldConfig, faults string) *World {
	if cfg.Link.Bandwidth == 0 {
		cfg.Link = fabric.DefaultLinkConfig()
	}
	s := sim.NewScheduler()
	if cfg.MaxEvents != 0 {
		s.SetEventLimit(cfg.MaxEvents)
	}
	w := &World{cfg: cfg, sched: s, nbr: map[netip.Addr]neighbour{}, watch: stallWatch{reqIdx: map[uint64]int32{}, rnrIdx: map[uint64]int32{},
		hostIx: map[string]int32{}}}
	w.fab = fabric.New(fabric.Config{Sched: s, Trace: cfg.Trace, Tap: cfg.Capture, Plan: cfg.Plan,
		Rand: sim.NewSeeds(cfg.Seed).Stream(faults), LinkHook: w.linkChanged,
		ObserveFirst: w.watch.frame, Observe: cfg.Observe, CountTx: cfg.CountTx})
	return w
}

// Host is a machine in the world with one RDMA device ("rxe0"). It is
// the device's driver on the simulated fabric: it feeds the device its
// inputs and applies the batches it hands back (pump).
type Host struct {
	// The fields every pump reads come first, within 32 bytes: one
	// cache line to miss, not three, when the host's turn comes round
	// among thousands.
	dev *nic.Device
	due sim.Time // when timer fires; sim.Never if it is not set
	// pumping is set while pump applies a batch; a frame the port reports
	// gone meanwhile is counted in txLater and told to the device after
	// the batch, so the device is never re-entered.
	txLater int
	pumping bool

	w      *World
	name   string
	node   *fabric.Node
	Dev    *Device
	timer  sim.Timer
	cqs    map[*nic.CQ]*CQ       // the live CQs opened on this host, to take channel events back (looked up, never iterated)
	events queue[nic.AsyncEvent] // asynchronous events for GetAsyncEvent
	unsent uint64                // frames that could not be put on the port
	ix     int32                 // the host's index in World.hosts
	// onMAD takes the MADs QP1 received (SetMADHandler); nil drops them.
	onMAD func(now sim.Time, in *nic.MADIn)
	// out, if set, takes the device's frames instead of the host's
	// port on this world's fabric (AddPortHost).
	out func(frame, note []byte)
	// loops holds the frames the device sent to a multicast group it is
	// in itself, each received by it in turn (loopBack); spare keeps
	// their storage.
	loops queue[[]byte]
	spare [][]byte
	// wrs is the storage of the device's form of the WRs PostSend is
	// given, kept for the next post: a list longer than PostSend's own
	// buffer of 8 would otherwise allocate at every post.
	wrs []nic.SendWR
}

// fireLoop is the argument of the event that gives the device one of its
// own multicast frames back (Host.Fire).
const fireLoop = 1

// MinLinkMTU is the smallest link (IP) MTU a host can run RoCE v2 over:
// the smallest path MTU, 256, plus the most a packet carries besides its
// payload (AddHost picks the largest path MTU that fits the link's).
const MinLinkMTU = 256 + wire.MaxIPv4Overhead

// AddHost adds a host. Host i (from 1) gets the addresses HostAddrOf(i)
// (MAC 02:00:00:00:00:0i, IPv4 10.0.0.i and IPv6 fd00::i for i up to
// 254); every host knows every other's MAC (no ARP is simulated).
func (w *World) AddHost(name string) *Host {
	if w.cluster != nil {
		// A part's host is the cluster's, numbered among all of them.
		h, err := w.cluster.AddHostIn(w.part-1, name)
		if err != nil {
			panic(err)
		}
		return h
	}
	i := len(w.hosts) + 1
	h := w.addHost(name, w.hostAddr(i), i)
	w.addNeighbours(h)
	w.index(h)
	return h
}

// hostAddr is the addresses AddHost gives the i-th host: HostAddrOf, with
// the link-local IPv6 address under WorldConfig.LinkLocalGID.
func (w *World) hostAddr(i int) HostAddr {
	a := HostAddrOf(i)
	if w.cfg.LinkLocalGID {
		a.IPv6 = LinkLocal(a.MAC)
	}
	return a
}

// HostAddr is a host's addresses: its MAC, and the IPv4 and IPv6
// addresses its GIDs are made of (sim/fabric.PortConfig's).
type HostAddr struct {
	MAC  wire.MAC
	IPv4 netip.Addr
	IPv6 netip.Addr
}

// port is the fabric port that has the addresses a.
func (a HostAddr) port() fabric.PortConfig {
	return fabric.PortConfig{MAC: a.MAC, IPv4: a.IPv4, IPv6: a.IPv6}
}

// MaxHosts is the number of hosts HostAddrOf numbers: the index fills
// the low 24 bits of the IPv4 address in 10.0.0.0/8.
const MaxHosts = 1<<24 - 1

// HostAddrOf is the i-th host's addresses (i from 1 to MaxHosts): i,
// big-endian, in the low bytes of MAC 02:00:00:00:00:00, of IPv4
// 10.0.0.0 and of IPv6 fd00::. Hosts 1 to 254 keep the one-byte numbers
// every golden was made with (02:00:00:00:00:0i, 10.0.0.i, fd00::i);
// host 255 gets 02:00:00:00:00:ff, 10.0.0.255 and fd00::ff, host 256
// 02:00:00:00:01:00, 10.0.1.0 and fd00::100, host 1024
// 02:00:00:00:04:00, 10.0.4.0 and fd00::400. Addresses that end in .0
// or .255 are ordinary host addresses here: the simulated fabric routes
// by MAC and the hosts treat 10.0.0.0/8 as one subnet, so nothing makes
// them a network or broadcast address.
func HostAddrOf(i int) HostAddr {
	if i < 1 || i > MaxHosts {
		panic(fmt.Sprintf("verbs: host index %d outside 1..%d", i, MaxHosts))
	}
	b2, b1, b0 := byte(i>>16), byte(i>>8), byte(i)
	return HostAddr{
		MAC:  wire.MAC{0x02, 0, 0, b2, b1, b0},
		IPv4: netip.AddrFrom4([4]byte{10, b2, b1, b0}),
		IPv6: netip.AddrFrom16([16]byte{0xfd, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, b2, b1, b0}),
	}
}

// AddPortHost adds a host whose port is not on this world's fabric but
// on a fabric its driver reaches (procfabric: another process's daemon).
// Its device's frames go to send, with the note for the capture, at the
// world's current time; the driver feeds the device what reaches the
// port with Receive and reports each frame the port finished with
// TxDone, at the world's time, which it keeps in step with the outer
// fabric's (RunTo). index (from 1) is the node's number on that fabric:
// it places the device's simulated memory as AddHost's i-th host's.
// neighbours are the other nodes' addresses: ARP is not simulated.
func (w *World) AddPortHost(name string, self HostAddr, index int, neighbours []HostAddr, send func(frame, note []byte)) *Host {
	if err := w.partOnly("AddPortHost"); err != nil {
		panic(err)
	}
	h := w.addHost(name, self, index)
	h.out = send
	w.addNeighbours(h)
	for _, n := range neighbours {
		if n.IPv6.IsValid() {
			h.dev.AddNeighbour(n.IPv6, n.MAC)
		}
		if n.IPv4.IsValid() {
			h.dev.AddNeighbour(netip.AddrFrom16(n.IPv4.As16()), n.MAC)
		}
	}
	w.index(h)
	return h
}

// index gives h the next index in w.hosts, where the stall watch finds it
// by name. Two hosts of one name share the watch's index (the later
// one's): the watch cannot tell their flows apart.
func (w *World) index(h *Host) {
	w.hosts = append(w.hosts, h)
	h.ix = w.addPeer(peer{name: h.name, node: h.node.Index(), h: h})
}

// addPeer gives p the next index in the stall watch and returns it.
func (w *World) addPeer(p peer) int32 {
	ix := int32(len(w.peers))
	if _, dup := w.watch.hostIx[p.name]; dup {
		for _, o := range w.peers {
			if o.name == p.name {
				w.watch.setNodeHost(o.node, ix)
			}
		}
	}
	w.watch.hostIx[p.name] = ix
	w.watch.setNodeHost(p.node, ix)
	// The watch hears the node's frames as they are sent (heard); its
	// ObserveFirst (frame) must not count them again, and the fabric
	// need not build their records. The one place a node becomes heard.
	w.fab.Nodes()[p.node].SkipObserveFirst()
	w.peers = append(w.peers, p)
	w.streamLarge() // a host or a stand-in, one more node
	return ix
}

// addNeighbours enters h's GIDs in the world's neighbour table, which
// every device consults (nic.Config.Neighbours): one entry per GID in
// the world, where giving every device every other's would make N² (no
// ARP is simulated; each host knows every other's MAC).
func (w *World) addNeighbours(h *Host) { w.learn(h.dev.GIDs(), h.dev.Config().MAC, h.dev, true) }

// neighbour is an entry of the neighbour table: a GID's MAC, and the
// device that holds the GID, for the hints of the QPs that connect to
// it (peerHint). own: the device is this world's (in a cluster, not a
// stand-in's host in another part).
type neighbour struct {
	mac wire.MAC
	own bool
	dev *nic.Device
}

// learn enters the GIDs gids, all at MAC mac on device dev, in the
// neighbour table.
func (w *World) learn(gids []netip.Addr, mac wire.MAC, dev *nic.Device, own bool) {
	for _, g := range gids {
		w.nbr[g.Unmap()] = neighbour{mac: mac, own: own, dev: dev}
	}
}

// neighbour looks a GID up in the world's neighbour table.
func (w *World) neighbour(gid netip.Addr) (wire.MAC, bool) {
	n, ok := w.nbr[gid]
	return n.mac, ok
}

// peerHint is nic.Config.PeerHint: the hint of QP qpn on the device at
// gid. In a cluster a part asks another part's device only while no
// part runs (a verb between runs, on the program's goroutine); a QP
// connected during a step, from an event, to a host of another part
// goes without.
func (w *World) peerHint(gid netip.Addr, qpn uint32) nic.Hint {
	n, ok := w.nbr[gid]
	if !ok || n.dev == nil || !n.own && w.cluster != nil && w.cluster.stepping {
		return nic.Hint{}
	}
	return n.dev.QPHint(qpn)
}

// addHost makes a host and its device with the addresses a.
func (w *World) addHost(name string, a HostAddr, index int) *Host {
	h := &Host{w: w, name: name, due: sim.Never, cqs: map[*nic.CQ]*CQ{}}
	h.node = w.fab.AddNode(name, a.port())
	mtu := nic.MTU1024
	for m := nic.MTU4096; m >= nic.MTU256; m-- {
		if m.Bytes() <= w.cfg.Link.MTU-wire.MaxIPv4Overhead {
			mtu = m
			break
		}
	}
	h.dev = nic.New(nic.Config{Name: "rxe0", Node: name, MAC: a.MAC, IPv4: a.IPv4, IPv6: a.IPv6, Profile: w.cfg.Profile,
		PathMTUMax: mtu, AddrBase: nic.DefaultAddrBase + uint64(index)<<32,
		Annotate: w.cfg.Capture != nil || w.cfg.Annotate, TestHooks: w.cfg.TestHooks, Neighbours: w.neighbour, PeerHint: w.peerHint,
		MaxQP: w.cfg.MaxQP})
	h.dev.SetTrace(w.cfg.Trace)
	h.node.SetReceiver(h)
	h.node.SetTxDone(h.txDone)
	h.Dev = &Device{h: h}
	return h
}

// linkChanged tells the devices at the ends of a link that went down or up.
func (w *World) linkChanged(now sim.Time, link string, up bool) {
	for _, h := range w.hosts {
		if l := h.node.Port(0).Link(); l != nil && l.Name() == link {
			h.dev.SetPortState(now, up)
			h.pump()
		}
	}
}

// partOnly refuses what only a cluster may do to one of its parts (run
// it, change its links or its plan: the other parts must do the same at
// the same time), naming the call.
func (w *World) partOnly(call string) error {
	if w.part == 0 {
		return nil
	}
	return fmt.Errorf("verbs: %s: this world is part %d of a cluster: use the cluster's (Cluster.Run, RunTo, ConnectSwitch; the plan in ClusterConfig), which keep its parts in step", call, w.part-1)
}

// AddNeighbour tells the host's device which MAC a peer GID lives at: for
// a host added with AddPortHost whose port reaches peers the world does
// not know (the drop-in library on a real network).
func (h *Host) AddNeighbour(gid netip.Addr, mac wire.MAC) { h.dev.AddNeighbour(gid, mac) }

// HasNeighbour reports whether the host's device knows the MAC of addr
// (a GID or an IPv4 address): whether ARP would resolve it (rdmacm's
// address resolution asks).
func (h *Host) HasNeighbour(addr netip.Addr) bool { return h.dev.HasNeighbour(addr) }

// Name returns the host's name.
func (h *Host) Name() string { return h.name }

// Connect joins two hosts with a point-to-point link.
func (w *World) Connect(a, b *Host) error {
	if err := w.partOnly("Connect"); err != nil {
		return err
	}
	_, err := w.fab.Connect(a.name+"-"+b.name, a.node.Port(0), b.node.Port(0), w.cfg.Link)
	return err
}

// ConnectSwitch joins every host added so far to one switch named "sw".
func (w *World) ConnectSwitch() error {
	if err := w.partOnly("ConnectSwitch"); err != nil {
		return err
	}
	w.sw = w.fab.AddSwitch("sw", len(w.hosts))
	for i, h := range w.hosts {
		if _, err := w.fab.Connect(h.name+"-sw", h.node.Port(0), w.sw.Port(i), w.cfg.Link); err != nil {
			return err
		}
	}
	return nil
}

// SetPlan replaces the fault plan from now on (fabric.Fabric.SetPlan):
// a link the new plan holds down goes down now and its hosts see their
// port go down. It returns an error, and changes nothing, if the plan is
// invalid (faults.Plan.Validate).
func (w *World) SetPlan(p *faults.Plan) error {
	if err := w.partOnly("SetPlan"); err != nil {
		return err
	}
	return w.fab.SetPlan(p)
}

// Now returns the current virtual time.
func (w *World) Now() sim.Time { return w.sched.Now() }

// Scheduler returns the world's event queue, for workloads that schedule
// their own steps.
func (w *World) Scheduler() *sim.Scheduler { return w.sched }

// Fabric returns the fabric, for its link statistics.
func (w *World) Fabric() *fabric.Fabric { return w.fab }

// Run runs the simulation until nothing is left to happen (see RunTo for
// the event budget).
func (w *World) Run() error {
	if err := w.partOnly("Run"); err != nil {
		return err
	}
	return w.RunTo(sim.Never)
}

// RunFor runs the simulation for d of virtual time (see RunTo for the
// event budget).
func (w *World) RunFor(d sim.Duration) error { return w.RunTo(w.sched.Now().Add(d)) }

// RunUntil runs until cond holds (checked after every event) or nothing is
// left to happen; it reports whether cond held.
func (w *World) RunUntil(cond func() bool) (bool, error) {
	if err := w.partOnly("RunUntil"); err != nil {
		return false, err
	}
	for !cond() {
		if w.sched.Pending() == 0 {
			return false, nil
		}
		if err := w.RunTo(w.sched.NextAt()); err != nil {
			return false, err
		}
	}
	return true, nil
}

// Receive is the host's fabric receiver: frames go to its device.
func (h *Host) Receive(now sim.Time, port int, frame []byte) {
	h.dev.Receive(now, frame)
	h.pump()
}

// ReceiveSealed takes a frame another host's device built (send seals
// them) that no fault changed on the way: its device need not compute
// its ICRC again (fabric.SealedReceiver).
func (h *Host) ReceiveSealed(now sim.Time, port int, frame []byte) {
	h.dev.ReceiveSealed(now, frame)
	h.pump()
}

// TxDone tells the device of a host added with AddPortHost that its port
// finished (or dropped) one of its frames.
func (h *Host) TxDone(now sim.Time) { h.txDone(now) }

// txDone tells the device a frame it sent has left the port; while a
// batch is being applied (the port dropped a frame at once), after it.
func (h *Host) txDone(now sim.Time) {
	if h.pumping {
		h.txLater++
		return
	}
	h.dev.TxDone(now)
	h.pump()
}

// Fire runs the device's timers.
func (h *Host) Fire(now sim.Time, arg uint64) {
	if arg == fireLoop {
		f, _ := h.loops.pop()
		h.dev.Receive(now, f)
		h.spare = append(h.spare, f[:0])
		h.pump()
		return
	}
	h.due = sim.Never
	h.dev.Advance(now)
	h.pump()
}

// pump is the driver's loop (nic/ready.go): it applies the device's
// batch (frames onto the port, events into the host's queue, the timer
// at the deadline), then tells the device about the frames the port
// finished meanwhile, until a batch leaves nothing behind.
func (h *Host) pump() {
	if h.pumping {
		return // a verb called by the MAD handler below: the loop picks up its output (HasReady)
	}
	h.pumping = true
	// A batch has lists to apply only if the device gathered something
	// (HasReady, the flag Ready reads anyway); most pumps on a busy
	// fabric find nothing, and reading the empty lists would touch the
	// device's batch, cold among thousands of devices, for nothing.
	full := h.dev.HasReady()
	rd := h.dev.Ready()
	for {
		if full {
			for i := range rd.Frames {
				h.send(&rd.Frames[i])
			}
			for _, e := range rd.Events {
				h.events.push(e)
			}
			for i := range rd.MADs {
				if h.onMAD != nil {
					h.onMAD(h.w.sched.Now(), &rd.MADs[i])
				}
			}
		}
		if h.txLater == 0 && !h.dev.HasReady() {
			break
		}
		now := h.w.sched.Now()
		for ; h.txLater > 0; h.txLater-- {
			h.dev.TxDone(now)
		}
		full = h.dev.HasReady()
		rd = h.dev.Ready()
	}
	h.pumping = false
	if rd.Deadline != h.due {
		h.timer.Cancel()
		h.due = rd.Deadline
		if h.due != sim.Never {
			h.timer = h.w.sched.Schedule(h.due, h, 0)
		}
	}
}

// send puts a frame the device built on the host's port, with its note
// (the batch's bytes: the fabric copies them, as an outer port's sender
// must). PostSend refuses
// on a host with no link, so a frame that cannot leave (no link, no
// port) should not happen; if one does, it is lost as on a port that
// drops it, counted in Host.Unsent and traced, and the device is told it
// has gone (its count of frames in the port would otherwise stall the
// QP), never a panic.
func (h *Host) send(f *nic.OutFrame) {
	frame, note := f.Bytes, f.Note
	if h.dev.LoopsBack(frame) {
		h.loopBack(frame)
	}
	if h.out != nil {
		h.out(frame, note)
		return
	}
	// The device encoded the frame (wire.Encode), its ICRC with it: the
	// receiving device may take that ICRC on trust (ReceiveSealed).
	err := h.node.SendHinted(0, frame, note, fabric.Hint(f.Hint))
	if err == nil {
		if f.Round != 0 || f.RNRNAK {
			// What the stall watch hears of: a request the NIC resends,
			// or an RNR NAK (stallWatch.heard).
			sw := &h.w.watch
			sw.heard(sw.hostOf(h.node.Index()), sw.hostOf(h.node.Addressee(frame)), frame, f.Round, f.ConnectedAt, h.w.sched.Now())
		}
		return
	}
	h.unsent++
	now := h.w.sched.Now()
	if h.w.cfg.Trace.Enabled() {
		h.w.cfg.Trace.Add(sim.Event{Time: now, Node: h.name, Kind: "unsent", Fields: []sim.Field{{Key: "error", Value: err.Error()}}})
	}
	h.txLater++
}

// loopBack gives the device a copy of a frame it sends to a multicast
// group one of its own QPs is attached to, as an event at the same
// instant: on Linux the IP layer loops such a datagram back to its host
// (rdma_join_multicast has joined the group there), and rxe receives it
// like any other. The copy never crosses the fabric, so it is in no
// capture and meets no fault, as the kernel's loop is not on the wire.
func (h *Host) loopBack(frame []byte) {
	var buf []byte
	if n := len(h.spare); n > 0 {
		buf, h.spare = h.spare[n-1], h.spare[:n-1]
	}
	h.loops.push(append(buf, frame...))
	h.w.sched.Schedule(h.w.sched.Now(), h, fireLoop)
	if tr := h.w.cfg.Trace; tr.Enabled() {
		// The copy is on no link, so no frame-tx says it exists.
		var p wire.Packet
		if p.DecodeHeaders(frame) == nil {
			tr.Add(sim.Event{Time: h.w.sched.Now(), Node: h.name, Kind: "frame-loop", QPN: p.BTH.DestQP(), HasQPN: true,
				Fields: []sim.Field{{Key: "op", Value: p.BTH.Opcode().Info().Name}, {Key: "psn", Value: p.BTH.PSN().String()}}})
		}
	}
}

// TxSlack returns how many of the port's next tx-dones (TxDone) the
// host's device would take without doing anything but count them, at
// most limit (nic.Device.TxSlack): a driver whose port is a daemon's may
// let it hold that many back and deliver them late, in order, with the
// next input.
func (h *Host) TxSlack(limit int) int { return h.dev.TxSlack(limit) }

// RxSlack appends to b the frames the host's device would take without
// doing anything but place and count them (nic.Device.RxSlack: the
// middle packets of messages its QPs are receiving).
func (h *Host) RxSlack(b []wire.PacketRun) []wire.PacketRun { return h.dev.RxSlack(b) }

// Unsent returns how many frames the host's device built that could not
// be put on its port (see send): 0 unless something is misconfigured.
func (h *Host) Unsent() uint64 { return h.unsent }

// SetMADHandler makes fn the taker of every MAD the host's QP1 receives
// (a connection manager, package rdmacm, is the one user): fn is called
// from the host's event loop, in arrival order, and may send MADs and
// use verbs itself. in is valid only during the call.
func (h *Host) SetMADHandler(fn func(now sim.Time, in *nic.MADIn)) { h.onMAD = fn }

// SendMAD sends one 256-byte MAD from QP1 to QP1 of dst (the device's
// SendMAD: a RoCE v2 UD datagram with the GSI Q_Key).
func (h *Host) SendMAD(dst netip.Addr, mad []byte) error {
	if err := h.dev.SendMAD(h.w.sched.Now(), dst, mad); err != nil {
		return err
	}
	h.pump()
	return nil
}

// MADFrame appends to buf the frame SendMAD would send now for the same
// MAD, and returns it with its note, sending nothing (the device's
// MADFrame): what a process's CM leaves with the fabric to send if the
// process dies (procfabric's will).
func (h *Host) MADFrame(buf []byte, dst netip.Addr, mad []byte) ([]byte, string, error) {
	return h.dev.MADFrame(buf, dst, mad)
}

// GUID returns the device's node GUID, the CA GUID a CM puts in its
// messages (the EUI-64 of the MAC, as rxe derives it).
func (h *Host) GUID() uint64 { return h.dev.QueryDevice().NodeGUID }

// JoinGroup joins the host to the multicast group a at the IP level, as
// an IGMP join does (rdma_join_multicast makes one; package rdmacm's
// JoinMulticast calls this). Under the rxe profile a QP attached to a
// group (QP.AttachMcast) gets the group's datagrams only while its host
// has joined it, as on Linux; under the spec profile attaching is
// enough. Joins are counted: each LeaveGroup undoes one.
func (h *Host) JoinGroup(a netip.Addr) error { return h.dev.JoinGroup(a) }

// LeaveGroup undoes one JoinGroup of group a.
func (h *Host) LeaveGroup(a netip.Addr) { h.dev.LeaveGroup(a) }

// IPv4 returns the host's IPv4 address.
func (h *Host) IPv4() netip.Addr { return h.dev.Config().IPv4 }

// IPv6 returns the host's IPv6 address (fd00::i, or the link-local
// address under WorldConfig.LinkLocalGID).
func (h *Host) IPv6() netip.Addr { return h.dev.Config().IPv6 }

// GIDIndex returns the index in port 1's GID table of the GID of address
// a (an IPv4 address's GID is a mapped into IPv6), and whether the table
// has it: the sgid_index a connection from a uses.
func (h *Host) GIDIndex(a netip.Addr) (int, bool) {
	g := netip.AddrFrom16(a.As16())
	for i, x := range h.dev.GIDs() {
		if x == g {
			return i, true
		}
	}
	return 0, false
}

// World returns the world the host is in.
func (h *Host) World() *World { return h.w }

// queue is a FIFO whose storage grows by doubling and is reused, so a
// reader that keeps up stops allocating: a host's asynchronous events
// until the user reads them (ibv_get_async_event), the frames a device
// sends itself. Its length is a power of two, so positions wrap with a
// mask, not a division.
type queue[T any] struct {
	buf  []T
	head int
	n    int
}

// push appends v.
func (q *queue[T]) push(v T) {
	if q.n == len(q.buf) {
		// Full: unwrap into one twice the size, oldest first.
		grown := make([]T, max(8, 2*q.n))
		copy(grown[copy(grown, q.buf[q.head:]):], q.buf[:q.head])
		q.buf, q.head = grown, 0
	}
	q.buf[(q.head+q.n)&(len(q.buf)-1)] = v
	q.n++
}

// pop removes and returns the oldest entry; its slot is cleared, so the
// queue keeps no pointer the reader has taken.
func (q *queue[T]) pop() (T, bool) {
	var zero T
	if q.n == 0 {
		return zero, false
	}
	v := q.buf[q.head]
	q.buf[q.head] = zero
	q.head = (q.head + 1) & (len(q.buf) - 1)
	q.n--
	return v, true
}

// Seed returns the world's master seed (WorldConfig.Seed), from which
// components outside the world, such as a connection manager, derive
// their own random streams.
func (w *World) Seed() uint64 { return w.cfg.Seed }

// streamLarge makes the devices of a large world (fabric.Fabric.Large; a
// cluster's stand-ins count: its parts are as large as the world they
// cut) write the payloads they receive past the caches
// (nic.Device.SetStreamingWrites), from the host or stand-in that makes
// it large on (addPeer): its receive areas outgrow the caches
// (tools/scale: the alltoall at N = 64 and 256 takes the same time
// either way, N = 128 and 512 a few percent less streaming, N = 1024
// 12–18% less).
func (w *World) streamLarge() {
	if w.streaming == len(w.hosts) || !w.fab.Large() {
		return
	}
	for _, h := range w.hosts[w.streaming:] {
		h.dev.SetStreamingWrites(true)
	}
	w.streaming = len(w.hosts)
}

// fence ends a run (World.run): the non-temporal stores the run's
// frames and payloads were copied with (internal/ntcopy) become visible
// to every core. A variable for TestRunEndsFenced.
var fence = ntcopy.Fence
