package verbstest

import (
	"strings"

	"github.com/rocesim/rocesim/faults"
)

// SetFaults replaces the fault plan from now on with text, in the text
// form of package faults. Times in a plan (from= to=) are virtual times
// since the start of the run; a rule without them applies from now.
// A plan that does not parse fails the test.
//
//	w.SetFaults("drop src=server op=RC_RDMA_WRITE_MIDDLE tx=1")
func (w *World) SetFaults(text string) {
	w.t.Helper()
	w.SetPlan(w.parse("SetFaults", text))
}

// AddFaults adds the rules of text to the current plan, from now on:
//
//	w.AddFaults("down link=" + server.LinkName())  // the server dies now
//
// The rules already there start their counters afresh (see SetPlan).
func (w *World) AddFaults(text string) {
	w.t.Helper()
	add := w.parse("AddFaults", text)
	p := &faults.Plan{}
	if w.plan != nil {
		p.Rules = append(p.Rules, w.plan.Rules...)
	}
	p.Rules = append(p.Rules, add.Rules...)
	w.SetPlan(p)
}

// SetPlan replaces the fault plan from now on with p (nil: no faults).
// The new rules' counters (nth= first=) start from zero; transmission
// counts (tx=) carry on, so a retransmission after the change is still
// tx=2. A link the new plan holds down goes down now, and its hosts see
// their port go down. An invalid plan fails the test.
func (w *World) SetPlan(p *faults.Plan) {
	w.t.Helper()
	if err := w.vw.SetPlan(p); err != nil {
		w.fatalf("verbstest: SetPlan: %v", err)
	}
	w.plan = p
	w.history = append(w.history, reportLine{w.Now(), planText(p)})
}

// Plan returns the plan in force (nil if none).
func (w *World) Plan() *faults.Plan { return w.plan }

// RuleHits returns how many frames rule (from 1, as the plan in force
// numbers its rules) has acted on since that plan was set: dropped,
// duplicated, delayed, held back or altered; for a link event, frames
// lost to it. A test proves its fault happened with it, rather than
// trusting a rule whose psn= or qp= the run never reached:
//
//	require.EqualValues(t, 1, w.RuleHits(1), "the WRITE's middle packet was dropped once")
//
// 0 for a rule number outside the plan.
func (w *World) RuleHits(rule int) uint64 { return w.vw.Fabric().RuleHits(rule) }

func (w *World) parse(what, text string) *faults.Plan {
	w.t.Helper()
	p, err := faults.ParseInline(text)
	if err != nil {
		w.fatalf("verbstest: %s: fault plan line %v", what, err)
	}
	return p
}

// planText is a plan's canonical text without its final newline, or
// "(none)".
func planText(p *faults.Plan) string {
	if p == nil || len(p.Rules) == 0 {
		return "(none)"
	}
	return strings.TrimSuffix(p.String(), "\n")
}
