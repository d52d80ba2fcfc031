package parallel_test

import (
	"net/netip"
	"testing"

	"github.com/rocesim/rocesim/verbs"
	"github.com/rocesim/rocesim/verbs/parallel"
)

// benchStream runs a sparse cluster: a stream of 64-byte WRITEs, 16 at a
// time, from host a in part 0 to host b in part 1, whose steps (one
// propagation delay each) fire a dozen events apiece. One op is 16
// WRITEs, their frames and ACKs.
func benchStream(b *testing.B, each func(int, func(int)), eachAfter int) {
	b.ReportAllocs()
	c, err := verbs.NewCluster(verbs.ClusterConfig{World: verbs.WorldConfig{Seed: 1}, Parts: 2, Each: each, EachAfter: eachAfter})
	if err != nil {
		b.Fatal(err)
	}
	ha, hb := c.AddHost("a"), c.AddHost("b")
	if err := c.ConnectSwitch(); err != nil {
		b.Fatal(err)
	}
	type side struct {
		ctx *verbs.Context
		cq  *verbs.CQ
		mr  *verbs.MR
		qp  *verbs.QP
	}
	var s [2]side
	for i, h := range []*verbs.Host{ha, hb} {
		ctx, err := h.GetDeviceList()[0].Open()
		if err != nil {
			b.Fatal(err)
		}
		pd, err := ctx.AllocPD()
		if err != nil {
			b.Fatal(err)
		}
		cq, err := ctx.CreateCQ(128, nil, 0)
		if err != nil {
			b.Fatal(err)
		}
		mr, err := pd.RegMR(make([]byte, 4096), verbs.AccessLocalWrite|verbs.AccessRemoteWrite)
		if err != nil {
			b.Fatal(err)
		}
		qp, err := pd.CreateQP(verbs.QPInitAttr{SendCQ: cq, RecvCQ: cq, Type: verbs.QPTypeRC, Cap: verbs.QPCap{MaxSendWR: 64, MaxRecvWR: 1, MaxSendSGE: 1, MaxRecvSGE: 1}})
		if err != nil {
			b.Fatal(err)
		}
		s[i] = side{ctx, cq, mr, qp}
	}
	for i := range s {
		gid, _ := s[1-i].ctx.QueryGID(1, 1)
		conn(b, s[i].qp, s[1-i].qp.QPNum, gid)
	}
	wr := make([]verbs.SendWR, 16)
	for k := range wr {
		wr[k] = verbs.SendWR{Opcode: verbs.WRRDMAWrite, Flags: verbs.SendSignaled, RemoteAddr: s[1].mr.Addr, RKey: s[1].mr.RKey, SGList: []verbs.SGE{s[0].mr.SGE(0, 64)}}
	}
	wcs := make([]verbs.WC, 64)
	b.ResetTimer()
	for range b.N {
		if _, err := s[0].qp.PostSend(wr); err != nil {
			b.Fatal(err)
		}
		if err := c.Run(); err != nil {
			b.Fatal(err)
		}
		got := s[0].cq.Poll(wcs)
		if got != len(wr) {
			b.Fatalf("%d completions, want %d", got, len(wr))
		}
		for _, wc := range wcs[:got] {
			if wc.Status != verbs.WCSuccess {
				b.Fatalf("completion %+v", wc)
			}
		}
	}
}

// conn takes q through INIT, RTR and RTS toward QP dqpn at gid.
func conn(b *testing.B, q *verbs.QP, dqpn uint32, gid netip.Addr) {
	if err := q.Modify(&verbs.QPAttr{QPState: verbs.QPStateInit, PortNum: 1, QPAccessFlags: verbs.AccessRemoteWrite},
		verbs.QPAttrState|verbs.QPAttrPKeyIndex|verbs.QPAttrPort|verbs.QPAttrAccessFlags); err != nil {
		b.Fatal(err)
	}
	rtr := verbs.QPAttr{QPState: verbs.QPStateRTR, PathMTU: verbs.MTU1024, DestQPNum: dqpn, MaxDestRdAtomic: 1, MinRNRTimer: 12,
		AHAttr: verbs.AHAttr{IsGlobal: true, PortNum: 1, GRH: verbs.GRH{DGID: gid, HopLimit: 1, SGIDIndex: 1}}}
	if err := q.Modify(&rtr, verbs.QPAttrState|verbs.QPAttrAV|verbs.QPAttrPathMTU|verbs.QPAttrDestQPN|
		verbs.QPAttrRQPSN|verbs.QPAttrMaxDestRdAtomic|verbs.QPAttrMinRNRTimer); err != nil {
		b.Fatal(err)
	}
	rts := verbs.QPAttr{QPState: verbs.QPStateRTS, Timeout: 14, RetryCnt: 7, RNRRetry: 7, MaxRdAtomic: 1}
	if err := q.Modify(&rts, verbs.QPAttrState|verbs.QPAttrTimeout|verbs.QPAttrRetryCnt|
		verbs.QPAttrRNRRetry|verbs.QPAttrSQPSN|verbs.QPAttrMaxQPRdAtomic); err != nil {
		b.Fatal(err)
	}
}

// BenchmarkClusterStream: the sparse cluster on the caller's goroutine;
// on two goroutines, its steps after small ones in turn (the default,
// ClusterConfig.EachAfter); and on two goroutines every step.
func BenchmarkClusterStream(b *testing.B) {
	b.Run("one goroutine", func(b *testing.B) { benchStream(b, nil, 0) })
	b.Run("Each", func(b *testing.B) { benchStream(b, parallel.Each(2), 0) })
	b.Run("Each every step", func(b *testing.B) { benchStream(b, parallel.Each(2), -1) })
}
