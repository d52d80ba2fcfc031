package main

import (
	"fmt"
	"runtime"
	"runtime/debug"
	"time"

	"github.com/rocesim/rocesim/verbs"
)

// idle creates n RC QPs on one host, each taken to RTS toward a QP number
// on a second host (an idle QP never sends, so the peer need not exist),
// and reports the time that took and the live heap they hold.
//
// The collector is paused while the QPs are made (the process's memory
// limit still bounds it): what a collection costs depends on where its
// cycles fall, at each doubling of the heap, and on a second core it adds
// CPU time the creation did not spend itself, so with it the fit of
// creation time against QPs swung between 0.9 and 1.2 from run to run.
// The heap is measured after a collection: what the idle QPs hold.
func idle(n int) (Result, error) {
	r := Result{Kind: "idle", N: n, QPs: n}
	var before, after runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&before)
	gc := debug.SetGCPercent(-1)
	defer debug.SetGCPercent(gc)
	t0, c0 := time.Now(), cpuTime()
	w := verbs.NewWorld(verbs.WorldConfig{Seed: 1})
	ha, hb := w.AddHost("a"), w.AddHost("b")
	if err := w.Connect(ha, hb); err != nil {
		return r, err
	}
	ctx, err := ha.GetDeviceList()[0].Open()
	if err != nil {
		return r, err
	}
	pd, err := ctx.AllocPD()
	if err != nil {
		return r, err
	}
	cq, err := ctx.CreateCQ(16, nil, 0)
	if err != nil {
		return r, err
	}
	peer, err := hb.GetDeviceList()[0].Open()
	if err != nil {
		return r, err
	}
	gid, err := peer.QueryGID(1, 1)
	if err != nil {
		return r, err
	}
	qps := make([]*verbs.QP, n)
	for i := range qps {
		if qps[i], err = pd.CreateQP(verbs.QPInitAttr{SendCQ: cq, RecvCQ: cq, Type: verbs.QPTypeRC,
			Cap: verbs.QPCap{MaxSendWR: 16, MaxRecvWR: 16, MaxSendSGE: 1, MaxRecvSGE: 1}}); err != nil {
			return r, fmt.Errorf("QP %d: %w", i, err)
		}
		if err := connect(qps[i], 0x11+uint32(i), gid); err != nil {
			return r, fmt.Errorf("QP %d: %w", i, err)
		}
	}
	r.WallS, r.CPUS = time.Since(t0).Seconds(), cpuTime()-c0
	debug.SetGCPercent(gc)
	runtime.GC()
	runtime.ReadMemStats(&after)
	r.PeakHeap = after.HeapAlloc - min(after.HeapAlloc, before.HeapAlloc)
	r.Checked = n
	runtime.KeepAlive(w)
	runtime.KeepAlive(qps)
	return r, nil
}

// stream runs the 2-node stream the alltoall's packet rate is compared
// with: 4 KiB RDMA WRITEs (the alltoall's) from one host to the other over
// one link, 64 outstanding, m in all. viaSwitch puts a switch between the
// two hosts (kind "switched"): every packet then crosses two links, as in
// the alltoall, which tells the second hop's share of the difference.
func stream(m int, viaSwitch bool) (Result, error) {
	r := Result{Kind: "stream", N: 2, QPs: 2}
	w := verbs.NewWorld(verbs.WorldConfig{Seed: 1})
	ha, hb := w.AddHost("a"), w.AddHost("b")
	link := func() error { return w.Connect(ha, hb) }
	if viaSwitch {
		r.Kind, link = "switched", w.ConnectSwitch
	}
	if err := link(); err != nil {
		return r, err
	}
	var hs [2]*host
	for i, vh := range []*verbs.Host{ha, hb} {
		h := &host{}
		var err error
		if h.ctx, err = vh.GetDeviceList()[0].Open(); err != nil {
			return r, err
		}
		if h.pd, err = h.ctx.AllocPD(); err != nil {
			return r, err
		}
		if h.cq, err = h.ctx.CreateCQ(128, nil, 0); err != nil {
			return r, err
		}
		if h.src, err = h.pd.RegMR(make([]byte, msgLen), verbs.AccessLocalWrite|verbs.AccessRemoteWrite); err != nil {
			return r, err
		}
		qp, err := h.pd.CreateQP(verbs.QPInitAttr{SendCQ: h.cq, RecvCQ: h.cq, Type: verbs.QPTypeRC,
			Cap: verbs.QPCap{MaxSendWR: 64, MaxRecvWR: 1, MaxSendSGE: 1, MaxRecvSGE: 1}})
		if err != nil {
			return r, err
		}
		h.qps = []*verbs.QP{qp}
		hs[i] = h
	}
	for i, h := range hs {
		gid, err := hs[1-i].ctx.QueryGID(1, 1)
		if err != nil {
			return r, err
		}
		if err := connect(h.qps[0], hs[1-i].qps[0].QPNum, gid); err != nil {
			return r, err
		}
	}
	a, b := hs[0], hs[1]
	wr := make([]verbs.SendWR, 64)
	for k := range wr {
		wr[k] = verbs.SendWR{Opcode: verbs.WRRDMAWrite, Flags: verbs.SendSignaled, RemoteAddr: b.src.Addr, RKey: b.src.RKey,
			SGList: []verbs.SGE{a.src.SGE(0, uint64(msgLen))}}
	}
	wcs := make([]verbs.WC, 64)
	defer measured()() // alike for both kinds (the stream allocates nothing)
	t0, c0 := time.Now(), cpuTime()
	for done := 0; done < m; {
		if _, err := a.qps[0].PostSend(wr); err != nil {
			return r, err
		}
		if err := w.Run(); err != nil {
			return r, err
		}
		for got := 0; got < len(wr); {
			k := a.cq.Poll(wcs)
			if k == 0 {
				return r, fmt.Errorf("stream: %d of %d completions", got, len(wr))
			}
			for _, wc := range wcs[:k] {
				if wc.Status != verbs.WCSuccess {
					return r, fmt.Errorf("stream: completion %+v", wc)
				}
			}
			got += k
		}
		done += len(wr)
		r.Checked += len(wr)
	}
	r.WallS, r.CPUS = time.Since(t0).Seconds(), cpuTime()-c0
	for _, h := range hs {
		sent, _ := h.ctx.Counters().Get("sent_pkts")
		r.Packets += sent
	}
	return r, nil
}
