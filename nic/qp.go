package nic

import (
	"math/bits"
	"net/netip"
	"syscall"

	"github.com/rocesim/rocesim/sim"
	"github.com/rocesim/rocesim/wire"
)

// QPInitAttr are the creation attributes of a queue pair (ibv_qp_init_attr).
type QPInitAttr struct {
	SendCQ   *CQ
	RecvCQ   *CQ
	SRQ      *SRQ
	Cap      QPCap
	Type     QPType
	SQSigAll bool
}

// QP is a queue pair: a send queue and a receive queue (or an SRQ), the
// state machine of IBTA §10.3 and, for each direction of traffic, the
// requester, responder and completer of the transport.
type QP struct {
	// The fields are laid out by cache line (issue 20: at scale the QP is
	// cold at each message, 65,280 QPs at N = 256, so each line a message
	// touches is a miss). The Go runtime puts an 8-byte header before an
	// object of over 512 bytes with pointers, in a 640-byte slot, so the
	// QP's lines begin at offsets 56, 120, 184 and so on:
	//   - 0–56: what every packet reads (and the PD, for the memory checks);
	//   - 56–120: the send queue's ring (post, completion);
	//   - 120–248: the requester and completer's state;
	//   - 248–376: init (type, caps, CQs) and the attributes, whose fields
	//     every packet reads (path MTU, destination QPN, access flags and
	//     GRH) end at 376;
	//   - 448–464: the hint every frame carries to its receiver (peer),
	//     then the responder: the sender's message touches lines 0–5 and
	//     7, the receiver's lines 0, 4, 5, 7 and 8, which the receiver's
	//     hint covers whole.
	// At 624 bytes the QP keeps its 640-byte slot.
	dev     *Device
	num     uint32
	slot    int32    // index of its entry in dev.timers, noSlot when no timer is set
	dmac    wire.MAC // the MAC of attr.AHAttr's DGID, resolved when it was set
	dead    bool
	blocked bool  // the requester waits for skbOut to fall to inflightLow
	tx      int32 // its slot in dev.tx: how many of its frames are in the port (see txSlot)
	state   QPState
	seq     uint64 // creation sequence: timers due together fire in this order
	txBuilt uint64 // frames ever built for the port (txBuilt - skbOut have gone)
	pd      *PD

	sq  ring[sendWQE]
	req requester

	init QPInitAttr
	attr QPAttr
	// peer is the hint for the destination QP of an RC or UC QP, set
	// when it is connected (Config.PeerHint): every frame it sends
	// carries it. On the responder's line, which an ACK reads anyway.
	peer Hint

	resp responder
	rq   ring[recvWQE]

	listed int // index in dev.qpList
	// connectedAt is when the QP last went from RTR to RTS (OutFrame.ConnectedAt).
	connectedAt sim.Time
}

// sendWQE is a posted send work request and its progress. What the
// completer reads of a WQE (its progress, status and length, and the
// WR's ID and opcode) fills the first 64 bytes, so that completing a WQE,
// at scale long after it was sent, costs one or two cache misses for the
// WQE (as the slot falls on the lines) rather than three to five (issue
// 20: each alltoall QP carries one WRITE).
type sendWQE struct {
	length uint64 // message length
	// Transport progress, set when the requester first sends it.
	firstPSN wire.PSN
	npkts    uint32
	isInline bool
	signaled bool
	started  bool
	done     bool     // acknowledged (or failed); completes when it reaches the head
	status   WCStatus // a local error found at post time (completes in order)
	// wr is the WR as posted, at byte 24: WRID, then SGList, then Opcode
	// at 56. Its SGList is the QP's own copy of the caller's (its
	// storage kept from post to post, MaxSendSGE capacity), not a
	// second slice beside it: at 256 bytes the WQE is a size class of
	// its own, so the storage of a send queue of one or two slots
	// (max_send_wr 1, as each of the alltoall's QPs has) begins a cache
	// line, where at 280 bytes every other one began mid-line and its
	// first 64 bytes spanned two. (Storage over 512 bytes gets the
	// runtime's 8-byte header before it; a longer queue's slots each
	// span one line more, but such a queue is mostly in steady use,
	// and warm.)
	wr     SendWR
	inline []byte   // inline data copy (MaxInlineData capacity)
	rdRcvd uint32   // READ: response packets received in order so far
	why    wcReason // what the post-time check found, for the trace
}

// recvWQE is a posted receive work request.
type recvWQE struct {
	wrid   uint64
	sges   []SGE
	length uint64
	status WCStatus
	why    wcReason // what the post-time check found, for the trace
}

// ring is a FIFO of at most limit elements whose storage grows as it
// fills (doubling, from ringMin slots) rather than being made whole up
// front: an idle QP with max_send_wr 16 would otherwise hold sixteen
// 300-byte send WQEs it never uses (issue 20: at most 1 KiB of heap per
// idle QP). Slots keep their storage (a WQE's SGE and inline buffers)
// once grown, so a ring in steady use allocates nothing; trim gives back
// what a burst left unused, at a point where nothing holds a slot.
type ring[T any] struct {
	slots      []T
	head, size int
	limit      int // the most elements the ring may hold
	peak       int // the most it held since its storage last changed
	turns      int // elements retired since then
}

// ringMin is the storage a ring first gets.
const ringMin = 4

// init empties the ring and bounds it to n elements; storage comes as
// elements do.
func (r *ring[T]) init(n int) { *r = ring[T]{limit: n} }

func (r *ring[T]) full() bool  { return r.size >= r.limit }
func (r *ring[T]) empty() bool { return r.size == 0 }

// at returns the i-th oldest element. On a ring that never held one it
// returns a zero element nobody else sees (a stray ACK may ask for the
// head of a send queue that was never posted to).
func (r *ring[T]) at(i int) *T {
	if len(r.slots) == 0 {
		return new(T)
	}
	return &r.slots[r.wrap(r.head+i)]
}

// wrap maps a position past the head onto the storage: a subtraction, not
// a division (the ring is looked at several times per packet; a 64-bit
// division costs tens of cycles). Positions are head plus an index below
// the storage's length, so one subtraction is enough; the modulo is
// there for any other.
func (r *ring[T]) wrap(j int) int {
	if n := len(r.slots); j >= n {
		j -= n
		if j >= n {
			j %= n
		}
	}
	return j
}

// grow returns the slot after the newest, now part of the ring, first
// doubling the storage if it is full (the caller has checked full()).
func (r *ring[T]) grow() *T {
	if r.size == len(r.slots) {
		r.resize(min(r.limit, max(ringMin, 2*len(r.slots))))
	}
	p := &r.slots[r.wrap(r.head+r.size)]
	r.size++
	r.peak = max(r.peak, r.size)
	return p
}

// shift drops the oldest element; the ring must not be empty.
func (r *ring[T]) shift() {
	if r.size == 0 {
		panic("nic: shift of an empty queue (a WQE retired twice)")
	}
	r.head = r.wrap(r.head + 1)
	r.size--
	r.turns++
}

// resize moves the ring to storage of n slots (n >= size), oldest first,
// carrying over the slots' own buffers while they fit.
func (r *ring[T]) resize(n int) {
	s := make([]T, n)
	for i := range min(n, len(r.slots)) {
		s[i] = r.slots[r.wrap(r.head+i)]
	}
	r.slots, r.head, r.peak, r.turns = s, 0, r.size, 0
}

// trim gives back storage a burst left unused: each time the ring, empty,
// has turned over four times its storage since the last look, it shrinks
// to the most it held meanwhile if that was at most half of it. Called
// where no pointer into the ring is kept (a post), it costs an allocation
// only when use has fallen, never in steady use.
func (r *ring[T]) trim() {
	if r.size != 0 || r.turns < 4*len(r.slots) || len(r.slots) <= ringMin {
		return
	}
	if n := max(ringMin, r.peak); 2*r.peak <= len(r.slots) && n < len(r.slots) {
		r.resize(n)
		return
	}
	r.peak, r.turns = 0, 0
}

// knownQPType reports whether the kernel's uverbs knows qp_type t
// (create_qp: RC, UC, UD, RAW_PACKET, XRC_INI, DRIVER; XRC_TGT too, but
// only with an XRC domain in the PD's place, which the model has not):
// an unknown one is EINVAL there, a known one reaches the driver, and
// rxe_qp_chk_init refuses all but RC, UC and UD (and GSI) with
// EOPNOTSUPP, once the PD and the CQs have been looked up and before the
// capacities are checked. (The kernel wants CAP_NET_RAW for RAW_PACKET
// first, EPERM without; the model has no privileges: it answers as to
// root.)
func knownQPType(t QPType) bool {
	switch t {
	case QPTypeRC, QPTypeUC, QPTypeUD, qpTypeRawPacket, qpTypeXRCSend, qpTypeDriver:
		return true
	}
	return false
}

// The QP types uverbs knows and the model does not serve, with
// <infiniband/verbs.h>'s values (not exported: verbs/vocab_test.go says
// why they are left out).
const (
	qpTypeRawPacket QPType = 8    // IBV_QPT_RAW_PACKET
	qpTypeXRCSend   QPType = 9    // IBV_QPT_XRC_SEND
	qpTypeDriver    QPType = 0xff // IBV_QPT_DRIVER
)

// CreateQP creates a queue pair in pd, in state RESET.
func (d *Device) CreateQP(pd *PD, ia QPInitAttr) (*QP, error) {
	switch {
	case !d.livePD(pd):
		return nil, errno(syscall.EINVAL, "create_qp: not a live PD of this device")
	case !knownQPType(ia.Type):
		return nil, errno(syscall.EINVAL, "create_qp: qp_type %v unknown", ia.Type)
	case ia.SendCQ == nil || ia.RecvCQ == nil:
		return nil, errno(syscall.EINVAL, "create_qp: send_cq and recv_cq are required")
	case ia.SendCQ.dead || ia.SendCQ.dev != d:
		return nil, errno(syscall.EINVAL, "create_qp: send_cq is not a live CQ of this device")
	case ia.RecvCQ.dead || ia.RecvCQ.dev != d:
		return nil, errno(syscall.EINVAL, "create_qp: recv_cq is not a live CQ of this device")
	case ia.SRQ != nil && !d.liveSRQ(ia.SRQ):
		return nil, errno(syscall.EINVAL, "create_qp: srq is not a live SRQ of this device")
	case ia.Type != QPTypeRC && ia.Type != QPTypeUC && ia.Type != QPTypeUD:
		return nil, errno(syscall.EOPNOTSUPP, "create_qp: qp_type %v not supported (RC, UC or UD)", ia.Type)
	case ia.Cap.MaxSendWR < 1 || int(ia.Cap.MaxSendWR) > d.attr.MaxQPWR:
		return nil, errno(syscall.EINVAL, "create_qp: cap.max_send_wr %d out of range 1..%d", ia.Cap.MaxSendWR, d.attr.MaxQPWR)
	case ia.SRQ == nil && (ia.Cap.MaxRecvWR < 1 || int(ia.Cap.MaxRecvWR) > d.attr.MaxQPWR):
		return nil, errno(syscall.EINVAL, "create_qp: cap.max_recv_wr %d out of range 1..%d", ia.Cap.MaxRecvWR, d.attr.MaxQPWR)
	case int(ia.Cap.MaxSendSGE) > d.attr.MaxSGE:
		return nil, errno(syscall.EINVAL, "create_qp: cap.max_send_sge %d over the device maximum %d", ia.Cap.MaxSendSGE, d.attr.MaxSGE)
	case int(ia.Cap.MaxRecvSGE) > d.attr.MaxSGE:
		return nil, errno(syscall.EINVAL, "create_qp: cap.max_recv_sge %d over the device maximum %d", ia.Cap.MaxRecvSGE, d.attr.MaxSGE)
	case int(ia.Cap.MaxInlineData) > d.attr.MaxInlineData:
		return nil, errno(syscall.EINVAL, "create_qp: cap.max_inline_data %d over the device maximum %d", ia.Cap.MaxInlineData, d.attr.MaxInlineData)
	}
	if err := d.qpCount.take("create_qp", "max_qp"); err != nil {
		return nil, err
	}
	if ia.SRQ != nil {
		ia.Cap.MaxRecvWR, ia.Cap.MaxRecvSGE = 0, 0
	}
	held := ia.Cap // what the queues hold: the QP's attributes (query_qp)
	if d.cfg.Profile == ProfileRXE {
		ia.Cap, held = rxeQPCaps(ia.Cap, ia.SRQ != nil)
	}
	qp := &QP{dev: d, num: d.allocQPN(), init: ia, pd: pd, seq: d.qpSeq, slot: noSlot}
	d.qpSeq++
	// The queues get storage as work requests arrive, and each slot its
	// SGE and inline buffers on its first use (ring).
	qp.sq.init(int(held.MaxSendWR))
	if ia.SRQ == nil {
		qp.rq.init(int(held.MaxRecvWR))
	} else {
		qp.resp.srqWQE = new(recvWQE)
		ia.SRQ.refs++
	}
	qp.attr.Cap = held
	qp.attr.PortNum = 1
	ia.SendCQ.refs++
	ia.RecvCQ.refs++
	pd.refs++
	d.qps.put(qp.num, qp)
	qp.tx = d.txSlotFor(qp)
	qp.listed = len(d.qpList)
	d.qpList = append(d.qpList, qp)
	return qp, nil
}

// rxeQPCaps returns the capacities rxe gives a QP that asks for c: what
// create_qp hands back (created) and what the QP then has, as query_qp
// reports and its queues hold (held). Linux 6.1's rxe_qp_init_req sizes
// a send WQE to the larger of max_send_sge SGEs (16 bytes each) and
// max_inline_data, and gives both back at that size: max_send_sge 2 with
// max_inline_data 64 becomes 4 and 64, max_send_sge 1 with no inline
// data 1 and 16. rxe_queue_init makes each queue a power of two slots,
// one of them kept empty: max_send_wr 16 holds 31. create_qp's answer
// keeps the work request counts asked for (rxe writes back only the SGE
// and inline sizes); query_qp has the rounded ones. Seen in the
// conformance guest (TestNewPostRxe, newpost.c's caps lines).
func rxeQPCaps(c QPCap, srq bool) (created, held QPCap) {
	wqe := max(c.MaxSendSGE*16, c.MaxInlineData)
	c.MaxSendSGE, c.MaxInlineData = wqe/16, wqe
	created, held = c, c
	held.MaxSendWR = RXEQueueSlots(c.MaxSendWR)
	if !srq {
		held.MaxRecvWR = RXEQueueSlots(c.MaxRecvWR)
	}
	return created, held
}

// RXEQueueSlots is the number of entries an rxe queue (a CQ, a QP's send
// or receive queue, an SRQ) asked to hold n holds: rxe_queue_init makes
// it a power of two slots and keeps one empty, so roundup_pow_of_two(n+1)
// - 1 (16 holds 31, 4 holds 7).
func RXEQueueSlots(n uint32) uint32 { return 1<<bits.Len32(n) - 1 }

// unlistQP takes qp out of d.qpList, keeping the others in creation order
// (EachQP reports in that order): its place becomes a hole, and the list is
// compacted once holes are half of it, so a destroy costs O(1) amortised
// however many QPs live.
func (d *Device) unlistQP(qp *QP) {
	d.qpList[qp.listed] = nil
	d.qpHoles++
	if d.qpHoles <= len(d.qpList)/2 {
		return
	}
	n := 0
	for _, q := range d.qpList {
		if q != nil {
			q.listed = n
			d.qpList[n] = q
			n++
		}
	}
	clear(d.qpList[n:])
	d.qpList, d.qpHoles = d.qpList[:n], 0
}

// allocQPN returns the first free QPN at or after the one after the last
// handed out, wrapping from the top of the range to its bottom: rxe's
// __rxe_add_to_pool takes QP indices (QPNs) with xa_alloc_cyclic over
// [RXE_MIN_QP_INDEX, RXE_MAX_QP_INDEX], so a destroyed QP's number comes
// back only after the range has gone round. Index 16 is the GSI QP's (its
// QPN is 1; taken in New), so user QPs start at 0x11. The search costs
// the same however many QPNs are live (idSet). The caller has taken a
// place in qpCount, so a free QPN exists.
func (d *Device) allocQPN() uint32 {
	n, ok := d.qpns.next(d.nextQPN, rxeMinQPIndex, d.maxQPIndex)
	if !ok {
		panic("nic: no free QPN although qpCount had room")
	}
	d.nextQPN = n + 1
	if d.nextQPN > d.maxQPIndex {
		d.nextQPN = rxeMinQPIndex
	}
	return n
}

// Num returns the QP number.
func (qp *QP) Num() uint32 { return qp.num }

// State returns the current state.
func (qp *QP) State() QPState { return qp.state }

// Type returns the QP type.
func (qp *QP) Type() QPType { return qp.init.Type }

// Query returns the QP's attributes and creation attributes.
func (qp *QP) Query() (QPAttr, QPInitAttr) {
	a := qp.attr
	a.QPState, a.CurQPState = qp.state, qp.state
	return a, qp.init
}

// qpByNum finds a live QP by number.
func (d *Device) qpByNum(n uint32) *QP { return d.qps.get(n) }

// qpnTable finds a live QP by number for every packet received: pages of
// 256 QPNs, made as QPNs are taken and dropped once empty, so a lookup is
// two loads (a map of a thousand QPs per device took a tenth of the
// alltoall's time at N=1024 in cache misses) and a QP costs 8 bytes of
// table (issue 20). The first pages' pointers (QPNs below 2048, every QP
// of a device with fewer than 2032) sit in the table itself, in the
// device, rather than behind a slice: one dependent cache miss fewer per
// packet received, on a line of its own at scale.
type qpnTable struct {
	low  [qpnLowPages]*qpnPage // low[p] holds QPNs p<<8 … p<<8|255, nil if none is live
	high []*qpnPage            // high[p-qpnLowPages] likewise for the pages after
}

const qpnLowPages = 8

type qpnPage struct {
	qp   [256]*QP
	live int
}

func (t *qpnTable) get(n uint32) *QP {
	p := n >> 8
	var pg *qpnPage
	if p < qpnLowPages {
		pg = t.low[p]
	} else if p -= qpnLowPages; p < uint32(len(t.high)) {
		pg = t.high[p]
	}
	if pg != nil {
		return pg.qp[n&255]
	}
	return nil
}

// page returns where the pointer to n's page is kept, making room for it.
func (t *qpnTable) page(n uint32) **qpnPage {
	p := int(n >> 8)
	if p < qpnLowPages {
		return &t.low[p]
	}
	p -= qpnLowPages
	for len(t.high) <= p {
		t.high = append(t.high, nil)
	}
	return &t.high[p]
}

func (t *qpnTable) put(n uint32, qp *QP) {
	pg := t.page(n)
	if *pg == nil {
		*pg = new(qpnPage)
	}
	(*pg).qp[n&255] = qp
	(*pg).live++
}

func (t *qpnTable) del(n uint32) {
	pg := t.page(n)
	(*pg).qp[n&255] = nil
	if (*pg).live--; (*pg).live == 0 {
		*pg = nil
	}
}

// DestroyQP destroys qp. Outstanding work requests are discarded without
// completions, as ibv_destroy_qp does.
func (d *Device) DestroyQP(qp *QP) error {
	if !d.liveQP(qp) {
		return errno(syscall.EINVAL, "destroy_qp: not a live QP of this device")
	}
	if n := d.mcastAttached(qp); n > 0 {
		// uverbs refuses a user's destroy while the QP has attachments
		// (uverbs_free_qp): detach first.
		return errno(syscall.EBUSY, "destroy_qp: QP %d is still attached to %d multicast group(s); detach_mcast first", qp.num, n)
	}
	qp.dead = true
	qp.init.SendCQ.refs--
	qp.init.RecvCQ.refs--
	if qp.init.SRQ != nil {
		qp.init.SRQ.refs--
	}
	qp.pd.refs--
	d.qps.del(qp.num)
	d.qpns.free(qp.num)
	d.unlistQP(qp)
	d.retime(qp) // dead: out of the timer heap
	d.txRelease(qp)
	d.qpCount.put()
	return nil
}

// ModifyQP applies attr (the fields named by mask) and moves the QP to
// attr.QPState if mask has QPAttrState. An illegal transition, a missing or
// extra attribute or a bad value returns EINVAL and changes nothing.
func (d *Device) ModifyQP(now sim.Time, qp *QP, attr *QPAttr, mask QPAttrMask) error {
	if !d.liveQP(qp) {
		return errno(syscall.EINVAL, "modify_qp: not a live QP of this device")
	}
	if attr == nil {
		return errno(syscall.EINVAL, "modify_qp: attr is nil")
	}
	next, err := CheckModify(qp.init.Type, qp.state, attr, mask, Limits{
		MaxQPRdAtom: uint8(min(d.attr.MaxQPRdAtom, 255)), MaxQPInitRdAtom: uint8(min(d.attr.MaxQPInitRdAtom, 255)),
		PortCount: 1, PKeyTableLen: 1,
	})
	if err != nil {
		return err
	}
	var dmac wire.MAC
	if mask&QPAttrAV != 0 {
		if err := d.checkAV("modify_qp", &attr.AHAttr); err != nil {
			return err
		}
		dgid := attr.AHAttr.GRH.DGID.Unmap()
		var ok bool
		if dmac, ok = d.neighbour(dgid); !ok {
			return errno(syscall.EINVAL, "modify_qp: no route to GID %v (unknown neighbour)", attr.AHAttr.GRH.DGID)
		}
	}
	if mask&QPAttrPathMTU != 0 && attr.PathMTU > d.cfg.PathMTUMax {
		return errno(syscall.EINVAL, "modify_qp: path_mtu %d bytes over the port's %d", attr.PathMTU.Bytes(), d.cfg.PathMTUMax.Bytes())
	}
	qp.apply(attr, mask)
	if mask&QPAttrAV != 0 {
		// Resolved once, as the kernel fills the AV's destination MAC at
		// modify_qp (ib_resolve_eth_dmac): no lookup per frame.
		qp.dmac = dmac
	}
	if mask&QPAttrState != 0 {
		d.transition(now, qp, next)
	}
	if d.cfg.PeerHint != nil && (qp.init.Type == QPTypeRC || qp.init.Type == QPTypeUC) &&
		(mask&(QPAttrAV|QPAttrDestQPN) != 0 || mask&QPAttrState != 0 && next == QPStateRTR) {
		qp.peer = d.cfg.PeerHint(qp.attr.AHAttr.GRH.DGID.Unmap(), qp.attr.DestQPNum)
	}
	return nil
}

// checkAV checks an address vector's port and source GID index against
// the device, as the kernel does before it resolves one: modify_qp
// refuses an AV whose port is not valid (rdma_is_port_valid) and the
// source GID lookup (rdma_get_gid_attr) an index beyond the GID table,
// both with EINVAL.
func (d *Device) checkAV(verb string, ah *AHAttr) error {
	if ah.PortNum != 1 {
		return errno(syscall.EINVAL, "%s: ah_attr.port_num %d out of range 1..1", verb, ah.PortNum)
	}
	if n := len(d.GIDs()); int(ah.GRH.SGIDIndex) >= n {
		return errno(syscall.EINVAL, "%s: ah_attr.grh.sgid_index %d out of range 0..%d", verb, ah.GRH.SGIDIndex, n-1)
	}
	return nil
}

// isLocal reports whether gid (unmapped) is one of the device's
// addresses. It runs for every received packet, so it allocates nothing.
func (d *Device) isLocal(gid netip.Addr) bool {
	return gid.IsValid() && (gid == d.cfg.IPv4 || gid == d.cfg.IPv6)
}

// apply copies the attributes named by mask into the QP.
func (qp *QP) apply(a *QPAttr, m QPAttrMask) {
	c := &qp.attr
	set := func(bit QPAttrMask, f func()) {
		if m&bit != 0 {
			f()
		}
	}
	set(QPAttrAccessFlags, func() { c.QPAccessFlags = a.QPAccessFlags })
	set(QPAttrPKeyIndex, func() { c.PKeyIndex = a.PKeyIndex })
	set(QPAttrPort, func() { c.PortNum = a.PortNum })
	set(QPAttrQKey, func() { c.QKey = a.QKey })
	set(QPAttrAV, func() { c.AHAttr = a.AHAttr })
	set(QPAttrPathMTU, func() { c.PathMTU = a.PathMTU })
	set(QPAttrTimeout, func() { c.Timeout, qp.req.timeout = a.Timeout, a.Timeout })
	set(QPAttrRetryCnt, func() { c.RetryCnt, qp.req.retryCnt, qp.req.retries = a.RetryCnt, a.RetryCnt, int(a.RetryCnt) })
	set(QPAttrRNRRetry, func() { c.RNRRetry, qp.req.rnrRetry, qp.req.rnrRetries = a.RNRRetry, a.RNRRetry, int(a.RNRRetry) })
	set(QPAttrRQPSN, func() { c.RQPSN = a.RQPSN & wire.PSNMask; qp.resp.epsn = wire.PSN(c.RQPSN) })
	set(QPAttrMaxQPRdAtomic, func() { c.MaxRdAtomic = a.MaxRdAtomic })
	set(QPAttrMinRNRTimer, func() { c.MinRNRTimer = a.MinRNRTimer })
	set(QPAttrSQPSN, func() {
		c.SQPSN = a.SQPSN & wire.PSNMask
		qp.req.psn, qp.req.highest = wire.PSN(c.SQPSN), wire.PSN(c.SQPSN)
	})
	set(QPAttrMaxDestRdAtomic, func() { c.MaxDestRdAtomic = a.MaxDestRdAtomic })
	set(QPAttrDestQPN, func() { c.DestQPNum = a.DestQPNum })
	set(QPAttrEnSQDAsyncNotify, func() { c.EnSQDAsyncNotify = a.EnSQDAsyncNotify })
}

// transition moves the QP to state next (already validated) and does what
// entering that state implies.
func (d *Device) transition(now sim.Time, qp *QP, next QPState) {
	prev := qp.state
	qp.state = next
	d.retime(qp)
	d.traceState(now, qp, prev, next)
	switch next {
	case QPStateReset:
		qp.reset()
	case QPStateErr:
		d.flush(now, qp)
	case QPStateRTS:
		if prev == QPStateRTR {
			qp.connectedAt = now
		}
		d.requesterRun(now, qp)
	case QPStateSQD:
		if qp.attr.EnSQDAsyncNotify && !qp.req.sentAny() {
			d.raise(AsyncEvent{Type: EventSQDrained, QP: qp, Time: now})
		}
	}
}

// reset empties both queues without completions and forgets the
// transport state, as a move to RESET does.
func (qp *QP) reset() {
	// A move to RESET is a verb: nothing holds a WQE, so the queues give
	// their storage back.
	qp.sq.init(qp.sq.limit)
	qp.rq.init(qp.rq.limit)
	qp.req = requester{}
	qp.resp = responder{srqWQE: qp.resp.srqWQE}
	c := qp.attr.Cap
	qp.attr = QPAttr{Cap: c, PortNum: 1}
	qp.peer = Hint{}
}

// toError moves the QP to ERR after a failure the device found itself
// (retry exhausted, remote error, CQ overflow), raising no event.
func (d *Device) toError(now sim.Time, qp *QP) {
	if qp.state == QPStateErr {
		return
	}
	d.transition(now, qp, QPStateErr)
}

// toErrorRaising is toError that first raises the affiliated event ev
// (QP_FATAL, QP_REQ_ERR, QP_ACCESS_ERR) for the QP, unless it is in ERR
// already.
func (d *Device) toErrorRaising(now sim.Time, qp *QP, ev AsyncEventType) {
	if qp.state != QPStateErr {
		d.raise(AsyncEvent{Type: ev, QP: qp, Time: now})
	}
	d.toError(now, qp)
}

// flush completes every outstanding work request, send queue first, then
// receive queue, each in posting order, with WR_FLUSH_ERR (IBTA
// §10.3.1: a QP in ERR flushes). Send WRs that failed before completing
// keep their own status on the first one.
func (d *Device) flush(now sim.Time, qp *QP) {
	for !qp.sq.empty() {
		w := qp.sq.at(0)
		st := WCWRFlushErr
		if w.done && w.status != WCSuccess {
			st = w.status
		}
		qp.sq.shift() // first, as everywhere a WQE completes
		d.completeSend(now, qp, w, st)
	}
	qp.req = requester{psn: qp.req.psn}
	d.retime(qp)
	if qp.init.SRQ == nil {
		for !qp.rq.empty() {
			w := qp.rq.at(0)
			qp.rq.shift()
			d.completeRecv(now, qp, WC{WRID: w.wrid, Status: WCWRFlushErr, Opcode: WCRecv, QPNum: qp.num}, unsolicited)
		}
	} else if d.cfg.Profile != ProfileRXE {
		// A QP on an SRQ has no receives of its own to flush; IBTA
		// §11.5.2.5 has it report the last WQE instead. rxe 6.1 raises
		// nothing (seen on real rxe: conformance TestLongMessageMatchesRxe
		// with an SRQ; later kernels added the event).
		d.raise(AsyncEvent{Type: EventQPLastWQEReached, QP: qp, Time: now})
	}
}

// completeSend posts the completion of a send WQE, if it is signaled or
// failed (an error always completes, IBTA §10.7.3.1).
func (d *Device) completeSend(now sim.Time, qp *QP, w *sendWQE, st WCStatus) {
	if st == WCSuccess && (w.wr.Opcode == WRSend || w.wr.Opcode == WRSendWithImm || w.wr.Opcode == WRSendWithInv) {
		d.counters.Add(CounterRDMASends, 1)
	}
	if st == WCSuccess && !w.signaled {
		return
	}
	wc := WC{WRID: w.wr.WRID, Status: st, Opcode: wcOpcodeOf(w.wr.Opcode), QPNum: qp.num}
	if st == WCSuccess {
		wc.ByteLen = sendByteLen(d.cfg.Profile, w)
		wc.WCFlags = sendFlags(d.cfg.Profile, w.wr.Opcode)
	}
	var why wcReason
	if st != WCSuccess && st != WCWRFlushErr {
		why = w.why
	}
	d.pushCQE(now, qp, qp.init.SendCQ, wc, unsolicited, sendSide, why)
}

// sendByteLen is the byte_len of a successful send-side completion. The
// IBTA leaves it undefined there (libibverbs: valid for receive
// completions only); ProfileSpec reports the bytes that landed in local
// memory: a READ's length, an atomic's 8, nothing for a SEND or WRITE.
// rxe's make_send_cqe (rxe_comp.c) reports the WQE's message length,
// wqe->dma.length, for every opcode. A failed or flushed completion has 0
// in both: rxe fills byte_len only on success.
func sendByteLen(p Profile, w *sendWQE) uint32 {
	if p == ProfileRXE {
		return uint32(w.length)
	}
	switch w.wr.Opcode {
	case WRRDMARead:
		return uint32(w.length)
	case WRAtomicCmpAndSwp, WRAtomicFetchAndAdd:
		return 8
	}
	return 0
}

// completeRecv posts a receive completion.
func (d *Device) completeRecv(now sim.Time, qp *QP, wc WC, se solicitation) {
	d.pushCQE(now, qp, qp.init.RecvCQ, wc, se, recvSide, wcReason{})
}

// failRecv retires the receive WQE in use, w, and posts its failed
// completion saying why. The WQE is retired first: the completion may
// overflow the CQ and move the QP to ERR, whose flush must not find (and
// complete, and retire) the same WQE again.
func (d *Device) failRecv(now sim.Time, qp *QP, w *recvWQE, st WCStatus, why wcReason) {
	wrid := w.wrid
	qp.doneRecv()
	d.pushCQE(now, qp, qp.init.RecvCQ, WC{WRID: wrid, Status: st, Opcode: WCRecv, QPNum: qp.num}, unsolicited, recvSide, why)
}

// pushCQE adds wc to cq. On overflow the completion is lost and the CQ
// raises CQ_ERR. What follows depends on the profile.
//
// ProfileSpec follows IBTA vol. 1 C11-37: "The CI shall generate a CQ
// Error when a CQ overrun is detected. This condition will result in an
// Affiliated Asynchronous Error for any associated Work Queues when they
// attempt to use that CQ. Completions can no longer be added to the CQ."
// and C9-218 (requester class F: the CQ full when a WQE completes; "the
// affected QP shall be moved to the error state and affiliated
// asynchronous errors generated as described in 11.6.3.1"). So one
// CQ_ERR; the CQ is in error from then on, even once it has room; the QP
// that tried moves to ERR and raises QP_FATAL (the Local Work Queue
// Catastrophic Error of §11.6.3.1); every other QP feeding the CQ does the
// same when, and only when, it next completes into it. (The statements
// as quoted in Linux commit "IB/{hfi1, qib, rdmavt}: Put qp in error
// state when cq is full".)
//
// ProfileRXE does what rxe does: rxe_cq_post raises CQ_ERR on every failed
// post (real rxe raised it three times in the cq-overflow scenario) and
// the CQ takes completions again once polled; a lost receive completion
// moves the QP to ERR without an event (the responder's
// RESPST_ERR_CQ_OVERFLOW), a lost send completion is lost silently and
// the QP runs on (rxe_comp.c ignores the failure of rxe_cq_post).
func (d *Device) pushCQE(now sim.Time, qp *QP, cq *CQ, wc WC, se solicitation, side cqSide, why wcReason) {
	d.traceCompletion(now, qp, wc, why)
	spec := d.cfg.Profile == ProfileSpec
	d.outbox.tookCompletion(cq)
	if !(spec && cq.errRaised) {
		armed := cq.armed && cq.ch != nil
		pushed := cq.push(wc, se)
		if armed && !cq.armed { // the push queued an event on the channel
			d.outbox.tookEvent(cq.ch)
		}
		if pushed {
			return
		}
	}
	if !cq.errRaised || !spec {
		cq.errRaised = true
		d.raise(AsyncEvent{Type: EventCQErr, CQ: cq, Time: now})
	}
	if spec {
		// The flush that follows completes into the same CQ and fails
		// again: toError does nothing for a QP already in ERR.
		d.toErrorRaising(now, qp, EventQPFatal)
		return
	}
	if side == sendSide {
		return
	}
	if qp.state != QPStateErr {
		d.transition(now, qp, QPStateErr)
	}
}

func wcOpcodeOf(o WROpcode) WCOpcode {
	switch o {
	case WRRDMAWrite, WRRDMAWriteWithImm:
		return WCRDMAWrite
	case WRRDMARead:
		return WCRDMARead
	case WRAtomicCmpAndSwp:
		return WCCompSwap
	case WRAtomicFetchAndAdd:
		return WCFetchAdd
	case WRLocalInv:
		return WCLocalInv
	case WRBindMW:
		return WCBindMW
	}
	return WCSend
}
