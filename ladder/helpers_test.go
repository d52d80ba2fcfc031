package ladder_test

import (
	"flag"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/rocesim/rocesim/faults"
	"github.com/rocesim/rocesim/sim"
	"github.com/rocesim/rocesim/verbs"
)

var update = flag.Bool("update", false, "rewrite the golden files in testdata/")

// endpoint is one side of an RC connection, set up as a C program would
// (the idea of verbs/example_test.go).
type endpoint struct {
	ctx   *verbs.Context
	pd    *verbs.PD
	cq    *verbs.CQ
	qp    *verbs.QP
	mr    *verbs.MR
	psn   uint32
	retry uint8 // retry_cnt at RTS
	rnr   uint8 // rnr_retry at RTS
}

func setup(t testing.TB, h *verbs.Host, psn uint32) *endpoint {
	t.Helper()
	e := &endpoint{psn: psn, retry: 7, rnr: 7}
	var err error
	e.ctx, err = h.GetDeviceList()[0].Open()
	require.NoError(t, err)
	e.pd, err = e.ctx.AllocPD()
	require.NoError(t, err)
	e.cq, err = e.ctx.CreateCQ(64, nil, 0)
	require.NoError(t, err)
	buf := make([]byte, 16384)
	for i := range buf {
		buf[i] = byte(i)
	}
	e.mr, err = e.pd.RegMR(buf, verbs.AccessLocalWrite|verbs.AccessRemoteWrite|verbs.AccessRemoteRead)
	require.NoError(t, err)
	e.qp, err = e.pd.CreateQP(verbs.QPInitAttr{SendCQ: e.cq, RecvCQ: e.cq, Type: verbs.QPTypeRC,
		Cap: verbs.QPCap{MaxSendWR: 16, MaxRecvWR: 16, MaxSendSGE: 1, MaxRecvSGE: 1}})
	require.NoError(t, err)
	return e
}

// connect takes the QP through INIT, RTR and RTS toward the peer, with
// the attribute masks ibv_rc_pingpong uses.
func (e *endpoint) connect(t testing.TB, peer *endpoint) {
	t.Helper()
	require.NoError(t, e.qp.Modify(&verbs.QPAttr{QPState: verbs.QPStateInit, PKeyIndex: 0, PortNum: 1,
		QPAccessFlags: verbs.AccessRemoteWrite | verbs.AccessRemoteRead | verbs.AccessRemoteAtomic},
		verbs.QPAttrState|verbs.QPAttrPKeyIndex|verbs.QPAttrPort|verbs.QPAttrAccessFlags))
	gid, err := peer.ctx.QueryGID(1, 1)
	require.NoError(t, err)
	rtr := verbs.QPAttr{QPState: verbs.QPStateRTR, PathMTU: verbs.MTU1024, DestQPNum: peer.qp.QPNum,
		RQPSN: peer.psn, MaxDestRdAtomic: 1, MinRNRTimer: 1,
		AHAttr: verbs.AHAttr{IsGlobal: true, PortNum: 1, GRH: verbs.GRH{DGID: gid, HopLimit: 1, SGIDIndex: 1}}}
	require.NoError(t, e.qp.Modify(&rtr, verbs.QPAttrState|verbs.QPAttrAV|verbs.QPAttrPathMTU|verbs.QPAttrDestQPN|
		verbs.QPAttrRQPSN|verbs.QPAttrMaxDestRdAtomic|verbs.QPAttrMinRNRTimer))
	rts := verbs.QPAttr{QPState: verbs.QPStateRTS, Timeout: 8, RetryCnt: e.retry, RNRRetry: e.rnr, SQPSN: e.psn, MaxRdAtomic: 1}
	require.NoError(t, e.qp.Modify(&rts, verbs.QPAttrState|verbs.QPAttrTimeout|verbs.QPAttrRetryCnt|
		verbs.QPAttrRNRRetry|verbs.QPAttrSQPSN|verbs.QPAttrMaxQPRdAtomic))
}

// scenario is a run between hosts a and b (and more, for fan-out).
type scenario struct {
	plan   string // fault plan text
	hosts  int    // 2 when 0
	sw     bool   // through one switch instead of a direct link
	retry  uint8  // retry_cnt of a's QP (7 when 0)
	rnr    uint8  // rnr_retry of a's QP (7 when 0)
	noRecv bool   // b posts no receive (RNR)
	size   uint64 // SEND size, 4096 when 0
}

// run runs sc with a trace and returns the trace: a SEND of sc.size bytes
// from a to b (and from a to every other host), signalled.
func run(t testing.TB, sc scenario) *sim.Trace {
	t.Helper()
	var plan *faults.Plan
	if sc.plan != "" {
		var err error
		plan, err = faults.Parse(sc.plan)
		require.NoError(t, err)
	}
	n := max(sc.hosts, 2)
	size := sc.size
	if size == 0 {
		size = 4096
	}
	tr := &sim.Trace{}
	// A plan that keeps the QPs retrying for ever (rxe's retry_cnt 7)
	// ends the test with the world's runaway error within a second, not
	// after the default budget's minutes.
	w := verbs.NewWorld(verbs.WorldConfig{Seed: 1, Plan: plan, Trace: tr, MaxEvents: 1 << 20})
	names := []string{"a", "b", "c", "d", "e", "f", "g", "h"}
	hs := make([]*verbs.Host, n)
	for i := range hs {
		hs[i] = w.AddHost(names[i])
	}
	if sc.sw {
		require.NoError(t, w.ConnectSwitch())
	} else {
		require.Equal(t, 2, n, "a direct link joins two hosts")
		require.NoError(t, w.Connect(hs[0], hs[1]))
	}
	// A QP pair between every two hosts; host i sends to every other.
	type link struct{ from, to *endpoint }
	var pairs []link
	for i := 0; i < n; i++ {
		for j := i + 1; j < n; j++ {
			x, y := setup(t, hs[i], 100*uint32(i+1)), setup(t, hs[j], 100*uint32(j+1))
			if i == 0 {
				if sc.retry != 0 {
					x.retry = sc.retry
				}
				if sc.rnr != 0 {
					x.rnr = sc.rnr
				}
			}
			x.connect(t, y)
			y.connect(t, x)
			pairs = append(pairs, link{x, y}, link{y, x})
		}
	}
	for k, p := range pairs {
		if n == 2 && k == 1 {
			break // two hosts: a to b only
		}
		if !sc.noRecv {
			_, err := p.to.qp.PostRecv([]verbs.RecvWR{{WRID: uint64(2*k + 1), SGList: []verbs.SGE{p.to.mr.SGE(0, size)}}})
			require.NoError(t, err)
		}
		_, err := p.from.qp.PostSend([]verbs.SendWR{{WRID: uint64(2*k + 2), Opcode: verbs.WRSend, Flags: verbs.SendSignaled,
			SGList: []verbs.SGE{p.from.mr.SGE(0, size)}}})
		require.NoError(t, err)
	}
	require.NoError(t, w.Run())
	return tr
}

// goBackN is the demo's scenario: a 4-packet SEND whose PSN 101 is lost
// on its first transmission.
func goBackN(t testing.TB) *sim.Trace {
	return run(t, scenario{plan: "drop psn=101 tx=1 src=a"})
}

// golden compares got with testdata/name, or rewrites it under -update.
func golden(t *testing.T, name, got string) {
	t.Helper()
	path := filepath.Join("testdata", name)
	if *update {
		require.NoError(t, os.WriteFile(path, []byte(got), 0o644))
		return
	}
	want, err := os.ReadFile(path)
	require.NoError(t, err, "run go test -update to create it")
	require.Equal(t, string(want), got, "golden %s differs (go test -update rewrites it; only commit what you understand)", path)
}

// lines splits text into lines without the trailing empty one.
func lines(s string) []string { return strings.Split(strings.TrimSuffix(s, "\n"), "\n") }
