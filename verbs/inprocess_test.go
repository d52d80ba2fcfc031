package verbs_test

import (
	"fmt"
	"net/netip"
	"strings"
	"testing"

	"github.com/rocesim/rocesim/sim"
	"github.com/rocesim/rocesim/verbs"
	"github.com/rocesim/rocesim/wire"
)

func TestLinkLocal(t *testing.T) {
	// The kernel's modified EUI-64 of 52:54:00:12:34:56 (QEMU's default
	// MAC): fe80::5054:ff:fe12:3456.
	if got, want := verbs.LinkLocal(wire.MAC{0x52, 0x54, 0, 0x12, 0x34, 0x56}), netip.MustParseAddr("fe80::5054:ff:fe12:3456"); got != want {
		t.Errorf("LinkLocal = %v, want %v", got, want)
	}
	w := verbs.NewWorld(verbs.WorldConfig{Seed: 1, LinkLocalGID: true})
	ctx, _ := w.AddHost("a").GetDeviceList()[0].Open()
	g0, _ := ctx.QueryGID(1, 0)
	g1, _ := ctx.QueryGID(1, 1)
	if g0.String() != "fe80::ff:fe00:1" || g1.String() != "::ffff:10.0.0.1" {
		t.Errorf("GIDs %v %v, want fe80::ff:fe00:1 ::ffff:10.0.0.1", g0, g1)
	}
}

// TestLoopback: two RC QPs of one device exchange a SEND over the
// device's own GID, as two QPs of one rxe device do (rxe_loopback). On a
// switch the frames go out and come back down the same port; on a
// direct link to another host they come back in the node at once and
// never reach the link (rxe puts no such frame on the wire), in the
// order sent.
func TestLoopback(t *testing.T) {
	for _, sw := range []bool{true, false} {
		tr := &sim.Trace{}
		w := verbs.NewWorld(verbs.WorldConfig{Seed: 1, LinkLocalGID: true, Trace: tr})
		h, other := w.AddHost("a"), w.AddHost("b")
		connect := func() error { return w.Connect(h, other) }
		if sw {
			connect = w.ConnectSwitch
		}
		if err := connect(); err != nil {
			t.Fatal(err)
		}
		a, b := setup(h, 100), setup(h, 200)
		if err := a.connect(b); err != nil {
			t.Fatal(err)
		}
		if err := b.connect(a); err != nil {
			t.Fatal(err)
		}
		for i := range 3 {
			b.qp.PostRecv([]verbs.RecvWR{{WRID: uint64(i), SGList: []verbs.SGE{b.mr.SGE(uint64(i)*8, 8)}}})
		}
		copy(a.buf, "ping0ping1ping2")
		for i := range 3 {
			a.qp.PostSend([]verbs.SendWR{{WRID: uint64(i), Opcode: verbs.WRSend, Flags: verbs.SendSignaled, SGList: []verbs.SGE{a.mr.SGE(uint64(i)*5, 5)}}})
		}
		if err := w.RunFor(1000000); err != nil {
			t.Fatal(err)
		}
		wcs := make([]verbs.WC, 8)
		nb := b.cq.Poll(wcs)
		for i, wc := range wcs[:nb] {
			if wc.Status != verbs.WCSuccess || wc.WRID != uint64(i) || wc.ByteLen != 5 {
				t.Errorf("switch %v: receive %d: %+v", sw, i, wc)
			}
		}
		if na := a.cq.Poll(wcs[nb:]); nb != 3 || na != 3 {
			t.Errorf("switch %v: %d and %d completions, want 3 and 3", sw, nb, na)
		}
		if got := string(b.buf[:5]) + string(b.buf[8:13]) + string(b.buf[16:21]); got != "ping0ping1ping2" {
			t.Errorf("switch %v: received %q", sw, got)
		}
		loops := 0
		for _, e := range tr.Events() {
			if e.Kind == "frame-loop" {
				loops++
			}
		}
		if sw {
			if loops != 0 {
				t.Errorf("switch: %d frames looped in the node, want none (the switch turns them)", loops)
			}
			continue
		}
		l := w.Fabric().Links()[0]
		if s0, s1 := l.Stats(0), l.Stats(1); s0.TxFrames != 0 || s1.TxFrames != 0 {
			t.Errorf("direct link: %d and %d frames on the link, want none", s0.TxFrames, s1.TxFrames)
		}
		if loops < 6 { // three SENDs and their ACKs, at least
			t.Errorf("direct link: %d frame-loop events, want at least 6", loops)
		}
	}
}

// TestLoopWatchOrder: on a direct link, a frame a host sends itself is
// recorded at once, a frame for the peer only when it reaches the wire:
// the stall watch, which paired each record with the frames in the order
// sent, gave the looped frames the peer's entries (a flow a→a toward
// the peer's QP, with its PSNs). It now hears each frame from its NIC as
// it is sent, and names each flow by the frame's own addressee.
func TestLoopWatchOrder(t *testing.T) {
	w := verbs.NewWorld(verbs.WorldConfig{Seed: 1})
	ha, hb := w.AddHost("a"), w.AddHost("b")
	if err := w.Connect(ha, hb); err != nil {
		t.Fatal(err)
	}
	p, q := setup(ha, 100), setup(hb, 200)
	x, y := setup(ha, 5000), setup(ha, 9000)
	for _, c := range [][2]*endpoint{{p, q}, {q, p}, {x, y}, {y, x}} {
		if err := c[0].connect(c[1]); err != nil {
			t.Fatal(err)
		}
	}
	// Four receives for eight SENDs on each pair: the last four are
	// refused with RNR NAKs and resent, so the watch knows both flows.
	for i := range 4 {
		q.qp.PostRecv([]verbs.RecvWR{{WRID: uint64(i), SGList: []verbs.SGE{q.mr.SGE(uint64(i)*128, 128)}}})
		y.qp.PostRecv([]verbs.RecvWR{{WRID: uint64(i), SGList: []verbs.SGE{y.mr.SGE(uint64(i)*128, 128)}}})
	}
	// Same-sized SENDs on both pairs: a length check alone cannot tell
	// their records apart.
	for i := range 8 {
		p.qp.PostSend([]verbs.SendWR{{WRID: uint64(i), Opcode: verbs.WRSend, SGList: []verbs.SGE{p.mr.SGE(uint64(i)*128, 100)}}})
	}
	for i := range 8 {
		x.qp.PostSend([]verbs.SendWR{{WRID: uint64(i), Opcode: verbs.WRSend, SGList: []verbs.SGE{x.mr.SGE(uint64(i)*128, 100)}}})
	}
	if err := w.RunFor(1000000); err != nil {
		t.Fatal(err)
	}
	st := w.WatchState()
	// Hosts a=0, b=1: p→q is a→b toward q, x→y is a→a toward y; a→a
	// toward q or a→b toward y never existed.
	for _, bad := range []string{fmt.Sprintf("from:0 to:0 destQPN:%d ", q.qp.QPNum), fmt.Sprintf("from:0 to:1 destQPN:%d ", y.qp.QPNum)} {
		if strings.Contains(st, bad) {
			t.Errorf("the stall watch made up a flow %q:\n%s", bad, st)
		}
	}
	for _, good := range []string{fmt.Sprintf("from:0 to:1 destQPN:%d ", q.qp.QPNum), fmt.Sprintf("from:0 to:0 destQPN:%d ", y.qp.QPNum)} {
		if !strings.Contains(st, good) {
			t.Errorf("the stall watch lacks the flow %q:\n%s", good, st)
		}
	}
}
