package main

// The measured worlds: the alltoall (one 4 KiB RDMA WRITE per ordered pair
// of N hosts on one switch), the 2-node stream it is compared with, and N
// idle RC QPs on one host. Each runs in a process of its own (point), so
// that its peak RSS is its own.

import (
	"bytes"
	"fmt"
	"net/netip"
	"runtime"
	"runtime/debug"
	"runtime/metrics"
	"syscall"
	"time"

	"github.com/rocesim/rocesim/sim"
	"github.com/rocesim/rocesim/verbs"
	"github.com/rocesim/rocesim/verbs/parallel"
)

// Result is one measured point.
type Result struct {
	Kind     string  `json:"kind"`            // alltoall, stream or idle
	N        int     `json:"n"`               // hosts (alltoall, stream) or QPs (idle)
	QPs      int     `json:"qps"`             // QPs created
	Packets  uint64  `json:"packets"`         // frames the devices sent
	WallS    float64 `json:"wall_s"`          // wall time of the run (after set-up), or of the creation (idle)
	CPUS     float64 `json:"cpu_s"`           // CPU time (user and system, every thread) of the same
	SetupS   float64 `json:"setup_s"`         // wall time of the set-up
	PeakHeap uint64  `json:"peak_heap"`       // most live heap seen (sampled), bytes
	RSS      uint64  `json:"rss"`             // peak resident set, bytes (filled in by the parent)
	Checked  int     `json:"checked"`         // completions verified
	Parts    int     `json:"parts,omitempty"` // a cluster's parts (alltoall -parts), 0 for a World
}

// cpuTime is the CPU time this process has used so far, in seconds: on
// a shared machine a point's wall time says as much about its neighbours
// as about it, its CPU time only about it.
func cpuTime() float64 {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return float64(ru.Utime.Nano()+ru.Stime.Nano()) / 1e9
}

// PktsPerCPUS is the simulated packet rate per second of CPU time.
func (r Result) PktsPerCPUS() float64 {
	if r.CPUS == 0 {
		return 0
	}
	return float64(r.Packets) / r.CPUS
}

// PktsPerS is the simulated packet rate of the run.
func (r Result) PktsPerS() float64 {
	if r.WallS == 0 {
		return 0
	}
	return float64(r.Packets) / r.WallS
}

// window is how many WRITEs each host has outstanding at most: the
// alltoall runs in rounds, as a pairwise-exchange alltoall does, so that
// frames in flight and receive areas stay a window's worth per host
// rather than N's (N=1024 posted at once would hold 8 GB of frames).
var window = 64 // -window

// repeat is how many times the alltoall runs its whole exchange over the
// same QPs (-repeat; 1 in make scale).
var repeat = 1

// msgLen is every WRITE's length (-msglen): by default four 1024-byte
// packets at the path MTU. A short one (64) leaves the payload's memory
// out of the comparison with the stream: what remains is the cost of
// the QPs, hosts and frames themselves.
var msgLen = 4096

// heapSampler keeps the most live heap seen; sample is cheap enough to
// call every 65536 events (runtime/metrics does not stop the world).
type heapSampler struct {
	s    []metrics.Sample
	peak uint64
}

func newHeapSampler() *heapSampler {
	return &heapSampler{s: []metrics.Sample{{Name: "/memory/classes/heap/objects:bytes"}}}
}

func (h *heapSampler) sample() {
	metrics.Read(h.s)
	h.peak = max(h.peak, h.s[0].Value.Uint64())
}

// gcPercent is the collector's headroom during a point's run (-gogc;
// debug.SetGCPercent), 0 to leave the runtime's own (GOGC, or 100). What
// the alltoall allocates while it runs is live state, not garbage: the
// frames in flight fill the fabric's buffer pool and each QP's send
// queue gets its first slot (about 110 MB at N = 256). At the default
// headroom that growth starts a collection in the middle of the run,
// which marks the 220 MB of live world to free nothing. With -gogc 400
// each point runs as testing.B runs a benchmark, after a collection of
// its set-up's garbage, and none starts in the run: N = 256 as 2 parts
// 0.40 s against 0.50 s, N = 64 0.030 s against 0.035 s, N = 512 3.0 s
// against 3.1 s (medians of runs in turns). make scale keeps the
// default, the cost a program meets unless it tunes its collector, and
// the one every earlier table was measured with: the collections it
// removes are a larger share of the smaller worlds' runs (N = 1024's
// growth stays under the collector's goal either way), so the CPU-time
// fit steepens with it (1.13 in one make scale run, against 1.06–1.09).
var gcPercent = 0

// measured starts a point's run: with gcPercent set, it collects the
// set-up's garbage, then gives the collector that headroom until the
// returned function puts the setting back.
func measured() (done func()) {
	if gcPercent == 0 {
		return func() {}
	}
	runtime.GC()
	old := debug.SetGCPercent(gcPercent)
	return func() { debug.SetGCPercent(old) }
}

// parts and workers run the alltoall as a verbs.Cluster of that many
// parts on that many goroutines (-parts, -workers; 1 part: a World);
// clusterParts is the parts of the cluster points (-clusterparts).
var parts, workers, clusterParts = 1, 0, 2

// hugePages is -hugepages: each point reserves its heap on transparent
// huge pages first (reserveHeap).
var hugePages = true

// world is what the alltoall needs of a verbs.World or verbs.Cluster.
type world interface {
	AddHost(name string) *verbs.Host
	ConnectSwitch() error
	Run() error
}

// host is one alltoall host's verbs objects.
type host struct {
	ctx *verbs.Context
	pd  *verbs.PD
	cq  *verbs.CQ
	src *verbs.MR
	dst *verbs.MR
	qps []*verbs.QP // qps[j]: toward host j (nil for itself)
}

// pattern is the byte k of host i's source block.
func pattern(i, k int) byte { return byte(i*131 + k*7 + i>>8) }

// alltoall runs one 4 KiB WRITE from every host to every other through one
// switch, in rounds of window WRITEs per host, each into a slot of its own
// in the target's receive area, and verifies every completion and every
// block.
func alltoall(n int) (Result, error) {
	r := Result{Kind: "alltoall", N: n, QPs: n * (n - 1)}
	hs := newHeapSampler()
	t0 := time.Now()
	wc := verbs.WorldConfig{Seed: 1, MaxEvents: 1 << 40, Progress: func(verbs.Progress) { hs.sample() }}
	var w world = verbs.NewWorld(wc)
	if parts > 1 {
		c, err := verbs.NewCluster(verbs.ClusterConfig{World: wc, Parts: parts, Each: parallel.Each(workers), Hosts: n})
		if err != nil {
			return r, err
		}
		w, r.Parts = c, parts
	}
	vh := make([]*verbs.Host, n)
	for i := range n {
		vh[i] = w.AddHost(fmt.Sprintf("h%d", i))
	}
	if err := w.ConnectSwitch(); err != nil {
		return r, err
	}
	hosts := make([]*host, n)
	for i := range n {
		h := &host{qps: make([]*verbs.QP, n)}
		var err error
		if h.ctx, err = vh[i].GetDeviceList()[0].Open(); err != nil {
			return r, err
		}
		if h.pd, err = h.ctx.AllocPD(); err != nil {
			return r, err
		}
		if h.cq, err = h.ctx.CreateCQ(max(1, n-1), nil, 0); err != nil {
			return r, err
		}
		src := make([]byte, msgLen)
		for k := range src {
			src[k] = pattern(i, k)
		}
		if h.src, err = h.pd.RegMR(src, verbs.AccessLocalWrite); err != nil {
			return r, err
		}
		if h.dst, err = h.pd.RegMR(make([]byte, window*msgLen), verbs.AccessLocalWrite|verbs.AccessRemoteWrite); err != nil {
			return r, err
		}
		for j := range n {
			if j == i {
				continue
			}
			if h.qps[j], err = h.pd.CreateQP(verbs.QPInitAttr{SendCQ: h.cq, RecvCQ: h.cq, Type: verbs.QPTypeRC,
				Cap: verbs.QPCap{MaxSendWR: 1, MaxRecvWR: 1, MaxSendSGE: 1, MaxRecvSGE: 1}}); err != nil {
				return r, fmt.Errorf("host %d, QP toward %d: %w", i, j, err)
			}
		}
		hosts[i] = h
	}
	for i, h := range hosts {
		gid, err := h.ctx.QueryGID(1, 1)
		if err != nil {
			return r, err
		}
		for j, o := range hosts {
			if j != i {
				if err := connect(o.qps[i], h.qps[j].QPNum, gid); err != nil {
					return r, fmt.Errorf("host %d, QP toward %d: %w", j, i, err)
				}
			}
		}
	}
	hs.sample()
	r.SetupS = time.Since(t0).Seconds()
	defer measured()()
	// The run's time is that of the posts and the simulation, not of
	// the checks between rounds.
	var wall time.Duration
	var cpu float64
	wcs := make([]verbs.WC, 256)
	want := make([]byte, msgLen)
	// Each host posts its round from an event of its own, in its own
	// part's scheduler (World.Scheduler: a workload's step), at the
	// instant the round starts: in a cluster the parts then build their
	// hosts' frames in parallel, where posts from this goroutine would
	// build every frame of the round on it alone (the NIC runs its
	// requester inside the post, as rxe does). A World posts the same
	// way, so the two are timed alike.
	type poster struct {
		i   int
		h   *host
		err error
		// One work request and one SGE, rewritten for every WRITE: a
		// fresh slice of each per message would put two allocations
		// of the workload's own in the measured loop (PostSend copies
		// what it keeps). One pair per host: hosts in different parts
		// post at once.
		sge []verbs.SGE
		wr  []verbs.SendWR
	}
	posters := make([]*poster, n)
	for i, h := range hosts {
		p := &poster{i: i, h: h, sge: make([]verbs.SGE, 1)}
		p.wr = []verbs.SendWR{{Opcode: verbs.WRRDMAWrite, Flags: verbs.SendSignaled, SGList: p.sge}}
		posters[i] = p
	}
	// -repeat runs the whole exchange again over the same QPs: with
	// the state warm the cost per packet is the path's own, and what a
	// larger world adds to it is what its memory costs.
	for range repeat {
		for first := 1; first < n; first += window {
			// Round: host i writes to i+first … i+first+window-1, each
			// into the slot of its offset in the round. At every offset
			// the targets are a permutation of the hosts, so no egress
			// port is the goal of every sender at once.
			last := min(n-1, first+window-1)
			t1, c1 := time.Now(), cpuTime()
			for i, p := range posters {
				s := vh[i].World().Scheduler()
				s.Schedule(s.Now(), sim.HandlerFunc(func(sim.Time, uint64) {
					for d := first; d <= last && p.err == nil; d++ {
						j := (p.i + d) % n
						p.sge[0] = p.h.src.SGE(0, uint64(msgLen))
						p.wr[0].WRID, p.wr[0].RemoteAddr, p.wr[0].RKey = uint64(j), hosts[j].dst.Addr+uint64((d-first)*msgLen), hosts[j].dst.RKey
						if _, err := p.h.qps[j].PostSend(p.wr); err != nil {
							p.err = fmt.Errorf("host %d, WRITE to %d: %w", p.i, j, err)
						}
					}
				}), 0)
			}
			if err := w.Run(); err != nil {
				return r, err
			}
			for _, p := range posters {
				if p.err != nil {
					return r, p.err
				}
			}
			wall, cpu = wall+time.Since(t1), cpu+cpuTime()-c1
			hs.sample()
			for i, h := range hosts {
				got := 0
				for {
					m := h.cq.Poll(wcs)
					if m == 0 {
						break
					}
					for _, wc := range wcs[:m] {
						d := (int(wc.WRID) - i + n) % n
						if wc.Status != verbs.WCSuccess || wc.Opcode != verbs.WCRDMAWrite || wc.WRID >= uint64(n) || d < first || d > last {
							return r, fmt.Errorf("host %d, round from %d: unexpected completion %+v", i, first, wc)
						}
						got++
					}
				}
				if got != last-first+1 {
					return r, fmt.Errorf("host %d, round from %d: %d completions, want %d", i, first, got, last-first+1)
				}
				r.Checked += got
				// Every block of the round landed in its slot.
				buf := h.dst.Bytes()
				for d := first; d <= last; d++ {
					from := (i - d + n) % n
					for k := range want {
						want[k] = pattern(from, k)
					}
					slot := buf[(d-first)*msgLen : (d-first+1)*msgLen]
					if !bytes.Equal(slot, want) {
						return r, fmt.Errorf("host %d: the block from %d is not what %d sent", i, from, from)
					}
					clear(slot)
				}
			}
		}
	}
	r.WallS, r.CPUS = wall.Seconds(), cpu
	for _, h := range hosts {
		sent, _ := h.ctx.Counters().Get("sent_pkts")
		r.Packets += sent
	}
	r.PeakHeap = hs.peak
	runtime.KeepAlive(w)
	return r, nil
}

// connect takes q through INIT, RTR and RTS toward QP dqpn at gid, with
// the attribute masks ibv_rc_pingpong uses.
func connect(q *verbs.QP, dqpn uint32, gid netip.Addr) error {
	if err := q.Modify(&verbs.QPAttr{QPState: verbs.QPStateInit, PortNum: 1, QPAccessFlags: verbs.AccessRemoteWrite},
		verbs.QPAttrState|verbs.QPAttrPKeyIndex|verbs.QPAttrPort|verbs.QPAttrAccessFlags); err != nil {
		return err
	}
	rtr := verbs.QPAttr{QPState: verbs.QPStateRTR, PathMTU: verbs.MTU1024, DestQPNum: dqpn, MaxDestRdAtomic: 1, MinRNRTimer: 12,
		AHAttr: verbs.AHAttr{IsGlobal: true, PortNum: 1, GRH: verbs.GRH{DGID: gid, HopLimit: 1, SGIDIndex: 1}}}
	if err := q.Modify(&rtr, verbs.QPAttrState|verbs.QPAttrAV|verbs.QPAttrPathMTU|verbs.QPAttrDestQPN|
		verbs.QPAttrRQPSN|verbs.QPAttrMaxDestRdAtomic|verbs.QPAttrMinRNRTimer); err != nil {
		return err
	}
	rts := verbs.QPAttr{QPState: verbs.QPStateRTS, Timeout: 14, RetryCnt: 7, RNRRetry: 7, MaxRdAtomic: 1}
	return q.Modify(&rts, verbs.QPAttrState|verbs.QPAttrTimeout|verbs.QPAttrRetryCnt|
		verbs.QPAttrRNRRetry|verbs.QPAttrSQPSN|verbs.QPAttrMaxQPRdAtomic)
}
