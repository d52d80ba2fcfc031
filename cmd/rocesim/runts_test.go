package main

import (
	"encoding/json"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/rocesim/rocesim/scenario"
)

// TestRunShowsSwitchDrops: a frame a truncate rule cuts below its
// Ethernet header before a switch is dropped there as a runt, and
// rocesim run says so: a summary line per switch that dropped frames,
// switch_drops in --json, runt ✗ in the ladder. The go-back-n example
// with a switch between a and b, PSN 2 cut to 5 bytes once.
func TestRunShowsSwitchDrops(t *testing.T) {
	text := strings.Join([]string{
		"scenario runt", "node a b", "switch sw a b",
		"mr a.buf size=4096 fill=seq", "mr b.buf size=4096",
		"qp a.q rc peer=b.q psn=1", "qp b.q rc psn=1",
		"fault truncate len=5 psn=2 tx=1 src=a link=a-sw",
		"at 0 b.q recv wr=1 len=4096", "at 0 a.q send wr=2 op=send len=4096",
		"expect mem b.buf len=4096 equals=a.buf", "",
	}, "\n")
	path := filepath.Join(t.TempDir(), "runt.scenario")
	writeFile(t, path, text)
	code, out, errOut := runCmd("run", path)
	require.Equal(t, exitOK, code, "stderr: %s", errOut)
	assert.Contains(t, out, "switch sw dropped: 1 runt, 0 with no route\n")
	assert.Contains(t, out, "runt at sw")

	code, out, errOut = runCmd("run", path, "--json")
	require.Equal(t, exitOK, code, "stderr: %s", errOut)
	var res scenario.Result
	require.NoError(t, json.Unmarshal([]byte(out), &res))
	assert.Equal(t, []scenario.SwitchDrops{{Switch: "sw", Runts: 1}}, res.SwitchDrops)
}
