package fabric_test

import (
	"errors"
	"fmt"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/rocesim/rocesim/faults"
	"github.com/rocesim/rocesim/sim"
	"github.com/rocesim/rocesim/sim/fabric"
	"github.com/rocesim/rocesim/wire"
)

// pair is two nodes on one default link, with plan applied.
func pair(t *testing.T, planText string) *world {
	plan, err := faults.Parse(planText)
	require.NoError(t, err)
	w := newWorld(t, 2, plan, 1, nil)
	_, err = w.f.Connect("a-b", w.nodes[0].Port(0), w.nodes[1].Port(0), fabric.DefaultLinkConfig())
	require.NoError(t, err)
	return w
}

// sendAt schedules node i to send frame at time at.
func (w *world) sendAt(t *testing.T, at sim.Time, i int, frame []byte) {
	w.sched.Schedule(at, sim.HandlerFunc(func(sim.Time, uint64) {
		require.NoError(t, w.nodes[i].Send(0, frame, nil))
	}), 0)
}

func TestFabricAppliesEachAction(t *testing.T) {
	cfg := fabric.DefaultLinkConfig()
	oneHop := func(n int) sim.Duration { return cfg.SerializationDelay(n) + cfg.Propagation }

	t.Run("dup", func(t *testing.T) {
		w := pair(t, "dup n=2 psn=7")
		for psn := uint32(6); psn <= 8; psn++ {
			require.NoError(t, w.nodes[0].Send(0, roce(t, 0, 1, psn, 32), nil))
		}
		require.NoError(t, w.sched.Run())
		assert.Equal(t, []uint32{6, 7, 7, 7, 8}, w.sinks[1].psns(t))
		assert.Equal(t, uint64(2), w.f.Links()[0].Stats(0).Duplicated)
	})

	t.Run("delay", func(t *testing.T) {
		w := pair(t, "delay 50us psn=1")
		f0, f1 := roce(t, 0, 1, 0, 32), roce(t, 0, 1, 1, 32)
		require.NoError(t, w.nodes[0].Send(0, f0, nil))
		require.NoError(t, w.nodes[0].Send(0, f1, nil))
		require.NoError(t, w.sched.Run())
		assert.Equal(t, []uint32{0, 1}, w.sinks[1].psns(t))
		assert.Equal(t, sim.Time(oneHop(len(f0))), w.sinks[1].times[0])
		assert.Equal(t, sim.Time(50*sim.Microsecond+oneHop(len(f1))), w.sinks[1].times[1])
	})

	t.Run("reorder", func(t *testing.T) {
		w := pair(t, "reorder n=2 psn=1")
		for psn := range uint32(5) {
			require.NoError(t, w.nodes[0].Send(0, roce(t, 0, 1, psn, 32), nil))
		}
		require.NoError(t, w.sched.Run())
		assert.Equal(t, []uint32{0, 2, 3, 1, 4}, w.sinks[1].psns(t))
	})

	t.Run("corrupt", func(t *testing.T) {
		w := pair(t, "corrupt psn=1")
		require.NoError(t, w.nodes[0].Send(0, roce(t, 0, 1, 0, 32), nil))
		require.NoError(t, w.nodes[0].Send(0, roce(t, 0, 1, 1, 32), nil))
		require.NoError(t, w.sched.Run())
		var p wire.Packet
		require.NoError(t, p.Decode(w.sinks[1].frames[0]))
		require.ErrorIs(t, p.Decode(w.sinks[1].frames[1]), wire.ErrICRC)
		assert.Equal(t, uint64(1), w.f.Links()[0].Stats(0).Altered)
	})

	for _, tc := range []struct {
		plan string
		want func(t *testing.T, frame []byte)
	}{
		{"truncate cut=4 psn=0 fix=none", func(t *testing.T, frame []byte) {
			var p wire.Packet
			assert.True(t, errors.Is(p.Decode(frame), wire.ErrTruncated), "stale IP length")
		}},
		// By default the headers describe what is left: a valid frame
		// with 4 bytes less payload, which the capture shows as such.
		{"truncate cut=4 psn=0", func(t *testing.T, frame []byte) {
			var p wire.Packet
			require.NoError(t, p.Decode(frame))
			assert.Len(t, p.Payload, 28)
		}},
	} {
		t.Run(tc.plan, func(t *testing.T) {
			w := pair(t, tc.plan)
			f := roce(t, 0, 1, 0, 32)
			require.NoError(t, w.nodes[0].Send(0, f, nil))
			require.NoError(t, w.sched.Run())
			require.Len(t, w.sinks[1].frames, 1)
			assert.Len(t, w.sinks[1].frames[0], len(f)-4)
			tc.want(t, w.sinks[1].frames[0])
		})
	}

	t.Run("rewrite", func(t *testing.T) {
		w := pair(t, "rewrite set-psn=+100 psn=3")
		require.NoError(t, w.nodes[0].Send(0, roce(t, 0, 1, 3, 32), nil))
		require.NoError(t, w.sched.Run())
		var p wire.Packet
		require.NoError(t, p.Decode(w.sinks[1].frames[0]), "a rewritten frame carries a valid ICRC")
		assert.Equal(t, wire.PSN(103), p.BTH.PSN())
	})
}

// TestLinkDownAndPartition drops frames while a link is down or the
// nodes are partitioned, and traces the changes.
func TestLinkDownAndPartition(t *testing.T) {
	w := pair(t, "down link=a-b from=10us to=20us\npartition n0|n1 from=30us to=40us\n")
	for i, at := range []sim.Duration{5, 15, 25, 35, 45} {
		w.sendAt(t, sim.Time(at*sim.Microsecond), 0, roce(t, 0, 1, uint32(i), 32))
	}
	require.NoError(t, w.sched.Run())
	assert.Equal(t, []uint32{0, 2, 4}, w.sinks[1].psns(t))
	assert.Equal(t, uint64(2), w.f.Links()[0].Stats(0).FaultDrops)
	text := w.trace.Text()
	assert.Contains(t, text, "10µs - link-down link=a-b rule=1")
	assert.Contains(t, text, "20µs - link-up link=a-b rule=1")
	assert.Contains(t, text, "dropped by rule 2")
}

// TestHeldFrameMeetsDownLink delays a frame into a window where its link
// is down: it is dropped when released, not delivered.
func TestHeldFrameMeetsDownLink(t *testing.T) {
	w := pair(t, "delay 50us psn=0\ndown link=a-b from=10us to=100us\n")
	require.NoError(t, w.nodes[0].Send(0, roce(t, 0, 1, 0, 32), nil))
	require.NoError(t, w.sched.Run())
	assert.Empty(t, w.sinks[1].frames)
	assert.Contains(t, w.trace.Text(), "50µs n0 frame-drop")
}

// TestDownAfterCutsTheLink: "down after=K" carries K frames, tells the
// trace (and the link hook) the link went down as the K-th entered it,
// and drops the rest.
func TestDownAfterCutsTheLink(t *testing.T) {
	w := pair(t, "down link=a-b after=2")
	for psn := range uint32(4) {
		w.sendAt(t, sim.Time(psn)*sim.Time(sim.Microsecond), 0, roce(t, 0, 1, psn, 32))
	}
	require.NoError(t, w.sched.Run())
	assert.Equal(t, []uint32{0, 1}, w.sinks[1].psns(t))
	var changes []string
	for _, e := range w.trace.Events() {
		if e.Kind == "link-down" || e.Kind == "link-up" {
			changes = append(changes, fmt.Sprintf("%v %s", sim.Duration(e.Time), e.String()))
		}
	}
	require.Len(t, changes, 1)
	assert.Contains(t, changes[0], "1µs")
	assert.Contains(t, changes[0], "link-down")
	assert.Equal(t, uint64(2), w.f.Links()[0].Stats(0).FaultDrops)
}

// TestFaultDropRecordedInWireOrder: a frame the plan drops behind frames
// still waiting for the wire is recorded after them, at the moment it
// would have started onto the link, and takes no wire time; the capture
// and the trace show PSNs in wire order.
func TestFaultDropRecordedInWireOrder(t *testing.T) {
	plan, err := faults.Parse("drop psn=2")
	require.NoError(t, err)
	var got []string
	sched := sim.NewScheduler()
	tr := &sim.Trace{}
	f := fabric.New(fabric.Config{Sched: sched, Trace: tr, Plan: plan, Rand: sim.NewSeeds(1).Stream("faults"),
		Observe: func(r *fabric.FrameRecord) {
			var p wire.Packet
			require.NoError(t, p.DecodeHeaders(r.Frame))
			got = append(got, fmt.Sprintf("%v psn=%d dropped=%v", sim.Duration(r.Time), p.BTH.PSN(), r.Dropped))
		}})
	a := f.AddNode("a", fabric.PortConfig{MAC: mac(1), IPv4: ip4(1)})
	b := f.AddNode("b", fabric.PortConfig{MAC: mac(2), IPv4: ip4(2)})
	b.SetReceiver(&sink{})
	cfg := fabric.DefaultLinkConfig()
	_, err = f.Connect("a-b", a.Port(0), b.Port(0), cfg)
	require.NoError(t, err)
	frames := make([][]byte, 4)
	for psn := range frames {
		frames[psn] = roce(t, 0, 1, uint32(psn), 1000)
		require.NoError(t, a.Send(0, frames[psn], nil))
	}
	require.NoError(t, sched.Run())
	ser := cfg.SerializationDelay(len(frames[0]))
	assert.Equal(t, []string{
		"0s psn=0 dropped=false",
		fmt.Sprintf("%v psn=1 dropped=false", ser),
		fmt.Sprintf("%v psn=2 dropped=true", 2*ser),
		fmt.Sprintf("%v psn=3 dropped=false", 2*ser), // the drop took no wire time
	}, got)
	var kinds []string
	for _, e := range tr.Events() {
		if e.Kind == "frame-tx" || e.Kind == "frame-drop" {
			psn, _ := e.Get("psn")
			kinds = append(kinds, string(e.Kind)+" "+psn)
		}
	}
	assert.Equal(t, []string{"frame-tx 0", "frame-tx 1", "frame-drop 2", "frame-tx 3"}, kinds)
	assert.Equal(t, uint64(1), f.Links()[0].Stats(0).FaultDrops)
}

// TestRecordShowsTheRewrittenFrame: the capture (Observe, taps) records
// a rewritten frame as it went onto the wire, after the change.
func TestRecordShowsTheRewrittenFrame(t *testing.T) {
	plan, err := faults.Parse("rewrite set-qp=0x77 set-ecn=ce")
	require.NoError(t, err)
	var qps []uint32
	var ecn []byte
	sched := sim.NewScheduler()
	f := fabric.New(fabric.Config{Sched: sched, Plan: plan, Rand: sim.NewSeeds(1).Stream("faults"),
		Observe: func(r *fabric.FrameRecord) {
			var p wire.Packet
			require.NoError(t, p.Decode(r.Frame), "still a valid frame")
			qps = append(qps, p.BTH.DestQP())
			ecn = append(ecn, p.IPv4.TOS()&3)
		}})
	a := f.AddNode("a", fabric.PortConfig{MAC: mac(1), IPv4: ip4(1)})
	b := f.AddNode("b", fabric.PortConfig{MAC: mac(2), IPv4: ip4(2)})
	s := &sink{}
	b.SetReceiver(s)
	_, err = f.Connect("a-b", a.Port(0), b.Port(0), fabric.DefaultLinkConfig())
	require.NoError(t, err)
	require.NoError(t, a.Send(0, roce(t, 0, 1, 5, 32), nil))
	require.NoError(t, sched.Run())
	assert.Equal(t, []uint32{0x77}, qps)
	assert.Equal(t, []byte{3}, ecn)
	require.Len(t, s.frames, 1)
}

// sealedSink is a SealedReceiver that records, for each frame, its PSN
// and whether it came sealed.
type sealedSink struct {
	psns   []uint32
	sealed []bool
}

func (s *sealedSink) Receive(now sim.Time, port int, frame []byte) { s.add(frame, false) }
func (s *sealedSink) ReceiveSealed(now sim.Time, port int, frame []byte) {
	s.add(frame, true)
}

func (s *sealedSink) add(frame []byte, sealed bool) {
	var p wire.Packet
	psn := uint32(1 << 31) // a frame too short to decode
	if p.DecodeHeaders(frame) == nil {
		psn = uint32(p.BTH.PSN())
	}
	s.psns, s.sealed = append(s.psns, psn), append(s.sealed, sealed)
}

// TestSealed: a frame sent with SendSealed reaches a SealedReceiver
// through ReceiveSealed, through a switch, delayed, reordered or
// duplicated (each copy), unless a rule changed its bytes (corrupt,
// truncate, rewrite: its ICRC must be checked); a frame sent with Send
// comes through Receive, as it does to a plain Receiver.
func TestSealed(t *testing.T) {
	plan, err := faults.Parse("corrupt psn=2\ntruncate len=60 psn=3\nrewrite set-psn=+100 psn=4\ndup n=1 psn=5\ndelay 5us psn=6\nreorder n=1 psn=7")
	require.NoError(t, err)
	w := newWorld(t, 2, plan, 1, nil)
	sw := w.f.AddSwitch("sw", 2)
	for i, n := range w.nodes {
		_, err := w.f.Connect(fmt.Sprintf("l%d", i), n.Port(0), sw.Port(i), fabric.DefaultLinkConfig())
		require.NoError(t, err)
	}
	s := &sealedSink{}
	w.nodes[1].SetReceiver(s)
	for psn := uint32(1); psn <= 8; psn++ {
		require.NoError(t, w.nodes[0].SendSealed(0, roce(t, 0, 1, psn, 32), nil))
	}
	require.NoError(t, w.nodes[0].Send(0, roce(t, 0, 1, 9, 32), nil))
	require.NoError(t, w.sched.Run())
	got := map[uint32][]bool{}
	for i, psn := range s.psns {
		got[psn] = append(got[psn], s.sealed[i])
	}
	for psn, want := range map[uint32][]bool{1: {true}, 5: {true, true}, 6: {true}, 7: {true}, 8: {true}, 9: {false}} {
		assert.Equal(t, want, got[psn], "PSN %d", psn)
	}
	var altered []bool
	for i, psn := range s.psns {
		if psn != 1 && (psn < 5 || psn > 9) {
			altered = append(altered, s.sealed[i])
		}
	}
	assert.Equal(t, []bool{false, false, false}, altered, "the corrupted, truncated and rewritten frames (PSNs %v)", s.psns)
}
