package verbs_test

import (
	"net/netip"
	"syscall"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/rocesim/rocesim/sim"
	"github.com/rocesim/rocesim/verbs"
)

// udQP creates a UD QP on e and takes it to RTS with Q_Key qkey.
func udQP(t *testing.T, e *endpoint, qkey uint32) *verbs.QP {
	t.Helper()
	qp, err := e.pd.CreateQP(verbs.QPInitAttr{SendCQ: e.cq, RecvCQ: e.cq, Type: verbs.QPTypeUD,
		Cap: verbs.QPCap{MaxSendWR: 8, MaxRecvWR: 8, MaxSendSGE: 1, MaxRecvSGE: 1}})
	require.NoError(t, err)
	require.NoError(t, qp.Modify(&verbs.QPAttr{QPState: verbs.QPStateInit, PortNum: 1, QKey: qkey},
		verbs.QPAttrState|verbs.QPAttrPKeyIndex|verbs.QPAttrPort|verbs.QPAttrQKey))
	require.NoError(t, qp.Modify(&verbs.QPAttr{QPState: verbs.QPStateRTR}, verbs.QPAttrState))
	require.NoError(t, qp.Modify(&verbs.QPAttr{QPState: verbs.QPStateRTS}, verbs.QPAttrState|verbs.QPAttrSQPSN))
	return qp
}

// recvs posts n receives of 256 bytes each at offset off of e's buffer
// on qp, with WR IDs from id.
func recvs(t *testing.T, e *endpoint, qp *verbs.QP, id uint64, off, n int) {
	t.Helper()
	for i := range n {
		_, err := qp.PostRecv([]verbs.RecvWR{{WRID: id + uint64(i), SGList: []verbs.SGE{e.mr.SGE(uint64(off+256*i), 256)}}})
		require.NoError(t, err)
	}
}

// TestMulticast: a datagram sent to a group's GID with the multicast QPN
// is flooded by the switch and reaches every QP attached to the group on
// every host that joined it, in attach order, the sender's own host
// included (looped back, not on the wire); a QP with another Q_Key is
// passed over, and a host that has not joined the group does not take
// the frame, even with a QP attached (as on Linux: the IP layer drops
// it), unless under the spec profile, where attaching is enough.
func TestMulticast(t *testing.T) {
	tr := &sim.Trace{}
	w := verbs.NewWorld(verbs.WorldConfig{Seed: 1, Trace: tr})
	ha, hb, hc, hd, he := w.AddHost("a"), w.AddHost("b"), w.AddHost("c"), w.AddHost("d"), w.AddHost("e")
	require.NoError(t, w.ConnectSwitch())
	a, b, c, d, e := setup(ha, 1), setup(hb, 1), setup(hc, 1), setup(hd, 1), setup(he, 1)
	const qkey = 0x01234567
	group := netip.MustParseAddr("::ffff:239.1.2.3")
	for _, h := range []*verbs.Host{ha, hb, hc} {
		require.NoError(t, h.JoinGroup(netip.MustParseAddr("239.1.2.3")))
	}

	send := udQP(t, a, qkey)
	own := udQP(t, a, qkey) // a QP of the sending host in the group
	b1, b2 := udQP(t, b, qkey), udQP(t, b, qkey)
	cWrong := udQP(t, c, 0x22) // in the group with another Q_Key
	dNone := udQP(t, d, qkey)  // not in the group
	eOnly := udQP(t, e, qkey)  // attached, but its host has not joined
	for _, q := range []*verbs.QP{own, b2, b1, cWrong, eOnly} {
		require.NoError(t, q.AttachMcast(group, 0))
	}
	require.NoError(t, b1.AttachMcast(group, 0), "attaching again is no error")
	recvs(t, a, own, 10, 0, 3)
	recvs(t, b, b1, 20, 0, 3)
	recvs(t, b, b2, 30, 1024, 3)
	recvs(t, c, cWrong, 40, 0, 3)
	recvs(t, d, dNone, 50, 0, 3)
	recvs(t, e, eOnly, 60, 0, 3)

	ah, err := a.pd.CreateAH(verbs.AHAttr{IsGlobal: true, PortNum: 1, GRH: verbs.GRH{DGID: group, SGIDIndex: 1, HopLimit: 64}})
	require.NoError(t, err, "an AH toward a group needs no neighbour: its MAC is the group's")
	copy(a.buf[2048:], "to the group")
	mc := func(id uint64) verbs.SendWR {
		return verbs.SendWR{WRID: id, Opcode: verbs.WRSend, Flags: verbs.SendSignaled, AH: ah,
			RemoteQPN: verbs.MulticastQPN, RemoteQKey: qkey, SGList: []verbs.SGE{a.mr.SGE(2048, 12)}}
	}
	_, err = send.PostSend([]verbs.SendWR{mc(1), mc(2)})
	require.NoError(t, err)
	require.NoError(t, w.Run())

	assert.Equal(t, []string{"1:IBV_WC_SUCCESS", "2:IBV_WC_SUCCESS", "10:IBV_WC_SUCCESS", "11:IBV_WC_SUCCESS"}, summary(pollAll(a.cq)),
		"the sender's completions, then its own host's QP in the group gets both")
	wcs := pollAll(b.cq)
	// b2 attached before b1: it is offered each datagram first.
	require.Equal(t, []string{"30:IBV_WC_SUCCESS", "20:IBV_WC_SUCCESS", "31:IBV_WC_SUCCESS", "21:IBV_WC_SUCCESS"}, summary(wcs))
	for _, wc := range wcs {
		assert.Equal(t, send.QPNum, wc.SrcQP)
		assert.Equal(t, uint32(40+12), wc.ByteLen)
	}
	assert.Equal(t, "to the group", string(b.buf[40:52]))
	assert.Equal(t, []byte{239, 1, 2, 3}, b.buf[36:40], "the GRH area's IPv4 header says where it was sent")
	assert.Empty(t, pollAll(c.cq), "another Q_Key: passed over")
	assert.Empty(t, pollAll(d.cq), "no QP of d in the group")
	assert.Empty(t, pollAll(e.cq), "e's QP is attached, but e has not joined the group")
	rc, _ := d.ctx.Counters().Get("rcvd_pkts")
	assert.Zero(t, rc, "d's port does not take the group's frames")
	rc, _ = e.ctx.Counters().Get("rcvd_pkts")
	assert.Zero(t, rc, "nor does e's")
	rc, _ = b.ctx.Counters().Get("rcvd_pkts")
	assert.EqualValues(t, 2, rc, "b counts each datagram once, whatever the QPs it reaches")

	// On the wire: each datagram once from a, then once toward each other host.
	var wire, loops []string
	for _, e := range tr.Events() {
		switch e.Kind {
		case "frame-tx":
			wire = append(wire, e.Node)
		case "frame-loop":
			op, _ := e.Get("op")
			psn, _ := e.Get("psn")
			loops = append(loops, e.Node+" "+op+" "+psn)
		}
	}
	assert.Equal(t, []string{"a UD_SEND_ONLY 0", "a UD_SEND_ONLY 1"}, loops, "the sender's host gets its own datagrams back, off the wire, each traced")
	assert.Len(t, wire, 10, "2 frames a→switch, then 2 each toward b, c, d and e: %v", wire)

	// Detached, b1 gets no more; b2 still does.
	require.NoError(t, b1.DetachMcast(group, 0))
	_, err = send.PostSend([]verbs.SendWR{mc(3)})
	require.NoError(t, err)
	require.NoError(t, w.Run())
	assert.Equal(t, []string{"32:IBV_WC_SUCCESS"}, summary(pollAll(b.cq)))
}

// TestMulticastMisuse: attach and detach answer as the kernel and rxe do.
func TestMulticastMisuse(t *testing.T) {
	w := verbs.NewWorld(verbs.WorldConfig{Seed: 1})
	ha := w.AddHost("a")
	a := setup(ha, 1)
	group := netip.MustParseAddr("::ffff:224.0.0.5")
	ud := udQP(t, a, 1)

	assert.ErrorIs(t, ud.AttachMcast(netip.MustParseAddr("::ffff:10.0.0.1"), 0), syscall.EINVAL, "not a multicast GID")
	assert.ErrorIs(t, a.qp.AttachMcast(group, 0), syscall.EINVAL, "an RC QP")
	assert.ErrorIs(t, ud.DetachMcast(group, 0), syscall.EINVAL, "not attached")
	require.NoError(t, ud.AttachMcast(group, 0))
	require.NoError(t, ud.AttachMcast(netip.MustParseAddr("ff0e::1"), 0), "an IPv6 group")
	err := ud.Destroy()
	assert.ErrorIs(t, err, syscall.EBUSY, "destroy while attached")
	assert.ErrorContains(t, err, "detach_mcast first")
	require.NoError(t, ud.DetachMcast(group, 0))
	require.NoError(t, ud.DetachMcast(netip.MustParseAddr("ff0e::1"), 0))
	assert.ErrorIs(t, ud.DetachMcast(group, 0), syscall.EINVAL, "detached twice")
	require.NoError(t, ud.Destroy())

	// rxe's max_mcast_qp_attach: the 57th QP of one group is refused.
	attr := a.ctx.QueryDevice()
	require.Equal(t, 56, attr.MaxMcastQPAttach)
	var qps []*verbs.QP
	for i := range attr.MaxMcastQPAttach + 1 {
		q := udQP(t, a, 1)
		qps = append(qps, q)
		err := q.AttachMcast(group, 0)
		if i < attr.MaxMcastQPAttach {
			require.NoError(t, err, "QP %d", i)
		} else {
			assert.ErrorIs(t, err, syscall.ENOMEM, "QP %d", i)
		}
	}
	for i, q := range qps {
		if i < attr.MaxMcastQPAttach {
			require.NoError(t, q.DetachMcast(group, 0))
		}
		require.NoError(t, q.Destroy())
	}
}

// TestMulticastSpecProfile: under the spec profile a QP attached to a
// group gets its datagrams without any IP-level join, as an RNIC's
// multicast steering delivers them; the sender's own attached QP too.
func TestMulticastSpecProfile(t *testing.T) {
	w := verbs.NewWorld(verbs.WorldConfig{Seed: 1, Profile: verbs.ProfileSpec})
	ha, hb := w.AddHost("a"), w.AddHost("b")
	require.NoError(t, w.ConnectSwitch())
	a, b := setup(ha, 1), setup(hb, 1)
	group := netip.MustParseAddr("::ffff:239.1.2.3")
	send, own, r := udQP(t, a, 7), udQP(t, a, 7), udQP(t, b, 7)
	require.NoError(t, own.AttachMcast(group, 0))
	require.NoError(t, r.AttachMcast(group, 0))
	recvs(t, a, own, 10, 0, 1)
	recvs(t, b, r, 20, 0, 1)
	ah, err := a.pd.CreateAH(verbs.AHAttr{IsGlobal: true, PortNum: 1, GRH: verbs.GRH{DGID: group, SGIDIndex: 1, HopLimit: 64}})
	require.NoError(t, err)
	_, err = send.PostSend([]verbs.SendWR{{WRID: 1, Opcode: verbs.WRSend, AH: ah, RemoteQPN: verbs.MulticastQPN, RemoteQKey: 7,
		SGList: []verbs.SGE{a.mr.SGE(2048, 8)}}})
	require.NoError(t, err)
	require.NoError(t, w.Run())
	assert.Equal(t, []string{"10:IBV_WC_SUCCESS"}, summary(pollAll(a.cq)))
	assert.Equal(t, []string{"20:IBV_WC_SUCCESS"}, summary(pollAll(b.cq)))
}

// TestCloseDetaches: closing a context takes its QPs out of their groups
// (the kernel's detach on close), so a datagram for the group after the
// close reaches no destroyed QP and no deregistered buffer.
func TestCloseDetaches(t *testing.T) {
	w := verbs.NewWorld(verbs.WorldConfig{Seed: 1})
	ha, hb := w.AddHost("a"), w.AddHost("b")
	require.NoError(t, w.ConnectSwitch())
	a, b := setup(ha, 1), setup(hb, 1)
	group := netip.MustParseAddr("::ffff:239.1.2.3")
	require.NoError(t, hb.JoinGroup(group))
	send, r := udQP(t, a, 7), udQP(t, b, 7)
	require.NoError(t, r.AttachMcast(group, 0))
	recvs(t, b, r, 20, 0, 1)
	require.NoError(t, b.ctx.Close())
	ah, err := a.pd.CreateAH(verbs.AHAttr{IsGlobal: true, PortNum: 1, GRH: verbs.GRH{DGID: group, SGIDIndex: 1, HopLimit: 64}})
	require.NoError(t, err)
	_, err = send.PostSend([]verbs.SendWR{{WRID: 1, Opcode: verbs.WRSend, AH: ah, RemoteQPN: verbs.MulticastQPN, RemoteQKey: 7,
		SGList: []verbs.SGE{a.mr.SGE(2048, 8)}}})
	require.NoError(t, err)
	require.NoError(t, w.Run(), "the datagram finds no QP in the group")
	ctx, err := hb.GetDeviceList()[0].Open()
	require.NoError(t, err)
	rc, _ := ctx.Counters().Get("rcvd_pkts")
	assert.EqualValues(t, 1, rc, "b's host is still in the group: the datagram is counted, then finds no QP")
}

// TestUDRecvBufferDeregistered: a UD receive whose buffer was
// deregistered after the post completes in error when a datagram comes
// (rxe: LOC_QP_OP_ERR and the QP in ERR; spec: LOC_PROT_ERR), never a
// panic.
func TestUDRecvBufferDeregistered(t *testing.T) {
	for _, c := range []struct {
		profile verbs.Profile
		want    string
		state   verbs.QPState
	}{{verbs.ProfileRXE, "1:IBV_WC_LOC_QP_OP_ERR", verbs.QPStateErr}, {verbs.ProfileSpec, "1:IBV_WC_LOC_PROT_ERR", verbs.QPStateRTS}} {
		w := verbs.NewWorld(verbs.WorldConfig{Seed: 1, Profile: c.profile})
		ha, hb := w.AddHost("a"), w.AddHost("b")
		require.NoError(t, w.Connect(ha, hb))
		a, b := setup(ha, 1), setup(hb, 1)
		send, r := udQP(t, a, 7), udQP(t, b, 7)
		buf := make([]byte, 256)
		mr, err := b.pd.RegMR(buf, verbs.AccessLocalWrite)
		require.NoError(t, err)
		_, err = r.PostRecv([]verbs.RecvWR{{WRID: 1, SGList: []verbs.SGE{mr.SGE(0, 256)}}})
		require.NoError(t, err)
		require.NoError(t, mr.Dereg())
		gid, _ := b.ctx.QueryGID(1, 1)
		ah, err := a.pd.CreateAH(verbs.AHAttr{IsGlobal: true, PortNum: 1, GRH: verbs.GRH{DGID: gid}})
		require.NoError(t, err)
		_, err = send.PostSend([]verbs.SendWR{{WRID: 2, Opcode: verbs.WRSend, AH: ah, RemoteQPN: r.QPNum, RemoteQKey: 7,
			SGList: []verbs.SGE{a.mr.SGE(0, 8)}}})
		require.NoError(t, err)
		require.NoError(t, w.Run())
		assert.Equal(t, []string{c.want}, summary(pollAll(b.cq)), "%v", c.profile)
		assert.Equal(t, c.state, r.State(), "%v", c.profile)
	}
}
