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

// TestRunawayTwoStallsToSameQPN: two QPs resend their own PSN every ACK
// timeout (every frame from a and b is lost), toward destination QPs of
// one number; the diagnosis names both, each with its PSN and peer. In
// "one sender, two peers", a has a QP toward QP X on b and one toward QP
// X on c (b and c number their QPs alike): keyed by sender and
// destination QPN alone, as the watch once was, the two QPs' requests
// were one flow whose PSNs alternated, no PSN repeated round after round
// and no stall was found. In "two senders, one peer", a's and b's QPs
// both send to c's QP X: two flows of one destination QP.
func TestRunawayTwoStallsToSameQPN(t *testing.T) {
	for _, tc := range []struct {
		name    string
		senders [2]string // the hosts of the two stalled QPs
		peers   [2]string // the hosts of their destination QPs
	}{
		{"one sender, two peers", [2]string{"a", "a"}, [2]string{"b", "c"}},
		{"two senders, one peer", [2]string{"a", "b"}, [2]string{"c", "c"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			w := verbs.NewWorld(verbs.WorldConfig{Seed: 1, Plan: planOf(t, "drop src=a\ndrop src=b\n"), MaxEvents: 4000})
			hosts := map[string]*verbs.Host{}
			for _, n := range []string{"a", "b", "c"} {
				hosts[n] = w.AddHost(n)
			}
			require.NoError(t, w.ConnectSwitch())
			// Each peer host's first QP is the destination: every host
			// numbers its first QP alike, so both have number X.
			dest := map[string]*endpoint{}
			for _, n := range tc.peers {
				if dest[n] == nil {
					dest[n] = setup(hosts[n], 300)
				}
			}
			src := [2]*endpoint{setup(hosts[tc.senders[0]], 100), setup(hosts[tc.senders[1]], 500)}
			require.Equal(t, dest[tc.peers[0]].qp.QPNum, dest[tc.peers[1]].qp.QPNum, "the destination QPs must have one number")
			for i, e := range src {
				require.NoError(t, e.connect(dest[tc.peers[i]]))
				if i == 0 || tc.peers[1] != tc.peers[0] {
					require.NoError(t, dest[tc.peers[i]].connect(e))
				}
				_, err := e.qp.PostSend([]verbs.SendWR{sendWR(uint64(i), e, 8)})
				require.NoError(t, err)
			}
			var ra *verbs.RunawayError
			require.ErrorAs(t, w.Run(), &ra)
			require.Len(t, ra.Stalls, 2, ra.Why())
			for i, e := range src {
				var s *verbs.Stall
				for j := range ra.Stalls {
					if ra.Stalls[j].Host == tc.senders[i] && ra.Stalls[j].QPN == e.qp.QPNum {
						s = &ra.Stalls[j]
					}
				}
				require.NotNil(t, s, "no stall for %s QP 0x%x: %s", tc.senders[i], e.qp.QPNum, ra.Why())
				assert.Equal(t, tc.peers[i], s.Peer)
				assert.Equal(t, dest[tc.peers[i]].qp.QPNum, s.PeerQPN)
				assert.Equal(t, e.qp.QPNum, s.QPN)
				assert.Equal(t, wire.PSN(100+400*i), s.PSN)
				assert.Equal(t, 64*sim.Millisecond, s.Interval)
				assert.Greater(t, s.Retransmits, uint64(10))
			}
		})
	}
}
