package nic

import (
	"fmt"
	"math/rand/v2"
	"net/netip"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/rocesim/rocesim/sim"
)

// timerQP creates an RC QP on d and brings it to RTS towards 10.0.0.2
// (resDevice's neighbour) with ACK timeout 14 and retry_cnt 7 (under the
// rxe profile: retry forever). Nothing is posted: its timers are idle.
func timerQP(t testing.TB, d *Device, pd *PD, cq *CQ) *QP {
	t.Helper()
	qp, err := d.CreateQP(pd, QPInitAttr{SendCQ: cq, RecvCQ: cq, Type: QPTypeRC,
		Cap: QPCap{MaxSendWR: 1, MaxRecvWR: 1, MaxSendSGE: 1, MaxRecvSGE: 1}})
	require.NoError(t, err)
	av := AHAttr{IsGlobal: true, PortNum: 1, GRH: GRH{DGID: netip.MustParseAddr("10.0.0.2"), HopLimit: 1}}
	require.NoError(t, d.ModifyQP(0, qp, &QPAttr{QPState: QPStateInit, PortNum: 1},
		QPAttrState|QPAttrPKeyIndex|QPAttrPort|QPAttrAccessFlags))
	require.NoError(t, d.ModifyQP(0, qp, &QPAttr{QPState: QPStateRTR, PathMTU: MTU1024, DestQPNum: 0x99,
		RQPSN: 1, AHAttr: av, MaxDestRdAtomic: 1, MinRNRTimer: 12},
		QPAttrState|QPAttrAV|QPAttrPathMTU|QPAttrDestQPN|QPAttrRQPSN|QPAttrMaxDestRdAtomic|QPAttrMinRNRTimer))
	require.NoError(t, d.ModifyQP(0, qp, &QPAttr{QPState: QPStateRTS, SQPSN: 1, Timeout: 14, RetryCnt: 7,
		RNRRetry: 7, MaxRdAtomic: 1},
		QPAttrState|QPAttrSQPSN|QPAttrTimeout|QPAttrRetryCnt|QPAttrRNRRetry|QPAttrMaxQPRdAtomic))
	return qp
}

// checkTimers compares the timer heap with a scan of every live QP (what
// NextDeadline and Advance did before the heap): the heap holds exactly
// the QPs with a deadline, each filed under its current one at the place
// its slot records, in heap order, and its top is the earliest.
func checkTimers(t *testing.T, d *Device) {
	t.Helper()
	want, n := sim.Never, 0
	for i := range d.timers {
		if i > 0 {
			assert.False(t, d.timers[i].before(&d.timers[(i-1)/2]), "heap order broken at %d", i)
		}
	}
	for _, qp := range d.qpList {
		if qp == nil {
			continue
		}
		due, slot := timerDue(qp), int(qp.slot)
		if due == sim.Never {
			assert.Equal(t, noSlot, slot, "QP %#x has no timer but is in the heap", qp.num)
			continue
		}
		n++
		want = min(want, due)
		if assert.GreaterOrEqual(t, slot, 0, "QP %#x has a timer but is not in the heap", qp.num) {
			assert.Same(t, qp, d.timers[slot].qp)
			assert.Equal(t, due, d.timers[slot].due, "QP %#x filed under a stale deadline", qp.num)
		}
	}
	assert.Len(t, d.timers, n)
	assert.Equal(t, want, d.NextDeadline())
}

// heapSlot returns qp's place in the timer heap, noSlot if none.
func heapSlot(qp *QP) int { return int(qp.slot) }

// setTimer arms qp's RNR wait and ACK timeout directly, as the completer
// and requester do, and files it.
func setTimer(d *Device, qp *QP, rnr, ack sim.Time) {
	qp.req.rnrUntil, qp.req.ackDue = rnr, ack
	d.retime(qp)
}

// TestTimerHeapHoldsOnlyQPsWithATimer: idle QPs are not in the timer
// heap at all, so NextDeadline and Advance never look at them (before the
// heap both scanned every QP); a QP leaves the heap when its timers stop,
// when it goes to ERR and when it is destroyed; equal deadlines are
// ordered by creation.
func TestTimerHeapHoldsOnlyQPsWithATimer(t *testing.T) {
	d, pd, cq := resDevice(t)
	qps := make([]*QP, 1000)
	for i := range qps {
		qps[i] = timerQP(t, d, pd, cq)
	}
	assert.Empty(t, d.timers, "idle QPs cost nothing")
	assert.Equal(t, sim.Never, d.NextDeadline())
	checkTimers(t, d)

	a, b, c, e := qps[10], qps[500], qps[20], qps[999]
	setTimer(d, b, sim.Never, 300)
	setTimer(d, c, 300, sim.Never)
	setTimer(d, a, sim.Never, 400)
	setTimer(d, e, 250, 200)
	checkTimers(t, d)
	assert.Len(t, d.timers, 4)
	assert.Same(t, e, d.timers[0].qp)

	setTimer(d, e, sim.Never, sim.Never) // stopped
	checkTimers(t, d)
	assert.Same(t, c, d.timers[0].qp, "300 twice: the QP created first")

	setTimer(d, b, sim.Never, 350) // later: moved down
	checkTimers(t, d)
	assert.Same(t, c, d.timers[0].qp)
	assert.Equal(t, sim.Time(300), d.NextDeadline())

	setTimer(d, a, sim.Never, 100) // re-armed earlier, in place
	checkTimers(t, d)
	assert.Same(t, a, d.timers[0].qp)

	require.NoError(t, d.ModifyQP(0, a, &QPAttr{QPState: QPStateErr}, QPAttrState))
	checkTimers(t, d)
	assert.Equal(t, noSlot, heapSlot(a), "a QP in ERR runs no timer")
	require.NoError(t, d.DestroyQP(c))
	checkTimers(t, d)
	assert.Len(t, d.timers, 1, "a destroyed QP leaves the heap")
	assert.Same(t, b, d.timers[0].qp)
	assert.Equal(t, sim.Time(350), d.NextDeadline())
}

// TestAdvanceRunsDueQPsInCreationOrder: when several QPs are due at once
// (a driver that calls Advance late: conformance's model host), they run
// in creation order, not deadline order, as the scan over the
// creation-ordered QP list ran them; a QP not yet due is left for later.
// The order shows in the trace (and so in ladders and pcap comments).
func TestAdvanceRunsDueQPsInCreationOrder(t *testing.T) {
	d, pd, cq := resDevice(t)
	tr := &sim.Trace{Limit: -1}
	d.SetTrace(tr)
	a, b, c, late := timerQP(t, d, pd, cq), timerQP(t, d, pd, cq), timerQP(t, d, pd, cq), timerQP(t, d, pd, cq)
	setTimer(d, c, 10, sim.Never)
	setTimer(d, a, 30, sim.Never)
	setTimer(d, b, 20, sim.Never)
	setTimer(d, late, 40, sim.Never)
	checkTimers(t, d)

	fired := func() []uint32 {
		var qpns []uint32
		for _, ev := range tr.Events() {
			if ev.Kind == "timer" {
				qpns = append(qpns, ev.QPN)
			}
		}
		return qpns
	}
	d.Advance(25)
	assert.Equal(t, []uint32{b.num, c.num}, fired(), "b before c although c was due first")
	checkTimers(t, d)
	d.Advance(35)
	assert.Equal(t, []uint32{b.num, c.num, a.num}, fired())
	assert.Equal(t, sim.Time(40), d.NextDeadline())
	checkTimers(t, d)
}

// BenchmarkTimerEventIdleQPs: the cost of one timer event (an ACK timeout
// that retransmits a SEND nobody answers; retry_cnt 7 retries forever
// under the rxe profile) on a device that also holds 1 or 100,000 idle
// QPs in RTS. With the timer heap it does not grow with the idle QPs
// (before it, NextDeadline and Advance scanned them all on each event).
func BenchmarkTimerEventIdleQPs(b *testing.B) {
	for _, idle := range []int{1, 100_000} {
		b.Run(fmt.Sprintf("idle=%d", idle), func(b *testing.B) {
			d := New(Config{MAC: [6]byte{2, 0, 0, 0, 0, 1}, IPv4: netip.AddrFrom4([4]byte{10, 0, 0, 1})})
			d.AddNeighbour(netip.MustParseAddr("10.0.0.2"), [6]byte{2, 0, 0, 0, 0, 2})
			pd, err := d.AllocPD()
			require.NoError(b, err)
			cq, err := d.CreateCQ(16, nil, 0)
			require.NoError(b, err)
			for range idle {
				timerQP(b, d, pd, cq)
			}
			qp := timerQP(b, d, pd, cq)
			_, err = d.PostSend(0, qp, []SendWR{{WRID: 1, Opcode: WRSend}})
			require.NoError(b, err)
			frames := 0
			step := func() {
				frames += len(d.Ready().Frames)
				for d.inflight.size > 0 {
					d.TxDone(d.NextDeadline())
				}
				d.Advance(d.NextDeadline())
			}
			step()
			require.Positive(b, frames)
			b.ReportAllocs()
			b.ResetTimer()
			for range b.N {
				step()
			}
			b.StopTimer()
			require.Equal(b, b.N+1, frames, "one retransmission per ACK timeout (the last one not drained)")
			require.Equal(b, QPStateRTS, qp.State())
		})
	}
}

// TestTimerHeapRandomized drives the heap through random deadline
// changes (earlier, later, stopped), QPs going to ERR and being
// destroyed, and Advance, and checks after each step the invariants of
// checkTimers and that Advance fires exactly the QPs a scan finds due, in
// creation order.
func TestTimerHeapRandomized(t *testing.T) {
	d, pd, cq := resDevice(t)
	tr := &sim.Trace{Limit: -1}
	d.SetTrace(tr)
	r := rand.New(rand.NewPCG(7, 20))
	qps := make([]*QP, 100)
	for i := range qps {
		qps[i] = timerQP(t, d, pd, cq)
	}
	now := sim.Time(0)
	deadline := func() sim.Time {
		if r.IntN(4) == 0 {
			return sim.Never
		}
		return now + sim.Time(r.IntN(100))
	}
	seen := 0
	for step := range 5000 {
		qp := qps[r.IntN(len(qps))]
		switch k := r.IntN(20); {
		case k < 9:
			if !qp.dead && qp.state == QPStateRTS {
				setTimer(d, qp, deadline(), deadline())
			}
		case k < 12:
			if !qp.dead && qp.state == QPStateRTS {
				setTimer(d, qp, sim.Never, sim.Never) // stopped: out of the heap
			}
		case k == 12:
			if !qp.dead {
				require.NoError(t, d.ModifyQP(now, qp, &QPAttr{QPState: QPStateErr}, QPAttrState))
			}
		case k == 13:
			if !qp.dead {
				require.NoError(t, d.DestroyQP(qp))
			}
		default:
			now += sim.Time(r.IntN(30))
			var want []uint32
			for _, q := range d.qpList {
				if q != nil && timerDue(q) <= now {
					want = append(want, q.num)
				}
			}
			d.Advance(now)
			var got []uint32
			for _, ev := range tr.Events()[seen:] {
				if ev.Kind == "timer" && (len(got) == 0 || got[len(got)-1] != ev.QPN) {
					got = append(got, ev.QPN)
				}
			}
			seen = len(tr.Events())
			require.Equal(t, want, got, "step %d: QPs fired at %d", step, now)
		}
		checkTimers(t, d)
		if t.Failed() {
			t.Fatalf("step %d", step)
		}
	}
}

// TestTxSlotOutlivesItsQP: a QP destroyed while its frames are still in
// the port keeps its slot of the device's count table until the last of
// them has left (TxDone); a QP created meanwhile gets another slot, and
// its count is not disturbed by the old frames' departures.
func TestTxSlotOutlivesItsQP(t *testing.T) {
	d, pd, cq := resDevice(t)
	a := timerQP(t, d, pd, cq)
	_, err := d.PostSend(0, a, []SendWR{{WRID: 1, Opcode: WRSend}})
	require.NoError(t, err)
	require.Len(t, d.Ready().Frames, 1)
	require.Equal(t, 1, d.skbOut(a))
	require.NoError(t, d.DestroyQP(a))

	b := timerQP(t, d, pd, cq)
	assert.NotEqual(t, a.tx, b.tx, "the slot of a QP with frames in the port is not reused")
	_, err = d.PostSend(0, b, []SendWR{{WRID: 3, Opcode: WRSend}})
	require.NoError(t, err)
	require.Len(t, d.Ready().Frames, 1)
	d.TxDone(0) // a's frame
	assert.Equal(t, 1, d.skbOut(b))
	c := timerQP(t, d, pd, cq)
	assert.Equal(t, a.tx, c.tx, "freed once its frames are gone")
	assert.Same(t, c, d.txQP[c.tx], "the slot names its new QP, the one TxDone wakes")
	d.TxDone(0)
	assert.Equal(t, 0, d.skbOut(b))
	assert.Equal(t, 0, d.skbOut(c))
}

// TestTimerRemoveSiftsUp: a QP taken out of the middle of the heap is
// replaced by the last entry, which may belong above the hole (here 40
// moves up past 100).
func TestTimerRemoveSiftsUp(t *testing.T) {
	d, pd, cq := resDevice(t)
	var qps []*QP
	for _, due := range []sim.Time{10, 100, 20, 110, 120, 30, 40} {
		qp := timerQP(t, d, pd, cq)
		setTimer(d, qp, sim.Never, due)
		qps = append(qps, qp)
	}
	require.Equal(t, 3, heapSlot(qps[3]), "the heap as built: 110 at index 3, under 100")
	setTimer(d, qps[3], sim.Never, sim.Never)
	checkTimers(t, d)
	assert.Equal(t, 1, heapSlot(qps[6]), "40 moved up past 100")
}
