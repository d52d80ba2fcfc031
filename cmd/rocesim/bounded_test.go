package main

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/rocesim/rocesim/sim"
	"github.com/rocesim/rocesim/verbs"
)

// dropAllFile writes examples/go-back-n.scenario with every frame from a
// lost (retry_cnt 7: forever under rxe's profile) and returns its path.
func dropAllFile(t *testing.T) string {
	t.Helper()
	text, err := os.ReadFile("../../examples/go-back-n.scenario")
	require.NoError(t, err)
	src := strings.Replace(string(text), "fault drop psn=2 tx=1 src=a", "fault drop src=a", 1)
	path := filepath.Join(t.TempDir(), "drop-all.scenario")
	require.NoError(t, os.WriteFile(path, []byte(src), 0o644))
	return path
}

// TestRunRunaway: a run that does not settle within --max-events ends
// with exit status 3 and a message that names the QP, the PSN it resends,
// how often, and the attribute that keeps it going.
func TestRunRunaway(t *testing.T) {
	code, out, errOut := runCmd("run", dropAllFile(t), "--quiet", "--max-events", "5000")
	assert.Equal(t, exitRunaway, code)
	// The status is the one the usage and the README document.
	_, usageOut, usageErr := runCmd("run", "--help")
	assert.Contains(t, strings.Join(strings.Fields(usageOut+usageErr), " "),
		fmt.Sprintf("%d the run did not settle within --max-events", code))
	readme, err := os.ReadFile("../../README.md")
	require.NoError(t, err)
	assert.Contains(t, strings.Join(strings.Fields(string(readme)), " "),
		fmt.Sprintf("%d the run did not settle within `--max-events`", code))
	assert.Contains(t, errOut, "rocesim run: go-back-n: did not settle within 5000 events (virtual time ")
	assert.Contains(t, errOut, "a.q retransmitted PSN 1 ")
	assert.Contains(t, errOut, "every 64ms: retry_cnt 7 retries forever under the rxe profile; set a deadline or a finite retry_cnt")
	assert.Contains(t, errOut, "end it with --deadline, or allow more with --max-events")
	assert.Contains(t, out, "expectations: not checked: the run did not settle")

	code, out, _ = runCmd("run", dropAllFile(t), "--json", "--max-events", "5000")
	assert.Equal(t, exitRunaway, code)
	var res struct {
		Failed []string `json:"failed"`
	}
	require.NoError(t, json.Unmarshal([]byte(out), &res), out)
	assert.Equal(t, []string{"not checked: the run did not settle"}, res.Failed)
}

// TestRunDeadlineFlag: --deadline ends the same run at that virtual time;
// the expectations are then checked (and here fail: nothing completed).
func TestRunDeadlineFlag(t *testing.T) {
	code, out, errOut := runCmd("run", dropAllFile(t), "--quiet", "--deadline", "1s")
	assert.Equal(t, exitBad, code, "stderr: %s", errOut)
	assert.Contains(t, out, "virtual time 1s,")
	code, _, errOut = runCmd("run", dropAllFile(t), "--deadline", "soon")
	assert.Equal(t, exitUsage, code)
	assert.Contains(t, errOut, `--deadline "soon": want a positive duration`)
}

// TestProgressLine: the progress callback prints nothing in the first
// two seconds of wall time, then a line at most every two seconds with
// the virtual time, the frames and the events per second since the last
// line (a fake clock: no test waits on the wall clock).
func TestProgressLine(t *testing.T) {
	start := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	now := start
	var b strings.Builder
	p := progressPrinter(&b, "drop-all", start, func() time.Time { return now })
	step := func(after time.Duration, events uint64) {
		now = now.Add(after)
		p(verbs.Progress{Now: sim.Time(events) * sim.Time(sim.Millisecond), Events: events, Frames: 4 * events})
	}
	step(time.Second, 65536)
	assert.Empty(t, b.String(), "quiet for two seconds")
	step(1500*time.Millisecond, 131072)
	step(time.Second, 196608)
	step(1500*time.Millisecond, 262144)
	assert.Equal(t, "rocesim run: drop-all: still running after 3s: virtual time 2m11.072s, 524288 frames, 131072 events (52429 events/s)\n"+
		"rocesim run: drop-all: still running after 5s: virtual time 4m22.144s, 1048576 frames, 262144 events (52429 events/s)\n", b.String())
}
