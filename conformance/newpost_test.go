package conformance

import (
	"context"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/rocesim/rocesim/internal/tooltest"
)

// TestNewPostRxe: the extended verbs (ibv_create_cq_ex, ibv_create_qp_ex,
// the ibv_wr_* work request builders, ibv_start_poll and the
// ibv_wc_read_* functions) answer the same on the drop-in libibverbs.so.1
// as on real rxe with Debian's rdma-core, in a guest: dropin/ibverbs's
// newpost.c prints one line per case (what a creation accepts and
// refuses, each completion's every field, which batches post and which
// fail whole) and the two outputs must be the same, line for line.
func TestNewPostRxe(t *testing.T) {
	needHarness(t)
	ctx, cancel := context.WithTimeout(t.Context(), 10*time.Minute)
	defer cancel()
	mout, rxe := modelAndRxe(ctx, t, "../dropin/ibverbs/testdata/newpost.c", []string{"-libverbs"},
		[]string{"ROCESIM_DEVICES=1"}, []string{"1"}, "1")
	sameLines(t, rxe, mout, "newpost done")
}

// sameLines compares a C program's output on the model with its output
// on real rxe (the guest's console: kernel messages, "[...", left out)
// line by line, and requires rxe's run to have ended with its last line.
func sameLines(t *testing.T, rxe, model, last string) {
	t.Helper()
	var want []string
	for _, l := range strings.Split(strings.ReplaceAll(rxe, "\r", ""), "\n") {
		if l = strings.TrimSpace(l); l != "" && !strings.HasPrefix(l, "[") { // "[": a kernel message on the console
			want = append(want, l)
		}
	}
	tooltest.SameLines(t, want, strings.Split(strings.TrimSpace(model), "\n"))
	if len(want) == 0 || want[len(want)-1] != last {
		t.Errorf("real rxe's run did not finish (no %q line)", last)
	}
	t.Logf("on real rxe:\n%s", strings.Join(want, "\n"))
}

// dropinDir is the directory of the drop-in libraries dropinEnv built.
func dropinDir(t *testing.T, env []string) string {
	t.Helper()
	for _, e := range env {
		if v, ok := strings.CutPrefix(e, "XDG_CACHE_HOME="); ok {
			dirs, _ := filepath.Glob(filepath.Join(v, "rocesim", "dropin", "*", "libibverbs.so.1"))
			if len(dirs) == 1 {
				return filepath.Dir(dirs[0])
			}
		}
	}
	t.Fatal("the drop-in libraries are not in the test's cache")
	return ""
}
