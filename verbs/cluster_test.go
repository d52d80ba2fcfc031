package verbs_test

import (
	"bytes"
	"errors"
	"fmt"
	"net/netip"
	"slices"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/rocesim/rocesim/faults"
	"github.com/rocesim/rocesim/sim"
	"github.com/rocesim/rocesim/sim/fabric"
	"github.com/rocesim/rocesim/verbs"
	"github.com/rocesim/rocesim/verbs/parallel"
	"github.com/rocesim/rocesim/wire/capture"
)

// alltoallHost is one host of clusterAlltoall: a QP toward every other
// host, a source block and a receive area of one slot per sender.
type alltoallHost struct {
	h        *verbs.Host
	ctx      *verbs.Context
	pd       *verbs.PD
	cq       *verbs.CQ
	src, dst *verbs.MR
	qps      []*verbs.QP
}

// alltoallBlock is the block host i writes to every other host.
func alltoallBlock(i, n int) []byte {
	b := make([]byte, n)
	for k := range b {
		b[k] = byte(i*31 + k*7)
	}
	return b
}

// clusterAlltoall sets up n hosts on one switch, added with add (a
// World's or a Cluster's AddHost) and switched by connectSwitch, and
// posts one msg-byte RDMA WRITE from every host to every other, each
// into the slot of its sender in the target's receive area.
func clusterAlltoall(t *testing.T, n, msg int, add func(string) *verbs.Host, connectSwitch func() error) []*alltoallHost {
	hs := make([]*alltoallHost, n)
	for i := range n {
		hs[i] = &alltoallHost{h: add(fmt.Sprintf("h%d", i)), qps: make([]*verbs.QP, n)}
	}
	require.NoError(t, connectSwitch())
	for i, a := range hs {
		var err error
		a.ctx, err = a.h.GetDeviceList()[0].Open()
		require.NoError(t, err)
		a.pd, err = a.ctx.AllocPD()
		require.NoError(t, err)
		a.cq, err = a.ctx.CreateCQ(2*n, nil, 0)
		require.NoError(t, err)
		a.src, err = a.pd.RegMR(alltoallBlock(i, msg), verbs.AccessLocalWrite)
		require.NoError(t, err)
		a.dst, err = a.pd.RegMR(make([]byte, n*msg), verbs.AccessLocalWrite|verbs.AccessRemoteWrite)
		require.NoError(t, err)
		for j := range n {
			if j != i {
				a.qps[j], err = a.pd.CreateQP(verbs.QPInitAttr{SendCQ: a.cq, RecvCQ: a.cq, Type: verbs.QPTypeRC,
					Cap: verbs.QPCap{MaxSendWR: 4, MaxRecvWR: 1, MaxSendSGE: 1, MaxRecvSGE: 1}})
				require.NoError(t, err)
			}
		}
	}
	for i, a := range hs {
		for j, b := range hs {
			if i == j {
				continue
			}
			e := &endpoint{host: a.h, ctx: a.ctx, qp: a.qps[j], retry: 7, rnr: 7}
			peer := &endpoint{host: b.h, ctx: b.ctx, qp: b.qps[i]}
			require.NoError(t, e.connect(peer))
		}
	}
	for i, a := range hs {
		for j, b := range hs {
			if i == j {
				continue
			}
			_, err := a.qps[j].PostSend([]verbs.SendWR{{WRID: uint64(j), Opcode: verbs.WRRDMAWrite, Flags: verbs.SendSignaled,
				SGList: []verbs.SGE{a.src.SGE(0, uint64(msg))}, RemoteAddr: b.dst.Addr + uint64(i*msg), RKey: b.dst.RKey}})
			require.NoError(t, err)
		}
	}
	return hs
}

// alltoallOutcome checks that every WRITE completed and landed, and
// returns what a run's determinism is judged by: each host's completions
// in the order its CQ gave them and its device's counters.
func alltoallOutcome(t *testing.T, hs []*alltoallHost, msg int) string {
	var out strings.Builder
	n := len(hs)
	for i, a := range hs {
		wcs := pollAll(a.cq)
		require.Len(t, wcs, n-1, "host %d's completions", i)
		fmt.Fprintf(&out, "h%d:", i)
		for _, wc := range wcs {
			require.Equal(t, verbs.WCSuccess, wc.Status, "host %d: %+v", i, wc)
			fmt.Fprintf(&out, " %d", wc.WRID)
		}
		for j := range n {
			if j != i {
				require.True(t, bytes.Equal(alltoallBlock(j, msg), a.dst.Bytes()[j*msg:(j+1)*msg]), "host %d: the block from %d", i, j)
			}
		}
		for _, c := range []string{"sent_pkts", "rcvd_pkts", "duplicate_request", "seq_err", "retry_exceeded_err"} {
			v, _ := a.ctx.Counters().Get(c)
			fmt.Fprintf(&out, " %s=%d", c, v)
		}
		out.WriteByte('\n')
	}
	return out.String()
}

// runCluster runs the alltoall of n hosts in a cluster of the parts and
// workers given, and returns its outcome and the time it ended.
// Every step goes to Each (EachAfter), so that the race detector sees
// the parts run side by side throughout.
func runCluster(t *testing.T, n, msg, parts, workers int, plan *faults.Plan) (string, sim.Time) {
	return runClusterOf(t, n, msg, verbs.ClusterConfig{World: verbs.WorldConfig{Seed: 7, Plan: plan}, Parts: parts,
		Each: parallel.Each(workers), EachAfter: -1})
}

// runClusterOf is runCluster with the cluster's whole configuration.
func runClusterOf(t *testing.T, n, msg int, cfg verbs.ClusterConfig) (string, sim.Time) {
	out, at, _ := runClusterHits(t, n, msg, cfg)
	return out, at
}

// runClusterHits is runClusterOf, with how often rule 1 of the plan acted
// in all the parts.
func runClusterHits(t *testing.T, n, msg int, cfg verbs.ClusterConfig) (string, sim.Time, uint64) {
	c, err := verbs.NewCluster(cfg)
	require.NoError(t, err)
	hs := clusterAlltoall(t, n, msg, c.AddHost, c.ConnectSwitch)
	require.NoError(t, c.Run())
	var hits uint64
	for _, w := range c.Parts() {
		hits += w.Fabric().RuleHits(1)
	}
	return alltoallOutcome(t, hs, msg), c.Now(), hits
}

// TestClusterAlltoall: an alltoall over a switch in a cluster of 2, 3
// and 5 parts completes every WRITE and lands every block, and the run
// is the same, completion for completion and to the nanosecond, on one
// goroutine and on several (parallel.Each), every time.
func TestClusterAlltoall(t *testing.T) {
	const n, msg = 12, 3000 // three packets and an ACK per WRITE
	for _, parts := range []int{2, 3, 5} {
		t.Run(fmt.Sprintf("parts=%d", parts), func(t *testing.T) {
			one, at := runCluster(t, n, msg, parts, 1, nil)
			for _, workers := range []int{2, parts, parts} {
				got, gotAt := runCluster(t, n, msg, parts, workers, nil)
				require.Equal(t, one, got, "workers=%d", workers)
				require.Equal(t, at, gotAt, "workers=%d", workers)
			}
			// Hosts in blocks (ClusterConfig.Hosts) rather than in turn:
			// the same guarantees.
			blocks := verbs.ClusterConfig{World: verbs.WorldConfig{Seed: 7}, Parts: parts, Hosts: n}
			one, at = runClusterOf(t, n, msg, blocks)
			each, steps := parallel.Each(parts), 0
			blocks.Each = func(n int, step func(int)) {
				steps++
				each(n, step)
			}
			got, gotAt := runClusterOf(t, n, msg, blocks)
			require.Equal(t, one, got)
			require.Equal(t, at, gotAt)
			// By default the steps after a sparse one run on the
			// caller's goroutine (EachAfter); the busy ones still go
			// to Each.
			require.Positive(t, steps, "no step was run by Each")
		})
	}
}

// TestClusterSparseStepsInTurn: a cluster whose steps fire a few events
// each (one SEND between two hosts of two parts) runs them on the
// caller's goroutine, handing Each only the run's first step (which
// carries what the program did between runs); with EachAfter -1 every
// step goes to Each; the run is the same either way.
func TestClusterSparseStepsInTurn(t *testing.T) {
	run := func(eachAfter int) (calls int, at sim.Time) {
		each := parallel.Each(2)
		c, err := verbs.NewCluster(verbs.ClusterConfig{World: verbs.WorldConfig{Seed: 1}, Parts: 2, EachAfter: eachAfter,
			Each: func(n int, step func(int)) {
				calls++
				each(n, step)
			}})
		require.NoError(t, err)
		a, b := sendOne(t, c, c.AddHost("a"), c.AddHost("b"))
		_, err = b.qp.PostRecv([]verbs.RecvWR{recvWR(1, b)})
		require.NoError(t, err)
		require.NoError(t, c.Run())
		require.Len(t, pollAll(a.cq), 1)
		return calls, c.Now()
	}
	sparse, at := run(0)
	assert.Equal(t, 1, sparse, "steps that went to Each: the run's first alone")
	every, everyAt := run(-1)
	assert.Greater(t, every, 2, "steps that went to Each")
	assert.Equal(t, at, everyAt)
}

// TestClusterOfOnePartIsAWorld: a cluster of one part runs exactly as a
// World with the same hosts and switch.
func TestClusterOfOnePartIsAWorld(t *testing.T) {
	const n, msg = 6, 2500
	w := verbs.NewWorld(verbs.WorldConfig{Seed: 7})
	hs := clusterAlltoall(t, n, msg, w.AddHost, w.ConnectSwitch)
	require.NoError(t, w.Run())
	want := alltoallOutcome(t, hs, msg)
	got, at := runCluster(t, n, msg, 1, 0, nil)
	assert.Equal(t, want, got)
	assert.Equal(t, w.Now(), at)
}

// TestClusterTakesFaults: a fault plan acts in every part; here it drops
// the first transmission of every WRITE's middle packet, whichever part
// its sender is in, once per WRITE, and every WRITE still completes
// through go-back-N, the same way on any number of goroutines.
func TestClusterTakesFaults(t *testing.T) {
	const n, msg = 6, 3000
	plan, err := faults.Parse("drop op=RC_RDMA_WRITE_MIDDLE tx=1")
	require.NoError(t, err)
	cfg := verbs.ClusterConfig{World: verbs.WorldConfig{Seed: 7, Plan: plan}, Parts: 3, Each: parallel.Each(1), EachAfter: -1}
	one, at, hits := runClusterHits(t, n, msg, cfg)
	// Every WRITE has one middle packet: its first transmission is
	// dropped once, in whichever part its sender is.
	assert.Equal(t, uint64(n*(n-1)), hits, "the rule acted once per WRITE")
	cfg.Each = parallel.Each(3)
	many, manyAt, manyHits := runClusterHits(t, n, msg, cfg)
	assert.Equal(t, one, many)
	assert.Equal(t, at, manyAt)
	assert.Equal(t, hits, manyHits)
	clean, cleanAt := runCluster(t, n, msg, 3, 1, nil)
	assert.NotEqual(t, clean, one, "the drops changed the run")
	assert.Greater(t, at, cleanAt, "recovering took time")
}

// TestClusterAlteredFrames: frames the fault plan alters, copies or holds
// back on their sender's link cross parts as they cross one World: a
// cluster of one part runs exactly as the World does, and in 2 and 3
// parts every WRITE completes and lands, each rule acts as often as in
// the World, and the run is the same on one goroutine and on several. A
// runt is dropped by the switch of the sender's part (it has no
// destination to cross to: it once failed the run); a frame whose
// destination MAC a rule rewrote goes where the MAC says, in whichever
// part, still addressed to its first destination (the second rule
// matches it there by that name, as in a World).
func TestClusterAlteredFrames(t *testing.T) {
	const n, msg = 6, 3000
	for _, text := range []string{
		"truncate len=10 op=RC_RDMA_WRITE_MIDDLE tx=1",
		"corrupt byte=5 bit=0 op=RC_RDMA_WRITE_MIDDLE tx=1 src=h0 dst=h1\ndrop link=h2-sw src=h0 dst=h1",
		"corrupt byte=5 bit=2 op=RC_RDMA_WRITE_MIDDLE tx=1 src=h4\ndelay 2us class=ack src=h3",
		"dup op=RC_RDMA_WRITE_FIRST tx=1\nreorder n=2 op=RC_RDMA_WRITE_LAST tx=1",
	} {
		plan, err := faults.Parse(text)
		require.NoError(t, err, text)
		type result struct {
			outcome string
			at      sim.Time
			hits    []uint64
		}
		hitsOf := func(ws []*verbs.World) []uint64 {
			hits := make([]uint64, len(plan.Rules))
			for _, w := range ws {
				for r := range hits {
					hits[r] += w.Fabric().RuleHits(r + 1)
				}
			}
			return hits
		}
		// A plan that left a QP retrying for ever fails fast.
		wc := verbs.WorldConfig{Seed: 7, Plan: plan, MaxEvents: 2_000_000}
		w := verbs.NewWorld(wc)
		hs := clusterAlltoall(t, n, msg, w.AddHost, w.ConnectSwitch)
		require.NoError(t, w.Run(), text)
		want := result{alltoallOutcome(t, hs, msg), w.Now(), hitsOf([]*verbs.World{w})}
		for _, h := range want.hits {
			require.NotZero(t, h, "%q: a rule that never acted tests nothing", text)
		}
		for _, parts := range []int{1, 2, 3} {
			var runs []result
			for _, workers := range []int{1, parts} {
				c, err := verbs.NewCluster(verbs.ClusterConfig{World: wc, Parts: parts, Hosts: n, Each: parallel.Each(workers), EachAfter: -1})
				require.NoError(t, err)
				hs := clusterAlltoall(t, n, msg, c.AddHost, c.ConnectSwitch)
				require.NoError(t, c.Run(), "%q, %d parts", text, parts)
				runs = append(runs, result{alltoallOutcome(t, hs, msg), c.Now(), hitsOf(c.Parts())})
			}
			assert.Equal(t, runs[0], runs[1], "%q, %d parts: on one goroutine and on %d", text, parts, parts)
			if parts == 1 {
				assert.Equal(t, want, runs[0], "%q: one part is the World", text)
			} else {
				assert.Equal(t, want.hits, runs[0].hits, "%q, %d parts: the rules' hits", text, parts)
			}
		}
	}
}

// TestClusterLinkDown: a link the plan takes down between a host in part
// 1 and the switch in part 0 is down on both sides: the host sees
// PORT_ERR and PORT_ACTIVE, the frames lost both ways are resent, and
// every WRITE completes, the same on one goroutine and on two.
func TestClusterLinkDown(t *testing.T) {
	const n, msg = 4, 3000
	plan, err := faults.Parse("down link=h1-sw from=2us to=40us")
	require.NoError(t, err)
	run := func(workers int) (string, sim.Time, []string) {
		c, err := verbs.NewCluster(verbs.ClusterConfig{World: verbs.WorldConfig{Seed: 7, Plan: plan}, Parts: 2, Each: parallel.Each(workers), EachAfter: -1})
		require.NoError(t, err)
		hs := clusterAlltoall(t, n, msg, c.AddHost, c.ConnectSwitch)
		require.Same(t, c.Parts()[1], hs[1].h.World())
		require.NoError(t, c.Run())
		var evs []string
		for {
			ev, ok := hs[1].ctx.GetAsyncEvent()
			if !ok {
				break
			}
			evs = append(evs, ev.Type.String())
		}
		return alltoallOutcome(t, hs, msg), c.Now(), evs
	}
	one, at, evs := run(1)
	assert.Equal(t, []string{"PORT_ERR", "PORT_ACTIVE"}, evs)
	assert.Greater(t, at, sim.Time(40*sim.Microsecond), "the WRITEs to and from h1 waited for the link")
	two, at2, _ := run(2)
	assert.Equal(t, one, two)
	assert.Equal(t, at, at2)
}

// TestClusterRefuses: what a cluster cannot do is refused when it is
// made, with the field named.
func TestClusterRefuses(t *testing.T) {
	still := fabric.DefaultLinkConfig()
	still.Propagation = 0
	for _, c := range []struct {
		cfg  verbs.ClusterConfig
		want string
	}{
		{verbs.ClusterConfig{Parts: 0}, "Parts is 0"},
		{verbs.ClusterConfig{Parts: 2, Hosts: -1}, "Hosts is -1"},
		{verbs.ClusterConfig{Parts: 2, World: verbs.WorldConfig{Link: still}}, "propagation delay is 0s"},
	} {
		_, err := verbs.NewCluster(c.cfg)
		assert.ErrorContains(t, err, c.want)
	}
	c, err := verbs.NewCluster(verbs.ClusterConfig{Parts: 2})
	require.NoError(t, err)
	_, err = c.AddHostIn(2, "a")
	assert.ErrorContains(t, err, "no part 2 (the cluster has 2)")
	h, err := c.AddHostIn(1, "a")
	require.NoError(t, err)
	assert.Same(t, c.Parts()[1], h.World())
	assert.Equal(t, verbs.HostAddrOf(1).IPv4, h.IPv4())
}

// TestClusterRunTo: RunTo leaves every part at the time asked, a run cut
// in two completes as one does, Progress is called from the caller's
// goroutine as the parts go, and a part's World refuses to run alone.
func TestClusterRunTo(t *testing.T) {
	const n, msg = 64, 4096
	var calls int
	var last verbs.Progress
	c, err := verbs.NewCluster(verbs.ClusterConfig{World: verbs.WorldConfig{Seed: 7, Progress: func(p verbs.Progress) {
		calls++
		last = p
	}}, Parts: 2, Each: parallel.Each(2), EachAfter: -1})
	require.NoError(t, err)
	hs := clusterAlltoall(t, n, msg, c.AddHost, c.ConnectSwitch)
	err = hs[1].h.World().Run()
	require.ErrorContains(t, err, "Run: this world is part 1 of a cluster: use the cluster's")

	mid := sim.Time(3 * sim.Microsecond)
	require.NoError(t, c.RunTo(mid))
	for i, w := range c.Parts() {
		assert.Equal(t, mid, w.Now(), "part %d", i)
	}
	assert.Equal(t, mid, c.Now())
	require.NoError(t, c.Run())
	alltoallOutcome(t, hs, msg)
	for i, w := range c.Parts() {
		assert.Equal(t, c.Now(), w.Now(), "part %d ends at the cluster's time", i)
	}
	assert.Greater(t, calls, 0, "Progress")
	assert.Greater(t, last.Frames, uint64(0))
	assert.LessOrEqual(t, last.Now, c.Now())

	// Verbs between runs: every host writes to the next once more.
	for i, a := range hs {
		j := (i + 1) % n
		_, err := a.qps[j].PostSend([]verbs.SendWR{{WRID: 1000, Opcode: verbs.WRRDMAWrite, Flags: verbs.SendSignaled,
			SGList: []verbs.SGE{a.src.SGE(0, 8)}, RemoteAddr: hs[j].dst.Addr, RKey: hs[j].dst.RKey}})
		require.NoError(t, err)
	}
	require.NoError(t, c.Run())
	for i, a := range hs {
		wcs := pollAll(a.cq)
		require.Len(t, wcs, 1, "host %d", i)
		assert.Equal(t, verbs.WCSuccess, wcs[0].Status)
		assert.Equal(t, uint64(1000), wcs[0].WRID)
	}
}

// TestClusterLinkLocalGIDs: a cluster's hosts get the addresses a World's
// would, link-local GIDs included, and every part knows every host's.
func TestClusterLinkLocalGIDs(t *testing.T) {
	c, err := verbs.NewCluster(verbs.ClusterConfig{World: verbs.WorldConfig{LinkLocalGID: true}, Parts: 3})
	require.NoError(t, err)
	w := verbs.NewWorld(verbs.WorldConfig{LinkLocalGID: true})
	for i := range 5 {
		name := fmt.Sprintf("h%d", i)
		h, ref := c.AddHost(name), w.AddHost(name)
		assert.Equal(t, ref.IPv6(), h.IPv6(), "host %d", i)
		assert.Equal(t, ref.IPv4(), h.IPv4(), "host %d", i)
		assert.True(t, h.IPv6().IsLinkLocalUnicast())
	}
	for i, h := range c.Hosts() {
		for j, o := range c.Hosts() {
			if i != j {
				assert.True(t, h.HasNeighbour(o.IPv6()), "%s knows %s", h.Name(), o.Name())
				assert.True(t, h.HasNeighbour(o.IPv4()), "%s knows %s", h.Name(), o.Name())
			}
		}
	}
}

// twoFlows runs h0 -> h2 and h3 -> h1, one 5000-byte WRITE each, among
// four hosts on a switch, added by add and switched by connectSwitch,
// and returns once the run that run does is over.
func twoFlows(t *testing.T, add func(string) *verbs.Host, connectSwitch func() error, run func() error) {
	var hs []*verbs.Host
	for i := range 4 {
		hs = append(hs, add(fmt.Sprintf("h%d", i)))
	}
	require.NoError(t, connectSwitch())
	for _, f := range [][2]int{{0, 2}, {3, 1}} {
		a, b := setup(hs[f[0]], 100), setup(hs[f[1]], 200)
		a.buf, b.buf = a.buf[:0], b.buf[:0]
		require.NoError(t, a.connect(b))
		require.NoError(t, b.connect(a))
		src, err := a.pd.RegMR(alltoallBlock(f[0], 5000), verbs.AccessLocalWrite)
		require.NoError(t, err)
		dst, err := b.pd.RegMR(make([]byte, 5000), verbs.AccessLocalWrite|verbs.AccessRemoteWrite)
		require.NoError(t, err)
		_, err = a.qp.PostSend([]verbs.SendWR{{WRID: 1, Opcode: verbs.WRRDMAWrite, Flags: verbs.SendSignaled,
			SGList: []verbs.SGE{src.SGE(0, 5000)}, RemoteAddr: dst.Addr, RKey: dst.RKey}})
		require.NoError(t, err)
		defer func() {
			wcs := pollAll(a.cq)
			require.Len(t, wcs, 1)
			require.Equal(t, verbs.WCSuccess, wcs[0].Status)
			require.Equal(t, alltoallBlock(f[0], 5000), dst.Bytes())
		}()
	}
	require.NoError(t, run())
}

// captured is a capture's packets as comparable lines (time, interface
// name, bytes, comments), in file order.
func captured(t *testing.T, file []byte) []string {
	r, err := capture.NewReader(bytes.NewReader(file))
	require.NoError(t, err)
	var out []string
	var rec capture.Record
	for r.Next(&rec) == nil {
		ifc, ok := r.Interface(rec.Interface)
		require.True(t, ok)
		out = append(out, fmt.Sprintf("%012d %s %x %q", rec.Time, ifc.Name, rec.Data, rec.Comments))
	}
	return out
}

// TestClusterCapture: a cluster's capture holds what a World's holds for
// the same run, frame for frame with the same time, interface, bytes and
// comment (the notes of frames that crossed parts included), in time
// order (frames of one instant may come in another order); and it is the
// same file on one goroutine and on two.
func TestClusterCapture(t *testing.T) {
	plan, err := faults.Parse("drop op=RC_RDMA_WRITE_MIDDLE tx=1")
	require.NoError(t, err)
	var ref bytes.Buffer
	pw := capture.NewPcapngWriter(&ref, capture.PcapngOptions{})
	w := verbs.NewWorld(verbs.WorldConfig{Seed: 3, Plan: plan, Capture: pw})
	twoFlows(t, w.AddHost, w.ConnectSwitch, w.Run)
	require.NoError(t, pw.Close())
	want := captured(t, ref.Bytes())
	require.NotEmpty(t, want)

	var files [][]byte
	for _, workers := range []int{1, 2} {
		var buf bytes.Buffer
		cw := capture.NewPcapngWriter(&buf, capture.PcapngOptions{})
		c, err := verbs.NewCluster(verbs.ClusterConfig{World: verbs.WorldConfig{Seed: 3, Plan: plan, Capture: cw}, Parts: 2, Hosts: 4,
			Each: parallel.Each(workers), EachAfter: -1})
		require.NoError(t, err)
		twoFlows(t, c.AddHost, c.ConnectSwitch, c.Run)
		require.NoError(t, cw.Close())
		got := captured(t, buf.Bytes())
		// In time order; frames of one instant may come in another
		// order than the World's (by part first), so the two are
		// compared as sets.
		assert.True(t, slices.IsSortedFunc(got, func(a, b string) int { return strings.Compare(a[:12], b[:12]) }), "in time order")
		got = slices.Clone(got)
		slices.Sort(got)
		slices.Sort(want)
		assert.Equal(t, want, got)
		files = append(files, buf.Bytes())
	}
	assert.Equal(t, files[0], files[1], "the same file on one goroutine and on two")
	joined := strings.Join(captured(t, files[0]), "\n")
	assert.Contains(t, joined, "dropped by rule 1")
	assert.Contains(t, joined, "sw->h2", "the second hop of a frame that crossed into part 1")
}

// runChunks runs the alltoall of n hosts in a cluster of parts with plan,
// by RunTo calls chunk apart (0: one Run), and returns its outcome, end
// time and the events the parts fired.
func runChunks(t *testing.T, n, parts int, plan *faults.Plan, chunk sim.Duration) (string, sim.Time, uint64) {
	c, err := verbs.NewCluster(verbs.ClusterConfig{World: verbs.WorldConfig{Seed: 5, Plan: plan}, Parts: parts, Each: parallel.Each(2), EachAfter: -1})
	require.NoError(t, err)
	hs := clusterAlltoall(t, n, 3000, c.AddHost, c.ConnectSwitch)
	if chunk == 0 {
		require.NoError(t, c.Run())
	} else {
		for c.Pending() > 0 {
			require.NoError(t, c.RunTo(c.Now().Add(chunk)))
		}
	}
	var fired uint64
	for _, w := range c.Parts() {
		fired += w.Scheduler().Fired()
	}
	return alltoallOutcome(t, hs, 3000), c.Now(), fired
}

// TestClusterTrace: a cluster's trace holds what a World's holds for the
// same run, event for event with the same time and text (the faults'
// and the frames that crossed parts included), in time order (events of
// one instant may come in another order), its Hook sees every event on
// the program's goroutine as it is written, and it is the same trace on
// one goroutine and on two.
func TestClusterTrace(t *testing.T) {
	plan, err := faults.Parse("drop op=RC_RDMA_WRITE_MIDDLE tx=1")
	require.NoError(t, err)
	texts := func(tr *sim.Trace) []string {
		var out []string
		for _, e := range tr.Events() {
			out = append(out, e.String())
		}
		return out
	}
	ref := &sim.Trace{}
	w := verbs.NewWorld(verbs.WorldConfig{Seed: 3, Plan: plan, Trace: ref})
	twoFlows(t, w.AddHost, w.ConnectSwitch, w.Run)
	want := texts(ref)
	require.NotEmpty(t, want)
	require.Contains(t, ref.Text(), "frame-drop", "the plan's drop is in the trace")

	var traces [][]string
	for _, workers := range []int{1, 2} {
		hooked := 0
		tr := &sim.Trace{Hook: func(*sim.Event) { hooked++ }}
		c, err := verbs.NewCluster(verbs.ClusterConfig{World: verbs.WorldConfig{Seed: 3, Plan: plan, Trace: tr}, Parts: 2, Hosts: 4,
			Each: parallel.Each(workers), EachAfter: -1})
		require.NoError(t, err)
		twoFlows(t, c.AddHost, c.ConnectSwitch, c.Run)
		got := texts(tr)
		assert.Equal(t, len(got), hooked, "the Hook saw every event")
		assert.True(t, slices.IsSortedFunc(tr.Events(), func(a, b sim.Event) int { return int(a.Time - b.Time) }), "in time order")
		traces = append(traces, got)
		got = slices.Clone(got)
		slices.Sort(got)
		w := slices.Clone(want)
		slices.Sort(w)
		assert.Equal(t, w, got, "workers=%d: the World's events", workers)
	}
	assert.Equal(t, traces[0], traces[1], "the same trace on one goroutine and on two")

	// A trace that keeps 10 events keeps the first 10 (once it is full,
	// the parts stop building events for it, as a World's devices do).
	short := &sim.Trace{Limit: 10}
	c, err := verbs.NewCluster(verbs.ClusterConfig{World: verbs.WorldConfig{Seed: 3, Plan: plan, Trace: short}, Parts: 2, Hosts: 4,
		Each: parallel.Each(2), EachAfter: -1})
	require.NoError(t, err)
	twoFlows(t, c.AddHost, c.ConnectSwitch, c.Run)
	assert.True(t, short.Full())
	assert.Equal(t, traces[0][:10], texts(short))
}

// TestClusterObserve: a cluster's Observe gets the records a World's gets
// for the same run, each with its time, link, direction, nodes (by name
// and index), transmission, drop, copy, comment and frame, in time order
// (records of one instant may come in another order), on the program's
// goroutine, and the same on one goroutine and on two.
func TestClusterObserve(t *testing.T) {
	plan, err := faults.Parse("drop op=RC_RDMA_WRITE_MIDDLE tx=1")
	require.NoError(t, err)
	var lines []string
	var times []sim.Time
	observe := func(r *fabric.FrameRecord) {
		times = append(times, r.Time)
		lines = append(lines, fmt.Sprintf("%012d %s %s %s>%s %d>%d first=%v tx=%d dropped=%v copy=%d %q %x",
			r.Time, r.Link, r.Dir, r.From, r.To, r.FromNode, r.ToNode, r.First, r.Tx, r.Dropped, r.Copy, r.Comment, r.Frame))
	}
	w := verbs.NewWorld(verbs.WorldConfig{Seed: 3, Plan: plan, Observe: observe})
	twoFlows(t, w.AddHost, w.ConnectSwitch, w.Run)
	want := slices.Clone(lines)
	require.NotEmpty(t, want)
	require.True(t, slices.ContainsFunc(want, func(l string) bool { return strings.Contains(l, "dropped=true") }), "the plan's drop is observed")
	slices.Sort(want)

	var runs [][]string
	for _, workers := range []int{1, 2} {
		lines, times = nil, nil
		c, err := verbs.NewCluster(verbs.ClusterConfig{World: verbs.WorldConfig{Seed: 3, Plan: plan, Observe: observe}, Parts: 2, Hosts: 4,
			Each: parallel.Each(workers), EachAfter: -1})
		require.NoError(t, err)
		twoFlows(t, c.AddHost, c.ConnectSwitch, c.Run)
		assert.True(t, slices.IsSorted(times), "in time order")
		runs = append(runs, lines)
		got := slices.Clone(lines)
		slices.Sort(got)
		assert.Equal(t, want, got, "workers=%d: the World's records", workers)
	}
	assert.Equal(t, runs[0], runs[1], "the same records on one goroutine and on two")
}

// TestClusterRunToInChunks: a run cut into RunTo calls at any times, until
// Pending says nothing is left (frames between parts included), fires
// the same events and completes the same way as the run in one, as in a
// World, though a call may end inside a step: the next one finishes that
// step before it starts another, so that the frames that crossed are
// delivered where an uncut run delivers them (begun again, a step would
// deliver them sooner, and an arrival could take another place among the
// events of its instant).
func TestClusterRunToInChunks(t *testing.T) {
	for _, c := range []struct {
		rule  string
		parts int
		n     int
		chunk sim.Duration
	}{
		{"delay 3us prob=0.1", 2, 12, 777},
		{"reorder n=2 prob=0.05", 3, 7, 2500},
		{"drop op=RC_RDMA_WRITE_MIDDLE tx=1", 3, 6, 333},
	} {
		plan, err := faults.Parse(c.rule)
		require.NoError(t, err)
		// The clock of a run in chunks ends at the last chunk's end, as
		// a World's does after RunTo: the events tell.
		one, at, fired := runChunks(t, c.n, c.parts, plan, 0)
		cut, cutAt, cutFired := runChunks(t, c.n, c.parts, plan, c.chunk)
		assert.Equal(t, one, cut, "%s", c.rule)
		assert.Equal(t, fired, cutFired, "%s", c.rule)
		assert.LessOrEqual(t, cutAt.Sub(at), c.chunk, "%s", c.rule)
	}
}

// TestClusterPartsGuarded: what must happen to every part at once is
// refused on one part with the call named; a host added through a part
// is the cluster's; hosts cannot be added once traffic has started; and
// rules that count frames over the whole world are refused.
func TestClusterPartsGuarded(t *testing.T) {
	c, err := verbs.NewCluster(verbs.ClusterConfig{Parts: 2})
	require.NoError(t, err)
	a := c.AddHost("a")
	b := c.Parts()[1].AddHost("b")
	assert.Same(t, c.Parts()[1], b.World())
	assert.Equal(t, verbs.HostAddrOf(2).IPv4, b.IPv4(), "numbered among the cluster's hosts")
	assert.Equal(t, []*verbs.Host{a, b}, c.Hosts())
	w := c.Parts()[0]
	assert.ErrorContains(t, w.Connect(a, b), "Connect: this world is part 0 of a cluster")
	assert.ErrorContains(t, w.ConnectSwitch(), "ConnectSwitch: this world is part 0")
	assert.ErrorContains(t, w.SetPlan(nil), "SetPlan: this world is part 0")
	_, err = w.RunUntil(func() bool { return false })
	assert.ErrorContains(t, err, "RunUntil: this world is part 0")
	assert.ErrorContains(t, w.RunFor(sim.Microsecond), "RunTo: this world is part 0")
	assert.PanicsWithError(t, "verbs: AddPortHost: this world is part 0 of a cluster: use the cluster's (Cluster.Run, RunTo, ConnectSwitch; the plan in ClusterConfig), which keep its parts in step", func() {
		w.AddPortHost("p", verbs.HostAddrOf(9), 9, nil, func(frame, note []byte) {})
	})

	sendOne(t, c, a, b)
	_, err = c.AddHostIn(0, "late")
	assert.ErrorContains(t, err, "host late: fabric: topology cannot change once traffic has started")

	for _, rule := range []string{"drop nth=3", "drop op=RC_SEND_ONLY first=1", "down link=a-sw after=3"} {
		plan, err := faults.Parse(rule)
		require.NoError(t, err)
		_, err = verbs.NewCluster(verbs.ClusterConfig{Parts: 2, World: verbs.WorldConfig{Plan: plan}})
		assert.ErrorContains(t, err, "rule 1: ", rule)
		assert.ErrorContains(t, err, "not supported in a cluster of more than one part", rule)
		_, err = verbs.NewCluster(verbs.ClusterConfig{Parts: 1, World: verbs.WorldConfig{Plan: plan}})
		assert.NoError(t, err, "one part counts as a World does: %s", rule)
	}
}

// TestClusterRunawayDiagnosis: b never posts a receive and a's rnr_retry
// is 7, with a and b in two parts: a's retransmissions are seen in a's
// part, b's RNR NAKs in b's, and the cluster's diagnosis joins them as a
// World's does, whichever part's budget runs out first; a drop rule's
// count comes from every part.
func TestClusterRunawayDiagnosis(t *testing.T) {
	for _, budget := range []uint64{3000, 5000, 7001} {
		plan, err := faults.Parse("drop op=RC_ACKNOWLEDGE prob=0.01")
		require.NoError(t, err)
		c, err := verbs.NewCluster(verbs.ClusterConfig{World: verbs.WorldConfig{Seed: 1, MaxEvents: budget, Plan: plan,
			QPName: func(host string, qpn uint32) string { return host + ".client" }}, Parts: 2, Each: parallel.Each(2), EachAfter: -1})
		require.NoError(t, err)
		a, _ := sendOne(t, c, c.AddHost("a"), c.AddHost("b"))
		err = c.Run()
		var ra *verbs.RunawayError
		require.True(t, errors.As(err, &ra), "want a *verbs.RunawayError, got %v", err)
		require.NotEmpty(t, ra.Stalls, "budget %d", budget)
		s := ra.Stalls[0]
		assert.Equal(t, a.qp.QPNum, s.QPN)
		assert.Greater(t, s.RNRNAKs, uint64(50), "budget %d", budget)
		assert.Contains(t, ra.Why(), "a.client was refused with ")
		assert.Contains(t, ra.Why(), "RNR NAKs by b")
		assert.Contains(t, ra.Why(), "rnr_retry 7 retries forever and b never has a receive posted for it")
		assert.Equal(t, c.Diagnose(nil), describeFor(c), "Diagnose says what the error says")
	}
}

// describeFor is a cluster's diagnosis said through a RunawayError.
func describeFor(c *verbs.Cluster) string {
	return (&verbs.RunawayError{Stalls: c.Stalls(), Faults: c.FaultSummary()}).Why()
}

// sendOne switches the cluster's hosts, connects an RC QP of a to one of
// b and posts one 8-byte SEND from a, for which b has no receive.
func sendOne(t *testing.T, c *verbs.Cluster, ha, hb *verbs.Host) (a, b *endpoint) {
	require.NoError(t, c.ConnectSwitch())
	a, b = setup(ha, 1), setup(hb, 2)
	require.NoError(t, a.connect(b))
	require.NoError(t, b.connect(a))
	_, err := a.qp.PostSend([]verbs.SendWR{sendWR(1, a, 8)})
	require.NoError(t, err)
	return a, b
}

// TestClusterSwitchInEveryPart: every part has the switch, with the ports
// toward its own hosts (connected once: a second ConnectSwitch is
// refused). A SEND between two hosts of part 1 never reaches
// part 0 (no frame crosses, part 0's links carry nothing); one from part
// 0 to part 1 crosses once each way, arriving at part 1's switch from
// part 1's copy of the sender's link; a datagram to a multicast group
// reaches the members in both parts, once each.
func TestClusterSwitchInEveryPart(t *testing.T) {
	c, err := verbs.NewCluster(verbs.ClusterConfig{World: verbs.WorldConfig{Seed: 3}, Parts: 2, Hosts: 4})
	require.NoError(t, err)
	hs := []*verbs.Host{c.AddHost("h0"), c.AddHost("h1"), c.AddHost("h2"), c.AddHost("h3")}
	require.Same(t, c.Parts()[1], hs[2].World())
	a, b := sendOne(t, c, hs[2], hs[3])
	// A second ConnectSwitch is refused and changes nothing: the
	// traffic below crosses parts as it would have.
	assert.ErrorIs(t, c.ConnectSwitch(), fabric.ErrConnected)
	_, err = b.qp.PostRecv([]verbs.RecvWR{recvWR(9, b)})
	require.NoError(t, err)
	require.NoError(t, c.Run())
	require.Len(t, pollAll(a.cq), 1)
	links := func(p int) []*fabric.Link { return c.Parts()[p].Fabric().Links() }
	for _, l := range links(0) {
		for dir := range 2 {
			assert.Zero(t, l.Stats(dir).TxFrames+l.Stats(dir).RxFrames, "part 0's %s carried a frame of part 1's SEND", l.DirName(dir))
		}
	}
	var within uint64
	for _, l := range links(1) {
		within += l.Stats(0).TxFrames + l.Stats(1).TxFrames
	}
	assert.Equal(t, uint64(4), within, "the SEND and its ACK, each on two links of part 1")

	// h0 (part 0) to h3 (part 1).
	x, y := setup(hs[0], 5), setup(hs[3], 6)
	require.NoError(t, x.connect(y))
	require.NoError(t, y.connect(x))
	_, err = y.qp.PostRecv([]verbs.RecvWR{recvWR(1, y)})
	require.NoError(t, err)
	_, err = x.qp.PostSend([]verbs.SendWR{sendWR(2, x, 64)})
	require.NoError(t, err)
	require.NoError(t, c.Run())
	require.Len(t, pollAll(x.cq), 1)
	up0, up1 := links(0)[0].Stats(0), links(1)[0].Stats(0) // h0 -> sw in each part
	assert.Equal(t, uint64(1), up0.TxFrames, "h0's SEND, serialized in part 0")
	assert.Zero(t, up0.RxFrames, "nor does it arrive at part 0's switch")
	assert.Equal(t, uint64(1), up1.RxFrames, "it arrives at part 1's")
	assert.Equal(t, uint64(2), links(1)[3].Stats(1).TxFrames, "sw -> h3 in part 1: the first SEND, then h0's")

	// A group with a member in each part and the sender in part 0.
	const qkey = 0x0badcafe
	group := netip.MustParseAddr("::ffff:239.1.2.4")
	var members []*verbs.QP
	var eps []*endpoint
	for _, i := range []int{1, 2, 3} {
		require.NoError(t, hs[i].JoinGroup(netip.MustParseAddr("239.1.2.4")))
		e := setup(hs[i], 1)
		q := udQP(t, e, qkey)
		require.NoError(t, q.AttachMcast(group, 0))
		recvs(t, e, q, 10, 0, 2)
		members, eps = append(members, q), append(eps, e)
	}
	s := setup(hs[0], 1)
	sq := udQP(t, s, qkey)
	ah, err := s.pd.CreateAH(verbs.AHAttr{IsGlobal: true, PortNum: 1, GRH: verbs.GRH{DGID: group, SGIDIndex: 1, HopLimit: 64}})
	require.NoError(t, err)
	_, err = sq.PostSend([]verbs.SendWR{{WRID: 1, Opcode: verbs.WRSend, Flags: verbs.SendSignaled, AH: ah,
		RemoteQPN: verbs.MulticastQPN, RemoteQKey: qkey, SGList: []verbs.SGE{s.mr.SGE(0, 16)}}})
	require.NoError(t, err)
	require.NoError(t, c.Run())
	for k, e := range eps {
		wcs := pollAll(e.cq)
		require.Len(t, wcs, 1, "member %d", k+1)
		assert.Equal(t, verbs.WCSuccess, wcs[0].Status)
		assert.Equal(t, members[k].QPNum, wcs[0].QPNum)
	}
}

// TestClusterPeerHints: a QP connected between runs to a host of another
// part gets the hint of that host's QP (its frames carry it, for the
// arrival's prefetch); one connected during a step, from an event of its
// part, gets it from a host of its own part but none from a host of
// another part, whose goroutine may be making QPs in its device at that
// moment (here it is: under `make race` a read of the other part's
// table would be reported).
func TestClusterPeerHints(t *testing.T) {
	c, err := verbs.NewCluster(verbs.ClusterConfig{World: verbs.WorldConfig{Seed: 1}, Parts: 2, Hosts: 4,
		Each: parallel.Each(2), EachAfter: -1})
	require.NoError(t, err)
	hs := []*verbs.Host{c.AddHost("h0"), c.AddHost("h1"), c.AddHost("h2"), c.AddHost("h3")} // h0, h1 in part 0
	require.NoError(t, c.ConnectSwitch())
	a, far := setup(hs[0], 1), setup(hs[2], 2)
	require.NoError(t, a.connect(far))
	want := hs[2].QPHint(far.qp.QPNum)
	require.NotZero(t, want.Addr)
	assert.Equal(t, want, a.qp.PeerHint(), "connected between runs: the other part's QP")

	inStep, near, far2 := setup(hs[0], 3), setup(hs[1], 4), setup(hs[2], 5)
	inStep2 := setup(hs[0], 6)
	var errs [2]error
	s0, s2 := hs[0].World().Scheduler(), hs[2].World().Scheduler()
	s0.Schedule(s0.Now(), sim.HandlerFunc(func(sim.Time, uint64) {
		errs[0] = errors.Join(inStep.connect(far2), inStep2.connect(near))
	}), 0)
	s2.Schedule(s2.Now(), sim.HandlerFunc(func(sim.Time, uint64) {
		for range 64 {
			_, err := far2.pd.CreateQP(verbs.QPInitAttr{SendCQ: far2.cq, RecvCQ: far2.cq, Type: verbs.QPTypeRC,
				Cap: verbs.QPCap{MaxSendWR: 1, MaxRecvWR: 1, MaxSendSGE: 1, MaxRecvSGE: 1}})
			errs[1] = errors.Join(errs[1], err)
		}
	}), 0)
	require.NoError(t, c.Run())
	require.NoError(t, errors.Join(errs[:]...))
	assert.Zero(t, inStep.qp.PeerHint(), "connected during a step to another part's host: no hint")
	assert.Equal(t, hs[1].QPHint(near.qp.QPNum), inStep2.qp.PeerHint(), "connected during a step within its part")
	assert.NotZero(t, inStep2.qp.PeerHint().Addr)
}
