package nic

import (
	"net/netip"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/rocesim/rocesim/sim"
	"github.com/rocesim/rocesim/wire"
)

// TestResendMarks: a request sent for the first time carries no marks;
// an RNR NAK is marked RNRNAK; each go-back-N round's resent request
// carries the round (1, then 2) and when its QP went from RTR to RTS.
// Here b never posts a receive, so a's one SEND is refused round after
// round.
func TestResendMarks(t *testing.T) {
	const connected = sim.Time(700)
	a, b, qa, _ := connectedPair(t, connected, nil)
	now := connected
	_, err := a.PostSend(now, qa, []SendWR{{WRID: 1, Opcode: WRSend, Flags: SendSignaled}})
	require.NoError(t, err)
	send := func() OutFrame {
		rd := a.Ready()
		require.Len(t, rd.Frames, 1)
		f := rd.Frames[0]
		f.Bytes = append([]byte(nil), f.Bytes...)
		a.TxDone(now)
		return f
	}
	refuse := func(req OutFrame) {
		b.Receive(now, req.Bytes)
		rd := b.Ready()
		require.Len(t, rd.Frames, 1)
		nak := rd.Frames[0]
		assert.True(t, nak.RNRNAK, "b's answer is an RNR NAK")
		assert.Zero(t, nak.Round, "an RNR NAK is no request")
		a.Receive(now, append([]byte(nil), nak.Bytes...))
		b.TxDone(now)
		a.Ready()
		now = a.NextDeadline() // the RNR timer
		require.NotEqual(t, sim.Never, now)
		a.Advance(now)
	}
	first := send()
	assert.Zero(t, first.Round, "a first transmission")
	assert.Zero(t, first.ConnectedAt)
	assert.False(t, first.RNRNAK)
	refuse(first)
	again := send()
	assert.Equal(t, uint32(1), again.Round, "resent in the first round")
	assert.Equal(t, connected, again.ConnectedAt)
	refuse(again)
	third := send()
	assert.Equal(t, uint32(2), third.Round, "resent in the second round")
	assert.Equal(t, connected, third.ConnectedAt)
}

// connectedPair returns two devices, a (10.0.0.1) and b (10.0.0.2), each
// with an RC QP connected to the other's (RTS at connected), after tune,
// if given, has set the devices' Config (which PeerHint may read).
func connectedPair(t *testing.T, connected sim.Time, tune func(a, b *Device)) (a, b *Device, qa, qb *QP) {
	a = New(Config{MAC: wire.MAC{2, 0, 0, 0, 0, 1}, IPv4: netip.AddrFrom4([4]byte{10, 0, 0, 1})})
	b = New(Config{MAC: wire.MAC{2, 0, 0, 0, 0, 2}, IPv4: netip.AddrFrom4([4]byte{10, 0, 0, 2})})
	a.AddNeighbour(netip.MustParseAddr("10.0.0.2"), wire.MAC{2, 0, 0, 0, 0, 2})
	b.AddNeighbour(netip.MustParseAddr("10.0.0.1"), wire.MAC{2, 0, 0, 0, 0, 1})
	if tune != nil {
		tune(a, b)
	}
	qp := func(d *Device) *QP {
		pd, err := d.AllocPD()
		require.NoError(t, err)
		cq, err := d.CreateCQ(4, nil, 0)
		require.NoError(t, err)
		return resQP(t, d, pd, cq)
	}
	qa, qb = qp(a), qp(b)
	connect := func(d *Device, q *QP, dgid string, dqpn uint32) {
		av := AHAttr{IsGlobal: true, PortNum: 1, GRH: GRH{DGID: netip.MustParseAddr(dgid), HopLimit: 1}}
		require.NoError(t, d.ModifyQP(0, q, &QPAttr{QPState: QPStateInit, PortNum: 1}, QPAttrState|QPAttrPKeyIndex|QPAttrPort|QPAttrAccessFlags))
		require.NoError(t, d.ModifyQP(0, q, &QPAttr{QPState: QPStateRTR, PathMTU: MTU1024, DestQPNum: dqpn, RQPSN: 1, AHAttr: av,
			MaxDestRdAtomic: 1, MinRNRTimer: 12}, QPAttrState|QPAttrAV|QPAttrPathMTU|QPAttrDestQPN|QPAttrRQPSN|QPAttrMaxDestRdAtomic|QPAttrMinRNRTimer))
		require.NoError(t, d.ModifyQP(connected, q, &QPAttr{QPState: QPStateRTS, SQPSN: 1, Timeout: 14, RetryCnt: 7, RNRRetry: 7, MaxRdAtomic: 1},
			QPAttrState|QPAttrSQPSN|QPAttrTimeout|QPAttrRetryCnt|QPAttrRNRRetry|QPAttrMaxQPRdAtomic))
	}
	connect(a, qa, "10.0.0.2", qb.num)
	connect(b, qb, "10.0.0.1", qa.num)
	return a, b, qa, qb
}
