package verbstest_test

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/rocesim/rocesim/verbs"
	"github.com/rocesim/rocesim/verbs/verbstest"
)

// TestRunawayRNRFailsWithItsPattern: b never posts a receive, a's
// rnr_retry is 7 (forever) and b asks for the shortest RNR timer (10 µs):
// within Options.Limit of virtual time the world would fire millions of
// events. The wait fails when its event budget is spent, and says which
// QP is refused, how often, and why it goes on.
func TestRunawayRNRFailsWithItsPattern(t *testing.T) {
	failsSaying(t, rnrForever(verbstest.Options{MaxEvents: 20_000}), "verbstest: Await(a's CQ #1, 1): still busy after 20000 events (Options.MaxEvents) at virtual time ", "a QP 0x", "RNR NAKs by b",
		"rnr_retry 7 retries forever and b never has a receive posted for it")
}

// TestRunawayRetryFailsWithItsPattern: every frame from a is lost and
// retry_cnt 7 retries forever under rxe's profile: the wait runs out of
// virtual time (Options.Limit) and says which PSN a resends, how often
// and why, not only that the limit ran out.
func TestRunawayRetryFailsWithItsPattern(t *testing.T) {
	failsSaying(t, func(tb verbstest.TB) {
		w := verbstest.New(tb, verbstest.Options{Faults: "drop src=a"})
		a, b := w.Pair("a", "b", verbstest.QPOptions{})
		write(tb, a, a.Host.Buffer(64), b.Host.Buffer(64), 64)
		w.Await(a.CQ, 1)
	}, "verbstest: Await(a's CQ #1, 1): 0 of 1 completions within 10s of virtual time (Options.Limit), by 9.984s: a QP 0x",
		"every 64ms: retry_cnt 7 retries forever under the rxe profile", "the fault plan dropped")
}

// rnrForever is a test body whose SEND is refused for ever: b never
// posts a receive, a's rnr_retry is 7 and b asks for the shortest RNR
// timer (10 µs). It awaits the SEND's completion.
func rnrForever(opts verbstest.Options) func(tb verbstest.TB) {
	return func(tb verbstest.TB) {
		w := verbstest.New(tb, opts)
		a, _ := w.Pair("a", "b", verbstest.QPOptions{MinRNRTimer: 1})
		src := a.Host.Buffer(64)
		_, err := a.QP.PostSend([]verbs.SendWR{{WRID: 1, Opcode: verbs.WRSend, Flags: verbs.SendSignaled,
			SGList: []verbs.SGE{src.SGE(0, 64)}}})
		require.NoError(tb, err)
		w.Await(a.CQ, 1)
	}
}

// failsSaying runs body under a Recorder and checks that it fails with
// every one of wants in its output.
func failsSaying(t *testing.T, body func(tb verbstest.TB), wants ...string) {
	t.Helper()
	var r verbstest.Recorder
	require.False(t, r.Run(t.Name(), body))
	t.Log(r.Output())
	for _, want := range wants {
		assert.Contains(t, r.Output(), want)
	}
}
