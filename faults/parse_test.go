package faults_test

import (
	"errors"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/rocesim/rocesim/faults"
	"github.com/rocesim/rocesim/sim"
	"github.com/rocesim/rocesim/wire"
)

// canonical are plans in canonical form: String() of their parse gives
// them back byte for byte.
var canonical = []string{
	"",
	"drop\n",
	"drop psn=2 tx=1\n",
	"delay 50us class=ack prob=0.1\n",
	"delay 1.5ms\ndelay 1ns\ndelay 1.000001s\ndelay 3600s\n",
	"dup\ndup n=2 class=request\n",
	"reorder n=3 dir=a->b psn=10-20\n",
	"corrupt\ncorrupt bit=3\ncorrupt byte=60 bit=7 class=request first=1\n",
	"truncate len=60\ntruncate cut=4 link=sw-b\n",
	"rewrite set-psn=+1 class=request nth=5\n",
	"rewrite set-psn=-3 set-syndrome=nak-seq set-msn=7 class=ack\n",
	"rewrite set-syndrome=ack\nrewrite set-syndrome=rnr-12\nrewrite set-syndrome=0x05\nrewrite set-syndrome=0xa0\nrewrite set-syndrome=nak-rd\n",
	"drop link=a-sw dir=a->b src=a dst=b qp=0x11 op=RC_SEND_ONLY class=request psn=16777215-4 tx=2 from=1ms to=2.5ms nth=2 prob=0.25 first=3\n",
	"drop op=CNP\ndrop qp=0x0 op=UD_SEND_ONLY_WITH_IMMEDIATE\n",
	"down link=a-b from=1ms to=3ms\ndown link=a-sw\n",
	"partition a,b|c,d from=5ms to=6ms\npartition x|y|z.1:2/3_4-5\n",
	"drop prob=1e-05\n",
}

func TestCanonicalRoundTrip(t *testing.T) {
	for _, text := range canonical {
		p := mustParse(t, text)
		require.Equal(t, text, p.String())
		again := mustParse(t, p.String())
		require.Equal(t, p, again)
	}
}

// TestCanonicalForm: what Parse accepts beyond the canonical form, and
// the canonical text it prints.
func TestCanonicalForm(t *testing.T) {
	cases := []struct{ in, want string }{
		{"  drop   tx=1\tpsn=2   # lose it\n\n# comment only\n\t\n", "drop psn=2 tx=1\n"},
		{"drop psn=2#no space before the comment", "drop psn=2\n"},
		{"drop\r\ndup\r\n", "drop\ndup\n"},
		{"delay class=ack 50µs prob=0.10", "delay 50us class=ack prob=0.1\n"},
		{"delay 1500us\ndelay 0.5s\ndelay 1000ns", "delay 1.5ms\ndelay 500ms\ndelay 1us\n"},
		{"dup n=1", "dup\n"},
		{"corrupt bit=0", "corrupt\n"},
		{"drop qp=17 op=4 psn=0x10-0x10 from=0", "drop qp=0x11 op=RC_SEND_ONLY psn=16\n"},
		{"drop op=rc_acknowledge", "drop op=RC_ACKNOWLEDGE\n"},
		{"rewrite set-msn=+0 set-syndrome=96 set-psn=-0", "rewrite set-psn=+0 set-syndrome=nak-seq set-msn=+0\n"},
		{"rewrite set-syndrome=0x1f", "rewrite set-syndrome=ack\n"},
		{"rewrite set-syndrome=0x2c", "rewrite set-syndrome=rnr-12\n"},
		{"rewrite set-opcode=0x0c", "rewrite set-opcode=RC_RDMA_READ_REQUEST\n"},
		{"rewrite set-opcode=0x1d op=rc_rdma_write_only", "rewrite set-opcode=0x1d op=RC_RDMA_WRITE_ONLY\n"},
	}
	for _, c := range cases {
		require.Equal(t, c.want, mustParse(t, c.in).String(), "input %q", c.in)
	}
}

// TestGoPlanRoundTrip: plans built in Go print to text that parses back
// to an equal plan.
func TestGoPlanRoundTrip(t *testing.T) {
	plans := []*faults.Plan{
		{},
		{Rules: []faults.Rule{
			{Action: faults.Drop, Match: faults.Match{PSN: faults.OnePSN(2), Tx: 1}},
			{Action: faults.Delay, Delay: 50 * sim.Microsecond, Match: faults.Match{Class: faults.ClassAck, Prob: 0.1}},
			{Action: faults.Duplicate, Copies: 3, Match: faults.Match{Link: "sw-b", Dir: faults.Direction{From: "a", To: "b"}}},
			{Action: faults.Reorder, Hold: 2, Match: faults.Match{HasQP: true, QP: 0, Nth: 4}},
			{Action: faults.Corrupt, HasByte: true, Byte: 0, Bit: 1, Match: faults.Match{HasOp: true, Op: wire.OpRCSendFirst}},
			{Action: faults.Corrupt},
			{Action: faults.Truncate, Cut: 4, Match: faults.Match{Src: "a", Dst: "b", First: 2}},
			{Action: faults.Truncate, Len: 42},
			{Action: faults.Rewrite, SetPSN: faults.Assign{Mode: faults.AssignAdd, Value: -1}},
			{Action: faults.Rewrite, SetSyndrome: faults.Assign{Mode: faults.AssignSet, Value: 0x61}, SetMSN: faults.Assign{Mode: faults.AssignSet, Value: 0xFFFFFF}},
			{Action: faults.Drop, Match: faults.Match{PSN: faults.PSNs(0xFFFFF0, 5), From: 1, To: sim.Time(sim.Second + 1)}},
			faults.Down("a-b", sim.Time(sim.Millisecond), 0),
			faults.Down("a-b", 0, sim.Time(3*sim.Millisecond)),
			faults.Partition(sim.Time(5*sim.Millisecond), sim.Time(6*sim.Millisecond), []string{"a", "b"}, []string{"c"}),
			{Action: faults.Drop, Match: faults.Match{Prob: 1.0 / 3}},
			{Action: faults.Delay, Delay: 1<<63 - 1},
		}},
	}
	for _, p := range plans {
		require.NoError(t, p.Validate())
		text := p.String()
		back, err := faults.Parse(text)
		require.NoError(t, err, text)
		if len(p.Rules) == 0 {
			require.Empty(t, back.Rules)
			continue
		}
		require.Equal(t, p, back, text)
	}
}

// TestParseErrors: malformed plans give "line:col: message", col at the
// offending token (at the verb when something is missing).
func TestParseErrors(t *testing.T) {
	cases := []struct{ text, want string }{
		{"lose psn=2", `1:1: unknown action "lose" (want drop, dup, delay, reorder, corrupt, truncate, rewrite, down or partition)`},
		{"drop\n\n  Drop", `3:3: unknown action "Drop" (want drop, dup, delay, reorder, corrupt, truncate, rewrite, down or partition)`},
		{"drop pns=2", `1:6: unknown key "pns"`},
		{"drop psn=2 psn=3", `1:12: duplicate key "psn"`},
		{"drop psn=2 tx=1 psn=2", `1:17: duplicate key "psn"`},
		{"drop psn=x", `1:10: bad psn "x": want a number (decimal or 0x hex)`},
		{"drop psn=5-3", `1:10: bad psn "5-3": range runs backwards (the last PSN is before the first, or more than 2^23-1 after it)`},
		{"drop psn=16777216", `1:10: bad psn "16777216": want at most 16777215`},
		{"drop psn=", `1:6: missing value for psn=`},
		{"drop =2", `1:6: missing key before "=" in "=2"`},
		{"drop 2", `1:6: unexpected word "2" (want key=value)`},
		{"delay", `1:1: delay needs a duration, e.g. "delay 50us"`},
		{"  delay class=ack", `1:3: delay needs a duration, e.g. "delay 50us"`},
		{"delay 50", `1:7: bad delay "50": want a duration such as 50us or 1.5ms (units ns, us, ms, s)`},
		{"delay 0", `1:7: bad delay "0": want a duration > 0`},
		{"delay 1h", `1:7: bad delay "1h": want a duration such as 50us or 1.5ms (units ns, us, ms, s)`},
		{"delay 5us 6us", `1:11: unexpected word "6us" (want key=value)`},
		{"reorder", `1:1: reorder needs n=N`},
		{"reorder n=0", `1:11: bad n "0": want a whole number >= 1`},
		{"drop n=2", `1:6: key "n" does not apply to drop`},
		{"down link=a-b qp=1", `1:15: key "qp" does not apply to down`},
		{"down from=1ms", `1:1: down needs link=`},
		{"partition from=1ms", `1:1: partition needs node groups, e.g. "partition a,b|c,d"`},
		{"partition a,b", `1:11: bad partition groups "a,b": want two or more groups of nodes separated by |`},
		{"partition a,b|b", `1:11: bad partition groups "a,b|b": node b appears twice in the partition`},
		{"partition a,,b|c", `1:11: bad partition groups "a,,b|c": bad node "": names use letters, digits and _ . : / -`},
		{"partition a||c", `1:11: bad partition groups "a||c": group 2 is empty`},
		{"truncate", `1:1: truncate needs len=N or cut=N`},
		{"truncate cut=4 len=60", `1:16: truncate takes len= or cut=, not both`},
		{"rewrite psn=2", `1:1: rewrite needs a field to set: set-psn=, set-msn=, set-syndrome=, set-opcode=, set-qp=, set-rkey=, set-va=, set-dmalen=, set-qkey=, set-imm=, set-pad= or set-ecn=`},
		{"rewrite set-syndrome=nak", `1:22: bad set-syndrome "nak": want ack, nak-seq, nak-invalid, nak-access, nak-op, nak-rd, rnr-N or a number 0..255`},
		{"rewrite set-syndrome=rnr-32", `1:22: bad set-syndrome "rnr-32": want an RNR timer code 0..31`},
		{"rewrite set-psn=+", `1:17: bad set-psn "+": want N, +N or -N`},
		{"rewrite set-msn=-16777216", `1:17: bad set-msn "-16777216": want at most 16777215`},
		{"corrupt bit=8", `1:13: bad bit "8": want a bit number 0..7`},
		{"drop class=acks", `1:12: bad class "acks": want one of request, response, ack, nak, rnr, read-response, atomic, ud, cnp`},
		{"drop op=RC_SEND", `1:9: bad op "RC_SEND": want an opcode name such as RC_SEND_ONLY, or its number`},
		{"drop op=0x1f", `1:9: bad op "0x1f": not an opcode rocesim knows`},
		{"drop qp=0x1000000", `1:9: bad qp "0x1000000": want at most 16777215`},
		{"drop qp=-1", `1:9: bad qp "-1": want a number (decimal or 0x hex)`},
		{"drop dir=a-b", `1:10: bad dir "a-b": want A->B with node names of letters, digits and _ . : / -`},
		{"drop link=a>b", `1:11: bad link "a>b": names use letters, digits and _ . : / -`},
		{"drop prob=0", `1:11: bad prob "0": want a probability 0 < P <= 1`},
		{"drop prob=NaN", `1:11: bad prob "NaN": want a probability 0 < P <= 1`},
		{"drop nth=0", `1:10: bad nth "0": want a whole number >= 1`},
		{"drop from=-1ms", `1:11: bad from "-1ms": want a time >= 0`},
		{"drop to=2ms from=2ms", `1:6: empty time window: to= must be after from=`},
		{"drop from=3ms to=2ms", `1:15: empty time window: to= must be after from=`},
		{"drop to=0", `1:6: empty time window: to= must be after from=`},
		{"drop psn=2\n# fine\ndup n=x", `3:7: bad n "x": want a number (decimal or 0x hex)`},
		{"drop\tpsn=2\tqp=x", `1:15: bad qp "x": want a number (decimal or 0x hex)`},
		// Columns count characters, not bytes: µ is two bytes.
		{"delay 50µs qp=x", `1:15: bad qp "x": want a number (decimal or 0x hex)`},
		{"drop src=ä", `1:10: bad src "ä": names use letters, digits and _ . : / -`},
		{"drop qp=1 ä=1", `1:11: unknown key "ä"`},
	}
	for _, c := range cases {
		_, err := faults.Parse(c.text)
		require.Error(t, err, c.text)
		require.Equal(t, c.want, err.Error(), "plan %q", c.text)
		var pe *faults.ParseError
		require.True(t, errors.As(err, &pe))
		require.Equal(t, c.want, pe.Error())
		require.True(t, strings.HasSuffix(c.want, pe.Msg))
	}
}

// TestValidate: plans built in Go that String could not print faithfully
// are rejected, naming the rule.
func TestValidate(t *testing.T) {
	cases := []struct {
		rule faults.Rule
		want string
	}{
		{faults.Rule{}, "faults: rule 1: no action (a frame rule needs one of drop, dup, delay, reorder, corrupt, truncate, rewrite)"},
		{faults.Rule{Action: faults.Duplicate}, "faults: rule 1: bad n 0: dup needs n >= 1"},
		{faults.Rule{Action: faults.Drop, Copies: 2}, "faults: rule 1: n= does not apply to drop"},
		{faults.Rule{Action: faults.Delay}, "faults: rule 1: bad delay 0: delay needs a duration > 0"},
		{faults.Rule{Action: faults.Truncate, Len: 4, Cut: 4}, "faults: rule 1: truncate takes len= or cut=, not both"},
		{faults.Rule{Action: faults.Rewrite}, "faults: rule 1: rewrite needs a field to set: set-psn=, set-msn=, set-syndrome=, set-opcode=, set-qp=, set-rkey=, set-va=, set-dmalen=, set-qkey=, set-imm=, set-pad= or set-ecn="},
		{faults.Rule{Action: faults.Rewrite, SetSyndrome: faults.Assign{Mode: faults.AssignAdd, Value: 1}}, "faults: rule 1: bad set-syndrome: want AssignSet of a value 0..255"},
		{faults.Rule{Action: faults.Drop, Match: faults.Match{PSN: faults.PSNs(5, 3)}}, "faults: rule 1: bad psn 5-3: range runs backwards (the last PSN is before the first, or more than 2^23-1 after it)"},
		{faults.Rule{Action: faults.Drop, Match: faults.Match{QP: 5}}, "faults: rule 1: QP is set but HasQP is false"},
		{faults.Rule{Action: faults.Drop, Match: faults.Match{Link: "a b"}}, `faults: rule 1: bad link "a b": names use letters, digits and _ . : / -`},
		{faults.Rule{Action: faults.Drop, Match: faults.Match{Dir: faults.Direction{From: "a"}}}, "faults: rule 1: dir needs both nodes (dir=A->B)"},
		{faults.Rule{Action: faults.Drop, Match: faults.Match{Prob: 1.5}}, "faults: rule 1: bad prob 1.5: want a probability 0 < P <= 1"},
		{faults.Rule{Action: faults.Drop, Match: faults.Match{From: 5, To: 5}}, "faults: rule 1: empty time window: to= must be after from="},
		{faults.Rule{Action: faults.Drop, Event: faults.EventDown}, "faults: rule 1: a link event (down) has no action"},
		{faults.Down("", 0, 0), "faults: rule 1: down needs link="},
		{faults.Rule{Event: faults.EventDown, Match: faults.Match{Link: "x", Tx: 1}}, "faults: rule 1: down takes only link=, from= and to="},
		{faults.Partition(0, 0, []string{"a"}), "faults: rule 1: partition needs two or more node groups"},
		{faults.Partition(0, 0, []string{"a"}, []string{"b", "a"}), "faults: rule 1: node a appears twice in the partition"},
		{faults.Rule{Action: faults.Drop, Groups: [][]string{{"a"}, {"b"}}}, "faults: rule 1: node groups belong to partition only"},
	}
	for _, c := range cases {
		p := &faults.Plan{Rules: []faults.Rule{{Action: faults.Drop}, c.rule}}
		err := p.Validate()
		require.Error(t, err)
		want := strings.Replace(c.want, "rule 1", "rule 2", 1)
		require.Equal(t, want, err.Error())
		var re *faults.RuleError
		require.True(t, errors.As(err, &re))
		require.Equal(t, 2, re.Rule)
		require.PanicsWithValue(t, want+" (check plans built in Go with Plan.Validate)", func() { faults.NewInjector(p, nil) })
	}
	require.PanicsWithValue(t, `faults: NewInjector: rule 1 uses prob= but rng is nil (pass the "faults" stream of sim.Seeds)`,
		func() { faults.NewInjector(mustParse(t, "drop prob=0.5"), nil) })
}

// TestInjectorOwnsItsPlan: changing the plan after NewInjector does not
// change what the injector decides.
func TestInjectorOwnsItsPlan(t *testing.T) {
	p := mustParse(t, "drop psn=2\npartition a|b")
	in := faults.NewInjector(p, nil)
	p.Rules[0].Match.PSN.First, p.Rules[0].Match.PSN.Last = 3, 3
	p.Rules[1].Groups[1][0] = "c"
	frame := pktSpec{op: wire.OpRCSendOnly, psn: 2}.build(t)
	hop := faults.Hop{Link: "x-y", From: "x", To: "y", First: true}
	require.Equal(t, 1, in.Decide(0, hop, frame, decode(t, frame)).Rule)
	require.True(t, in.Partitioned(0, "a", "b"))
}
