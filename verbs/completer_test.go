package verbs_test

import (
	"bytes"
	"encoding/binary"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/rocesim/rocesim/nic"
	"github.com/rocesim/rocesim/sim"
	"github.com/rocesim/rocesim/sim/fabric"
	"github.com/rocesim/rocesim/verbs"
)

// runBounded runs w until nothing is left to happen, failing the test if
// the requester sends more than maxSent packets: a retry loop the old
// code fell into must end the test, not eat the machine.
func runBounded(t *testing.T, w *verbs.World, a *endpoint, maxSent uint64) {
	t.Helper()
	sent := func() uint64 { n, _ := a.ctx.Counters().Get("sent_pkts"); return n }
	held, err := w.RunUntil(func() bool { return sent() > maxSent })
	require.NoError(t, err)
	require.False(t, held, "the requester sent more than %d packets: a retry loop", maxSent)
}

// counter returns the named counter of e's device.
func counter(e *endpoint, name string) uint64 {
	n, _ := e.ctx.Counters().Get(name)
	return n
}

// TestNAKSequenceRetryExceeded: every ACK of b turned into a NAK PSN
// sequence error. Each go-back-N round a NAK starts spends a retry_cnt
// count, the NAKs during a round start none, and with none left the SEND
// completes with RETRY_EXC_ERR, the QP goes to ERR and the rest is
// flushed (rxe's COMPST_ERROR_RETRY; IBTA vol. 1 §9.7.5.1.4). The old code
// resent the PSN on every NAK, spent nothing and never completed.
func TestNAKSequenceRetryExceeded(t *testing.T) {
	for _, profile := range []nic.Profile{nic.ProfileRXE, nic.ProfileSpec} {
		t.Run(profile.String(), func(t *testing.T) {
			cfg := verbs.WorldConfig{Seed: 1, Profile: profile, Plan: planOf(t, "rewrite set-syndrome=nak-seq class=ack src=b\n")}
			w, a, b := pairWith(t, cfg, func(a, _ *endpoint) { a.retry = 3 })
			for i := range uint64(3) {
				_, err := b.qp.PostRecv([]verbs.RecvWR{recvWR(10+i, b)})
				require.NoError(t, err)
			}
			// One WQE per PSN, all NAKed at its own PSN: the first is
			// never acknowledged.
			_, err := a.qp.PostSend([]verbs.SendWR{sendWR(1, a, 64), sendWR(2, a, 64)})
			require.NoError(t, err)
			runBounded(t, w, a, 100)
			assert.Equal(t, []string{"1:IBV_WC_SUCCESS", "2:IBV_WC_RETRY_EXC_ERR"}, summary(pollAll(a.cq)),
				"the NAK for the second PSN acknowledges the first")
			assert.Equal(t, verbs.QPStateErr, a.qp.State())
			assert.Equal(t, uint64(1), counter(a, "retry_exceeded_err"))
			// rxe on the harness (conformance scenario nak-seq-retry-exceeded):
			// 7 SENDs, two of them at the ACK timeouts.
			assert.Equal(t, uint64(7), counter(a, "sent_pkts"))
		})
	}
}

// TestReadsInFlightOneRetryPerLoss: five 4 KiB READs in flight, the first
// one's first middle response lost. The later READs' responses are
// implied NAKs for the first; the first starts one retry, the others are
// ignored while it runs: 10 READ requests and 39 responses, as real rxe
// sends (conformance scenario read-multi-middle-loss). The old code
// started a round after each placed response: 56 and 200.
func TestReadsInFlightOneRetryPerLoss(t *testing.T) {
	cfg := verbs.WorldConfig{Seed: 1, Plan: planOf(t, "drop op=RC_RDMA_READ_RESPONSE_MIDDLE first=1\n")}
	w, a, b := pairWith(t, cfg, func(a, b *endpoint) { a.rd, b.rd = 8, 8 })
	const n, size = 5, 4096
	local, remote := make([]byte, n*size), make([]byte, n*size)
	for i := range remote {
		remote[i] = byte(i*7 + i>>8)
	}
	lmr, err := a.pd.RegMR(local, verbs.AccessLocalWrite)
	require.NoError(t, err)
	rmr, err := b.pd.RegMR(remote, verbs.AccessLocalWrite|verbs.AccessRemoteRead)
	require.NoError(t, err)
	var wrs []verbs.SendWR
	for i := range uint64(n) {
		wrs = append(wrs, verbs.SendWR{WRID: i + 1, Opcode: verbs.WRRDMARead, Flags: verbs.SendSignaled,
			SGList: []verbs.SGE{lmr.SGE(i*size, size)}, RemoteAddr: rmr.Addr + i*size, RKey: rmr.RKey})
	}
	_, err = a.qp.PostSend(wrs)
	require.NoError(t, err)
	runBounded(t, w, a, 100)
	assert.Equal(t, []string{"1:IBV_WC_SUCCESS", "2:IBV_WC_SUCCESS", "3:IBV_WC_SUCCESS", "4:IBV_WC_SUCCESS", "5:IBV_WC_SUCCESS"},
		summary(pollAll(a.cq)))
	assert.True(t, bytes.Equal(local, remote))
	assert.Equal(t, uint64(10), counter(a, "sent_pkts"), "READ requests")
	assert.Equal(t, uint64(39), counter(b, "sent_pkts"), "READ responses")
	assert.Equal(t, uint64(1), counter(a, "completer_retry_err"))
}

// TestAtomicsInFlightOneRetryPerLoss: five FETCH_AND_ADDs in flight, the
// first ATOMIC ACKNOWLEDGE lost: one retry, 10 FETCH_ADDs on the wire as
// real rxe sends (conformance scenario atomic-multi-ack-loss; the old
// code sent 19), each executed once.
func TestAtomicsInFlightOneRetryPerLoss(t *testing.T) {
	cfg := verbs.WorldConfig{Seed: 1, Plan: planOf(t, "drop op=RC_ATOMIC_ACKNOWLEDGE first=1\n")}
	w, a, b := pairWith(t, cfg, func(a, b *endpoint) { a.rd, b.rd = 8, 8 })
	ctr := make([]byte, 8)
	binary.LittleEndian.PutUint64(ctr, 100)
	cmr, err := b.pd.RegMR(ctr, verbs.AccessLocalWrite|verbs.AccessRemoteAtomic)
	require.NoError(t, err)
	var wrs []verbs.SendWR
	for i := range uint64(5) {
		wrs = append(wrs, verbs.SendWR{WRID: i + 1, Opcode: verbs.WRAtomicFetchAndAdd, Flags: verbs.SendSignaled,
			SGList: []verbs.SGE{a.mr.SGE(i*8, 8)}, RemoteAddr: cmr.Addr, RKey: cmr.RKey, CompareAdd: 1})
	}
	_, err = a.qp.PostSend(wrs)
	require.NoError(t, err)
	runBounded(t, w, a, 100)
	assert.Len(t, summary(pollAll(a.cq)), 5)
	for i := range 5 {
		assert.Equal(t, uint64(100+i), binary.LittleEndian.Uint64(a.buf[i*8:]), "FETCH_ADD %d's original value", i+1)
	}
	assert.Equal(t, uint64(105), binary.LittleEndian.Uint64(ctr))
	assert.Equal(t, uint64(10), counter(a, "sent_pkts"), "FETCH_ADDs")
}

// TestGhostResponseImpliedNAK: a READ whose only response arrives with a
// PSN past the READ (rewritten by the plan: never sent). Under the rxe
// profile that is an implied NAK (rxe's check_psn: a response past a
// pending READ goes to COMPST_ERROR_RETRY) and the READ is asked again
// at once; the spec profile drops it and waits for the ACK timeout
// (timeout 14: 67.1 ms under the spec profile).
func TestGhostResponseImpliedNAK(t *testing.T) {
	for _, c := range []struct {
		profile nic.Profile
		early   bool
	}{{nic.ProfileRXE, true}, {nic.ProfileSpec, false}} {
		t.Run(c.profile.String(), func(t *testing.T) {
			cfg := verbs.WorldConfig{Seed: 1, Profile: c.profile,
				Plan: planOf(t, "rewrite set-psn=+5 op=RC_RDMA_READ_RESPONSE_ONLY first=1\n")}
			w, a, b := pair(t, cfg)
			copy(b.buf, "remote data")
			_, err := a.qp.PostSend([]verbs.SendWR{{WRID: 1, Opcode: verbs.WRRDMARead, Flags: verbs.SendSignaled,
				SGList: []verbs.SGE{a.mr.SGE(0, 64)}, RemoteAddr: b.mr.Addr, RKey: b.mr.RKey}})
			require.NoError(t, err)
			done, err := w.RunUntil(func() bool { return a.cq.Poll(make([]verbs.WC, 1)) == 1 })
			require.NoError(t, err)
			require.True(t, done)
			assert.Equal(t, "remote data", string(a.buf[:11]))
			assert.Equal(t, uint64(2), counter(a, "sent_pkts"), "the READ and one retry")
			if c.early {
				assert.Less(t, w.Now(), sim.Time(sim.Millisecond), "retried at once, not at the ACK timeout")
			} else {
				assert.Greater(t, w.Now(), sim.Time(67*sim.Millisecond), "retried at the ACK timeout")
			}
		})
	}
}

// TestRetransmitTimerAfterIdleGap: a SEND acknowledged at once, then,
// after an idle gap shorter than the timeout, a SEND lost once. rxe's
// retransmit timer, armed by the first SEND and never stopped, fires one
// timeout after that SEND (measured on real rxe: conformance scenario
// timer-idle-gap, conformance/README.md); the spec profile arms a full
// timeout when the lost SEND goes out. The old code did the latter under
// both.
func TestRetransmitTimerAfterIdleGap(t *testing.T) {
	const gap = 20 * sim.Millisecond
	for _, c := range []struct {
		profile nic.Profile
		retry   sim.Time // when the lost SEND is sent again
	}{
		// The endpoints' timeout 14: 16 jiffies (64 ms) under rxe,
		// 4.096 µs × 2^14 under the spec.
		{nic.ProfileRXE, sim.Time(64 * sim.Millisecond)},
		{nic.ProfileSpec, sim.Time(gap).Add(67_108_864)},
	} {
		t.Run(c.profile.String(), func(t *testing.T) {
			var sends []sim.Time
			cfg := verbs.WorldConfig{Seed: 1, Profile: c.profile, Plan: planOf(t, "drop op=RC_SEND_ONLY tx=1 nth=2 first=1\n"),
				Observe: func(f *fabric.FrameRecord) {
					if f.From == "a" && f.First { // a sends nothing but the SENDs
						sends = append(sends, f.Time)
					}
				}}
			w, a, b := pair(t, cfg)
			for i := range uint64(2) {
				_, err := b.qp.PostRecv([]verbs.RecvWR{recvWR(10+i, b)})
				require.NoError(t, err)
			}
			_, err := a.qp.PostSend([]verbs.SendWR{sendWR(1, a, 64)})
			require.NoError(t, err)
			require.NoError(t, w.RunFor(gap))
			_, err = a.qp.PostSend([]verbs.SendWR{sendWR(2, a, 64)})
			require.NoError(t, err)
			runBounded(t, w, a, 10)
			assert.Equal(t, []string{"1:IBV_WC_SUCCESS", "2:IBV_WC_SUCCESS"}, summary(pollAll(a.cq)))
			require.Len(t, sends, 3, "two SENDs and one retry")
			assert.Equal(t, c.retry, sends[2])
		})
	}
}
