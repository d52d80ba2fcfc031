package verbs_test

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"syscall"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/rocesim/rocesim/faults"
	"github.com/rocesim/rocesim/sim"
	"github.com/rocesim/rocesim/verbs"
	"github.com/rocesim/rocesim/wire"
)

// pair returns two connected RC endpoints on one link.
func pair(t *testing.T, cfg verbs.WorldConfig) (*verbs.World, *endpoint, *endpoint) {
	return pairWith(t, cfg, nil)
}

// pairWith is pair with tweak applied to both endpoints (retry counts,
// rd_atomic) before they connect; tweak may be nil.
func pairWith(t *testing.T, cfg verbs.WorldConfig, tweak func(a, b *endpoint)) (*verbs.World, *endpoint, *endpoint) {
	w := verbs.NewWorld(cfg)
	ha, hb := w.AddHost("a"), w.AddHost("b")
	require.NoError(t, w.Connect(ha, hb))
	a, b := setup(ha, 100), setup(hb, 200)
	if tweak != nil {
		tweak(a, b)
	}
	require.NoError(t, a.connect(b))
	require.NoError(t, b.connect(a))
	return w, a, b
}

func sendWR(id uint64, e *endpoint, n uint64) verbs.SendWR {
	return verbs.SendWR{WRID: id, Opcode: verbs.WRSend, Flags: verbs.SendSignaled, SGList: []verbs.SGE{e.mr.SGE(0, n)}}
}

func recvWR(id uint64, e *endpoint) verbs.RecvWR {
	return verbs.RecvWR{WRID: id, SGList: []verbs.SGE{e.mr.SGE(0, 4096)}}
}

func pollAll(cq *verbs.CQ) []verbs.WC {
	var out []verbs.WC
	wcs := make([]verbs.WC, 8)
	for {
		n := cq.Poll(wcs)
		if n == 0 {
			return out
		}
		out = append(out, wcs[:n]...)
	}
}

func summary(wcs []verbs.WC) []string {
	var s []string
	for _, wc := range wcs {
		s = append(s, fmt.Sprintf("%d:%s", wc.WRID, wc.Status.Name()))
	}
	return s
}

// TestFlushOnError moves an RTS QP with 10 outstanding sends and 10
// posted receives to ERR: 20 WR_FLUSH_ERR completions in posting order.
func TestFlushOnError(t *testing.T) {
	plan, err := faults.Parse("drop src=a\n") // no send ever arrives, so all stay outstanding
	require.NoError(t, err)
	w, a, _ := pair(t, verbs.WorldConfig{Seed: 1, Plan: plan})
	for i := range uint64(10) {
		_, err := a.qp.PostRecv([]verbs.RecvWR{recvWR(100+i, a)})
		require.NoError(t, err)
	}
	for i := range uint64(10) {
		_, err := a.qp.PostSend([]verbs.SendWR{sendWR(i, a, 8)})
		require.NoError(t, err)
	}
	require.NoError(t, w.RunFor(10*sim.Microsecond))
	assert.Empty(t, pollAll(a.cq), "nothing completes while the sends are unacknowledged")
	require.NoError(t, a.qp.Modify(&verbs.QPAttr{QPState: verbs.QPStateErr}, verbs.QPAttrState))
	got := pollAll(a.cq)
	var want []string
	for i := range 10 {
		want = append(want, fmt.Sprintf("%d:IBV_WC_WR_FLUSH_ERR", i))
	}
	for i := range 10 {
		want = append(want, fmt.Sprintf("%d:IBV_WC_WR_FLUSH_ERR", 100+i))
	}
	assert.Equal(t, want, summary(got))
	assert.Equal(t, verbs.WCSend, got[0].Opcode)
	assert.Equal(t, verbs.WCRecv, got[10].Opcode)
	// A WR posted in ERR is accepted and flushed at once.
	_, err = a.qp.PostSend([]verbs.SendWR{sendWR(50, a, 8)})
	require.NoError(t, err)
	assert.Equal(t, []string{"50:IBV_WC_WR_FLUSH_ERR"}, summary(pollAll(a.cq)))
}

// TestCQOverflow: a receive CQ asked for 4 entries (rxe rounds it to 7,
// and reports 7), never polled, while 8 messages arrive. Under both
// profiles the 8th receive completion does not fit: CQ_ERR, and the
// receiver's QP goes to ERR without acknowledging it. The user finds the
// first 7 receive completions in the CQ and nothing else (the 8th and the
// flushes are lost to the full CQ). The sender's 8th WR is never
// acknowledged: it fails with RETRY_EXC_ERR after its retries.
func TestCQOverflow(t *testing.T) {
	for _, prof := range []verbs.Profile{verbs.ProfileRXE, verbs.ProfileSpec} {
		t.Run(prof.String(), func(t *testing.T) {
			w := verbs.NewWorld(verbs.WorldConfig{Seed: 1, Profile: prof})
			ha, hb := w.AddHost("a"), w.AddHost("b")
			require.NoError(t, w.Connect(ha, hb))
			a, b := setup(ha, 1), setup(hb, 1)
			a.retry = 2
			small, err := b.ctx.CreateCQ(4, nil, 0)
			require.NoError(t, err)
			assert.Equal(t, 7, small.CQE())
			b.qp, err = b.pd.CreateQP(verbs.QPInitAttr{SendCQ: b.cq, RecvCQ: small, Type: verbs.QPTypeRC,
				Cap: verbs.QPCap{MaxSendWR: 16, MaxRecvWR: 16, MaxSendSGE: 1, MaxRecvSGE: 1}})
			require.NoError(t, err)
			require.NoError(t, a.connect(b))
			require.NoError(t, b.connect(a))
			for i := range uint64(10) {
				_, err := b.qp.PostRecv([]verbs.RecvWR{recvWR(100+i, b)})
				require.NoError(t, err)
			}
			for i := range uint64(8) {
				_, err := a.qp.PostSend([]verbs.SendWR{sendWR(i, a, 16)})
				require.NoError(t, err)
			}
			require.NoError(t, w.Run())

			ev, ok := b.ctx.GetAsyncEvent()
			require.True(t, ok)
			assert.Equal(t, "CQ_ERR", ev.Type.String())
			assert.Equal(t, verbs.QPStateErr, b.qp.State())
			var want []string
			for i := range 7 {
				want = append(want, fmt.Sprintf("%d:IBV_WC_SUCCESS", 100+i))
			}
			assert.Equal(t, want, summary(pollAll(small)))
			want = want[:0]
			for i := range 7 {
				want = append(want, fmt.Sprintf("%d:IBV_WC_SUCCESS", i))
			}
			assert.Equal(t, append(want, "7:IBV_WC_RETRY_EXC_ERR"), summary(pollAll(a.cq)))
			assert.Equal(t, verbs.QPStateErr, a.qp.State())
		})
	}
}

// TestSendCQOverflowProfiles: a send CQ of 1 entry, never polled, and
// three signaled sends. Both profiles raise CQ_ERR and keep only the
// first completion. rxe loses the other two silently and leaves the QP in
// RTS (its completer ignores the failed post); the IBTA profile moves
// the QP to ERR.
func TestSendCQOverflowProfiles(t *testing.T) {
	for _, c := range []struct {
		prof  verbs.Profile
		state verbs.QPState
	}{{verbs.ProfileRXE, verbs.QPStateRTS}, {verbs.ProfileSpec, verbs.QPStateErr}} {
		t.Run(c.prof.String(), func(t *testing.T) {
			w := verbs.NewWorld(verbs.WorldConfig{Seed: 1, Profile: c.prof})
			ha, hb := w.AddHost("a"), w.AddHost("b")
			require.NoError(t, w.Connect(ha, hb))
			a, b := setup(ha, 1), setup(hb, 1)
			tiny, err := a.ctx.CreateCQ(1, nil, 0)
			require.NoError(t, err)
			a.qp, err = a.pd.CreateQP(verbs.QPInitAttr{SendCQ: tiny, RecvCQ: a.cq, Type: verbs.QPTypeRC,
				Cap: verbs.QPCap{MaxSendWR: 16, MaxRecvWR: 16, MaxSendSGE: 1, MaxRecvSGE: 1}})
			require.NoError(t, err)
			require.NoError(t, a.connect(b))
			require.NoError(t, b.connect(a))
			for i := range uint64(3) {
				_, err := b.qp.PostRecv([]verbs.RecvWR{recvWR(100+i, b)})
				require.NoError(t, err)
				_, err = a.qp.PostSend([]verbs.SendWR{sendWR(i, a, 16)})
				require.NoError(t, err)
			}
			require.NoError(t, w.Run())
			ev, ok := a.ctx.GetAsyncEvent()
			require.True(t, ok)
			assert.Equal(t, "CQ_ERR", ev.Type.String())
			assert.Equal(t, []string{"0:IBV_WC_SUCCESS"}, summary(pollAll(tiny)))
			assert.Equal(t, c.state, a.qp.State())
			assert.Len(t, pollAll(b.cq), 3, "the receiver got all three")
		})
	}
}

// TestSendByteLenProfiles: the byte_len of send-side completions. rxe
// (make_send_cqe in rxe_comp.c) reports the message length for every
// opcode; the IBTA leaves the field undefined there and the spec profile
// reports only what landed in local memory (a READ's length, an atomic's
// 8). A failed or flushed send completion has 0 under both: rxe fills
// byte_len only on success.
func TestSendByteLenProfiles(t *testing.T) {
	for _, c := range []struct {
		prof verbs.Profile
		want []uint32 // SEND, WRITE_WITH_IMM, WRITE, READ, FETCH_ADD, COMP_SWAP
	}{
		{verbs.ProfileRXE, []uint32{3000, 4000, 64, 1000, 8, 8}},
		{verbs.ProfileSpec, []uint32{0, 0, 0, 1000, 8, 8}},
	} {
		t.Run(c.prof.String(), func(t *testing.T) {
			w, a, b := pair(t, verbs.WorldConfig{Seed: 1, Profile: c.prof})
			counter, err := b.pd.RegMR(make([]byte, 8), verbs.AccessLocalWrite|verbs.AccessRemoteAtomic)
			require.NoError(t, err)
			_, err = b.qp.PostRecv([]verbs.RecvWR{recvWR(100, b), recvWR(101, b)})
			require.NoError(t, err)
			_, err = a.qp.PostSend([]verbs.SendWR{
				sendWR(1, a, 3000),
				{WRID: 2, Opcode: verbs.WRRDMAWriteWithImm, Flags: verbs.SendSignaled, ImmData: 7,
					RemoteAddr: b.mr.Addr, RKey: b.mr.RKey, SGList: []verbs.SGE{a.mr.SGE(0, 4000)}},
				{WRID: 3, Opcode: verbs.WRRDMAWrite, Flags: verbs.SendSignaled,
					RemoteAddr: b.mr.Addr, RKey: b.mr.RKey, SGList: []verbs.SGE{a.mr.SGE(0, 64)}},
				{WRID: 4, Opcode: verbs.WRRDMARead, Flags: verbs.SendSignaled,
					RemoteAddr: b.mr.Addr, RKey: b.mr.RKey, SGList: []verbs.SGE{a.mr.SGE(0, 1000)}},
				{WRID: 5, Opcode: verbs.WRAtomicFetchAndAdd, Flags: verbs.SendSignaled, CompareAdd: 1,
					RemoteAddr: counter.Addr, RKey: counter.RKey, SGList: []verbs.SGE{a.mr.SGE(2048, 8)}},
				{WRID: 6, Opcode: verbs.WRAtomicCmpAndSwp, Flags: verbs.SendSignaled, CompareAdd: 1, Swap: 9,
					RemoteAddr: counter.Addr, RKey: counter.RKey, SGList: []verbs.SGE{a.mr.SGE(2056, 8)}},
			})
			require.NoError(t, err)
			require.NoError(t, w.Run())
			wcs := pollAll(a.cq)
			require.Equal(t, []string{"1:IBV_WC_SUCCESS", "2:IBV_WC_SUCCESS", "3:IBV_WC_SUCCESS",
				"4:IBV_WC_SUCCESS", "5:IBV_WC_SUCCESS", "6:IBV_WC_SUCCESS"}, summary(wcs))
			var got []uint32
			for _, wc := range wcs {
				got = append(got, wc.ByteLen)
			}
			assert.Equal(t, c.want, got)

			// A WRITE the responder refuses, and a SEND flushed behind it.
			_, err = a.qp.PostSend([]verbs.SendWR{
				{WRID: 7, Opcode: verbs.WRRDMAWrite, Flags: verbs.SendSignaled,
					RemoteAddr: b.mr.Addr, RKey: b.mr.RKey ^ 0x100, SGList: []verbs.SGE{a.mr.SGE(0, 64)}},
				sendWR(8, a, 16),
			})
			require.NoError(t, err)
			require.NoError(t, w.Run())
			wcs = pollAll(a.cq)
			require.Equal(t, []string{"7:IBV_WC_REM_ACCESS_ERR", "8:IBV_WC_WR_FLUSH_ERR"}, summary(wcs))
			assert.Equal(t, uint32(0), wcs[0].ByteLen)
			assert.Equal(t, uint32(0), wcs[1].ByteLen)
		})
	}
}

// TestPostMisuse: every malformed post returns the errno libibverbs
// returns, with a message naming the field at fault; memory errors are
// accepted and complete with LOC_PROT_ERR or LOC_LEN_ERR.
func TestPostMisuse(t *testing.T) {
	w, a, b := pair(t, verbs.WorldConfig{Seed: 1})
	_ = w
	two := []verbs.SGE{a.mr.SGE(0, 8), a.mr.SGE(8, 8)}
	cases := []struct {
		name  string
		wr    verbs.SendWR
		errno syscall.Errno
		msg   string
	}{
		{"too many SGEs", verbs.SendWR{Opcode: verbs.WRSend, SGList: two}, syscall.EINVAL, "num_sge 2 over the QP's max_send_sge 1"},
		{"inline over max", verbs.SendWR{Opcode: verbs.WRSend, Flags: verbs.SendInline, SGList: []verbs.SGE{a.mr.SGE(0, 64)}}, syscall.EINVAL, "max_inline_data 16"},
		{"opcode not for the QP type", verbs.SendWR{Opcode: verbs.WROpcode(10)}, syscall.EINVAL, "opcode WROpcode(10) is not valid on a RC QP"},
		{"unaligned atomic", verbs.SendWR{Opcode: verbs.WRAtomicFetchAndAdd, RemoteAddr: 3, SGList: []verbs.SGE{a.mr.SGE(0, 8)}}, syscall.EINVAL, "not 8-byte aligned"},
	}
	for _, c := range cases {
		i, err := a.qp.PostSend([]verbs.SendWR{c.wr})
		require.Error(t, err, c.name)
		assert.Equal(t, 0, i)
		assert.True(t, errors.Is(err, c.errno), "%s: %v", c.name, err)
		assert.Contains(t, err.Error(), c.msg, c.name)
	}

	// The index of the first refused WR: the ones before it are posted.
	i, err := a.qp.PostSend([]verbs.SendWR{sendWR(1, a, 8), {Opcode: verbs.WRSend, SGList: two}})
	assert.Equal(t, 1, i)
	assert.True(t, errors.Is(err, syscall.EINVAL))

	// Queue full: ENOMEM. The peer has no receives, so sends pile up.
	// max_send_wr 16 gets a queue of 31, as on rxe (nic's rxeQPCaps).
	var wrs []verbs.SendWR
	for k := range uint64(40) {
		wrs = append(wrs, sendWR(10+k, a, 8))
	}
	i, err = a.qp.PostSend(wrs)
	assert.True(t, errors.Is(err, syscall.ENOMEM), "%v", err)
	assert.Equal(t, 30, i, "1 posted before, 30 fit in the queue of 31 max_send_wr 16 gets")
	assert.Contains(t, err.Error(), "send queue full")

	// UD without an AH.
	udq, err := b.pd.CreateQP(verbs.QPInitAttr{SendCQ: b.cq, RecvCQ: b.cq, Type: verbs.QPTypeUD,
		Cap: verbs.QPCap{MaxSendWR: 4, MaxRecvWR: 4, MaxSendSGE: 1, MaxRecvSGE: 1}})
	require.NoError(t, err)
	require.NoError(t, udq.Modify(&verbs.QPAttr{QPState: verbs.QPStateInit, PortNum: 1, QKey: 0x11},
		verbs.QPAttrState|verbs.QPAttrPKeyIndex|verbs.QPAttrPort|verbs.QPAttrQKey))
	require.NoError(t, udq.Modify(&verbs.QPAttr{QPState: verbs.QPStateRTR}, verbs.QPAttrState))
	require.NoError(t, udq.Modify(&verbs.QPAttr{QPState: verbs.QPStateRTS, SQPSN: 1}, verbs.QPAttrState|verbs.QPAttrSQPSN))
	_, err = udq.PostSend([]verbs.SendWR{{Opcode: verbs.WRSend, SGList: []verbs.SGE{b.mr.SGE(0, 8)}}})
	assert.True(t, errors.Is(err, syscall.EINVAL))
	assert.Contains(t, err.Error(), "needs wr.ah")

	// Posting sends before RTS: EINVAL naming the state.
	fresh, err := b.pd.CreateQP(verbs.QPInitAttr{SendCQ: b.cq, RecvCQ: b.cq, Type: verbs.QPTypeRC,
		Cap: verbs.QPCap{MaxSendWR: 4, MaxRecvWR: 4, MaxSendSGE: 1, MaxRecvSGE: 1}})
	require.NoError(t, err)
	_, err = fresh.PostSend([]verbs.SendWR{sendWR(1, b, 8)})
	assert.Contains(t, err.Error(), "is in RESET; sends may be posted from RTS on")
	_, err = fresh.PostRecv([]verbs.RecvWR{recvWR(1, b)})
	assert.Contains(t, err.Error(), "is in RESET; receives may be posted from INIT on")
}

// TestLocalMemoryErrors: an SGE outside its MR, a wrong lkey, a receive
// buffer without LOCAL_WRITE complete with LOC_PROT_ERR; a message over
// 2^31 bytes with LOC_LEN_ERR; a 0-length SGE means 2^31 bytes.
func TestLocalMemoryErrors(t *testing.T) {
	cases := []struct {
		name string
		sge  func(e *endpoint) verbs.SGE
		want string
	}{
		{"outside the MR", func(e *endpoint) verbs.SGE { return e.mr.SGE(4000, 200) }, "IBV_WC_LOC_PROT_ERR"},
		{"wrong lkey", func(e *endpoint) verbs.SGE { s := e.mr.SGE(0, 8); s.LKey ^= 0x700; return s }, "IBV_WC_LOC_PROT_ERR"},
		{"zero length is 2^31 bytes, beyond the MR", func(e *endpoint) verbs.SGE { return e.mr.SGE(0, 0) }, "IBV_WC_LOC_PROT_ERR"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			w, a, _ := pair(t, verbs.WorldConfig{Seed: 1})
			_, err := a.qp.PostSend([]verbs.SendWR{{WRID: 9, Opcode: verbs.WRSend, SGList: []verbs.SGE{c.sge(a)}}})
			require.NoError(t, err, "memory errors are found by the device, not the post")
			require.NoError(t, w.Run())
			assert.Equal(t, []string{"9:" + c.want}, summary(pollAll(a.cq)))
			assert.Equal(t, verbs.QPStateErr, a.qp.State())
		})
	}
	t.Run("receive buffer without LOCAL_WRITE", func(t *testing.T) {
		w, a, b := pair(t, verbs.WorldConfig{Seed: 1})
		ro, err := b.pd.RegMR(make([]byte, 64), verbs.AccessRemoteRead)
		require.NoError(t, err)
		_, err = b.qp.PostRecv([]verbs.RecvWR{{WRID: 5, SGList: []verbs.SGE{ro.SGE(0, 64)}}})
		require.NoError(t, err)
		_, err = a.qp.PostSend([]verbs.SendWR{sendWR(6, a, 8)})
		require.NoError(t, err)
		require.NoError(t, w.Run())
		// rxe: a malformed receive WQE, LOC_QP_OP_ERR; NAK remote
		// operational error (the IBTA profile reports LOC_PROT_ERR).
		assert.Equal(t, []string{"5:IBV_WC_LOC_QP_OP_ERR"}, summary(pollAll(b.cq)))
		assert.Equal(t, []string{"6:IBV_WC_REM_OP_ERR"}, summary(pollAll(a.cq)))
	})
}

// TestRegMRAccessRules: REMOTE_WRITE or REMOTE_ATOMIC without LOCAL_WRITE
// is EINVAL, as libibverbs has it.
func TestRegMRAccessRules(t *testing.T) {
	w := verbs.NewWorld(verbs.WorldConfig{Seed: 1})
	ctx, _ := w.AddHost("a").GetDeviceList()[0].Open()
	pd, _ := ctx.AllocPD()
	for _, acc := range []verbs.AccessFlags{verbs.AccessRemoteWrite, verbs.AccessRemoteAtomic} {
		_, err := pd.RegMR(make([]byte, 64), acc)
		assert.True(t, errors.Is(err, syscall.EINVAL), "%v", err)
		assert.Contains(t, err.Error(), "requires LOCAL_WRITE")
	}
	mr1, err := pd.RegMR(make([]byte, 64), verbs.AccessLocalWrite|verbs.AccessRemoteWrite)
	require.NoError(t, err)
	mr2, err := pd.RegMR(make([]byte, 64), verbs.AccessLocalWrite)
	require.NoError(t, err)
	assert.NotEqual(t, mr1.Addr, mr2.Addr)
	assert.Zero(t, mr1.Addr%4096)
	// Destroying in-use resources: EBUSY.
	err = pd.Dealloc()
	assert.True(t, errors.Is(err, syscall.EBUSY), "%v", err)
	require.NoError(t, mr1.Dereg())
	require.NoError(t, mr2.Dereg())
	require.NoError(t, pd.Dealloc())
}

// TestDeregisteredInFlight: the sender's MR is deregistered while its
// SEND waits for a retransmission; the retransmission fails with
// LOC_PROT_ERR instead of touching the memory (no panic).
func TestDeregisteredInFlight(t *testing.T) {
	plan, err := faults.Parse("drop src=a tx=1\n")
	require.NoError(t, err)
	w, a, b := pair(t, verbs.WorldConfig{Seed: 1, Plan: plan})
	_, err = b.qp.PostRecv([]verbs.RecvWR{recvWR(1, b)})
	require.NoError(t, err)
	_, err = a.qp.PostSend([]verbs.SendWR{sendWR(2, a, 64)})
	require.NoError(t, err)
	require.NoError(t, a.mr.Dereg())
	require.NoError(t, w.Run())
	assert.Equal(t, []string{"2:IBV_WC_LOC_PROT_ERR"}, summary(pollAll(a.cq)))
	assert.Equal(t, verbs.QPStateErr, a.qp.State())
}

// TestZeroLengthWrite: an RDMA WRITE of 0 bytes needs no valid R_Key and
// completes at the sender.
func TestZeroLengthWrite(t *testing.T) {
	w, a, _ := pair(t, verbs.WorldConfig{Seed: 1})
	_, err := a.qp.PostSend([]verbs.SendWR{{WRID: 3, Opcode: verbs.WRRDMAWrite, Flags: verbs.SendSignaled, RKey: 0xdead}})
	require.NoError(t, err)
	require.NoError(t, w.Run())
	assert.Equal(t, []string{"3:IBV_WC_SUCCESS"}, summary(pollAll(a.cq)))
}

// TestAsyncEventsAndSRQLimit: COMM_EST when an RTR QP gets its first
// packet; SRQ_LIMIT_REACHED once when an armed SRQ falls below its limit.
func TestAsyncEventsAndSRQLimit(t *testing.T) {
	w := verbs.NewWorld(verbs.WorldConfig{Seed: 1})
	ha, hb := w.AddHost("a"), w.AddHost("b")
	require.NoError(t, w.Connect(ha, hb))
	a, b := setup(ha, 1), setup(hb, 1)
	srq, err := b.pd.CreateSRQ(verbs.SRQAttr{MaxWR: 8, MaxSGE: 1})
	require.NoError(t, err)
	b.qp, err = b.pd.CreateQP(verbs.QPInitAttr{SendCQ: b.cq, RecvCQ: b.cq, SRQ: srq, Type: verbs.QPTypeRC,
		Cap: verbs.QPCap{MaxSendWR: 4, MaxSendSGE: 1}})
	require.NoError(t, err)
	require.NoError(t, a.connect(b))
	bring(t, b, a, verbs.QPStateRTR)
	for i := range uint64(4) {
		_, err := srq.PostRecv([]verbs.RecvWR{recvWR(10+i, b)})
		require.NoError(t, err)
	}
	require.NoError(t, srq.Modify(verbs.SRQAttr{SRQLimit: 3}, verbs.SRQAttrLimit))
	for i := range uint64(3) {
		_, err := a.qp.PostSend([]verbs.SendWR{sendWR(i, a, 8)})
		require.NoError(t, err)
	}
	require.NoError(t, w.Run())
	var evs []string
	for {
		ev, ok := b.ctx.GetAsyncEvent()
		if !ok {
			break
		}
		evs = append(evs, ev.Type.String())
	}
	assert.Equal(t, []string{"COMM_EST", "SRQ_LIMIT_REACHED"}, evs)
	assert.Equal(t, []string{"10:IBV_WC_SUCCESS", "11:IBV_WC_SUCCESS", "12:IBV_WC_SUCCESS"}, summary(pollAll(b.cq)))
	// Destroying what is in use: EBUSY.
	assert.True(t, errors.Is(srq.Destroy(), syscall.EBUSY))
	assert.True(t, errors.Is(b.cq.Destroy(), syscall.EBUSY))
}

// TestPortEvents: a link taken down by the fault plan raises PORT_ERR on
// the hosts at its ends and PORT_ACTIVE when it comes back.
func TestPortEvents(t *testing.T) {
	plan, err := faults.Parse("down link=a-b from=10us to=20us\n")
	require.NoError(t, err)
	w, a, _ := pair(t, verbs.WorldConfig{Seed: 1, Plan: plan})
	require.NoError(t, w.RunFor(15*sim.Microsecond))
	port, _ := a.ctx.QueryPort(1)
	assert.Equal(t, "DOWN", port.State)
	require.NoError(t, w.Run())
	var evs []string
	for {
		ev, ok := a.ctx.GetAsyncEvent()
		if !ok {
			break
		}
		evs = append(evs, ev.Type.String())
	}
	assert.Equal(t, []string{"PORT_ERR", "PORT_ACTIVE"}, evs)
	n, _ := a.ctx.Counters().Get("link_downed")
	assert.Equal(t, uint64(1), n)
}

// TestAtomicLength: as rxe's post_send, an atomic whose sg_list holds
// fewer than 8 bytes is refused with EINVAL (a 0-length SGE counts 0
// there, not 2^31); one with more succeeds, the original value in its
// first 8 bytes and the rest untouched, byte_len the whole length.
func TestAtomicLength(t *testing.T) {
	w, a, b := pair(t, verbs.WorldConfig{Seed: 1})
	for _, sges := range [][]verbs.SGE{{a.mr.SGE(0, 4)}, {a.mr.SGE(0, 0)}, {a.mr.SGE(0, 7)}} {
		n, err := a.qp.PostSend([]verbs.SendWR{{WRID: 4, Opcode: verbs.WRAtomicFetchAndAdd, RemoteAddr: b.mr.Addr, RKey: b.mr.RKey,
			SGList: sges}})
		require.ErrorIs(t, err, syscall.EINVAL)
		require.ErrorContains(t, err, "the original value needs 8")
		require.Zero(t, n)
	}
	target := make([]byte, 8)
	binary.LittleEndian.PutUint64(target, 0x1122334455667788)
	tmr, err := b.pd.RegMR(target, verbs.AccessLocalWrite|verbs.AccessRemoteAtomic)
	require.NoError(t, err)
	for i := range 16 {
		a.buf[i] = 0xEE
	}
	_, err = a.qp.PostSend([]verbs.SendWR{{WRID: 5, Opcode: verbs.WRAtomicFetchAndAdd, Flags: verbs.SendSignaled,
		RemoteAddr: tmr.Addr, RKey: tmr.RKey, CompareAdd: 1, SGList: []verbs.SGE{a.mr.SGE(0, 16)}}})
	require.NoError(t, err)
	require.NoError(t, w.Run())
	wcs := pollAll(a.cq)
	assert.Equal(t, []string{"5:IBV_WC_SUCCESS"}, summary(wcs))
	assert.Equal(t, uint32(16), wcs[0].ByteLen)
	assert.Equal(t, uint64(0x1122334455667788), binary.LittleEndian.Uint64(a.buf))
	assert.Equal(t, bytes.Repeat([]byte{0xEE}, 8), a.buf[8:16])
	assert.Equal(t, uint64(0x1122334455667789), binary.LittleEndian.Uint64(target))
}

// TestCompletionErrorsSayWhy: a completion error found by the memory
// check names the SGE and key at fault in the trace.
func TestCompletionErrorsSayWhy(t *testing.T) {
	tr := &sim.Trace{}
	w, a, _ := pair(t, verbs.WorldConfig{Seed: 1, Trace: tr})
	bad := a.mr.SGE(0, 8)
	bad.LKey ^= 0x700
	_, err := a.qp.PostSend([]verbs.SendWR{{WRID: 9, Opcode: verbs.WRSend, SGList: []verbs.SGE{bad}}})
	require.NoError(t, err)
	require.NoError(t, w.Run())
	var why string
	for _, e := range tr.Events() {
		if e.Kind == "completion" {
			why, _ = e.Get("why")
		}
	}
	assert.Contains(t, why, "sge[0]")
	assert.Contains(t, why, fmt.Sprintf("%#x", bad.LKey))
}

// TestMessageOver2GiB: a message of more than 2^31 bytes completes with
// LOC_LEN_ERR, naming the length in the trace. (The MR is 2 GiB + 1 byte
// of real memory: a 0-length SGE means 2^31 bytes.)
func TestMessageOver2GiB(t *testing.T) {
	if testing.Short() {
		t.Skip("allocates 2 GiB")
	}
	tr := &sim.Trace{}
	w, a, _ := pair(t, verbs.WorldConfig{Seed: 1, Trace: tr})
	big, err := a.pd.RegMR(make([]byte, 1<<31+1), verbs.AccessLocalWrite)
	require.NoError(t, err)
	qp, err := a.pd.CreateQP(verbs.QPInitAttr{SendCQ: a.cq, RecvCQ: a.cq, Type: verbs.QPTypeRC,
		Cap: verbs.QPCap{MaxSendWR: 2, MaxRecvWR: 2, MaxSendSGE: 2, MaxRecvSGE: 1}})
	require.NoError(t, err)
	a.qp = qp
	require.NoError(t, a.connect(a))
	_, err = a.qp.PostSend([]verbs.SendWR{{WRID: 1, Opcode: verbs.WRSend, Flags: verbs.SendSignaled,
		SGList: []verbs.SGE{big.SGE(0, 0), big.SGE(1<<31, 1)}}})
	require.NoError(t, err)
	require.NoError(t, w.Run())
	assert.Equal(t, []string{"1:IBV_WC_LOC_LEN_ERR"}, summary(pollAll(a.cq)))
	assert.Contains(t, tr.Text(), "over 2^31")
}

// TestAlteredFrameChecked: frames a device builds cross the fabric
// sealed, their ICRC taken on trust by the receiving device; a frame a
// fault rule changed on the way is checked again. A SEND whose first
// transmission had a payload byte flipped is dropped for its ICRC, not
// placed, and its retransmission delivers the bytes sent; so with the
// ICRC itself flipped (corrupt's default).
func TestAlteredFrameChecked(t *testing.T) {
	for _, rule := range []string{"corrupt byte=70 src=a tx=1", "corrupt src=a tx=1"} {
		t.Run(rule, func(t *testing.T) {
			plan, err := faults.Parse(rule + "\n")
			require.NoError(t, err)
			w, a, b := pair(t, verbs.WorldConfig{Seed: 1, Plan: plan})
			for i := range 64 {
				a.buf[i] = byte(i + 1)
			}
			_, err = b.qp.PostRecv([]verbs.RecvWR{recvWR(1, b)})
			require.NoError(t, err)
			_, err = a.qp.PostSend([]verbs.SendWR{sendWR(2, a, 64)})
			require.NoError(t, err)
			require.NoError(t, w.Run())
			assert.Equal(t, []string{"2:IBV_WC_SUCCESS"}, summary(pollAll(a.cq)))
			assert.Equal(t, []string{"1:IBV_WC_SUCCESS"}, summary(pollAll(b.cq)))
			assert.Equal(t, a.buf[:64], b.buf[:64], "the bytes sent, not the altered ones")
			assert.Equal(t, uint64(1), b.host.RxErrors(wire.CodeICRC), "the altered frame, dropped for its ICRC")
		})
	}
}
