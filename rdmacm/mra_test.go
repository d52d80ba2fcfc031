package rdmacm_test

import (
	"testing"

	"github.com/rocesim/rocesim/rdmacm"
	"github.com/rocesim/rocesim/sim"
	"github.com/rocesim/rocesim/wire"
)

// mraWait is how long the active side waits after rdma_cm's MRA before
// it sends the REQ again (cm_mra_handler): the MRA's service timeout 24
// (65536 ms) plus the path's ACK timeout 19 (2048 ms).
const mraWait = 67584 * sim.Millisecond

// lateAccept connects with a server that takes the CONNECT_REQUEST but
// accepts only after wait of virtual time, under the plan; it returns
// both IDs, ESTABLISHED, and the client's state before the accept.
func lateAccept(t *testing.T, p *pair, wait sim.Duration) (cli, srv *rdmacm.CMID, before string) {
	t.Helper()
	cli = p.dial(t, rpingPort)
	ev := p.event(t, p.srv.ch, rdmacm.EventConnectRequest)
	if err := p.w.RunFor(wait); err != nil {
		t.Fatal(err)
	}
	before = cli.State()
	if n := p.cli.ch.Pending(); n != 0 {
		t.Fatalf("%d client events before the accept", n)
	}
	p.accept(t, ev)
	p.event(t, p.cli.ch, rdmacm.EventEstablished)
	p.event(t, p.srv.ch, rdmacm.EventEstablished)
	p.ping(t, cli)
	return cli, ev.ID, before
}

// TestLateAcceptMRA: the server's application accepts 8 s after the
// REQ, later than the REQ's timeout (6144 ms), as conformance/agent/
// cmagent.c's late server does on real rxe (rxe_cm_mra.pcapng). The
// client's second REQ finds the server's ID unanswered and gets the MRA
// rdma_cm keeps for it (cma_req_handler: ib_send_cm_mra with
// CMA_CM_MRA_SETTING, sent by cm_dup_req_handler), and the late REP
// connects as usual; then the server disconnects first, as the agent
// does: REQ, REQ, MRA, REP, RTU, DREQ, DREP, the exchange of rxe.
func TestLateAcceptMRA(t *testing.T) {
	p := newPair(t, "")
	cli, srv, before := lateAccept(t, p, 8*sim.Second)
	if before != "MRA_REQ_RCVD" {
		t.Errorf("client %s before the accept, want MRA_REQ_RCVD", before)
	}
	if reqs := p.rec.times("b", wire.CMAttrREQ); len(reqs) != 2 || reqs[1].Sub(reqs[0]) != 6144*sim.Millisecond {
		t.Errorf("REQs at %v, want two 6144 ms apart", reqs)
	}
	reqs, mras := p.rec.sent("b", wire.CMAttrREQ), p.rec.sent("a", wire.CMAttrMRA)
	if len(mras) == 1 && len(reqs) == 2 {
		var req wire.CMREQ
		var mra wire.CMMRA
		req.Decode(reqs[1].mad.Data())
		mra.Decode(mras[0].mad.Data())
		reqTID, mraTID := reqs[1].mad.Header().TransactionID, mras[0].mad.Header().TransactionID
		if mra.MsgMRAed != 0 || mra.ServiceTimeout != 24 || mra.RemoteCommID != req.LocalCommID || mra.LocalCommID == 0 ||
			mraTID != reqTID || mra.PrivateData != [wire.CMMRAPrivateLen]byte{} {
			t.Errorf("MRA message %d, service timeout %d, comm %#x→%#x, TID %#x, private data set %v for REQ comm %#x TID %#x: "+
				"want message REQ (0), service timeout 24, the REQ's IDs, no private data", mra.MsgMRAed, mra.ServiceTimeout,
				mra.LocalCommID, mra.RemoteCommID, mraTID, mra.PrivateData != [wire.CMMRAPrivateLen]byte{}, req.LocalCommID, reqTID)
		}
	}
	p.hangUp(t, srv, cli) // the agent's server disconnects first
	equal(t, "CM messages (model, rxe)", p.rec.cm(), rxeCapture(t, "rxe_cm_mra.pcapng").cm())
	if d := p.cm.Dropped(p.srv.h) + p.cm.Dropped(p.cli.h); d != 0 {
		t.Errorf("%d MADs ignored", d)
	}
}

// TestMRAWait: the server never accepts. After the MRA the client waits
// the MRA's service timeout plus the packet life time before each REQ
// again (ib_modify_mad keeps that timeout for the MAD's remaining
// retries); each duplicate REQ gets the MRA again, and a second MRA
// changes nothing on the client. An accept after the third REQ still
// connects.
func TestMRAWait(t *testing.T) {
	p := newPair(t, "")
	cli := p.dial(t, rpingPort)
	ev := p.event(t, p.srv.ch, rdmacm.EventConnectRequest)
	if _, err := p.w.RunUntil(func() bool { return len(p.rec.times("a", wire.CMAttrMRA)) == 3 }); err != nil {
		t.Fatal(err)
	}
	reqs, mras := p.rec.times("b", wire.CMAttrREQ), p.rec.times("a", wire.CMAttrMRA)
	if len(reqs) != 4 || len(mras) != 3 {
		t.Fatalf("REQs at %v, MRAs at %v: want 4 and 3", reqs, mras)
	}
	// The first wait runs from the MRA's arrival (its send plus the
	// link's delay, far under a millisecond), the next from the REQ
	// sent again: the MRA that answers it is a duplicate.
	if d := reqs[2].Sub(mras[0]); d < mraWait || d >= mraWait+sim.Millisecond {
		t.Errorf("REQ 3 %v after the MRA, want %v (+ the link's delay)", d, mraWait)
	}
	if d := reqs[3].Sub(reqs[2]); d != mraWait {
		t.Errorf("REQ 4 %v after REQ 3, want %v", d, mraWait)
	}
	p.accept(t, ev)
	p.event(t, p.cli.ch, rdmacm.EventEstablished)
	p.event(t, p.srv.ch, rdmacm.EventEstablished)
	if cli.State() != "ESTABLISHED" {
		t.Errorf("client %s", cli.State())
	}
	// The second and third MRAs reached a client already in
	// MRA_REQ_RCVD: ignored.
	if d := p.cm.Dropped(p.cli.h); d != 2 {
		t.Errorf("client ignored %d MADs, want the 2 duplicate MRAs", d)
	}
}

// TestLostMRA: every MRA lost (fault rule cm=MRA). The client, never
// told to wait, sends the REQ every 6144 ms as without MRA, each one
// answered by an MRA that is lost; the late accept still connects.
func TestLostMRA(t *testing.T) {
	p := newPair(t, "drop cm=MRA")
	lateAccept(t, p, 20*sim.Second)
	equal(t, "CM messages", p.rec.cm(), []string{"b>REQ", "b>REQ", "a>MRA(dropped)", "b>REQ", "a>MRA(dropped)",
		"b>REQ", "a>MRA(dropped)", "a>REP", "b>RTU"})
	reqs := p.rec.times("b", wire.CMAttrREQ)
	for i := 1; i < len(reqs); i++ {
		if d := reqs[i].Sub(reqs[i-1]); d != 6144*sim.Millisecond {
			t.Errorf("REQ %d %v after the last, want 6144 ms", i+1, d)
		}
	}
}

// TestMRAKeepsDREQTimeout: the MRA lengthens only the REQ's wait
// (ib_modify_mad on the REQ's MAD); ib_cm's cm_id_priv->timeout_ms,
// which the DREQ waits, stays the REQ timeout. The client disconnects
// after an MRA-covered connect, its first DREP lost: the DREQ goes again
// 6144 ms later, not 67584.
func TestMRAKeepsDREQTimeout(t *testing.T) {
	p := newPair(t, "drop cm=DREP first=1")
	cli, srv, _ := lateAccept(t, p, 8*sim.Second)
	p.hangUp(t, cli, srv)
	if dreqs := p.rec.times("b", wire.CMAttrDREQ); len(dreqs) != 2 || dreqs[1].Sub(dreqs[0]) != 6144*sim.Millisecond {
		t.Errorf("client DREQs at %v, want two 6144 ms apart", dreqs)
	}
}
