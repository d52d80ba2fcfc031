package scenario_test

import (
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/rocesim/rocesim/scenario"
	"github.com/rocesim/rocesim/sim"
)

// twoNodes is the head of the scenarios below: a and b, one RC pair.
const twoNodes = `node a b
link a b
mr a.buf size=4096 fill=seq
mr b.buf size=4096
qp a.q rc peer=b.q psn=1
qp b.q rc psn=1 min_rnr_timer=1
`

func mustRun(t *testing.T, text string) *scenario.Result {
	t.Helper()
	s, err := scenario.Parse("t.scenario", text)
	require.NoError(t, err)
	res, err := s.Run(scenario.Options{})
	require.NoError(t, err)
	return res
}

// steps returns the step events of a trace: time and step text.
func steps(tr *sim.Trace) (out []string) {
	for _, e := range tr.Events() {
		if e.Kind == "step" {
			for _, f := range e.Fields {
				if f.Key == "step" {
					out = append(out, sim.Duration(e.Time).String()+" "+f.Value)
				}
			}
		}
	}
	return out
}

// wcTimes returns when node's completions were made: the moments on
// lines react to.
func wcTimes(tr *sim.Trace, node string) (out []sim.Time) {
	for _, e := range tr.Events() {
		if e.Kind == "completion" && e.Node == node {
			out = append(out, e.Time)
		}
	}
	return out
}

// TestOnLineFiresAtTheCompletion: an on line's step is done at the
// virtual time its completion is polled, which is the time the NIC made
// it (every instant is polled), once per matching completion, at most
// times= times.
func TestOnLineFiresAtTheCompletion(t *testing.T) {
	res := mustRun(t, twoNodes+`at 0 b.q recv wr=100 len=64
at 0 a.q send wr=1 len=64
on b.q wr=100 times=2 b.q recv wr=100 len=64
on a.q wr=1 times=2 a.q send wr=1 len=64
expect a.q completions 1:SUCCESS 1:SUCCESS 1:SUCCESS
expect b.q completions 100:SUCCESS 100:SUCCESS 100:SUCCESS
`)
	assert.Empty(t, res.Failed)
	st := steps(res.Trace)
	require.Len(t, st, 6, "%q", st)
	assert.Equal(t, []string{"0s b.q recv wr=100 len=64", "0s a.q send wr=1 len=64"}, st[:2])
	// Each re-post happens after a completion, never at time 0: the loop
	// is closed, not timed.
	for _, s := range st[2:] {
		assert.NotRegexp(t, `^0s `, s)
	}
	assert.Len(t, res.Completions, 6)
}

// TestOnLineTimesBound: an on line fires no more than times= times, and
// once without it.
func TestOnLineTimesBound(t *testing.T) {
	for _, tc := range []struct {
		opt  string
		want int
	}{{"", 1}, {"times=3 ", 3}} {
		res := mustRun(t, twoNodes+`at 0 times=5 a.q send wr=1 op=write len=64
on a.q wr=1 `+tc.opt+`a.q send wr=2 op=write len=64
`)
		n := 0
		for _, c := range res.Completions {
			if c.Node == "a" && c.WRID == 2 {
				n++
			}
		}
		assert.Equal(t, tc.want, n, "on line with %q", tc.opt)
	}
}

// TestAtLineTimes: times= on an at line does the step N times at once.
func TestAtLineTimes(t *testing.T) {
	res := mustRun(t, twoNodes+"at 0 times=3 a.q send wr=7 op=write len=64\nexpect a.q completions 7:SUCCESS 7:SUCCESS 7:SUCCESS\n")
	assert.Empty(t, res.Failed)
	assert.Equal(t, []string{"0s a.q send wr=7 op=write len=64", "0s a.q send wr=7 op=write len=64", "0s a.q send wr=7 op=write len=64"}, steps(res.Trace))
}

// TestOnLineAfter: after=D does the step D after the completion, and a
// filter on status= fires only for that status.
func TestOnLineAfter(t *testing.T) {
	res := mustRun(t, twoNodes+`at 0 a.q send wr=1 op=write len=64
on a.q wr=1 status=SUCCESS after=25us a.q send wr=2 op=write len=64
on a.q wr=1 status=RETRY_EXC_ERR a.q send wr=3 op=write len=64
`)
	wc := wcTimes(res.Trace, "a")
	require.NotEmpty(t, wc)
	st := steps(res.Trace)
	require.Len(t, st, 2, "%q", st)
	assert.Equal(t, (sim.Duration(wc[0])+25*sim.Microsecond).String()+" a.q send wr=2 op=write len=64", st[1])
}

// TestOnLinesDeterministic: the same closed loop twice gives the same
// trace, event for event.
func TestOnLinesDeterministic(t *testing.T) {
	s, ok := scenario.Lookup("pingpong")
	require.True(t, ok)
	var texts [2]string
	for i := range texts {
		res, err := s.Run(scenario.Options{Seed: 5})
		require.NoError(t, err)
		var b strings.Builder
		for _, e := range res.Trace.Events() {
			b.WriteString(e.String() + "\n")
		}
		texts[i] = b.String()
	}
	assert.Equal(t, texts[0], texts[1])
}

// TestExpectFrames: expect frames counts recorded frames with the fault
// plans' match keys; a wrong count fails with both numbers.
func TestExpectFrames(t *testing.T) {
	res := mustRun(t, twoNodes+`fault drop psn=2 tx=1 src=a
at 0 b.q recv wr=1 len=4096
at 0 a.q send wr=2 len=4096
expect frames class=nak src=b count=1
expect frames src=a tx=2 count=3
expect frames src=a tx=1 count=4
expect frames class=rnr none
expect frames class=nak count=2
expect frames src=a psn=2 count=0
`)
	assert.Equal(t, []string{
		"line 14: expect frames class=nak count=2: expected 2 matching frames, got 1",
		"line 15: expect frames src=a psn=2 count=0: expected 0 matching frames, got 2",
	}, res.Failed)
}

// TestParseErrorsOfNewLines: on lines, times= and expect frames report
// positioned errors.
func TestParseErrorsOfNewLines(t *testing.T) {
	for _, tc := range []struct{ line, err string }{
		{"on a.q wr=1", "7:8: expected a step (send, recv, modify, poll or rereg) after the options"},
		{"on a.q wr=x a.q poll", `7:11: bad wr "x": expected a number (decimal or 0x hex)`},
		{"on a.q wr=1 times=0 a.q poll", `7:19: bad times "0": want a whole number >= 1`},
		{"on a.q wr=1 status=NOPE a.q poll", `7:20: expected a completion status like IBV_WC_SUCCESS or IBV_WC_RETRY_EXC_ERR, got "NOPE"`},
		{"on a.q when=1 a.q poll", `7:8: unknown key "when" in on (want after=, status=, times=, wr=)`},
		{"on c.q a.q poll", `7:4: unknown node "c"`},
		{"at 0 times=2 a.q send wr=1 len=8 after=1us", `7:34: unknown key "after" in send`},
		{"expect frames class=nak", `7:15: expect frames ends with count=N or none, e.g. expect frames class=nak src=b count=1`},
		{"expect frames clas=nak none", `7:15: unknown key "clas"`},
		{"expect frames src=c count=1", `7:19: no node "c" in this scenario`},
		{"expect frames first=1 count=1", `7:15: nth=, prob= and first= count frames as a plan acts on them; a match for recorded frames cannot use them`},
	} {
		_, err := scenario.Parse("t.scenario", twoNodes+tc.line+"\n")
		require.Error(t, err, tc.line)
		assert.Contains(t, err.Error(), tc.err, tc.line)
	}
}

// TestEmptyScenarioIsAnError: a file with nothing (or only comments) to
// run is refused, not passed with "expectations: all met".
func TestEmptyScenarioIsAnError(t *testing.T) {
	for _, text := range []string{"", "\n\n", "# nothing here\nscenario empty\ndescription none\n"} {
		_, err := scenario.Parse("empty.scenario", text)
		require.Error(t, err, "%q", text)
		assert.Contains(t, err.Error(), "1:1: empty scenario: no node line")
	}
}

// TestUnmatchedFaultRuleWarns: a fault rule that never acted is named in
// Result.Warnings; one that did is not.
func TestUnmatchedFaultRuleWarns(t *testing.T) {
	res := mustRun(t, twoNodes+`fault drop psn=2 tx=1 src=a
fault drop psn=99
at 0 b.q recv wr=1 len=4096
at 0 a.q send wr=2 len=4096
`)
	assert.Equal(t, []string{"line 8: fault rule 2 never matched a frame: drop psn=99"}, res.Warnings)
	assert.Equal(t, 0, res.Checked)
}

// TestProgramRefusesClosedLoops: the real-rxe replay has no on lines or
// times= yet, and says so rather than replay something else.
func TestProgramRefusesClosedLoops(t *testing.T) {
	s, err := scenario.Parse("t.scenario", twoNodes+"at 0 times=2 a.q send wr=1 len=8\n")
	require.NoError(t, err)
	_, err = s.Program()
	require.Error(t, err)
	assert.Contains(t, err.Error(), "line 7: not a two-node program: times=2")
	for name, want := range map[string]string{
		"pingpong":   "line 23: not a two-node program: an on line",
		"bandwidth":  "line 17: not a two-node program: an on line",
		"rnr-repost": "line 19: not a two-node program: an on line",
	} {
		s, ok := scenario.Lookup(name)
		require.True(t, ok)
		_, err := s.Program()
		require.Error(t, err)
		assert.Contains(t, err.Error(), want, name)
	}
}

// TestMatchSemanticsOfTheTutorial: what the README's tutorial step 6
// says of tx=, first= and nth=, on a 4-packet SEND.
func TestMatchSemanticsOfTheTutorial(t *testing.T) {
	const body = `at 0 b.q recv wr=1 len=4096
at 0 a.q send wr=2 len=4096
at 10us a.q send wr=3 op=write len=64
at 20us a.q send wr=4 op=write len=64
`
	for fault, want := range map[string][]string{
		"drop op=RC_SEND_MIDDLE tx=1":        {"SEND_MIDDLE psn=2", "SEND_MIDDLE psn=3"},
		"drop op=RC_SEND_MIDDLE first=1":     {"SEND_MIDDLE psn=2"},
		"drop class=ack nth=2 first=1":       {"ACK psn=5"},
		"drop src=a tx=1 psn=2":              {"SEND_MIDDLE psn=2"},
		"drop src=a op=RC_SEND_MIDDLE nth=2": {"SEND_MIDDLE psn=3"},
	} {
		res := mustRun(t, twoNodes+"fault "+fault+"\n"+body)
		var got []string
		for _, e := range res.Trace.Events() {
			if e.Kind == "frame-drop" {
				op, _ := e.Get("op")
				psn, _ := e.Get("psn")
				got = append(got, strings.TrimPrefix(strings.TrimPrefix(op, "RC_"), "RC ")+" psn="+psn)
			}
		}
		for i := range got {
			got[i] = strings.Replace(got[i], "ACKNOWLEDGE", "ACK", 1)
		}
		assert.Equal(t, want, got, fault)
	}
}

// TestRewriteFieldsReachTheResponder: rewritten header fields reach the
// responder's checks as a valid frame; fix=none is refused by the ICRC
// check first and only the ACK timer notices.
func TestRewriteFieldsReachTheResponder(t *testing.T) {
	for _, tc := range []struct{ fault, op, want string }{
		{"rewrite set-rkey=0x99 op=RC_RDMA_WRITE_ONLY first=1", "write", "REM_ACCESS_ERR"},
		{"rewrite set-va=+0x100000 op=RC_RDMA_WRITE_ONLY first=1", "write", "REM_ACCESS_ERR"},
		{"rewrite set-dmalen=4096 op=RC_RDMA_WRITE_ONLY first=1", "write", "REM_INV_REQ_ERR"},
		{"rewrite set-rkey=0x99 fix=none op=RC_RDMA_WRITE_ONLY first=1", "write", "SUCCESS"},
	} {
		res := mustRun(t, twoNodes+"fault "+tc.fault+"\nat 0 a.q send wr=1 op="+tc.op+" len=64\n"+
			"expect a.q wr=1 "+tc.want+"\n")
		assert.Empty(t, res.Failed, tc.fault)
		assert.Empty(t, res.Warnings, tc.fault)
	}
}
