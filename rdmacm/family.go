package rdmacm

import (
	"fmt"
	"net/netip"
	"syscall"
)

// An ID's addresses are of one family, IPv4 or IPv6 (rdma_cm's AF_INET
// or AF_INET6), fixed when it is bound or its address resolved, or, for
// a CONNECT_REQUEST's ID, by the IP CM header of the request. The family
// decides the host address the ID speaks from, the GID its QP sends from
// (sgid_index: the IPv4 address's GID is ::ffff:a.b.c.d, the IPv6
// address's is the address), the IP version of the CM header, and so the
// IP version of every frame of the connection. An IPv4 address given
// mapped into IPv6 is IPv4, as the drop-in reads it.

// is6 reports whether a is an IPv6 address (the unspecified :: included),
// not an IPv4 one mapped into IPv6.
func is6(a netip.Addr) bool { return a.Is6() && !a.Is4In6() }

// familyName names the family for errors.
func familyName(v6 bool) string {
	if v6 {
		return "IPv6"
	}
	return "IPv4"
}

// addrOf returns the host's address of the family (v6: IPv6), or
// EADDRNOTAVAIL when the host has none (a host made with an IPv4 address
// only).
func (a *agent) addrOf(v6 bool) (netip.Addr, error) {
	h := a.h.IPv4()
	if v6 {
		h = a.h.IPv6()
	}
	if !h.IsValid() {
		return h, fmt.Errorf("rdmacm: host %s has no %s address: %w", a.h.Name(), familyName(v6), syscall.EADDRNOTAVAIL)
	}
	return h, nil
}

// hostAddr is the host's address of the ID's family.
func (id *CMID) hostAddr() netip.Addr {
	if id.v6 {
		return id.a.h.IPv6()
	}
	return id.a.h.IPv4()
}

// IsIPv6 reports whether the ID's addresses are IPv6 (AF_INET6).
func (id *CMID) IsIPv6() bool { return id.v6 }

// sgidIndex is the index of the GID the ID's connection sends from:
// its host address's (cma_resolve_iboe_route takes the GID of the
// source address; rdma_init_qp_attr hands it out as ah_attr.grh's
// sgid_index).
func (id *CMID) sgidIndex() uint8 {
	i, _ := id.a.h.GIDIndex(id.hostAddr())
	return uint8(i)
}

// onLink reports whether dst is on the host's network, where address
// resolution asks the link (ARP, neighbour discovery) and times out when
// nobody answers, rather than failing at once for want of a route: for
// IPv4 the same first octet (the model's hosts share a /8); for IPv6 the
// same /64 as the host's address, or a link-local address.
func (a *agent) onLink(dst netip.Addr) bool {
	if !is6(dst) {
		self := a.h.IPv4()
		return self.IsValid() && dst.Unmap().As4()[0] == self.As4()[0]
	}
	if dst.IsLinkLocalUnicast() {
		return true
	}
	self := a.h.IPv6()
	if !self.IsValid() {
		return false
	}
	p, _ := self.Prefix(64)
	return p.Contains(dst)
}

// accepts reports whether listener l takes a request for dst of its
// IP version (v6: IPv6), as cma_match_private_data matches: a listener
// on the any address takes either version unless it takes its own
// family only (afOnlyFor: an IPv4 one does, an IPv6 one unless
// RDMA_OPTION_ID_AFONLY); otherwise the version must be its own, and
// its address, if it has one, dst.
func (l *CMID) accepts(v6 bool, dst netip.Addr) bool {
	anyAddr := l.holdsAny()
	if anyAddr && !l.afOnlyFor(l.v6) {
		return true
	}
	if v6 != l.v6 {
		return false
	}
	return anyAddr || dst.Unmap() == l.src.Addr()
}

// clashes reports whether id may not listen on its port beside listener
// l: both would take some request (the same address, or either on the
// any address), unless each takes its own family only and the families
// differ.
func (id *CMID) clashes(l *CMID) bool {
	if id.afOnlyFor(id.v6) && l.afOnlyFor(l.v6) && id.v6 != l.v6 {
		return false
	}
	return id.holdsAny() || l.holdsAny() || id.src.Addr() == l.src.Addr()
}
