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

// checkPort says whether id may take port (bound to the any address, or
// to the host's: anyAddr), as cma_check_port does: every other ID that
// holds the port refuses it (bound to it, listening on it, or given it
// for rdma_resolve_addr, until destroyed), unless both it and id allow
// address reuse (reuse: id's SetReuseAddr; false when id starts to
// listen, which takes the port whole). The any address conflicts with
// every address (EADDRNOTAVAIL), the host's address with itself
// (EADDRINUSE), as real rxe's kernel answers (conformance
// TestRdmacmMisuseRxe). The owners are looked at newest bound first, as
// the kernel walks them. A listener's passive IDs share its port, as in
// the kernel: they hold none.
func (a *agent) checkPort(id *CMID, anyAddr bool, port uint16, reuse bool) syscall.Errno {
	owners := a.ports[portKey{id.ps, port}]
	for i := len(owners) - 1; i >= 0; i-- {
		o := owners[i]
		if o == id {
			continue
		}
		if reuse && o.reuseAddr {
			continue
		}
		if anyAddr || o.holdsAny() {
			return syscall.EADDRNOTAVAIL
		}
		return syscall.EADDRINUSE
	}
	return 0
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

// bindAny binds an unbound ID to the any address and the first port of
// the ephemeral range no other ID holds (rdma_listen on an unbound ID:
// the kernel's cma_bind_any picks one at random; the first free one
// here, so that a run is the same each time).
func (id *CMID) bindAny() error {
	port := uint16(ephemeralLow)
	for id.a.checkPort(id, true, port, false) != 0 {
		port++
		if port == 0 {
			return fmt.Errorf("rdmacm: listen: no free port: %w", syscall.EADDRNOTAVAIL)
		}
	}
	return id.BindAddr(netip.AddrPortFrom(netip.IPv4Unspecified(), port))
}
