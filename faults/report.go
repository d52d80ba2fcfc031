package faults

import "strconv"

// RuleReport is what one rule of a plan did in a run: the summary a
// driver prints when the run ends, so that a rule that never matched (a
// misspelt psn=, a qp= of another run) is said, not silently ignored.
type RuleReport struct {
	Rule int    // 1-based, as in Verdict.Rule
	Text string // the rule's canonical text
	Hits uint64 // decisions it made (Injector.Hits)
}

// Quiet reports whether the rule never acted.
func (r RuleReport) Quiet() bool { return r.Hits == 0 }

// String is the report as one line: "rule 1 acted on 2 frames: drop
// psn=102 tx=1", or "rule 2 never matched a frame: drop psn=9".
func (r RuleReport) String() string {
	head := "rule " + strconv.Itoa(r.Rule)
	switch r.Hits {
	case 0:
		return head + " never matched a frame: " + r.Text
	case 1:
		return head + " acted on 1 frame: " + r.Text
	}
	return head + " acted on " + strconv.FormatUint(r.Hits, 10) + " frames: " + r.Text
}

// Line is the report as a tool prints it, after what names the plan's
// source: "ROCESIM_FAULTS rule 1 acted on 2 frames: ...", and, for a
// rule that never matched (a PSN the run never reached, a misspelt key
// value), the same as a warning: "warning: fault rule 2 never matched a
// frame: ...".
func (r RuleReport) Line(what string) string {
	if r.Quiet() {
		return "warning: " + what + " " + r.String()
	}
	return what + " " + r.String()
}

// Report is what each of the plan's rules did, given each rule's count of
// decisions (Injector.Hits, or a fabric's RuleHits), in the plan's order;
// nil for a nil or empty plan.
func (p *Plan) Report(hits func(rule int) uint64) []RuleReport {
	if p == nil {
		return nil
	}
	var out []RuleReport
	for i := range p.Rules {
		out = append(out, RuleReport{Rule: i + 1, Text: p.Rules[i].String(), Hits: hits(i + 1)})
	}
	return out
}

// TxEvictionWarning is the warning for n flows the plan's transmission
// counting forgot to bound its memory (Injector.TxEvictions), as every
// driver that reports a run prints it.
func TxEvictionWarning(n uint64) string {
	return "the fault plan's transmission counting forgot " + strconv.FormatUint(n, 10) +
		" flows to bound its memory: tx= rules may have taken a retransmission for a first transmission"
}
