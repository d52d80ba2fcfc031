package verbs_test

import (
	"net/netip"
	"testing"

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
// link-local GID (index 0) and the IPv4 one (index 1), looped back by
// the switch, as rxe loops them back; without Loopback nothing arrives.
func TestLoopback(t *testing.T) {
	for _, loop := range []bool{false, true} {
		w := verbs.NewWorld(verbs.WorldConfig{Seed: 1, LinkLocalGID: true})
		h := w.AddHost("a")
		if err := w.ConnectSwitch(); err != nil {
			t.Fatal(err)
		}
		if loop {
			h.Loopback()
		}
		a, b := setup(h, 100), setup(h, 200)
		if err := a.connect(b); err != nil {
			t.Fatal(err)
		}
		if err := b.connect(a); err != nil {
			t.Fatal(err)
		}
		b.qp.PostRecv([]verbs.RecvWR{{WRID: 1, SGList: []verbs.SGE{b.mr.SGE(0, 4096)}}})
		copy(a.buf, "ping")
		a.qp.PostSend([]verbs.SendWR{{WRID: 2, Opcode: verbs.WRSend, Flags: verbs.SendSignaled, SGList: []verbs.SGE{a.mr.SGE(0, 4)}}})
		if err := w.RunFor(1000000); err != nil {
			t.Fatal(err)
		}
		wcs := make([]verbs.WC, 4)
		nb := b.cq.Poll(wcs)
		na := a.cq.Poll(wcs[1:])
		got := nb == 1 && na == 1 && wcs[0].Status == verbs.WCSuccess && wcs[1].Status == verbs.WCSuccess && string(b.buf[:4]) == "ping"
		if got != loop {
			t.Errorf("loopback %v: %d and %d completions, buffer %q", loop, nb, na, b.buf[:4])
		}
	}
}
