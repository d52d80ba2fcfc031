package nic

import (
	"net/netip"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/rocesim/rocesim/sim"
	"github.com/rocesim/rocesim/wire"
)

// slackPair is a device (10.0.0.1) with an RC QP in RTS that takes
// WRITEs, as readyQP's, and a way to hand it requests from its peer
// (10.0.0.2, QP 0x99) from PSN 1 on.
type slackPair struct {
	d  *Device
	qp *QP
	mr *MR
}

func newSlackPair(t *testing.T) *slackPair {
	d, pd := readyDevice(t)
	cq, err := d.CreateCQ(16, nil, 0)
	require.NoError(t, err)
	qp := readyQP(t, d, pd, cq, 4)
	require.NoError(t, d.ModifyQP(0, qp, &QPAttr{QPAccessFlags: AccessRemoteWrite}, QPAttrAccessFlags))
	mr, err := d.RegMR(pd, make([]byte, 8192), AccessLocalWrite|AccessRemoteWrite)
	require.NoError(t, err)
	return &slackPair{d: d, qp: qp, mr: mr}
}

// in hands the device one request from its peer and reports whether it
// put anything out.
func (s *slackPair) in(t *testing.T, op wire.Opcode, psn wire.PSN, ackReq bool, n int) bool {
	t.Helper()
	return s.req(t, op, psn, ackReq, n, 4096)
}

// req is in with a RETH length of dmaLen.
func (s *slackPair) req(t *testing.T, op wire.Opcode, psn wire.PSN, ackReq bool, n int, dmaLen uint32) bool {
	t.Helper()
	f := wire.Frame{DstMAC: wire.MAC{2, 0, 0, 0, 0, 1}, SrcMAC: wire.MAC{2, 0, 0, 0, 0, 2},
		Src: netip.MustParseAddr("10.0.0.2"), Dst: netip.MustParseAddr("10.0.0.1"), TTL: 64,
		BTH:     wire.BTHFields{Opcode: op, DestQP: s.qp.num, PSN: psn, AckReq: ackReq, PKey: 0xffff},
		RETH:    wire.RETHFields{VA: s.mr.Addr, RKey: s.mr.RKey, DMALength: dmaLen},
		Payload: make([]byte, n)}
	buf := make([]byte, 2048)
	k, err := wire.Encode(buf, &f)
	require.NoError(t, err)
	s.d.Receive(sim.Time(psn), buf[:k])
	out := s.d.HasReady()
	s.d.Ready()
	return out
}

// TestRxSlack: in the middle of a message the device counts, as its rx
// slack, the middle packets that may still come (what the RETH's length
// or the receive buffer leaves room for, a path MTU each), from the next
// PSN; they change nothing a driver sees, and the slack follows them.
// Between messages there is none, nor when the next packet would be
// refused (the region gone).
func TestRxSlack(t *testing.T) {
	s := newSlackPair(t)
	d := s.d
	assert.Empty(t, d.RxSlack(nil), "no message in progress")

	require.False(t, s.in(t, wire.OpRCWriteFirst, 1, false, 1024))
	want := wire.PacketRun{QPN: s.qp.num, PSN: 2, Opcode: wire.OpRCWriteMiddle, Len: 1024, Count: 3}
	assert.Equal(t, []wire.PacketRun{want}, d.RxSlack(nil), "4 KiB WRITE, 1 KiB in: 3 KiB to come")
	require.False(t, s.in(t, wire.OpRCWriteMiddle, 2, false, 1024), "a middle packet puts nothing out")
	want.PSN, want.Count = 3, 2
	assert.Equal(t, []wire.PacketRun{want}, d.RxSlack(nil))
	require.False(t, s.in(t, wire.OpRCWriteMiddle, 3, false, 1024))
	require.True(t, s.in(t, wire.OpRCWriteLast, 4, true, 1024), "the last packet is ACKed")
	assert.Empty(t, d.RxSlack(nil), "the message is done")

	// REMOTE_WRITE taken away mid-message: the next packet is an
	// invalid request, no slack.
	require.False(t, s.in(t, wire.OpRCWriteFirst, 5, false, 1024))
	require.Len(t, d.RxSlack(nil), 1)
	require.NoError(t, d.ModifyQP(0, s.qp, &QPAttr{}, QPAttrAccessFlags))
	assert.Empty(t, d.RxSlack(nil))
	require.NoError(t, d.ModifyQP(0, s.qp, &QPAttr{QPAccessFlags: AccessRemoteWrite}, QPAttrAccessFlags))
	require.Len(t, d.RxSlack(nil), 1)
	for psn := wire.PSN(6); psn < 8; psn++ {
		require.False(t, s.in(t, wire.OpRCWriteMiddle, psn, false, 1024))
	}
	require.True(t, s.in(t, wire.OpRCWriteLast, 8, true, 1024))

	// A region deregistered mid-message: the next packet gets a NAK,
	// so it is no slack.
	require.False(t, s.in(t, wire.OpRCWriteFirst, 9, false, 1024))
	require.Len(t, d.RxSlack(nil), 1)
	require.NoError(t, d.DeregMR(s.mr))
	assert.Empty(t, d.RxSlack(nil))
	assert.True(t, s.in(t, wire.OpRCWriteMiddle, 10, false, 1024), "NAK remote access")
}

// TestRxSlackSend: a SEND's slack is what its receive buffer has room
// for; a QP with no message in progress, or another QP, has none.
func TestRxSlackSend(t *testing.T) {
	s := newSlackPair(t)
	d := s.d
	_, err := d.PostRecv(0, s.qp, []RecvWR{{WRID: 1, SGList: []SGE{{Addr: s.mr.Addr, Length: 3000, LKey: s.mr.LKey}}}})
	require.NoError(t, err)
	require.False(t, s.in(t, wire.OpRCSendFirst, 1, false, 1024))
	assert.Equal(t, []wire.PacketRun{{QPN: s.qp.num, PSN: 2, Opcode: wire.OpRCSendMiddle, Len: 1024, Count: 1}}, d.RxSlack(nil),
		"3000 bytes of buffer, 1024 in: room for one more full packet")
	require.False(t, s.in(t, wire.OpRCSendMiddle, 2, false, 1024))
	assert.Empty(t, d.RxSlack(nil), "no room for another middle packet")
	require.True(t, s.in(t, wire.OpRCSendLast, 3, true, 100))
	assert.Empty(t, d.RxSlack(nil))
}

// TestRxSlackRecent: the slack covers the rxRecentN QPs that last
// received a request, most recent first; a fifth QP in the middle of a
// WRITE has none until it receives again, which puts it first and
// leaves out the one that received longest ago.
func TestRxSlackRecent(t *testing.T) {
	s := newSlackPair(t)
	d := s.d
	pairs := []*slackPair{s}
	for range rxRecentN {
		qp := readyQP(t, d, s.qp.pd, s.qp.init.SendCQ, 4)
		require.NoError(t, d.ModifyQP(0, qp, &QPAttr{QPAccessFlags: AccessRemoteWrite}, QPAttrAccessFlags))
		pairs = append(pairs, &slackPair{d: d, qp: qp, mr: s.mr})
	}
	run := func(p *slackPair, psn wire.PSN) wire.PacketRun {
		return wire.PacketRun{QPN: p.qp.num, PSN: psn, Opcode: wire.OpRCWriteMiddle, Len: 1024, Count: int(5 - psn)}
	}
	for _, p := range pairs {
		require.False(t, p.in(t, wire.OpRCWriteFirst, 1, false, 1024))
	}
	want := []wire.PacketRun{run(pairs[4], 2), run(pairs[3], 2), run(pairs[2], 2), run(pairs[1], 2)}
	assert.Equal(t, want, d.RxSlack(nil), "the four that received last, not the first")

	require.False(t, pairs[0].in(t, wire.OpRCWriteMiddle, 2, false, 1024))
	want = []wire.PacketRun{run(pairs[0], 3), run(pairs[4], 2), run(pairs[3], 2), run(pairs[2], 2)}
	assert.Equal(t, want, d.RxSlack(nil), "the first received again")

	require.False(t, pairs[3].in(t, wire.OpRCWriteMiddle, 2, false, 1024))
	want = []wire.PacketRun{run(pairs[3], 3), run(pairs[0], 3), run(pairs[4], 2), run(pairs[2], 2)}
	assert.Equal(t, want, d.RxSlack(nil), "one already listed moves to the front, nothing leaves")
}

// TestRxSlackNotBehindRead: while the responder replays a READ's
// response the port has no room for (a duplicate READ arrived in the
// middle of a WRITE), the WRITE's next packet would be held behind it:
// no slack until the reply has gone, though the WRITE is in progress.
func TestRxSlackNotBehindRead(t *testing.T) {
	d, pd := readyDevice(t)
	cq, err := d.CreateCQ(16, nil, 0)
	require.NoError(t, err)
	qp := timerQP(t, d, pd, cq)
	require.NoError(t, d.ModifyQP(0, qp, &QPAttr{QPAccessFlags: AccessRemoteWrite | AccessRemoteRead}, QPAttrAccessFlags))
	mr, err := d.RegMR(pd, make([]byte, 256<<10), AccessLocalWrite|AccessRemoteWrite|AccessRemoteRead)
	require.NoError(t, err)
	s := &slackPair{d: d, qp: qp, mr: mr}
	drain := func() { // the port takes the reply's packets
		for i := 0; qp.resp.busy() && i < 1000; i++ {
			d.TxDone(sim.Time(1000 + i))
			d.Ready()
		}
		require.False(t, qp.resp.busy())
	}

	// A READ of 128 KiB (PSNs 1 to 128): its reply stops at the port's
	// high mark until tx-dones come.
	require.True(t, s.req(t, wire.OpRCReadRequest, 1, false, 0, 128<<10), "the reply starts")
	require.True(t, qp.resp.busy())
	drain()
	require.False(t, s.in(t, wire.OpRCWriteFirst, 129, false, 1024))
	run := wire.PacketRun{QPN: qp.num, PSN: 130, Opcode: wire.OpRCWriteMiddle, Len: 1024, Count: 3}
	assert.Equal(t, []wire.PacketRun{run}, d.RxSlack(nil), "a WRITE in progress, the responder free")

	// The READ again (its requester timed out): the reply is replayed.
	s.req(t, wire.OpRCReadRequest, 1, false, 0, 128<<10)
	require.True(t, qp.resp.busy(), "the replay waits for the port")
	require.True(t, qp.resp.inWrite, "the WRITE is still in progress")
	assert.Empty(t, d.RxSlack(nil), "its next packet would wait behind the replay")
	drain()
	assert.Equal(t, []wire.PacketRun{run}, d.RxSlack(nil), "the replay gone")
}

// TestRxSlackRTR: a QP in RTR has slack once its first packet raised
// COMM_EST (the next raises nothing), with the run counted as in RTS.
// (RxSlack also refuses an RTR QP before COMM_EST, whose next packet
// would raise it; such a QP has no message in progress to have slack
// for, so no input reaches that case.)
func TestRxSlackRTR(t *testing.T) {
	d, pd := readyDevice(t)
	cq, err := d.CreateCQ(16, nil, 0)
	require.NoError(t, err)
	qp, err := d.CreateQP(pd, QPInitAttr{SendCQ: cq, RecvCQ: cq, Type: QPTypeRC,
		Cap: QPCap{MaxSendWR: 1, MaxRecvWR: 1, MaxSendSGE: 1, MaxRecvSGE: 1}})
	require.NoError(t, err)
	av := AHAttr{IsGlobal: true, PortNum: 1, GRH: GRH{DGID: netip.MustParseAddr("10.0.0.2"), HopLimit: 1}}
	require.NoError(t, d.ModifyQP(0, qp, &QPAttr{QPState: QPStateInit, PortNum: 1, QPAccessFlags: AccessRemoteWrite},
		QPAttrState|QPAttrPKeyIndex|QPAttrPort|QPAttrAccessFlags))
	require.NoError(t, d.ModifyQP(0, qp, &QPAttr{QPState: QPStateRTR, PathMTU: MTU1024, DestQPNum: 0x99,
		RQPSN: 1, AHAttr: av, MinRNRTimer: 12},
		QPAttrState|QPAttrAV|QPAttrPathMTU|QPAttrDestQPN|QPAttrRQPSN|QPAttrMaxDestRdAtomic|QPAttrMinRNRTimer))
	mr, err := d.RegMR(pd, make([]byte, 8192), AccessLocalWrite|AccessRemoteWrite)
	require.NoError(t, err)
	s := &slackPair{d: d, qp: qp, mr: mr}
	assert.Empty(t, d.RxSlack(nil))
	require.False(t, qp.resp.commEst)
	s.in(t, wire.OpRCWriteFirst, 1, false, 1024)
	require.True(t, qp.resp.commEst, "the first packet raised COMM_EST")
	assert.Equal(t, []wire.PacketRun{{QPN: qp.num, PSN: 2, Opcode: wire.OpRCWriteMiddle, Len: 1024, Count: 3}}, d.RxSlack(nil))
}
