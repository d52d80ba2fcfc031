package verbs

// Hooks for a driver that runs the world inside a C program's process
// (the drop-in libibverbs.so.1, dropin/ibverbs): rxe's GID 0 and a look
// at a channel's events without taking them.

import (
	"net/netip"

	"github.com/rocesim/rocesim/nic"
	"github.com/rocesim/rocesim/wire"
)

// LinkLocal returns the IPv6 link-local address the kernel gives an
// interface with this MAC (modified EUI-64, RFC 4291 appendix A: the
// universal/local bit flipped, ff:fe in the middle). rxe's GID table
// starts with it: the core's default GID of a RoCE port
// (roce_gid_mgmt.c), RoCE v2 on rxe, whose port speaks nothing else.
func LinkLocal(mac wire.MAC) netip.Addr { return mac.LinkLocal() }

// Pending returns how many completion events wait on the channel
// (ibv_get_cq_event would return them without blocking); 0 for nil.
// A driver keeps the channel's file descriptor readable while it is not
// 0.
func (ch *CompChannel) Pending() int {
	if ch == nil {
		return 0
	}
	return ch.ch.Pending()
}

// Is reports whether the QP is the device's n: an AsyncEvent names the
// device's object, a driver finds its own by it.
func (q *QP) Is(n *nic.QP) bool { return q != nil && n != nil && q.qp == n }

// Is reports whether the CQ is the device's n (see QP.Is).
func (q *CQ) Is(n *nic.CQ) bool { return q != nil && n != nil && q.cq == n }

// Is reports whether the SRQ is the device's n (see QP.Is).
func (s *SRQ) Is(n *nic.SRQ) bool { return s != nil && n != nil && s.srq == n }
