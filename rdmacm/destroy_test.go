package rdmacm_test

import (
	"encoding/binary"
	"errors"
	"net/netip"
	"syscall"
	"testing"

	"github.com/rocesim/rocesim/rdmacm"
	"github.com/rocesim/rocesim/sim"
	"github.com/rocesim/rocesim/verbs"
	"github.com/rocesim/rocesim/wire"
)

// TestDestroyTellsThePeer: an ID destroyed in the middle of a connection
// tells its peer (cm_destroy_id), which learns at once, not after its
// own retries; each answer is what real rxe's librdmacm gives the peer's
// application (conformance TestRdmacmMisuseRxe runs the same states).
func TestDestroyTellsThePeer(t *testing.T) {
	t.Run("connecting", func(t *testing.T) {
		// REQ_SENT: a REJ of reason timeout (4) whose ARI is the
		// client's GUID voids the listener's request, with no event.
		p := newPair(t, "")
		cli := p.dial(t, rpingPort)
		srv := p.event(t, p.srv.ch, rdmacm.EventConnectRequest).ID
		if err := cli.Destroy(); err != nil {
			t.Fatal(err)
		}
		if err := p.w.Run(); err != nil {
			t.Fatal(err)
		}
		equal(t, "CM messages", p.rec.cm(), []string{"b>REQ", "b>REJ"})
		if n := p.srv.ch.Pending(); n != 0 {
			t.Errorf("%d events on the listener's channel, want none (real rxe gives none)", n)
		}
		if err := srv.Accept(rdmacm.ConnParam{QPNum: 0x99}); !errors.Is(err, syscall.EINVAL) {
			t.Errorf("Accept of the void request: %v, want EINVAL", err)
		}
		if n := p.cm.Unanswered(p.srv.h); n != 0 {
			t.Errorf("Unanswered %d: a void request is owed nothing", n)
		}
		rej := p.rec.sent("b", wire.CMAttrREJ)[0].mad
		var r wire.CMREJ
		r.Decode(rej.Data())
		if r.Reason != wire.CMREJTimeout || r.RemoteCommID != 0 || r.MsgRejected != 2 || r.RejectInfoLength != 8 ||
			binary.BigEndian.Uint64(r.ARI[:]) != p.cli.h.GUID() {
			t.Errorf("REJ %+v, want reason 4, remote comm ID 0, message other, ARI the GUID %#x", r, p.cli.h.GUID())
		}
	})
	t.Run("accepted", func(t *testing.T) {
		// REP_SENT (the client's QP its own: CONNECT_RESPONSE, no RTU
		// yet): a consumer REJ, the client REJECTED 28.
		p := newPair(t, "")
		_, srv, _, _ := userResponse(t, p)
		start := p.w.Now()
		if err := srv.Destroy(); err != nil {
			t.Fatal(err)
		}
		ev := p.event(t, p.cli.ch, rdmacm.EventRejected)
		if ev.Status != 28 || p.w.Now().Sub(start) > sim.Millisecond {
			t.Errorf("REJECTED status %d after %v, want 28 at once", ev.Status, p.w.Now().Sub(start))
		}
		equal(t, "CM messages", p.rec.cm(), []string{"b>REQ", "a>REP", "a>REJ"})
	})
	t.Run("established", func(t *testing.T) {
		// Connected, never disconnected: one DREQ (the ID is gone, so
		// nothing resends it), the peer DISCONNECTED; its Disconnect's
		// DREP then finds no one.
		p := newPair(t, "")
		cli, srv := p.establish(t)
		if err := cli.Destroy(); err != nil {
			t.Fatal(err)
		}
		p.event(t, p.srv.ch, rdmacm.EventDisconnected)
		if err := srv.Disconnect(); err != nil {
			t.Fatal(err)
		}
		if err := p.w.Run(); err != nil {
			t.Fatal(err)
		}
		equal(t, "CM messages", p.rec.cm(), []string{"b>REQ", "a>REP", "b>RTU", "b>DREQ", "a>DREP"})
		if srv.QP.State() != verbs.QPStateErr {
			t.Errorf("server QP %v after Disconnect, want ERR", srv.QP.State())
		}
	})
	t.Run("disconnect-received", func(t *testing.T) {
		// The peer's DREQ received, not answered: Destroy sends the
		// DREP, and the peer's Disconnect completes.
		p := newPair(t, "")
		cli, srv := p.establish(t)
		if err := cli.Disconnect(); err != nil {
			t.Fatal(err)
		}
		p.event(t, p.srv.ch, rdmacm.EventDisconnected)
		if err := srv.Destroy(); err != nil {
			t.Fatal(err)
		}
		p.event(t, p.cli.ch, rdmacm.EventDisconnected)
		equal(t, "CM messages", p.rec.cm(), []string{"b>REQ", "a>REP", "b>RTU", "b>DREQ", "a>DREP"})
	})
	t.Run("sidr", func(t *testing.T) {
		// A UD request destroyed unanswered: SIDR_REP status 2
		// (IB_SIDR_REJECT), the client UNREACHABLE 2.
		p, _ := udpPair(t, "")
		p.dialUD(t, rpingPort, "")
		srv := p.event(t, p.srv.ch, rdmacm.EventConnectRequest).ID
		if err := srv.Destroy(); err != nil {
			t.Fatal(err)
		}
		if ev := p.event(t, p.cli.ch, rdmacm.EventUnreachable); ev.Status != 2 {
			t.Errorf("UNREACHABLE status %d, want 2", ev.Status)
		}
		equal(t, "CM messages", p.rec.cm(), []string{"b>SIDR_REQ", "a>SIDR_REP"})
	})
	t.Run("sidr-answered", func(t *testing.T) {
		// SIDR leaves no connection: destroying either side after
		// the SIDR_REP sends nothing (no DREQ: udaddy's exchange).
		p, _ := udpPair(t, "")
		cli := p.dialUD(t, rpingPort, "")
		ev := p.event(t, p.srv.ch, rdmacm.EventConnectRequest)
		if err := ev.ID.CreateQP(p.srv.pd, p.srv.qpAttr()); err != nil {
			t.Fatal(err)
		}
		if err := ev.ID.Accept(rdmacm.ConnParam{}); err != nil {
			t.Fatal(err)
		}
		p.event(t, p.cli.ch, rdmacm.EventEstablished)
		for _, id := range []*rdmacm.CMID{cli, ev.ID} {
			if err := id.Destroy(); err != nil {
				t.Fatal(err)
			}
		}
		if err := p.w.Run(); err != nil {
			t.Fatal(err)
		}
		equal(t, "CM messages", p.rec.cm(), []string{"b>SIDR_REQ", "a>SIDR_REP"})
	})
}

// TestDisconnectWithoutConnection: rdma_disconnect on an ID whose ib_cm
// ID has no connection to end returns 0 and sends nothing, the ID's QP
// in ERR (ib_send_cm_dreq and ib_send_cm_drep refuse; cma.c returns 0
// all the same), as on real rxe (conformance TestRdmacmMisuseRxe); one
// with no ib_cm ID yet (never connected) is EINVAL. A program's cleanup
// path (disconnect, then destroy) after a failed connect relies on it.
func TestDisconnectWithoutConnection(t *testing.T) {
	p := newPair(t, "")
	cli := p.route(t, rdmacm.PSTCP, rpingPort)
	if err := cli.Disconnect(); !errors.Is(err, syscall.EINVAL) {
		t.Errorf("Disconnect before Connect: %v, want EINVAL", err)
	}
	if err := cli.Connect(rdmacm.ConnParam{ResponderResources: 1, InitiatorDepth: 1}); err != nil {
		t.Fatal(err)
	}
	srv := p.event(t, p.srv.ch, rdmacm.EventConnectRequest).ID
	for _, id := range []*rdmacm.CMID{cli, srv} {
		if err := id.Disconnect(); err != nil {
			t.Errorf("Disconnect in %s: %v, want nil", id.State(), err)
		}
	}
	if cli.QP.State() != verbs.QPStateErr {
		t.Errorf("client QP %v after Disconnect, want ERR", cli.QP.State())
	}
	equal(t, "CM messages", p.rec.cm(), []string{"b>REQ"})
	if cli.State() != "REQ_SENT" || srv.State() != "REQ_RCVD" {
		t.Errorf("states %s, %s: Disconnect changed what it could not end", cli.State(), srv.State())
	}
}

// TestRejectAfterAccept: rdma_reject after rdma_accept, the RTU not yet
// come (the client's QP its own: CONNECT_RESPONSE), returns EINVAL and
// yet sends the REJ, and the client gets REJECTED 28; its Establish is
// then EINVAL. So did real rxe 6.1 (conformance's cm_misuse.c, run
// once, with a second rdma_accept before it, EINVAL on both: that run
// left a reference in the guest's ib_cm, whose destroy then waited in
// 10 s steps, so the case is not kept there).
func TestRejectAfterAccept(t *testing.T) {
	p := newPair(t, "")
	cli, srv, _, _ := userResponse(t, p)
	if err := srv.Reject(nil); !errors.Is(err, syscall.EINVAL) {
		t.Errorf("Reject after Accept: %v, want EINVAL", err)
	}
	if ev := p.event(t, p.cli.ch, rdmacm.EventRejected); ev.Status != 28 {
		t.Errorf("REJECTED status %d, want 28", ev.Status)
	}
	if err := cli.Establish(); !errors.Is(err, syscall.EINVAL) {
		t.Errorf("Establish after the REJ: %v, want EINVAL", err)
	}
	equal(t, "CM messages", p.rec.cm(), []string{"b>REQ", "a>REP", "a>REJ"})
}

// TestTablesStayBounded: a server that takes connection after
// connection, each ended and both IDs destroyed, keeps an ID table the
// size of its most IDs at once and no request it no longer needs: memory
// stays bounded however long it runs (every ID ever made was kept).
func TestTablesStayBounded(t *testing.T) {
	p := newPair(t, "")
	for range 100 {
		cli, srv := p.establish(t)
		p.hangUp(t, cli, srv)
		for _, id := range []*rdmacm.CMID{cli, srv} {
			if err := id.Destroy(); err != nil {
				t.Fatal(err)
			}
		}
	}
	for _, h := range []*verbs.Host{p.srv.h, p.cli.h} {
		// The server: its listener and one passive ID at a time; the
		// client: one ID at a time.
		if ids, dups := p.cm.Tables(h); ids > 2 || dups != 0 {
			t.Errorf("%s after 100 connections: %d ID slots, %d requests kept", h.Name(), ids, dups)
		}
	}
}

// will is a host's farewells as FarewellChanges reports them, applied
// as a fabric daemon applies a will: a MAD per key, nil deleting it.
type will struct {
	mads  map[uint64]string
	calls int // fn calls of the last update
}

// update applies the changes since the last one and says whether
// anything was sent meanwhile (nothing may be).
func (w *will) update(t *testing.T, p *pair, h *verbs.Host) {
	t.Helper()
	if w.mads == nil {
		w.mads = map[uint64]string{}
	}
	frames := len(p.rec.frames)
	w.calls = 0
	p.cm.FarewellChanges(h, func(key uint64, dst netip.Addr, mad []byte) {
		w.calls++
		if mad == nil {
			delete(w.mads, key)
			return
		}
		w.mads[key] = dst.String() + " " + string(mad)
	})
	if len(p.rec.frames) != frames {
		t.Errorf("FarewellChanges sent %d frames", len(p.rec.frames)-frames)
	}
}

// only returns the one MAD of the will.
func (w *will) only(t *testing.T) []string {
	t.Helper()
	var out []string
	for _, m := range w.mads {
		out = append(out, m)
	}
	if len(out) != 1 {
		t.Fatalf("the will holds %d MADs, want 1", len(out))
	}
	return out
}

// TestFarewellsAreWhatDestroySends: FarewellChanges reports, without
// sending or changing anything, the MAD each ID's Destroy then sends
// (what a process on a fabric leaves with the daemon as its will): the
// REJ of a connecting client, the REJ of an unanswered request, the DREQ
// of a connection, the DREP owed for a DREQ; a listener alone leaves
// nothing, and a destroyed ID's entry goes. After the first call only
// the IDs that changed are reported: nothing when nothing moved.
func TestFarewellsAreWhatDestroySends(t *testing.T) {
	// destroyed destroys id and returns the MAD its host then sent.
	destroyed := func(p *pair, id *rdmacm.CMID, from string, attr wire.CMAttr) []string {
		t.Helper()
		n := len(p.rec.sent(from, attr))
		if err := id.Destroy(); err != nil {
			t.Fatal(err)
		}
		if err := p.w.Run(); err != nil {
			t.Fatal(err)
		}
		sent := p.rec.sent(from, attr)
		if len(sent) != n+1 {
			t.Fatalf("%d %v sent by %s after Destroy, want 1", len(sent)-n, attr, from)
		}
		peer := "10.0.0.1"
		if from == "a" {
			peer = "10.0.0.2"
		}
		return []string{peer + " " + string(sent[n].mad)}
	}
	t.Run("listener", func(t *testing.T) {
		p := newPair(t, "")
		var w will
		if w.update(t, p, p.srv.h); len(w.mads) != 0 {
			t.Errorf("a listener alone leaves %d farewells, want none", len(w.mads))
		}
	})
	t.Run("connecting", func(t *testing.T) {
		p := newPair(t, "")
		var w will
		w.update(t, p, p.cli.h)
		cli := p.dial(t, rpingPort)
		p.event(t, p.srv.ch, rdmacm.EventConnectRequest) // the client in REQ_SENT
		w.update(t, p, p.cli.h)
		equal(t, "the client's farewell", w.only(t), destroyed(p, cli, "b", wire.CMAttrREJ))
		if w.update(t, p, p.cli.h); len(w.mads) != 0 {
			t.Errorf("after Destroy the will holds %d MADs", len(w.mads))
		}
	})
	t.Run("request", func(t *testing.T) {
		p := newPair(t, "")
		p.dial(t, rpingPort)
		srv := p.event(t, p.srv.ch, rdmacm.EventConnectRequest).ID
		var w will
		w.update(t, p, p.srv.h) // the first call: every live ID
		equal(t, "the server's farewell", w.only(t), destroyed(p, srv, "a", wire.CMAttrREJ))
	})
	t.Run("established", func(t *testing.T) {
		p := newPair(t, "")
		var ws, wc will
		ws.update(t, p, p.srv.h)
		wc.update(t, p, p.cli.h)
		cli, srv := p.establish(t)
		ws.update(t, p, p.srv.h)
		if ws.update(t, p, p.srv.h); ws.calls != 0 {
			t.Errorf("nothing moved, yet %d changes reported", ws.calls)
		}
		equal(t, "the server's farewell", ws.only(t), destroyed(p, srv, "a", wire.CMAttrDREQ))
		p.event(t, p.cli.ch, rdmacm.EventDisconnected)
		wc.update(t, p, p.cli.h)
		equal(t, "the client's farewell (DREQ received)", wc.only(t), destroyed(p, cli, "b", wire.CMAttrDREP))
		if ws.update(t, p, p.srv.h); len(ws.mads) != 0 {
			t.Errorf("the server's will holds %d MADs after its Destroy", len(ws.mads))
		}
	})
	t.Run("many", func(t *testing.T) {
		// Each connection's changes are its own IDs', however many
		// connections the host has: the will costs a MAD per change.
		p := newPair(t, "")
		var w will
		w.update(t, p, p.srv.h)
		for i := range 20 {
			p.establish(t)
			if w.update(t, p, p.srv.h); w.calls != 1 || len(w.mads) != i+1 {
				t.Fatalf("connection %d: %d changes reported, will of %d MADs; want 1 and %d", i+1, w.calls, len(w.mads), i+1)
			}
		}
	})
}

// TestIDOptions: address reuse and IPv6-only are taken in the states the
// kernel takes them (rdma_set_reuseaddr, rdma_set_afonly; real rxe's
// answers in cm_misuse.c): reuse off only before a bind, on anywhere
// but on a listener; IPv6-only while IDLE, bound or not; EINVAL
// otherwise, the option left as it was. Listening takes reuse away.
func TestIDOptions(t *testing.T) {
	p := newPair(t, "")
	id, err := rdmacm.CreateID(p.cli.ch, nil, rdmacm.PSTCP)
	if err != nil {
		t.Fatal(err)
	}
	step := func(what string, err error, wantErr bool, reuse, afOnly bool) {
		t.Helper()
		if (err != nil) != wantErr || (err != nil && !errors.Is(err, syscall.EINVAL)) {
			t.Errorf("%s: %v, want error %v (EINVAL)", what, err, wantErr)
		}
		if r, a := id.Options(); r != reuse || a != afOnly {
			t.Errorf("%s: options reuse %v, IPv6-only %v; want %v, %v", what, r, a, reuse, afOnly)
		}
	}
	step("reuse off, IDLE", id.SetReuseAddr(false), false, false, false)
	step("reuse on, IDLE", id.SetReuseAddr(true), false, true, false)
	if err := id.BindAddr(netip.AddrPortFrom(netip.IPv4Unspecified(), 7190)); err != nil {
		t.Fatal(err)
	}
	step("reuse off, bound", id.SetReuseAddr(false), true, true, false)
	step("IPv6-only, bound", id.SetAFOnly(true), false, true, true)
	if err := id.Listen(1); err != nil {
		t.Fatal(err)
	}
	// A listener's port is its own: rdma_listen clears address reuse.
	step("reuse on, listening", id.SetReuseAddr(true), true, false, true)
	step("reuse off, listening", id.SetReuseAddr(false), true, false, true)
	step("IPv6-only off, listening", id.SetAFOnly(false), true, false, true)
}
