package nic_test

import (
	"fmt"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/rocesim/rocesim/nic"
	"github.com/rocesim/rocesim/sim"
	"github.com/rocesim/rocesim/wire"
)

// respond feeds the rig's RC QP a response from its peer at now: an
// RC_ACKNOWLEDGE with syn for the send PSN rigSQPSN+psn.
func (r *rig) respond(t testing.TB, now sim.Time, psn uint32, syn wire.Syndrome) {
	f := wire.Frame{DstMAC: rigMAC, SrcMAC: rigPeerMAC, Src: rigPeerIP, Dst: rigIP, TTL: 64, SrcPort: 0xC000}
	f.BTH = wire.BTHFields{Opcode: wire.OpRCAcknowledge, PKey: 0xFFFF, DestQP: r.rc.Num(), PSN: wire.PSN(rigSQPSN).Add(psn)}
	f.AETH = wire.AETHFields{Syndrome: syn, MSN: 1}
	buf := make([]byte, 256)
	n, err := wire.Encode(buf, &f)
	require.NoError(t, err)
	r.dev.Receive(now, buf[:n])
}

// completions polls the rig's CQ: "wr_id:status" for each completion.
func (r *rig) completions() []string {
	var s []string
	wcs := make([]nic.WC, 16)
	for n := r.cq.Poll(wcs); n > 0; n = r.cq.Poll(wcs) {
		for _, wc := range wcs[:n] {
			s = append(s, fmt.Sprintf("%d:%s", wc.WRID, wc.Status))
		}
	}
	return s
}

// TestNAKSequenceSpendsRetry: a responder that answers every packet with
// a NAK PSN sequence error for the same PSN. Each go-back-N round started
// by a NAK spends one retry_cnt count; the NAKs that come while the round
// runs start none (rxe's COMPST_ERROR_RETRY and comp.started_retry, IBTA
// vol. 1 §9.7.5.1.4), the ACK timeout starts the next; after retry_cnt
// retries the SEND completes with RETRY_EXC_ERR and the QP goes to ERR.
// Before the fix the requester resent the PSN on every NAK and never
// completed.
func TestNAKSequenceSpendsRetry(t *testing.T) {
	for _, profile := range []nic.Profile{nic.ProfileRXE, nic.ProfileSpec} {
		t.Run(profile.String(), func(t *testing.T) {
			r := newRig(t, rigOptions{profile: profile, retryCnt: 3})
			sge := []nic.SGE{{Addr: r.rw.Addr, Length: 64, LKey: r.rw.LKey}}
			_, err := r.dev.PostSend(0, r.rc, []nic.SendWR{
				{WRID: 1, Opcode: nic.WRSend, Flags: nic.SendSignaled, SGList: sge},
				{WRID: 2, Opcode: nic.WRSend, Flags: nic.SendSignaled, SGList: sge},
			})
			require.NoError(t, err)
			assert.Len(t, r.responses(t), 2, "both SENDs go out")

			nakSeq := wire.NAKSyndrome(wire.NAKPSNSequenceError)
			now := sim.Time(1000)
			sent := 0
			for round := 0; round < 100 && r.rc.State() != nic.QPStateErr; round++ {
				// Every packet of the round is answered with the same NAK.
				for range max(1, sent) {
					r.respond(t, now, 0, nakSeq)
				}
				sent = len(r.responses(t))
				if sent == 0 {
					// The NAKs started nothing: the round runs until the ACK
					// timeout, which retries regardless.
					now = r.dev.NextDeadline()
					require.NotEqual(t, sim.Never, now, "nothing is retrying")
					r.dev.Advance(now)
					sent = len(r.responses(t))
				}
			}
			assert.Equal(t, nic.QPStateErr, r.rc.State())
			// The send queue's, then the receive queue's flushed receives.
			wcs := r.completions()
			require.GreaterOrEqual(t, len(wcs), 2)
			assert.Equal(t, []string{"1:" + nic.WCRetryExcErr.String(), "2:" + nic.WCWRFlushErr.String()}, wcs[:2])
			c := r.dev.Counters()
			assert.Equal(t, uint64(1), c[nic.CounterRetryExceededErr])
			assert.Equal(t, uint64(3), c[nic.CounterCompleterRetryErr], "three rounds: retry_cnt 3")
		})
	}
}
