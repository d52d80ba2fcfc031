package verbstest

import (
	"fmt"
	"math/rand/v2"

	"github.com/rocesim/rocesim/sim"
	"github.com/rocesim/rocesim/verbs"
)

// QPOptions describe the QPs Pair, Mesh and Connect make and connect.
// Zero fields take the values ibv_rc_pingpong uses where it has one.
type QPOptions struct {
	// Type is RC (the zero value) or UC.
	Type verbs.QPType
	// Depth is the send and receive queue depth; 0 means 64. Pair and
	// Mesh give each host a CQ of 2·Depth entries per QP.
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
}

func (o QPOptions) withDefaults(w *World) QPOptions {
	w.t.Helper()
	if o.Type == 0 {
		o.Type = verbs.QPTypeRC
	}
	if o.Type != verbs.QPTypeRC && o.Type != verbs.QPTypeUC {
		w.fatalf("verbstest: QPOptions.Type %v: Pair, Mesh and Connect connect RC or UC QPs (a UD QP has no peer: create it and an AH with package verbs)", o.Type)
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
	return o
}

// Endpoint is one side of a connection Pair or Mesh made, or a UD QP
// (UD), which has no Peer.
type Endpoint struct {
	Host *Host
	QP   *verbs.QP
	// CQ is the QP's send and receive CQ (Mesh shares one per host).
	CQ *verbs.CQ
	// Peer is the other side.
	Peer *Endpoint
}

// Pair makes one QP on host a and one on host b, each with its own CQ,
// and connects them (Connect): both are in RTS when it returns.
func (w *World) Pair(a, b string, o QPOptions) (*Endpoint, *Endpoint) {
	w.t.Helper()
	o = o.withDefaults(w)
	ha, hb := w.Host(a), w.Host(b)
	if ha == hb {
		w.fatalf("verbstest: Pair(%q, %q): a QP pair needs two hosts", a, b)
	}
	ea := &Endpoint{Host: ha, CQ: ha.CQ(2 * o.Depth)}
	eb := &Endpoint{Host: hb, CQ: hb.CQ(2 * o.Depth)}
	ea.QP, eb.QP = w.newQP(ha, ea.CQ, o), w.newQP(hb, eb.CQ, o)
	ea.Peer, eb.Peer = eb, ea
	w.Connect(ea.QP, eb.QP, o)
	return ea, eb
}

// Mesh connects every pair of hosts with one QP on each side (one RC QP
// per peer, as an application that must not share a QP between peers
// does). Each host's QPs share one CQ.
func (w *World) Mesh(o QPOptions) *Mesh {
	w.t.Helper()
	o = o.withDefaults(w)
	n := len(w.hosts)
	m := &Mesh{w: w, eps: make([][]*Endpoint, n)}
	cqs := make([]*verbs.CQ, n)
	for i, h := range w.hosts {
		cqs[i] = h.CQ(2 * o.Depth * max(1, n-1))
		m.eps[i] = make([]*Endpoint, n)
	}
	for i := range n {
		for j := i + 1; j < n; j++ {
			a := &Endpoint{Host: w.hosts[i], CQ: cqs[i]}
			b := &Endpoint{Host: w.hosts[j], CQ: cqs[j]}
			a.QP, b.QP = w.newQP(a.Host, a.CQ, o), w.newQP(b.Host, b.CQ, o)
			a.Peer, b.Peer = b, a
			w.Connect(a.QP, b.QP, o)
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

// CQ returns the CQ all of host's mesh QPs share.
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

func (w *World) newQP(h *Host, cq *verbs.CQ, o QPOptions) *verbs.QP {
	w.t.Helper()
	qp, err := h.PD.CreateQP(verbs.QPInitAttr{SendCQ: cq, RecvCQ: cq, Type: o.Type,
		Cap: verbs.QPCap{MaxSendWR: uint32(o.Depth), MaxRecvWR: uint32(o.Depth), MaxSendSGE: 4, MaxRecvSGE: 4,
			MaxInlineData: uint32(o.MaxInline)}})
	if err != nil {
		w.fatalf("verbstest: create_qp on %s: %v", h.Name(), err)
	}
	return qp
}

// Connect takes two QPs in RESET, made by the test or by the code under
// test, through INIT, RTR and RTS toward each other with the attribute
// masks ibv_rc_pingpong uses, RoCE v2 GIDs (index 1) and initial PSNs
// drawn from the world's seed. It fails the test if a modify_qp fails.
func (w *World) Connect(a, b *verbs.QP, o QPOptions) {
	w.t.Helper()
	o = o.withDefaults(w)
	pa, pb := w.psn.next(), w.psn.next()
	w.bringUp(a, b, pa, pb, o)
	w.bringUp(b, a, pb, pa, o)
}

// bringUp moves q to RTS toward peer; q sends from psn, peer from
// peerPSN.
func (w *World) bringUp(q, peer *verbs.QP, psn, peerPSN uint32, o QPOptions) {
	w.t.Helper()
	access := verbs.AccessRemoteWrite
	if o.Type == verbs.QPTypeRC {
		access |= verbs.AccessRemoteRead | verbs.AccessRemoteAtomic
	}
	if err := q.Modify(&verbs.QPAttr{QPState: verbs.QPStateInit, PortNum: 1, QPAccessFlags: access},
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
		rtr.MaxDestRdAtomic, rtr.MinRNRTimer = o.RdAtomic, o.MinRNRTimer
		mask |= verbs.QPAttrMaxDestRdAtomic | verbs.QPAttrMinRNRTimer
	}
	if err := q.Modify(&rtr, mask); err != nil {
		w.fatalf("verbstest: QP 0x%x to RTR: %v", q.QPNum, err)
	}
	rts := verbs.QPAttr{QPState: verbs.QPStateRTS, SQPSN: psn}
	mask = verbs.QPAttrState | verbs.QPAttrSQPSN
	if o.Type == verbs.QPTypeRC {
		rts.Timeout, rts.RetryCnt, rts.RNRRetry, rts.MaxRdAtomic = o.Timeout, o.RetryCnt, o.RNRRetry, o.RdAtomic
		mask |= verbs.QPAttrTimeout | verbs.QPAttrRetryCnt | verbs.QPAttrRNRRetry | verbs.QPAttrMaxQPRdAtomic
	}
	if err := q.Modify(&rts, mask); err != nil {
		w.fatalf("verbstest: QP 0x%x to RTS: %v", q.QPNum, err)
	}
}

// UD makes an unreliable-datagram QP on host, with its own CQ, in RTS
// with Q_Key qkey (o.Type is ignored; its Depth and MaxInline count).
// Send to it from another UD endpoint with Datagram.
func (w *World) UD(host string, qkey uint32, o QPOptions) *Endpoint {
	w.t.Helper()
	o.Type = verbs.QPTypeRC // for the defaults; the QP is UD
	o = o.withDefaults(w)
	h := w.Host(host)
	e := &Endpoint{Host: h, CQ: h.CQ(2 * o.Depth)}
	o.Type = verbs.QPTypeUD
	e.QP = w.newQP(h, e.CQ, o)
	steps := []struct {
		attr verbs.QPAttr
		mask verbs.QPAttrMask
	}{
		{verbs.QPAttr{QPState: verbs.QPStateInit, PortNum: 1, QKey: qkey}, verbs.QPAttrState | verbs.QPAttrPKeyIndex | verbs.QPAttrPort | verbs.QPAttrQKey},
		{verbs.QPAttr{QPState: verbs.QPStateRTR}, verbs.QPAttrState},
		{verbs.QPAttr{QPState: verbs.QPStateRTS, SQPSN: w.psn.next()}, verbs.QPAttrState | verbs.QPAttrSQPSN},
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
