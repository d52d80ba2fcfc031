package main

import (
	"net/netip"
	"syscall"
	"testing"
	"time"

	"github.com/rocesim/rocesim/rdmacm"
	"github.com/rocesim/rocesim/wire"
)

// TestHoldUntilAnswered: on a fabric, a program owes its peer an answer
// from the instant its CM receives a REQ or a DREQ until rdma_accept or
// rdma_disconnect, and the fabric's clock does not move meanwhile
// (cmHold), whatever the program's threads do: as rping's, one thread
// waits in a verb (its CQ thread in ibv_get_cq_event), the event reaches
// the program a little later (its CM thread wakes from poll(2)), and
// rping's main thread calls rdma_create_qp, a CM call, before
// rdma_accept. So the client sends one REQ and one DREQ, and gets no MRA
// (the server's CM answers a REQ that comes again before the accept
// with one).
//
// The hold used to start only when the program took the event and to
// end at its next CM call: the thread that brought the DREQ waited on
// the fabric again at once, the fabric moved the clock to the DREQ's
// resend (4.1 s later), and TestExecRping saw REQ REP RTU DREQ DREP DREQ
// DREP (under load REQ REP REQ REP RTU RTU, the hold gone at
// rdma_create_qp). The checks of cmHold right after the REQ or DREQ
// came, and after rdma_create_qp, fail on that code whatever the
// scheduling; the counts fail on it as soon as the program takes longer
// than the fabric needs to move the clock (the 50 ms it sleeps here).
func TestHoldUntilAnswered(t *testing.T) {
	dir := twoNodeFabric(t)
	sp, cp := fabricProcess(t, dir, "a"), fabricProcess(t, dir, "b")
	sc, cc := countCM(sp), countCM(cp)
	srv, cli := newCMEnd(t, sp), newCMEnd(t, cp)
	const port = 7490
	srv.do("rdma_bind_addr", func() syscall.Errno {
		a := netip.MustParseAddr("10.0.0.1").As4()
		return sp.cmBind(srv.id, a[:], port)
	})
	srv.do("rdma_listen", func() syscall.Errno { return sp.cmListen(srv.id, 1) })

	// The server's CQ thread: blocked in ibv_get_cq_event on a CQ that
	// never completes, it waits on the fabric for the process and so
	// takes every frame that comes; it returns when the process shuts
	// down.
	var chFD int
	srv.do("ibv_create_comp_channel", func() syscall.Errno {
		ctx, _, errno := sp.open(0)
		if errno != 0 {
			return errno
		}
		if chFD, errno = sp.createCompChannel(ctx); errno != 0 {
			return errno
		}
		_, _, errno = sp.createCQ(ctx, 4, chFD, 0, nil)
		return errno
	})
	go sp.call(func() { sp.getCQEvent(chFD, false) })

	// owed waits until the server's CM channel has an event waiting
	// (its fd readable: the program's CM thread would wake now) and
	// reports whether the clock is held then.
	owed := func(what string) {
		t.Helper()
		end := time.Now().Add(10 * time.Second)
		for {
			sp.mu.Lock()
			ready, held := sp.readableCM() > 0, sp.cmHold()
			sp.mu.Unlock()
			if ready {
				if !held {
					t.Errorf("%s came and the program has not answered: the clock is not held", what)
				}
				return
			}
			if time.Now().After(end) {
				t.Fatalf("no %s within 10 s", what)
			}
			time.Sleep(time.Millisecond)
		}
	}
	// The program is slower than the fabric.
	busy := func() { time.Sleep(50 * time.Millisecond) }

	cli.connect("10.0.0.1", port)
	owed("CONNECT_REQUEST")
	busy()
	conn := srv.next(rdmacm.EventConnectRequest).ID.Context.(*cmID).h
	srv.createQP(conn)
	sp.mu.Lock()
	if !sp.cmHold() {
		t.Error("after rdma_create_qp, before rdma_accept: the clock is not held")
	}
	sp.mu.Unlock()
	busy()
	srv.do("rdma_accept", func() syscall.Errno {
		return sp.cmAccept(conn, rdmacm.ConnParam{ResponderResources: 1, InitiatorDepth: 1, RetryCount: 7, RNRRetryCount: 7})
	})
	cli.next(rdmacm.EventEstablished)
	srv.next(rdmacm.EventEstablished)

	cli.do("rdma_disconnect", func() syscall.Errno { return cp.cmDisconnect(cli.id) })
	// The client's CM thread waits for its DISCONNECTED (the DREP).
	got := make(chan *rdmacm.Event, 1)
	go cp.call(func() {
		ev, _ := cp.cmGetEvent(cli.fd, false, false)
		got <- ev
	})
	owed("DISCONNECTED")
	busy()
	srv.next(rdmacm.EventDisconnected)
	busy()
	srv.do("rdma_disconnect", func() syscall.Errno { return sp.cmDisconnect(conn) })
	select {
	case ev := <-got:
		if ev == nil || ev.Event != rdmacm.EventDisconnected {
			t.Errorf("the client's event after its DREQ: %v, want DISCONNECTED", ev)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("the client got no event within 10 s of the DREP")
	}

	for _, c := range []struct {
		who  string
		n    *cmCounter
		attr wire.CMAttr
		want int
	}{
		{"server", sc, wire.CMAttrREQ, 1}, {"server", sc, wire.CMAttrRTU, 1}, {"server", sc, wire.CMAttrDREQ, 1},
		{"client", cc, wire.CMAttrMRA, 0}, {"client", cc, wire.CMAttrREP, 1}, {"client", cc, wire.CMAttrDREP, 1},
	} {
		if n := c.n.count(c.attr); n != c.want {
			t.Errorf("the %s received %d %v, want %d", c.who, n, c.attr, c.want)
		}
	}
}
