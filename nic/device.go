package nic

import (
	"fmt"
	"net/netip"
	"syscall"
	"unsafe"

	"github.com/rocesim/rocesim/sim"
	"github.com/rocesim/rocesim/wire"
)

// A Device is driven from outside, raft-style:
//
//	dev.PostSend(now, qp, wrs)  // inputs: verbs,
//	dev.Receive(now, frame)     //         frames from the wire,
//	dev.Advance(now)            //         time reaching rd.Deadline,
//	dev.TxDone(now)             //         the port done with a frame
//	rd := dev.Ready()           // output: everything they caused (ready.go)
//	cq.Poll(wcs)                // the application takes its completions
//
// It never reads a clock, starts a goroutine or touches a socket, and it
// never calls its driver: nothing re-enters it.

// Profile selects whose behaviour the device follows where real rxe and
// the IBTA text differ (the list of differences is in doc.go).
type Profile uint8

// Behaviour profiles.
const (
	ProfileRXE  Profile = iota // what Linux rxe does (the default)
	ProfileSpec                // what IBTA vol. 1 says
)

// String returns the name of the Profile, for traces and messages.
func (p Profile) String() string {
	if p == ProfileSpec {
		return "spec"
	}
	return "rxe"
}

// Config describes a device and its one port.
type Config struct {
	Name string // e.g. "rxe0"
	// Node names the machine the device sits in, for trace events
	// (several hosts each have an "rxe0"); empty means Name.
	Node    string
	MAC     wire.MAC
	IPv4    netip.Addr // zero if none
	IPv6    netip.Addr // zero if none
	Profile Profile
	// PathMTUMax is the largest path MTU the port allows (the Ethernet
	// MTU's): MTU1024 on a 1500-byte link, as rxe reports.
	PathMTUMax MTU
	// AddrBase is where the device starts allocating MR addresses; 0
	// picks DefaultAddrBase. Give each device its own for readable traces.
	AddrBase uint64
	// Annotate gives every frame a note saying what it is ("wr 2 SEND,
	// packet 1 of 4", "ACK of PSN 4"), for captures a person reads.
	// Notes cost an allocation per frame, so it is off unless asked for.
	// Frames that exist because of an error or a recovery (NAKs, RNR
	// NAKs, re-acknowledged duplicates, retransmissions) get their note
	// also when the device has a trace (SetTrace), for the trace's reader.
	Annotate bool
	// TestHooks plants deliberate bugs, for tests of the tests (see
	// TestHooks); nil in every real use.
	TestHooks *TestHooks
	// CompVectors is the number of completion vectors
	// (ibv_context.num_comp_vectors; rxe has one per possible CPU); 0
	// means 1, a one-CPU host. CreateCQ refuses a comp_vector outside
	// 0..CompVectors-1, as the kernel does.
	CompVectors int
	// Neighbours, if set, is asked for the MAC of a GID the device's own
	// table (AddNeighbour) lacks: a world of N hosts shares one table of
	// N entries rather than giving each device N (issue 20: no O(N²)
	// neighbour tables). It must answer the same for a GID every time.
	Neighbours func(gid netip.Addr) (wire.MAC, bool)
	// PeerHint, if set, is asked when an RC or UC QP is connected
	// (modify_qp to RTR), and by any later modify_qp that sets its
	// address vector or destination QPN, for the hint of its
	// destination, QP qpn at GID gid (that device's QPHint; zero if it
	// does not know): every frame the QP sends then carries it
	// (OutFrame.Hint). A wrong or stale answer changes nothing but speed.
	PeerHint func(gid netip.Addr, qpn uint32) Hint
	// MaxQP, if not 0, is the device's max_qp in place of rxe's
	// 1,048,560 (RxeAttr), for a world that needs more QPs on one device
	// than a real rxe device allows, or fewer (to meet the limit sooner).
	// It is what QueryDevice reports and what create_qp enforces; QPNs
	// then run up to MaxQP+16 where they would stop at rxe's top
	// (0x100000), within the 24 bits a QPN has: New panics on a MaxQP
	// above MaxQPLimit, or below 0.
	MaxQP int
}

// MaxQPLimit is the largest Config.MaxQP: QPNs then run up to 0xFFFFFE,
// the largest a QPN's 24 bits give but 0xFFFFFF, which is no QP's number
// (IBTA's multicast QPN), as rxe's run up to its max_qp + 16.
const MaxQPLimit = 0xFFFFFE - rxeMinQPIndex

// DeviceAttr are the device's limits (ibv_device_attr), rxe's values.
// Every Max… count is enforced as reported: creating one object more than
// the maximum fails (see pool), counting the objects the kernel itself
// holds on an rxe device, as rxe's pools do.
type DeviceAttr struct {
	FWVer           string
	NodeGUID        uint64
	MaxMRSize       uint64
	MaxQP           int
	MaxQPWR         int
	MaxSGE          int
	MaxCQ           int
	MaxCQE          int
	MaxMR           int
	MaxPD           int
	MaxQPRdAtom     int
	MaxQPInitRdAtom int
	MaxSRQ          int
	MaxSRQWR        int
	MaxSRQSGE       int
	MaxAH           int
	MaxMW           int
	// Multicast: groups, QPs a group, attachments in all (mcast.go).
	MaxMcastGrp           int
	MaxMcastQPAttach      int
	MaxTotalMcastQPAttach int
	MaxInlineData         int
	PhysPortCnt           int
	AtomicCap             string
}

// DefaultAddrBase is where a device's first MR lives unless
// Config.AddrBase says otherwise. It looks like a user-space heap address
// on x86-64, so traces read like real ones.
const DefaultAddrBase = 0x0000_5600_0000_0000

// RxeAttr returns the attributes of an rxe device (what QueryDevice of a
// new Device reports but for its NodeGUID), for checks made before there
// is a device, such as a scenario file's.
func RxeAttr() DeviceAttr { return rxeAttr }

// What the kernel holds on every rxe device before a user opens it, and
// what `rdma resource show` lists in the conformance guest ("pd 1 cq 1
// qp 1"): ib_mad's PD, CQ and GSI QP (QP1) of port 1. ib_alloc_pd also
// registers a DMA MR for that PD (rxe has no local DMA L_Key; restrack
// does not list it, the PD's local_dma_lkey shows it). rxe's pools count
// them, so a user gets one PD, CQ, QP and MR fewer than reported; the
// model holds the same.
const (
	kernelPDs = 1
	kernelCQs = 1
	kernelQPs = 1
	kernelMRs = 1
)

// gsiQPIndex is the pool index of the GSI QP: the first QP index, taken
// when the device registers. Its QPN is 1 (rxe_qp_init_misc), so user QPs
// start at index, and QPN, 0x11, as the real captures show.
const gsiQPIndex = rxeMinQPIndex

// pool counts the live objects of one kind against the device's limit, as
// rxe_pool.c's num_elem against max_elem. take fails with EINVAL at the
// limit: __rxe_add_to_pool returns -EINVAL there (err_cnt), and the
// verbs pass it up unchanged.
type pool struct {
	live int // including what the kernel holds
	max  *int
}

// take counts one more object, or fails naming the verb and the limit.
func (p *pool) take(verb, limit string) error {
	if p.live >= *p.max {
		return errno(syscall.EINVAL, "%s: the device's %s (%d) reached, counting what the kernel holds as rxe does", verb, limit, *p.max)
	}
	p.live++
	return nil
}

// put counts one object fewer.
func (p *pool) put() { p.live-- }

// PortAttr describe the port (ibv_port_attr).
type PortAttr struct {
	State      string // "ACTIVE" or "DOWN"
	MaxMTU     MTU
	ActiveMTU  MTU
	GIDTblLen  int
	PKeyTblLen int
	LinkLayer  string // "Ethernet"
}

// AsyncEvent is an asynchronous event (ibv_async_event).
type AsyncEvent struct {
	Type AsyncEventType
	QP   *QP  // for QP events
	CQ   *CQ  // for CQ_ERR
	SRQ  *SRQ // for SRQ events
	Port int  // for port events
	Time sim.Time
}

// Device is one RDMA NIC with one port.
type Device struct {
	// The fields are in two groups (issue 20): first what a frame sent
	// or received reads or writes, then what only the verbs and rarer
	// paths use. In a large world a device is cold at each of its
	// frames, and each line a frame reaches is a miss.
	cfg      Config
	qps      qpnTable // live QPs by QPN
	mem      memTable
	timers   []timerEntry // QPs with a timer set, earliest first (timers.go)
	outbox   outbox       // what the inputs caused, until Ready (ready.go)
	counters Counters
	inflight ring[int32]       // the dev.tx slot of the QP of each frame handed to the port, oldest first
	tx       []txSlot          // each QP's frames in the port (ready.go)
	txQP     []*QP             // the QP of each slot of tx, read only to wake it
	txFree   []int32           // slots of tx free for reuse
	rxRecent [rxRecentN]uint32 // the QPs that last received RC requests, newest first (RxSlack; 0: none)
	ipID     uint16
	portDown bool
	trace    *sim.Trace
	noteBuf  []byte // the note being built (note), kept for its capacity

	attr    DeviceAttr
	pds     pool
	cqs     pool
	srqs    pool
	ahs     pool
	mws     pool // memory windows: alloc_mw takes its place here
	qpCount pool
	qpList  []*QP // live QPs in creation order, for EachQP; nil: a hole (see unlistQP)
	qpHoles int
	qpSeq   uint64 // the next QP's creation sequence
	due     []*QP  // Advance's list of QPs due, kept for its capacity
	nextQPN uint32 // where the cyclic QPN search starts
	// maxQPIndex is the top of the QPN range: rxe's, or higher for a
	// Config.MaxQP above rxe's max_qp.
	maxQPIndex uint32
	qpns       idSet                   // the QPNs taken: live QPs' and the GSI QP's index
	nbr        map[netip.Addr]wire.MAC // GID -> MAC: static neighbours (no ARP), looked up only
	gsi        *QP                     // QP1, for SendMAD (gsi.go); not in qps
	// mcast is the device's multicast groups by GID (mcast.go), nil until
	// a QP attaches to one; mcastOf holds each attached QP's groups in
	// attach order, and mcAttached counts all attachments. Lookups only,
	// never iterated.
	mcast      map[netip.Addr]*mcGroup
	mcastOf    map[*QP][]netip.Addr
	mcAttached int
	// ipGroups counts the host's IP-level joins of each group
	// (JoinGroup); lookups only.
	ipGroups map[netip.Addr]int
	rxHeld   wire.Packet // a held request being run (responder.runHeld)
	// rxErrors counts frames dropped because they did not decode, by
	// wire.ErrorCode (rxe drops them silently; rocesim counts them).
	rxErrors [wire.NumErrorCodes]uint64
	// rxDrops counts frames that decoded but were dropped before a QP
	// processed them, by RxDrop (rxe's hdr_check drops them; see receive.go).
	rxDrops [numRxDrops]uint64
}

// RxErrors returns how many received frames were dropped as malformed,
// by the wire error code (wire.CodeICRC, wire.CodeTruncated, ...).
func (d *Device) RxErrors(code wire.ErrorCode) uint64 {
	if int(code) >= len(d.rxErrors) {
		return 0
	}
	return d.rxErrors[code]
}

// QKeyDrops returns how many UD datagrams were dropped for a Q_Key
// mismatch: RxDrops(DropQKey).
func (d *Device) QKeyDrops() uint64 { return d.rxDrops[DropQKey] }

// RxDrops returns how many received frames decoded but were dropped
// before any QP processed them, for the reason given.
func (d *Device) RxDrops(why RxDrop) uint64 {
	if why >= numRxDrops {
		return 0
	}
	return d.rxDrops[why]
}

// errCode returns the wire error code of a decode error.
func errCode(err error) wire.ErrorCode {
	if e, ok := err.(*wire.Error); ok {
		return e.Code
	}
	return 0
}

// New returns a device.
func New(cfg Config) *Device {
	if cfg.PathMTUMax == 0 {
		cfg.PathMTUMax = MTU1024
	}
	if cfg.Name == "" {
		cfg.Name = "rxe0"
	}
	if cfg.Node == "" {
		cfg.Node = cfg.Name
	}
	if cfg.CompVectors <= 0 {
		cfg.CompVectors = 1
	}
	base := cfg.AddrBase
	if base == 0 {
		base = DefaultAddrBase
	}
	d := &Device{cfg: cfg, attr: rxeAttr, mem: newMemTable(base), nbr: map[netip.Addr]wire.MAC{},
		nextQPN: gsiQPIndex + 1, maxQPIndex: rxeMaxQPIndex}
	if cfg.MaxQP != 0 {
		if cfg.MaxQP < 0 || cfg.MaxQP > MaxQPLimit {
			panic(fmt.Sprintf("nic: Config.MaxQP %d: want 1 to %d (0: rxe's %d)", cfg.MaxQP, MaxQPLimit, rxeAttr.MaxQP))
		}
		d.attr.MaxQP = cfg.MaxQP
		d.maxQPIndex = max(rxeMaxQPIndex, uint32(cfg.MaxQP)+rxeMinQPIndex)
	}
	d.pds = pool{live: kernelPDs, max: &d.attr.MaxPD}
	d.cqs = pool{live: kernelCQs, max: &d.attr.MaxCQ}
	d.qpCount = pool{live: kernelQPs, max: &d.attr.MaxQP}
	d.srqs = pool{max: &d.attr.MaxSRQ}
	d.ahs = pool{max: &d.attr.MaxAH}
	d.mws = pool{max: &d.attr.MaxMW}
	d.mem.maxLive = d.attr.MaxMR - kernelMRs
	d.attr.NodeGUID = uint64(cfg.MAC[0]^2)<<56 | uint64(cfg.MAC[1])<<48 | uint64(cfg.MAC[2])<<40 | 0xFF<<32 |
		0xFE<<24 | uint64(cfg.MAC[3])<<16 | uint64(cfg.MAC[4])<<8 | uint64(cfg.MAC[5])
	d.qpns.take(gsiQPIndex)
	d.gsi = newGSI(d)
	return d
}

// SetTrace makes the device record QP state changes, completions and
// timer firings in tr.
func (d *Device) SetTrace(tr *sim.Trace) { d.trace = tr }

// explaining reports whether frames that exist because of an error or a
// recovery get a note: with Annotate or a trace that still records (a
// full one keeps no more, sim.Trace.Enabled). Without either, no note
// is built, so the recovery path allocates nothing either.
func (d *Device) explaining() bool { return d.cfg.Annotate || d.trace.Enabled() }

// Name returns the device name.
func (d *Device) Name() string { return d.cfg.Name }

// Config returns the device's configuration.
func (d *Device) Config() Config { return d.cfg }

// QueryDevice returns the device's attributes.
func (d *Device) QueryDevice() DeviceAttr { return d.attr }

// QueryPort returns the attributes of port (1 is the only port).
func (d *Device) QueryPort(port int) (PortAttr, error) {
	if port != 1 {
		return PortAttr{}, errno(syscall.EINVAL, "query_port: port %d does not exist (the device has port 1)", port)
	}
	state := "ACTIVE"
	if d.portDown {
		state = "DOWN"
	}
	return PortAttr{State: state, MaxMTU: d.cfg.PathMTUMax, ActiveMTU: d.cfg.PathMTUMax,
		GIDTblLen: len(d.GIDs()), PKeyTblLen: 1, LinkLayer: "Ethernet"}, nil
}

// GIDs returns the GID table: the IPv6 address first (if any), then the
// IPv4 address mapped into IPv6 (if any), as rxe lists them.
func (d *Device) GIDs() []netip.Addr {
	var g []netip.Addr
	if d.cfg.IPv6.IsValid() {
		g = append(g, d.cfg.IPv6)
	}
	if d.cfg.IPv4.IsValid() {
		g = append(g, netip.AddrFrom16(d.cfg.IPv4.As16()))
	}
	return g
}

// QueryGID returns GID index of port 1.
func (d *Device) QueryGID(port, index int) (netip.Addr, error) {
	g := d.GIDs()
	if port != 1 || index < 0 || index >= len(g) {
		return netip.Addr{}, errno(syscall.EINVAL, "query_gid: port %d index %d out of range (port 1, %d GIDs)", port, index, len(g))
	}
	return g[index], nil
}

// QueryPKey returns the P_Key at index of port 1: the default 0xFFFF.
func (d *Device) QueryPKey(port, index int) (uint16, error) {
	if port != 1 || index != 0 {
		return 0, errno(syscall.EINVAL, "query_pkey: port %d index %d out of range (port 1, index 0)", port, index)
	}
	return wire.DefaultPKey, nil
}

// AddNeighbour tells the device which MAC a peer GID lives at (ARP and
// neighbour discovery are not simulated).
func (d *Device) AddNeighbour(gid netip.Addr, mac wire.MAC) { d.nbr[gid.Unmap()] = mac }

// neighbour returns the MAC the GID gid (unmapped) lives at: the device's
// own table first, then its own MAC for one of its own GIDs, then the
// shared table (Config.Neighbours).
//
// A QP or AH toward the device's own GID gets the port's own MAC, as the
// kernel's ib_resolve_eth_dmac finds it for a local address; rxe then
// loops such a frame back without putting it on the wire
// (rxe_net.c, rxe_loopback). Here the frame goes to the port, and the
// fabric brings it back (fabric.Node.Send): two QPs of one device talk.
func (d *Device) neighbour(gid netip.Addr) (wire.MAC, bool) {
	if m, ok := d.nbr[gid]; ok {
		return m, true
	}
	if m, ok := wire.MulticastMAC(gid); ok {
		return m, true // a group's MAC is computed, not resolved
	}
	if d.isLocal(gid) {
		return d.cfg.MAC, true
	}
	if d.cfg.Neighbours != nil {
		return d.cfg.Neighbours(gid)
	}
	return wire.MAC{}, false
}

// HasNeighbour reports whether the device knows the MAC of a peer GID
// (or IPv4 address): what address resolution (ARP) would find.
func (d *Device) HasNeighbour(gid netip.Addr) bool {
	_, ok := d.neighbour(gid.Unmap())
	return ok
}

// SetPortState tells the device its link went down or came back up: it
// raises PORT_ERR or PORT_ACTIVE and counts link_downed, as rxe does when
// its netdev loses carrier. Traffic itself is not stopped here: a down
// link loses frames in the fabric, and the transport's timers react.
func (d *Device) SetPortState(now sim.Time, up bool) {
	if up == !d.portDown {
		return
	}
	d.portDown = !up
	if up {
		d.raise(AsyncEvent{Type: EventPortActive, Port: 1, Time: now})
		return
	}
	d.counters.Add(CounterLinkDowned, 1)
	d.raise(AsyncEvent{Type: EventPortErr, Port: 1, Time: now})
}

// Resources counts the objects a device holds, as `rdma resource show`
// lists them for an rxe device: the kernel's own included (ib_mad's PD,
// CQ and GSI QP are there before a user opens the device), but not the
// DMA MR ib_alloc_pd registers for the kernel's PD, which restrack does
// not track (it counts against max_mr all the same).
type Resources struct {
	PD, CQ, QP, SRQ, AH, MR, MW int
}

// Resources returns what the device holds now.
func (d *Device) Resources() Resources {
	return Resources{PD: d.pds.live, CQ: d.cqs.live, QP: d.qpCount.live, SRQ: d.srqs.live, AH: d.ahs.live, MR: d.mem.live, MW: d.mws.live}
}

// Counters returns the port counters.
func (d *Device) Counters() *Counters { return &d.counters }

// AllocPD allocates a protection domain: EINVAL once the device holds
// max_pd (rxe_alloc_pd).
func (d *Device) AllocPD() (*PD, error) {
	if err := d.pds.take("alloc_pd", "max_pd"); err != nil {
		return nil, err
	}
	return &PD{dev: d}, nil
}

// livePD, liveQP and liveSRQ report whether an object a verb was handed
// is one of this device's, not destroyed: a verb refuses any other with
// EINVAL (a nil one, another device's, a dead one) rather than panic or
// adopt it.
func (d *Device) livePD(pd *PD) bool  { return pd != nil && !pd.dead && pd.dev == d }
func (d *Device) liveQP(qp *QP) bool  { return qp != nil && !qp.dead && qp.dev == d }
func (d *Device) liveSRQ(s *SRQ) bool { return s != nil && !s.dead && s.dev == d }

// DeallocPD frees pd; EBUSY while MRs, QPs, SRQs or AHs still use it.
func (d *Device) DeallocPD(pd *PD) error {
	if !d.livePD(pd) {
		return errno(syscall.EINVAL, "dealloc_pd: not a live PD of this device")
	}
	if pd.refs > 0 {
		return errno(syscall.EBUSY, "dealloc_pd: %d resources still use the PD", pd.refs)
	}
	pd.dead = true
	d.pds.put()
	return nil
}

// RegMR registers buf in pd with the access given.
func (d *Device) RegMR(pd *PD, buf []byte, access AccessFlags) (*MR, error) {
	if !d.livePD(pd) {
		return nil, errno(syscall.EINVAL, "reg_mr: not a live PD of this device")
	}
	return d.mem.register(pd, buf, access)
}

// RegMRAt registers buf as RegMR does, but at the address addr the
// caller names, not at the next simulated one: the addresses on the wire
// (RETH and atomic VAs) are then the caller's. The drop-in library uses
// it on a fabric of processes, where a program sends its peer the
// address of its own buffer (perftest's ib_write_bw, a real ibv_reg_mr's
// iova = the pointer) and the peer's process cannot translate it. MRs so
// placed may overlap one another, as a program's registrations of one
// buffer do; addr+len(buf) must not wrap (EINVAL, as
// ib_umem_get refuses an address range that wraps).
func (d *Device) RegMRAt(pd *PD, buf []byte, addr uint64, access AccessFlags) (*MR, error) {
	if !d.livePD(pd) {
		return nil, errno(syscall.EINVAL, "reg_mr: not a live PD of this device")
	}
	if addr+uint64(len(buf)) < addr {
		return nil, errno(syscall.EINVAL, "reg_mr: address %#x and length %d wrap around", addr, len(buf))
	}
	return d.mem.registerAt(pd, buf, access, addr, true)
}

// DeregMR deregisters mr.
func (d *Device) DeregMR(mr *MR) error { return d.mem.deregister(mr) }

// NumCompVectors returns the number of completion vectors
// (ibv_context.num_comp_vectors).
func (d *Device) NumCompVectors() int { return d.cfg.CompVectors }

// CreateCompChannel returns a completion channel.
func (d *Device) CreateCompChannel() *CompChannel { return &CompChannel{} }

// CreateCQ creates a completion queue of at least cqe entries: EINVAL
// for a bad cqe, vector or channel, and once the device holds max_cq.
func (d *Device) CreateCQ(cqe int, ch *CompChannel, vector int) (*CQ, error) {
	if vector >= d.cfg.CompVectors {
		// ib_uverbs_create_cq: comp_vector >= num_comp_vectors is EINVAL.
		return nil, errno(syscall.EINVAL, "create_cq: comp_vector %d out of range: the device has %d completion vector(s), 0..%d",
			vector, d.cfg.CompVectors, d.cfg.CompVectors-1)
	}
	if err := d.cqs.take("create_cq", "max_cq"); err != nil {
		return nil, err
	}
	cq, err := newCQ(cqe, ch, vector, d.attr.MaxCQE)
	if err != nil {
		d.cqs.put()
		return nil, err
	}
	cq.dev = d
	return cq, nil
}

// DestroyCQ destroys cq: EBUSY while a QP uses it or events are unacknowledged.
func (d *Device) DestroyCQ(cq *CQ) error {
	if cq == nil || cq.dev != d {
		return errno(syscall.EINVAL, "destroy_cq: not a CQ of this device")
	}
	if err := cq.destroy(); err != nil {
		return err
	}
	d.outbox.forget(cq)
	d.cqs.put()
	return nil
}

// raise queues an asynchronous event for the next Ready.
func (d *Device) raise(e AsyncEvent) {
	d.outbox.events = append(d.outbox.events, e)
	d.outbox.gathered = true
	if d.trace.Enabled() {
		ev := sim.Event{Time: e.Time, Node: d.cfg.Node, Kind: "async-event", Fields: []sim.Field{{Key: "event", Value: "IBV_EVENT_" + e.Type.String()}}}
		if e.QP != nil {
			ev.QPN, ev.HasQPN = e.QP.num, true
		}
		d.trace.Add(ev)
	}
}

// errno returns an error wrapping e with a message.
func errno(e syscall.Errno, format string, args ...any) error {
	return &Error{Errno: e, Msg: fmt.Sprintf(format, args...)}
}

// Error is a verb's failure: the errno a libibverbs call would return and
// a message saying what was wrong. errors.Is(err, syscall.EINVAL) works.
type Error struct {
	Errno syscall.Errno
	Msg   string
}

// Error returns the message.
func (e *Error) Error() string { return e.Msg + " (" + e.Errno.Error() + ")" }

// Unwrap returns the errno.
func (e *Error) Unwrap() error { return e.Errno }

// Hint names memory the device will read first for a frame it receives
// (Addr, Len bytes): a driver passes it on with the frame, for the
// receiving end to ask the CPU for before the frame arrives
// (fabric.Hint). An address, not a pointer: holding one keeps nothing
// alive, and nothing ever reads through it.
type Hint struct {
	Addr uintptr
	Len  uint32
}

// PeerHint returns the hint qp's frames carry (Config.PeerHint), zero
// for none.
func (qp *QP) PeerHint() Hint { return qp.peer }

// SetStreamingWrites makes the device write the payloads it receives
// into memory (RDMA WRITEs, SENDs into receive buffers, READ responses)
// with non-temporal stores, past the caches (package internal/ntcopy),
// or, off (a new device's), with ordinary stores. The bytes written are
// the same; only where they stay differs. A large world's receive areas
// are hundreds of megabytes, each written long before anything reads it:
// an ordinary store first reads its cold line, then keeps it, evicting
// the state the next packets need (tools/scale, in runs taken in turns:
// the alltoall at N = 1024 takes 12–18% less time streaming, N = 64 and
// 256 the same; a 2-node stream, whose receiver finds its buffers in the
// cache, 7% more). verbs.World turns it on in worlds as large as those
// whose fabric prefetches (sim.Scheduler.SetPrefetch). The stores are
// not fenced (internal/ntcopy.Copy): the goroutine that drives the
// device reads them as its own, and another sees them once it has
// synchronized with that one, as it must to read the memory at all;
// verbs.World also fences at the end of every Run, RunTo, RunFor and
// RunUntil.
func (d *Device) SetStreamingWrites(on bool) { d.mem.stream = on }

// StreamingWrites reports whether the device writes what it receives
// past the caches (SetStreamingWrites).
func (d *Device) StreamingWrites() bool { return d.mem.stream }

// QPHint is the hint for a frame to QP qpn (zero if there is none): the
// QP's own memory, which the receive path reads first after the frame's
// headers, cold in a large world (issue 20: at N = 256 the alltoall
// reaches each of 65,280 QPs once per message). A QP that connects to
// qpn gets it through Config.PeerHint.
func (d *Device) QPHint(qpn uint32) Hint {
	if qp := d.qpByNum(qpn); qp != nil {
		return Hint{Addr: uintptr(unsafe.Pointer(qp)), Len: uint32(unsafe.Sizeof(*qp))}
	}
	return Hint{}
}
