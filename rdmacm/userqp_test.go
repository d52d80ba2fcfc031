package rdmacm_test

import (
	"errors"
	"net/netip"
	"syscall"
	"testing"

	"github.com/rocesim/rocesim/rdmacm"
	"github.com/rocesim/rocesim/sim"
	"github.com/rocesim/rocesim/verbs"
)

// move takes qp to state with the attributes the ID gives for it
// (rdma_init_qp_attr, then ibv_modify_qp), as UCX does.
func move(t *testing.T, id *rdmacm.CMID, qp *verbs.QP, state verbs.QPState) {
	t.Helper()
	attr, mask, err := id.InitQPAttr(state)
	if err != nil {
		t.Fatalf("InitQPAttr(%v) in %s: %v", state, id.State(), err)
	}
	if err := qp.Modify(&attr, mask); err != nil {
		t.Fatalf("modify to %v with InitQPAttr's attributes: %v", state, err)
	}
}

// TestUserQP: both sides make their QPs themselves (ibv_create_qp) and
// move them with InitQPAttr; the client gets CONNECT_RESPONSE and its
// Establish sends the RTU, the server gets ESTABLISHED with it; the CM
// messages are those of a connection whose QPs the CM made, and so are
// the QPs' attributes, but for the access flags and read depths ib_cm
// gives a user QP. A SEND and an RDMA READ then cross.
func TestUserQP(t *testing.T) {
	p := newPair(t, "")
	id, srv, cqp, sqp := userResponse(t, p)
	equal(t, "CM messages before Establish", p.rec.cm(), []string{"b>REQ", "a>REP"})
	if n := p.cm.Unanswered(p.cli.h); n != 1 {
		t.Errorf("the client owes its RTU: Unanswered %d, want 1", n)
	}
	// INIT again, now that the connection's resources are known (its
	// INIT before Connect had no access flags), as librdmacm's own
	// ucma_modify_qp_rtr and the kernel's cma_modify_qp_rtr do.
	move(t, id, cqp, verbs.QPStateInit)
	move(t, id, cqp, verbs.QPStateRTR)
	move(t, id, cqp, verbs.QPStateRTS)
	if err := id.Establish(); err != nil {
		t.Fatal(err)
	}
	if n := p.cm.Unanswered(p.cli.h); n != 0 {
		t.Errorf("after Establish: Unanswered %d, want 0", n)
	}
	if err := id.Establish(); !errors.Is(err, syscall.EINVAL) {
		t.Errorf("a second Establish: %v, want EINVAL", err)
	}
	p.event(t, p.srv.ch, rdmacm.EventEstablished)
	if id.State() != "ESTABLISHED" || srv.State() != "ESTABLISHED" {
		t.Fatalf("states %s, %s", id.State(), srv.State())
	}
	if n := p.cli.ch.Pending(); n != 0 {
		t.Errorf("%d events on the client after Establish, want none", n)
	}

	// The QPs are as the CM would have made them: compare with a
	// connection of the CM's own QPs.
	q := newPair(t, "")
	ccm, scm := q.establish(t)
	for _, c := range []struct {
		name      string
		user, own *verbs.QP
	}{{"client", cqp, ccm.QP}, {"server", sqp, scm.QP}} {
		u, _ := c.user.Query()
		o, _ := c.own.Query()
		if u.QPState != o.QPState || u.PathMTU != o.PathMTU || u.Timeout != o.Timeout || u.RetryCnt != o.RetryCnt ||
			u.RNRRetry != o.RNRRetry || u.MinRNRTimer != o.MinRNRTimer || u.AHAttr != o.AHAttr ||
			u.MaxRdAtomic != 1 || u.MaxDestRdAtomic != 1 ||
			u.QPAccessFlags != verbs.AccessRemoteWrite|verbs.AccessRemoteRead|verbs.AccessRemoteAtomic {
			t.Errorf("%s's own QP %+v\nthe CM's %+v", c.name, u, o)
		}
	}

	// Data crosses both ways: a SEND each way (the server sends from
	// the PSN the client receives from), and a READ of the server's
	// buffer (its INIT gave remote read: the connection has responder
	// resources).
	copy(p.cli.buf, "ping")
	copy(p.srv.buf[100:], "pong")
	copy(p.srv.buf[300:], "back")
	if _, err := cqp.PostRecv([]verbs.RecvWR{{WRID: 9, SGList: []verbs.SGE{p.cli.mr.SGE(400, 64)}}}); err != nil {
		t.Fatal(err)
	}
	if _, err := sqp.PostSend([]verbs.SendWR{{WRID: 3, Opcode: verbs.WRSend, Flags: verbs.SendSignaled, SGList: []verbs.SGE{p.srv.mr.SGE(300, 4)}}}); err != nil {
		t.Fatal(err)
	}
	if _, err := cqp.PostSend([]verbs.SendWR{{WRID: 1, Opcode: verbs.WRSend, Flags: verbs.SendSignaled, SGList: []verbs.SGE{p.cli.mr.SGE(0, 4)}},
		{WRID: 2, Opcode: verbs.WRRDMARead, Flags: verbs.SendSignaled, SGList: []verbs.SGE{p.cli.mr.SGE(200, 4)},
			RemoteAddr: p.srv.mr.Addr + 100, RKey: p.srv.mr.RKey}}); err != nil {
		t.Fatal(err)
	}
	wcs := make([]verbs.WC, 4)
	var cw, sw []verbs.WC
	// Bounded in virtual time: with PSNs that disagree the requester
	// would retry for ever (retry_cnt 7).
	end := p.w.Now().Add(sim.Second)
	p.w.RunUntil(func() bool {
		cw = append(cw, wcs[:p.cli.cq.Poll(wcs)]...)
		sw = append(sw, wcs[:p.srv.cq.Poll(wcs)]...)
		return len(cw) == 3 && len(sw) == 2 || p.w.Now() > end
	})
	ok := len(cw) == 3 && len(sw) == 2
	for _, wc := range append(cw, sw...) {
		ok = ok && wc.Status == verbs.WCSuccess
	}
	if !ok || string(p.srv.buf[:4]) != "ping" || string(p.cli.buf[200:204]) != "pong" || string(p.cli.buf[400:404]) != "back" {
		t.Fatalf("client %+v, server %+v, buffers %q %q %q", cw, sw, p.srv.buf[:4], p.cli.buf[200:204], p.cli.buf[400:404])
	}
	p.hangUp(t, id, srv)
	equal(t, "CM messages of the CM's own QPs", q.rec.cm(), []string{"b>REQ", "a>REP", "b>RTU"})
	equal(t, "CM messages", p.rec.cm(), []string{"b>REQ", "a>REP", "b>RTU", "b>DREQ", "a>DREP"})
}

// TestUserQPMisuse: Establish on an ID whose QP the CM made, or before a
// REP, is EINVAL; so is RTR asked of a listener.
func TestUserQPMisuse(t *testing.T) {
	p := newPair(t, "")
	cli, _ := p.establish(t)
	if err := cli.Establish(); !errors.Is(err, syscall.EINVAL) {
		t.Errorf("Establish with the CM's QP: %v, want EINVAL", err)
	}
	if _, _, err := p.listen.InitQPAttr(verbs.QPStateRTR); !errors.Is(err, syscall.EINVAL) {
		t.Errorf("a listener's RTR: %v, want EINVAL", err)
	}
	id, err := rdmacm.CreateID(p.cli.ch, nil, rdmacm.PSTCP)
	if err != nil {
		t.Fatal(err)
	}
	if err := id.Establish(); !errors.Is(err, syscall.EINVAL) {
		t.Errorf("Establish on a new ID: %v, want EINVAL", err)
	}
	// A UD ID with no device has nothing to say; bound to its host's
	// address it gives INIT's fields and rdma_cm's Q_Key for any state.
	ud, err := rdmacm.CreateID(p.cli.ch, nil, rdmacm.PSUDP)
	if err != nil {
		t.Fatal(err)
	}
	if _, _, err := ud.InitQPAttr(verbs.QPStateRTS); !errors.Is(err, syscall.EINVAL) {
		t.Errorf("a UD ID with no device: %v, want EINVAL", err)
	}
	if err := ud.BindAddr(netip.AddrPortFrom(netip.MustParseAddr("10.0.0.2"), 0)); err != nil {
		t.Fatal(err)
	}
	if a, m, err := ud.InitQPAttr(verbs.QPStateRTS); err != nil || a.QKey != 0x01234567 || m&verbs.QPAttrQKey == 0 || m&verbs.QPAttrAccessFlags != 0 {
		t.Errorf("UD: %+v mask %v, %v", a, m, err)
	}
}

// TestUserQPLateEstablish: a client that takes longer than the REP's
// timeout to call Establish answers the REP sent again with an MRA (the
// REP of a user QP is held with one, cm_dup_rep_handler), which gives
// the server the MRA's service timeout more: an Establish a minute
// later still connects both sides, with one MRA sent.
func TestUserQPLateEstablish(t *testing.T) {
	p := newPair(t, "")
	id, _, cqp, _ := userResponse(t, p)
	if err := p.w.RunFor(60 * sim.Second); err != nil {
		t.Fatal(err)
	}
	for _, s := range []verbs.QPState{verbs.QPStateInit, verbs.QPStateRTR, verbs.QPStateRTS} {
		move(t, id, cqp, s)
	}
	if err := id.Establish(); err != nil {
		t.Fatal(err)
	}
	p.event(t, p.srv.ch, rdmacm.EventEstablished)
	equal(t, "CM messages", p.rec.cm(), []string{"b>REQ", "a>REP", "a>REP", "b>MRA", "b>RTU"})
}

// TestUserQPClientGivesUp: a client that destroys its ID, or rejects,
// after CONNECT_RESPONSE rejects the REP (cm_destroy_id, ib_send_cm_rej
// in REP_RCVD): the server gets REJECTED at once, not UNREACHABLE after
// its REP's retries; a Disconnect there returns 0 and sends nothing.
func TestUserQPClientGivesUp(t *testing.T) {
	for _, c := range []struct {
		name string
		end  func(id *rdmacm.CMID) error
	}{
		{"destroy", (*rdmacm.CMID).Destroy},
		{"reject", func(id *rdmacm.CMID) error { return id.Reject(nil) }},
	} {
		t.Run(c.name, func(t *testing.T) {
			p := newPair(t, "")
			id, srv, _, _ := userResponse(t, p)
			if err := id.Disconnect(); err != nil {
				t.Errorf("Disconnect before Establish: %v, want nil (rdma_disconnect's 0)", err)
			}
			start := p.w.Now()
			if err := c.end(id); err != nil {
				t.Fatal(err)
			}
			ev := p.event(t, p.srv.ch, rdmacm.EventRejected)
			if ev.ID != srv || ev.Status != 28 || p.w.Now().Sub(start) > sim.Millisecond {
				t.Errorf("REJECTED on %p status %d after %v, want the server's ID, 28 (consumer reject), at once", ev.ID, ev.Status, p.w.Now().Sub(start))
			}
			equal(t, "CM messages", p.rec.cm(), []string{"b>REQ", "a>REP", "b>REJ"})
			if n := p.cm.Unanswered(p.cli.h); n != 0 {
				t.Errorf("Unanswered %d after giving up, want 0", n)
			}
		})
	}
}

// userResponse connects a client and a server that make their own QPs,
// up to the client's CONNECT_RESPONSE: both QPs made and moved with
// InitQPAttr (the server's to RTS, the client's to INIT), a receive
// posted on the server's; it checks what InitQPAttr answers on the way.
func userResponse(t *testing.T, p *pair) (id, srv *rdmacm.CMID, cqp, sqp *verbs.QP) {
	t.Helper()
	id = p.resolve(t, rdmacm.PSTCP, rpingPort)

	// Before Connect the kernel has no ib_cm ID to ask: INIT's fields
	// for any state, with no access flags.
	for _, s := range []verbs.QPState{verbs.QPStateInit, verbs.QPStateRTR} {
		a, m, err := id.InitQPAttr(s)
		if err != nil || m != verbs.QPAttrState|verbs.QPAttrPKeyIndex|verbs.QPAttrPort|verbs.QPAttrAccessFlags || a.QPAccessFlags != 0 || a.PortNum != 1 {
			t.Errorf("before connect, %v: %+v mask %v, %v", s, a, m, err)
		}
	}
	rc := func(a verbs.QPInitAttr) verbs.QPInitAttr { a.Type = verbs.QPTypeRC; return a }
	var err error
	cqp, err = p.cli.pd.CreateQP(rc(p.cli.qpAttr()))
	if err != nil {
		t.Fatal(err)
	}
	move(t, id, cqp, verbs.QPStateInit)
	if err := id.Connect(rdmacm.ConnParam{ResponderResources: 1, InitiatorDepth: 1, QPNum: cqp.QPNum}); err != nil {
		t.Fatal(err)
	}
	// Until the REP the peer is unknown: no RTR.
	if _, _, err := id.InitQPAttr(verbs.QPStateRTR); !errors.Is(err, syscall.EINVAL) {
		t.Errorf("RTR before the REP: %v, want EINVAL", err)
	}

	ev := p.event(t, p.srv.ch, rdmacm.EventConnectRequest)
	srv = ev.ID
	if ev.Param.QPNum != cqp.QPNum {
		t.Errorf("CONNECT_REQUEST names QP %#x, want the client's own %#x", ev.Param.QPNum, cqp.QPNum)
	}
	sqp, err = p.srv.pd.CreateQP(rc(p.srv.qpAttr()))
	if err != nil {
		t.Fatal(err)
	}
	// The server goes all the way to RTS before its REP, as ib_cm
	// allows (cm_init_qp_rts_attr).
	for _, s := range []verbs.QPState{verbs.QPStateInit, verbs.QPStateRTR, verbs.QPStateRTS} {
		move(t, srv, sqp, s)
	}
	if _, err := sqp.PostRecv([]verbs.RecvWR{{WRID: 7, SGList: []verbs.SGE{p.srv.mr.SGE(0, 64)}}}); err != nil {
		t.Fatal(err)
	}
	if err := srv.Accept(rdmacm.ConnParam{ResponderResources: 1, InitiatorDepth: 1, QPNum: sqp.QPNum}); err != nil {
		t.Fatal(err)
	}

	resp := p.event(t, p.cli.ch, rdmacm.EventConnectResponse)
	if resp.Param.QPNum != sqp.QPNum {
		t.Errorf("CONNECT_RESPONSE names QP %#x, want the server's %#x", resp.Param.QPNum, sqp.QPNum)
	}
	return id, srv, cqp, sqp
}
