package rdmacm

import (
	"fmt"
	"net/netip"
	"slices"
	"syscall"
)

// The port space: which IDs hold which port, and when another may take
// it too, as the kernel's rdma_cm decides it (cma_check_port).

// portKey names a port of a port space: each space has ports of its own
// (cma_ps_find), so RDMA_PS_TCP's 7174 is not RDMA_PS_UDP's.
type portKey struct {
	ps   PortSpace
	port uint16
}

// ephemeralLow is the bottom of the kernel's ip_local_port_range, where
// a listener bound to no port gets the first free one.
const ephemeralLow = 32768

// ephemeralHigh is the top of ip_local_port_range.
const ephemeralHigh = 60999

// checkPort says whether id may take port, bound to addr (the any
// address when not valid or unspecified; v6: of the IPv6 family), as
// cma_check_port does: every other ID that holds the port refuses it
// (bound to it, listening on it, or given it for rdma_resolve_addr,
// until destroyed), unless both it and id allow address reuse (reuse:
// id's SetReuseAddr; false when id starts to listen, which takes the
// port whole), or both are of their own family only (afOnly) and the
// families differ. The any address conflicts with every address
// (EADDRNOTAVAIL), an address with itself (EADDRINUSE), as real rxe's
// kernel answers (conformance TestRdmacmMisuseRxe); two different
// addresses (the host's IPv4 and IPv6 ones) do not conflict. The owners
// are looked at newest bound first, as the kernel walks them. A
// listener's passive IDs share its port, as in the kernel: they hold
// none.
func (a *agent) checkPort(id *CMID, addr netip.Addr, v6 bool, port uint16, reuse bool) syscall.Errno {
	anyAddr := !addr.IsValid() || addr.IsUnspecified()
	owners := a.ports[portKey{id.ps, port}]
	for i := len(owners) - 1; i >= 0; i-- {
		o := owners[i]
		if o == id {
			continue
		}
		if reuse && o.reuseAddr {
			continue
		}
		if id.afOnlyFor(v6) && o.afOnlyFor(o.v6) && v6 != o.v6 {
			continue
		}
		if anyAddr || o.holdsAny() {
			return syscall.EADDRNOTAVAIL
		}
		if addr.Unmap() == o.src.Addr() {
			return syscall.EADDRINUSE
		}
	}
	return 0
}

// afOnlyFor is whether the ID, of family v6, takes its own family only:
// RDMA_OPTION_ID_AFONLY when set, else what the kernel gives at bind
// (an IPv4 ID is IPv4-only, an IPv6 one takes both while the sysctl
// net.ipv6.bindv6only is 0, its default).
func (id *CMID) afOnlyFor(v6 bool) bool {
	if id.afOnlySet {
		return id.afOnly
	}
	return !v6
}

// holdsAny says whether the ID holds its port on the any address: bound
// so and not resolved (address resolution gives an ID its device's
// address, as the kernel's addr_handler fills the source address).
func (id *CMID) holdsAny() bool {
	return !id.devBound && (id.state == stateIdle || id.state == stateListen)
}

// bind records id as bound to its port.
func (a *agent) bind(id *CMID) {
	if a.ports == nil {
		a.ports = map[portKey][]*CMID{}
	}
	k := portKey{id.ps, id.src.Port()}
	a.ports[k] = append(a.ports[k], id)
	id.portHeld = true
}

// unbind gives a destroyed ID's port back.
func (a *agent) unbind(id *CMID) {
	if !id.portHeld {
		return
	}
	k := portKey{id.ps, id.src.Port()}
	owners := slices.DeleteFunc(a.ports[k], func(o *CMID) bool { return o == id })
	if len(owners) == 0 {
		delete(a.ports, k)
	} else {
		a.ports[k] = owners
	}
	id.portHeld = false
}

// bindAny binds an ID that has no port to the first port of the
// ephemeral range no ID holds (rdma_listen on an unbound ID: the
// kernel's cma_bind_any picks one at random; the first free one here,
// so that a run is the same each time): on the any address of its
// family, or on the address it is bound to.
func (id *CMID) bindAny() error {
	port := uint16(ephemeralLow)
	for !id.a.portUnused(id.ps, port) {
		if port == ephemeralHigh {
			return fmt.Errorf("rdmacm: listen: no free port in %d–%d: %w", ephemeralLow, ephemeralHigh, syscall.EADDRNOTAVAIL)
		}
		port++
	}
	addr := netip.IPv4Unspecified()
	switch {
	case id.devBound:
		addr = id.src.Addr()
	case id.v6:
		addr = netip.IPv6Unspecified()
	}
	return id.BindAddr(netip.AddrPortFrom(addr, port))
}

// ephemeralPort returns a port of the kernel's ip_local_port_range
// (32768–60999) that no ID holds in port space ps, as
// cma_alloc_any_port finds one (a bind to port 0, rdma_resolve_addr on
// an unbound ID): from a place in the range drawn from the host's seeded
// stream, the first free one on, round the range; EADDRNOTAVAIL when
// every one is held.
func (a *agent) ephemeralPort(ps PortSpace) (uint16, error) {
	n := ephemeralHigh - ephemeralLow + 1
	start := a.rnd.IntN(n)
	for i := range n {
		if port := uint16(ephemeralLow + (start+i)%n); a.portUnused(ps, port) {
			return port, nil
		}
	}
	return 0, fmt.Errorf("no free port in %d–%d: %w", ephemeralLow, ephemeralHigh, syscall.EADDRNOTAVAIL)
}

// portUnused reports whether no ID holds port in port space ps: an
// ephemeral port is one nobody has (cma_alloc_any_port takes an unused
// one), whatever its owners' families or addresses.
func (a *agent) portUnused(ps PortSpace, port uint16) bool {
	return len(a.ports[portKey{ps, port}]) == 0
}
