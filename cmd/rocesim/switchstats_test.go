package main

import (
	"strings"
	"testing"
	"time"

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
