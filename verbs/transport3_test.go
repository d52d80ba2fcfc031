package verbs_test

import (
	"bytes"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/rocesim/rocesim/faults"
	"github.com/rocesim/rocesim/sim"
	"github.com/rocesim/rocesim/verbs"
)

// TestAckReqPast64Packets: a 70-packet WRITE asks for an ACK on its 66th
// packet, the first with more than 64 before it since the last that asked
// (rxe's RXE_MAX_PKT_PER_ACK, noack_pkts++ > 64: seen on rxe, conformance
// scenario unacked-window), and on its last; the responder answers
// exactly those two.
func TestAckReqPast64Packets(t *testing.T) {
	tr := &sim.Trace{}
	w, a, b := pair(t, verbs.WorldConfig{Seed: 1, Trace: tr})
	const n = 70 * 1024
	src, dst := writeAndRun(t, w, a, b, n)
	var asked, acks []string
	for _, l := range ladder(tr) {
		switch {
		case len(l) > 2 && l[:2] == "a " && bytes.HasSuffix([]byte(l), []byte(" ack")):
			asked = append(asked, l)
		case len(l) > 2 && l[:2] == "b ":
			acks = append(acks, l)
		}
	}
	assert.Equal(t, []string{"a RC_RDMA_WRITE_MIDDLE psn=165 ack", "a RC_RDMA_WRITE_LAST psn=169 ack"}, asked)
	assert.Equal(t, []string{"b RC_ACKNOWLEDGE psn=165 ACK msn=0", "b RC_ACKNOWLEDGE psn=169 ACK msn=1"}, acks)
	assert.Equal(t, []string{"1:IBV_WC_SUCCESS"}, summary(pollAll(a.cq)))
	assert.Equal(t, src.Bytes(), dst.Bytes())
}

// TestUnackedPSNWindow: an RC requester has at most 129 PSNs out (rxe's
// RXE_MAX_UNACKED_PSNS: a packet goes only while its PSN is at most 128
// past the oldest unacknowledged one; seen on rxe, conformance scenario
// unacked-window). A 200-packet WRITE whose first ACK (asked at PSN +65)
// is lost stops at PSN +128, and nothing is acknowledged until the
// retransmit timer resends it from its first packet.
func TestUnackedPSNWindow(t *testing.T) {
	plan, err := faults.Parse("drop src=b class=ack nth=1 first=1\n")
	require.NoError(t, err)
	tr := &sim.Trace{}
	w, a, b := pair(t, verbs.WorldConfig{Seed: 1, Trace: tr, Plan: plan})
	const n = 200 * 1024
	src, dst := writeAndRun(t, w, a, b, n)
	var sent []string
	for _, l := range ladder(tr) {
		if strings.HasPrefix(l, "a ") {
			sent = append(sent, strings.TrimSuffix(l, " ack"))
		}
	}
	require.Greater(t, len(sent), 130)
	assert.Equal(t, "a RC_RDMA_WRITE_MIDDLE psn=228", sent[128], "the last packet before the window closes")
	assert.Equal(t, "a RC_RDMA_WRITE_FIRST psn=100", sent[129], "then the timeout's retry, from the first packet")
	assert.Equal(t, []string{"1:IBV_WC_SUCCESS"}, summary(pollAll(a.cq)))
	assert.Equal(t, src.Bytes(), dst.Bytes())
}

// TestUnackedPSNWindowAfterRead: a SEND posted behind a 200-packet READ
// (whose request takes 200 PSNs) waits for the READ's responses to bring
// the oldest unacknowledged PSN within 128 of its own, and goes out at the
// response that does, while the rest still arrive (rxe's completer wakes
// the waiting requester as each response moves comp.psn on).
func TestUnackedPSNWindowAfterRead(t *testing.T) {
	tr := &sim.Trace{}
	w, a, b := pair(t, verbs.WorldConfig{Seed: 1, Trace: tr})
	const n = 200 * 1024
	src, err := b.pd.RegMR(bytes.Repeat([]byte{9}, n), verbs.AccessLocalWrite|verbs.AccessRemoteRead)
	require.NoError(t, err)
	dst, err := a.pd.RegMR(make([]byte, n), verbs.AccessLocalWrite)
	require.NoError(t, err)
	_, err = b.qp.PostRecv([]verbs.RecvWR{recvWR(9, b)})
	require.NoError(t, err)
	_, err = a.qp.PostSend([]verbs.SendWR{
		{WRID: 1, Opcode: verbs.WRRDMARead, Flags: verbs.SendSignaled, RemoteAddr: src.Addr, RKey: src.RKey,
			SGList: []verbs.SGE{dst.SGE(0, n)}},
		{WRID: 2, Opcode: verbs.WRSend, Flags: verbs.SendSignaled, SGList: []verbs.SGE{a.mr.SGE(0, 8)}},
	})
	require.NoError(t, err)
	require.NoError(t, w.Run())
	// The SEND (PSN 300) may go once the oldest unacknowledged PSN is
	// 172: it leaves the instant a takes the READ's response PSN 171,
	// not one response later, and not before.
	when := func(node string, kind sim.Kind, op, psn string) sim.Time {
		t.Helper()
		for _, e := range tr.Events() {
			o, _ := e.Get("op")
			p, _ := e.Get("psn")
			if e.Node == node && e.Kind == kind && o == op && p == psn {
				return e.Time
			}
		}
		t.Fatalf("no %s of %s psn=%s at %s", kind, op, psn, node)
		return 0
	}
	assert.Equal(t, when("a", "frame-rx", "RC_RDMA_READ_RESPONSE_MIDDLE", "171"), when("a", "frame-tx", "RC_SEND_ONLY", "300"))
	assert.Equal(t, []string{"1:IBV_WC_SUCCESS", "2:IBV_WC_SUCCESS"}, summary(pollAll(a.cq)))
	assert.Equal(t, src.Bytes(), dst.Bytes())
}

// writeAndRun posts one signaled WRITE of n bytes (wr_id 1) from a to b
// and runs the world; it returns the source and the target MR.
func writeAndRun(t *testing.T, w *verbs.World, a, b *endpoint, n int) (src, dst *verbs.MR) {
	t.Helper()
	src, err := a.pd.RegMR(bytes.Repeat([]byte{7}, n), verbs.AccessLocalWrite)
	require.NoError(t, err)
	dst, err = b.pd.RegMR(make([]byte, n), verbs.AccessLocalWrite|verbs.AccessRemoteWrite)
	require.NoError(t, err)
	_, err = a.qp.PostSend([]verbs.SendWR{{WRID: 1, Opcode: verbs.WRRDMAWrite, Flags: verbs.SendSignaled,
		RemoteAddr: dst.Addr, RKey: dst.RKey, SGList: []verbs.SGE{src.SGE(0, uint64(n))}}})
	require.NoError(t, err)
	require.NoError(t, w.Run())
	return src, dst
}

// TestFenceWaitsForRead: a fenced SEND after a READ goes out only once
// the READ has completed.
func TestFenceWaitsForRead(t *testing.T) {
	tr := &sim.Trace{}
	w, a, b := pair(t, verbs.WorldConfig{Seed: 1, Trace: tr})
	_, err := b.qp.PostRecv([]verbs.RecvWR{recvWR(9, b)})
	require.NoError(t, err)
	_, err = a.qp.PostSend([]verbs.SendWR{
		{WRID: 1, Opcode: verbs.WRRDMARead, Flags: verbs.SendSignaled, RemoteAddr: b.mr.Addr, RKey: b.mr.RKey,
			SGList: []verbs.SGE{a.mr.SGE(0, 16)}},
		{WRID: 2, Opcode: verbs.WRSend, Flags: verbs.SendSignaled | verbs.SendFence, SGList: []verbs.SGE{a.mr.SGE(100, 8)}},
	})
	require.NoError(t, err)
	require.NoError(t, w.Run())
	assert.Equal(t, []string{
		"a RC_RDMA_READ_REQUEST psn=100 ack",
		"b RC_RDMA_READ_RESPONSE_ONLY psn=100 ACK msn=1",
		"completion wr=1 IBV_WC_SUCCESS IBV_WC_RDMA_READ byte_len=16",
		"a RC_SEND_ONLY psn=101 ack",
		"completion wr=9 IBV_WC_SUCCESS IBV_WC_RECV byte_len=8",
		"b RC_ACKNOWLEDGE psn=101 ACK msn=2",
		"completion wr=2 IBV_WC_SUCCESS IBV_WC_SEND",
	}, ladder(tr))
}

// TestSolicitedEventAndZeroLength: a zero-length SEND with SOLICITED sets
// SE, completes with byte_len 0, and wakes a CQ armed for solicited
// completions only; an unsolicited one before it does not.
func TestSolicitedEventAndZeroLength(t *testing.T) {
	w := verbs.NewWorld(verbs.WorldConfig{Seed: 1})
	ha, hb := w.AddHost("a"), w.AddHost("b")
	require.NoError(t, w.Connect(ha, hb))
	a, b := setup(ha, 1), setup(hb, 1)
	ch := b.ctx.CreateCompChannel()
	cq, err := b.ctx.CreateCQ(8, ch, 0)
	require.NoError(t, err)
	b.qp, err = b.pd.CreateQP(verbs.QPInitAttr{SendCQ: b.cq, RecvCQ: cq, Type: verbs.QPTypeRC,
		Cap: verbs.QPCap{MaxSendWR: 4, MaxRecvWR: 4, MaxSendSGE: 1, MaxRecvSGE: 1}})
	require.NoError(t, err)
	require.NoError(t, a.connect(b))
	require.NoError(t, b.connect(a))
	require.NoError(t, cq.ReqNotify(true))
	_, err = b.qp.PostRecv([]verbs.RecvWR{recvWR(1, b), recvWR(2, b)})
	require.NoError(t, err)
	_, err = a.qp.PostSend([]verbs.SendWR{sendWR(3, a, 8)})
	require.NoError(t, err)
	require.NoError(t, w.Run())
	_, ok := ch.GetCQEvent()
	assert.False(t, ok, "an unsolicited completion does not wake a solicited-only CQ")
	_, err = a.qp.PostSend([]verbs.SendWR{{WRID: 4, Opcode: verbs.WRSend, Flags: verbs.SendSignaled | verbs.SendSolicited}})
	require.NoError(t, err)
	require.NoError(t, w.Run())
	got, ok := ch.GetCQEvent()
	require.True(t, ok, "the solicited completion wakes it")
	assert.Equal(t, cq, got)
	got.AckEvents(1)
	wcs := pollAll(cq)
	require.Len(t, wcs, 2)
	assert.Equal(t, uint32(8), wcs[0].ByteLen)
	assert.Equal(t, uint32(0), wcs[1].ByteLen)
}

// TestInlineSend: inline data is copied at post time, so changing the
// buffer afterwards does not change what is sent.
func TestInlineSend(t *testing.T) {
	w := verbs.NewWorld(verbs.WorldConfig{Seed: 1})
	ha, hb := w.AddHost("a"), w.AddHost("b")
	require.NoError(t, w.Connect(ha, hb))
	a, b := setup(ha, 1), setup(hb, 1)
	var err error
	a.qp, err = a.pd.CreateQP(verbs.QPInitAttr{SendCQ: a.cq, RecvCQ: a.cq, Type: verbs.QPTypeRC,
		Cap: verbs.QPCap{MaxSendWR: 4, MaxRecvWR: 4, MaxSendSGE: 2, MaxRecvSGE: 1, MaxInlineData: 64}})
	require.NoError(t, err)
	require.NoError(t, a.connect(b))
	require.NoError(t, b.connect(a))
	copy(a.buf, "inline-data!")
	_, err = b.qp.PostRecv([]verbs.RecvWR{recvWR(1, b)})
	require.NoError(t, err)
	_, err = a.qp.PostSend([]verbs.SendWR{{WRID: 2, Opcode: verbs.WRSend, Flags: verbs.SendSignaled | verbs.SendInline,
		SGList: []verbs.SGE{a.mr.SGE(0, 6), a.mr.SGE(6, 6)}}})
	require.NoError(t, err)
	copy(a.buf, "overwritten!")
	require.NoError(t, w.Run())
	assert.Equal(t, []string{"1:IBV_WC_SUCCESS"}, summary(pollAll(b.cq)))
	assert.Equal(t, "inline-data!", string(b.buf[:12]))
}

// TestNAKPastLostReadResponse is a regression test for a bug the swarm
// found with finite rnr_retry: a READ whose response was lost, then an
// RNR NAK for a SEND after it. The NAK says nothing about the READ (rxe's
// check_psn: COMPST_ERROR_RETRY, a go-back to the READ); the completer
// used to charge it to the oldest outstanding WQE and, with rnr_retry 0,
// fail the READ with RNR_RETRY_EXC_ERR and flush the SEND. Now the READ
// is asked again and completes, and the SEND, refused again for want of
// a receive, is the one that fails.
func TestNAKPastLostReadResponse(t *testing.T) {
	tr := &sim.Trace{}
	w, a, b := pairWith(t, verbs.WorldConfig{Seed: 1, Plan: planOf(t, "drop class=read-response tx=1\n"), Trace: tr},
		func(a, _ *endpoint) { a.rnr = 0 })
	copy(b.buf, "remote data")
	_, err := a.qp.PostSend([]verbs.SendWR{
		{WRID: 1, Opcode: verbs.WRRDMARead, Flags: verbs.SendSignaled, RemoteAddr: b.mr.Addr, RKey: b.mr.RKey,
			SGList: []verbs.SGE{a.mr.SGE(0, 11)}},
		sendWR(2, a, 8),
	})
	require.NoError(t, err)
	require.NoError(t, w.Run())
	assert.Equal(t, []string{"1:IBV_WC_SUCCESS", "2:IBV_WC_RNR_RETRY_EXC_ERR"}, summary(pollAll(a.cq)), "ladder:\n%s", strings.Join(ladder(tr), "\n"))
	assert.Equal(t, "remote data", string(a.buf[:11]))
	assert.Equal(t, verbs.QPStateErr, a.qp.State())
}

// TestLaterReadWaitsForLostResponse is the other half of the same fix: a
// response for a READ (or atomic) behind one whose response was lost
// places nothing (rxe: COMPST_ERROR_RETRY, go back to the first READ).
// Here the first READ's responses are all lost and retry_cnt is 0: it
// fails, the second READ is flushed, and its destination, although its
// response came, is untouched (it used to be written).
func TestLaterReadWaitsForLostResponse(t *testing.T) {
	tr := &sim.Trace{}
	w, a, b := pairWith(t, verbs.WorldConfig{Seed: 1, Plan: planOf(t, "drop psn=100 class=read-response\n"), Trace: tr},
		func(a, b *endpoint) { a.retry, a.rd, b.rd = 0, 2, 2 })
	copy(b.buf, "first second")
	_, err := a.qp.PostSend([]verbs.SendWR{
		{WRID: 1, Opcode: verbs.WRRDMARead, Flags: verbs.SendSignaled, RemoteAddr: b.mr.Addr, RKey: b.mr.RKey,
			SGList: []verbs.SGE{a.mr.SGE(0, 5)}},
		{WRID: 2, Opcode: verbs.WRRDMARead, Flags: verbs.SendSignaled, RemoteAddr: b.mr.Addr + 6, RKey: b.mr.RKey,
			SGList: []verbs.SGE{a.mr.SGE(100, 6)}},
	})
	require.NoError(t, err)
	require.NoError(t, w.Run())
	lad := strings.Join(ladder(tr), "\n")
	assert.Contains(t, lad, "b RC_RDMA_READ_RESPONSE_ONLY psn=101", "the second READ's response came")
	assert.Equal(t, []string{"1:IBV_WC_RETRY_EXC_ERR", "2:IBV_WC_WR_FLUSH_ERR"}, summary(pollAll(a.cq)), "ladder:\n%s", lad)
	assert.Equal(t, make([]byte, 6), a.buf[100:106], "a flushed READ's destination")
}
