package scenario_test

import (
	"errors"
	"os"
	"runtime"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/rocesim/rocesim/scenario"
	"github.com/rocesim/rocesim/sim"
	"github.com/rocesim/rocesim/verbs"
)

// dropAll is examples/go-back-n.scenario with every frame from a lost:
// under rxe's profile retry_cnt 7 retries forever.
func dropAll(t *testing.T) *scenario.Scenario {
	t.Helper()
	text, err := os.ReadFile("../examples/go-back-n.scenario")
	require.NoError(t, err)
	src := strings.Replace(string(text), "fault drop psn=2 tx=1 src=a", "fault drop src=a", 1)
	require.NotEqual(t, string(text), src)
	s, err := scenario.Parse("drop-all", src)
	require.NoError(t, err)
	return s
}

// TestRunawayNamesTheQP: a run that spends its event budget ends with a
// *verbs.RunawayError whose message names the QP as the scenario does.
func TestRunawayNamesTheQP(t *testing.T) {
	res, err := dropAll(t).Run(scenario.Options{MaxEvents: 3000})
	var ra *verbs.RunawayError
	require.True(t, errors.As(err, &ra), "want a *verbs.RunawayError, got %v", err)
	require.NotNil(t, res)
	assert.Contains(t, err.Error(), "a.q retransmitted PSN 1 ")
	assert.Contains(t, err.Error(), "every 64ms: retry_cnt 7 retries forever under the rxe profile")
}

// TestDeadlineEndsARunaway: Options.Deadline ends the same run at that
// virtual time, with no error: the user asked for it.
func TestDeadlineEndsARunaway(t *testing.T) {
	res, err := dropAll(t).Run(scenario.Options{Deadline: 1e9})
	require.NoError(t, err)
	assert.Equal(t, int64(1e9), int64(res.VirtualTime))
}

// TestRunMemoryBounded: a long runaway (150000 events, 600000
// frames traced) keeps a bounded trace: the heap it leaves, with the
// Result and its trace alive, stays far below what one event per frame
// would take (some 250 MB here).
func TestRunMemoryBounded(t *testing.T) {
	if testing.Short() {
		t.Skip("a long run")
	}
	var before, after runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&before)
	res, err := dropAll(t).Run(scenario.Options{MaxEvents: 150_000})
	require.Error(t, err)
	runtime.GC()
	runtime.ReadMemStats(&after)
	grown := int64(after.HeapAlloc) - int64(before.HeapAlloc)
	t.Logf("heap grew by %d MB; the trace kept %d events", grown>>20, len(res.Trace.Events()))
	assert.Less(t, grown, int64(120<<20), "retained heap")
	assert.Greater(t, res.Frames, 500_000)
	assert.True(t, res.Trace.Full(), "the trace stopped at its limit")
	assert.Len(t, res.Trace.Events(), sim.DefaultTraceLimit, "and kept exactly that many events")
	runtime.KeepAlive(res)
}
