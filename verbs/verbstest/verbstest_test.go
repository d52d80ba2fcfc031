package verbstest_test

import (
	"bytes"
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/rocesim/rocesim/sim"
	"github.com/rocesim/rocesim/verbs"
	"github.com/rocesim/rocesim/verbs/verbstest"
	"github.com/rocesim/rocesim/wire/capture"
)

// write posts a signaled RDMA WRITE of n bytes from src to dst.
func write(t verbstest.TB, from *verbstest.Endpoint, src, dst *verbs.MR, n int) {
	t.Helper()
	_, err := from.QP.PostSend([]verbs.SendWR{{WRID: 1, Opcode: verbs.WRRDMAWrite, Flags: verbs.SendSignaled,
		SGList: []verbs.SGE{src.SGE(0, uint64(n))}, RemoteAddr: dst.Addr, RKey: dst.RKey}})
	require.NoError(t, err)
}

// TestLostPacketRecovered: a fault plan from the options, a completion
// awaited, the retransmission counted on the wire, the data checked.
func TestLostPacketRecovered(t *testing.T) {
	w := verbstest.New(t, verbstest.Options{Faults: "drop op=RC_RDMA_WRITE_MIDDLE tx=1"})
	a, b := w.Pair("a", "b", verbstest.QPOptions{})
	src, dst := a.Host.Buffer(3000), b.Host.Buffer(3000)
	for i := range src.Bytes() {
		src.Bytes()[i] = byte(i * 7)
	}
	write(t, a, src, dst, 3000)
	wc := w.RequireCompletion(a.CQ, verbs.WCSuccess, verbs.WCRDMAWrite)
	assert.Equal(t, uint64(1), wc.WRID)
	assert.Equal(t, src.Bytes(), dst.Bytes())
	w.RequireFrames("op=RC_RDMA_WRITE_MIDDLE", 2)
	w.RequireFrames("op=RC_RDMA_WRITE_MIDDLE tx=2", 1)
	nak := w.RequireFrames("class=nak src=b", 1)
	assert.Equal(t, "NAK(PSN sequence error)", nak[0].Packet.AETH.Syndrome().String())
	w.RequireNoFrames("class=rnr")
	assert.EqualValues(t, 1, w.RuleHits(1), "the rule dropped one frame")
	assert.EqualValues(t, 0, w.RuleHits(2), "a rule outside the plan")
	assert.Equal(t, 5, len(w.Frames("dst=b")), "FIRST, MIDDLE (dropped), LAST (out of sequence: NAK), MIDDLE and LAST again")
	assert.Equal(t, 2, len(w.Frames("src=b")), "the NAK and the final ACK")
}

// TestFaultsChangeMidTest: the plan changes while the test runs; a link
// cut now fails a WR after exactly its retry budget.
func TestFaultsChangeMidTest(t *testing.T) {
	w := verbstest.New(t, verbstest.Options{Nodes: []string{"client", "server"}})
	c, s := w.Pair("client", "server", verbstest.QPOptions{Timeout: 10, RetryCnt: 2})
	src, dst := c.Host.Buffer(64), s.Host.Buffer(64)
	write(t, c, src, dst, 64)
	w.RequireCompletion(c.CQ, verbs.WCSuccess, verbs.WCRDMAWrite)

	w.AddFaults("down link=" + s.Host.LinkName())
	start := w.Now()
	write(t, c, src, dst, 64)
	w.RequireCompletion(c.CQ, verbs.WCRetryExcErr, verbs.WCRDMAWrite)
	timeout := verbs.ProfileRXE.ACKTimeout(10) // 4.096 µs · 2^10 = 4.2 ms: 1 jiffy, 4 ms
	elapsed := w.Now().Sub(start)
	// Three timeouts: the first transmission and two retries; the first
	// is shorter, since rxe's retransmit timer, armed by the first WRITE
	// and never stopped, fires one timeout after that WRITE.
	assert.Greater(t, elapsed, 2*timeout, "three timeouts: the first transmission and two retries")
	assert.LessOrEqual(t, elapsed, 3*timeout)
	w.RequireFrames("src=client op=RC_RDMA_WRITE_ONLY", 4) // 1 + 3 dropped
	w.RequireFrames("src=client op=RC_RDMA_WRITE_ONLY tx=3", 1)
	w.RequireQPState(c.QP, verbs.QPStateErr)
	w.RequireQPState(s.QP, verbs.QPStateRTS)
}

// TestPollerPause: an application loop that stops re-posting receives
// for a while causes RNR NAKs, then the SEND succeeds.
func TestPollerPause(t *testing.T) {
	w := verbstest.New(t, verbstest.Options{})
	a, b := w.Pair("a", "b", verbstest.QPOptions{MinRNRTimer: 1}) // 10 µs
	src, dst := a.Host.Buffer(16), b.Host.Buffer(16)
	posted := 0
	recv := w.Poll("b", func() {
		var wc [4]verbs.WC
		for n := b.CQ.Poll(wc[:]); n > 0; n = b.CQ.Poll(wc[:]) {
			posted -= n
		}
		for posted < 1 {
			_, err := b.QP.PostRecv([]verbs.RecvWR{{WRID: 9, SGList: []verbs.SGE{dst.SGE(0, 16)}}})
			require.NoError(t, err)
			posted++
		}
	})
	send := func() {
		_, err := a.QP.PostSend([]verbs.SendWR{{WRID: 2, Opcode: verbs.WRSend, Flags: verbs.SendSignaled,
			SGList: []verbs.SGE{src.SGE(0, 16)}}})
		require.NoError(t, err)
	}
	send()
	w.RequireCompletion(a.CQ, verbs.WCSuccess, verbs.WCSend)
	w.RunUntil("b's poller re-posts", func() bool { return posted == 1 })
	recv.Pause(100 * sim.Microsecond)
	send()
	send()
	w.RequireCompletion(a.CQ, verbs.WCSuccess, verbs.WCSend)
	w.RequireCompletion(a.CQ, verbs.WCSuccess, verbs.WCSend)
	assert.GreaterOrEqual(t, w.Now(), sim.Time(100*sim.Microsecond), "the second SEND waited for the pause to end")
	assert.NotEmpty(t, w.Frames("class=rnr src=b"))
	assert.Contains(t, w.Trace().Text(), "b poller-pause")
}

// TestMesh: one RC QP per peer, each pair exchanging a SEND, through a
// switch.
func TestMesh(t *testing.T) {
	w := verbstest.New(t, verbstest.Options{Nodes: []string{"n1", "n2", "n3"}})
	m := w.Mesh(verbstest.QPOptions{})
	bufs := map[string]*verbs.MR{}
	for _, h := range w.Hosts() {
		bufs[h.Name()] = h.Buffer(64)
	}
	names := []string{"n1", "n2", "n3"}
	for _, from := range names {
		for _, to := range names {
			if from == to {
				continue
			}
			e := m.Get(from, to)
			require.Equal(t, to, e.Peer.Host.Name())
			_, err := e.Peer.QP.PostRecv([]verbs.RecvWR{{WRID: 1, SGList: []verbs.SGE{bufs[to].SGE(0, 64)}}})
			require.NoError(t, err)
			_, err = e.QP.PostSend([]verbs.SendWR{{WRID: 2, Opcode: verbs.WRSend, Flags: verbs.SendSignaled,
				SGList: []verbs.SGE{bufs[from].SGE(0, 8)}}})
			require.NoError(t, err)
		}
	}
	for _, h := range names {
		wcs := w.Await(m.CQ(h), 4) // two sends, two receives
		for _, wc := range wcs {
			assert.Equal(t, verbs.WCSuccess, wc.Status)
		}
	}
	w.RequireFrames("class=request", 6)
	assert.Equal(t, 2, len(w.Frames("link=n2-sw dst=n2 class=request")), "through the switch, a frame is recorded on each link it crosses")
}

// run is one fixed scenario with random faults; it returns the trace
// and the capture.
func run(t *testing.T, seed uint64) (string, []byte) {
	var trace string
	var pcap []byte
	var r verbstest.Recorder
	ok := r.Run(t.Name(), func(tb verbstest.TB) {
		w := verbstest.New(tb, verbstest.Options{Seed: seed, Faults: "drop prob=0.2 class=request\ndelay 3us prob=0.3 class=ack"})
		a, b := w.Pair("a", "b", verbstest.QPOptions{Timeout: 8})
		src, dst := a.Host.Buffer(8192), b.Host.Buffer(8192)
		for i := range 20 {
			write(tb, a, src, dst, 1+400*i) // an SGE of length 0 means 2^31 bytes
		}
		for _, wc := range w.Await(a.CQ, 20) {
			require.Equal(tb, verbs.WCSuccess, wc.Status)
		}
		w.RunUntilIdle()
		trace, pcap = w.Trace().Text(), w.CaptureBytes()
		require.NotEmpty(tb, w.Frames("tx=2"), "the plan made retransmissions")
	})
	require.True(t, ok, r.Output())
	return trace, pcap
}

// TestSameSeedSameRun: the same seed gives the same trace and the same
// capture bytes; another seed another run.
func TestSameSeedSameRun(t *testing.T) {
	t1, p1 := run(t, 5)
	t2, p2 := run(t, 5)
	t3, p3 := run(t, 6)
	require.Equal(t, t1, t2)
	require.True(t, bytes.Equal(p1, p2), "same seed, same capture bytes")
	require.NotEqual(t, t1, t3)
	require.False(t, bytes.Equal(p1, p3))
}

// TestCaptureKeptOnFailure: a failing test leaves its capture, and its
// log names the seed, the plan and how to re-run it.
func TestCaptureKeptOnFailure(t *testing.T) {
	r := verbstest.Recorder{KeepFiles: true}
	var path string
	passed := r.Run("TestBroken/sub case", func(tb verbstest.TB) {
		w := verbstest.New(tb, verbstest.Options{Seed: 42, Faults: "drop src=a class=request"})
		a, b := w.Pair("a", "b", verbstest.QPOptions{Timeout: 8, RetryCnt: 1})
		path = w.PcapngPath()
		src, dst := a.Host.Buffer(8), b.Host.Buffer(8)
		write(tb, a, src, dst, 8)
		w.RequireCompletion(a.CQ, verbs.WCSuccess, verbs.WCRDMAWrite) // fails: RETRY_EXC_ERR
		t.Error("RequireCompletion should have ended the test")
	})
	require.False(t, passed)
	out := r.Output()
	assert.Contains(t, out, "IBV_WC_RETRY_EXC_ERR")
	assert.Contains(t, out, "seed:    42")
	assert.Contains(t, out, "plan:    from 0s: drop src=a class=request")
	assert.Contains(t, out, "faults:  rule 1 acted on 2 frames: drop src=a class=request", "the WRITE and its one retry")
	assert.Contains(t, out, "rerun:   go test ./verbs/verbstest -run '^TestBroken$/^sub case$' -count=1 -rocesim.seed=42")
	assert.Contains(t, out, "capture: "+path)
	rd, err := capture.Open(path)
	require.NoError(t, err)
	defer rd.Close()
	var rec capture.Record
	require.NoError(t, rd.Next(&rec))
	assert.Contains(t, rec.Comments, "wr 1 RDMA_WRITE, packet 1 of 1; dropped by rule 1: drop src=a class=request")
	require.NoError(t, os.RemoveAll(filepath.Dir(path)))
}

// TestFrameLogLimit: past Options.MaxFrames the log stops, and selecting
// frames fails rather than count a partial log.
func TestFrameLogLimit(t *testing.T) {
	var r verbstest.Recorder
	passed := r.Run("TestFrameLogLimit", func(tb verbstest.TB) {
		w := verbstest.New(tb, verbstest.Options{MaxFrames: 3})
		a, b := w.Pair("a", "b", verbstest.QPOptions{})
		src, dst := a.Host.Buffer(4096), b.Host.Buffer(4096)
		write(tb, a, src, dst, 4096) // four packets and an ACK
		w.RequireCompletion(a.CQ, verbs.WCSuccess, verbs.WCRDMAWrite)
		w.Frames("")
	})
	require.False(t, passed)
	assert.Contains(t, r.Output(), `verbstest: Frames(""): the frame log kept the first 3 frames and missed 2 more; raise Options.MaxFrames`)
}

// TestMisuseFailsClearly: what a test author can get wrong fails the test
// with a message, never a panic or a hang.
func TestMisuseFailsClearly(t *testing.T) {
	for _, c := range []struct {
		name, want string
		body       func(t verbstest.TB, w *verbstest.World)
	}{
		{"await-negative", "verbstest: Await(a's CQ #1, -1): n must not be negative", func(t verbstest.TB, w *verbstest.World) {
			w.Await(w.Host("a").CQ(4), -1)
		}},
		{"time-stands-still", "events at 0s and time does not move", func(t verbstest.TB, w *verbstest.World) {
			s := w.Verbs().Scheduler()
			w.Poll("spin", func() { s.Schedule(s.Now(), sim.HandlerFunc(func(sim.Time, uint64) {}), 0) })
			w.RunFor(sim.Microsecond)
		}},
		{"retry-forever", "RunUntilIdle: still busy when its limit of 10ms of virtual time (Options.Limit) ran out", func(t verbstest.TB, w *verbstest.World) {
			w.SetFaults("drop class=request")
			a, b := w.Pair("a", "b", verbstest.QPOptions{Timeout: 8}) // retry_cnt 7: forever
			write(t, a, a.Host.Buffer(8), b.Host.Buffer(8), 8)
			w.RunUntilIdle()
		}},
		{"bad-filter", `verbstest: Frames("class=nope"): frame filter: `, func(t verbstest.TB, w *verbstest.World) {
			w.Frames("class=nope")
		}},
		{"bad-plan", "verbstest: SetFaults: fault plan line 1:1: ", func(t verbstest.TB, w *verbstest.World) {
			w.SetFaults("explode psn=1")
		}},
		{"ud-pair", "Pair, Mesh and Connect connect RC or UC QPs", func(t verbstest.TB, w *verbstest.World) {
			w.Pair("a", "b", verbstest.QPOptions{Type: verbs.QPTypeUD})
		}},
		{"no-such-host", `verbstest: no host "c" (hosts: a, b)`, func(t verbstest.TB, w *verbstest.World) {
			w.Host("c")
		}},
	} {
		t.Run(c.name, func(t *testing.T) {
			var r verbstest.Recorder
			passed := r.Run(t.Name(), func(tb verbstest.TB) {
				w := verbstest.New(tb, verbstest.Options{Limit: 10 * sim.Millisecond})
				w.Poll("idle", func() {})
				w.Poll("pause0", func() {}).Pause(0) // does nothing
				c.body(tb, w)
			})
			require.False(t, passed)
			require.Contains(t, r.Output(), c.want)
		})
	}
}

// TestRequireFailsItsOwnT: a Require run under With(subtest's T) fails
// that T, not the test that made the world, and names the call.
func TestRequireFailsItsOwnT(t *testing.T) {
	w := verbstest.New(t, verbstest.Options{Faults: "drop class=request", Limit: 10 * sim.Millisecond})
	a, b := w.Pair("a", "b", verbstest.QPOptions{Timeout: 8})
	write(t, a, a.Host.Buffer(8), b.Host.Buffer(8), 8)
	var sub verbstest.Recorder
	passed := sub.Run("sub", func(st verbstest.TB) {
		w.With(st, func() { w.RequireCompletion(a.CQ, verbs.WCSuccess, verbs.WCRDMAWrite) })
	})
	require.False(t, passed)
	require.Contains(t, sub.Output(), "verbstest: RequireCompletion(a's CQ #1, IBV_WC_SUCCESS, IBV_WC_RDMA_WRITE): no completion within 10ms")
	require.False(t, t.Failed())
}

// TestAfterScriptsAWorkload: steps scheduled in virtual time run at
// their instant, in order, with the world reacting in between.
func TestAfterScriptsAWorkload(t *testing.T) {
	w := verbstest.New(t, verbstest.Options{})
	a, b := w.Pair("a", "b", verbstest.QPOptions{Timeout: 8, RetryCnt: 1})
	src, dst := a.Host.Buffer(8), b.Host.Buffer(8)
	var log []string
	w.After(10*sim.Microsecond, func() {
		log = append(log, "write at "+w.Now().String())
		write(t, a, src, dst, 8)
	})
	w.After(5*sim.Microsecond, func() {
		log = append(log, "link down at "+w.Now().String())
		w.AddFaults("down link=a-b")
	})
	w.RequireCompletion(a.CQ, verbs.WCRetryExcErr, verbs.WCRDMAWrite)
	assert.Equal(t, []string{"link down at 5µs", "write at 10µs"}, log)
	sent := w.RequireFrames("src=a op=RC_RDMA_WRITE_ONLY", 2) // retry_cnt 1
	assert.Equal(t, sim.Time(10*sim.Microsecond), sent[0].Time)
	assert.True(t, sent[0].Dropped && sent[1].Dropped)
}

// TestUDDatagram: UD endpoints in one call each (a's with a fixed PSN),
// and a datagram between them with the GRH area first and the sender's
// QPN in the completion.
func TestUDDatagram(t *testing.T) {
	w := verbstest.New(t, verbstest.Options{})
	a, b := w.UD("a", 0x1234, verbstest.QPOptions{FixedPSN: true, PSN: 77}), w.UD("b", 0x1234, verbstest.QPOptions{})
	src, dst := a.Host.Buffer(64), b.Host.Buffer(64+40)
	copy(src.Bytes(), "datagram")
	_, err := b.QP.PostRecv([]verbs.RecvWR{{WRID: 1, SGList: []verbs.SGE{dst.SGE(0, 64+40)}}})
	require.NoError(t, err)
	wr := a.Datagram(b, 0x1234)
	wr.WRID, wr.Flags, wr.SGList = 2, verbs.SendSignaled, []verbs.SGE{src.SGE(0, 8)}
	_, err = a.QP.PostSend([]verbs.SendWR{wr})
	require.NoError(t, err)
	w.RequireCompletion(a.CQ, verbs.WCSuccess, verbs.WCSend)
	wc := w.RequireCompletion(b.CQ, verbs.WCSuccess, verbs.WCRecv)
	assert.Equal(t, a.QP.QPNum, wc.SrcQP)
	assert.Equal(t, uint32(40+8), wc.ByteLen)
	assert.Equal(t, "datagram", string(dst.Bytes()[40:48]))
	w.RequireFrames("class=ud psn=77", 1) // QPOptions.FixedPSN holds for UD too

	wr.RemoteQKey = 0x9999 // the wrong Q_Key: dropped by b's NIC
	_, err = a.QP.PostSend([]verbs.SendWR{wr})
	require.NoError(t, err)
	w.RunUntilIdle()
	w.RequireNoCompletion(b.CQ)
}
