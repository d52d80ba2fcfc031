package verbs_test

import (
	"bytes"
	"fmt"
	"slices"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/rocesim/rocesim/faults"
	"github.com/rocesim/rocesim/sim"
	"github.com/rocesim/rocesim/verbs"
)

// ladder renders the frames put on the wire (and the ones dropped) and
// the completions of a trace, one line each, for exact comparison:
//
//	a RC_SEND_FIRST psn=100
//	a RC_SEND_MIDDLE psn=101 DROPPED
//	b RC_ACKNOWLEDGE psn=101 NAK(PSN sequence error) msn=0
//	completion wr=1 IBV_WC_SUCCESS IBV_WC_RECV byte_len=4096
//	completion wr=2 IBV_WC_SUCCESS IBV_WC_SEND
//	completion wr=3 IBV_WC_WR_FLUSH_ERR
//
// A frame line is the sending node, the opcode, the PSN, "ack" when
// AckReq is set, and the AETH syndrome and MSN when there is an AETH.
// Lines follow the trace: a frame is listed when it starts onto the wire,
// a dropped one when the fault plan drops it as it joins the link's
// queue (so a drop can come before frames queued ahead of it), and a
// completion when the NIC posts it (so a UC or UD send completes before
// its frame is listed).
//
// A completion line shows only the fields libibverbs defines for it
// (ibv_poll_cq(3)): for an error, wr_id and status alone (opcode and
// byte_len are undefined); for a success, also the opcode, byte_len where
// it is defined (receives, RDMA READ, atomics; not a SEND or WRITE at the
// requester, where rxe reports the message length and rocesim 0) and the
// immediate data when IBV_WC_WITH_IMM is set. Every host's device is rxe0
// and QPNs repeat across hosts, so a completion line names no node: the
// opcode and the wr_id tell the sides apart.
func ladder(tr *sim.Trace) []string {
	var out []string
	for _, e := range tr.Events() {
		switch e.Kind {
		case "frame-tx", "frame-drop":
			op, _ := e.Get("op")
			psn, _ := e.Get("psn")
			s := fmt.Sprintf("%s %s psn=%s", e.Node, op, psn)
			if _, ok := e.Get("ackreq"); ok {
				s += " ack"
			}
			if aeth, ok := e.Get("aeth"); ok {
				msn, _ := e.Get("msn")
				s += " " + aeth + " msn=" + msn
			}
			if e.Kind == "frame-drop" {
				s += " DROPPED"
			}
			out = append(out, s)
		case "completion":
			out = append(out, completionLine(&e))
		}
	}
	return out
}

// completionLine renders a completion event for ladder.
func completionLine(e *sim.Event) string {
	wr, _ := e.Get("wr_id")
	st, _ := e.Get("status")
	s := "completion wr=" + wr + " " + st
	if st != "IBV_WC_SUCCESS" {
		return s
	}
	op, _ := e.Get("opcode")
	s += " " + op
	switch op {
	case "IBV_WC_RECV", "IBV_WC_RECV_RDMA_WITH_IMM", "IBV_WC_RDMA_READ", "IBV_WC_COMP_SWAP", "IBV_WC_FETCH_ADD":
		n, _ := e.Get("byte_len")
		s += " byte_len=" + n
	}
	if imm, ok := e.Get("imm"); ok {
		s += " imm=" + imm
	}
	return s
}

// TestGoBackNLadder: a lost middle packet draws one NAK (PSN sequence
// error, carrying the expected PSN), and go-back-N resends from it.
func TestGoBackNLadder(t *testing.T) {
	// The ladder of the seed material: a 4-packet SEND with PSNs
	// 100..103, PSN 101 lost on its first transmission.
	plan, err := faults.Parse("drop psn=101 tx=1 src=a\n")
	require.NoError(t, err)
	tr := &sim.Trace{}
	w, a, b := pair(t, verbs.WorldConfig{Seed: 1, Plan: plan, Trace: tr})
	for i := range 4096 {
		a.buf[i] = byte(i*7 + 3)
	}
	_, err = b.qp.PostRecv([]verbs.RecvWR{recvWR(1, b)})
	require.NoError(t, err)
	_, err = a.qp.PostSend([]verbs.SendWR{sendWR(2, a, 4096)})
	require.NoError(t, err)
	require.NoError(t, w.Run())

	assert.Equal(t, []string{
		"a RC_SEND_FIRST psn=100",
		"a RC_SEND_MIDDLE psn=101 DROPPED",
		"a RC_SEND_MIDDLE psn=102",
		"a RC_SEND_LAST psn=103 ack",
		"b RC_ACKNOWLEDGE psn=101 NAK(PSN sequence error) msn=0",
		"a RC_SEND_MIDDLE psn=101",
		"a RC_SEND_MIDDLE psn=102",
		"a RC_SEND_LAST psn=103 ack",
		"completion wr=1 IBV_WC_SUCCESS IBV_WC_RECV byte_len=4096",
		"b RC_ACKNOWLEDGE psn=103 ACK msn=1",
		"completion wr=2 IBV_WC_SUCCESS IBV_WC_SEND",
	}, ladder(tr))
	wcs := pollAll(b.cq)
	require.Len(t, wcs, 1)
	assert.Equal(t, uint32(4096), wcs[0].ByteLen)
	assert.True(t, bytes.Equal(a.buf[:4096], b.buf[:4096]), "the receiver's buffer holds the exact bytes")
}

// TestAckTimeoutRecoversLastPacket: the last packet of a message is lost,
// so no NAK can come; the ACK timeout retransmits it one timeout after the
// original transmission: under the spec profile exactly 4.096 µs ×
// 2^timeout, under rxe's that converted to whole jiffies (rxe_qp.c
// rxe_qp_from_attr: timeout 14 is 16 jiffies of 4 ms at HZ=250, 64 ms;
// real rxe resent 59.6 ms after the loss, conformance/README.md). The old
// code waited 67.108864 ms under both.
func TestAckTimeoutRecoversLastPacket(t *testing.T) {
	for _, c := range []struct {
		profile verbs.Profile
		timeout sim.Duration
	}{
		{verbs.ProfileRXE, 64 * sim.Millisecond},
		{verbs.ProfileSpec, 67_108_864 * sim.Nanosecond}, // 4.096 µs × 2^14
	} {
		t.Run(c.profile.String(), func(t *testing.T) {
			plan, err := faults.Parse("drop psn=101 tx=1 src=a\n")
			require.NoError(t, err)
			tr := &sim.Trace{}
			w, a, b := pair(t, verbs.WorldConfig{Seed: 1, Plan: plan, Trace: tr, Profile: c.profile})
			_, err = b.qp.PostRecv([]verbs.RecvWR{recvWR(1, b)})
			require.NoError(t, err)
			_, err = a.qp.PostSend([]verbs.SendWR{sendWR(2, a, 2048)}) // PSNs 100, 101
			require.NoError(t, err)
			require.NoError(t, w.Run())
			// The timer runs from the transmission of the message; on expiry
			// go-back-N resends from the oldest unacknowledged PSN, 100 (it asked
			// for no ACK), then 101. Under rxe's profile the responder
			// re-acknowledges the duplicate 100 all the same
			// (duplicate_request).
			var sent []sim.Time
			for _, e := range tr.Events() {
				if psn, _ := e.Get("psn"); e.Kind == "frame-tx" && e.Node == "a" && psn == "100" {
					sent = append(sent, e.Time)
				}
			}
			require.Len(t, sent, 2)
			assert.Equal(t, c.timeout, sent[1].Sub(sent[0]))
			want := []string{
				"a RC_SEND_FIRST psn=100",
				"a RC_SEND_LAST psn=101 ack DROPPED",
				"a RC_SEND_FIRST psn=100",
				"a RC_SEND_LAST psn=101 ack",
				"b RC_ACKNOWLEDGE psn=100 ACK msn=0",
				"completion wr=1 IBV_WC_SUCCESS IBV_WC_RECV byte_len=2048",
				"b RC_ACKNOWLEDGE psn=101 ACK msn=1",
				"completion wr=2 IBV_WC_SUCCESS IBV_WC_SEND",
			}
			if c.profile == verbs.ProfileSpec { // re-ACKs only a duplicate with AckReq set
				want = slices.Delete(want, 4, 5)
			}
			assert.Equal(t, want, ladder(tr))
			assert.Equal(t, []string{"2:IBV_WC_SUCCESS"}, summary(pollAll(a.cq)))
			assert.Equal(t, []string{"1:IBV_WC_SUCCESS"}, summary(pollAll(b.cq)))
		})
	}
}

// TestRetryExceededThroughDuplicateACKs: the middle packet of a message
// never arrives, and every retransmission of the packets before it draws
// a re-ACK of a duplicate (rxe acknowledges every duplicate). Those ACKs
// carry nothing new, so they must not restore the retry budget: the
// requester resends from the first PSN not acknowledged and gives up
// after retry_cnt timeouts instead of retrying forever.
func TestRetryExceededThroughDuplicateACKs(t *testing.T) {
	tr := &sim.Trace{}
	plan := planOf(t, "drop src=a psn=101\n") // every transmission of the 2nd packet
	w, a, b := pairWith(t, verbs.WorldConfig{Seed: 1, Plan: plan, Trace: tr}, func(a, _ *endpoint) { a.retry = 2 })
	_, err := b.qp.PostRecv([]verbs.RecvWR{recvWR(1, b)})
	require.NoError(t, err)
	_, err = a.qp.PostSend([]verbs.SendWR{sendWR(2, a, 4096)}) // PSNs 100-103
	require.NoError(t, err)
	w.Scheduler().SetEventLimit(100_000)
	require.NoError(t, w.Run())
	assert.Equal(t, []string{"2:IBV_WC_RETRY_EXC_ERR"}, summary(pollAll(a.cq)))
	// The NAK of PSN 101 acknowledged PSN 100: no retransmission of it.
	var resent100 int
	for _, e := range tr.Events() {
		if psn, _ := e.Get("psn"); e.Kind == "frame-tx" && e.Node == "a" && psn == "100" {
			resent100++
		}
	}
	assert.Equal(t, 1, resent100, "PSN 100 is sent once")
}

// TestRetryExceeded: the link is cut (every frame from a lost). With
// timeout 14 the requester retransmits exactly retry_cnt times — 7 under
// the IBTA profile, 6 under rxe's (where 7 would mean forever) — then the
// WR fails with RETRY_EXC_ERR, the QP goes to ERR and later WRs flush.
// Each retry is go-back-N from the oldest unacknowledged PSN, 100, so all
// three SENDs go again; the full ladder is checked under rxe's profile.
func TestRetryExceeded(t *testing.T) {
	for _, c := range []struct {
		prof    verbs.Profile
		retry   uint8
		timeout sim.Duration // timeout 14 under the profile
	}{{verbs.ProfileSpec, 7, 67_108_864}, {verbs.ProfileRXE, 6, 64 * sim.Millisecond}} {
		t.Run(c.prof.String(), func(t *testing.T) {
			tr := &sim.Trace{}
			w, a, _ := pairWith(t, verbs.WorldConfig{Seed: 1, Plan: planOf(t, "drop src=a\n"), Trace: tr, Profile: c.prof},
				func(a, _ *endpoint) { a.retry = c.retry })
			for i := range uint64(3) {
				_, err := a.qp.PostSend([]verbs.SendWR{sendWR(i+1, a, 64)})
				require.NoError(t, err)
			}
			require.NoError(t, w.Run())
			tx := 0
			for _, e := range tr.Events() {
				if psn, _ := e.Get("psn"); e.Kind == "frame-drop" && psn == "100" {
					tx++
				}
			}
			assert.Equal(t, 1+int(c.retry), tx, "the original and retry_cnt retransmissions")
			assert.Equal(t, []string{"1:IBV_WC_RETRY_EXC_ERR", "2:IBV_WC_WR_FLUSH_ERR", "3:IBV_WC_WR_FLUSH_ERR"}, summary(pollAll(a.cq)))
			assert.Equal(t, verbs.QPStateErr, a.qp.State())
			// (retry_cnt+1) timeouts of virtual time.
			assert.Equal(t, sim.Time(0).Add(sim.Duration(c.retry+1)*c.timeout), w.Now())
			n, _ := a.ctx.Counters().Get("retry_exceeded_err")
			assert.Equal(t, uint64(1), n)
			if c.prof != verbs.ProfileRXE {
				return
			}
			assert.Equal(t, []string{
				// The original transmission, then retries 1 to 6.
				"a RC_SEND_ONLY psn=100 ack DROPPED",
				"a RC_SEND_ONLY psn=101 ack DROPPED",
				"a RC_SEND_ONLY psn=102 ack DROPPED",
				"a RC_SEND_ONLY psn=100 ack DROPPED",
				"a RC_SEND_ONLY psn=101 ack DROPPED",
				"a RC_SEND_ONLY psn=102 ack DROPPED",
				"a RC_SEND_ONLY psn=100 ack DROPPED",
				"a RC_SEND_ONLY psn=101 ack DROPPED",
				"a RC_SEND_ONLY psn=102 ack DROPPED",
				"a RC_SEND_ONLY psn=100 ack DROPPED",
				"a RC_SEND_ONLY psn=101 ack DROPPED",
				"a RC_SEND_ONLY psn=102 ack DROPPED",
				"a RC_SEND_ONLY psn=100 ack DROPPED",
				"a RC_SEND_ONLY psn=101 ack DROPPED",
				"a RC_SEND_ONLY psn=102 ack DROPPED",
				"a RC_SEND_ONLY psn=100 ack DROPPED",
				"a RC_SEND_ONLY psn=101 ack DROPPED",
				"a RC_SEND_ONLY psn=102 ack DROPPED",
				"a RC_SEND_ONLY psn=100 ack DROPPED",
				"a RC_SEND_ONLY psn=101 ack DROPPED",
				"a RC_SEND_ONLY psn=102 ack DROPPED",
				// The 7th timeout finds no retry left.
				"completion wr=1 IBV_WC_RETRY_EXC_ERR",
				"completion wr=2 IBV_WC_WR_FLUSH_ERR",
				"completion wr=3 IBV_WC_WR_FLUSH_ERR",
			}, ladder(tr))
		})
	}
}

// TestRNRWait: the receiver posts its receive 1 ms after the SEND
// arrives; with min_rnr_timer 14 (1.28 ms) there is exactly one RNR NAK,
// one retry 1.28 ms later, and success. (The RNR NAK comes alone: the
// sequence error NAK after it in captures/rnr_send.pcap is provoked by the
// next SEND already in flight.)
func TestRNRWait(t *testing.T) {
	tr := &sim.Trace{}
	w, a, b := pair(t, verbs.WorldConfig{Seed: 1, Trace: tr})
	require.NoError(t, b.qp.Modify(&verbs.QPAttr{MinRNRTimer: 14}, verbs.QPAttrMinRNRTimer))
	_, err := a.qp.PostSend([]verbs.SendWR{sendWR(1, a, 64)})
	require.NoError(t, err)
	require.NoError(t, w.RunFor(sim.Millisecond))
	_, err = b.qp.PostRecv([]verbs.RecvWR{recvWR(2, b)})
	require.NoError(t, err)
	require.NoError(t, w.Run())
	assert.Equal(t, []string{
		"a RC_SEND_ONLY psn=100 ack",
		"b RC_ACKNOWLEDGE psn=100 RNR-NAK(timer=14: 1.28 ms) msn=0",
		"a RC_SEND_ONLY psn=100 ack",
		"completion wr=2 IBV_WC_SUCCESS IBV_WC_RECV byte_len=64",
		"b RC_ACKNOWLEDGE psn=100 ACK msn=1",
		"completion wr=1 IBV_WC_SUCCESS IBV_WC_SEND",
	}, ladder(tr))
	sent := pollAll(a.cq)
	assert.Equal(t, []string{"1:IBV_WC_SUCCESS"}, summary(sent))
	got := pollAll(b.cq)
	require.Equal(t, []string{"2:IBV_WC_SUCCESS"}, summary(got))
	assert.Equal(t, verbs.WCSend, sent[0].Opcode)
	assert.Equal(t, verbs.WCRecv, got[0].Opcode)
	assert.Equal(t, uint32(64), got[0].ByteLen)
	var rnr, retry []sim.Time
	for _, e := range tr.Events() {
		if aeth, _ := e.Get("aeth"); e.Kind == "frame-rx" && strings.HasPrefix(aeth, "RNR-NAK") {
			rnr = append(rnr, e.Time)
		}
		if op, _ := e.Get("op"); e.Kind == "frame-tx" && e.Node == "a" && op == "RC_SEND_ONLY" {
			retry = append(retry, e.Time)
		}
	}
	require.Len(t, rnr, 1, "exactly one RNR NAK")
	require.Len(t, retry, 2, "the original and one retry")
	assert.Equal(t, sim.Duration(1280*sim.Microsecond), retry[1].Sub(rnr[0]), "the retry waits the coded RNR time")
	n, _ := b.ctx.Counters().Get("send_rnr_err")
	assert.Equal(t, uint64(1), n)
}

// TestRNRRetryExceeded: rnr_retry 0 and no receive ever posted: the
// first RNR NAK fails the SEND with RNR_RETRY_EXC_ERR, the QP goes to ERR
// and the second SEND is flushed. PSN 2 reaches the responder while it
// still expects 1, so a PSN sequence error NAK for 1 follows the RNR NAK
// (one per gap; the requester is in ERR by the time it arrives).
func TestRNRRetryExceeded(t *testing.T) {
	tr := &sim.Trace{}
	w := verbs.NewWorld(verbs.WorldConfig{Seed: 1, Trace: tr})
	ha, hb := w.AddHost("a"), w.AddHost("b")
	require.NoError(t, w.Connect(ha, hb))
	a, b := setup(ha, 1), setup(hb, 1)
	require.NoError(t, a.connect(b))
	require.NoError(t, b.connect(a))
	require.NoError(t, a.qp.Modify(&verbs.QPAttr{QPState: verbs.QPStateSQD}, verbs.QPAttrState))
	require.NoError(t, a.qp.Modify(&verbs.QPAttr{QPState: verbs.QPStateSQD, RNRRetry: 0}, verbs.QPAttrState|verbs.QPAttrRNRRetry))
	require.NoError(t, a.qp.Modify(&verbs.QPAttr{QPState: verbs.QPStateRTS}, verbs.QPAttrState))
	_, err := a.qp.PostSend([]verbs.SendWR{sendWR(1, a, 64), sendWR(2, a, 64)})
	require.NoError(t, err)
	require.NoError(t, w.Run())
	assert.Equal(t, []string{"1:IBV_WC_RNR_RETRY_EXC_ERR", "2:IBV_WC_WR_FLUSH_ERR"}, summary(pollAll(a.cq)))
	assert.Equal(t, []string{
		"a RC_SEND_ONLY psn=1 ack",
		"a RC_SEND_ONLY psn=2 ack",
		"b RC_ACKNOWLEDGE psn=1 RNR-NAK(timer=12: 0.64 ms) msn=0",
		"b RC_ACKNOWLEDGE psn=1 NAK(PSN sequence error) msn=0",
		"completion wr=1 IBV_WC_RNR_RETRY_EXC_ERR",
		"completion wr=2 IBV_WC_WR_FLUSH_ERR",
	}, ladder(tr))
}

// TestRNRRetryCountsDown: rnr_retry 2 and no receive: the original and
// exactly two retries get RNR NAKs, then RNR_RETRY_EXC_ERR (an RNR NAK
// does not reset the count).
func TestRNRRetryCountsDown(t *testing.T) {
	tr := &sim.Trace{}
	w, a, b := pair(t, verbs.WorldConfig{Seed: 1, Trace: tr})
	require.NoError(t, a.qp.Modify(&verbs.QPAttr{QPState: verbs.QPStateSQD}, verbs.QPAttrState))
	require.NoError(t, a.qp.Modify(&verbs.QPAttr{QPState: verbs.QPStateSQD, RNRRetry: 2}, verbs.QPAttrState|verbs.QPAttrRNRRetry))
	require.NoError(t, a.qp.Modify(&verbs.QPAttr{QPState: verbs.QPStateRTS}, verbs.QPAttrState))
	_, err := a.qp.PostSend([]verbs.SendWR{sendWR(1, a, 64)})
	require.NoError(t, err)
	require.NoError(t, w.Run())
	assert.Equal(t, []string{
		"a RC_SEND_ONLY psn=100 ack",
		"b RC_ACKNOWLEDGE psn=100 RNR-NAK(timer=12: 0.64 ms) msn=0",
		"a RC_SEND_ONLY psn=100 ack",
		"b RC_ACKNOWLEDGE psn=100 RNR-NAK(timer=12: 0.64 ms) msn=0",
		"a RC_SEND_ONLY psn=100 ack",
		"b RC_ACKNOWLEDGE psn=100 RNR-NAK(timer=12: 0.64 ms) msn=0",
		"completion wr=1 IBV_WC_RNR_RETRY_EXC_ERR",
	}, ladder(tr))
	assert.Equal(t, []string{"1:IBV_WC_RNR_RETRY_EXC_ERR"}, summary(pollAll(a.cq)))
	n := 0
	for _, e := range tr.Events() {
		if op, _ := e.Get("op"); e.Kind == "frame-tx" && e.Node == "a" && op == "RC_SEND_ONLY" {
			n++
		}
	}
	assert.Equal(t, 3, n)
	rnr, _ := b.ctx.Counters().Get("send_rnr_err")
	assert.Equal(t, uint64(3), rnr, "one RNR NAK for each of the three")
}
