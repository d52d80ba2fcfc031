package verbs_test

import (
	"net/netip"
	"testing"

	"github.com/rocesim/rocesim/sim"
	"github.com/rocesim/rocesim/verbs"
	"github.com/rocesim/rocesim/wire"
)

// TestAddPortHost: two worlds, each with one host whose port is outside
// it (AddPortHost), joined by a hand-driven wire of no delay, as
// procfabric joins two processes: GID 0 is the link-local address the
// host was given, an RC SEND and its ACK cross, both ends complete, and
// nothing goes on the worlds' own fabrics.
func TestAddPortHost(t *testing.T) {
	addr := func(i byte) verbs.HostAddr {
		mac := wire.MAC{0x02, 0, 0, 0, 0, i}
		return verbs.HostAddr{MAC: mac, IPv4: netip.AddrFrom4([4]byte{10, 0, 0, i}), IPv6: mac.LinkLocal()}
	}
	var toB, toA [][]byte
	wa, wb := verbs.NewWorld(verbs.WorldConfig{Seed: 1}), verbs.NewWorld(verbs.WorldConfig{Seed: 1})
	ha := wa.AddPortHost("a", addr(1), 1, []verbs.HostAddr{addr(2)}, func(f, _ []byte) { toB = append(toB, append([]byte(nil), f...)) })
	hb := wb.AddPortHost("b", addr(2), 2, []verbs.HostAddr{addr(1)}, func(f, _ []byte) { toA = append(toA, append([]byte(nil), f...)) })
	a, b := setup(ha, 100), setup(hb, 200)
	for _, e := range []*endpoint{a, b} {
		if g, _ := e.ctx.QueryGID(1, 0); !g.IsLinkLocalUnicast() {
			t.Fatalf("GID 0 %v, want the link-local address", g)
		}
	}
	if err := a.connect(b); err != nil {
		t.Fatal(err)
	}
	if err := b.connect(a); err != nil {
		t.Fatal(err)
	}
	b.qp.PostRecv([]verbs.RecvWR{{WRID: 1, SGList: []verbs.SGE{b.mr.SGE(0, 4096)}}})
	copy(a.buf, "ping")
	if _, err := a.qp.PostSend([]verbs.SendWR{{WRID: 2, Opcode: verbs.WRSend, Flags: verbs.SendSignaled, SGList: []verbs.SGE{a.mr.SGE(0, 4)}}}); err != nil {
		t.Fatal(err)
	}
	frames := 0
	for range 1000 {
		now := wa.Now()
		if len(toB)+len(toA) > 0 {
			for _, f := range toB {
				hb.Receive(now, 0, f)
				ha.TxDone(now)
			}
			for _, f := range toA {
				ha.Receive(now, 0, f)
				hb.TxDone(now)
			}
			frames += len(toB) + len(toA)
			toB, toA = toB[:0], toA[:0]
			continue
		}
		next := sim.Never
		for _, w := range []*verbs.World{wa, wb} {
			if s := w.Scheduler(); s.Pending() > 0 {
				next = min(next, s.NextAt())
			}
		}
		if next == sim.Never {
			break
		}
		wa.RunTo(next)
		wb.RunTo(next)
	}
	wcs := make([]verbs.WC, 2)
	if n := b.cq.Poll(wcs); n != 1 || wcs[0].Status != verbs.WCSuccess || string(b.buf[:4]) != "ping" {
		t.Errorf("b: %d completions %+v, buffer %q", n, wcs[0], b.buf[:4])
	}
	if n := a.cq.Poll(wcs); n != 1 || wcs[0].Status != verbs.WCSuccess {
		t.Errorf("a: %d completions %+v", n, wcs[0])
	}
	if frames != 2 { // the SEND and its ACK
		t.Errorf("%d frames on the wire, want 2", frames)
	}
	if f := wa.Frames(); f != 0 {
		t.Errorf("%d frames on the world's own fabric, want 0", f)
	}
}
