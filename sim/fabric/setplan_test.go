package fabric_test

import (
	"fmt"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/rocesim/rocesim/faults"
	"github.com/rocesim/rocesim/sim"
	"github.com/rocesim/rocesim/sim/fabric"
	"github.com/rocesim/rocesim/wire"
)

// TestSetPlanMidRun changes the plan twice while frames flow: a link
// event of the old plan still to come is cancelled, a link the new plan
// holds down goes down at once (hook and trace), and transmission counts
// carry across the change, so tx=2 still means the second transmission.
func TestSetPlanMidRun(t *testing.T) {
	old, err := faults.Parse("down link=a-b from=50us to=60us\n")
	require.NoError(t, err)
	var hook []string
	w := newWorldWith(fabric.Config{Plan: old, Rand: sim.NewSeeds(1).Stream("faults"),
		LinkHook: func(now sim.Time, link string, up bool) {
			hook = append(hook, now.String()+" "+link+map[bool]string{true: " up", false: " down"}[up])
		}}, "a", "b")
	_, err = w.f.Connect("a-b", w.nodes[0].Port(0), w.nodes[1].Port(0), fabric.DefaultLinkConfig())
	require.NoError(t, err)

	set := func(at sim.Duration, text string) {
		w.sched.Schedule(sim.Time(at), sim.HandlerFunc(func(sim.Time, uint64) {
			p, err := faults.Parse(text)
			require.NoError(t, err)
			require.NoError(t, w.f.SetPlan(p))
		}), 0)
	}
	// PSN 7 goes out at 5 µs (tx=1) and again at 15 µs (tx=2); the plan
	// set at 10 µs drops only its second transmission. At 20 µs a plan
	// holding the link down from 0 takes it down at once; at 30 µs an
	// empty plan brings it back.
	w.sendAt(t, sim.Time(5*sim.Microsecond), 0, roce(t, 0, 1, 7, 32))
	set(10*sim.Microsecond, "drop psn=7 tx=2\n")
	w.sendAt(t, sim.Time(15*sim.Microsecond), 0, roce(t, 0, 1, 7, 32))
	set(20*sim.Microsecond, "down link=a-b\n")
	w.sendAt(t, sim.Time(25*sim.Microsecond), 0, roce(t, 0, 1, 8, 32))
	set(30*sim.Microsecond, "")
	w.sendAt(t, sim.Time(55*sim.Microsecond), 0, roce(t, 0, 1, 9, 32))
	require.NoError(t, w.sched.Run())

	assert.Equal(t, []uint32{7, 9}, w.sinks[1].psns(t), "tx=2 of PSN 7 and PSN 8 (link down) lost; PSN 9 passes: the old plan's 50-60 µs outage was cancelled")
	assert.Equal(t, []string{"20µs a-b down", "30µs a-b up"}, hook)
	text := w.trace.Text()
	assert.Contains(t, text, "10µs - plan plan=\"drop psn=7 tx=2\"")
	assert.Contains(t, text, "20µs - link-down link=a-b why=\"fault plan set at 20µs\"")
	assert.Contains(t, text, "30µs - plan plan=(none)")
	assert.NotContains(t, text, "50µs - link-down")

	bad := &faults.Plan{Rules: []faults.Rule{{Action: faults.Drop, Match: faults.Match{Nth: -1}}}}
	assert.Error(t, w.f.SetPlan(bad), "an invalid plan is refused")
}

// TestObserveSeesEveryRecordedFrame checks the frame records a test tool
// gets: one per hop, first hop marked, drops marked, and the addressee.
func TestObserveSeesEveryRecordedFrame(t *testing.T) {
	var recs []fabric.FrameRecord
	s, a := observedSwitch(t, fabric.Config{Observe: func(r *fabric.FrameRecord) {
		c := *r
		c.Frame, c.Comment = append([]byte(nil), r.Frame...), strings.Clone(r.Comment)
		recs = append(recs, c)
	}})
	require.NoError(t, a.Send(0, roce(t, 0, 1, 0, 32), []byte("first")))
	require.NoError(t, a.Send(0, roce(t, 0, 1, 1, 32), nil))
	require.NoError(t, s.Run())

	require.Len(t, recs, 3)
	assert.Equal(t, fabric.FrameRecord{Time: 0, Link: "n0-sw", Dir: "n0->sw", From: "n0", To: "n1", FromNode: 0, ToNode: 1,
		First: true, Tx: 1, Comment: "first", Frame: recs[0].Frame}, recs[0])
	assert.True(t, recs[1].Dropped, "PSN 1 dropped on its first hop")
	assert.Contains(t, recs[1].Comment, "dropped by rule 1")
	assert.Equal(t, "sw->n1", recs[2].Dir)
	assert.False(t, recs[2].First)
	assert.Equal(t, 1, recs[2].Tx, "the hop after the switch carries the first hop's count")
}

// observedSwitch builds, with cfg's observers, nodes n0 and n1 joined by
// a switch, under a plan that drops PSN 1; it returns the scheduler and
// n0.
func observedSwitch(t *testing.T, cfg fabric.Config) (*sim.Scheduler, *fabric.Node) {
	t.Helper()
	s, a, _ := observedPair(t, cfg)
	return s, a
}

// observedPair is observedSwitch, and returns n1 as well.
func observedPair(t *testing.T, cfg fabric.Config) (*sim.Scheduler, *fabric.Node, *fabric.Node) {
	t.Helper()
	plan, err := faults.Parse("drop psn=1\n")
	require.NoError(t, err)
	cfg.Sched, cfg.Plan, cfg.Rand = sim.NewScheduler(), plan, sim.NewSeeds(1).Stream("faults")
	f := fabric.New(cfg)
	a := f.AddNode("n0", fabric.PortConfig{MAC: mac(1), IPv4: ip4(1)})
	b := f.AddNode("n1", fabric.PortConfig{MAC: mac(2), IPv4: ip4(2)})
	b.SetReceiver(&sink{})
	sw := f.AddSwitch("sw", 2)
	_, err = f.Connect("n0-sw", a.Port(0), sw.Port(0), fabric.DefaultLinkConfig())
	require.NoError(t, err)
	_, err = f.Connect("n1-sw", b.Port(0), sw.Port(1), fabric.DefaultLinkConfig())
	require.NoError(t, err)
	return cfg.Sched, a, b
}

// TestObserveFirstSeesFirstHops: ObserveFirst is called for the records
// of first hops only (drops there included), each before Observe sees
// the same record, and a fabric with ObserveFirst alone calls it for the
// same records; a frame to a MAC no node owns has ToNode -1.
func TestObserveFirstSeesFirstHops(t *testing.T) {
	run := func(all bool) (calls []string) {
		cfg := fabric.Config{ObserveFirst: func(r *fabric.FrameRecord) {
			require.True(t, r.First)
			calls = append(calls, fmt.Sprintf("first %s %s->%s %d->%d dropped=%v", r.Dir, r.From, r.To, r.FromNode, r.ToNode, r.Dropped))
		}}
		if all {
			cfg.Observe = func(r *fabric.FrameRecord) { calls = append(calls, "all "+r.Dir) }
		}
		s, a := observedSwitch(t, cfg)
		require.NoError(t, a.Send(0, roce(t, 0, 1, 0, 32), nil))
		require.NoError(t, a.Send(0, roce(t, 0, 1, 1, 32), nil))
		stray := roce(t, 0, 1, 2, 32)
		m := mac(9)
		copy(stray[0:6], m[:])
		require.NoError(t, a.Send(0, stray, nil))
		require.NoError(t, s.Run())
		return calls
	}
	assert.Equal(t, []string{
		"first n0->sw n0->n1 0->1 dropped=false", "all n0->sw",
		"first n0->sw n0->n1 0->1 dropped=true", "all n0->sw",
		"first n0->sw n0-> 0->-1 dropped=false", "all n0->sw",
		"all sw->n1",
		// The switch drops the stray frame and records the drop on
		// the hop it came in by: its sender's.
		"first n0->sw n0-> 0->-1 dropped=true", "all n0->sw",
	}, run(true))
	assert.Equal(t, []string{
		"first n0->sw n0->n1 0->1 dropped=false",
		"first n0->sw n0->n1 0->1 dropped=true",
		"first n0->sw n0-> 0->-1 dropped=false",
		"first n0->sw n0-> 0->-1 dropped=true",
	}, run(false))
}

// TestSkipObserveFirst: a node whose sender reports its own frames
// (SkipObserveFirst) gives ObserveFirst none of its first hops, drops
// included, while a node not marked still gives it its own, and Observe
// still sees every record.
func TestSkipObserveFirst(t *testing.T) {
	var first, all []string
	psnOf := func(frame []byte) wire.PSN {
		var p wire.Packet
		require.NoError(t, p.DecodeHeaders(frame))
		return p.BTH.PSN()
	}
	cfg := fabric.Config{
		ObserveFirst: func(r *fabric.FrameRecord) { first = append(first, fmt.Sprintf("%s psn=%d", r.Dir, psnOf(r.Frame))) },
		Observe: func(r *fabric.FrameRecord) {
			all = append(all, fmt.Sprintf("%s psn=%d first=%v dropped=%v", r.Dir, psnOf(r.Frame), r.First, r.Dropped))
		},
	}
	s, a, b := observedPair(t, cfg)
	a.SkipObserveFirst()
	a.SetReceiver(&sink{})
	require.NoError(t, a.Send(0, roce(t, 0, 1, 0, 32), nil))
	require.NoError(t, a.Send(0, roce(t, 0, 1, 1, 32), nil)) // dropped (psn=1)
	require.NoError(t, b.Send(0, roce(t, 1, 0, 2, 32), nil))
	require.NoError(t, s.Run())
	assert.Equal(t, []string{"n1->sw psn=2"}, first, "ObserveFirst: the unmarked node's first hop alone")
	assert.Equal(t, []string{"n0->sw psn=0 first=true dropped=false", "n1->sw psn=2 first=true dropped=false",
		"n0->sw psn=1 first=true dropped=true", "sw->n1 psn=0 first=false dropped=false", "sw->n0 psn=2 first=false dropped=false"}, all)
}

// TestObserveMarksCopies: a copy a dup rule made is marked as one (Copy
// is its number), so a tool counting retransmissions does not take it
// for the sender's; the frame it copied is not.
func TestObserveMarksCopies(t *testing.T) {
	plan, err := faults.Parse("dup psn=0 n=2\n")
	require.NoError(t, err)
	var first []fabric.FrameRecord
	s := sim.NewScheduler()
	f := fabric.New(fabric.Config{Sched: s, Plan: plan, Rand: sim.NewSeeds(1).Stream("faults"),
		Observe: func(r *fabric.FrameRecord) {
			if r.First {
				c := *r
				c.Comment = strings.Clone(r.Comment)
				first = append(first, c)
			}
		}})
	a := f.AddNode("n0", fabric.PortConfig{MAC: mac(1), IPv4: ip4(1)})
	b := f.AddNode("n1", fabric.PortConfig{MAC: mac(2), IPv4: ip4(2)})
	b.SetReceiver(&sink{})
	_, err = f.Connect("n0-n1", a.Port(0), b.Port(0), fabric.DefaultLinkConfig())
	require.NoError(t, err)
	require.NoError(t, a.Send(0, roce(t, 0, 1, 0, 32), nil))
	require.NoError(t, a.Send(0, roce(t, 0, 1, 1, 32), nil))
	require.NoError(t, s.Run())
	var copies []int
	for _, r := range first {
		copies = append(copies, r.Copy)
	}
	assert.Equal(t, []int{0, 1, 2, 0}, copies, "PSN 0, its two copies, PSN 1")
}

// TestSetPlanBeforeDueChange: a plan replaced at the very instant its
// link change is due, before that change has fired, tells the link's
// ends nothing: they were never told it went down, so they must not hear
// that it came back up.
func TestSetPlanBeforeDueChange(t *testing.T) {
	s := sim.NewScheduler()
	var f *fabric.Fabric
	// Scheduled first, so it runs first at 20 µs.
	s.Schedule(sim.Time(20*sim.Microsecond), sim.HandlerFunc(func(sim.Time, uint64) {
		require.NoError(t, f.SetPlan(nil))
	}), 0)
	old, err := faults.Parse("down link=a-b from=20us\n")
	require.NoError(t, err)
	var hook []string
	f = fabric.New(fabric.Config{Sched: s, Plan: old, LinkHook: func(now sim.Time, link string, up bool) {
		hook = append(hook, fmt.Sprint(now, link, up))
	}})
	a := f.AddNode("a", fabric.PortConfig{MAC: mac(1), IPv4: ip4(1)})
	b := f.AddNode("b", fabric.PortConfig{MAC: mac(2), IPv4: ip4(2)})
	_, err = f.Connect("a-b", a.Port(0), b.Port(0), fabric.DefaultLinkConfig())
	require.NoError(t, err)
	require.NoError(t, s.Run())
	assert.Empty(t, hook)
}
