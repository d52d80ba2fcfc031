package faults_test

import (
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/rocesim/rocesim/faults"
	"github.com/rocesim/rocesim/sim"
	"github.com/rocesim/rocesim/wire"
)

const linkPlan = `
delay 1us class=ack                   # rule 1
down link=a-sw from=1ms to=3ms        # rule 2
down link=a-sw from=2ms to=4ms        # rule 3: overlaps rule 2
down link=sw-c from=5ms               # rule 4: forever
partition a|b,c from=10ms to=11ms     # rule 5
partition a|b,c from=11ms to=12ms     # rule 6: continues rule 5
`

// TestLinkDown: a down event drops every frame entering its link in its
// window, on every hop, ahead of every frame rule.
func TestLinkDown(t *testing.T) {
	in := faults.NewInjector(mustParse(t, linkPlan), nil)
	cases := []struct {
		now  sim.Time
		link string
		up   bool
		rule int // Decide's verdict for an ACK on a first hop over link
	}{
		{999 * us, "a-sw", true, 1},
		{1 * ms, "a-sw", false, 2},
		{2500 * us, "a-sw", false, 2}, // both cover it: the first in plan order decides
		{3 * ms, "a-sw", false, 3},
		{4*ms - 1, "a-sw", false, 3},
		{4 * ms, "a-sw", true, 1},
		{2 * ms, "sw-b", true, 1},
		{5*ms - 1, "sw-c", true, 1},
		{5 * ms, "sw-c", false, 4},
		{1000 * sim.Time(sim.Second), "sw-c", false, 4},
	}
	ack := pktSpec{op: wire.OpRCAcknowledge, psn: 1, qp: 0x11, syn: 0x1F}
	for _, c := range cases {
		require.Equal(t, c.up, in.LinkUp(c.now, c.link), "%v %s", c.now, c.link)
		frame := ack.build(t)
		v := in.Decide(c.now, faults.Hop{Link: c.link, From: "a", To: "b", First: true}, frame, decode(t, frame))
		require.Equal(t, c.rule, v.Rule, "%v %s", c.now, c.link)
		if !c.up {
			require.Equal(t, faults.Drop, v.Action)
			require.Equal(t, in.Decide(c.now, faults.Hop{Link: c.link, From: "a", To: "b"}, frame, nil), v, "not first hop, not RoCE: dropped all the same")
		}
	}
	require.Equal(t, "dropped by rule 4: down link=sw-c from=5ms", in.Decide(6*ms, faults.Hop{Link: "sw-c"}, nonRoCE(), nil).String())
}

// TestPartition: frames between the groups are dropped both ways while
// the partition holds; traffic inside a group, and nodes outside every
// group, are not affected.
func TestPartition(t *testing.T) {
	in := faults.NewInjector(mustParse(t, linkPlan), nil)
	cases := []struct {
		now      sim.Time
		from, to string
		cut      bool
		rule     int
	}{
		{10*ms - 1, "a", "b", false, 0},
		{10 * ms, "a", "b", true, 5},
		{10 * ms, "c", "a", true, 5},
		{10 * ms, "b", "c", false, 0},
		{10 * ms, "a", "d", false, 0},
		{10 * ms, "a", "", false, 0},
		{11 * ms, "b", "a", true, 6},
		{12*ms - 1, "a", "c", true, 6},
		{12 * ms, "a", "c", false, 0},
	}
	send := pktSpec{op: wire.OpRCSendOnly, psn: 1, qp: 0x11}
	for _, c := range cases {
		require.Equal(t, c.cut, in.Partitioned(c.now, c.from, c.to), "%v %s->%s", c.now, c.from, c.to)
		require.Equal(t, c.cut, in.Partitioned(c.now, c.to, c.from))
		frame := send.build(t)
		v := in.Decide(c.now, faults.Hop{Link: "sw-x", From: c.from, To: c.to}, frame, decode(t, frame))
		require.Equal(t, c.rule, v.Rule, "%v %s->%s", c.now, c.from, c.to)
	}
	require.Equal(t, uint64(2), in.Hits(5))
	require.Equal(t, uint64(2), in.Hits(6))
}

// TestChanges: link state changes in time order, overlapping events
// merged, each naming the event that starts or ends.
func TestChanges(t *testing.T) {
	plan := mustParse(t, linkPlan+"down link=x from=0 to=5ms\ndown link=x from=5ms to=6ms\n")
	type ch struct {
		at   string
		link string
		up   bool
		rule int
	}
	var got []ch
	for _, c := range plan.Changes() {
		got = append(got, ch{sim.Duration(c.Time).String(), c.Link, c.Up, c.Rule})
		require.Equal(t, plan.Rules[c.Rule-1].String(), c.Text)
		require.Equal(t, c.Link == "a|b,c", c.Partition)
	}
	require.Equal(t, []ch{
		{"0s", "x", false, 7},
		{"1ms", "a-sw", false, 2},
		{"4ms", "a-sw", true, 3},
		{"5ms", "sw-c", false, 4},
		{"6ms", "x", true, 8},
		{"10ms", "a|b,c", false, 5},
		{"12ms", "a|b,c", true, 6},
	}, got)

	in := faults.NewInjector(plan, nil)
	for _, c := range plan.Changes() {
		if c.Partition {
			require.Equal(t, !c.Up, in.Partitioned(c.Time, "a", "b"))
			require.Equal(t, c.Up, in.Partitioned(c.Time-1, "a", "b"))
		} else {
			require.Equal(t, c.Up, in.LinkUp(c.Time, c.Link))
			if c.Time > 0 {
				require.Equal(t, !c.Up, in.LinkUp(c.Time-1, c.Link))
			}
		}
	}
	require.Empty(t, mustParse(t, "drop\n").Changes())
}
