package nic

import (
	"net/netip"
	"syscall"

	"github.com/rocesim/rocesim/sim"
	"github.com/rocesim/rocesim/wire"
)

// Multicast (IBTA §10.5.2, Annex A17.4.6; rxe_mcast.c): a UD QP attached
// to a group gets a copy of every datagram that reaches the device for
// the group's GID with the multicast QPN as destination. A group lives
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
func mcastKey(a netip.Addr) netip.Addr {
	if a.Is4() {
		return netip.AddrFrom16(a.As16())
	}
	return a
}

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
			d.mcastOf = map[*QP]int{}
		}
		g = &mcGroup{}
		d.mcast[key] = g
	}
	g.qps = append(g.qps, qp)
	d.mcastOf[qp]++
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
			if d.mcastOf[qp]--; d.mcastOf[qp] == 0 {
				delete(d.mcastOf, qp)
			}
			d.mcAttached--
			return nil
		}
	}
	return errno(syscall.EINVAL, "detach_mcast: QP %d is not attached to group %v", qp.num, gid)
}

// mcastAttached returns how many groups qp is attached to.
func (d *Device) mcastAttached(qp *QP) int { return d.mcastOf[qp] }

// InGroup reports whether some QP of the device is attached to the
// multicast group of IP address a (an IPv4 group in either form): the
// device takes the group's datagrams, and its own are looped back to it
// (see Receive).
func (d *Device) InGroup(a netip.Addr) bool {
	if len(d.mcast) == 0 {
		return false
	}
	_, ok := d.mcast[mcastKey(a.Unmap())]
	return ok
}

// LoopsBack reports whether a frame the device sent must also be
// received by the device itself: it is for a multicast group one of its
// QPs is attached to. On Linux the IP layer loops a multicast datagram
// back to its own host when the host has joined the group (ip_mc_output,
// as rdma_join_multicast's IGMP join makes it), and rxe takes it from
// there like any other; a driver gives the frame to Receive.
func (d *Device) LoopsBack(frame []byte) bool {
	// The frame's first byte is hot (just built); the device's table may
	// not be, among thousands of devices: read it only for a group MAC.
	if len(frame) < wire.EthernetLen || frame[0]&1 == 0 || len(d.mcast) == 0 {
		return false
	}
	dst, ok := wire.FrameDst(frame)
	return ok && d.InGroup(dst)
}

// receiveMcast hands a datagram for the multicast QPN to every QP
// attached to the group of its destination (rxe_rcv_mcast_pkt): each QP
// that is not ready for it, or whose Q_Key is not the datagram's, is
// passed over, and the others each get a copy in attach order. A
// datagram for a group with no QP here is lost.
func (d *Device) receiveMcast(now sim.Time, p *wire.Packet) {
	g := d.mcast[mcastKey(p.Dst().Unmap())]
	if g == nil {
		return
	}
	for _, qp := range g.qps {
		if _, ok := d.checkHeaders(qp, p); ok {
			d.receiveUD(now, qp, p)
		}
	}
}
