package nic

import (
	"errors"
	"syscall"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

const cqTestMax = 32768 // rxe: max_cqe = 1 << RXE_MAX_LOG_CQE

func cqTestNew(t *testing.T, cqe int, ch *CompChannel) *CQ {
	t.Helper()
	cq, err := newCQ(cqe, ch, 0, cqTestMax)
	require.NoError(t, err)
	return cq
}

// cqTestWC is a completion told apart by its WRID.
func cqTestWC(id uint64) WC { return WC{WRID: id, Opcode: WCRecv, ByteLen: uint32(id)} }

// cqTestPollIDs polls everything and returns the WRIDs in order.
func cqTestPollIDs(cq *CQ) []uint64 {
	var ids []uint64
	wcs := make([]WC, 2)
	for {
		n := cq.Poll(wcs)
		if n == 0 {
			return ids
		}
		for _, wc := range wcs[:n] {
			ids = append(ids, wc.WRID)
		}
	}
}

func TestNewCQSize(t *testing.T) {
	// rxe_queue_init: roundup_pow_of_two(cqe+1) - 1, worked by hand.
	tests := []struct{ cqe, want int }{
		{1, 1}, {2, 3}, {3, 3}, {4, 7}, {7, 7}, {8, 15}, {10, 15}, {15, 15}, {16, 31},
		{100, 127}, {255, 255}, {256, 511}, {cqTestMax, 65535},
	}
	for _, tc := range tests {
		cq := cqTestNew(t, tc.cqe, nil)
		assert.Equal(t, tc.want, cq.CQE(), "cqe %d", tc.cqe)
		assert.Equal(t, 0, cq.Len())
		assert.False(t, cq.Overflowed())
	}
}

func TestNewCQErrors(t *testing.T) {
	dead := &CompChannel{dead: true}
	tests := []struct {
		name   string
		cqe    int
		ch     *CompChannel
		vector int
		msg    string
	}{
		{"zero", 0, nil, 0, "create_cq: cqe 0 out of range 1..32768"},
		{"negative", -1, nil, 0, "create_cq: cqe -1 out of range 1..32768"},
		{"too big", cqTestMax + 1, nil, 0, "create_cq: cqe 32769 out of range 1..32768"},
		{"negative vector", 4, nil, -1, "create_cq: comp_vector -1 out of range"},
		{"destroyed channel", 4, dead, 0, "create_cq: channel is destroyed"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			cq, err := newCQ(tc.cqe, tc.ch, tc.vector, cqTestMax)
			assert.Nil(t, cq)
			require.Error(t, err)
			assert.True(t, errors.Is(err, syscall.EINVAL))
			assert.Contains(t, err.Error(), tc.msg)
		})
	}
	assert.Equal(t, 0, dead.refs)
}

func TestPollOrder(t *testing.T) {
	cq := cqTestNew(t, 4, nil) // 7 entries
	// Interleave pushes and polls so the ring wraps several times.
	next, want := uint64(0), uint64(0)
	wcs := make([]WC, 3)
	for round := 0; round < 10; round++ {
		for i := 0; i < 5; i++ {
			require.True(t, cq.push(cqTestWC(next), unsolicited))
			next++
		}
		for cq.Len() > 2 {
			n := cq.Poll(wcs)
			for _, wc := range wcs[:n] {
				require.Equal(t, want, wc.WRID, "completions come out in order")
				assert.Equal(t, uint32(want), wc.ByteLen)
				want++
			}
		}
	}
	assert.Equal(t, []uint64{48, 49}, cqTestPollIDs(cq))
	assert.Equal(t, 0, cq.Poll(wcs), "empty CQ")
	assert.Equal(t, 0, cq.Poll(nil))
	assert.False(t, cq.Overflowed())
}

func TestCQOverflow(t *testing.T) {
	cq := cqTestNew(t, 3, nil) // exactly 3 entries
	require.Equal(t, 3, cq.CQE())
	for i := uint64(1); i <= 3; i++ {
		require.True(t, cq.push(cqTestWC(i), unsolicited))
	}
	assert.False(t, cq.Overflowed())
	assert.False(t, cq.push(cqTestWC(4), unsolicited), "full: refused")
	assert.False(t, cq.push(WC{WRID: 5, Status: WCWRFlushErr}, solicited))
	assert.True(t, cq.Overflowed())
	assert.Equal(t, 3, cq.Len())

	wcs := make([]WC, 1)
	require.Equal(t, 1, cq.Poll(wcs))
	assert.Equal(t, uint64(1), wcs[0].WRID)
	assert.True(t, cq.push(cqTestWC(6), unsolicited), "room again after a poll")
	assert.True(t, cq.Overflowed(), "overflow is sticky")
	assert.Equal(t, []uint64{2, 3, 6}, cqTestPollIDs(cq), "the earlier entries are intact; 4 and 5 are lost")
}

func TestCQNotify(t *testing.T) {
	ok := WC{WRID: 1}
	bad := WC{WRID: 2, Status: WCRemAccessErr}
	type push struct {
		wc        WC
		solicited bool
	}
	tests := []struct {
		name   string
		arm    []bool // ReqNotify calls (solicitedOnly) before the pushes
		pushes []push
		events int
	}{
		{"not armed", nil, []push{{ok, false}, {ok, true}, {bad, false}}, 0},
		{"next completion, unsolicited", []bool{false}, []push{{ok, false}}, 1},
		{"next completion, one event per arm", []bool{false}, []push{{ok, false}, {ok, true}, {bad, false}}, 1},
		{"solicited only, unsolicited success", []bool{true}, []push{{ok, false}, {ok, false}}, 0},
		{"solicited only, solicited", []bool{true}, []push{{ok, false}, {ok, true}}, 1},
		{"solicited only, error counts as solicited", []bool{true}, []push{{ok, false}, {bad, false}}, 1},
		{"next completion not narrowed by a solicited arm", []bool{false, true}, []push{{ok, false}}, 1},
		{"solicited arm widened by a next-completion arm", []bool{true, false}, []push{{ok, false}}, 1},
		{"arming twice gives one event", []bool{false, false}, []push{{ok, false}, {ok, false}}, 1},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			ch := &CompChannel{}
			cq := cqTestNew(t, 16, ch)
			for _, s := range tc.arm {
				require.NoError(t, cq.ReqNotify(s))
			}
			for _, p := range tc.pushes {
				require.True(t, cq.push(p.wc, solicitationOf(p.solicited)))
			}
			assert.Equal(t, tc.events, ch.Pending())
			for i := 0; i < tc.events; i++ {
				got, ok := ch.GetEvent()
				require.True(t, ok)
				assert.Same(t, cq, got)
			}
			_, more := ch.GetEvent()
			assert.False(t, more)
			assert.Equal(t, len(tc.pushes), cq.Len(), "notification never drops completions")
		})
	}
}

func TestCQNotifyRules(t *testing.T) {
	ch := &CompChannel{}
	cq := cqTestNew(t, 1, ch)

	// Completions already queued do not fire a new arm.
	require.True(t, cq.push(cqTestWC(1), unsolicited))
	require.NoError(t, cq.ReqNotify(false))
	assert.Equal(t, 0, ch.Pending())

	// A refused (overflowing) completion does not fire either, as in rxe_cq_post.
	assert.False(t, cq.push(cqTestWC(2), solicited))
	assert.Equal(t, 0, ch.Pending())

	// The arm is still there for the next stored completion.
	cqTestPollIDs(cq)
	require.True(t, cq.push(cqTestWC(3), unsolicited))
	assert.Equal(t, 1, ch.Pending())

	// Re-arming after the event gives another one.
	cqTestPollIDs(cq)
	require.NoError(t, cq.ReqNotify(false))
	require.True(t, cq.push(cqTestWC(4), unsolicited))
	assert.Equal(t, 2, ch.Pending())

	// A CQ without a channel can be armed; the event goes nowhere.
	lone := cqTestNew(t, 4, nil)
	require.NoError(t, lone.ReqNotify(false))
	require.True(t, lone.push(cqTestWC(1), unsolicited))
	assert.False(t, lone.armed)
}

func TestChannelEventOrder(t *testing.T) {
	ch := &CompChannel{}
	a, b := cqTestNew(t, 64, ch), cqTestNew(t, 64, ch)
	_, ok := ch.GetEvent()
	assert.False(t, ok, "no event yet")

	// More events than the channel's first ring, read partway, so the
	// ring grows while its head is not at 0.
	var want []*CQ
	fire := func(cq *CQ) {
		require.NoError(t, cq.ReqNotify(false))
		require.True(t, cq.push(cqTestWC(0), unsolicited))
		want = append(want, cq)
	}
	for i := 0; i < 5; i++ {
		fire(a)
		fire(b)
	}
	var got []*CQ
	for i := 0; i < 3; i++ {
		cq, ok := ch.GetEvent()
		require.True(t, ok)
		got = append(got, cq)
	}
	for i := 0; i < 15; i++ {
		if i%3 == 0 {
			fire(a)
		} else {
			fire(b)
		}
	}
	assert.Equal(t, len(want)-3, ch.Pending())
	for {
		cq, ok := ch.GetEvent()
		if !ok {
			break
		}
		got = append(got, cq)
	}
	require.Equal(t, len(want), len(got))
	for i := range want {
		assert.Same(t, want[i], got[i], "event %d", i)
	}
}

func TestCQResize(t *testing.T) {
	cq := cqTestNew(t, 4, nil) // 7 entries
	wcs := make([]WC, 4)
	for i := uint64(0); i < 7; i++ {
		require.True(t, cq.push(cqTestWC(i), unsolicited))
	}
	require.Equal(t, 4, cq.Poll(wcs))
	for i := uint64(7); i < 10; i++ {
		require.True(t, cq.push(cqTestWC(i), unsolicited)) // wraps: entries 4..9 queued
	}
	require.Equal(t, 6, cq.Len())

	tests := []struct {
		cqe int
		msg string
	}{
		{5, "resize_cq: cqe 5 below the 6 completions queued"},
		{0, "resize_cq: cqe 0 out of range 1..32768"},
		{cqTestMax + 1, "resize_cq: cqe 32769 out of range 1..32768"},
	}
	for _, tc := range tests {
		err := cq.Resize(tc.cqe)
		require.Error(t, err)
		assert.True(t, errors.Is(err, syscall.EINVAL))
		assert.Contains(t, err.Error(), tc.msg)
	}
	assert.Equal(t, 7, cq.CQE(), "a refused resize changes nothing")

	require.NoError(t, cq.Resize(6)) // rounds to 7 again
	assert.Equal(t, 7, cq.CQE())
	require.NoError(t, cq.Resize(20))
	assert.Equal(t, 31, cq.CQE())
	for i := uint64(10); i < 30; i++ {
		require.True(t, cq.push(cqTestWC(i), unsolicited))
	}
	var want []uint64
	for i := uint64(4); i < 30; i++ {
		want = append(want, i)
	}
	assert.Equal(t, want, cqTestPollIDs(cq), "queued entries keep their order across resizes")

	require.NoError(t, cq.Resize(1))
	assert.Equal(t, 1, cq.CQE())
	require.True(t, cq.push(cqTestWC(1), unsolicited))
	assert.False(t, cq.push(cqTestWC(2), unsolicited))
}

func TestCQDestroy(t *testing.T) {
	ch := &CompChannel{}
	cq := cqTestNew(t, 4, ch)
	other := cqTestNew(t, 4, ch)
	assert.Equal(t, 2, ch.refs)

	wantErr := func(err error, errno syscall.Errno, msg string) {
		t.Helper()
		require.Error(t, err)
		assert.True(t, errors.Is(err, errno), "want %v, got %v", errno, err)
		assert.Contains(t, err.Error(), msg)
	}

	cq.refs = 2 // two QPs use it
	wantErr(cq.destroy(), syscall.EBUSY, "destroy_cq: 2 QPs use the CQ")
	cq.refs = 0

	// Two events: one read, one still queued, interleaved with other's.
	require.NoError(t, cq.ReqNotify(false))
	require.True(t, cq.push(cqTestWC(1), unsolicited))
	require.NoError(t, other.ReqNotify(false))
	require.True(t, other.push(cqTestWC(1), unsolicited))
	require.NoError(t, cq.ReqNotify(true))
	require.True(t, cq.push(WC{Status: WCWRFlushErr}, unsolicited))
	got, _ := ch.GetEvent()
	require.Same(t, cq, got)

	// Only the event read counts, as the kernel's comp_events_reported
	// does: on rxe, ibv_destroy_cq waits for an event read and not
	// acknowledged, not for one never read (conformance
	// TestDestroyCQWithEventsRXE).
	wantErr(cq.destroy(), syscall.EBUSY, "destroy_cq: 1 completion events read and not acknowledged")
	cq.AckEvents(0)
	cq.AckEvents(-3)
	wantErr(cq.destroy(), syscall.EBUSY, "destroy_cq: 1 completion events read and not acknowledged")
	cq.AckEvents(2)
	wantErr(cq.destroy(), syscall.EBUSY, "destroy_cq: 2 completion events acknowledged but only 1 read")

	cq.acked = 1 // the event read is acknowledged; the other was never read
	wantErr(ch.destroy(), syscall.EBUSY, "destroy_comp_channel: 2 CQs use the channel")
	require.NoError(t, cq.destroy())
	assert.Equal(t, 1, ch.refs)
	assert.Equal(t, 1, ch.Pending(), "the destroyed CQ's unread event left the channel")
	got, _ = ch.GetEvent()
	assert.Same(t, other, got)

	wantErr(cq.destroy(), syscall.EINVAL, "destroy_cq: CQ already destroyed")
	wantErr(cq.ReqNotify(false), syscall.EINVAL, "req_notify_cq: CQ is destroyed")
	wantErr(cq.Resize(8), syscall.EINVAL, "resize_cq: CQ is destroyed")
	assert.PanicsWithValue(t, "nic: completion pushed to a destroyed CQ", func() { cq.push(WC{}, unsolicited) })

	other.AckEvents(1)
	require.NoError(t, other.destroy())
	require.NoError(t, ch.destroy())
	wantErr(ch.destroy(), syscall.EINVAL, "destroy_comp_channel: channel already destroyed")
}

func TestCQHotPathAllocs(t *testing.T) {
	ch := &CompChannel{}
	cq := cqTestNew(t, 64, ch)
	wcs := make([]WC, 8)
	wc := WC{WRID: 7, ByteLen: 100}

	assert.Zero(t, testing.AllocsPerRun(100, func() {
		cq.push(wc, unsolicited)
		cq.Poll(wcs)
	}), "push and Poll, not armed")

	// Armed, with a reader that keeps up: the channel's ring stops growing.
	cycle := func() {
		_ = cq.ReqNotify(false)
		cq.push(wc, solicited)
		cq.Poll(wcs)
		if _, ok := ch.GetEvent(); ok {
			cq.AckEvents(1)
		}
	}
	cycle()
	assert.Zero(t, testing.AllocsPerRun(100, cycle), "armed push, event read")

	// A full CQ refuses without allocating.
	for cq.push(wc, unsolicited) {
	}
	assert.Zero(t, testing.AllocsPerRun(100, func() { cq.push(wc, unsolicited) }), "overflowing push")
}
