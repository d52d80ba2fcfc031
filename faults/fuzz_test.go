package faults_test

import (
	"errors"
	"reflect"
	"strings"
	"testing"

	"github.com/rocesim/rocesim/faults"
	"github.com/rocesim/rocesim/sim"
	"github.com/rocesim/rocesim/wire"
)

// FuzzParse feeds arbitrary text to Parse: it must never panic, and a plan
// it accepts must be valid, print to text that parses back to an equal
// plan, and that text must be a fixed point of String. The plan must also
// run: Decide over a few frames does not panic.
func FuzzParse(f *testing.F) {
	for _, text := range canonical {
		f.Add(text)
	}
	f.Add(linkPlan)
	f.Add("drop psn=2 psn=3")
	f.Add("rewrite set-psn=-0x10 set-msn=+0 class=ack # c\r\n")
	f.Add("truncate cut=4 len=60")
	f.Add("partition a,b|c|d,e from=1.5us to=1.6us")
	f.Add("rewrite set-va=-0x8 set-rkey=7 set-qkey=+1 set-imm=9 set-pad=3 set-ecn=ect0 set-dmalen=0 set-qp=1 fix=none")
	f.Add("truncate cut=8 fix=none\ndown link=a-b from=1us after=3")
	frames := [][]byte{
		pktSpec{op: wire.OpRCSendOnly, psn: 2, qp: 0x11}.build(f),
		pktSpec{op: wire.OpRCAcknowledge, psn: 2, qp: 0x11, syn: 0x60}.build(f),
		nonRoCE(),
	}
	f.Fuzz(func(t *testing.T, text string) {
		p, err := faults.Parse(text)
		if err != nil {
			var pe *faults.ParseError
			if !errors.As(err, &pe) || pe.Line < 1 || pe.Col < 1 || pe.Msg == "" {
				t.Fatalf("error %v is not a positioned *ParseError", err)
			}
			return
		}
		if err := p.Validate(); err != nil {
			t.Fatalf("Parse returned an invalid plan: %v", err)
		}
		s := p.String()
		q, err := faults.Parse(s)
		if err != nil {
			t.Fatalf("String() does not parse: %v\n%s", err, s)
		}
		if !plansEqual(p, q) {
			t.Fatalf("round trip changed the plan:\n%q\n%q", text, s)
		}
		if s2 := q.String(); s2 != s {
			t.Fatalf("String() is not canonical:\n%q\n%q", s, s2)
		}
		if len(p.Rules) != strings.Count(s, "\n") {
			t.Fatalf("%d rules printed as %d lines", len(p.Rules), strings.Count(s, "\n"))
		}
		in := faults.NewInjector(p, newRand(1))
		for i, fr := range frames {
			frame := append([]byte(nil), fr...)
			var pkt *wire.Packet
			if i < 2 {
				pkt = decode(t, frame)
			}
			hop := firstHop
			hop.Tx = in.CountTx(hop, pkt)
			v := in.Decide(sim.Time(i)*sim.Time(sim.Millisecond), hop, frame, pkt)
			if v.Action == faults.Truncate && (v.Len < 0 || v.Len >= len(frame)) {
				t.Fatalf("truncate to %d of a %d-byte frame", v.Len, len(frame))
			}
		}
		p.Changes()
	})
}

// plansEqual compares plans rule by rule (an empty plan's Rules may be nil
// or empty).
func plansEqual(a, b *faults.Plan) bool {
	if len(a.Rules) == 0 || len(b.Rules) == 0 {
		return len(a.Rules) == len(b.Rules)
	}
	return reflect.DeepEqual(a.Rules, b.Rules)
}

// FuzzParseMatch feeds arbitrary text to ParseMatch: it must never panic;
// an error is a positioned *ParseError; a match it accepts has no
// stateful keys, prints (as a drop rule) to text whose keys parse back to
// an equal match, and can be evaluated on any frame.
func FuzzParseMatch(f *testing.F) {
	for _, text := range []string{"", "class=nak src=b", "psn=2 tx=2", "link=a-sw dir=a->b qp=0x11 op=RC_SEND_ONLY",
		"from=1ms to=2ms psn=16777200-1", "nth=2", "psn=1 # c", "dst=a\nsrc=b", "op=0x0c class=atomic"} {
		f.Add(text)
	}
	frames := [][]byte{
		pktSpec{op: wire.OpRCSendOnly, psn: 2, qp: 0x11}.build(f),
		pktSpec{op: wire.OpRCAcknowledge, psn: 2, qp: 0x11, syn: 0x60}.build(f),
	}
	f.Fuzz(func(t *testing.T, text string) {
		m, err := faults.ParseMatch(text)
		if err != nil {
			var pe *faults.ParseError
			if !errors.As(err, &pe) || pe.Line != 1 || pe.Col < 1 || pe.Msg == "" {
				t.Fatalf("error %v is not a positioned *ParseError", err)
			}
			return
		}
		if m.Nth != 0 || m.Prob != 0 || m.First != 0 {
			t.Fatalf("stateful keys accepted: %+v", m)
		}
		r := faults.Rule{Action: faults.Drop, Match: m}
		keys := strings.TrimPrefix(r.String(), "drop")
		m2, err := faults.ParseMatch(keys)
		if err != nil {
			t.Fatalf("the printed keys %q do not parse: %v", keys, err)
		}
		if !plansEqual(&faults.Plan{Rules: []faults.Rule{r}}, &faults.Plan{Rules: []faults.Rule{{Action: faults.Drop, Match: m2}}}) {
			t.Fatalf("round trip changed the match: %q -> %q", text, keys)
		}
		for _, fr := range frames {
			var p wire.Packet
			if p.DecodeHeaders(fr) != nil {
				t.Fatal("test frame does not decode")
			}
			for _, first := range []bool{true, false} {
				m.Matches(sim.Time(1000), &faults.Hop{Link: "a-b", From: "a", To: "b", First: first, Tx: 2}, &p)
				m.Matches(0, &faults.Hop{Link: "a-b", From: "a", To: "b", First: first}, nil)
			}
		}
	})
}
