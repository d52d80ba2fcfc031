package rdmacm

import (
	"encoding/binary"
	"fmt"
	"net/netip"
	"syscall"

	"github.com/rocesim/rocesim/sim"
	"github.com/rocesim/rocesim/verbs"
	"github.com/rocesim/rocesim/wire"
)

// CM is the connection management of a verbs.World: one agent on QP1
// of each host that uses it. It holds no goroutine and no clock: its
// timers are events of the world's scheduler, so a world that runs with
// the same seed gives the same CM exchange.
type CM struct {
	w      *verbs.World
	agents map[*verbs.Host]*agent // looked up, never iterated
}

// New returns the connection management of w.
func New(w *verbs.World) *CM { return &CM{w: w, agents: map[*verbs.Host]*agent{}} }

// CreateEventChannel opens an event channel on host h
// (rdma_create_event_channel in a process running on h).
func (cm *CM) CreateEventChannel(h *verbs.Host) *EventChannel {
	a := cm.agents[h]
	if a == nil {
		a = newAgent(cm, h)
		cm.agents[h] = a
	}
	return &EventChannel{cm: a}
}

// Unanswered returns how many of host h's IDs received a REQ or a DREQ
// that their user has not answered yet: a CONNECT_REQUEST not yet
// accepted or rejected (REQ_RCVD), a DISCONNECTED not yet answered with
// rdma_disconnect (DREQ_RCVD; when both sides disconnected at once, the
// program has called it already and owes a second one, or
// rdma_destroy_id), a CONNECT_RESPONSE of a connection whose
// QP the user made not yet answered with Establish (REP_RCVD), whether
// or not the event was taken from its channel. The peer's CM waits for
// that answer on a timer (the REQ's, the DREQ's, the REP's) that a real
// host's user beats by seconds: a driver
// whose clock runs while its program is busy outside the library (the
// drop-in library on a fabric) holds the clock while this is non-zero.
func (cm *CM) Unanswered(h *verbs.Host) int {
	if a := cm.agents[h]; a != nil {
		return a.unanswered()
	}
	return 0
}

// AwaitingNetwork reports whether an ID of host h waits on the network
// for its next event: an address being resolved, a REQ, SIDR_REQ, REP
// or DREQ sent and not answered. A driver whose program sleeps outside
// the library (in poll(2) on a channel) may run the world for it then.
func (cm *CM) AwaitingNetwork(h *verbs.Host) bool {
	a := cm.agents[h]
	if a == nil {
		return false
	}
	for _, id := range a.ids {
		if id == nil {
			continue
		}
		switch id.state {
		case stateAddrQuery, stateReqSent, stateMRAReqRcvd, stateRepSent, stateDreqSent:
			return true
		}
	}
	return false
}

// FarewellChanges reports what destroying host h's IDs would send now
// (Destroy's farewell: a connection's DREQ, an unanswered request's
// REJ, …), as changes since its last call: fn gets, for each ID whose
// state has moved since, in the order they first moved, its key and
// either the MAD its Destroy would send (to dst) or a nil mad if it
// would send nothing (a destroyed ID among them). The first call reports
// every live ID that would send something. A key names one live ID of
// the host; a destroyed ID's key may name a later one, reported after
// it. Nothing is sent and no ID changes; mad is valid during the call.
//
// A process on a fabric keeps the daemon its will this way, to be sent
// if it dies without closing its port (procfabric's will), as the
// kernel destroys a killed process's IDs when its rdma_cm file closes:
// each change costs one MAD, however many IDs the host has.
func (cm *CM) FarewellChanges(h *verbs.Host, fn func(key uint64, dst netip.Addr, mad []byte)) {
	a := cm.agents[h]
	if a == nil {
		return
	}
	ids, first := a.changed, !a.tracking
	if first {
		a.tracking, ids = true, nil
		for _, id := range a.ids {
			if id != nil {
				ids = append(ids, id)
			}
		}
	}
	defer func() { a.will = nil }()
	for _, id := range ids {
		id.dirty = false
		said := false
		if id.state != stateDestroyed {
			a.will = func(dst netip.Addr, mad []byte) {
				said = true
				fn(id.index, dst, mad)
			}
			id.farewell()
		}
		if !said && !first {
			fn(id.index, netip.Addr{}, nil)
		}
	}
	clear(a.changed)
	a.changed = a.changed[:0]
}

// Dropped returns how many MADs host h's CM ignored (not CM, or not
// expected in the state of the ID they name).
func (cm *CM) Dropped(h *verbs.Host) uint64 {
	if a := cm.agents[h]; a != nil {
		return a.Dropped
	}
	return 0
}

// PortSpace is an rdma_cm port space (enum rdma_port_space).
type PortSpace uint16

// RDMA_PS_TCP, the port space of RC connections (rping's).
const PSTCP PortSpace = 0x0106

// CMID is an rdma_cm identifier (struct rdma_cm_id): one endpoint of
// a connection, or a listener.
type CMID struct {
	a     *agent
	ch    *EventChannel
	ps    PortSpace
	index uint64
	state cmState
	dirty bool // in its agent's changed list (setState)

	// Context is the user's (rdma_cm_id.context).
	Context any
	// QP is the ID's QP once CreateQP made it (rdma_cm_id.qp).
	QP *verbs.QP
	// PD is the protection domain CreateQP used.
	PD *verbs.PD

	src, dst   netip.AddrPort
	peer       netip.Addr // the address MADs go to
	localComm  uint32
	remoteComm uint32
	remoteQPN  uint32
	tid        uint64
	rqPSN      uint32 // what this side receives from (it advertises it)
	sqPSN      uint32 // what this side sends from
	flowLabel  uint32
	mtu        verbs.MTU
	respRes    uint8 // this side's responder resources (max_dest_rd_atomic)
	initDepth  uint8 // this side's initiator depth (max_rd_atomic)
	peerResp   uint8
	peerInit   uint8

	// The MAD waiting for an answer, its timer and retries. timeout is
	// ib_cm's cm_id_priv->timeout_ms (a DREQ waits as long as the REQ
	// or REP did); madTimeout the waiting MAD's own, which an MRA
	// lengthens (ib_modify_mad).
	lastMAD    [wire.MADLen]byte
	timer      sim.Timer
	timerOn    bool
	timeout    sim.Duration
	madTimeout sim.Duration
	retries    int
	// owes: the ID is in its agent's owing list (Unanswered).
	owes bool
	// rqDrawn: rqPSN is drawn (a passive ID draws it at Accept, or
	// earlier when InitQPAttr asks for RTR first); accepted: Accept ran.
	rqDrawn, accepted bool
	// repMRAed: the active side's MRA for this passive ID's REP came
	// (ib_cm's MRA_REP_RCVD: a further one changes nothing).
	repMRAed bool
	// devBound: BindAddr named the host's address, which gives the ID
	// the device (cma_acquire_dev); the any address binds a port only.
	devBound bool
	// bound: BindAddr or ResolveAddr bound the ID (the kernel's
	// ADDR_BOUND, which an address that fails to resolve returns to,
	// while IDLE here).
	bound bool
	// portHeld: the ID is among its port's owners (agent.ports).
	portHeld bool
	// reuseAddr, afOnly: the ID options set (SetReuseAddr, SetAFOnly);
	// afOnlySet: SetAFOnly was called (else the family decides:
	// afOnlyFor).
	reuseAddr, afOnly, afOnlySet bool
	// v6: the ID's addresses are IPv6 (family.go).
	v6 bool
	// mc is the groups the ID joined (JoinMulticast), in join order.
	mc []*mcJoin
}

// CreateID creates a CM ID on the channel (rdma_create_id).
func CreateID(ch *EventChannel, context any, ps PortSpace) (*CMID, error) {
	if ps != PSTCP && ps != PSUDP {
		return nil, fmt.Errorf("rdmacm: create_id: port space %#x: only RDMA_PS_TCP (0x106) and RDMA_PS_UDP (0x111) are modelled: %w", uint16(ps), syscall.EINVAL)
	}
	id := ch.cm.newID(ch, ps)
	id.Context = context
	return id, nil
}

// State returns the ID's CM state, as ib_cm names it (IDLE, REQ_SENT,
// ESTABLISHED, ...), for tests and traces.
func (id *CMID) State() string { return id.state.String() }

// PortSpace returns the port space the ID was created in: ports are
// taken per space (RDMA_PS_TCP's 7174 is not RDMA_PS_UDP's).
func (id *CMID) PortSpace() PortSpace { return id.ps }

// Channel returns the ID's event channel.
func (id *CMID) Channel() *EventChannel { return id.ch }

// Host returns the host the ID lives on.
func (id *CMID) Host() *verbs.Host { return id.a.h }

// RemoteAddr is the peer's address and port (rdma_get_peer_addr).
func (id *CMID) RemoteAddr() netip.AddrPort { return id.dst }

// LocalAddr is the ID's address and port (rdma_get_local_addr).
func (id *CMID) LocalAddr() netip.AddrPort { return id.src }

func (id *CMID) post(e *Event) { id.ch.post(e) }

// setState moves the ID to s, and notes that its farewell may have
// changed (FarewellChanges).
func (id *CMID) setState(s cmState) {
	id.state = s
	if a := id.a; a.tracking && !id.dirty {
		id.dirty = true
		a.changed = append(a.changed, id)
	}
}

func misuse(verb, format string, args ...any) error {
	return fmt.Errorf("rdmacm: %s: %s: %w", verb, fmt.Sprintf(format, args...), syscall.EINVAL)
}

// BindAddr binds the ID to a port of its host (rdma_bind_addr). The
// address must be the host's IPv4 or IPv6 address (EADDRNOTAVAIL
// otherwise), or unspecified (of
// either family: :: makes an IPv6 ID, which listens for both versions
// unless SetAFOnly; an invalid address is 0.0.0.0), which the ID keeps
// as its LocalAddr until an address is resolved. A port another ID
// holds is refused as the kernel refuses it (checkPort): EADDRINUSE for
// the same address, EADDRNOTAVAIL for the any address, unless both IDs
// allow address reuse. Port 0 gives the ID an ephemeral port no ID holds
// at once (ephemeralPort), as the kernel's bind does: LocalAddr says it
// from then on, and a listen or resolve keeps it.
func (id *CMID) BindAddr(addr netip.AddrPort) error {
	if id.state != stateIdle {
		return misuse("bind_addr", "the ID is %v, not IDLE", id.state)
	}
	a := addr.Addr()
	v6 := a.IsValid() && is6(a)
	self, err := id.a.addrOf(v6)
	if err != nil {
		return err
	}
	if a.IsValid() && !a.IsUnspecified() && a.Unmap() != self {
		// No interface has it (rdma_translate_ip; real rxe answers
		// so, conformance TestCM6Rxe).
		return fmt.Errorf("rdmacm: bind_addr: addr %v is not the host's (%v): %w", a, self, syscall.EADDRNOTAVAIL)
	}
	anyAddr := !a.IsValid() || a.IsUnspecified()
	port := addr.Port()
	if port != 0 {
		if e := id.a.checkPort(id, a, v6, port, id.reuseAddr); e != 0 {
			return fmt.Errorf("rdmacm: bind_addr: port %d is another ID's: %w", port, e)
		}
	} else {
		// Port 0 takes an ephemeral port at once, as the kernel's
		// bind does (cma_get_port: cma_alloc_any_port), so that
		// rdma_get_src_port says it before any listen or resolve.
		// Found before anything changes: with none free, the ID is as
		// it was.
		if port, err = id.a.ephemeralPort(id.ps); err != nil {
			return fmt.Errorf("rdmacm: bind_addr: %w", err)
		}
	}
	id.a.unbind(id) // a bind again, after one that left the ID IDLE
	id.v6 = v6
	if anyAddr {
		// The any address stays the ID's own until an address is
		// resolved (rdma_get_local_addr shows 0.0.0.0 or ::, and the
		// ID has no device: librdmacm's id->verbs is NULL).
		self = netip.IPv4Unspecified()
		if v6 {
			self = netip.IPv6Unspecified()
		}
	}
	id.src = netip.AddrPortFrom(self, port)
	id.devBound = !anyAddr
	id.bound = true
	id.a.bind(id)
	return nil
}

// SetReuseAddr sets the ID's address reuse (rdma_set_option's
// RDMA_OPTION_ID_REUSEADDR), in the states the kernel allows it
// (rdma_set_reuseaddr): turning it on anywhere but on a listener,
// turning it off only before the ID is bound; EINVAL otherwise.
func (id *CMID) SetReuseAddr(on bool) error {
	switch {
	case on && (id.state == stateListen || id.state == stateDestroyed):
		return misuse("set_option", "address reuse on an ID that is %v", id.state)
	case !on && (id.state != stateIdle || id.bound):
		return misuse("set_option", "address reuse turned off on an ID bound or past IDLE (%v)", id.state)
	}
	id.reuseAddr = on
	return nil
}

// SetAFOnly sets the ID's IPv6-only option (RDMA_OPTION_ID_AFONLY),
// which the kernel takes only while the ID is IDLE, bound or not
// (rdma_set_afonly); EINVAL otherwise.
func (id *CMID) SetAFOnly(on bool) error {
	if id.state != stateIdle {
		return misuse("set_option", "IPv6-only on an ID that is %v, not IDLE", id.state)
	}
	id.afOnly, id.afOnlySet = on, true
	return nil
}

// Options reports the ID's address reuse and IPv6-only options.
func (id *CMID) Options() (reuseAddr, afOnly bool) { return id.reuseAddr, id.afOnly }

// Listen makes an ID a listener (rdma_listen): REQs for its port come
// as CONNECT_REQUEST events. An unbound ID is bound to the any address
// and the first free port from 32768 (the kernel picks one at random);
// one that allows address reuse must find its port its own, and allows
// it no more.
func (id *CMID) Listen(backlog int) error {
	if id.state != stateIdle {
		return misuse("listen", "the ID must be IDLE (it is %v)", id.state)
	}
	if id.src.Port() == 0 {
		if err := id.bindAny(); err != nil {
			return err
		}
	} else if id.reuseAddr {
		// A reusable ID listens only once its port is its own.
		if e := id.a.checkPort(id, id.src.Addr(), id.v6, id.src.Port(), false); e != 0 {
			return fmt.Errorf("rdmacm: listen: port %d is shared: %w", id.src.Port(), e)
		}
	}
	for _, l := range id.a.listeners(id.ps)[id.src.Port()] {
		if id.clashes(l) {
			return fmt.Errorf("rdmacm: listen: port %d: %w", id.src.Port(), syscall.EADDRINUSE)
		}
	}
	id.setState(stateListen)
	id.a.addListener(id)
	// A listener is no longer reusable: its port is its own
	// (rdma_listen clears reuseaddr once the port proved unique).
	id.reuseAddr = false
	return nil
}

// ResolveAddr resolves dst to the host's RDMA device (rdma_resolve_addr)
// and picks an ephemeral source port, as the kernel does (its
// ip_local_port_range, 32768–60999). dst is IPv4 or IPv6, and so is the
// ID from then on: an ID bound to the other family, or a src of the
// other family, is EINVAL (resolve_prepare_src; an unbound ID is bound
// to src first, and stays so). A dst the host has a
// neighbour entry for resolves at once: ADDR_RESOLVED (the simulated
// hosts know their neighbours; no ARP or neighbour discovery is
// simulated). Otherwise, as on rxe
// (wire/testdata/cm/rxe_cm_addr_error.pcapng: three ARP requests
// unanswered, then "RDMA_CM_EVENT_ADDR_ERROR, error -110"), a dst on the
// host's network (onLink) gives ADDR_ERROR with status -110 (-ETIMEDOUT)
// after timeoutMs, and one off it fails at once with ENETUNREACH, no
// frame sent (rping on rxe: "rdma_resolve_addr: Network is
// unreachable"; the guests have no default route, nor have the model's
// hosts).
func (id *CMID) ResolveAddr(src netip.Addr, dst netip.AddrPort, timeoutMs int) error {
	if id.state != stateIdle {
		return misuse("resolve_addr", "the ID is %v, not IDLE", id.state)
	}
	to := dst.Addr().Unmap()
	if !to.IsValid() || (dst.Port() == 0 && !to.IsMulticast()) {
		// A group's address needs no port: it is joined, not connected
		// to (mckey resolves its group with port 0).
		return misuse("resolve_addr", "dst %v: an address and a port are needed", dst)
	}
	v6 := is6(to)
	if !id.bound && src.IsValid() {
		// An unbound ID is bound to src first (cma_bind_addr), and
		// stays bound whatever follows.
		if err := id.BindAddr(netip.AddrPortFrom(src, 0)); err != nil {
			return err
		}
	}
	if id.bound && id.v6 != v6 {
		return misuse("resolve_addr", "dst %v is %s, the ID is bound to an %s address", dst, familyName(v6), familyName(id.v6))
	}
	// (A bound ID's src is not looked at, as resolve_prepare_src
	// binds only an unbound one.)
	self, err := id.a.addrOf(v6)
	if err != nil {
		return err
	}
	known := id.a.h.HasNeighbour(to)
	if !known && !id.a.onLink(to) {
		return fmt.Errorf("rdmacm: resolve_addr: no route to %v (not on the network of the host's %v): %w", to, self, syscall.ENETUNREACH)
	}
	id.v6 = v6
	port := id.src.Port()
	fresh := port == 0
	if fresh {
		// The ID's until it is destroyed.
		if port, err = id.a.ephemeralPort(id.ps); err != nil {
			return fmt.Errorf("rdmacm: resolve_addr: %w", err)
		}
	}
	id.src = netip.AddrPortFrom(self, port)
	if fresh {
		id.a.bind(id)
	}
	id.bound = true // cma_bind_addr: an ID whose resolution fails stays bound
	id.dst = netip.AddrPortFrom(to, dst.Port())
	id.peer = id.dst.Addr()
	if !known {
		id.setState(stateAddrQuery)
		id.armTimer(sim.Duration(max(timeoutMs, 0)) * sim.Millisecond)
		return nil
	}
	id.setState(stateAddrResolved)
	id.post(&Event{Event: EventAddrResolved, ID: id})
	return nil
}

// ResolveRoute resolves the route (rdma_resolve_route): on RoCE, the
// path record rdma_cm builds itself (cma_resolve_iboe_route): MTU from
// the link, the flow label hashed from the ports. ROUTE_RESOLVED is
// posted at once.
func (id *CMID) ResolveRoute(timeoutMs int) error {
	if id.state != stateAddrResolved {
		return misuse("resolve_route", "the ID is %v, not ADDR_RESOLVED", id.state)
	}
	// cma_get_roce_udp_flow_label: sport × 31 + dport, 20 bits (checked
	// against the capture: ports 48384 and 7174 give 0x6ff06).
	id.flowLabel = (uint32(id.src.Port())*31 + uint32(id.dst.Port())) & 0xFFFFF
	id.setState(stateRouteResolved)
	id.post(&Event{Event: EventRouteResolved, ID: id})
	return nil
}

// mayCreateQP reports whether rdma_create_qp may give the ID a QP:
// librdmacm needs the ID's device (id->verbs), which an ID has once its
// address is resolved, when bound to the device's address, or as a
// CONNECT_REQUEST's new ID (conformance TestRdmacmMisuseRxe: after
// ADDR_RESOLVED, before the route, real rxe makes it).
func (id *CMID) mayCreateQP() bool {
	switch id.state {
	case stateAddrResolved, stateRouteResolved, stateReqRcvd:
		return true
	case stateIdle:
		return id.devBound
	}
	return false
}

// CreateQP creates the ID's RC QP and moves it to INIT (rdma_create_qp:
// ucma_init_conn_qp).
func (id *CMID) CreateQP(pd *verbs.PD, attr verbs.QPInitAttr) error {
	if id.QP != nil {
		return misuse("create_qp", "the ID has a QP already")
	}
	if !id.mayCreateQP() {
		return misuse("create_qp", "the ID is %v and has no device: resolve an address, bind to the device's, or take a CONNECT_REQUEST, first", id.state)
	}
	attr.Type = id.qpType()
	qp, err := pd.CreateQP(attr)
	if err != nil {
		return err
	}
	if err := id.initQP(qp); err != nil {
		qp.Destroy()
		return err
	}
	id.QP, id.PD = qp, pd
	return nil
}

// InitQP moves an RC QP from RESET to INIT as rdma_create_qp does
// (ucma_init_conn_qp, with the attributes of cm_init_qp_init_attr:
// remote write always, remote read and atomic when the connection has
// responder resources; rdma_cm asks with them set, so all three).
func InitQP(qp *verbs.QP) error {
	return qp.Modify(&verbs.QPAttr{QPState: verbs.QPStateInit, PKeyIndex: 0, PortNum: 1,
		QPAccessFlags: verbs.AccessRemoteWrite | verbs.AccessRemoteRead | verbs.AccessRemoteAtomic},
		verbs.QPAttrState|verbs.QPAttrPKeyIndex|verbs.QPAttrPort|verbs.QPAttrAccessFlags)
}

// AttachQP gives the ID a QP the caller made on pd, in RESET (then it
// is moved to INIT as CreateQP would) or already moved to INIT with
// InitQP; from then on it is the ID's QP, as if CreateQP had made it.
// librdmacm has no such call (there rdma_create_qp creates the QP); it
// lets a program that declares its QPs up front, as a scenario does,
// receive on them before the connection is made, and keep their QP
// numbers in declaration order.
func (id *CMID) AttachQP(qp *verbs.QP, pd *verbs.PD) error {
	if id.QP != nil {
		return misuse("attach_qp", "the ID has a QP already")
	}
	if id.state != stateRouteResolved && id.state != stateReqRcvd {
		return misuse("attach_qp", "the ID is %v: resolve the route, or take a CONNECT_REQUEST, first", id.state)
	}
	if a, init := qp.Query(); init.Type != verbs.QPTypeRC || (a.QPState != verbs.QPStateReset && a.QPState != verbs.QPStateInit) {
		return misuse("attach_qp", "QP %#x is %v in %v: want an RC QP in RESET or INIT", qp.QPNum, init.Type, a.QPState)
	}
	if qp.State() == verbs.QPStateReset {
		if err := InitQP(qp); err != nil {
			return err
		}
	}
	id.QP, id.PD = qp, pd
	return nil
}

// Connect sends the REQ (rdma_connect). ESTABLISHED follows the REP;
// REJECTED a REJ; UNREACHABLE when 16 REQs went unanswered.
func (id *CMID) Connect(p ConnParam) error {
	if id.state != stateRouteResolved {
		return misuse("connect", "the ID is %v, not ROUTE_RESOLVED", id.state)
	}
	if id.ps == PSUDP {
		return id.connectUD(p)
	}
	if len(p.PrivateData) > wire.CMREQPrivateLen-wire.CMIPHeaderLen {
		return misuse("connect", "private_data_len %d > %d", len(p.PrivateData), wire.CMREQPrivateLen-wire.CMIPHeaderLen)
	}
	a := id.a
	id.startExchange()
	id.rqPSN = a.rnd.Uint32N(1 << 24) // cma: get_random_u32() & 0xffffff
	id.rqDrawn = true
	id.mtu = id.portMTU()
	id.respRes, id.initDepth = p.ResponderResources, p.InitiatorDepth
	gid := wire.GIDFromAddr(id.src.Addr())
	req := wire.CMREQ{
		LocalCommID: id.localComm, ServiceID: wire.CMServiceID(id.dst.Port()), LocalCAGUID: a.h.GUID(),
		LocalQPN: id.qpNum(p), ResponderResources: p.ResponderResources, InitiatorDepth: p.InitiatorDepth,
		RemoteCMResponseTimeout: cmResponseTimeout, StartingPSN: wire.PSN(id.rqPSN),
		LocalCMResponseTimeout: cmResponseTimeout, RetryCount: retryCount, PKey: 0xFFFF, PathMTU: uint8(id.mtu),
		RNRRetryCount: rnrRetryCount, MaxCMRetries: maxCMRetries,
		Primary: wire.CMPath{LocalLID: 0xFFFF, RemoteLID: 0xFFFF, LocalGID: gid, RemoteGID: wire.GIDFromAddr(id.dst.Addr()),
			FlowLabel: id.flowLabel, HopLimit: 64, LocalACKTimeout: packetLifeTime + 1},
	}
	id.putIPHeader(req.PrivateData[:], p.PrivateData)
	id.sendRequest(wire.CMAttrREQ, &req, reqTimeout)
	return nil
}

// sendWaiting sends the MAD in a.buf and keeps it for retransmission.
func (id *CMID) sendWaiting(timeout sim.Duration) {
	id.lastMAD = id.a.buf
	id.retries = 0
	id.timeout, id.madTimeout = timeout, timeout
	id.a.send(id.peer, id.lastMAD[:])
	id.armTimer(timeout)
}

func (id *CMID) armTimer(d sim.Duration) {
	id.stopTimer()
	w := id.a.h.World()
	id.timer = w.Scheduler().Schedule(w.Now().Add(d), id.a, id.index)
	id.timerOn = true
}

func (id *CMID) stopTimer() {
	if id.timerOn {
		id.timer.Cancel()
		id.timerOn = false
	}
}

// giveUp is the retries of the waiting MAD spent (ib_cm's
// IB_CM_REQ_ERROR, REP_ERROR, DREQ_ERROR).
func (id *CMID) giveUp() {
	switch id.state {
	case stateReqSent, stateMRAReqRcvd, stateRepSent:
		id.setState(stateIdle)
		id.post(&Event{Event: EventUnreachable, ID: id, Status: -int(syscall.ETIMEDOUT)})
	case stateDreqSent:
		id.setState(stateTimewait)
		id.post(&Event{Event: EventDisconnected, ID: id, Status: -int(syscall.ETIMEDOUT)})
	}
}

// onREP is the active side's REP: RTR and RTS, the RTU, ESTABLISHED
// (cm_rep_handler, then rdma_cm's cma_rep_recv). A duplicate REP, its
// RTU lost, gets the RTU again (cm_dup_rep_handler; seen on rxe,
// rxe_cm_lost_rtu.pcapng).
func (id *CMID) onREP(r *wire.CMREP) bool {
	switch id.state {
	case stateEstablished:
		id.sendRTU()
		return true
	case stateReqSent, stateMRAReqRcvd:
	case stateRepRcvd:
		// Its application has not called Establish yet: the MRA
		// rdma_cm holds the REP with (cm_dup_rep_handler), which gives
		// the passive side the MRA's service timeout more to wait.
		id.a.sendMRAFor(id, msgREP)
		return true
	default:
		return false
	}
	id.stopTimer()
	id.remoteComm, id.remoteQPN = r.LocalCommID, r.LocalQPN
	id.sqPSN = uint32(r.StartingPSN)
	id.peerResp, id.peerInit = r.ResponderResources, r.InitiatorDepth
	if id.QP == nil {
		id.repRcvd(r) // the application's own QP (userqp.go)
		return true
	}
	if err := id.toRTS(); err != nil {
		// cma_rep_recv failing: the kernel rejects the REP and reports
		// CONNECT_ERROR.
		id.a.reject(id.peer, id.tid, id.localComm, id.remoteComm, 1, wire.CMREJConsumerReject, nil)
		id.setState(stateIdle)
		id.post(&Event{Event: EventConnectError, ID: id, Status: -int(syscall.EINVAL)})
		return true
	}
	id.sendRTU()
	id.setState(stateEstablished)
	id.post(&Event{Event: EventEstablished, ID: id, Param: ConnParam{ResponderResources: r.ResponderResources,
		InitiatorDepth: r.InitiatorDepth, RNRRetryCount: r.RNRRetryCount, QPNum: r.LocalQPN,
		PrivateData: append([]byte(nil), r.PrivateData[:]...)}})
	return true
}

// onMRA is the peer's MRA for our REQ (cm_mra_handler): the REQ is not
// sent again before the MRA's service timeout plus the path's packet
// life time have passed (ib_modify_mad gives the REQ's MAD that timeout,
// for the rest of its retries too, which keep their count), and the ID
// goes to MRA_REQ_RCVD, where a further MRA is a duplicate and changes
// nothing. The REP or REJ that then comes is taken as in REQ_SENT.
// rdma_cm reports no event for it (cma_ib_handler: IB_CM_MRA_RECEIVED
// is ignored).
func (id *CMID) onMRA(m *wire.CMMRA) bool {
	if id.state == stateRepSent && m.MsgMRAed == msgREP {
		return id.repMRA()
	}
	if id.state != stateReqSent || m.MsgMRAed != msgREQ {
		return false
	}
	// cm_convert_to_ms(service timeout) + cm_convert_to_ms(av.timeout),
	// av.timeout being the packet life time + 1 (cm_init_av_by_path):
	// 65536 + 2048 ms for rdma_cm's MRA on RoCE.
	id.madTimeout = cmConvertToMs(m.ServiceTimeout) + cmConvertToMs(packetLifeTime+1)
	id.armTimer(id.madTimeout)
	id.setState(stateMRAReqRcvd)
	return true
}

func (id *CMID) sendRTU() {
	id.a.header(wire.CMAttrRTU, id.tid)
	rtu := wire.CMRTU{LocalCommID: id.localComm, RemoteCommID: id.remoteComm}
	rtu.Encode(wire.MAD(id.a.buf[:]).Data())
	id.a.send(id.peer, id.a.buf[:])
}

// toRTS moves the ID's QP to RTR and RTS with the attributes ib_cm
// derives from the exchange (cm_init_qp_rtr_attr, cm_init_qp_rts_attr).
func (id *CMID) toRTS() error {
	rtr, mask := id.rtrAttr(id.respRes)
	if err := id.QP.Modify(&rtr, mask); err != nil {
		return err
	}
	rts, mask := id.rtsAttr(id.initDepth)
	return id.QP.Modify(&rts, mask)
}

// rtrAttr is the RTR transition of a connected QP (cm_init_qp_rtr_attr)
// with maxDestRd as its max_dest_rd_atomic.
func (id *CMID) rtrAttr(maxDestRd uint8) (verbs.QPAttr, verbs.QPAttrMask) {
	return verbs.QPAttr{QPState: verbs.QPStateRTR, PathMTU: id.mtu, DestQPNum: id.remoteQPN, RQPSN: id.rqPSN,
			MaxDestRdAtomic: maxDestRd, MinRNRTimer: 0,
			AHAttr: verbs.AHAttr{IsGlobal: true, PortNum: 1, GRH: verbs.GRH{DGID: netip.AddrFrom16(id.peer.As16()),
				FlowLabel: id.flowLabel, HopLimit: 64, SGIDIndex: id.sgidIndex()}}},
		verbs.QPAttrState | verbs.QPAttrAV | verbs.QPAttrPathMTU | verbs.QPAttrDestQPN |
			verbs.QPAttrRQPSN | verbs.QPAttrMaxDestRdAtomic | verbs.QPAttrMinRNRTimer
}

// rtsAttr is the RTS transition of a connected QP (cm_init_qp_rts_attr)
// with maxRd as its max_rd_atomic.
func (id *CMID) rtsAttr(maxRd uint8) (verbs.QPAttr, verbs.QPAttrMask) {
	return verbs.QPAttr{QPState: verbs.QPStateRTS, Timeout: packetLifeTime + 1, RetryCnt: retryCount,
			RNRRetry: rnrRetryCount, SQPSN: id.sqPSN, MaxRdAtomic: maxRd},
		verbs.QPAttrState | verbs.QPAttrTimeout | verbs.QPAttrRetryCnt |
			verbs.QPAttrRNRRetry | verbs.QPAttrSQPSN | verbs.QPAttrMaxQPRdAtomic
}

// Accept answers a CONNECT_REQUEST (rdma_accept): the QP to RTR and RTS
// (cma_accept_ib: cma_modify_qp_rtr, cma_modify_qp_rts), then the REP.
// ESTABLISHED follows the RTU.
func (id *CMID) Accept(p ConnParam) error {
	if id.state != stateReqRcvd {
		return misuse("accept", "the ID is %v, not REQ_RCVD", id.state)
	}
	if id.ps == PSUDP {
		return id.acceptUD(p)
	}
	if len(p.PrivateData) > wire.CMREPPrivateLen {
		return misuse("accept", "private_data_len %d > %d", len(p.PrivateData), wire.CMREPPrivateLen)
	}
	a := id.a
	id.drawRQPSN()
	// cma_accept_ib → ib_send_cm_rep: the REP's resources are the
	// user's, capped by what the REQ offered (cma_set_rep_event_data
	// gives the user the REQ's as defaults).
	id.respRes, id.initDepth = min(p.ResponderResources, id.peerInit), min(p.InitiatorDepth, id.peerResp)
	id.accepted = true
	// The application's own QP is its to move (InitQPAttr); the REP
	// names it by p.QPNum.
	if id.QP != nil {
		if err := id.toRTS(); err != nil {
			return err
		}
	}
	rep := wire.CMREP{LocalCommID: id.localComm, RemoteCommID: id.remoteComm, LocalQPN: id.qpNum(p),
		StartingPSN: wire.PSN(id.rqPSN), ResponderResources: id.respRes, InitiatorDepth: id.initDepth,
		TargetACKDelay: targetACKDelay, RNRRetryCount: rnrRetryCount, LocalCAGUID: a.h.GUID()}
	copy(rep.PrivateData[:], p.PrivateData)
	a.header(wire.CMAttrREP, id.tid)
	rep.Encode(wire.MAD(a.buf[:]).Data())
	id.setState(stateRepSent)
	id.sendWaiting(repTimeout)
	return nil
}

// Reject refuses a CONNECT_REQUEST (rdma_reject): a REJ with reason 28,
// consumer reject, and the private data; the active side gets REJECTED
// with status 28.
func (id *CMID) Reject(private []byte) error {
	if id.ps == PSUDP && id.state == stateReqRcvd {
		return id.rejectUD(private)
	}
	if len(private) > wire.CMREJPrivateLen {
		return misuse("reject", "private_data_len %d > %d", len(private), wire.CMREJPrivateLen)
	}
	switch {
	case id.state == stateRepRcvd:
		return id.rejectREP(private) // userqp.go
	case id.state == stateRepSent && id.ps == PSTCP:
		// After the accept, before the RTU: ib_cm takes the REJ in
		// REP_SENT and sends it (the client gets REJECTED, status
		// 28), its ID to TIMEWAIT, yet rdma_reject returns EINVAL, as
		// real rxe's does (conformance TestRdmacmMisuseRxe).
		id.stopTimer()
		id.a.reject(id.peer, id.tid, id.localComm, id.remoteComm, msgOther, wire.CMREJConsumerReject, private)
		id.setState(stateTimewait)
		return misuse("reject", "the ID is REP_SENT: the REJ is sent, and rdma_reject still says EINVAL, as the kernel's does")
	case id.state != stateReqRcvd:
		return misuse("reject", "the ID is %v, not REQ_RCVD", id.state)
	}
	id.a.reject(id.peer, id.tid, id.localComm, id.remoteComm, msgREQ, wire.CMREJConsumerReject, private)
	id.setState(stateIdle)
	return nil
}

// onREJ is a REJ of our REQ or REP: the QP to ERR (cma_modify_qp_err)
// and REJECTED with the reason as the status. A request whose requester
// gave up (REJ of reason timeout, in REQ_RCVD) is void, with no event:
// real rxe's listener hears nothing, and answering the request then
// fails (conformance TestRdmacmMisuseRxe).
func (id *CMID) onREJ(r *wire.CMREJ) {
	id.stopTimer()
	if id.state == stateReqRcvd {
		id.setState(stateIdle)
		return
	}
	id.setState(stateIdle)
	if id.QP != nil {
		id.QP.Modify(&verbs.QPAttr{QPState: verbs.QPStateErr}, verbs.QPAttrState)
	}
	id.post(&Event{Event: EventRejected, ID: id, Status: int(r.Reason),
		Param: ConnParam{PrivateData: append([]byte(nil), r.PrivateData[:]...)}})
}

// Disconnect ends the connection (rdma_disconnect): the QP to ERR
// (librdmacm's ucma_shutdown), then a DREQ, or, when the peer's DREQ
// came first, the DREP that answers it. The side that sent the DREQ
// gets DISCONNECTED with the DREP; the other got it with the DREQ.
func (id *CMID) Disconnect() error {
	if id.ps == PSUDP {
		return id.disconnectUD()
	}
	switch id.state {
	case stateEstablished, stateDreqRcvd:
	default:
		if !id.hasCMID() {
			// No ib_cm ID of its own (rdma_connect or a
			// CONNECT_REQUEST makes one; a listener on the any
			// address has none either, as on rxe): -EINVAL.
			return misuse("disconnect", "the ID is %v, never connected", id.state)
		}
		// An ib_cm ID with no connection to end (connecting, an
		// accept waiting for its RTU, a request not answered, a
		// connection over): ib_send_cm_dreq and ib_send_cm_drep both
		// refuse, and rdma_disconnect returns 0 all the same, the QP
		// in ERR and nothing sent (cma.c; conformance
		// TestRdmacmMisuseRxe).
		if id.QP != nil {
			return id.QP.Modify(&verbs.QPAttr{QPState: verbs.QPStateErr}, verbs.QPAttrState)
		}
		return nil
	}
	if id.QP != nil {
		if err := id.QP.Modify(&verbs.QPAttr{QPState: verbs.QPStateErr}, verbs.QPAttrState); err != nil {
			return err
		}
	}
	if id.state == stateDreqRcvd {
		id.sendDREP(id.tid)
		id.setState(stateTimewait)
		return nil
	}
	id.buildDREQ()
	id.setState(stateDreqSent)
	id.sendWaiting(id.timeout)
	return nil
}

// buildDREQ builds the ID's DREQ in the agent's buffer.
// A DREQ carries its sender's own transaction ID (cm_form_tid of the
// sender's ID), whichever side connected: in rxe_cm_write_bw.pcapng
// both sides send one, each with its own.
func (id *CMID) buildDREQ() {
	id.a.header(wire.CMAttrDREQ, tid(id.localComm))
	dreq := wire.CMDREQ{LocalCommID: id.localComm, RemoteCommID: id.remoteComm, RemoteQPN: id.remoteQPN}
	dreq.Encode(wire.MAD(id.a.buf[:]).Data())
}

func (id *CMID) sendDREP(t uint64) { id.a.drep(id.peer, t, id.localComm, id.remoteComm) }

// onDREQ is the peer's DREQ (cm_dreq_handler): in ESTABLISHED, REP_SENT
// (its RTU lost) or DREQ_SENT (both sides disconnect at once; ib_cm
// cancels its own DREQ's retries) DISCONNECTED, and the DREP waits for
// the user's Disconnect or Destroy (ib_send_cm_drep, cm_destroy_id); in
// TIMEWAIT the DREP again.
func (id *CMID) onDREQ(t uint64) bool {
	switch id.state {
	case stateEstablished, stateRepSent, stateDreqSent:
		id.stopTimer()
		id.setState(stateDreqRcvd)
		id.a.owe(id)
		id.tid = t
		id.post(&Event{Event: EventDisconnected, ID: id})
	case stateTimewait:
		id.sendDREP(t)
	default:
		return false
	}
	return true
}

// onDREP is the peer's DREP (cm_drep_handler): the answer to our DREQ
// (DREQ_SENT: DISCONNECTED), or, when both sides disconnected at once and
// the peer's DREQ came first (DREQ_RCVD), the peer's own DREP, which
// ends the connection without a second event and leaves nothing for
// this side to send (TIMEWAIT).
func (id *CMID) onDREP() bool {
	if id.state == stateDreqRcvd {
		id.setState(stateTimewait)
		return true
	}
	return id.answered(stateDreqSent, stateTimewait, EventDisconnected)
}

// farewell tells the peer of a connection that the ID being destroyed
// leaves (cm_destroy_id), so it learns now rather than after its
// retries; each answer is real rxe's (conformance TestRdmacmMisuseRxe):
//   - a request not yet answered (REQ_RCVD), or a REP held for a QP the
//     user made (REP_RCVD): a consumer REJ of that message, and the peer
//     gets REJECTED, status 28; a UD request: a SIDR_REP of status
//     IB_SIDR_REJECT, and the peer gets UNREACHABLE, status 2;
//   - waiting for the RTU (REP_SENT): a consumer REJ of "other"; the
//     peer gets REJECTED, status 28;
//   - connected: a DREQ, sent once (the ID is not there to resend it);
//     the peer gets DISCONNECTED. The peer's DREQ received: its DREP.
//
// Connecting (REQ_SENT, or after an MRA): a REJ of reason timeout, its
// ARI the device's GUID, naming the request by our communication ID
// alone (we have not learnt the peer's). The listener's request is
// void then (rdma_accept and rdma_reject fail), but its application
// gets no event on real rxe (onREJ).
func (id *CMID) farewell() {
	a := id.a
	if id.ps == PSUDP {
		// SIDR leaves no connection behind: ib_cm's ID is IDLE once
		// the SIDR_REP is sent or received.
		if id.state == stateReqRcvd {
			id.answerSIDR(wire.SIDRReject, nil)
		}
		return
	}
	switch id.state {
	case stateReqSent, stateMRAReqRcvd:
		a.header(wire.CMAttrREJ, id.tid)
		rej := wire.CMREJ{LocalCommID: id.localComm, MsgRejected: msgOther, Reason: wire.CMREJTimeout,
			RejectInfoLength: 8}
		binary.BigEndian.PutUint64(rej.ARI[:], a.h.GUID())
		rej.Encode(wire.MAD(a.buf[:]).Data())
		a.send(id.peer, a.buf[:])
	case stateReqRcvd:
		a.reject(id.peer, id.tid, id.localComm, id.remoteComm, msgREQ, wire.CMREJConsumerReject, nil)
	case stateRepRcvd:
		a.reject(id.peer, id.tid, id.localComm, id.remoteComm, msgREP, wire.CMREJConsumerReject, nil)
	case stateRepSent:
		a.reject(id.peer, id.tid, id.localComm, id.remoteComm, msgOther, wire.CMREJConsumerReject, nil)
	case stateEstablished:
		id.buildDREQ()
		a.send(id.peer, a.buf[:])
	case stateDreqRcvd:
		id.sendDREP(id.tid)
	}
}

// Destroy releases the ID (rdma_destroy_id): its timer stops, its
// listener port is free again, and the peer of a connection is told
// (farewell). The QP is the user's to destroy
// (rdma_destroy_qp).
func (id *CMID) Destroy() error {
	if id.state == stateDestroyed {
		return misuse("destroy_id", "the ID is destroyed already")
	}
	id.stopTimer()
	if id.state == stateListen {
		id.a.removeListener(id)
	}
	// Its events not taken yet go with it: a program must not get an
	// event of an ID it destroyed.
	id.ch.drop(func(e *Event) bool { return e.ID == id })
	id.leaveAll()
	id.farewell()
	id.a.forget(id)
	id.setState(stateDestroyed)
	return nil
}
