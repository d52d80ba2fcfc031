package verbstest_test

import (
	"os"
	"testing"

	"github.com/rocesim/rocesim/verbs/verbstest"
)

// The soak cases (make soak, tools/soak.sh): worlds that never settle,
// with the toolkit's default budgets. Each must fail its wait, saying
// what kept it busy, within seconds and a few hundred MB; the script runs
// each in its own process and measures its wall time and peak RSS.
// Outside make soak they are skipped.

func soak(t *testing.T) {
	if os.Getenv("ROCESIM_SOAK") == "" {
		t.Skip("a soak case: make soak runs it (ROCESIM_SOAK=1)")
	}
}

// TestSoakRNRForever: no receive is ever posted, rnr_retry 7 and the
// shortest RNR timer: the default event budget ends the wait.
func TestSoakRNRForever(t *testing.T) {
	soak(t)
	failsSaying(t, rnrForever(verbstest.Options{}), "(Options.MaxEvents)", "rnr_retry 7 retries forever")
}

// TestSoakNeverSettles: every frame from a is lost and retry_cnt 7
// retries forever under rxe's profile: RunUntilIdle never sees the world
// idle, and fails when Options.Limit of virtual time runs out.
func TestSoakNeverSettles(t *testing.T) {
	soak(t)
	failsSaying(t, func(tb verbstest.TB) {
		w := verbstest.New(tb, verbstest.Options{Faults: "drop src=a"})
		a, b := w.Pair("a", "b", verbstest.QPOptions{})
		for range 8 {
			write(tb, a, a.Host.Buffer(64), b.Host.Buffer(64), 64)
		}
		w.RunUntilIdle()
	}, "verbstest: RunUntilIdle: still busy when its limit of 10s of virtual time (Options.Limit) ran out",
		"retry_cnt 7 retries forever under the rxe profile")
}
