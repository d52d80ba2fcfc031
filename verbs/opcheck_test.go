package verbs_test

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/rocesim/rocesim/faults"
	"github.com/rocesim/rocesim/verbs"
)

// TestReadRequestWithPayload: a WRITE_ONLY rewritten on the wire into a
// READ request (its RETH and payload kept, the ICRC recomputed) reaches
// the responder instead of being dropped by the decoder (issue 14 item
// 5). rxe answers it as a READ, and the requester, getting a READ
// response for its WRITE, fails it with FATAL_ERR (both seen on real rxe:
// conformance scenario read-request-with-payload); the spec profile NAKs
// it invalid request (a payload inconsistent with the opcode, IBTA vol. 1
// §9.9.3): REM_INV_REQ_ERR and both QPs in ERR.
func TestReadRequestWithPayload(t *testing.T) {
	for _, c := range []struct {
		prof       verbs.Profile
		want       string
		respState  verbs.QPState
		respWrites uint64 // b's sent_pkts: the READ response or the NAK
	}{
		{verbs.ProfileRXE, "1:IBV_WC_FATAL_ERR", verbs.QPStateRTS, 1},
		{verbs.ProfileSpec, "1:IBV_WC_REM_INV_REQ_ERR", verbs.QPStateErr, 1},
	} {
		t.Run(c.prof.String(), func(t *testing.T) {
			plan, err := faults.Parse("rewrite set-opcode=RC_RDMA_READ_REQUEST op=RC_RDMA_WRITE_ONLY first=1\n")
			require.NoError(t, err)
			w, a, b := pair(t, verbs.WorldConfig{Seed: 1, Plan: plan, Profile: c.prof})
			for i := range a.buf {
				a.buf[i] = 0xAA
			}
			_, err = a.qp.PostSend([]verbs.SendWR{{WRID: 1, Opcode: verbs.WRRDMAWrite, Flags: verbs.SendSignaled,
				RemoteAddr: b.mr.Addr, RKey: b.mr.RKey, SGList: []verbs.SGE{a.mr.SGE(0, 256)}}})
			require.NoError(t, err)
			require.NoError(t, w.Run())
			assert.Equal(t, []string{c.want}, summary(pollAll(a.cq)))
			assert.Equal(t, verbs.QPStateErr, a.qp.State())
			assert.Equal(t, c.respState, b.qp.State())
			sent, _ := b.ctx.Counters().Get("sent_pkts")
			assert.Equal(t, c.respWrites, sent)
			assert.Zero(t, b.buf[0], "the WRITE's data never landed")
		})
	}
}

// TestReservedOpcodeDropped: a SEND rewritten into reserved RC opcode
// 0x1f is dropped by the receiver without an answer and not counted as
// received, and the ACK timeout's retransmission delivers the SEND (as on
// real rxe: conformance scenario reserved-opcode).
func TestReservedOpcodeDropped(t *testing.T) {
	for _, prof := range []verbs.Profile{verbs.ProfileRXE, verbs.ProfileSpec} {
		t.Run(prof.String(), func(t *testing.T) {
			plan, err := faults.Parse("rewrite set-opcode=0x1f op=RC_SEND_ONLY first=1\n")
			require.NoError(t, err)
			w, a, b := pair(t, verbs.WorldConfig{Seed: 1, Plan: plan, Profile: prof})
			_, err = b.qp.PostRecv([]verbs.RecvWR{recvWR(2, b)})
			require.NoError(t, err)
			_, err = a.qp.PostSend([]verbs.SendWR{sendWR(1, a, 64)})
			require.NoError(t, err)
			require.NoError(t, w.Run())
			assert.Equal(t, []string{"1:IBV_WC_SUCCESS"}, summary(pollAll(a.cq)))
			assert.Equal(t, []string{"2:IBV_WC_SUCCESS"}, summary(pollAll(b.cq)))
			rcvd, _ := b.ctx.Counters().Get("rcvd_pkts")
			assert.Equal(t, uint64(1), rcvd, "only the retransmission was received")
			bSent, _ := b.ctx.Counters().Get("sent_pkts")
			assert.Equal(t, uint64(1), bSent, "one ACK, for the retransmission; no answer to the reserved opcode")
			aSent, _ := a.ctx.Counters().Get("sent_pkts")
			assert.Equal(t, uint64(2), aSent, "the SEND and its one retransmission")
		})
	}
}

// TestOverMaxDestRdAtomic: a requester allowed 4 READs in flight
// (max_rd_atomic=4) against a responder that takes 1
// (max_dest_rd_atomic=1). rxe answers all four (seen on real rxe:
// conformance scenario read-over-max-dest-rd-atomic). The spec profile
// NAKs the first READ that finds the responder's one resource still busy
// (its response not yet gone from the port) invalid request ("too many
// RDMA READ or ATOMIC requests", IBTA vol. 1 §9.9.3): the two READs
// answered before it succeed, it fails with REM_INV_REQ_ERR, the last is
// flushed, and both QPs are in ERR.
func TestOverMaxDestRdAtomic(t *testing.T) {
	for _, c := range []struct {
		prof  verbs.Profile
		want  []string
		state verbs.QPState
	}{
		{verbs.ProfileRXE, []string{"1:IBV_WC_SUCCESS", "2:IBV_WC_SUCCESS", "3:IBV_WC_SUCCESS", "4:IBV_WC_SUCCESS"}, verbs.QPStateRTS},
		{verbs.ProfileSpec, []string{"1:IBV_WC_SUCCESS", "2:IBV_WC_SUCCESS", "3:IBV_WC_REM_INV_REQ_ERR", "4:IBV_WC_WR_FLUSH_ERR"}, verbs.QPStateErr},
	} {
		t.Run(c.prof.String(), func(t *testing.T) {
			w, a, b := pairWith(t, verbs.WorldConfig{Seed: 1, Profile: c.prof}, func(a, b *endpoint) { a.rd, b.rd = 4, 1 })
			_, err := a.qp.PostSend(readWRs(a, b, 4, 256))
			require.NoError(t, err)
			require.NoError(t, w.Run())
			assert.Equal(t, c.want, summary(pollAll(a.cq)))
			assert.Equal(t, c.state, b.qp.State())
		})
	}
}

// TestWithinMaxDestRdAtomic: a requester that keeps to the limit (4 and
// 4) never trips the spec profile's check, with 8 READs queued.
func TestWithinMaxDestRdAtomic(t *testing.T) {
	w, a, b := pairWith(t, verbs.WorldConfig{Seed: 1, Profile: verbs.ProfileSpec}, func(a, b *endpoint) { a.rd, b.rd = 4, 4 })
	_, err := a.qp.PostSend(readWRs(a, b, 8, 512))
	require.NoError(t, err)
	require.NoError(t, w.Run())
	got := summary(pollAll(a.cq))
	require.Len(t, got, 8)
	for _, s := range got {
		assert.Contains(t, s, "IBV_WC_SUCCESS")
	}
	assert.Equal(t, verbs.QPStateRTS, b.qp.State())
}

// readWRs returns n signaled READs of size bytes each, wr_id 1..n, the
// i-th from b's buffer at i*size into a's at i*size.
func readWRs(a, b *endpoint, n, size uint64) []verbs.SendWR {
	var wrs []verbs.SendWR
	for i := range n {
		wrs = append(wrs, verbs.SendWR{WRID: i + 1, Opcode: verbs.WRRDMARead, Flags: verbs.SendSignaled,
			RemoteAddr: b.mr.Addr + i*size, RKey: b.mr.RKey, SGList: []verbs.SGE{a.mr.SGE(i*size, size)}})
	}
	return wrs
}
