package verbstest

import (
	"fmt"
	"math/rand/v2"

	"github.com/rocesim/rocesim/sim"
	"github.com/rocesim/rocesim/verbs"
)

// QPOptions describe the QPs Pair, Mesh and Connect make and connect.
// Zero fields take the values ibv_rc_pingpong uses where it has one.
// They apply to both sides unless Peer gives the second side its own.
//
//	// a may have one RDMA READ outstanding; b accepts 16; PSNs start at 0.
//	a, b := w.Pair("a", "b", verbstest.QPOptions{MaxRdAtomic: 1, FixedPSN: true,
//		Peer: &verbstest.QPOptions{FixedPSN: true}})
type QPOptions struct {
	// Type is RC (the zero value) or UC.
	Type verbs.QPType
	// Depth is the send and receive queue depth; 0 means 64. Pair and
	// Mesh give each host a CQ of 2·Depth entries per QP (Depth each
	// with SeparateCQs), and an SRQ of Depth entries per QP.
	Depth int
	// MaxInline is the inline data limit; 0 means none.
	MaxInline int
	// PathMTU is the path MTU; 0 means the largest the link carries (1024
	// on the default link).
	PathMTU verbs.MTU
	// Timeout is the local ACK timeout exponent (4.096 µs · 2^Timeout,
	// which rxe's profile rounds down to whole 4 ms jiffies, at least
	// one: nic.Profile.ACKTimeout); 0 means 14 (67.1 ms, 64 ms under
	// rxe's profile). NoTimeout sets 0, which waits forever.
	Timeout   uint8
	NoTimeout bool
	// RetryCnt is retry_cnt (7 is infinite in rxe); 0 means 7. ZeroRetry
	// sets 0: the first timeout fails the WR.
	RetryCnt  uint8
	ZeroRetry bool
	// RNRRetry is rnr_retry (7 is infinite); 0 means 7. ZeroRNRRetry sets
	// 0: the first RNR NAK fails the WR.
	RNRRetry     uint8
	ZeroRNRRetry bool
	// MinRNRTimer is the RNR timer code a receiver asks for (1–31); 0
	// means 12 (640 µs), as ibv_rc_pingpong asks.
	MinRNRTimer uint8
	// RdAtomic is max_rd_atomic and max_dest_rd_atomic; 0 means 16.
	RdAtomic uint8
	// MaxRdAtomic is max_rd_atomic alone: how many RDMA READs and
	// atomics the QP keeps outstanding as a requester (rxe_req.c counts
	// them in qp->req.rd_atomic); 0 means RdAtomic.
	MaxRdAtomic uint8
	// MaxDestRdAtomic is max_dest_rd_atomic alone: how many the QP
	// accepts as a responder (rxe_resp.c keeps that many responder
	// resources for READ and atomic replies); 0 means RdAtomic.
	MaxDestRdAtomic uint8
	// Access is qp_access_flags, what a remote requester may do to this
	// QP's memory (rxe_resp.c's check_op_valid checks it before the
	// MR's own flags); 0 means remote write, read and atomic for RC, remote write
	// for UC. NoAccess sets 0: every remote READ, WRITE and atomic is
	// refused.
	Access   verbs.AccessFlags
	NoAccess bool
	// FixedPSN makes the QP send from PSN (its sq_psn, and its peer's
	// rq_psn) instead of a PSN drawn from the world's seed, so frames
	// and filters ("psn=2 tx=2") read plainly. The drawn default stays,
	// since it meets PSNs near the 24-bit wrap as real connections do
	// and Seeds varies it.
	FixedPSN bool
	PSN      uint32
	// SeparateCQs gives the QP a send CQ (Endpoint.CQ) and a receive CQ
	// (Endpoint.RecvCQ) instead of one for both. Mesh gives each host
	// one of each, shared by its QPs.
	SeparateCQs bool
	// SRQ attaches the QP to a shared receive queue (Endpoint.SRQ):
	// receives are posted there, and the QP has none of its own. Pair
	// makes one per endpoint, Mesh one per host, shared by its QPs.
	SRQ bool
	// Peer, if set, are the options of the second side (b in Pair(a,
	// b) and Connect(a, b)) instead of these: attributes set on one side
	// only. Its own zero fields take the defaults, not this side's
	// values; its Type must be the same, and its Peer must be nil. Mesh
	// refuses it (which side would be which?).
	Peer *QPOptions
}

// sides returns the options of the first and the second side of a
// connection, each with its defaults.
func (o QPOptions) sides(w *World, what string) (QPOptions, QPOptions) {
	w.t.Helper()
	a, b := o, o
	if o.Peer != nil {
		if o.Peer.Peer != nil {
			w.fatalf("verbstest: %s: QPOptions.Peer.Peer is set: Peer describes the second side, which has no third", what)
		}
		b = *o.Peer
	}
	a.Peer, b.Peer = nil, nil
	a, b = a.defaultsFor(w, what), b.defaultsFor(w, what)
	if a.Type != b.Type {
		w.fatalf("verbstest: %s: QPOptions.Type %v and Peer.Type %v: both sides of a connection have one transport", what, a.Type, b.Type)
	}
	return a, b
}

// withDefaults is defaultsFor with messages that name no call.
func (o QPOptions) withDefaults(w *World) QPOptions {
	w.t.Helper()
	return o.defaultsFor(w, "")
}

// defaultsFor fills in the zero fields of o; what names the call that
// uses o in a failure ("Pair(\"a\", \"b\")"), or is "".
func (o QPOptions) defaultsFor(w *World, what string) QPOptions {
	w.t.Helper()
	pre := "verbstest: "
	if what != "" {
		pre += what + ": "
	}
	if o.Type == 0 {
		o.Type = verbs.QPTypeRC
	}
	if o.Type != verbs.QPTypeRC && o.Type != verbs.QPTypeUC {
		w.fatalf("%sQPOptions.Type %v: Pair, Mesh and Connect connect RC or UC QPs (a UD QP has no peer: create it and an AH with package verbs)", pre, o.Type)
	}
	if o.Depth == 0 {
		o.Depth = 64
	}
	if o.PathMTU == 0 {
		port, err := w.hosts[0].Ctx.QueryPort(1)
		if err != nil {
			w.fatalf("verbstest: query_port: %v", err)
		}
		o.PathMTU = port.ActiveMTU
	}
	if o.Timeout == 0 && !o.NoTimeout {
		o.Timeout = 14
	}
	if o.RetryCnt == 0 && !o.ZeroRetry {
		o.RetryCnt = 7
	}
	if o.RNRRetry == 0 && !o.ZeroRNRRetry {
		o.RNRRetry = 7
	}
	if o.MinRNRTimer == 0 {
		o.MinRNRTimer = 12
	}
	if o.RdAtomic == 0 {
		o.RdAtomic = 16
	}
	if o.MaxRdAtomic == 0 {
		o.MaxRdAtomic = o.RdAtomic
	}
	if o.MaxDestRdAtomic == 0 {
		o.MaxDestRdAtomic = o.RdAtomic
	}
	if o.Access == 0 && !o.NoAccess {
		o.Access = verbs.AccessRemoteWrite
		if o.Type == verbs.QPTypeRC {
			o.Access |= verbs.AccessRemoteRead | verbs.AccessRemoteAtomic
		}
	}
	if o.FixedPSN && o.PSN > 0xFFFFFF {
		w.fatalf("%sQPOptions.PSN 0x%x: a PSN has 24 bits (the BTH's PSN field)", pre, o.PSN)
	}
	return o
}

// Endpoint is one side of a connection Pair or Mesh made, or a UD QP
// (UD), which has no Peer.
type Endpoint struct {
	Host *Host
	QP   *verbs.QP
	// CQ is the QP's send CQ, and its receive CQ too unless
	// QPOptions.SeparateCQs (Mesh shares one per host).
	CQ *verbs.CQ
	// RecvCQ is the QP's receive CQ: CQ itself unless
	// QPOptions.SeparateCQs.
	RecvCQ *verbs.CQ
	// SRQ is the shared receive queue the QP takes its receives from
	// (QPOptions.SRQ), or nil.
	SRQ *verbs.SRQ
	// Peer is the other side.
	Peer *Endpoint
}

// PostRecv posts a receive of sge with wr_id wrid where the QP takes its
// receives from: its SRQ if it has one, else the QP. It fails the test if
// the post fails.
func (e *Endpoint) PostRecv(wrid uint64, sge verbs.SGE) {
	w := e.Host.w
	w.t.Helper()
	wr := []verbs.RecvWR{{WRID: wrid, SGList: []verbs.SGE{sge}}}
	var err error
	if e.SRQ != nil {
		_, err = e.SRQ.PostRecv(wr)
	} else {
		_, err = e.QP.PostRecv(wr)
	}
	if err != nil {
		w.fatalf("verbstest: post_recv on %s: %v", w.qpName(e.QP), err)
	}
}

// queues are the CQs and SRQ a QP is created with.
type queues struct {
	send, recv *verbs.CQ
	srq        *verbs.SRQ
}

// newQueues makes the CQs and SRQ of n QPs with options o on h.
func (w *World) newQueues(h *Host, o QPOptions, n int) queues {
	w.t.Helper()
	var q queues
	if o.SeparateCQs {
		q.send, q.recv = h.CQ(o.Depth*n), h.CQ(o.Depth*n)
	} else {
		q.send = h.CQ(2 * o.Depth * n)
		q.recv = q.send
	}
	if o.SRQ {
		srq, err := h.PD.CreateSRQ(verbs.SRQAttr{MaxWR: uint32(o.Depth * n), MaxSGE: 4})
		if err != nil {
			w.fatalf("verbstest: create_srq of %d entries on %s: %v", o.Depth*n, h.Name(), err)
		}
		q.srq = srq
	}
	return q
}

// endpoint makes a QP on h with queues q and options o.
func (w *World) endpoint(h *Host, q queues, o QPOptions) *Endpoint {
	w.t.Helper()
	e := &Endpoint{Host: h, CQ: q.send, RecvCQ: q.recv, SRQ: q.srq}
	e.QP = w.createQP(h, q, o)
	return e
}

// Pair makes one QP on host a and one on host b, each with its own CQ
// (two with QPOptions.SeparateCQs) and, with QPOptions.SRQ, its own SRQ,
// and connects them (Connect): both are in RTS when it returns.
func (w *World) Pair(a, b string, o QPOptions) (*Endpoint, *Endpoint) {
	w.t.Helper()
	what := fmt.Sprintf("Pair(%q, %q)", a, b)
	oa, ob := o.sides(w, what)
	ha, hb := w.Host(a), w.Host(b)
	if ha == hb {
		w.fatalf("verbstest: %s: a QP pair needs two hosts", what)
	}
	ea := w.endpoint(ha, w.newQueues(ha, oa, 1), oa)
	eb := w.endpoint(hb, w.newQueues(hb, ob, 1), ob)
	ea.Peer, eb.Peer = eb, ea
	w.connect(ea.QP, eb.QP, oa, ob)
	return ea, eb
}

// Mesh connects every pair of hosts with one QP on each side (one RC QP
// per peer, as an application that must not share a QP between peers
// does). Each host's QPs share one CQ (a send and a receive CQ with
// QPOptions.SeparateCQs) and, with QPOptions.SRQ, one SRQ.
func (w *World) Mesh(o QPOptions) *Mesh {
	w.t.Helper()
	if o.Peer != nil {
		w.fatalf("verbstest: Mesh: QPOptions.Peer is set: a mesh's QPs are all alike (connect the odd one with Pair)")
	}
	o = o.defaultsFor(w, "Mesh")
	n := len(w.hosts)
	m := &Mesh{w: w, eps: make([][]*Endpoint, n)}
	qs := make([]queues, n)
	for i, h := range w.hosts {
		qs[i] = w.newQueues(h, o, max(1, n-1))
		m.eps[i] = make([]*Endpoint, n)
	}
	for i := range n {
		for j := i + 1; j < n; j++ {
			a := w.endpoint(w.hosts[i], qs[i], o)
			b := w.endpoint(w.hosts[j], qs[j], o)
			a.Peer, b.Peer = b, a
			w.connect(a.QP, b.QP, o, o)
			m.eps[i][j], m.eps[j][i] = a, b
		}
	}
	return m
}

// Mesh is the set of connections Mesh made.
type Mesh struct {
	w   *World
	eps [][]*Endpoint
}

// Get returns from's endpoint of its connection to to.
func (m *Mesh) Get(from, to string) *Endpoint {
	m.w.t.Helper()
	i, j := indexOf(m.w.hostNames(), from), indexOf(m.w.hostNames(), to)
	if i < 0 || j < 0 || i == j {
		m.w.fatalf("verbstest: Mesh.Get(%q, %q): no such connection", from, to)
	}
	return m.eps[i][j]
}

// CQ returns the CQ all of host's mesh QPs share (their send CQ with
// QPOptions.SeparateCQs; Endpoint.RecvCQ is the receive CQ).
func (m *Mesh) CQ(host string) *verbs.CQ {
	m.w.t.Helper()
	for _, e := range m.eps[indexOf(m.w.hostNames(), m.w.Host(host).Name())] {
		if e != nil {
			return e.CQ
		}
	}
	m.w.fatalf("verbstest: Mesh.CQ(%q): the mesh has one host", host)
	return nil
}

// newQP makes a QP on h whose send and receive CQ is cq.
func (w *World) newQP(h *Host, cq *verbs.CQ, o QPOptions) *verbs.QP {
	w.t.Helper()
	return w.createQP(h, queues{send: cq, recv: cq}, o)
}

// createQP makes a QP on h with the queues q.
func (w *World) createQP(h *Host, q queues, o QPOptions) *verbs.QP {
	w.t.Helper()
	depth := uint32(o.Depth)
	recvWR, recvSGE := depth, uint32(4)
	if q.srq != nil {
		recvWR, recvSGE = 0, 0 // the SRQ's (ibv_create_qp ignores them then)
	}
	qp, err := h.PD.CreateQP(verbs.QPInitAttr{SendCQ: q.send, RecvCQ: q.recv, SRQ: q.srq, Type: o.Type,
		Cap: verbs.QPCap{MaxSendWR: depth, MaxRecvWR: recvWR, MaxSendSGE: 4, MaxRecvSGE: recvSGE,
			MaxInlineData: uint32(o.MaxInline)}})
	if err != nil {
		w.fatalf("verbstest: create_qp on %s: %v", h.Name(), err)
	}
	w.names.qps[qp] = fmt.Sprintf("%s QP 0x%06x", h.Name(), qp.QPNum)
	return qp
}

// Connect takes two QPs in RESET, made by the test or by the code under
// test, through INIT, RTR and RTS toward each other with the attribute
// masks ibv_rc_pingpong uses, RoCE v2 GIDs (index 1) and initial PSNs
// drawn from the world's seed (or QPOptions.PSN). a takes o, b o.Peer if
// set. It fails the test if a modify_qp fails.
func (w *World) Connect(a, b *verbs.QP, o QPOptions) {
	w.t.Helper()
	oa, ob := o.sides(w, "Connect")
	w.connect(a, b, oa, ob)
}

// connect brings a and b up toward each other, with the options of each
// side (defaults applied).
func (w *World) connect(a, b *verbs.QP, oa, ob QPOptions) {
	w.t.Helper()
	// Draw both PSNs even when fixed, so that fixing one side's PSN does
	// not change the PSNs every later connection of the test draws.
	pa, pb := w.psn.next(), w.psn.next()
	if oa.FixedPSN {
		pa = oa.PSN
	}
	if ob.FixedPSN {
		pb = ob.PSN
	}
	w.bringUp(a, b, pa, pb, oa)
	w.bringUp(b, a, pb, pa, ob)
}

// bringUp moves q to RTS toward peer; q sends from psn, peer from
// peerPSN; o are q's own options.
func (w *World) bringUp(q, peer *verbs.QP, psn, peerPSN uint32, o QPOptions) {
	w.t.Helper()
	if err := q.Modify(&verbs.QPAttr{QPState: verbs.QPStateInit, PortNum: 1, QPAccessFlags: o.Access},
		verbs.QPAttrState|verbs.QPAttrPKeyIndex|verbs.QPAttrPort|verbs.QPAttrAccessFlags); err != nil {
		w.fatalf("verbstest: QP 0x%x to INIT: %v", q.QPNum, err)
	}
	gid, err := peer.Context().QueryGID(1, 1)
	if err != nil {
		w.fatalf("verbstest: the GID of QP 0x%x's device: %v", peer.QPNum, err)
	}
	rtr := verbs.QPAttr{QPState: verbs.QPStateRTR, PathMTU: o.PathMTU, DestQPNum: peer.QPNum, RQPSN: peerPSN,
		AHAttr: verbs.AHAttr{IsGlobal: true, PortNum: 1, GRH: verbs.GRH{DGID: gid, HopLimit: 64, SGIDIndex: 1}}}
	mask := verbs.QPAttrState | verbs.QPAttrAV | verbs.QPAttrPathMTU | verbs.QPAttrDestQPN | verbs.QPAttrRQPSN
	if o.Type == verbs.QPTypeRC {
		rtr.MaxDestRdAtomic, rtr.MinRNRTimer = o.MaxDestRdAtomic, o.MinRNRTimer
		mask |= verbs.QPAttrMaxDestRdAtomic | verbs.QPAttrMinRNRTimer
	}
	if err := q.Modify(&rtr, mask); err != nil {
		w.fatalf("verbstest: QP 0x%x to RTR: %v", q.QPNum, err)
	}
	rts := verbs.QPAttr{QPState: verbs.QPStateRTS, SQPSN: psn}
	mask = verbs.QPAttrState | verbs.QPAttrSQPSN
	if o.Type == verbs.QPTypeRC {
		rts.Timeout, rts.RetryCnt, rts.RNRRetry, rts.MaxRdAtomic = o.Timeout, o.RetryCnt, o.RNRRetry, o.MaxRdAtomic
		mask |= verbs.QPAttrTimeout | verbs.QPAttrRetryCnt | verbs.QPAttrRNRRetry | verbs.QPAttrMaxQPRdAtomic
	}
	if err := q.Modify(&rts, mask); err != nil {
		w.fatalf("verbstest: QP 0x%x to RTS: %v", q.QPNum, err)
	}
}

// UD makes an unreliable-datagram QP on host, with its own CQ, in RTS
// with Q_Key qkey. Of o, Depth, MaxInline, FixedPSN and PSN count; a UD
// QP has no peer, one CQ and no SRQ here, so Type, Peer, SeparateCQs,
// SRQ and the RC attributes are ignored.
// Send to it from another UD endpoint with Datagram.
func (w *World) UD(host string, qkey uint32, o QPOptions) *Endpoint {
	w.t.Helper()
	o.Type = verbs.QPTypeRC // for the defaults; the QP is UD
	o.Peer, o.SRQ, o.SeparateCQs = nil, false, false
	o = o.withDefaults(w)
	h := w.Host(host)
	e := &Endpoint{Host: h, CQ: h.CQ(2 * o.Depth)}
	e.RecvCQ = e.CQ
	o.Type = verbs.QPTypeUD
	e.QP = w.newQP(h, e.CQ, o)
	psn := w.psn.next()
	if o.FixedPSN {
		psn = o.PSN
	}
	steps := []struct {
		attr verbs.QPAttr
		mask verbs.QPAttrMask
	}{
		{verbs.QPAttr{QPState: verbs.QPStateInit, PortNum: 1, QKey: qkey}, verbs.QPAttrState | verbs.QPAttrPKeyIndex | verbs.QPAttrPort | verbs.QPAttrQKey},
		{verbs.QPAttr{QPState: verbs.QPStateRTR}, verbs.QPAttrState},
		{verbs.QPAttr{QPState: verbs.QPStateRTS, SQPSN: psn}, verbs.QPAttrState | verbs.QPAttrSQPSN},
	}
	for _, st := range steps {
		if err := e.QP.Modify(&st.attr, st.mask); err != nil {
			w.fatalf("verbstest: UD QP 0x%x to %v: %v", e.QP.QPNum, st.attr.QPState, err)
		}
	}
	return e
}

// Datagram returns a send work request from UD endpoint e to UD endpoint
// to, with Q_Key qkey: an address handle (GID index 1 of to's host), the
// remote QPN and Q_Key filled in; the test adds WRID, flags and SGEs.
func (e *Endpoint) Datagram(to *Endpoint, qkey uint32) verbs.SendWR {
	w := e.Host.w
	w.t.Helper()
	gid, err := to.Host.Ctx.QueryGID(1, 1)
	if err != nil {
		w.fatalf("verbstest: the GID of %s: %v", to.Host.Name(), err)
	}
	ah, err := e.Host.PD.CreateAH(verbs.AHAttr{IsGlobal: true, PortNum: 1, GRH: verbs.GRH{DGID: gid, HopLimit: 64, SGIDIndex: 1}})
	if err != nil {
		w.fatalf("verbstest: create_ah on %s toward %s: %v", e.Host.Name(), to.Host.Name(), err)
	}
	return verbs.SendWR{Opcode: verbs.WRSend, AH: ah, RemoteQPN: to.QP.QPNum, RemoteQKey: qkey}
}

// psnSource draws initial PSNs from the world's seed, so a test meets
// PSNs near the 24-bit wrap as often as real connections do, and the
// same seed draws the same ones.
type psnSource struct{ r *rand.Rand }

func newPSNSource(seed uint64) psnSource {
	return psnSource{sim.NewSeeds(seed).Stream("verbstest/psn")}
}

func (s psnSource) next() uint32 { return s.r.Uint32() & 0xFFFFFF }

// describeWCs lists completions for a failure message.
func describeWCs(wcs []verbs.WC) string {
	s := ""
	for _, wc := range wcs {
		s += "\n  " + describeWC(wc)
	}
	return s
}

func describeWC(wc verbs.WC) string {
	return fmt.Sprintf("wr_id %d: %s (%v) %v byte_len %d qp 0x%x", wc.WRID, wc.Status.Name(), wc.Status, wc.Opcode, wc.ByteLen, wc.QPNum)
}
