package nic

import (
	"net/netip"
	"slices"
	"syscall"

	"github.com/rocesim/rocesim/sim"
	"github.com/rocesim/rocesim/wire"
)

// Multicast (the IBTA's multicast verbs, as rxe_mcast.c does them): a UD
// QP attached to a group gets a copy of every datagram that reaches the
// device (inGroup says which do) for the group's GID with the multicast
// QPN as destination. A group lives
// while a QP is attached to it. rxe's limits are the device's:
// max_mcast_grp groups, max_mcast_qp_attach QPs a group, and
// max_total_mcast_qp_attach attachments in all; past any of them attach
// fails with ENOMEM.
const (
	rxeMaxMcastGrp      = 8192    // RXE_MAX_MCAST_GRP
	rxeMaxMcastQPAttach = 56      // RXE_MAX_MCAST_QP_ATTACH
	rxeMaxTotMcastQPAtt = 0x70000 // RXE_MAX_TOT_MCAST_QP_ATTACH
)

// mcGroup is one multicast group: its QPs in the order they attached
// (rxe's mcg qp_list, added at the tail), the order a datagram is
// delivered in.
type mcGroup struct {
	qps []*QP
}

// mcastKey is the form a group is kept under: the GID with an IPv4
// group mapped into IPv6, as rxe keeps its mgid and as a received IPv4
// destination is looked up (ipv6_addr_set_v4mapped).
func mcastKey(a netip.Addr) netip.Addr { return netip.AddrFrom16(a.As16()) }

// AttachMcast attaches UD QP qp to the multicast group gid
// (ibv_attach_mcast). The LID is ignored on a RoCE port (the kernel's
// is_valid_mcast_lid). Attaching a QP already attached is a success that
// changes nothing, as rxe_attach_mcg finds it there.
func (d *Device) AttachMcast(qp *QP, gid netip.Addr, lid uint16) error {
	if !d.liveQP(qp) {
		return errno(syscall.EINVAL, "attach_mcast: not a live QP of this device")
	}
	if !wire.IsMulticastGID(gid) {
		return errno(syscall.EINVAL, "attach_mcast: gid %v is not a multicast GID (ff00::/8, or IPv4-mapped 224.0.0.0/4)", gid)
	}
	if qp.init.Type != QPTypeUD {
		return errno(syscall.EINVAL, "attach_mcast: QP %d is %v; only UD QPs join multicast groups", qp.num, qp.init.Type)
	}
	key := mcastKey(gid)
	g := d.mcast[key]
	if g == nil {
		if len(d.mcast) >= rxeMaxMcastGrp {
			return errno(syscall.ENOMEM, "attach_mcast: the device has max_mcast_grp (%d) groups", rxeMaxMcastGrp)
		}
	} else {
		for _, q := range g.qps {
			if q == qp {
				return nil
			}
		}
		if len(g.qps) >= rxeMaxMcastQPAttach {
			return errno(syscall.ENOMEM, "attach_mcast: group %v has max_mcast_qp_attach (%d) QPs", gid, rxeMaxMcastQPAttach)
		}
	}
	if d.mcAttached >= rxeMaxTotMcastQPAtt {
		return errno(syscall.ENOMEM, "attach_mcast: the device has max_total_mcast_qp_attach (%d) attachments", rxeMaxTotMcastQPAtt)
	}
	if g == nil {
		if d.mcast == nil {
			d.mcast = map[netip.Addr]*mcGroup{}
			d.mcastOf = map[*QP][]netip.Addr{}
		}
		g = &mcGroup{}
		d.mcast[key] = g
	}
	g.qps = append(g.qps, qp)
	d.mcastOf[qp] = append(d.mcastOf[qp], key)
	d.mcAttached++
	return nil
}

// DetachMcast detaches qp from the group gid (ibv_detach_mcast): EINVAL
// if it is not attached to it, as the kernel finds no such attachment.
func (d *Device) DetachMcast(qp *QP, gid netip.Addr, lid uint16) error {
	if !d.liveQP(qp) {
		return errno(syscall.EINVAL, "detach_mcast: not a live QP of this device")
	}
	key := mcastKey(gid)
	g := d.mcast[key]
	if g != nil {
		for i, q := range g.qps {
			if q != qp {
				continue
			}
			g.qps = append(g.qps[:i], g.qps[i+1:]...)
			if len(g.qps) == 0 {
				delete(d.mcast, key)
			}
			gs := d.mcastOf[qp]
			if gs = slices.DeleteFunc(gs, func(a netip.Addr) bool { return a == key }); len(gs) == 0 {
				delete(d.mcastOf, qp)
			} else {
				d.mcastOf[qp] = gs
			}
			d.mcAttached--
			return nil
		}
	}
	return errno(syscall.EINVAL, "detach_mcast: QP %d is not attached to group %v", qp.num, gid)
}

// mcastAttached returns how many groups qp is attached to.
func (d *Device) mcastAttached(qp *QP) int { return len(d.mcastOf[qp]) }

// DetachAll detaches qp from every group it is attached to, in the order
// it attached: what the kernel does for a QP whose context is closed or
// whose process exits (uverbs' ib_uverbs_detach_umcast), where a user's
// own ibv_destroy_qp gets EBUSY.
func (d *Device) DetachAll(qp *QP) {
	for _, g := range slices.Clone(d.mcastOf[qp]) {
		_ = d.DetachMcast(qp, g, 0)
	}
}

// JoinGroup is the host's IP-level join of multicast group a (an IGMP
// join: what rdma_join_multicast makes on Linux, cma_igmp_send). Under
// ProfileRXE a group's datagrams reach the device, from the wire or
// looped back from its own sends, only while its host has joined the
// group, whatever QPs are attached: Linux's IP layer drops a multicast
// datagram for a group the host is not in (ip_route_input_noref's
// ip_check_mc_rcv) before rxe sees it, so ibv_attach_mcast alone
// receives nothing. Joins are counted; each LeaveGroup undoes one. The
// all-hosts group 224.0.0.1 is joined always, as every IPv4 interface
// joins it. Under ProfileSpec an attached QP is enough (an RNIC's
// multicast steering), and joins are kept but not needed.
func (d *Device) JoinGroup(a netip.Addr) error {
	if !wire.IsMulticastGID(a) {
		return errno(syscall.EINVAL, "join: %v is not a multicast address", a)
	}
	if d.ipGroups == nil {
		d.ipGroups = map[netip.Addr]int{}
	}
	d.ipGroups[mcastKey(a)]++
	return nil
}

// LeaveGroup undoes one JoinGroup of group a; leaving a group not joined
// changes nothing.
func (d *Device) LeaveGroup(a netip.Addr) {
	k := mcastKey(a)
	switch n := d.ipGroups[k]; {
	case n > 1:
		d.ipGroups[k] = n - 1
	case n == 1:
		delete(d.ipGroups, k)
	}
}

// allHosts is the all-hosts group, 224.0.0.1 (RFC 1112), in the form
// groups are kept in.
var allHosts = mcastKey(netip.AddrFrom4([4]byte{224, 0, 0, 1}))

// inGroup reports whether the device takes the datagrams of multicast
// group a (an IPv4 group in either form): under ProfileRXE, while its
// host has joined the group (JoinGroup, or the all-hosts group); under
// ProfileSpec, also while a QP of the device is attached to it. Such a
// datagram is counted in rcvd_pkts and offered to the QPs attached; its
// own are looped back to it (LoopsBack).
func (d *Device) inGroup(a netip.Addr) bool {
	k := mcastKey(a)
	if k == allHosts || d.ipGroups[k] > 0 {
		return true
	}
	if d.cfg.Profile == ProfileRXE || len(d.mcast) == 0 {
		return false
	}
	_, ok := d.mcast[k]
	return ok
}

// LoopsBack reports whether a frame the device sent must also be
// received by the device itself: it is for a multicast group the device
// takes (inGroup). On Linux the IP layer loops a multicast datagram back
// to its own host (ip_mc_output), which keeps it when the host has joined
// the group, and rxe takes it from there like any other; a driver gives
// the frame to Receive.
func (d *Device) LoopsBack(frame []byte) bool {
	// The frame's first byte is hot (just built); the device's tables
	// may not be, among thousands of devices: read them only for a
	// group MAC.
	if len(frame) < wire.EthernetLen || frame[0]&1 == 0 {
		return false
	}
	dst, ok := wire.FrameDst(frame)
	return ok && dst.IsMulticast() && d.inGroup(dst)
}

// receiveMcast hands a datagram for the multicast QPN to every QP
// attached to the group of its destination (rxe_rcv_mcast_pkt): each QP
// that is not ready for it, or whose Q_Key is not the datagram's, is
// passed over, and the others each get a copy in attach order. A
// datagram for a group with no QP here is lost.
func (d *Device) receiveMcast(now sim.Time, p *wire.Packet) {
	g := d.mcast[mcastKey(p.Dst())]
	if g == nil {
		return
	}
	for _, qp := range g.qps {
		if _, ok := d.checkHeaders(qp, p); ok {
			d.receiveUD(now, qp, p)
		}
	}
}
