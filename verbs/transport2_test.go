package verbs_test

import (
	"bytes"
	"encoding/binary"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/rocesim/rocesim/faults"
	"github.com/rocesim/rocesim/sim"
	"github.com/rocesim/rocesim/verbs"
)

func planOf(t *testing.T, text string) *faults.Plan {
	p, err := faults.Parse(text)
	require.NoError(t, err)
	return p
}

// TestDuplicateSendDeliveredOnce: every request frame goes on the wire
// three times (the fault plan adds two copies); each SEND is delivered
// once and each duplicate, asking for an ACK, is ACKed again with the
// last PSN received in order and the current MSN (IBTA C9-105).
func TestDuplicateSendDeliveredOnce(t *testing.T) {
	tr := &sim.Trace{}
	w, a, b := pair(t, verbs.WorldConfig{Seed: 1, Plan: planOf(t, "dup n=2 src=a\n"), Trace: tr})
	for i := range uint64(3) {
		_, err := b.qp.PostRecv([]verbs.RecvWR{{WRID: 10 + i, SGList: []verbs.SGE{b.mr.SGE(i*1024, 1024)}}})
		require.NoError(t, err)
		copy(a.buf[i*100:], bytes.Repeat([]byte{byte('x' + i)}, 100))
		_, err = a.qp.PostSend([]verbs.SendWR{{WRID: i, Opcode: verbs.WRSend, Flags: verbs.SendSignaled, SGList: []verbs.SGE{a.mr.SGE(i*100, 100)}}})
		require.NoError(t, err)
	}
	require.NoError(t, w.Run())
	assert.Equal(t, []string{"10:IBV_WC_SUCCESS", "11:IBV_WC_SUCCESS", "12:IBV_WC_SUCCESS"}, summary(pollAll(b.cq)))
	assert.Equal(t, []string{"0:IBV_WC_SUCCESS", "1:IBV_WC_SUCCESS", "2:IBV_WC_SUCCESS"}, summary(pollAll(a.cq)))
	assert.Equal(t, []string{
		"a RC_SEND_ONLY psn=100 ack",
		"a RC_SEND_ONLY psn=100 ack",
		"a RC_SEND_ONLY psn=100 ack",
		"a RC_SEND_ONLY psn=101 ack",
		"a RC_SEND_ONLY psn=101 ack",
		"a RC_SEND_ONLY psn=101 ack",
		"a RC_SEND_ONLY psn=102 ack",
		"a RC_SEND_ONLY psn=102 ack",
		"a RC_SEND_ONLY psn=102 ack",
		"completion wr=10 IBV_WC_SUCCESS IBV_WC_RECV byte_len=100",
		"b RC_ACKNOWLEDGE psn=100 ACK msn=1",
		"b RC_ACKNOWLEDGE psn=100 ACK msn=1",
		"b RC_ACKNOWLEDGE psn=100 ACK msn=1",
		"completion wr=11 IBV_WC_SUCCESS IBV_WC_RECV byte_len=100",
		"b RC_ACKNOWLEDGE psn=101 ACK msn=2",
		"b RC_ACKNOWLEDGE psn=101 ACK msn=2",
		"b RC_ACKNOWLEDGE psn=101 ACK msn=2",
		"completion wr=12 IBV_WC_SUCCESS IBV_WC_RECV byte_len=100",
		"b RC_ACKNOWLEDGE psn=102 ACK msn=3",
		"b RC_ACKNOWLEDGE psn=102 ACK msn=3",
		"b RC_ACKNOWLEDGE psn=102 ACK msn=3",
		// The first ACK of each PSN completes its SEND; the repeats are
		// behind the oldest outstanding PSN and ignored.
		"completion wr=0 IBV_WC_SUCCESS IBV_WC_SEND",
		"completion wr=1 IBV_WC_SUCCESS IBV_WC_SEND",
		"completion wr=2 IBV_WC_SUCCESS IBV_WC_SEND",
	}, ladder(tr))
	for i := range 3 {
		assert.Equal(t, bytes.Repeat([]byte{byte('x' + i)}, 100), b.buf[i*1024:i*1024+100])
	}
	n, _ := b.ctx.Counters().Get("duplicate_request")
	assert.Equal(t, uint64(6), n)
}

// TestReadAndAtomicsWithLostResponses: a 3-packet READ whose middle
// response is lost, and a fetch-and-add whose ATOMIC ACK is lost: the READ
// is re-requested from the missing PSN, the atomic is answered again from
// the saved original value and executed once.
//
// The READ's LAST arrives out of order and is dropped (rxe's check_psn);
// the ACK timeout asks again from PSN 101, and the responder replays the
// rest of the original response as MIDDLE and LAST.
func TestReadAndAtomicsWithLostResponses(t *testing.T) {
	plan := planOf(t, "drop op=RC_RDMA_READ_RESPONSE_MIDDLE tx=1\ndrop op=RC_ATOMIC_ACKNOWLEDGE first=1\n")
	tr := &sim.Trace{}
	w, a, b := pair(t, verbs.WorldConfig{Seed: 1, Plan: plan, Trace: tr})
	for i := range 3000 {
		b.buf[i] = byte(i * 13)
	}
	counter, err := b.pd.RegMR(make([]byte, 8), verbs.AccessLocalWrite|verbs.AccessRemoteAtomic)
	require.NoError(t, err)
	binary.LittleEndian.PutUint64(counter.Bytes(), 40)
	_, err = a.qp.PostSend([]verbs.SendWR{
		{WRID: 1, Opcode: verbs.WRRDMARead, Flags: verbs.SendSignaled, RemoteAddr: b.mr.Addr, RKey: b.mr.RKey,
			SGList: []verbs.SGE{a.mr.SGE(1000, 3000)}},
		{WRID: 2, Opcode: verbs.WRAtomicFetchAndAdd, Flags: verbs.SendSignaled, RemoteAddr: counter.Addr, RKey: counter.RKey,
			CompareAdd: 2, SGList: []verbs.SGE{a.mr.SGE(0, 8)}},
	})
	require.NoError(t, err)
	require.NoError(t, w.Run())
	wcs := pollAll(a.cq)
	require.Equal(t, []string{"1:IBV_WC_SUCCESS", "2:IBV_WC_SUCCESS"}, summary(wcs))
	assert.Equal(t, verbs.WCRDMARead, wcs[0].Opcode)
	assert.Equal(t, uint32(3000), wcs[0].ByteLen)
	assert.Equal(t, verbs.WCFetchAdd, wcs[1].Opcode)
	assert.Equal(t, uint32(8), wcs[1].ByteLen)
	assert.Equal(t, []string{
		"a RC_RDMA_READ_REQUEST psn=100 ack",
		"b RC_RDMA_READ_RESPONSE_FIRST psn=100 ACK msn=1",
		"b RC_RDMA_READ_RESPONSE_MIDDLE psn=101 DROPPED",
		"b RC_RDMA_READ_RESPONSE_LAST psn=102 ACK msn=1",
		"a RC_RDMA_READ_REQUEST psn=101 ack",
		"b RC_RDMA_READ_RESPONSE_MIDDLE psn=101",
		"b RC_RDMA_READ_RESPONSE_LAST psn=102 ACK msn=1",
		"completion wr=1 IBV_WC_SUCCESS IBV_WC_RDMA_READ byte_len=3000",
		// max_rd_atomic 1: the atomic waits for the READ to complete.
		"a RC_FETCH_ADD psn=103 ack",
		"b RC_ATOMIC_ACKNOWLEDGE psn=103 ACK msn=2 DROPPED",
		// The ACK timeout resends it; the responder answers from the
		// saved original value without adding again.
		"a RC_FETCH_ADD psn=103 ack",
		"b RC_ATOMIC_ACKNOWLEDGE psn=103 ACK msn=2",
		"completion wr=2 IBV_WC_SUCCESS IBV_WC_FETCH_ADD byte_len=8",
	}, ladder(tr))
	assert.Equal(t, b.buf[:3000], a.buf[1000:4000], "the READ brought the exact bytes")
	assert.Equal(t, uint64(40), binary.LittleEndian.Uint64(a.buf[:8]), "the fetch returned the original value")
	assert.Equal(t, uint64(42), binary.LittleEndian.Uint64(counter.Bytes()), "the add ran exactly once")
}

// TestRemoteAccessError: a WRITE with a wrong R_Key: NAK remote access
// error, REM_ACCESS_ERR at the requester, ERR at the responder; both
// sides flush what is left. The SEND behind the WRITE reaches a
// responder already in ERR and is dropped unanswered. The IBTA has the
// responder raise QP_ACCESS_ERR (an affiliated asynchronous error,
// §11.6.3); rxe 6.1 raises nothing (checked against real rxe in the
// remote-access-error differential scenario).
func TestRemoteAccessError(t *testing.T) {
	for _, c := range []struct {
		prof   verbs.Profile
		events []string
	}{{verbs.ProfileRXE, nil}, {verbs.ProfileSpec, []string{"QP_ACCESS_ERR"}}} {
		t.Run(c.prof.String(), func(t *testing.T) { remoteAccessError(t, c.prof, c.events) })
	}
}

func remoteAccessError(t *testing.T, prof verbs.Profile, events []string) {
	tr := &sim.Trace{}
	w, a, b := pair(t, verbs.WorldConfig{Seed: 1, Trace: tr, Profile: prof})
	_, err := b.qp.PostRecv([]verbs.RecvWR{recvWR(20, b)})
	require.NoError(t, err)
	_, err = a.qp.PostSend([]verbs.SendWR{
		{WRID: 1, Opcode: verbs.WRRDMAWrite, Flags: verbs.SendSignaled, RemoteAddr: b.mr.Addr, RKey: b.mr.RKey ^ 0x100,
			SGList: []verbs.SGE{a.mr.SGE(0, 64)}},
		sendWR(2, a, 8),
	})
	require.NoError(t, err)
	require.NoError(t, w.Run())
	assert.Equal(t, []string{"1:IBV_WC_REM_ACCESS_ERR", "2:IBV_WC_WR_FLUSH_ERR"}, summary(pollAll(a.cq)))
	assert.Equal(t, []string{"20:IBV_WC_WR_FLUSH_ERR"}, summary(pollAll(b.cq)))
	assert.Equal(t, []string{
		"a RC_RDMA_WRITE_ONLY psn=100 ack",
		"a RC_SEND_ONLY psn=101 ack",
		// The responder goes to ERR (flushing its receive) as it NAKs.
		"completion wr=20 IBV_WC_WR_FLUSH_ERR",
		"b RC_ACKNOWLEDGE psn=100 NAK(remote access error) msn=0",
		"completion wr=1 IBV_WC_REM_ACCESS_ERR",
		"completion wr=2 IBV_WC_WR_FLUSH_ERR",
	}, ladder(tr))
	var got []string
	for ev, ok := b.ctx.GetAsyncEvent(); ok; ev, ok = b.ctx.GetAsyncEvent() {
		got = append(got, ev.Type.String())
	}
	assert.Equal(t, events, got, "b's async events")
	assert.Equal(t, verbs.QPStateErr, b.qp.State())
	assert.Equal(t, verbs.QPStateErr, a.qp.State())
}

// TestMessageLongerThanReceive: a SEND longer than its receive buffer.
// In the IBTA it is a length error, class C: NAK invalid request, the
// receive completes with LOC_LEN_ERR, the requester with REM_INV_REQ_ERR.
// rxe 6.1 takes it for a malformed WQE (its copy_data answers the
// overflow with -EINVAL), class A: NAK remote operational error, the
// receive completes with LOC_QP_OP_ERR and the requester with REM_OP_ERR
// (checked against real rxe: conformance TestLongMessageMatchesRxe).
// Both QPs go to ERR either way.
func TestMessageLongerThanReceive(t *testing.T) {
	for _, c := range []struct {
		prof            verbs.Profile
		recv, send, nak string
	}{
		{verbs.ProfileRXE, "5:IBV_WC_LOC_QP_OP_ERR", "6:IBV_WC_REM_OP_ERR", "NAK(remote operational error)"},
		{verbs.ProfileSpec, "5:IBV_WC_LOC_LEN_ERR", "6:IBV_WC_REM_INV_REQ_ERR", "NAK(invalid request)"},
	} {
		tr := &sim.Trace{}
		w, a, b := pair(t, verbs.WorldConfig{Seed: 1, Profile: c.prof, Trace: tr})
		_, err := b.qp.PostRecv([]verbs.RecvWR{{WRID: 5, SGList: []verbs.SGE{b.mr.SGE(0, 100)}}})
		require.NoError(t, err)
		_, err = a.qp.PostSend([]verbs.SendWR{sendWR(6, a, 200)})
		require.NoError(t, err)
		require.NoError(t, w.Run())
		assert.Equal(t, []string{c.recv}, summary(pollAll(b.cq)), c.prof.String())
		assert.Equal(t, []string{c.send}, summary(pollAll(a.cq)), c.prof.String())
		assert.Contains(t, ladder(tr), "b RC_ACKNOWLEDGE psn=100 "+c.nak+" msn=0")
		assert.Equal(t, verbs.QPStateErr, a.qp.State())
		assert.Equal(t, verbs.QPStateErr, b.qp.State())
	}
}

// TestPSNWrap: a 4-packet message from PSN 2^24-2 wraps to 1 and is
// delivered intact; a loss across the wrap (PSN 0) is recovered by
// go-back-N.
func TestPSNWrap(t *testing.T) {
	tr := &sim.Trace{}
	w := verbs.NewWorld(verbs.WorldConfig{Seed: 1, Trace: tr, Plan: planOf(t, "drop psn=0 tx=1 src=a\n")})
	ha, hb := w.AddHost("a"), w.AddHost("b")
	require.NoError(t, w.Connect(ha, hb))
	a, b := setup(ha, 1<<24-2), setup(hb, 7)
	require.NoError(t, a.connect(b))
	require.NoError(t, b.connect(a))
	for i := range 4096 {
		a.buf[i] = byte(i ^ 0x5a)
	}
	_, err := b.qp.PostRecv([]verbs.RecvWR{recvWR(1, b)})
	require.NoError(t, err)
	_, err = a.qp.PostSend([]verbs.SendWR{sendWR(2, a, 4096)})
	require.NoError(t, err)
	require.NoError(t, w.Run())
	assert.Equal(t, []string{"2:IBV_WC_SUCCESS"}, summary(pollAll(a.cq)))
	assert.Equal(t, []string{"1:IBV_WC_SUCCESS"}, summary(pollAll(b.cq)))
	assert.Equal(t, a.buf[:4096], b.buf[:4096])
	assert.Equal(t, []string{
		"a RC_SEND_FIRST psn=16777214",
		"a RC_SEND_MIDDLE psn=16777215",
		"a RC_SEND_MIDDLE psn=0 DROPPED", // recorded in wire order, after 16777215
		"a RC_SEND_LAST psn=1 ack",
		"b RC_ACKNOWLEDGE psn=0 NAK(PSN sequence error) msn=0",
		"a RC_SEND_MIDDLE psn=0",
		"a RC_SEND_LAST psn=1 ack",
		"completion wr=1 IBV_WC_SUCCESS IBV_WC_RECV byte_len=4096",
		"b RC_ACKNOWLEDGE psn=1 ACK msn=1",
		"completion wr=2 IBV_WC_SUCCESS IBV_WC_SEND",
	}, ladder(tr))
}

// TestUCLossDropsRestOfMessage: UC has no ACKs; a lost middle packet
// loses that message (no completion at the receiver). rxe also loses the
// next message: its first packet fails check_op_seq, the broken
// message's LAST never having come (class D1), and the receive WQE is
// reset for the message after (seen on real rxe: differential scenario
// uc-loss). The IBTA profile takes the next message at once.
func TestUCLossDropsRestOfMessage(t *testing.T) {
	for _, c := range []struct {
		prof  verbs.Profile
		recv  []string
		bytes uint32 // the first receive's byte_len
		drops int    // message-drop trace events
	}{
		{verbs.ProfileRXE, []string{"1:IBV_WC_SUCCESS"}, 200, 1},
		{verbs.ProfileSpec, []string{"1:IBV_WC_SUCCESS", "2:IBV_WC_SUCCESS"}, 500, 0},
	} {
		t.Run(c.prof.String(), func(t *testing.T) {
			tr := &sim.Trace{}
			w := verbs.NewWorld(verbs.WorldConfig{Seed: 1, Profile: c.prof, Plan: planOf(t, "drop psn=11 src=a\n"), Trace: tr})
			ha, hb := w.AddHost("a"), w.AddHost("b")
			require.NoError(t, w.Connect(ha, hb))
			a, b := setup(ha, 10), setup(hb, 1)
			ucPair(t, a, b)
			_, err := b.qp.PostRecv([]verbs.RecvWR{recvWR(1, b), recvWR(2, b)})
			require.NoError(t, err)
			second, third := sendWR(4, a, 500), sendWR(5, a, 200)
			_, err = a.qp.PostSend([]verbs.SendWR{sendWR(3, a, 3000), second, third}) // PSNs 10-12, 13, 14
			require.NoError(t, err)
			require.NoError(t, w.Run())
			assert.Equal(t, []string{"3:IBV_WC_SUCCESS", "4:IBV_WC_SUCCESS", "5:IBV_WC_SUCCESS"}, summary(pollAll(a.cq)), "UC completes on send")
			wcs := pollAll(b.cq)
			require.Equal(t, c.recv, summary(wcs))
			assert.Equal(t, c.bytes, wcs[0].ByteLen)
			assert.Equal(t, c.drops, strings.Count(tr.Text(), "message-drop"))
			l := ladder(tr)
			assert.Contains(t, l, "a UC_SEND_MIDDLE psn=11 DROPPED")
		})
	}
}

// TestUD: a datagram arrives with the 40-byte GRH area first, the
// source QP in the completion; a wrong Q_Key is dropped and counted.
func TestUD(t *testing.T) {
	tr := &sim.Trace{}
	w := verbs.NewWorld(verbs.WorldConfig{Seed: 1, Trace: tr})
	ha, hb := w.AddHost("a"), w.AddHost("b")
	require.NoError(t, w.Connect(ha, hb))
	a, b := setup(ha, 1), setup(hb, 1)
	for _, e := range []*endpoint{a, b} {
		var err error
		e.qp, err = e.pd.CreateQP(verbs.QPInitAttr{SendCQ: e.cq, RecvCQ: e.cq, Type: verbs.QPTypeUD,
			Cap: verbs.QPCap{MaxSendWR: 8, MaxRecvWR: 8, MaxSendSGE: 1, MaxRecvSGE: 1}})
		require.NoError(t, err)
		require.NoError(t, e.qp.Modify(&verbs.QPAttr{QPState: verbs.QPStateInit, PortNum: 1, QKey: 0x11111111},
			verbs.QPAttrState|verbs.QPAttrPKeyIndex|verbs.QPAttrPort|verbs.QPAttrQKey))
		require.NoError(t, e.qp.Modify(&verbs.QPAttr{QPState: verbs.QPStateRTR}, verbs.QPAttrState))
		require.NoError(t, e.qp.Modify(&verbs.QPAttr{QPState: verbs.QPStateRTS, SQPSN: 5}, verbs.QPAttrState|verbs.QPAttrSQPSN))
	}
	gid, _ := b.ctx.QueryGID(1, 1)
	ah, err := a.pd.CreateAH(verbs.AHAttr{IsGlobal: true, PortNum: 1, GRH: verbs.GRH{DGID: gid}})
	require.NoError(t, err)
	copy(a.buf, "datagram")
	_, err = b.qp.PostRecv([]verbs.RecvWR{recvWR(1, b)})
	require.NoError(t, err)
	_, err = a.qp.PostSend([]verbs.SendWR{
		{WRID: 2, Opcode: verbs.WRSend, Flags: verbs.SendSignaled, AH: ah, RemoteQPN: b.qp.QPNum, RemoteQKey: 0x11111111, SGList: []verbs.SGE{a.mr.SGE(0, 8)}},
		{WRID: 3, Opcode: verbs.WRSend, Flags: verbs.SendSignaled, AH: ah, RemoteQPN: b.qp.QPNum, RemoteQKey: 0x22, SGList: []verbs.SGE{a.mr.SGE(0, 8)}},
	})
	require.NoError(t, err)
	require.NoError(t, w.Run())
	assert.Equal(t, []string{"2:IBV_WC_SUCCESS", "3:IBV_WC_SUCCESS"}, summary(pollAll(a.cq)))
	wcs := pollAll(b.cq)
	require.Equal(t, []string{"1:IBV_WC_SUCCESS"}, summary(wcs))
	assert.Equal(t, uint32(40+8), wcs[0].ByteLen)
	assert.Equal(t, a.qp.QPNum, wcs[0].SrcQP)
	assert.Equal(t, verbs.WCFlagGRH, wcs[0].WCFlags&verbs.WCFlagGRH)
	assert.Equal(t, "datagram", string(b.buf[40:48]))
	assert.Equal(t, byte(0x45), b.buf[20], "an IPv4 header in the last 20 bytes of the GRH area")
	// The swarm found rdma_recvs missing for UD: rxe counts every
	// successful receive completion, whatever the QP type.
	recvs, _ := b.ctx.Counters().Get("rdma_recvs")
	assert.EqualValues(t, 1, recvs, "rdma_recvs")
	assert.Equal(t, []string{
		// UD completes a send once its packet is handed to the wire.
		"completion wr=2 IBV_WC_SUCCESS IBV_WC_SEND",
		"completion wr=3 IBV_WC_SUCCESS IBV_WC_SEND",
		"a UD_SEND_ONLY psn=5",
		"a UD_SEND_ONLY psn=6",
		// PSN 6 carries the wrong Q_Key: no receive is consumed.
		"completion wr=1 IBV_WC_SUCCESS IBV_WC_RECV byte_len=48",
	}, ladder(tr))
}

// TestGhostACKBeyondSentIgnored: an ACK rewritten to a PSN never sent is
// dropped, whatever the starting PSN (a regression: the highest-sent PSN
// started at 0, so with sq_psn >= 2^23 the guard let ghost ACKs through
// and a lost SEND completed without being delivered).
func TestGhostACKBeyondSentIgnored(t *testing.T) {
	for _, start := range []uint32{100, 0x900000} {
		plan := planOf(t, "drop class=request tx=1 nth=2\nrewrite set-psn=+5 class=ack first=1\n")
		w := verbs.NewWorld(verbs.WorldConfig{Seed: 1, Plan: plan})
		ha, hb := w.AddHost("a"), w.AddHost("b")
		require.NoError(t, w.Connect(ha, hb))
		a, b := setup(ha, start), setup(hb, 1)
		require.NoError(t, a.connect(b))
		require.NoError(t, b.connect(a))
		_, err := b.qp.PostRecv([]verbs.RecvWR{recvWR(1, b), recvWR(2, b)})
		require.NoError(t, err)
		_, err = a.qp.PostSend([]verbs.SendWR{sendWR(3, a, 8), sendWR(4, a, 8)})
		require.NoError(t, err)
		require.NoError(t, w.Run())
		assert.Equal(t, []string{"3:IBV_WC_SUCCESS", "4:IBV_WC_SUCCESS"}, summary(pollAll(a.cq)), "sq_psn %#x", start)
		assert.Equal(t, []string{"1:IBV_WC_SUCCESS", "2:IBV_WC_SUCCESS"}, summary(pollAll(b.cq)), "sq_psn %#x: both SENDs delivered", start)
	}
}
