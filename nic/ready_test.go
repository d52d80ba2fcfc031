package nic

import (
	"net/netip"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/rocesim/rocesim/sim"
)

// readyQP is an RC QP in RTS towards 10.0.0.2 with room for n send WRs,
// completing into cq.
func readyQP(t testing.TB, d *Device, pd *PD, cq *CQ, n uint32) *QP {
	t.Helper()
	qp, err := d.CreateQP(pd, QPInitAttr{SendCQ: cq, RecvCQ: cq, Type: QPTypeRC,
		Cap: QPCap{MaxSendWR: n, MaxRecvWR: 1, MaxSendSGE: 1, MaxRecvSGE: 1}})
	require.NoError(t, err)
	av := AHAttr{IsGlobal: true, PortNum: 1, GRH: GRH{DGID: netip.MustParseAddr("10.0.0.2"), HopLimit: 1}}
	require.NoError(t, d.ModifyQP(0, qp, &QPAttr{QPState: QPStateInit, PortNum: 1},
		QPAttrState|QPAttrPKeyIndex|QPAttrPort|QPAttrAccessFlags))
	require.NoError(t, d.ModifyQP(0, qp, &QPAttr{QPState: QPStateRTR, PathMTU: MTU1024, DestQPNum: 0x99,
		RQPSN: 1, AHAttr: av, MinRNRTimer: 12},
		QPAttrState|QPAttrAV|QPAttrPathMTU|QPAttrDestQPN|QPAttrRQPSN|QPAttrMaxDestRdAtomic|QPAttrMinRNRTimer))
	require.NoError(t, d.ModifyQP(0, qp, &QPAttr{QPState: QPStateRTS, SQPSN: 1, Timeout: 14, RetryCnt: 7, RNRRetry: 7},
		QPAttrState|QPAttrSQPSN|QPAttrTimeout|QPAttrRetryCnt|QPAttrRNRRetry|QPAttrMaxQPRdAtomic))
	return qp
}

func readyDevice(t testing.TB) (*Device, *PD) {
	d := New(Config{MAC: [6]byte{2, 0, 0, 0, 0, 1}, IPv4: netip.AddrFrom4([4]byte{10, 0, 0, 1})})
	d.AddNeighbour(netip.MustParseAddr("10.0.0.2"), [6]byte{2, 0, 0, 0, 0, 2})
	pd, err := d.AllocPD()
	require.NoError(t, err)
	return d, pd
}

// TestReadyBatch: one call hands out everything the inputs caused, and
// each kind of output once: the frames of three SENDs with the ACK
// timer's deadline; then, after the QP is flushed, the CQ that took the
// three completions and the channel its armed CQ fired on, each listed
// once; then nothing.
func TestReadyBatch(t *testing.T) {
	d, pd := readyDevice(t)
	ch := d.CreateCompChannel()
	cq, err := d.CreateCQ(16, ch, 0)
	require.NoError(t, err)
	require.NoError(t, cq.ReqNotify(false))
	qp := readyQP(t, d, pd, cq, 4)

	assert.False(t, d.HasReady(), "a new QP put nothing out")
	_, err = d.PostSend(0, qp, []SendWR{{WRID: 1, Opcode: WRSend, Flags: SendSignaled}, {WRID: 2, Opcode: WRSend}, {WRID: 3, Opcode: WRSend}})
	require.NoError(t, err)
	require.True(t, d.HasReady())
	rd := d.Ready()
	assert.Len(t, rd.Frames, 3, "one frame per SEND")
	assert.Empty(t, rd.CQs)
	assert.Empty(t, rd.Notified)
	assert.Empty(t, rd.Events)
	assert.Equal(t, sim.Time(64*sim.Millisecond), rd.Deadline, "the ACK timeout: 4.096 µs × 2^14 in 4 ms jiffies")

	require.NoError(t, d.ModifyQP(1, qp, &QPAttr{QPState: QPStateErr}, QPAttrState))
	rd = d.Ready()
	assert.Empty(t, rd.Frames)
	assert.Equal(t, []*CQ{cq}, rd.CQs, "three flushed completions, one CQ listed once")
	assert.Equal(t, []*CompChannel{ch}, rd.Notified, "the armed CQ fired once")
	assert.Equal(t, sim.Never, rd.Deadline, "a QP in ERR runs no timer")
	assert.Equal(t, 3, cq.Len())

	rd = d.Ready()
	assert.True(t, rd.Empty(), "a batch is handed out once")
	assert.False(t, d.HasReady())
}

// TestReadyEvents: asynchronous events come out in the batch, oldest
// first; under the rxe profile an overflowing CQ raises CQ_ERR for every
// completion it refuses.
func TestReadyEvents(t *testing.T) {
	d, pd := readyDevice(t)
	cq, err := d.CreateCQ(1, nil, 0)
	require.NoError(t, err)
	qp := readyQP(t, d, pd, cq, 4)
	_, err = d.PostSend(0, qp, []SendWR{{WRID: 1, Opcode: WRSend}, {WRID: 2, Opcode: WRSend}, {WRID: 3, Opcode: WRSend}})
	require.NoError(t, err)
	d.Ready()
	require.NoError(t, d.ModifyQP(1, qp, &QPAttr{QPState: QPStateErr}, QPAttrState))
	rd := d.Ready()
	require.Len(t, rd.Events, 2, "one CQ of one entry took the first flush and refused the other two")
	for _, e := range rd.Events {
		assert.Equal(t, EventCQErr, e.Type)
		assert.Same(t, cq, e.CQ)
	}
	assert.Equal(t, []*CQ{cq}, rd.CQs, "a CQ that refused completions is listed too: its overflow is news")
}

// TestReadyForgetsDestroyed: a CQ or channel destroyed before the batch
// is taken is not handed to the driver.
func TestReadyForgetsDestroyed(t *testing.T) {
	d, pd := readyDevice(t)
	ch := d.CreateCompChannel()
	cq, err := d.CreateCQ(16, ch, 0)
	require.NoError(t, err)
	require.NoError(t, cq.ReqNotify(false))
	keep, err := d.CreateCQ(16, nil, 0)
	require.NoError(t, err)
	qp := readyQP(t, d, pd, cq, 4)
	other := readyQP(t, d, pd, keep, 4)
	_, err = d.PostSend(0, qp, []SendWR{{WRID: 1, Opcode: WRSend}})
	require.NoError(t, err)
	_, err = d.PostSend(0, other, []SendWR{{WRID: 2, Opcode: WRSend}})
	require.NoError(t, err)
	d.Ready()
	require.NoError(t, d.ModifyQP(1, qp, &QPAttr{QPState: QPStateErr}, QPAttrState))
	require.NoError(t, d.ModifyQP(1, other, &QPAttr{QPState: QPStateErr}, QPAttrState))
	require.NoError(t, d.DestroyQP(qp))
	var wc [1]WC
	require.Equal(t, 1, cq.Poll(wc[:]))
	// Its event is queued on the channel, never read: destroy does not
	// wait for it, as on rxe (conformance TestDestroyCQWithEventsRXE).
	require.Equal(t, 1, ch.Pending())
	require.NoError(t, d.DestroyCQ(cq))
	require.NoError(t, d.DestroyCompChannel(ch))
	rd := d.Ready()
	assert.Equal(t, []*CQ{keep}, rd.CQs, "the destroyed CQ is gone from the batch, the other stays")
	assert.Empty(t, rd.Notified, "the destroyed channel is gone from the batch")
}

// TestReadyAllocatesNothing: once the device has seen its largest batch,
// taking a batch, reporting its frames gone and firing the timer that
// resends them allocates nothing (frame buffers and lists are recycled).
func TestReadyAllocatesNothing(t *testing.T) {
	d, pd := readyDevice(t)
	cq, err := d.CreateCQ(16, nil, 0)
	require.NoError(t, err)
	qp := readyQP(t, d, pd, cq, 4)
	_, err = d.PostSend(0, qp, []SendWR{{WRID: 1, Opcode: WRSend}, {WRID: 2, Opcode: WRSend}})
	require.NoError(t, err)
	frames := 0
	step := func() {
		rd := d.Ready()
		frames += len(rd.Frames)
		for range rd.Frames {
			d.TxDone(rd.Deadline)
		}
		d.Advance(rd.Deadline)
	}
	step()
	step()
	allocs := testing.AllocsPerRun(100, step)
	assert.Zero(t, allocs)
	assert.Equal(t, 2*(2+100+1), frames, "every ACK timeout resends both SENDs")
}

// TestTxSlack: a device counts the tx-dones a driver may hold back (the
// daemon's port, which then wakes the process once for many frames):
// with one QP blocked at inflightHigh frames in the port, all of its
// tx-dones but the one that brings it down to inflightLow, whatever
// other QPs' frames are behind them; held back and applied, those change
// nothing a driver sees, and the next one resumes the QP. Counting
// changes no count, and with no QP waiting every frame in the port is
// slack.
func TestTxSlack(t *testing.T) {
	d, pd := readyDevice(t)
	cq, err := d.CreateCQ(256, nil, 0)
	require.NoError(t, err)
	qa := readyQP(t, d, pd, cq, 128)
	qb := readyQP(t, d, pd, cq, 8)
	assert.Equal(t, 0, d.TxSlack(100), "nothing in the port")

	_, err = d.PostSend(0, qb, []SendWR{{WRID: 1, Opcode: WRSend}, {WRID: 2, Opcode: WRSend}})
	require.NoError(t, err)
	assert.Equal(t, 2, d.TxSlack(100), "nobody waits: every frame in the port is slack")
	assert.Equal(t, 1, d.TxSlack(1), "at most limit")
	require.Len(t, d.Ready().Frames, 2)

	wrs := make([]SendWR, 100)
	for i := range wrs {
		wrs[i] = SendWR{WRID: uint64(10 + i), Opcode: WRSend}
	}
	_, err = d.PostSend(0, qa, wrs)
	require.NoError(t, err)
	require.Len(t, d.Ready().Frames, inflightHigh, "qa stops at inflightHigh frames in the port")
	require.True(t, qa.blocked)
	// In the port: qb's 2, then qa's 64. qa resumes at the tx-done that
	// leaves it inflightLow: its 48th, the port's 50th.
	want := 2 + inflightHigh - inflightLow - 1
	assert.Equal(t, want, d.TxSlack(1000))
	assert.Equal(t, want, d.TxSlack(1000), "counting changed nothing")
	assert.Equal(t, inflightHigh, d.skbOut(qa))
	assert.Equal(t, 2, d.skbOut(qb), "qb's count kept")

	for i := range want {
		d.TxDone(sim.Time(i))
		require.False(t, d.HasReady(), "tx-done %d of the slack put something out", i)
	}
	assert.Equal(t, 0, d.TxSlack(1000), "the next tx-done is the one qa waits for")
	d.TxDone(sim.Time(want))
	assert.False(t, qa.blocked)
	assert.NotEmpty(t, d.Ready().Frames, "qa resumed")
}
