package rdmacm_test

import (
	"errors"
	"net/netip"
	"slices"
	"syscall"
	"testing"

	"github.com/rocesim/rocesim/rdmacm"
)

// TestPortSharing: a port is shared as the kernel's cma_check_port
// shares it (and as real rxe answered cmd/rocesim's cm_misuse.c reuse_*
// lines): two IDs that both allow address reuse bind the same port; one
// that does not is refused (EADDRINUSE for the same address,
// EADDRNOTAVAIL for the any address); a reusable ID listens only once
// the port is its own, and is not reusable after; ports are per port
// space; the port rdma_resolve_addr gives an ID is its own; a destroyed
// ID's port is free. Listening unbound takes the first free port from
// 32768.
func TestPortSharing(t *testing.T) {
	p := newPair(t, "")
	id := func(ps rdmacm.PortSpace, reuse bool) *rdmacm.CMID {
		t.Helper()
		i, err := rdmacm.CreateID(p.srv.ch, nil, ps)
		if err != nil {
			t.Fatal(err)
		}
		if err := i.SetReuseAddr(reuse); err != nil {
			t.Fatal(err)
		}
		return i
	}
	self := netip.AddrPortFrom(p.srv.h.IPv4(), 7300)
	anyAddr := netip.AddrPortFrom(netip.IPv4Unspecified(), 7300)
	want := func(what string, err error, e syscall.Errno) {
		t.Helper()
		if (e == 0 && err != nil) || (e != 0 && !errors.Is(err, e)) {
			t.Errorf("%s: %v, want errno %d", what, err, e)
		}
	}
	r1, r2, r3 := id(rdmacm.PSTCP, true), id(rdmacm.PSTCP, true), id(rdmacm.PSTCP, false)
	want("first bind", r1.BindAddr(self), 0)
	want("both reusable", r2.BindAddr(self), 0)
	want("one not, same address", r3.BindAddr(self), syscall.EADDRINUSE)
	want("one not, any address", r3.BindAddr(anyAddr), syscall.EADDRNOTAVAIL)
	want("UDP's 7300 is another port", id(rdmacm.PSUDP, false).BindAddr(self), 0)
	want("listen on a shared port", r1.Listen(1), syscall.EADDRINUSE)
	if err := r2.Destroy(); err != nil {
		t.Fatal(err)
	}
	want("listen alone", r1.Listen(1), 0)
	if reuse, _ := r1.Options(); reuse {
		t.Error("a listener still allows address reuse")
	}
	r4 := id(rdmacm.PSTCP, true)
	want("bind by a listener", r4.BindAddr(self), syscall.EADDRINUSE)
	if err := r1.Destroy(); err != nil {
		t.Fatal(err)
	}
	want("bind once the listener is gone", r4.BindAddr(self), 0)

	// The port rdma_resolve_addr gave a client is its own until it is
	// destroyed.
	c := p.resolve(t, rdmacm.PSTCP, 7174)
	o, err := rdmacm.CreateID(p.cli.ch, nil, rdmacm.PSTCP)
	if err != nil {
		t.Fatal(err)
	}
	cport := c.LocalAddr().Port()
	want("bind to a resolved ID's port, any address", o.BindAddr(netip.AddrPortFrom(netip.IPv4Unspecified(), cport)), syscall.EADDRNOTAVAIL)
	want("bind to a resolved ID's port, its address", o.BindAddr(c.LocalAddr()), syscall.EADDRINUSE)
	if err := c.Destroy(); err != nil {
		t.Fatal(err)
	}
	want("bind once it is destroyed", o.BindAddr(netip.AddrPortFrom(p.cli.h.IPv4(), cport)), 0)

	u1, u2 := id(rdmacm.PSTCP, false), id(rdmacm.PSTCP, false)
	want("listen unbound", u1.Listen(1), 0)
	want("listen unbound again", u2.Listen(1), 0)
	if a, b := u1.LocalAddr().Port(), u2.LocalAddr().Port(); a != 32768 || b != 32769 {
		t.Errorf("unbound listeners took ports %d and %d, want 32768 and 32769", a, b)
	}
}

// TestBindPortZero: a bind to port 0 gives the ID an ephemeral port at
// once, as the kernel's does (and as real rxe answered cm_misuse.c's
// bind_port0 lines): LocalAddr says it, each ID has its own, another
// ID's bind to it is refused, a listen keeps it and a resolve from the
// bound ID uses it; the same seed gives the same ports.
func TestBindPortZero(t *testing.T) {
	ports := func() []uint16 {
		p := newPair(t, "")
		var out []uint16
		ids := make([]*rdmacm.CMID, 3)
		for k := range ids {
			i, err := rdmacm.CreateID(p.srv.ch, nil, rdmacm.PSTCP)
			if err != nil {
				t.Fatal(err)
			}
			if err := i.BindAddr(netip.AddrPortFrom(p.srv.h.IPv4(), 0)); err != nil {
				t.Fatal(err)
			}
			port := i.LocalAddr().Port()
			if port < 32768 || port > 60999 {
				t.Fatalf("ID %d bound to port %d, not an ephemeral one", k, port)
			}
			for _, o := range out {
				if o == port {
					t.Fatalf("two IDs bound to port 0 share port %d", port)
				}
			}
			out = append(out, port)
			ids[k] = i
		}
		other, err := rdmacm.CreateID(p.srv.ch, nil, rdmacm.PSTCP)
		if err != nil {
			t.Fatal(err)
		}
		if err := other.BindAddr(netip.AddrPortFrom(p.srv.h.IPv4(), out[0])); !errors.Is(err, syscall.EADDRINUSE) {
			t.Errorf("a bind to the port a bind to 0 gave: %v, want EADDRINUSE", err)
		}
		if err := ids[0].Listen(1); err != nil {
			t.Fatal(err)
		}
		if got := ids[0].LocalAddr().Port(); got != out[0] {
			t.Errorf("listening moved the ID from port %d to %d", out[0], got)
		}
		if err := ids[1].ResolveAddr(netip.Addr{}, netip.AddrPortFrom(p.cli.h.IPv4(), 7000), 2000); err != nil {
			t.Fatal(err)
		}
		if got := ids[1].LocalAddr().Port(); got != out[1] {
			t.Errorf("resolving moved the ID from port %d to %d", out[1], got)
		}
		return out
	}
	first, again := ports(), ports()
	if !slices.Equal(first, again) {
		t.Errorf("the same seed gave ports %v, then %v", first, again)
	}
}
