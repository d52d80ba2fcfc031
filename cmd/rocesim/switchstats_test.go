package main

import (
	"strings"
	"testing"
	"time"

	"github.com/rocesim/rocesim/faults"
	"github.com/rocesim/rocesim/rswitch"
)

// TestSwitchStatsShowRuntsAndEvictions: rocesim switch's summary counts
// the runts it dropped, and warns when the plan's transmission counting
// forgot flows (tx= rules may have misjudged); without evictions there
// is no warning.
func TestSwitchStatsShowRuntsAndEvictions(t *testing.T) {
	var b strings.Builder
	printSwitchStats(&b, "a-b", time.Second, rswitch.Stats{Frames: 9, Runts: 3})
	if out := b.String(); !strings.Contains(out, " 3 runts,") || strings.Contains(out, "warning") {
		t.Errorf("no evictions:\n%s", out)
	}
	b.Reset()
	printSwitchStats(&b, "a-b", time.Second, rswitch.Stats{Frames: 9, TxEvictions: 4})
	if out := b.String(); !strings.Contains(out, "warning: the fault plan's transmission counting forgot 4 flows") ||
		!strings.Contains(out, "tx= rules may have taken a retransmission for a first transmission") {
		t.Errorf("4 evictions:\n%s", out)
	}
}

// TestPlanReport: rocesim switch and rocesim fabric end with a line per
// fault rule saying what it did, a warning for one that never matched;
// no plan, no lines.
func TestPlanReport(t *testing.T) {
	plan, err := faults.ParseInline("drop psn=2 tx=1; delay 5us class=ack; drop qp=0x99")
	if err != nil {
		t.Fatal(err)
	}
	var b strings.Builder
	printPlanReport(&b, plan, func(rule int) uint64 { return []uint64{1, 7, 0}[rule-1] })
	want := "fault rule 1 acted on 1 frame: drop psn=2 tx=1\n" +
		"fault rule 2 acted on 7 frames: delay 5us class=ack\n" +
		"warning: fault rule 3 never matched a frame: drop qp=0x99\n"
	if b.String() != want {
		t.Errorf("report:\n%s\nwant:\n%s", b.String(), want)
	}
	b.Reset()
	printPlanReport(&b, nil, func(int) uint64 { return 0 })
	if b.String() != "" {
		t.Errorf("no plan: %q", b.String())
	}
}
