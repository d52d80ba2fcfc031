package main

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
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
	assert.Equal(t, 3, exitRunaway, "documented in the usage and the README")
	assert.Contains(t, errOut, "rocesim run: go-back-n: did not settle within 5000 events (virtual time ")
	assert.Contains(t, errOut, "a.q retransmitted PSN 1 ")
	assert.Contains(t, errOut, "every 67.108864ms: retry_cnt 7 retries forever under the rxe profile; set a deadline or a finite retry_cnt")
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
