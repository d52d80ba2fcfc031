package faults_test

import (
	"strings"
	"testing"

	"github.com/rocesim/rocesim/faults"
	"github.com/rocesim/rocesim/wire"
)

// TestReport: a plan's report counts what each rule decided and says a
// rule that never matched, in the plan's order and canonical text.
func TestReport(t *testing.T) {
	plan := mustParse(t, "drop tx=1 psn=2\ndup psn=3\ndrop psn=9999")
	in := faults.NewInjector(plan, newRand(1))
	for i, psn := range []uint32{1, 2, 2, 3, 3} {
		// PSN 2 twice: its first transmission, then a retransmission.
		hop := faults.Hop{Link: "a-sw", From: "a", To: "b", First: true, Tx: 1}
		if i == 2 {
			hop.Tx = 2
		}
		frame, pkt := sent{pkt: &pktSpec{op: wire.OpRCSendOnly, psn: psn, qp: 0x11}}.frame(t)
		in.Decide(0, hop, frame, pkt)
	}
	var got []string
	for _, r := range plan.Report(in.Hits) {
		got = append(got, r.String())
	}
	want := []string{
		"rule 1 acted on 1 frame: drop psn=2 tx=1",
		"rule 2 acted on 2 frames: dup psn=3",
		"rule 3 never matched a frame: drop psn=9999",
	}
	if len(got) != len(want) {
		t.Fatalf("report %q, want %q", got, want)
	}
	for i := range want {
		if got[i] != want[i] {
			t.Errorf("line %d: %q, want %q", i+1, got[i], want[i])
		}
	}
	r := plan.Report(in.Hits)
	if r[0].Quiet() || !r[2].Quiet() {
		t.Errorf("Quiet: rule 1 %v, rule 3 %v; want false, true", r[0].Quiet(), r[2].Quiet())
	}
	// A quiet rule is a warning where a tool prints the report.
	if l := r[0].Line("fault"); l != "fault rule 1 acted on 1 frame: drop psn=2 tx=1" {
		t.Errorf("rule 1's line %q", l)
	}
	if l := r[2].Line("ROCESIM_FAULTS"); l != "warning: ROCESIM_FAULTS rule 3 never matched a frame: drop psn=9999" {
		t.Errorf("rule 3's line %q", l)
	}
	var none *faults.Plan
	if r := none.Report(in.Hits); r != nil {
		t.Errorf("a nil plan's report: %v", r)
	}
}

// TestCheckNames: a rule naming a link or node the topology lacks is an
// error that names the rule, the key and what there is; names that
// exist, and rules that name none, pass.
func TestCheckNames(t *testing.T) {
	links, nodes := []string{"a-sw", "b-sw"}, []string{"a", "b", "sw"}
	for _, c := range []struct{ plan, err string }{
		{"drop psn=2 tx=1; delay 1us link=a-sw; drop dir=sw->b src=a dst=b; partition a|b; down link=b-sw", ""},
		{"drop psn=2\ndrop link=a-b", `rule 2: link=a-b: no such link (links: a-sw, b-sw)`},
		{"drop src=c", `rule 1: src=: no node "c" (nodes: a, b, sw)`},
		{"drop dst=rocesim0", `rule 1: dst=: no node "rocesim0" (nodes: a, b, sw)`},
		{"drop dir=a->c", `rule 1: dir=: no node "c" (nodes: a, b, sw)`},
		{"partition a|x", `rule 1: partition: no node "x" (nodes: a, b, sw)`},
	} {
		err := mustParse(t, strings.ReplaceAll(c.plan, ";", "\n")).CheckNames(links, nodes)
		got := ""
		if err != nil {
			got = err.Error()
		}
		if got != c.err {
			t.Errorf("%s: error %q, want %q", c.plan, got, c.err)
		}
	}
	var none *faults.Plan
	if err := none.CheckNames(links, nodes); err != nil {
		t.Errorf("nil plan: %v", err)
	}
}
