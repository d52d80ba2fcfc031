package scenario_test

import (
	"os"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/rocesim/rocesim/faults"
	"github.com/rocesim/rocesim/scenario"
)

// TestTxEvictionsWarned: a run whose fault plan's transmission counting
// forgot flows (here with room for one flow, so a's requests and b's
// ACKs evict each other) reports them in Result.TxEvictions and warns
// that tx= rules may have misjudged: "drop psn=2 tx=1" then takes the
// first retransmission of PSN 2 for a first transmission and drops it
// too, which the scenario's expectations (one retry) catch. Within the
// bounds, no evictions and no such warning.
func TestTxEvictionsWarned(t *testing.T) {
	text, err := os.ReadFile("../examples/go-back-n.scenario")
	require.NoError(t, err)
	s, err := scenario.Parse("go-back-n", string(text))
	require.NoError(t, err)
	res, err := s.Run(scenario.Options{})
	require.NoError(t, err)
	assert.Zero(t, res.TxEvictions)
	assert.NotContains(t, res.Warnings, faults.TxEvictionWarning(res.TxEvictions))
	assert.Empty(t, res.Failed)

	res, err = s.Run(scenario.Options{TxLimit: 1, Deadline: 1e9})
	require.NoError(t, err)
	assert.NotZero(t, res.TxEvictions)
	assert.Contains(t, res.Warnings, faults.TxEvictionWarning(res.TxEvictions))
	assert.Contains(t, res.Failed, "line 24: expect counter a.completer_retry_err=1: got 2", "PSN 2 dropped twice")
}
