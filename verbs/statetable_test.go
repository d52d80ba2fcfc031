package verbs_test

import (
	"errors"
	"syscall"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/rocesim/rocesim/sim"
	"github.com/rocesim/rocesim/verbs"
)

// bring moves e's QP from RESET to target along the usual path
// (RESET→INIT→RTR→RTS, then SQD or ERR) with the masks of a real program.
func bring(t *testing.T, e, peer *endpoint, target verbs.QPState) {
	if target == verbs.QPStateReset {
		return
	}
	require.NoError(t, e.qp.Modify(&verbs.QPAttr{QPState: verbs.QPStateInit, PortNum: 1,
		QPAccessFlags: verbs.AccessRemoteWrite | verbs.AccessRemoteRead},
		verbs.QPAttrState|verbs.QPAttrPKeyIndex|verbs.QPAttrPort|verbs.QPAttrAccessFlags))
	if target == verbs.QPStateInit {
		return
	}
	if target == verbs.QPStateErr {
		require.NoError(t, e.qp.Modify(&verbs.QPAttr{QPState: verbs.QPStateErr}, verbs.QPAttrState))
		return
	}
	gid, _ := peer.ctx.QueryGID(1, 1)
	require.NoError(t, e.qp.Modify(&verbs.QPAttr{QPState: verbs.QPStateRTR, PathMTU: verbs.MTU1024, DestQPNum: peer.qp.QPNum,
		RQPSN: peer.psn, MaxDestRdAtomic: 1, MinRNRTimer: 1,
		AHAttr: verbs.AHAttr{IsGlobal: true, PortNum: 1, GRH: verbs.GRH{DGID: gid, SGIDIndex: 1}}},
		verbs.QPAttrState|verbs.QPAttrAV|verbs.QPAttrPathMTU|verbs.QPAttrDestQPN|verbs.QPAttrRQPSN|
			verbs.QPAttrMaxDestRdAtomic|verbs.QPAttrMinRNRTimer))
	if target == verbs.QPStateRTR {
		return
	}
	require.NoError(t, e.qp.Modify(&verbs.QPAttr{QPState: verbs.QPStateRTS, Timeout: 14, RetryCnt: 1, RNRRetry: 1,
		SQPSN: e.psn, MaxRdAtomic: 1},
		verbs.QPAttrState|verbs.QPAttrTimeout|verbs.QPAttrRetryCnt|verbs.QPAttrRNRRetry|verbs.QPAttrSQPSN|verbs.QPAttrMaxQPRdAtomic))
	if target == verbs.QPStateSQD {
		require.NoError(t, e.qp.Modify(&verbs.QPAttr{QPState: verbs.QPStateSQD}, verbs.QPAttrState))
	}
}

// TestStateVerbTable covers each cell of the post/processing table of
// an RC QP: post_recv, post_send and an incoming SEND, in every state an
// RC QP can be in (SQE, which only UC and UD reach, is in TestSQE).
func TestStateVerbTable(t *testing.T) {
	type want struct {
		recv     string // "ok", "flush" or "EINVAL"
		send     string // "sent", "held", "flush" or "EINVAL"
		incoming bool   // an incoming SEND is processed
	}
	table := map[verbs.QPState]want{
		verbs.QPStateReset: {"EINVAL", "EINVAL", false},
		verbs.QPStateInit:  {"ok", "EINVAL", false},
		verbs.QPStateRTR:   {"ok", "EINVAL", true},
		verbs.QPStateRTS:   {"ok", "sent", true},
		verbs.QPStateSQD:   {"ok", "held", true},
		verbs.QPStateErr:   {"flush", "flush", false},
	}
	for _, st := range []verbs.QPState{verbs.QPStateReset, verbs.QPStateInit, verbs.QPStateRTR, verbs.QPStateRTS, verbs.QPStateSQD, verbs.QPStateErr} {
		wnt := table[st]
		t.Run(st.String(), func(t *testing.T) {
			w := verbs.NewWorld(verbs.WorldConfig{Seed: 1})
			ha, hb := w.AddHost("a"), w.AddHost("b")
			require.NoError(t, w.Connect(ha, hb))
			a, b := setup(ha, 100), setup(hb, 200)
			require.NoError(t, a.connect(b))
			bring(t, b, a, st)
			require.Equal(t, st, b.qp.State())

			// post_recv
			_, err := b.qp.PostRecv([]verbs.RecvWR{recvWR(1, b)})
			switch wnt.recv {
			case "EINVAL":
				assert.True(t, errors.Is(err, syscall.EINVAL), "%v", err)
			case "ok":
				require.NoError(t, err)
				assert.Empty(t, pollAll(b.cq))
			case "flush":
				require.NoError(t, err)
				assert.Equal(t, []string{"1:IBV_WC_WR_FLUSH_ERR"}, summary(pollAll(b.cq)))
			}

			// an incoming SEND from a
			_, err = a.qp.PostSend([]verbs.SendWR{sendWR(5, a, 8)})
			require.NoError(t, err)
			require.NoError(t, w.RunFor(20*sim.Microsecond))
			got := summary(pollAll(b.cq))
			if wnt.incoming {
				assert.Equal(t, []string{"1:IBV_WC_SUCCESS"}, got, "the SEND is received")
			} else {
				assert.Empty(t, got, "the SEND is dropped")
			}

			// post_send
			_, err = b.qp.PostSend([]verbs.SendWR{sendWR(9, b, 8)})
			switch wnt.send {
			case "EINVAL":
				assert.True(t, errors.Is(err, syscall.EINVAL), "%v", err)
			case "flush":
				require.NoError(t, err)
				assert.Equal(t, []string{"9:IBV_WC_WR_FLUSH_ERR"}, summary(pollAll(b.cq)))
			case "sent", "held":
				require.NoError(t, err)
				_, _ = a.qp.PostRecv([]verbs.RecvWR{recvWR(2, a)})
				require.NoError(t, w.RunFor(20*sim.Microsecond))
				if wnt.send == "sent" {
					assert.Contains(t, summary(pollAll(a.cq)), "2:IBV_WC_SUCCESS")
				} else {
					assert.NotContains(t, summary(pollAll(a.cq)), "2:IBV_WC_SUCCESS", "SQD processes no new sends")
				}
			}
		})
	}
}

// TestSQE: a UC QP whose send fails a local check goes to SQE: the failed
// WR completes with its error, later posts are flushed, receives go on,
// and SQE→RTS recovers it.
func TestSQE(t *testing.T) {
	w := verbs.NewWorld(verbs.WorldConfig{Seed: 1})
	ha, hb := w.AddHost("a"), w.AddHost("b")
	require.NoError(t, w.Connect(ha, hb))
	a, b := setup(ha, 1), setup(hb, 1)
	ucPair(t, a, b)
	bad := a.mr.SGE(0, 8)
	bad.LKey ^= 0x700
	_, err := a.qp.PostSend([]verbs.SendWR{{WRID: 1, Opcode: verbs.WRSend, Flags: verbs.SendSignaled, SGList: []verbs.SGE{bad}}})
	require.NoError(t, err)
	require.NoError(t, w.Run())
	assert.Equal(t, verbs.QPStateSQE, a.qp.State())
	assert.Equal(t, []string{"1:IBV_WC_LOC_PROT_ERR"}, summary(pollAll(a.cq)))
	_, err = a.qp.PostSend([]verbs.SendWR{sendWR(2, a, 8)})
	require.NoError(t, err)
	assert.Equal(t, []string{"2:IBV_WC_WR_FLUSH_ERR"}, summary(pollAll(a.cq)))

	// Receives go on in SQE.
	_, err = a.qp.PostRecv([]verbs.RecvWR{recvWR(3, a)})
	require.NoError(t, err)
	_, err = b.qp.PostSend([]verbs.SendWR{sendWR(4, b, 8)})
	require.NoError(t, err)
	require.NoError(t, w.Run())
	assert.Equal(t, []string{"3:IBV_WC_SUCCESS"}, summary(pollAll(a.cq)))

	// SQE -> RTS recovers.
	require.NoError(t, a.qp.Modify(&verbs.QPAttr{QPState: verbs.QPStateRTS}, verbs.QPAttrState))
	_, err = b.qp.PostRecv([]verbs.RecvWR{recvWR(5, b)})
	require.NoError(t, err)
	_, err = a.qp.PostSend([]verbs.SendWR{sendWR(6, a, 8)})
	require.NoError(t, err)
	require.NoError(t, w.Run())
	assert.Equal(t, []string{"6:IBV_WC_SUCCESS"}, summary(pollAll(a.cq)))
	assert.Equal(t, []string{"4:IBV_WC_SUCCESS", "5:IBV_WC_SUCCESS"}, summary(pollAll(b.cq)))
}

// TestIllegalModifyChangesNothing: a refused modify leaves state and
// attributes as they were.
func TestIllegalModifyChangesNothing(t *testing.T) {
	_, a, b := pair(t, verbs.WorldConfig{Seed: 1})
	before, _ := a.qp.Query()
	err := a.qp.Modify(&verbs.QPAttr{QPState: verbs.QPStateInit, Timeout: 3}, verbs.QPAttrState|verbs.QPAttrTimeout)
	assert.True(t, errors.Is(err, syscall.EINVAL), "RTS->INIT is illegal: %v", err)
	err = a.qp.Modify(&verbs.QPAttr{Timeout: 40}, verbs.QPAttrTimeout)
	assert.True(t, errors.Is(err, syscall.EINVAL), "timeout out of range: %v", err)
	after, _ := a.qp.Query()
	assert.Equal(t, before, after)
	_ = b
}

// ucPair gives two endpoints UC QPs connected to each other (INIT, RTR,
// RTS with the masks a UC program uses).
func ucPair(t *testing.T, a, b *endpoint) {
	t.Helper()
	for _, e := range []*endpoint{a, b} {
		var err error
		e.qp, err = e.pd.CreateQP(verbs.QPInitAttr{SendCQ: e.cq, RecvCQ: e.cq, Type: verbs.QPTypeUC,
			Cap: verbs.QPCap{MaxSendWR: 8, MaxRecvWR: 8, MaxSendSGE: 1, MaxRecvSGE: 1}})
		require.NoError(t, err)
	}
	for _, pr := range [][2]*endpoint{{a, b}, {b, a}} {
		e, peer := pr[0], pr[1]
		require.NoError(t, e.qp.Modify(&verbs.QPAttr{QPState: verbs.QPStateInit, PortNum: 1, QPAccessFlags: verbs.AccessRemoteWrite},
			verbs.QPAttrState|verbs.QPAttrPKeyIndex|verbs.QPAttrPort|verbs.QPAttrAccessFlags))
		gid, _ := peer.ctx.QueryGID(1, 1)
		require.NoError(t, e.qp.Modify(&verbs.QPAttr{QPState: verbs.QPStateRTR, PathMTU: verbs.MTU1024, DestQPNum: peer.qp.QPNum, RQPSN: peer.psn,
			AHAttr: verbs.AHAttr{IsGlobal: true, PortNum: 1, GRH: verbs.GRH{DGID: gid}}},
			verbs.QPAttrState|verbs.QPAttrAV|verbs.QPAttrPathMTU|verbs.QPAttrDestQPN|verbs.QPAttrRQPSN))
		require.NoError(t, e.qp.Modify(&verbs.QPAttr{QPState: verbs.QPStateRTS, SQPSN: e.psn}, verbs.QPAttrState|verbs.QPAttrSQPSN))
	}
}
