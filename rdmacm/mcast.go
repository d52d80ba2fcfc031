package rdmacm

import (
	"fmt"
	"net/netip"
	"syscall"

	"github.com/rocesim/rocesim/verbs"
	"github.com/rocesim/rocesim/wire"
)

// mcJoin is one group an ID joined (librdmacm's struct cma_multicast):
// the address it was joined by, the group's GID, and whether the join's
// event has attached the ID's QP.
type mcJoin struct {
	addr     netip.Addr // as given, unmapped
	mgid     netip.Addr // the group's GID: IPv4 mapped into IPv6
	sendOnly bool
	context  any
	attached *verbs.QP // the QP the join's event attached, nil if none
}

// ipJoined reports whether the join made an IP-level join (JoinGroup):
// a send-only member makes none, and the kernel's join of an address
// that is no group changes nothing the model keeps.
func (j *mcJoin) ipJoined() bool { return !j.sendOnly && j.addr.IsMulticast() }

// errNotSupp is the kernel's ENOTSUPP (524), which is not a POSIX errno:
// rdma_join_multicast returns it for an IPv6 group on a RoCE v2 port, and
// a C program's errno says "Unknown error 524".
const errNotSupp = syscall.Errno(524)

// JoinMulticast joins the ID to the IPv4 multicast group addr
// (rdma_join_multicast, rdma_join_multicast_ex with
// RDMA_MC_JOIN_FLAG_SENDONLY_FULLMEMBER when sendOnly), as rdma_cm does
// on a RoCE port (cma_iboe_join_multicast): no SA, the event comes at
// once. MULTICAST_JOIN carries the group's address vector (its GID the
// IPv4 group mapped into IPv6, hop limit 64), the multicast QPN and the
// ID's Q_Key (UD.AHAttr, UD.QPNum, UD.QKey) and context
// (Event.JoinContext); when the event is taken (GetEvent) the ID's QP,
// if it has one, is attached to the group, unless the join is send-only,
// as librdmacm's ucma_process_join does; if that attach fails the event
// is MULTICAST_ERROR with status -1.
//
// The ID must be UD (RDMA_PS_UDP) and have its device: bound to the
// host's address or its address resolved (EINVAL otherwise). An IPv6
// group is refused with the kernel's ENOTSUPP (524): RoCE v2 joins
// IPv4 groups only. The host's IP layer is not modelled: no IGMP
// report goes on the wire, as one does on Linux.
func (id *CMID) JoinMulticast(addr netip.Addr, context any, sendOnly bool) error {
	if id.state == stateDestroyed {
		return misuse("join_multicast", "the ID is destroyed")
	}
	if !(id.state == stateAddrResolved || (id.state == stateIdle && id.devBound)) {
		return misuse("join_multicast", "the ID is %v and has no device: bind it to the host's address or resolve an address first", id.state)
	}
	if id.ps != PSUDP {
		return misuse("join_multicast", "the ID's port space %#x is not RDMA_PS_UDP (0x111): only UD joins groups", uint16(id.ps))
	}
	a := addr
	switch {
	case !a.Is4():
		// An IPv6 group, or an IPv4 one given as IPv6 (AF_INET6 with
		// ::ffff:224.0.0.5): the kernel joins only an AF_INET address.
		return fmt.Errorf("rdmacm: join_multicast: %v: a RoCE v2 port joins IPv4 groups only, given as IPv4 (the kernel's ENOTSUPP): %w", addr, errNotSupp)
	case a.IsUnspecified():
		return misuse("join_multicast", "the group address is 0.0.0.0")
	}
	j := &mcJoin{addr: a, mgid: netip.AddrFrom16(a.As16()), sendOnly: sendOnly, context: context}
	id.mc = append(id.mc, j)
	if j.ipJoined() {
		// rdma_cm's IGMP join (cma_igmp_send): the host now takes the
		// group's datagrams. (For an address that is no group the
		// kernel joins all the same; the attach that follows the event
		// fails, MULTICAST_ERROR.)
		if err := id.a.h.JoinGroup(a); err != nil {
			return err
		}
	}
	id.post(&Event{Event: EventMulticastJoin, ID: id, JoinContext: context, mc: j, Param: ConnParam{QPNum: wire.MulticastQPN},
		UD: UDParam{QPNum: wire.MulticastQPN, QKey: wire.UDPQKey,
			AHAttr: verbs.AHAttr{IsGlobal: true, PortNum: 1, GRH: verbs.GRH{DGID: j.mgid, HopLimit: 64, SGIDIndex: id.sgidIndex()}}}})
	return nil
}

// LeaveMulticast leaves the group addr (rdma_leave_multicast): the QP
// the join attached is detached. EADDRNOTAVAIL if the ID has not joined
// it, as librdmacm finds no such group.
func (id *CMID) LeaveMulticast(addr netip.Addr) error {
	a := addr.Unmap()
	for i, j := range id.mc {
		if j.addr != a {
			continue
		}
		id.mc = append(id.mc[:i], id.mc[i+1:]...)
		if j.attached != nil {
			// librdmacm ignores the detach's answer: the QP may be
			// gone already.
			_ = j.attached.DetachMcast(j.mgid, 0)
			j.attached = nil
		}
		id.ch.drop(func(e *Event) bool { return e.mc == j })
		id.leave(j)
		return nil
	}
	return fmt.Errorf("rdmacm: leave_multicast: the ID has not joined %v: %w", addr, syscall.EADDRNOTAVAIL)
}

// leave ends join j at the IP level (the kernel's leave: cma_igmp_send
// with join false).
func (id *CMID) leave(j *mcJoin) {
	if j.ipJoined() {
		id.a.h.LeaveGroup(j.addr)
	}
}

// leaveAll ends every join of an ID being destroyed, as the kernel's
// rdma_destroy_id leaves its groups (cma_leave_mc_groups). The QP stays
// attached (librdmacm's rdma_destroy_id does not detach it), so it gets
// the groups' datagrams only while another join on its host holds them.
func (id *CMID) leaveAll() {
	for _, j := range id.mc {
		id.leave(j)
	}
	id.mc = nil
}

// processJoin is librdmacm's ucma_process_join for a MULTICAST_JOIN being
// taken: the ID's QP, if any, is attached to the group unless the join
// is send-only; a failed attach turns the event into MULTICAST_ERROR
// with status -1 (rdma_seterrno's answer), as there. (A join left, or
// an ID destroyed, before its event was taken took the event with it.)
func (e *Event) processJoin() {
	j, id := e.mc, e.ID
	if id.QP == nil || j.sendOnly {
		return
	}
	if err := id.QP.AttachMcast(j.mgid, 0); err != nil {
		e.Event, e.Status = EventMulticastError, -1
		return
	}
	j.attached = id.QP
}
