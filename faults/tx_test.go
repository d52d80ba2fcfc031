package faults_test

import (
	"runtime"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/rocesim/rocesim/faults"
	"github.com/rocesim/rocesim/sim"
	"github.com/rocesim/rocesim/wire"
)

// TestCountTx: transmissions are numbered per PSN, per direction and QP,
// requests apart from responses.
func TestCountTx(t *testing.T) {
	ab := faults.Hop{Link: "a-b", From: "a", To: "b", First: true}
	ba := faults.Hop{Link: "a-b", From: "b", To: "a", First: true}
	ac := faults.Hop{Link: "a-c", From: "a", To: "c", First: true}
	send := func(psn, qp uint32) pktSpec { return pktSpec{op: wire.OpRCSendOnly, psn: psn, qp: qp} }
	steps := []struct {
		hop  faults.Hop
		pkt  pktSpec
		want int
	}{
		{ab, send(1, 0x11), 1},
		{ab, send(2, 0x11), 1},
		{ab, send(3, 0x11), 1},
		{ab, send(2, 0x11), 2}, // go-back-N from 2
		{ab, send(3, 0x11), 2},
		{ab, send(2, 0x11), 3},
		{ab, send(2, 0x12), 1}, // another QP
		{ac, send(2, 0x11), 1}, // another addressee
		{ba, send(2, 0x11), 1}, // the other direction
		{ba, pktSpec{op: wire.OpRCAcknowledge, psn: 3, qp: 0x11, syn: 0x1F}, 1},
		{ba, pktSpec{op: wire.OpRCAcknowledge, psn: 3, qp: 0x11, syn: 0x1F}, 2},
		// A READ response reuses its request's PSN but is counted apart.
		{ab, pktSpec{op: wire.OpRCReadRequest, psn: 7, qp: 0x11}, 1},
		{ab, pktSpec{op: wire.OpRCReadResponseOnly, psn: 7, qp: 0x11, syn: 0x1F}, 1},
		{ab, pktSpec{op: wire.OpRCReadRequest, psn: 7, qp: 0x11}, 2},
		{ab, pktSpec{op: wire.OpCNP, psn: 7, qp: 0x11}, 1},
		// Around the PSN wrap, and far back.
		{ab, send(0xFFFFFF, 0x30), 1},
		{ab, send(0, 0x30), 1},
		{ab, send(0xFFFFFF, 0x30), 2},
		{ab, send(0xFFFFF0, 0x30), 1},
		{ab, send(0xFFFFF0, 0x30), 2},
		{ab, send(0, 0x30), 2},
		{ab, send(5000, 0x30), 1},
		{ab, send(0xFFFFFF, 0x30), 3},
		// The window remembers 2^16 PSNs behind the newest.
		{ab, send(0, 0x31), 1},
		{ab, send(0, 0x31), 2},
		{ab, send(1<<16, 0x31), 1},
		{ab, send(0, 0x31), 1}, // forgotten
		{ab, send(1, 0x31), 1},
		{ab, send(1, 0x31), 2},
		{ab, send(1<<16, 0x31), 2},
	}
	in := faults.NewInjector(nil, nil)
	for i, s := range steps {
		frame := s.pkt.build(t)
		require.Equal(t, s.want, in.CountTx(s.hop, decode(t, frame)), "step %d", i)
	}
	require.Equal(t, 0, in.CountTx(ab, nil), "not RoCE")
}

// TestDropFirstTransmission: "drop psn=2 tx=1" loses PSN 2 once; its
// retransmission passes, and so does the copy at the switch egress of a
// frame that passed.
func TestDropFirstTransmission(t *testing.T) {
	in := faults.NewInjector(mustParse(t, "drop psn=2 tx=1"), nil)
	var got []string
	for _, psn := range []uint32{1, 2, 3, 2, 3, 2} {
		frame := pktSpec{op: wire.OpRCSendOnly, psn: psn, qp: 0x11}.build(t)
		pkt := decode(t, frame)
		hop := faults.Hop{Link: "a-sw", From: "a", To: "b", First: true}
		hop.Tx = in.CountTx(hop, pkt)
		v := in.Decide(0, hop, frame, pkt)
		if v.Action == faults.Pass {
			// Later hops carry Tx; rules without link= do not look there.
			hop.Link, hop.First = "sw-b", false
			require.Equal(t, faults.Pass, in.Decide(0, hop, frame, pkt).Action)
		}
		got = append(got, v.String())
	}
	require.Equal(t, []string{"passed", "dropped by rule 1: drop psn=2 tx=1", "passed", "passed", "passed", "passed"}, got)
}

// TestStatefulKeys: nth, first and prob count only frames that matched
// every other key, and prob draws only for those.
func TestStatefulKeys(t *testing.T) {
	// 40 frames named by one character each, 'A' + index (so index 29 is
	// '^' and 39 is 'h'): even ones SENDs, odd ones ACKs, PSN = index.
	frames := make([]sent, 40)
	for i := range frames {
		op := wire.OpRCSendOnly
		if i%2 == 1 {
			op = wire.OpRCAcknowledge
		}
		frames[i] = sent{name: string(rune('A' + i)), now: sim.Time(i), hop: firstHop, pkt: &pktSpec{op: op, psn: uint32(i), qp: 0x11, syn: 0x1F}}
	}
	cases := []struct {
		plan string
		hit  string
	}{
		{"drop nth=5", "EJOTY^ch"},
		{"drop class=ack nth=5", "JT^h"},
		{"drop class=ack first=3", "BDF"},
		{"drop first=3 class=ack", "BDF"},
		{"drop class=ack nth=3 first=2", "FL"},
		{"drop class=ack first=2\ndup class=ack first=1", "BDF"},
		{"drop psn=10-19 nth=2", "LNPRT"},
	}
	for _, c := range cases {
		t.Run(c.plan, func(t *testing.T) {
			hit, _ := run(t, faults.NewInjector(mustParse(t, c.plan), nil), frames)
			got := ""
			for _, h := range hit {
				got += h
			}
			require.Equal(t, c.hit, got)
		})
	}
}

// TestProb: prob= with a seeded stream is deterministic: the same seed
// hits the same frames, another seed other frames, and the rate is about P.
func TestProb(t *testing.T) {
	frames := make([]sent, 1000)
	for i := range frames {
		frames[i] = sent{now: sim.Time(i) * us, hop: firstHop, pkt: &pktSpec{op: wire.OpRCSendOnly, psn: uint32(i), qp: 0x11}}
	}
	hits := func(seed uint64, plan string) []int {
		in := faults.NewInjector(mustParse(t, plan), newRand(seed))
		_, vs := run(t, in, frames)
		var idx []int
		for i, v := range vs {
			if v.Action != faults.Pass {
				idx = append(idx, i)
			}
		}
		return idx
	}
	a, b, c := hits(1, "drop prob=0.3"), hits(1, "drop prob=0.3"), hits(2, "drop prob=0.3")
	require.Equal(t, a, b)
	require.NotEqual(t, a, c)
	require.InDelta(t, 300, len(a), 60)
	require.InDelta(t, 300, len(c), 60)

	// first= after prob=: the first three frames that won the draw.
	require.Equal(t, a[:3], hits(1, "drop prob=0.3 first=3"))

	// A prob rule whose other keys never match draws nothing, so adding
	// it changes nothing for the rule after it.
	require.Equal(t, a, hits(1, "drop qp=0x99 prob=0.5\ndrop prob=0.3"))
	// A rule that takes a frame before a prob rule saves that draw: the
	// stream is consumed per candidate frame, not per frame.
	require.NotEqual(t, a[1:], hits(1, "drop psn=0\ndrop prob=0.3"))
}

// TestProbStreamUntouched: frames that do not match a prob rule's other
// keys leave the random stream exactly where it was.
func TestProbStreamUntouched(t *testing.T) {
	rng, ref := newRand(7), newRand(7)
	in := faults.NewInjector(mustParse(t, "drop class=cnp prob=0.5\ndelay 1us link=x prob=0.5"), rng)
	run(t, in, traffic[:11]) // no CNP, no link x
	require.Equal(t, ref.Uint64(), rng.Uint64())
}

// TestDeterminism: the same plan and seed over the same traffic give
// identical verdicts and identical frames.
func TestDeterminism(t *testing.T) {
	plan := "corrupt prob=0.2\nrewrite set-psn=+1 prob=0.2 class=request\ndup n=2 prob=0.3\ndelay 3us prob=0.5\ndrop prob=0.1 link=sw-b\n"
	once := func() ([]faults.Verdict, [][]byte) {
		in := faults.NewInjector(mustParse(t, plan), newRand(42))
		var vs []faults.Verdict
		var out [][]byte
		for i := 0; i < 20; i++ {
			for _, s := range traffic {
				frame, pkt := s.frame(t)
				vs = append(vs, in.Decide(s.now, s.hop, frame, pkt))
				out = append(out, frame)
			}
		}
		return vs, out
	}
	v1, f1 := once()
	v2, f2 := once()
	require.Equal(t, v1, v2)
	require.Equal(t, f1, f2)
}

// TestCountTxBounded: a sender with valid ICRCs, random QPNs and random
// PSNs (anyone on a real network) cannot grow CountTx's memory past its
// bounds: flows and counters stay within them, the oldest flows are
// evicted and counted, the heap stays flat over rounds, and a flow that
// keeps its place still counts retransmissions.
func TestCountTxBounded(t *testing.T) {
	const span, flows, entries = 1024, 64, 8 * 1024
	in := faults.NewInjector(nil, nil)
	faults.SetTxBounds(in, span, flows, entries)
	ab := faults.Hop{Link: "a-b", From: "a", To: "b", First: true}
	rng := newRand(3)
	// Frames are built once: the flood measures CountTx, not the builder.
	pkts := make([]*wire.Packet, 4096)
	for i := range pkts {
		qp, psn := uint32(rng.IntN(1<<24)), uint32(rng.IntN(1<<24))
		if i%2 == 1 { // half of them near the previous PSN, to grow windows
			qp, psn = pkts[i-1].BTH.DestQP(), uint32(pkts[i-1].BTH.PSN().Add(uint32(rng.IntN(span))))
		}
		pkts[i] = decode(t, pktSpec{op: wire.OpRCSendOnly, psn: psn, qp: qp}.build(t))
	}
	var heap [5]uint64
	for round := range heap {
		for _, p := range pkts {
			in.CountTx(ab, p)
		}
		n, e := faults.TxUsage(in)
		require.LessOrEqual(t, n, flows, "round %d: flows", round)
		require.LessOrEqual(t, e, entries, "round %d: counters", round)
		runtime.GC()
		var ms runtime.MemStats
		runtime.ReadMemStats(&ms)
		heap[round] = ms.HeapAlloc
	}
	require.Greater(t, in.TxEvictions(), uint64(0))
	// Rounds 1..4 repeat round 0's traffic: nothing may accumulate.
	require.Less(t, int64(heap[4])-int64(heap[1]), int64(256<<10), "heap after rounds: %v", heap)

	// The ordinary semantics hold for a flow in use, through a flood of
	// new flows that forces evictions: those go first.
	in = faults.NewInjector(nil, nil)
	faults.SetTxBounds(in, span, flows, entries)
	frame := func(qp, psn uint32) *wire.Packet {
		return decode(t, pktSpec{op: wire.OpRCSendOnly, psn: psn, qp: qp}.build(t))
	}
	for _, s := range []struct {
		psn  uint32
		want int
	}{{1, 1}, {2, 1}, {3, 1}, {2, 2}, {3, 2}, {2, 3}} {
		require.Equal(t, s.want, in.CountTx(ab, frame(0x11, s.psn)), "psn %d", s.psn)
	}
	for i := range uint32(4 * flows) {
		in.CountTx(ab, frame(0x1000+i, 1))
		require.Equal(t, 1, in.CountTx(ab, frame(0x11, 4+i)), "flow 0x11, new PSN %d", 4+i)
	}
	require.Equal(t, uint64(3*flows+1), in.TxEvictions(), "every new flow past the bound evicted one of the flood's")
	require.Equal(t, 4, in.CountTx(ab, frame(0x11, 2)), "flow 0x11 kept its counts")
	require.Equal(t, 1, in.CountTx(ab, frame(0x1000, 1)), "the first flood flow was forgotten")
}
