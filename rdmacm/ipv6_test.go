package rdmacm_test

import (
	"errors"
	"net/netip"
	"syscall"
	"testing"

	"github.com/rocesim/rocesim/rdmacm"
	"github.com/rocesim/rocesim/wire"
)

// listenAt makes a listener of the server bound to addr:port, IPv6-only
// when afOnly is 1 (RDMA_OPTION_ID_AFONLY), left as the family gives it
// when 0.
func (p *pair) listenAt(t *testing.T, ps rdmacm.PortSpace, addr string, port uint16, afOnly int) *rdmacm.CMID {
	t.Helper()
	l, err := rdmacm.CreateID(p.srv.ch, nil, ps)
	if err != nil {
		t.Fatal(err)
	}
	if afOnly == 1 {
		if err := l.SetAFOnly(true); err != nil {
			t.Fatal(err)
		}
	}
	if err := l.BindAddr(netip.AddrPortFrom(netip.MustParseAddr(addr), port)); err != nil {
		t.Fatalf("bind %s:%d: %v", addr, port, err)
	}
	if err := l.Listen(1); err != nil {
		t.Fatalf("listen %s:%d: %v", addr, port, err)
	}
	return l
}

// dialTo runs the client's side to Connect, toward addr:port in port
// space ps.
func (p *pair) dialTo(t *testing.T, ps rdmacm.PortSpace, addr string, port uint16) *rdmacm.CMID {
	t.Helper()
	id, err := rdmacm.CreateID(p.cli.ch, nil, ps)
	if err != nil {
		t.Fatal(err)
	}
	if err := id.ResolveAddr(netip.Addr{}, netip.AddrPortFrom(netip.MustParseAddr(addr), port), 2000); err != nil {
		t.Fatalf("resolve %s: %v", addr, err)
	}
	p.event(t, p.cli.ch, rdmacm.EventAddrResolved)
	if err := id.ResolveRoute(2000); err != nil {
		t.Fatal(err)
	}
	p.event(t, p.cli.ch, rdmacm.EventRouteResolved)
	if err := id.CreateQP(p.cli.pd, p.cli.qpAttr()); err != nil {
		t.Fatal(err)
	}
	if err := id.Connect(rdmacm.ConnParam{ResponderResources: 1, InitiatorDepth: 1}); err != nil {
		t.Fatal(err)
	}
	return id
}

// TestIPv6Connect: rdma_cm over IPv6, as rping -a fd00::1 does it: the
// client's ID and the server's new ID are IPv6 (their addresses, the
// sgid_index of the IPv6 GID in the QPs' address vectors), every CM
// message and every packet of the connection is an IPv6 frame, the REQ
// carries the IPv6 addresses in its GIDs and its IP CM header (IP
// version 6), and a SEND crosses.
func TestIPv6Connect(t *testing.T) {
	p := newPair(t, "")
	p.listen.Destroy()
	p.listen = p.listenAt(t, rdmacm.PSTCP, "fd00::1", rpingPort, 0)
	cli := p.dialTo(t, rdmacm.PSTCP, "fd00::1", rpingPort)
	srv := p.answer(t)
	p.event(t, p.cli.ch, rdmacm.EventEstablished)
	p.event(t, p.srv.ch, rdmacm.EventEstablished)
	if got := cli.RemoteAddr(); got != netip.MustParseAddrPort("[fd00::1]:7174") {
		t.Errorf("client's peer %v, want [fd00::1]:7174", got)
	}
	if got := cli.LocalAddr().Addr(); got != netip.MustParseAddr("fd00::2") {
		t.Errorf("client's address %v, want fd00::2", got)
	}
	if got := srv.RemoteAddr(); got != netip.AddrPortFrom(netip.MustParseAddr("fd00::2"), cli.LocalAddr().Port()) {
		t.Errorf("server's peer %v, want the client's %v", got, cli.LocalAddr())
	}
	if got := srv.LocalAddr(); got != netip.MustParseAddrPort("[fd00::1]:7174") {
		t.Errorf("server's address %v, want [fd00::1]:7174", got)
	}
	for _, id := range []*rdmacm.CMID{cli, srv} {
		if !id.IsIPv6() {
			t.Errorf("ID at %v is not IPv6", id.LocalAddr())
		}
		a, _ := id.QP.Query()
		want, ok := id.Host().GIDIndex(id.LocalAddr().Addr())
		if !ok || int(a.AHAttr.GRH.SGIDIndex) != want || a.AHAttr.GRH.DGID.Unmap() != id.RemoteAddr().Addr() || a.AHAttr.GRH.HopLimit != 64 {
			t.Errorf("QP at %v: AV %+v, want sgid_index %d (its IPv6 GID), dgid %v, hop limit 64", id.LocalAddr(), a.AHAttr.GRH, want, id.RemoteAddr().Addr())
		}
	}
	p.ping(t, cli)
	p.hangUp(t, cli, srv)

	var pk wire.Packet
	var cm []string
	for _, f := range p.rec.frames {
		if err := pk.Decode(f.data); err != nil {
			t.Fatalf("frame %x: %v", f.data, err)
		}
		if pk.Src().Is4() || pk.Src().Is4In6() {
			t.Errorf("an IPv4 frame on an IPv6 connection: %v > %v", pk.Src(), pk.Dst())
		}
		if !pk.ICRCValid() {
			t.Errorf("frame %v > %v: bad ICRC", pk.Src(), pk.Dst())
		}
		if pk.BTH.DestQP() != wire.GSIQPN {
			continue
		}
		m := wire.MAD(pk.Payload)
		attr := wire.CMAttr(m.Header().AttributeID)
		cm = append(cm, attr.String())
		if attr != wire.CMAttrREQ {
			continue
		}
		var r wire.CMREQ
		r.Decode(m.Data())
		if r.Primary.LocalGID.Addr() != netip.MustParseAddr("fd00::2") || r.Primary.RemoteGID.Addr() != netip.MustParseAddr("fd00::1") {
			t.Errorf("REQ path GIDs %v > %v, want fd00::2 > fd00::1", r.Primary.LocalGID.Addr(), r.Primary.RemoteGID.Addr())
		}
		ip := wire.DecodeCMIPHeader(r.PrivateData[:])
		if ip.IPVersion != 6 || ip.Src != netip.MustParseAddr("fd00::2") || ip.Dst != netip.MustParseAddr("fd00::1") || ip.SrcPort != cli.LocalAddr().Port() {
			t.Errorf("REQ's IP CM header %+v, want version 6 from [fd00::2]:%d to fd00::1", ip, cli.LocalAddr().Port())
		}
	}
	equal(t, "CM messages", cm, []string{"REQ", "REP", "RTU", "DREQ", "DREP"})
}

// TestIPv6Listeners: which listener takes which request, as the kernel's
// cma_match_private_data decides: a listener on :: takes IPv4 and IPv6
// requests, one IPv6-only (RDMA_OPTION_ID_AFONLY) IPv6 ones only, one on
// 0.0.0.0 IPv4 ones only (an IPv4 ID is IPv4-only: a REQ no listener
// of the port takes is rejected with reason 28, as ib_cm does when
// rdma_cm refuses it, where a port nobody listens on gives 8); the
// host's IPv4 and IPv6 addresses may listen on the same port, each
// taking its own.
func TestIPv6Listeners(t *testing.T) {
	type try struct {
		dst  string
		want rdmacm.EventType
	}
	cases := []struct {
		name   string
		listen []string // addresses bound, in order, on rpingPort
		afOnly int
		tries  []try
	}{
		{"any6 takes both", []string{"::"}, 0, []try{{"fd00::1", rdmacm.EventEstablished}, {"10.0.0.1", rdmacm.EventEstablished}}},
		{"any6 IPv6-only", []string{"::"}, 1, []try{{"10.0.0.1", rdmacm.EventRejected}, {"fd00::1", rdmacm.EventEstablished}}},
		{"any4 takes IPv4 only", []string{"0.0.0.0"}, 0, []try{{"fd00::1", rdmacm.EventRejected}, {"10.0.0.1", rdmacm.EventEstablished}}},
		{"both addresses", []string{"10.0.0.1", "fd00::1"}, 0, []try{{"fd00::1", rdmacm.EventEstablished}, {"10.0.0.1", rdmacm.EventEstablished}}},
		{"any4 and IPv6-only any6", []string{"0.0.0.0", "::"}, 1, []try{{"fd00::1", rdmacm.EventEstablished}, {"10.0.0.1", rdmacm.EventEstablished}}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			p := newPair(t, "")
			p.listen.Destroy()
			var ls []*rdmacm.CMID
			for _, a := range c.listen {
				ls = append(ls, p.listenAt(t, rdmacm.PSTCP, a, rpingPort, c.afOnly))
			}
			for _, tr := range c.tries {
				cli := p.dialTo(t, rdmacm.PSTCP, tr.dst, rpingPort)
				if tr.want == rdmacm.EventRejected {
					ev := p.event(t, p.cli.ch, rdmacm.EventRejected)
					if ev.Status != 28 {
						t.Errorf("to %s: REJECTED status %d, want 28 (no listener of the port takes it)", tr.dst, ev.Status)
					}
					continue
				}
				ev := p.event(t, p.srv.ch, rdmacm.EventConnectRequest)
				want := ls[0]
				if len(ls) > 1 && netip.MustParseAddr(tr.dst).Is6() {
					want = ls[1] // the listener on fd00::1
				}
				if ev.ListenID != want {
					t.Errorf("to %s: the request came on the listener at %v, want %v", tr.dst, ev.ListenID.LocalAddr(), want.LocalAddr())
				}
				if ev.ID.IsIPv6() != netip.MustParseAddr(tr.dst).Is6() {
					t.Errorf("to %s: the new ID is IPv6 %v", tr.dst, ev.ID.IsIPv6())
				}
				p.accept(t, ev)
				p.event(t, p.cli.ch, rdmacm.EventEstablished)
				p.event(t, p.srv.ch, rdmacm.EventEstablished)
				for _, id := range []*rdmacm.CMID{cli, ev.ID} {
					// The GID of the ID's own address: index 0 for
					// IPv6, 1 for IPv4 here.
					want, ok := id.Host().GIDIndex(id.LocalAddr().Addr())
					a, _ := id.QP.Query()
					if !ok || int(a.AHAttr.GRH.SGIDIndex) != want {
						t.Errorf("to %s: QP at %v sends from sgid_index %d, want %d (its address's GID, found %v)", tr.dst, id.LocalAddr(), a.AHAttr.GRH.SGIDIndex, want, ok)
					}
				}
				p.ping(t, cli)
			}
		})
	}
}

// TestIPv6Misuse: the families must agree, as resolve_prepare_src
// checks: an ID bound to an IPv4 address resolving an IPv6 one, or to ::
// resolving an IPv4 one, is EINVAL, as is a src of the other family; an
// address no host interface has is EADDRNOTAVAIL, to bind or as a src
// (rdma_translate_ip); an IPv6 destination off the host's /64 is
// ENETUNREACH at once, one on it that no neighbour has is ADDR_ERROR
// -ETIMEDOUT after the timeout; a bind of the host's IPv6 or IPv4
// address to a port an ID holds on :: clashes (EADDRNOTAVAIL).
func TestIPv6Misuse(t *testing.T) {
	p := newPair(t, "")
	id := func() *rdmacm.CMID {
		id, err := rdmacm.CreateID(p.cli.ch, nil, rdmacm.PSTCP)
		if err != nil {
			t.Fatal(err)
		}
		return id
	}
	is := func(what string, err error, want syscall.Errno) {
		t.Helper()
		if (want == 0 && err != nil) || (want != 0 && !errors.Is(err, want)) {
			t.Errorf("%s: %v, want %v", what, err, want)
		}
	}
	a := id()
	is("bind 10.0.0.2", a.BindAddr(netip.MustParseAddrPort("10.0.0.2:0")), 0)
	is("IPv4 ID resolving fd00::1", a.ResolveAddr(netip.Addr{}, netip.MustParseAddrPort("[fd00::1]:7174"), 100), syscall.EINVAL)
	b := id()
	is("bind [::]:0", b.BindAddr(netip.MustParseAddrPort("[::]:0")), 0)
	is("IPv6 ID resolving 10.0.0.1", b.ResolveAddr(netip.Addr{}, netip.MustParseAddrPort("10.0.0.1:7174"), 100), syscall.EINVAL)
	c := id()
	is("src 10.0.0.2, dst fd00::1", c.ResolveAddr(netip.MustParseAddr("10.0.0.2"), netip.MustParseAddrPort("[fd00::1]:7174"), 100), syscall.EINVAL)
	// The refused resolve left the ID bound to its src, as the kernel
	// binds before it compares the families.
	is("then fd00::1 alone", c.ResolveAddr(netip.Addr{}, netip.MustParseAddrPort("[fd00::1]:7174"), 100), syscall.EINVAL)
	if got := c.LocalAddr().Addr(); got != netip.MustParseAddr("10.0.0.2") {
		t.Errorf("after the refused resolve the ID is at %v, want 10.0.0.2", got)
	}
	c = id()
	is("bind fd00::1 on host b", c.BindAddr(netip.MustParseAddrPort("[fd00::1]:0")), syscall.EADDRNOTAVAIL)
	is("src fd00::1 on host b", c.ResolveAddr(netip.MustParseAddr("fd00::1"), netip.MustParseAddrPort("[fd00::2]:7174"), 100), syscall.EADDRNOTAVAIL)
	is("fd01::1, off the /64", c.ResolveAddr(netip.Addr{}, netip.MustParseAddrPort("[fd01::1]:7174"), 100), syscall.ENETUNREACH)
	is("fd00::99, on the /64", c.ResolveAddr(netip.Addr{}, netip.MustParseAddrPort("[fd00::99]:7174"), 100), 0)
	if ev := p.event(t, p.cli.ch, rdmacm.EventAddrError); ev.Status != -int(syscall.ETIMEDOUT) {
		t.Errorf("ADDR_ERROR status %d, want -ETIMEDOUT", ev.Status)
	}
	l1, l2 := id(), id()
	is("bind [::]:7400", l1.BindAddr(netip.MustParseAddrPort("[::]:7400")), 0)
	if got := l1.LocalAddr(); got != netip.MustParseAddrPort("[::]:7400") {
		t.Errorf("an ID bound to [::]:7400 is at %v (rdma_get_local_addr keeps the any address)", got)
	}
	is("bind [fd00::2]:7400 beside [::]:7400", l2.BindAddr(netip.MustParseAddrPort("[fd00::2]:7400")), syscall.EADDRNOTAVAIL)
	is("bind 10.0.0.2:7400 beside [::]:7400", l2.BindAddr(netip.MustParseAddrPort("10.0.0.2:7400")), syscall.EADDRNOTAVAIL)
}

// TestIPv6UD: udaddy's exchange over IPv6: the SIDR_REQ's IP CM header
// says version 6 and the ESTABLISHED event's address handle sends from
// the IPv6 GID to the server's.
func TestIPv6UD(t *testing.T) {
	p := newPair(t, "")
	p.listenAt(t, rdmacm.PSUDP, "::", rpingPort, 0)
	cli := p.dialTo(t, rdmacm.PSUDP, "fd00::1", rpingPort)
	ev := p.event(t, p.srv.ch, rdmacm.EventConnectRequest)
	if !ev.ID.IsIPv6() {
		t.Fatal("the UD request's new ID is not IPv6")
	}
	if err := ev.ID.CreateQP(p.srv.pd, p.srv.qpAttr()); err != nil {
		t.Fatal(err)
	}
	if err := ev.ID.Accept(rdmacm.ConnParam{}); err != nil {
		t.Fatal(err)
	}
	est := p.event(t, p.cli.ch, rdmacm.EventEstablished)
	g := est.UD.AHAttr.GRH
	want, ok := cli.Host().GIDIndex(netip.MustParseAddr("fd00::2"))
	if !ok || g.DGID.Unmap() != netip.MustParseAddr("fd00::1") || int(g.SGIDIndex) != want {
		t.Errorf("UD address handle %+v, want dgid fd00::1 from sgid_index %d", g, want)
	}
	var pk wire.Packet
	reqs := 0
	for _, f := range p.rec.frames {
		if pk.Decode(f.data) != nil || pk.BTH.DestQP() != wire.GSIQPN {
			continue
		}
		m := wire.MAD(pk.Payload)
		if wire.CMAttr(m.Header().AttributeID) == wire.CMAttrSIDRREQ {
			reqs++
			var r wire.SIDRREQ
			r.Decode(m.Data())
			if ip := wire.DecodeCMIPHeader(r.PrivateData[:]); ip.IPVersion != 6 || ip.Dst != netip.MustParseAddr("fd00::1") {
				t.Errorf("SIDR_REQ IP CM header %+v, want version 6 to fd00::1", ip)
			}
		}
	}
	if reqs != 1 {
		t.Errorf("%d SIDR_REQs on the wire, want 1", reqs)
	}
}

// TestIPv6UDRefused: a UD request no listener of its port takes (IPv6
// to a 0.0.0.0 listener) is answered with SIDR_REP status 2, reject, as
// ib_cm rejects one whose ID rdma_cm refused; the client gets
// UNREACHABLE with that status. A port nobody listens on answers 1,
// unsupported (TestSIDRNoListener).
func TestIPv6UDRefused(t *testing.T) {
	p := newPair(t, "")
	p.listenAt(t, rdmacm.PSUDP, "0.0.0.0", rpingPort, 0)
	p.dialTo(t, rdmacm.PSUDP, "fd00::1", rpingPort)
	if ev := p.event(t, p.cli.ch, rdmacm.EventUnreachable); ev.Status != int(wire.SIDRReject) {
		t.Errorf("UNREACHABLE status %d, want %d (reject)", ev.Status, wire.SIDRReject)
	}
}

// TestListenKeepsBoundAddress: an ID bound to an address with port 0
// listens on that address and an ephemeral port, not on the any address:
// an IPv4 request to the port is rejected (28: no listener of the port
// takes it), and the host's IPv4 address may still take the port.
func TestListenKeepsBoundAddress(t *testing.T) {
	p := newPair(t, "")
	l := p.listenAt(t, rdmacm.PSTCP, "fd00::1", 0, 0)
	port := l.LocalAddr().Port()
	if l.LocalAddr().Addr() != netip.MustParseAddr("fd00::1") || port < 32768 {
		t.Fatalf("listener at %v, want fd00::1 and an ephemeral port", l.LocalAddr())
	}
	p.dialTo(t, rdmacm.PSTCP, "10.0.0.1", port)
	if ev := p.event(t, p.cli.ch, rdmacm.EventRejected); ev.Status != 28 {
		t.Errorf("IPv4 request to the IPv6 listener's port: REJECTED %d, want 28", ev.Status)
	}
	other, err := rdmacm.CreateID(p.srv.ch, nil, rdmacm.PSTCP)
	if err != nil {
		t.Fatal(err)
	}
	if err := other.BindAddr(netip.AddrPortFrom(netip.MustParseAddr("10.0.0.1"), port)); err != nil {
		t.Errorf("bind 10.0.0.1:%d beside [fd00::1]:%d: %v", port, port, err)
	}
}
