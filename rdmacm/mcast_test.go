package rdmacm_test

import (
	"net/netip"
	"syscall"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/rocesim/rocesim/rdmacm"
	"github.com/rocesim/rocesim/verbs"
)

// TestJoinMulticast is mckey's exchange: each side resolves the group's
// address, makes a UD QP and joins; the event carries the group's
// address vector, the multicast QPN and the Q_Key, and taking it
// attaches the QP, so the sender's datagrams reach the receiver. After
// the receiver leaves, they no longer do.
func TestJoinMulticast(t *testing.T) {
	p := newPair(t, "")
	group := netip.MustParseAddr("224.0.0.5")
	join := func(n *node, ctx string) *rdmacm.CMID {
		id, err := rdmacm.CreateID(n.ch, nil, rdmacm.PSUDP)
		require.NoError(t, err)
		assert.ErrorIs(t, id.JoinMulticast(group, ctx, false), syscall.EINVAL, "before the ID has its device")
		require.NoError(t, id.ResolveAddr(n.h.IPv4(), netip.AddrPortFrom(group, 0), 2000))
		p.event(t, n.ch, rdmacm.EventAddrResolved)
		require.NoError(t, id.CreateQP(n.pd, n.qpAttr()))
		require.NoError(t, id.JoinMulticast(group, ctx, false))
		ev := p.event(t, n.ch, rdmacm.EventMulticastJoin)
		assert.Equal(t, ctx, ev.JoinContext)
		assert.Equal(t, uint32(verbs.MulticastQPN), ev.UD.QPNum)
		assert.Equal(t, uint32(0x01234567), ev.UD.QKey)
		assert.Equal(t, netip.MustParseAddr("::ffff:224.0.0.5"), ev.UD.AHAttr.GRH.DGID)
		assert.Equal(t, uint8(64), ev.UD.AHAttr.GRH.HopLimit)
		assert.True(t, ev.UD.AHAttr.IsGlobal)
		return id
	}
	recv := join(p.srv, "server")
	send := join(p.cli, "client")

	_, err := recv.QP.PostRecv([]verbs.RecvWR{{WRID: 1, SGList: []verbs.SGE{p.srv.mr.SGE(0, 256)}}, {WRID: 2, SGList: []verbs.SGE{p.srv.mr.SGE(256, 256)}}})
	require.NoError(t, err)
	ah, err := p.cli.pd.CreateAH(verbs.AHAttr{IsGlobal: true, PortNum: 1, GRH: verbs.GRH{DGID: netip.MustParseAddr("::ffff:224.0.0.5"), HopLimit: 64, SGIDIndex: 1}})
	require.NoError(t, err)
	copy(p.cli.buf, "hello group")
	post := func(id uint64) {
		_, err := send.QP.PostSend([]verbs.SendWR{{WRID: id, Opcode: verbs.WRSend, Flags: verbs.SendSignaled, AH: ah,
			RemoteQPN: verbs.MulticastQPN, RemoteQKey: 0x01234567, SGList: []verbs.SGE{p.cli.mr.SGE(0, 11)}}})
		require.NoError(t, err)
		require.NoError(t, p.w.Run())
	}
	post(10)
	wcs := pollAll(t, p.srv.cq)
	require.Len(t, wcs, 1)
	assert.Equal(t, verbs.WCSuccess, wcs[0].Status)
	assert.Equal(t, send.QP.QPNum, wcs[0].SrcQP)
	assert.Equal(t, "hello group", string(p.srv.buf[40:51]))

	require.NoError(t, recv.LeaveMulticast(group))
	assert.ErrorIs(t, recv.LeaveMulticast(group), syscall.EADDRNOTAVAIL, "left already")
	post(11)
	assert.Empty(t, pollAll(t, p.srv.cq), "left: the group's datagrams no longer reach the QP")
	require.NoError(t, send.LeaveMulticast(group))
	require.NoError(t, recv.QP.Destroy(), "detached by the leave, the QP can go")

	// An IPv6 group is refused with the kernel's ENOTSUPP; a TCP ID joins none.
	assert.ErrorIs(t, recv.JoinMulticast(netip.MustParseAddr("ff0e::1"), nil, false), syscall.Errno(524))
	tcp := p.resolve(t, rdmacm.PSTCP, rpingPort)
	assert.ErrorIs(t, tcp.JoinMulticast(group, nil, false), syscall.EINVAL)
}

// pollAll takes every completion waiting on cq.
func pollAll(t *testing.T, cq *verbs.CQ) []verbs.WC {
	t.Helper()
	var out []verbs.WC
	wcs := make([]verbs.WC, 8)
	for n := cq.Poll(wcs); n > 0; n = cq.Poll(wcs) {
		out = append(out, wcs[:n]...)
	}
	return out
}

// TestJoinEventsGoWithTheID: a join's event not yet taken goes when the
// ID is destroyed, or when the group is left, as the kernel drops an
// ID's unreported events (ucma); a destroyed ID's joins are left, so its
// QP, still attached, gets the group's datagrams no more.
func TestJoinEventsGoWithTheID(t *testing.T) {
	p := newPair(t, "")
	group := netip.MustParseAddr("224.0.0.5")
	resolved := func(n *node) *rdmacm.CMID {
		id, err := rdmacm.CreateID(n.ch, nil, rdmacm.PSUDP)
		require.NoError(t, err)
		require.NoError(t, id.ResolveAddr(n.h.IPv4(), netip.AddrPortFrom(group, 0), 2000))
		p.event(t, n.ch, rdmacm.EventAddrResolved)
		require.NoError(t, id.CreateQP(n.pd, n.qpAttr()))
		return id
	}
	left := resolved(p.srv)
	require.NoError(t, left.JoinMulticast(group, nil, false))
	require.NoError(t, left.LeaveMulticast(group))
	assert.Zero(t, p.srv.ch.Pending(), "left before its event was taken: no event")

	gone := resolved(p.srv)
	require.NoError(t, gone.JoinMulticast(group, nil, false))
	p.event(t, p.srv.ch, rdmacm.EventMulticastJoin) // the QP is attached
	qp := gone.QP
	_, err := qp.PostRecv([]verbs.RecvWR{{WRID: 1, SGList: []verbs.SGE{p.srv.mr.SGE(0, 256)}}})
	require.NoError(t, err)
	require.NoError(t, gone.JoinMulticast(netip.MustParseAddr("224.0.0.6"), nil, false))
	require.NoError(t, gone.Destroy())
	assert.Zero(t, p.srv.ch.Pending(), "destroyed with a join's event waiting: no event")

	// The client sends to the group: the server's host left it with the
	// ID, so its QP, still attached, gets nothing (rxe profile).
	send := resolved(p.cli)
	ah, err := p.cli.pd.CreateAH(verbs.AHAttr{IsGlobal: true, PortNum: 1, GRH: verbs.GRH{DGID: netip.MustParseAddr("::ffff:224.0.0.5"), HopLimit: 64, SGIDIndex: 1}})
	require.NoError(t, err)
	_, err = send.QP.PostSend([]verbs.SendWR{{WRID: 10, Opcode: verbs.WRSend, AH: ah, RemoteQPN: verbs.MulticastQPN,
		RemoteQKey: 0x01234567, SGList: []verbs.SGE{p.cli.mr.SGE(0, 8)}}})
	require.NoError(t, err)
	require.NoError(t, p.w.Run())
	assert.Empty(t, pollAll(t, p.srv.cq), "the host left the group with the ID")
	assert.ErrorIs(t, qp.Destroy(), syscall.EBUSY, "the QP is still attached: librdmacm's destroy_id does not detach it")
}
