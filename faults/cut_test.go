package faults_test

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/rocesim/rocesim/faults"
	"github.com/rocesim/rocesim/sim"
	"github.com/rocesim/rocesim/wire"
)

// TestDownAfter: "down link=X after=K" lets the first K RoCE frames into
// X (either direction, any hop), reports the cut with the K-th, and drops
// everything after, non-RoCE frames too; other links are not affected.
// Frames before from= do not count.
func TestDownAfter(t *testing.T) {
	in := faults.NewInjector(mustParse(t, "down link=a-b from=1ms after=3\n"), nil)
	req := pktSpec{op: wire.OpRCSendOnly, psn: 1, qp: 0x11}
	ack := pktSpec{op: wire.OpRCAcknowledge, psn: 1, qp: 0x11, syn: 0x1F}
	decide := func(now sim.Time, link string, s *pktSpec) faults.Verdict {
		if s == nil {
			return in.Decide(now, faults.Hop{Link: link, From: "a", To: "b", First: true}, nonRoCE(), nil)
		}
		f := s.build(t)
		return in.Decide(now, faults.Hop{Link: link, From: "a", To: "b", First: true}, f, decode(t, f))
	}
	assert.Equal(t, faults.Verdict{}, decide(0, "a-b", &req), "before from=: not counted")
	assert.Equal(t, faults.Verdict{}, decide(ms, "a-b", &req), "1st")
	assert.Equal(t, faults.Verdict{}, decide(ms, "a-b", nil), "not RoCE: passes, not counted")
	assert.Equal(t, faults.Verdict{}, decide(ms, "b-c", &req), "another link")
	assert.Equal(t, faults.Verdict{}, decide(ms, "a-b", &ack), "2nd, the other way")
	assert.True(t, in.LinkUp(ms, "a-b"))
	v := decide(2*ms, "a-b", &req)
	assert.Equal(t, faults.Pass, v.Action, "the 3rd passes")
	assert.Equal(t, faults.LinkChange{Time: 2 * ms, Link: "a-b", Rule: 1, Text: "down link=a-b from=1ms after=3"}, v.Cut)
	assert.False(t, in.LinkUp(2*ms, "a-b"))
	for _, s := range []*pktSpec{&req, &ack, nil} {
		v := decide(3*ms, "a-b", s)
		assert.Equal(t, "dropped by rule 1: down link=a-b from=1ms after=3", v.String())
		assert.Zero(t, v.Cut.Rule, "the cut is reported once")
	}
	assert.Equal(t, uint64(4), in.Hits(1), "the cut and three drops")
	assert.Empty(t, mustParse(t, "down link=a-b after=3\n").Changes(), "no time is known for a cut")
}

// TestDownAfterText: after= is down's alone, it parses, prints
// canonically and refuses to= and other verbs.
func TestDownAfterText(t *testing.T) {
	p := mustParse(t, "down after=5 link=a-b\n")
	assert.Equal(t, "down link=a-b after=5\n", p.String())
	assert.Equal(t, 5, p.Rules[0].After)
	for text, want := range map[string]string{
		"down link=a-b after=0":        `1:21: bad after "0": want a whole number >= 1`,
		"down link=a-b after=2 to=1ms": "1:23: down after= takes no to= (a cut link stays down)",
		"drop after=2":                 `1:6: key "after" does not apply to drop`,
		"partition a|b after=2":        `1:15: key "after" does not apply to partition`,
	} {
		_, err := faults.Parse(text)
		require.Error(t, err, text)
		assert.Equal(t, want, err.Error(), text)
	}
	bad := faults.Plan{Rules: []faults.Rule{{Action: faults.Drop, After: 2}}}
	assert.EqualError(t, bad.Validate(), "faults: rule 1: after= does not apply to drop")
	bad = faults.Plan{Rules: []faults.Rule{{Event: faults.EventDown, Match: faults.Match{Link: "x", To: 5}, After: 2}}}
	assert.EqualError(t, bad.Validate(), "faults: rule 1: down after= takes no to= (a cut link stays down)")
}
