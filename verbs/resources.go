package verbs

import (
	"net/netip"
	"syscall"

	"github.com/rocesim/rocesim/nic"
	"github.com/rocesim/rocesim/wire"
)

// PD is a protection domain (ibv_pd).
type PD struct {
	c    *Context
	pd   *nic.PD
	slot int // in c.owned
}

// AllocPD allocates a protection domain (ibv_alloc_pd).
func (c *Context) AllocPD() (*PD, error) {
	if err := c.usable("alloc_pd"); err != nil {
		return nil, err
	}
	pd, err := c.dev().AllocPD()
	if err != nil {
		return nil, err
	}
	v := &PD{c: c, pd: pd}
	c.owned.add(&v.slot, func() { c.dev().DeallocPD(pd) })
	return v, nil
}

// Dealloc frees the PD (ibv_dealloc_pd); EBUSY while it is in use.
func (p *PD) Dealloc() error {
	if p == nil {
		return nilObject("dealloc_pd", "pd")
	}
	if err := p.c.usable("dealloc_pd"); err != nil {
		return err
	}
	return p.c.destroyed(p.slot, p.c.dev().DeallocPD(p.pd))
}

// MR is a registered memory region (ibv_mr). Addr is a simulated virtual
// address, the same on every run; LKey and RKey are the keys work
// requests and peers name it by.
type MR struct {
	Addr   uint64
	Length uint64
	LKey   uint32
	RKey   uint32
	c      *Context
	mr     *nic.MR
	slot   int // in c.owned
}

// RegMR registers buf (ibv_reg_mr). The device reads and writes buf
// directly, as a NIC does with pinned memory.
func (p *PD) RegMR(buf []byte, access AccessFlags) (*MR, error) {
	return p.regMR(buf, access, func() (*nic.MR, error) { return p.c.dev().RegMR(p.pd, buf, access) })
}

// RegMRAt registers buf at the address addr (nic.Device.RegMRAt): the
// MR's Addr, and the address peers name in RDMA WRITEs, READs and
// atomics, is addr, as a real device's is the program's pointer (or
// ibv_reg_mr_iova's iova). The drop-in library registers so on a fabric
// of processes, where a peer names this process's own addresses.
func (p *PD) RegMRAt(buf []byte, addr uint64, access AccessFlags) (*MR, error) {
	return p.regMR(buf, access, func() (*nic.MR, error) { return p.c.dev().RegMRAt(p.pd, buf, addr, access) })
}

func (p *PD) regMR(buf []byte, access AccessFlags, reg func() (*nic.MR, error)) (*MR, error) {
	if p == nil {
		return nil, nilObject("reg_mr", "pd")
	}
	if err := p.c.usable("reg_mr"); err != nil {
		return nil, err
	}
	mr, err := reg()
	if err != nil {
		return nil, err
	}
	v := &MR{Addr: mr.Addr, Length: mr.Length, LKey: mr.LKey, RKey: mr.RKey, c: p.c, mr: mr}
	p.c.owned.add(&v.slot, func() { p.c.dev().DeregMR(mr) })
	return v, nil
}

// Bytes returns the registered buffer (nil for a nil MR).
func (m *MR) Bytes() []byte {
	if m == nil {
		return nil
	}
	return m.mr.Bytes()
}

// Dereg deregisters the MR (ibv_dereg_mr).
func (m *MR) Dereg() error {
	if m == nil {
		return nilObject("dereg_mr", "mr")
	}
	if err := m.c.usable("dereg_mr"); err != nil {
		return err
	}
	return m.c.destroyed(m.slot, m.c.dev().DeregMR(m.mr))
}

// SGE returns a scatter/gather element for bytes [off, off+n) of the MR
// (the zero SGE, whose L_Key resolves to nothing, for a nil MR).
func (m *MR) SGE(off, n uint64) SGE {
	if m == nil {
		return SGE{}
	}
	return SGE{Addr: m.Addr + off, Length: uint32(n), LKey: m.LKey}
}

// CompChannel is a completion event channel (ibv_comp_channel).
type CompChannel struct {
	c    *Context
	ch   *nic.CompChannel
	slot int // in c.owned
}

// CreateCompChannel creates a completion channel (nil on a nil or
// closed context; CreateCQ takes nil as no channel).
func (c *Context) CreateCompChannel() *CompChannel {
	if c.usable("create_comp_channel") != nil {
		return nil
	}
	ch := c.dev().CreateCompChannel()
	v := &CompChannel{c: c, ch: ch}
	c.owned.add(&v.slot, func() { c.dev().DestroyCompChannel(ch) })
	return v
}

// Destroy destroys the channel (ibv_destroy_comp_channel); EBUSY while
// CQs created on it exist.
func (ch *CompChannel) Destroy() error {
	if ch == nil {
		return nilObject("destroy_comp_channel", "channel")
	}
	if err := ch.c.usable("destroy_comp_channel"); err != nil {
		return err
	}
	return ch.c.destroyed(ch.slot, ch.c.dev().DestroyCompChannel(ch.ch))
}

// CQ is a completion queue (ibv_cq).
type CQ struct {
	c    *Context
	cq   *nic.CQ
	ch   *CompChannel
	slot int // in c.owned
}

// CreateCQ creates a completion queue of cqe entries (ibv_create_cq); ch
// may be nil.
func (c *Context) CreateCQ(cqe int, ch *CompChannel, vector int) (*CQ, error) {
	if err := c.usable("create_cq"); err != nil {
		return nil, err
	}
	var nch *nic.CompChannel
	if ch != nil {
		if err := sameContext("create_cq", "channel", ch.c, c); err != nil {
			return nil, err
		}
		nch = ch.ch
	}
	cq, err := c.dev().CreateCQ(cqe, nch, vector)
	if err != nil {
		return nil, err
	}
	v := &CQ{c: c, cq: cq, ch: ch}
	c.h.cqs[cq] = v
	c.owned.add(&v.slot, func() {
		cq.AckEvents(cq.EventsUnacked()) // the kernel does not wait for them on close
		c.dev().DestroyCQ(cq)
		delete(c.h.cqs, cq)
	})
	return v, nil
}

// CQE returns the CQ's capacity (0 for a nil CQ).
func (q *CQ) CQE() int {
	if q == nil {
		return 0
	}
	return q.cq.CQE()
}

// Poll copies up to len(wcs) completions into wcs, oldest first, and
// returns how many (ibv_poll_cq). A nil CQ, or one of a closed context,
// has none.
func (q *CQ) Poll(wcs []WC) int {
	if q == nil || q.c.usable("poll_cq") != nil {
		return 0
	}
	return q.cq.Poll(wcs)
}

// ReqNotify arms the CQ to signal its channel on the next completion (or
// the next solicited one) (ibv_req_notify_cq).
func (q *CQ) ReqNotify(solicitedOnly bool) error {
	if q == nil {
		return nilObject("req_notify_cq", "cq")
	}
	if err := q.c.usable("req_notify_cq"); err != nil {
		return err
	}
	return q.cq.ReqNotify(solicitedOnly)
}

// Resize changes the CQ's capacity (ibv_resize_cq).
func (q *CQ) Resize(cqe int) error {
	if q == nil {
		return nilObject("resize_cq", "cq")
	}
	if err := q.c.usable("resize_cq"); err != nil {
		return err
	}
	return q.cq.Resize(cqe)
}

// AckEvents acknowledges n events of this CQ (ibv_ack_cq_events); it
// does nothing on a nil CQ.
func (q *CQ) AckEvents(n int) {
	if q == nil {
		return
	}
	q.cq.AckEvents(n)
}

// Destroy destroys the CQ (ibv_destroy_cq); EBUSY while QPs use it or
// events are unacknowledged.
func (q *CQ) Destroy() error {
	if q == nil {
		return nilObject("destroy_cq", "cq")
	}
	if err := q.c.usable("destroy_cq"); err != nil {
		return err
	}
	if err := q.c.dev().DestroyCQ(q.cq); err != nil {
		return err
	}
	// The host's map takes channel events back to CQs; a destroyed CQ
	// has none left (DestroyCQ purged them), and keeping it would grow
	// the map with every CQ ever created.
	delete(q.c.h.cqs, q.cq)
	return q.c.destroyed(q.slot, nil)
}

// GetCQEvent returns the CQ whose completion event is next on the
// channel (ibv_get_cq_event); false if none is pending.
func (ch *CompChannel) GetCQEvent() (*CQ, bool) {
	if ch == nil || ch.c.usable("get_cq_event") != nil {
		return nil, false
	}
	cq, ok := ch.ch.GetEvent()
	if !ok {
		return nil, false
	}
	v, ok := ch.c.h.cqs[cq]
	return v, ok
}

// QPInitAttr are the creation attributes of a QP (ibv_qp_init_attr).
type QPInitAttr struct {
	SendCQ   *CQ
	RecvCQ   *CQ
	SRQ      *SRQ
	Cap      QPCap
	Type     QPType
	SQSigAll bool
}

// QP is a queue pair (ibv_qp).
type QP struct {
	c  *Context
	qp *nic.QP
	// QPNum is the queue pair number a peer addresses.
	QPNum uint32
	slot  int // in c.owned
}

// CreateQP creates a queue pair in state RESET (ibv_create_qp).
func (p *PD) CreateQP(ia QPInitAttr) (*QP, error) {
	if p == nil {
		return nil, nilObject("create_qp", "pd")
	}
	if err := p.c.usable("create_qp"); err != nil {
		return nil, err
	}
	for _, o := range []struct {
		what string
		c    *Context
	}{{"send_cq", ia.SendCQ.context()}, {"recv_cq", ia.RecvCQ.context()}, {"srq", ia.SRQ.context()}} {
		if o.c != nil {
			if err := sameContext("create_qp", o.what, o.c, p.c); err != nil {
				return nil, err
			}
		}
	}
	n := nic.QPInitAttr{Cap: ia.Cap, Type: ia.Type, SQSigAll: ia.SQSigAll}
	if ia.SendCQ != nil {
		n.SendCQ = ia.SendCQ.cq
	}
	if ia.RecvCQ != nil {
		n.RecvCQ = ia.RecvCQ.cq
	}
	if ia.SRQ != nil {
		n.SRQ = ia.SRQ.srq
	}
	qp, err := p.c.dev().CreateQP(p.pd, n)
	if err != nil {
		return nil, err
	}
	v := &QP{c: p.c, qp: qp, QPNum: qp.Num()}
	p.c.owned.add(&v.slot, func() {
		// A closing context takes its QPs out of their multicast
		// groups first, as the kernel does (an explicit Destroy of an
		// attached QP is EBUSY).
		p.c.dev().DetachAll(qp)
		p.c.dev().DestroyQP(qp)
	})
	return v, nil
}

// Context returns the device context the QP was created on (ibv_qp's
// context field): a helper that connects a QP finds its GID through it.
func (q *QP) Context() *Context {
	if q == nil {
		return nil
	}
	return q.c
}

// Modify changes the QP's attributes and state (ibv_modify_qp).
func (q *QP) Modify(attr *QPAttr, mask QPAttrMask) error {
	if q == nil {
		return nilObject("modify_qp", "qp")
	}
	if err := q.c.usable("modify_qp"); err != nil {
		return err
	}
	err := q.c.dev().ModifyQP(q.c.now(), q.qp, attr, mask)
	q.c.h.pump()
	return err
}

// Query returns the QP's attributes (ibv_query_qp); zero values for a
// nil QP.
func (q *QP) Query() (QPAttr, nic.QPInitAttr) {
	if q == nil {
		return QPAttr{}, nic.QPInitAttr{}
	}
	return q.qp.Query()
}

// State returns the QP's current state (RESET for a nil QP).
func (q *QP) State() QPState {
	if q == nil {
		return QPStateReset
	}
	return q.qp.State()
}

// Destroy destroys the QP (ibv_destroy_qp).
func (q *QP) Destroy() error {
	if q == nil {
		return nilObject("destroy_qp", "qp")
	}
	if err := q.c.usable("destroy_qp"); err != nil {
		return err
	}
	return q.c.destroyed(q.slot, q.c.dev().DestroyQP(q.qp))
}

// MulticastQPN is the RemoteQPN of a datagram sent to a multicast group:
// every QP attached to the group (AttachMcast) on every device the
// group's frames reach gets a copy.
const MulticastQPN = wire.MulticastQPN

// AttachMcast attaches the UD QP to the multicast group gid
// (ibv_attach_mcast): an IPv6 multicast GID, or an IPv4 group mapped
// into IPv6 (::ffff:224.0.0.5). lid is ignored on RoCE. A datagram sent
// with an AH whose DGID is the group and RemoteQPN MulticastQPN reaches
// the group's QPs on every host of the fabric that has joined the group
// (Host.JoinGroup; under the spec profile, attaching is enough), the
// sender's own included.
// EINVAL for a GID that is not multicast or a QP that is not UD; ENOMEM
// past rxe's limits (DeviceAttr.MaxMcastGrp, MaxMcastQPAttach,
// MaxTotalMcastQPAttach). Attaching twice is no error.
func (q *QP) AttachMcast(gid netip.Addr, lid uint16) error {
	if q == nil {
		return nilObject("attach_mcast", "qp")
	}
	if err := q.c.usable("attach_mcast"); err != nil {
		return err
	}
	return q.c.dev().AttachMcast(q.qp, gid, lid)
}

// DetachMcast detaches the QP from the multicast group gid
// (ibv_detach_mcast): EINVAL if it is not attached to it. A QP must be
// detached from every group before Destroy (EBUSY), as with uverbs.
func (q *QP) DetachMcast(gid netip.Addr, lid uint16) error {
	if q == nil {
		return nilObject("detach_mcast", "qp")
	}
	if err := q.c.usable("detach_mcast"); err != nil {
		return err
	}
	return q.c.dev().DetachMcast(q.qp, gid, lid)
}

// SendWR is a send work request (ibv_send_wr).
type SendWR struct {
	WRID       uint64
	SGList     []SGE
	Opcode     WROpcode
	Flags      SendFlags
	ImmData    uint32
	RemoteAddr uint64
	RKey       uint32
	CompareAdd uint64
	Swap       uint64
	AH         *AH
	RemoteQPN  uint32
	RemoteQKey uint32
	// InvalidateRKey is the R_Key a SEND_WITH_INV or LOCAL_INV
	// invalidates (invalidate_rkey).
	InvalidateRKey uint32
	// BindMW is what an IBV_WR_BIND_MW binds (bind_mw).
	BindMW BindMWWR
}

// PostSend posts send work requests (ibv_post_send). It returns the index
// of the first WR it refused (len(wrs) when all were posted) and why.
func (q *QP) PostSend(wrs []SendWR) (int, error) {
	if q == nil {
		return 0, nilObject("post_send", "qp")
	}
	if err := q.c.usable("post_send"); err != nil {
		return 0, err
	}
	if q.c.h.out == nil && q.c.h.node.Port(0).Link() == nil {
		// A host never connected has no wire: a set-up mistake, not a
		// state of real rxe, whose device always sits on a netdev. Say so
		// at the call, with the errno a send on a down interface gets.
		// A link that is down (a fault plan's down) is another matter:
		// there, as rxe on a netdev without carrier, the post succeeds
		// and the frames are lost on the wire.
		return 0, errno(syscall.ENETDOWN, "post_send: host %s has no link: join it with World.Connect or ConnectSwitch before sending", q.c.h.name)
	}
	if len(wrs) > postOnStack {
		return q.postLong(wrs)
	}
	var buf [postOnStack]nic.SendWR
	n, bad := q.nicSendWRs(wrs, buf[:0])
	i, err := q.c.dev().PostSend(q.c.now(), q.qp, n)
	q.c.h.pump()
	if err == nil && bad != nil {
		return len(n), bad
	}
	return i, err
}

// postOnStack is how many WRs PostSend converts for the device on its
// stack: a list of up to 8, the common case, costs no allocation and no
// more than that buffer.
const postOnStack = 8

// postLong is PostSend of a list longer than postOnStack, converted into
// the host's storage and kept there for the next (it would otherwise
// allocate at every post). Apart from PostSend, whose stack buffer it
// would otherwise send to the heap at every call; its last lines are
// PostSend's own, written again: a shared function for them cost
// BenchmarkRCWriteStream 2.5% (eight runs each in turns).
func (q *QP) postLong(wrs []SendWR) (int, error) {
	h := q.c.h
	n, bad := q.nicSendWRs(wrs, h.wrs[:0])
	i, err := q.c.dev().PostSend(q.c.now(), q.qp, n)
	// The device copied what it keeps; the WRs' SGE lists are the
	// caller's, not to be held here.
	clear(n)
	h.wrs = n[:0]
	h.pump()
	if err == nil && bad != nil {
		return len(n), bad
	}
	return i, err
}

// CheckSend makes the checks PostSend makes of each WR, all but the
// queue's room (SendRoom), and posts nothing. It returns the index of
// the first WR PostSend would refuse (len(wrs) if none) and why: for a
// caller that posts a batch whole or not at all.
func (q *QP) CheckSend(wrs []SendWR) (int, error) {
	if q == nil {
		return 0, nilObject("post_send", "qp")
	}
	if err := q.c.usable("post_send"); err != nil {
		return 0, err
	}
	var buf [8]nic.SendWR
	n, bad := q.nicSendWRs(wrs, buf[:0])
	if i, err := q.c.dev().CheckSend(q.qp, n); err != nil {
		return i, err
	}
	if bad != nil {
		return len(n), bad
	}
	return len(wrs), nil
}

// nicSendWRs appends the device's form of wrs to n, up to the first WR
// whose AH or memory window the QP cannot use (bad says why; the WRs
// before it are there).
func (q *QP) nicSendWRs(wrs []SendWR, n []nic.SendWR) ([]nic.SendWR, error) {
	for i := range wrs {
		w := &wrs[i]
		if w.AH != nil {
			if err := sameContext("post_send", "wr.ah", w.AH.c, q.c); err != nil {
				return n, err
			}
		}
		nw := nic.SendWR{WRID: w.WRID, SGList: w.SGList, Opcode: w.Opcode, Flags: w.Flags, ImmData: w.ImmData,
			RemoteAddr: w.RemoteAddr, RKey: w.RKey, CompareAdd: w.CompareAdd, Swap: w.Swap,
			RemoteQPN: w.RemoteQPN, RemoteQKey: w.RemoteQKey, InvalidateRKey: w.InvalidateRKey}
		if w.AH != nil {
			nw.AH = w.AH.ah
		}
		if err := q.nicBindMW(&w.BindMW, &nw.BindMW); err != nil {
			return n, err
		}
		n = append(n, nw)
	}
	return n, nil
}

// SendRoom returns how many more send WRs the QP's queue takes now: what
// it holds (its max_send_wr, as rxe rounds it up: QueryQP) less the WRs
// posted and not yet completed (0 for a nil or destroyed QP).
func (q *QP) SendRoom() int {
	if q == nil || q.c.usable("post_send") != nil {
		return 0
	}
	return q.c.dev().SendRoom(q.qp)
}

// PostRecv posts receive work requests (ibv_post_recv).
func (q *QP) PostRecv(wrs []RecvWR) (int, error) {
	if q == nil {
		return 0, nilObject("post_recv", "qp")
	}
	if err := q.c.usable("post_recv"); err != nil {
		return 0, err
	}
	i, err := q.c.dev().PostRecv(q.c.now(), q.qp, wrs)
	q.c.h.pump()
	return i, err
}

// SRQ is a shared receive queue (ibv_srq).
type SRQ struct {
	c         *Context
	srq       *nic.SRQ
	destroyed bool
	slot      int // in c.owned
}

// CreateSRQ creates a shared receive queue (ibv_create_srq).
func (p *PD) CreateSRQ(attr SRQAttr) (*SRQ, error) {
	if p == nil {
		return nil, nilObject("create_srq", "pd")
	}
	if err := p.c.usable("create_srq"); err != nil {
		return nil, err
	}
	s, err := p.c.dev().CreateSRQ(p.pd, attr)
	if err != nil {
		return nil, err
	}
	v := &SRQ{c: p.c, srq: s}
	p.c.owned.add(&v.slot, func() {
		p.c.dev().DestroySRQ(s)
		v.destroyed = true
	})
	return v, nil
}

// Modify resizes the SRQ or arms its limit (ibv_modify_srq).
func (s *SRQ) Modify(attr SRQAttr, mask SRQAttrMask) error {
	if s == nil {
		return nilObject("modify_srq", "srq")
	}
	if err := s.c.usable("modify_srq"); err != nil {
		return err
	}
	return s.c.dev().ModifySRQ(s.srq, attr, mask)
}

// Query returns the SRQ's max_wr, max_sge and armed limit (ibv_query_srq).
func (s *SRQ) Query() (SRQAttr, error) {
	if s == nil {
		return SRQAttr{}, nilObject("query_srq", "srq")
	}
	if err := s.c.usable("query_srq"); err != nil {
		return SRQAttr{}, err
	}
	if s.destroyed {
		return SRQAttr{}, errno(syscall.EINVAL, "query_srq: the SRQ is destroyed")
	}
	return s.srq.Query(), nil
}

// PostRecv posts receive work requests to the SRQ (ibv_post_srq_recv).
func (s *SRQ) PostRecv(wrs []RecvWR) (int, error) {
	if s == nil {
		return 0, nilObject("post_srq_recv", "srq")
	}
	if err := s.c.usable("post_srq_recv"); err != nil {
		return 0, err
	}
	return s.c.dev().PostSRQRecv(s.srq, wrs)
}

// Destroy destroys the SRQ (ibv_destroy_srq).
func (s *SRQ) Destroy() error {
	if s == nil {
		return nilObject("destroy_srq", "srq")
	}
	if err := s.c.usable("destroy_srq"); err != nil {
		return err
	}
	err := s.c.dev().DestroySRQ(s.srq)
	if err == nil {
		s.destroyed = true
	}
	return s.c.destroyed(s.slot, err)
}

// AH is an address handle (ibv_ah), for UD sends.
type AH struct {
	c    *Context
	ah   *nic.AH
	slot int // in c.owned
}

// CreateAH creates an address handle (ibv_create_ah).
func (p *PD) CreateAH(attr AHAttr) (*AH, error) {
	if p == nil {
		return nil, nilObject("create_ah", "pd")
	}
	if err := p.c.usable("create_ah"); err != nil {
		return nil, err
	}
	ah, err := p.c.dev().CreateAH(p.pd, attr)
	if err != nil {
		return nil, err
	}
	v := &AH{c: p.c, ah: ah}
	p.c.owned.add(&v.slot, func() { p.c.dev().DestroyAH(ah) })
	return v, nil
}

// Destroy destroys the AH (ibv_destroy_ah).
func (a *AH) Destroy() error {
	if a == nil {
		return nilObject("destroy_ah", "ah")
	}
	if err := a.c.usable("destroy_ah"); err != nil {
		return err
	}
	return a.c.destroyed(a.slot, a.c.dev().DestroyAH(a.ah))
}

// context returns the CQ's context, or nil for a nil CQ.
func (q *CQ) context() *Context {
	if q == nil {
		return nil
	}
	return q.c
}

// context returns the SRQ's context, or nil for a nil SRQ.
func (s *SRQ) context() *Context {
	if s == nil {
		return nil
	}
	return s.c
}

// ReregFlags say what Rereg changes (ibv_rereg_mr_flags).
type ReregFlags = nic.ReregFlags

// Rereg flags (IBV_REREG_MR_CHANGE_*).
const (
	ReregChangeTranslation = nic.ReregChangeTranslation
	ReregChangePD          = nic.ReregChangePD
	ReregChangeAccess      = nic.ReregChangeAccess
)

// Rereg changes the MR in place (ibv_rereg_mr): with
// ReregChangeTranslation its buffer (buf; Addr and Length follow), with
// ReregChangePD its PD (pd), with ReregChangeAccess its rights (access);
// the keys stay. rxe 6.1 supports none of it: under the rxe profile every
// call that passes libibverbs' own checks fails with EOPNOTSUPP
// (IBV_REREG_MR_ERR_CMD), as real rxe does; the spec profile does what
// is asked.
func (m *MR) Rereg(flags ReregFlags, pd *PD, buf []byte, access AccessFlags) error {
	if m == nil {
		return nilObject("rereg_mr", "mr")
	}
	if err := m.c.usable("rereg_mr"); err != nil {
		return err
	}
	var npd *nic.PD
	if pd != nil {
		if err := sameContext("rereg_mr", "pd", pd.c, m.c); err != nil {
			return err
		}
		npd = pd.pd
	}
	if err := m.c.dev().ReregMR(m.mr, flags, npd, buf, access); err != nil {
		return err
	}
	m.Addr, m.Length = m.mr.Addr, m.mr.Length
	return nil
}
