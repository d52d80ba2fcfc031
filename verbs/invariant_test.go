package verbs_test

import (
	"encoding/binary"
	"errors"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/rocesim/rocesim/faults"
	"github.com/rocesim/rocesim/sim"
	"github.com/rocesim/rocesim/verbs"
)

// Swarm settings. `go test` runs invDefaultSeeds seeds (fewer with
// -short); `make swarm` asks for thousands with -swarm.seeds=N or
// ROCESIM_SWARM_SEEDS=N.
var (
	invSeeds = flag.Int("swarm.seeds", 0, "TestRCInvariants: number of seeds (default 500, 100 with -short; or $ROCESIM_SWARM_SEEDS)")
	invStart = flag.Uint64("swarm.start", 0, "TestRCInvariants: first seed")
	invOnly  = flag.Int64("swarm.seed", -1, "TestRCInvariants: run only this seed")
	invTrace = flag.Bool("swarm.trace", false, "TestRCInvariants: log the whole trace of a failing seed")
)

const (
	invDefaultSeeds = 500
	invShortSeeds   = 100
	// A run must be quiet after this much virtual time: faults stop at
	// 2 ms at the latest, the slowest ACK timeout is 4.2 ms.
	invVirtualLimit = 10 * sim.Second
	// A run firing more events than this is taken to be a livelock. The
	// busiest of 35,000 passing seeds fired 32,382.
	invEventLimit = 200_000
)

func invSeedRange() (first, n uint64) {
	if *invOnly >= 0 {
		return uint64(*invOnly), 1
	}
	n = invDefaultSeeds
	if testing.Short() {
		n = invShortSeeds
	}
	if v, err := strconv.ParseUint(os.Getenv("ROCESIM_SWARM_SEEDS"), 10, 64); err == nil && v > 0 {
		n = v
	}
	if *invSeeds > 0 {
		n = uint64(*invSeeds)
	}
	return *invStart, n
}

// invRepro is the one command that reruns a seed.
func invRepro(seed uint64) string {
	if seed < invDefaultSeeds {
		return fmt.Sprintf("go test ./verbs -run 'TestRCInvariants/seed=%d$' -v", seed)
	}
	return fmt.Sprintf("go test ./verbs -run 'TestRCInvariants/seed=%d$' -swarm.seed=%d -v", seed, seed)
}

// TestRCInvariants is the randomised invariant test of issue 5. Each seed
// draws two hosts (one link or a switch; sometimes slower links with
// shallow, tail-dropping queues), an RC QP pair with random path MTU,
// ACK timeouts, RNR timer, READ/ATOMIC depths, queue depths and PSNs
// (some wrapping), 20-60 WRs of every RC opcode in both directions with
// 0-3 SGEs, inline or not, a tenth of them unsignaled, receives posted on
// time or late (RNR), and a fault plan of drops, duplicates, delays,
// reorders, corruption and link outages that holds only during a safety
// phase. An application on each host posts the WRs as they fall due and
// its queues have room, polling its CQs meanwhile. After the run, with
// the faults healed (the liveness phase):
//
//   - every signaled WR completed exactly once, IBV_WC_SUCCESS, in
//     posting order, on each send queue (an unsignaled one, never); each
//     message consumed exactly one receive, in posting order, with the
//     right byte_len and, for the WITH_IMM opcodes, the right immediate;
//   - both hosts' memory equals the model byte for byte: SENDs in their
//     receive buffers, WRITEs at their targets, READs in their
//     destinations, and every other byte (gaps between buffers, spare
//     receives, the tails of receive buffers) untouched;
//   - the FETCH_ADD counter ends at the sum of the adds and each fetch
//     returned the sum of the adds before it (executed exactly once, in
//     order); every CMP_AND_SWP fetched what the model says;
//   - both QPs are still in RTS and no asynchronous error was raised;
//   - the run ended: nothing left to happen within 10 s of virtual time
//     and 200,000 events.
//
// A failing seed prints the command that reruns it and its fault plan,
// and (for the first few) writes its workload and trace to a file.
func TestRCInvariants(t *testing.T) {
	first, n := invSeedRange()
	var cov invCoverage
	t.Cleanup(func() { t.Log(cov.String()) })
	for seed := first; seed < first+n; seed++ {
		t.Run(fmt.Sprintf("seed=%d", seed), func(t *testing.T) {
			t.Parallel()
			c := invDraw(seed)
			res := c.run(t, nil)
			c.check(t, res)
			cov.add(c, res)
			t.Logf("%s", res.stats())
			if t.Failed() {
				c.report(t, res)
			}
		})
	}
}

// invEnd is one host's verbs objects and memory, and the completions
// polled so far.
type invEnd struct {
	ctx           *verbs.Context
	scq, rcq      *verbs.CQ
	qp            *verbs.QP
	lmr, rmr      *verbs.MR
	local, remote []byte
	swcs, rwcs    []verbs.WC
}

// invDriver is the application on one host: at each step it polls both
// CQs, posts the receives and then the sends that are due, as many as
// the queues take (ENOMEM: the rest wait), and comes back when the next
// WR falls due, or after the host's polling period while a queue is full.
type invDriver struct {
	h                  *invHost
	e, peer            *invEnd
	res                *invRun
	s                  *sim.Scheduler
	nextRecv, nextSend int
}

// Fire is one step of the application.
func (d *invDriver) Fire(now sim.Time, _ uint64) {
	d.e.swcs = append(d.e.swcs, pollAll(d.e.scq)...)
	d.e.rwcs = append(d.e.rwcs, pollAll(d.e.rcq)...)
	full := false
	var rwrs []verbs.RecvWR
	for _, v := range d.h.recvs[d.nextRecv:] {
		if sim.Time(v.at) > now {
			break
		}
		rwrs = append(rwrs, verbs.RecvWR{WRID: v.id, SGList: invSGEs(d.e.lmr, v.sges)})
	}
	if len(rwrs) > 0 {
		n, err := d.e.qp.PostRecv(rwrs)
		d.nextRecv += n
		full = full || d.check(now, "post_recv", err)
	}
	var swrs []verbs.SendWR
	for _, w := range d.h.sends[d.nextSend:] {
		if sim.Time(w.at) > now {
			break
		}
		swrs = append(swrs, invSendWR(w, d.e, d.peer))
	}
	if len(swrs) > 0 {
		n, err := d.e.qp.PostSend(swrs)
		d.nextSend += n
		full = full || d.check(now, "post_send", err)
	}
	next := sim.Never
	if full {
		next = now.Add(d.h.poll)
	}
	if d.nextRecv < len(d.h.recvs) && sim.Time(d.h.recvs[d.nextRecv].at) > now {
		next = min(next, sim.Time(d.h.recvs[d.nextRecv].at))
	}
	if d.nextSend < len(d.h.sends) && sim.Time(d.h.sends[d.nextSend].at) > now {
		next = min(next, sim.Time(d.h.sends[d.nextSend].at))
	}
	if next != sim.Never {
		d.s.Schedule(next, d, 0)
	}
}

// check records a post error other than a full queue and reports whether
// the queue was full.
func (d *invDriver) check(now sim.Time, what string, err error) bool {
	if err == nil {
		return false
	}
	if errors.Is(err, syscall.ENOMEM) {
		d.res.waits++
		return true
	}
	d.res.postErrs = append(d.res.postErrs, fmt.Sprintf("%v %s %s: %v", now, d.h.name, what, err))
	return false
}

// invRun is what a run left behind.
type invRun struct {
	w        *verbs.World
	ends     [2]*invEnd
	err      error // the scheduler's: the event limit
	pending  int   // events still scheduled at the virtual time limit
	waits    int   // posts that found a queue full
	postErrs []string
}

// run builds the world of the case, posts the workload at its times and
// runs it to quiescence (or the limits).
func (c *invCase) run(t require.TestingT, tr *sim.Trace) *invRun {
	plan, err := faults.Parse(c.planText)
	require.NoError(t, err, "plan:\n%s", c.planText)
	w := verbs.NewWorld(verbs.WorldConfig{Seed: c.seed, Plan: plan, Trace: tr, Link: c.link})
	ha, hb := w.AddHost("a"), w.AddHost("b")
	if c.sw {
		require.NoError(t, w.ConnectSwitch())
	} else {
		require.NoError(t, w.Connect(ha, hb))
	}
	res := &invRun{w: w}
	for i, host := range []*verbs.Host{ha, hb} {
		h, e := c.hosts[i], &invEnd{}
		var err error
		e.ctx, err = host.GetDeviceList()[0].Open()
		require.NoError(t, err)
		pd, err := e.ctx.AllocPD()
		require.NoError(t, err)
		// A CQ as deep as its queue cannot overflow: the driver polls
		// before it posts, so no more WRs can complete between two polls
		// than the queue holds.
		e.scq, err = e.ctx.CreateCQ(h.sqDepth, nil, 0)
		require.NoError(t, err)
		e.rcq, err = e.ctx.CreateCQ(h.rqDepth, nil, 0)
		require.NoError(t, err)
		e.local = append([]byte(nil), h.localInit...)
		e.remote = append([]byte(nil), h.remoteInit...)
		e.lmr, err = pd.RegMR(e.local, verbs.AccessLocalWrite)
		require.NoError(t, err)
		e.rmr, err = pd.RegMR(e.remote, verbs.AccessLocalWrite|verbs.AccessRemoteWrite|verbs.AccessRemoteRead|verbs.AccessRemoteAtomic)
		require.NoError(t, err)
		e.qp, err = pd.CreateQP(verbs.QPInitAttr{SendCQ: e.scq, RecvCQ: e.rcq, Type: verbs.QPTypeRC,
			Cap: verbs.QPCap{MaxSendWR: uint32(h.sqDepth), MaxRecvWR: uint32(h.rqDepth), MaxSendSGE: invMaxSGE,
				MaxRecvSGE: invMaxSGE, MaxInlineData: invMaxInline}})
		require.NoError(t, err)
		res.ends[i] = e
	}
	for i := range 2 {
		require.NoError(t, c.connect(res.ends[i], c.hosts[i], res.ends[1-i], c.hosts[1-i]))
	}

	// One driver per host posts the workload as it falls due and as the
	// queues have room, polling the CQs as an application would.
	s := w.Scheduler()
	for i, h := range c.hosts {
		d := &invDriver{h: h, e: res.ends[i], peer: res.ends[1-i], res: res, s: s}
		s.Schedule(0, d, 0)
	}
	s.SetEventLimit(invEventLimit)
	res.err = w.RunFor(invVirtualLimit)
	res.pending = s.Pending()
	return res
}

func invSGEs(mr *verbs.MR, spans []invSpan) []verbs.SGE {
	var out []verbs.SGE
	for _, s := range spans {
		out = append(out, mr.SGE(uint64(s.off), uint64(s.n)))
	}
	return out
}

func invSendWR(s *invSend, e, peer *invEnd) verbs.SendWR {
	wr := verbs.SendWR{WRID: s.id, Opcode: s.op, Flags: s.flags, SGList: invSGEs(e.lmr, s.local),
		RemoteAddr: peer.rmr.Addr + uint64(s.remote), RKey: peer.rmr.RKey}
	switch s.op {
	case verbs.WRSendWithImm, verbs.WRRDMAWriteWithImm:
		wr.ImmData = s.imm
	case verbs.WRAtomicFetchAndAdd:
		wr.CompareAdd = s.add
	case verbs.WRAtomicCmpAndSwp:
		wr.CompareAdd, wr.Swap = s.add, s.swap
	}
	return wr
}

// connect takes e's QP through INIT, RTR and RTS toward the peer with
// the case's attributes. retry_cnt 7 and rnr_retry 7 never give up
// (rxe profile), so every WR must succeed however lossy the safety phase.
func (c *invCase) connect(e *invEnd, h *invHost, pe *invEnd, ph *invHost) error {
	if err := e.qp.Modify(&verbs.QPAttr{QPState: verbs.QPStateInit, PortNum: 1,
		QPAccessFlags: verbs.AccessRemoteWrite | verbs.AccessRemoteRead | verbs.AccessRemoteAtomic},
		verbs.QPAttrState|verbs.QPAttrPKeyIndex|verbs.QPAttrPort|verbs.QPAttrAccessFlags); err != nil {
		return err
	}
	gid, err := pe.ctx.QueryGID(1, 1)
	if err != nil {
		return err
	}
	rtr := verbs.QPAttr{QPState: verbs.QPStateRTR, PathMTU: c.mtu, DestQPNum: pe.qp.QPNum, RQPSN: ph.psn,
		MaxDestRdAtomic: h.destRd, MinRNRTimer: h.minRNR,
		AHAttr: verbs.AHAttr{IsGlobal: true, PortNum: 1, GRH: verbs.GRH{DGID: gid, HopLimit: 64, SGIDIndex: 1}}}
	if err := e.qp.Modify(&rtr, verbs.QPAttrState|verbs.QPAttrAV|verbs.QPAttrPathMTU|verbs.QPAttrDestQPN|
		verbs.QPAttrRQPSN|verbs.QPAttrMaxDestRdAtomic|verbs.QPAttrMinRNRTimer); err != nil {
		return err
	}
	rts := verbs.QPAttr{QPState: verbs.QPStateRTS, Timeout: h.timeout, RetryCnt: 7, RNRRetry: 7, SQPSN: h.psn, MaxRdAtomic: h.rd}
	return e.qp.Modify(&rts, verbs.QPAttrState|verbs.QPAttrTimeout|verbs.QPAttrRetryCnt|
		verbs.QPAttrRNRRetry|verbs.QPAttrSQPSN|verbs.QPAttrMaxQPRdAtomic)
}

// check asserts the invariants on a finished run.
func (c *invCase) check(t assert.TestingT, res *invRun) {
	assert.NoError(t, res.err, "the run fired %d events without going quiet: a livelock", invEventLimit)
	assert.Zero(t, res.pending, "events still pending after %v of virtual time: the connection never went quiet", invVirtualLimit)
	assert.Empty(t, res.postErrs, "posting the workload")
	for i, h := range c.hosts {
		e, pe, ph := res.ends[i], res.ends[1-i], c.hosts[1-i]

		e.swcs = append(e.swcs, pollAll(e.scq)...)
		e.rwcs = append(e.rwcs, pollAll(e.rcq)...)
		var got []string
		for _, wc := range e.swcs {
			got = append(got, invSendLine(wc.WRID, wc.Status, wc.Opcode, wc.ByteLen))
			assert.Equal(t, e.qp.QPNum, wc.QPNum, "%s: send completion %#x on the wrong QP", h.name, wc.WRID)
		}
		assert.Equal(t, h.sendWant(), got, "%s's send CQ: every signaled WR once, IBV_WC_SUCCESS, in posting order", h.name)
		got = nil
		for _, wc := range e.rwcs {
			got = append(got, invRecvLine(wc))
			assert.Equal(t, e.qp.QPNum, wc.QPNum, "%s: receive completion %#x on the wrong QP", h.name, wc.WRID)
		}
		assert.Equal(t, h.recvWant(), got, "%s's receive CQ: one completion per message from %s, in order, right byte_len and immediate; spares stay posted", h.name, ph.name)
		// rxe counts rdma_recvs once per successful receive completion,
		// whatever consumed the receive (SEND or WRITE with immediate).
		ok := 0
		for _, wc := range e.rwcs {
			if wc.Status == verbs.WCSuccess {
				ok++
			}
		}
		recvs, _ := e.ctx.Counters().Get("rdma_recvs")
		assert.EqualValues(t, ok, recvs, "%s: rdma_recvs against successful receive completions", h.name)

		// Atomics, said explicitly (the image check below also covers them).
		var wantF, gotF, wantC, gotC []uint64
		var sum uint64
		for _, s := range h.sends {
			switch s.op {
			case verbs.WRAtomicFetchAndAdd:
				wantF, gotF = append(wantF, s.orig), append(gotF, binary.LittleEndian.Uint64(e.local[s.local[0].off:]))
				sum += s.add
			case verbs.WRAtomicCmpAndSwp:
				wantC, gotC = append(wantC, s.orig), append(gotC, binary.LittleEndian.Uint64(e.local[s.local[0].off:]))
			}
		}
		seen := map[uint64]int{}
		for k, v := range gotF {
			if j, ok := seen[v]; ok {
				t.Errorf("%s: FETCH_ADD %d and %d both fetched %#x: an add was lost or executed twice", h.name, j, k, v)
			}
			seen[v] = k
		}
		assert.Equal(t, wantF, gotF, "%s's FETCH_ADD fetches: each returns the sum of the adds before it (executed exactly once, in order)", h.name)
		assert.Equal(t, sum, binary.LittleEndian.Uint64(pe.remote[ph.faaCell:]), "the counter at %s ends at the sum of %s's %d adds", ph.name, h.name, len(wantF))
		assert.Equal(t, wantC, gotC, "%s's CMP_AND_SWP fetches", h.name)

		diffs := invDiff(h.name+".local", e.local, h.localWant, &h.local)
		diffs = append(diffs, invDiff(h.name+".remote", e.remote, h.remWant, &h.remote)...)
		assert.Empty(t, diffs, "%s's memory must equal the model: SEND data in receive buffers, WRITE data at targets, READ data in destinations, everything else untouched", h.name)

		assert.Equal(t, verbs.QPStateRTS, e.qp.State(), "%s's QP", h.name)
		for {
			ev, ok := e.ctx.GetAsyncEvent()
			if !ok {
				break
			}
			if s := ev.Type.String(); s != "PORT_ERR" && s != "PORT_ACTIVE" {
				t.Errorf("%s: unexpected async event %s at %v", h.name, s, ev.Time)
			}
		}
	}
}

// report logs how to reproduce a failed seed and its fault plan. For the
// first few failing seeds of a run it also shrinks the case to a smaller
// one that still fails, and writes that one's workload and trace to a
// file.
func (c *invCase) report(t *testing.T, res *invRun) {
	var b strings.Builder
	fmt.Fprintf(&b, "seed %d failed; reproduce with:\n    %s\n", c.seed, invRepro(c.seed))
	fmt.Fprintf(&b, "fault plan:\n%s", invIndent(invOrNone(c.planText)))
	if invTraced.Add(1) > invMaxTraces && !*invTrace && *invOnly < 0 {
		b.WriteString("(not shrunk, no trace: only the first failing seeds of a run get them; the command above does)\n")
		t.Log(b.String())
		return
	}

	small, runs := c.shrink(invShrinkRuns)
	msgs := small.failures()
	fmt.Fprintf(&b, "shrunk in %d runs to %d WRs and %d plan lines that still fail:\n", runs, small.wrs(), strings.Count(small.planText, "\n"))
	fmt.Fprintf(&b, "fault plan:\n%sworkload:\n%s", invIndent(invOrNone(small.planText)), invIndent(small.describe()))
	fmt.Fprintf(&b, "failures:\n%s", invIndent(strings.Join(msgs[:min(len(msgs), 4)], "\n")))

	tr := &sim.Trace{}
	small.run(t, tr)
	text := tr.Text()
	path := filepath.Join(os.TempDir(), fmt.Sprintf("rocesim-rc-invariants-seed-%d.trace", c.seed))
	if err := os.WriteFile(path, []byte(b.String()+"trace:\n"+text), 0o644); err != nil {
		fmt.Fprintf(&b, "(could not write the trace: %v)\n", err)
	} else {
		fmt.Fprintf(&b, "all of this and the shrunk case's trace (%d events): %s\n", len(tr.Events()), path)
	}
	if *invTrace {
		b.WriteString("trace:\n" + text)
	} else {
		lines := strings.Split(strings.TrimSuffix(text, "\n"), "\n")
		fmt.Fprintf(&b, "last trace lines (-swarm.trace for all):\n%s", invIndent(strings.Join(lines[max(0, len(lines)-30):], "\n")))
	}
	// The same case twice must give the same run.
	if first, second := res.stats(), c.rerunStats(); first != second {
		t.Errorf("seed %d is not deterministic: a rerun differs:\n%s\n%s", c.seed, first, second)
	}
	t.Log(b.String())
}

func (c *invCase) rerunStats() string {
	c.model()
	return c.run(&invRecorder{}, nil).stats()
}

func invOrNone(plan string) string {
	if plan == "" {
		return "(none)\n"
	}
	return plan
}

// invTraced counts the failing seeds rerun with a trace; a run with many
// failures writes invMaxTraces traces and spends no more time on them.
var invTraced atomic.Int32

const invMaxTraces = 3

func invIndent(s string) string {
	return "    " + strings.ReplaceAll(strings.TrimSuffix(s, "\n"), "\n", "\n    ") + "\n"
}

// invCounters are the device counters that show which transport paths a
// run went through.
var invCounters = []string{"completer_retry_err", "rcvd_rnr_err", "rcvd_seq_err", "duplicate_request", "out_of_seq_request"}

func (r *invRun) counter(name string) uint64 {
	var n uint64
	for _, e := range r.ends {
		v, _ := e.ctx.Counters().Get(name)
		n += v
	}
	return n
}

func (r *invRun) stats() string {
	s := fmt.Sprintf("quiet at %v after %d events;", r.w.Now(), r.w.Scheduler().Fired())
	for _, name := range invCounters {
		s += fmt.Sprintf(" %s=%d", name, r.counter(name))
	}
	return s
}

// invCoverage counts the seeds that went through each interesting path,
// so a run shows the swarm is not testing the easy case only.
type invCoverage struct {
	mu                       sync.Mutex
	seeds, faulty, sw, wraps int
	slow, waited             int
	paths                    map[string]int
}

func (v *invCoverage) add(c *invCase, r *invRun) {
	v.mu.Lock()
	defer v.mu.Unlock()
	if v.paths == nil {
		v.paths = map[string]int{}
	}
	v.seeds++
	if c.planText != "" {
		v.faulty++
	}
	if c.sw {
		v.sw++
	}
	if c.link.Bandwidth != 0 {
		v.slow++
	}
	if r.waits > 0 {
		v.waited++
	}
	for _, h := range c.hosts {
		if h.psn > 1<<24-64 {
			v.wraps++
			break
		}
	}
	for _, name := range invCounters {
		if r.counter(name) > 0 {
			v.paths[name]++
		}
	}
}

func (v *invCoverage) String() string {
	v.mu.Lock()
	defer v.mu.Unlock()
	s := fmt.Sprintf("%d seeds: %d with faults, %d through a switch, %d on slow links, %d with a PSN wrap, %d where a post found its queue full; seeds that saw",
		v.seeds, v.faulty, v.sw, v.slow, v.wraps, v.waited)
	for _, name := range invCounters {
		s += fmt.Sprintf(" %s: %d,", name, v.paths[name])
	}
	return strings.TrimSuffix(s, ",")
}
