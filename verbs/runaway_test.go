package verbs_test

import (
	"errors"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/rocesim/rocesim/sim"
	"github.com/rocesim/rocesim/verbs"
	"github.com/rocesim/rocesim/wire"
)

// TestRunawayRetransmitDiagnosis: every frame from a is lost and a's
// retry_cnt is 7, which rxe's profile retries forever. The run spends its
// event budget and says which QP keeps it going: it resends PSN 100 every
// ACK timeout (timeout 14: 16 jiffies, 64 ms), because of retry_cnt 7.
func TestRunawayRetransmitDiagnosis(t *testing.T) {
	w, a, _ := pair(t, verbs.WorldConfig{Seed: 1, Plan: planOf(t, "drop src=a\n"), MaxEvents: 2000})
	_, err := a.qp.PostSend([]verbs.SendWR{sendWR(1, a, 4096)}) // PSNs 100-103
	require.NoError(t, err)
	err = w.Run()
	var ra *verbs.RunawayError
	require.True(t, errors.As(err, &ra), "want a *verbs.RunawayError, got %v", err)
	assert.True(t, errors.Is(err, sim.ErrEventLimit))
	assert.Equal(t, uint64(2000), ra.Events)
	require.NotEmpty(t, ra.Stalls)
	s := ra.Stalls[0]
	assert.Equal(t, "a", s.Host)
	assert.Equal(t, a.qp.QPNum, s.QPN)
	assert.Equal(t, "b", s.Peer)
	assert.Equal(t, wire.PSN(100), s.PSN)
	assert.Equal(t, 64*sim.Millisecond, s.Interval)
	assert.Greater(t, s.Retransmits, uint64(100))
	assert.Contains(t, err.Error(), "retransmitted PSN 100 ")
	assert.Contains(t, err.Error(), "every 64ms: retry_cnt 7 retries forever under the rxe profile; set a deadline or a finite retry_cnt")
	assert.Contains(t, err.Error(), "the fault plan dropped")
}

// TestRunawayRNRDiagnosis: b never posts a receive, a's rnr_retry is 7
// (infinite under both profiles): the diagnosis counts b's RNR NAKs and
// names rnr_retry.
func TestRunawayRNRDiagnosis(t *testing.T) {
	for _, prof := range []verbs.Profile{verbs.ProfileRXE, verbs.ProfileSpec} {
		t.Run(prof.String(), func(t *testing.T) {
			w, a, _ := pair(t, verbs.WorldConfig{Seed: 1, Profile: prof, MaxEvents: 5000,
				QPName: func(host string, qpn uint32) string { return host + ".client" }})
			_, err := a.qp.PostSend([]verbs.SendWR{sendWR(1, a, 8)})
			require.NoError(t, err)
			err = w.Run()
			var ra *verbs.RunawayError
			require.True(t, errors.As(err, &ra), "want a *verbs.RunawayError, got %v", err)
			require.NotEmpty(t, ra.Stalls)
			s := ra.Stalls[0]
			assert.Equal(t, a.qp.QPNum, s.QPN)
			assert.Greater(t, s.RNRNAKs, uint64(100))
			assert.Contains(t, ra.Why(), "a.client was refused with ")
			assert.Contains(t, ra.Why(), "RNR NAKs by b")
			assert.Contains(t, ra.Why(), "rnr_retry 7 retries forever and b never has a receive posted for it")
		})
	}
}

// TestSettledRunHasNoStalls: a run that ends by itself has nothing to
// diagnose, and the budget is not touched.
func TestSettledRunHasNoStalls(t *testing.T) {
	w, a, b := pair(t, verbs.WorldConfig{Seed: 1, MaxEvents: 2000})
	_, err := b.qp.PostRecv([]verbs.RecvWR{recvWR(1, b)})
	require.NoError(t, err)
	_, err = a.qp.PostSend([]verbs.SendWR{sendWR(2, a, 4096)})
	require.NoError(t, err)
	require.NoError(t, w.Run())
	assert.Empty(t, w.Stalls())
}

// TestProgressEvery65536Events: WorldConfig.Progress is told the virtual
// time, events and frames every 65536 events of a run, deterministically
// (the driver, not the world, decides whether to print).
func TestProgressEvery65536Events(t *testing.T) {
	var got []verbs.Progress
	w, a, _ := pair(t, verbs.WorldConfig{Seed: 1, Plan: planOf(t, "drop src=a\n"), MaxEvents: 140_000,
		Progress: func(p verbs.Progress) { got = append(got, p) }})
	_, err := a.qp.PostSend([]verbs.SendWR{sendWR(1, a, 4096)})
	require.NoError(t, err)
	require.Error(t, w.Run())
	require.Len(t, got, 2)
	for i, p := range got {
		assert.Equal(t, uint64(65536*(i+1)), p.Events)
		assert.Greater(t, p.Frames, uint64(65536*(i+1)), "four frames a round, one event")
		if i > 0 {
			assert.Greater(t, p.Now, got[i-1].Now)
		}
	}
}
