package conformance

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/rocesim/rocesim/internal/tooltest"
)

var (
	cabiOnce sync.Once
	cabi     *CABI
	cabiErr  error
	cabiDir  string
)

// needCABI builds the drop-in library and the agent once per test binary
// (removed by TestMain), or skips the test (fails it under CI=true)
// without gcc and libibverbs-dev.
func needCABI(t *testing.T) *CABI {
	t.Helper()
	tooltest.Need(t, []string{"gcc", "cc", "go"}, []string{"/usr/include/infiniband/verbs.h"},
		"run tools/install-deps.sh (gcc, libibverbs-dev)")
	cabiOnce.Do(func() {
		if cabiDir, cabiErr = os.MkdirTemp("", "rocesim-cabi-build-"); cabiErr != nil {
			return
		}
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
		defer cancel()
		cabi, cabiErr = BuildCABI(ctx, cabiDir)
	})
	if cabiErr != nil {
		t.Fatal(cabiErr)
	}
	return cabi
}

func TestMain(m *testing.M) {
	code := m.Run()
	if cabiDir != "" {
		os.RemoveAll(cabiDir)
	}
	os.Exit(code)
}

// TestCABIDifferential runs every differential scenario as the verbs
// agent on the drop-in libibverbs.so.1, two processes on a fabric with
// the scenario's plan (the C-ABI leg, CABI), and compares its outcome
// with the simulation's through the Go verbs (ModelOutcome), normalised
// and compared as TestDifferential compares rxe with the model: they
// must be the same. (TestDifferential compares the C-ABI leg with real
// rxe as well.)
func TestCABIDifferential(t *testing.T) {
	c := needCABI(t)
	ctx, cancel := context.WithTimeout(t.Context(), 10*time.Minute)
	defer cancel()
	scens, err := Scenarios()
	if err != nil {
		t.Fatal(err)
	}
	logs := logDir(t)
	t0 := time.Now()
	for _, s := range scens {
		if only := os.Getenv("ROCESIM_SCENARIOS"); only != "" && !containsString(strings.Split(only, ","), s.Name) {
			continue
		}
		t1 := time.Now()
		model, _, err := ModelOutcome(s, "")
		if err != nil {
			t.Fatalf("%s: simulation: %v", s.Name, err)
		}
		got, err := c.Run(ctx, s, filepath.Join(logs, s.Name+".cabi.pcapng"))
		if err != nil {
			t.Errorf("%s: %v", s.Name, err)
			continue
		}
		diffs := Compare(model, got)
		for _, d := range diffs {
			t.Errorf("%s: the C-ABI leg differs from the simulation: %v", s.Name, d)
		}
		t.Logf("%s: %d completions, %d frames, %d differences in %v", s.Name, len(got.Completions), len(got.Wire), len(diffs), time.Since(t1).Round(time.Millisecond))
	}
	t.Logf("%d scenarios through the C ABI in %v", len(scens), time.Since(t0).Round(time.Millisecond))
}
