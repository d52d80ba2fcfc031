// Package tooltest lets a test say which system tools and files it needs
// (gcc, libibverbs-dev's headers, Debian's ibverbs-utils and perftest):
// without them it is skipped, except in CI (CI=true), where
// tools/install-deps.sh has installed them and their absence is a
// failure, never a silent skip. SameLines compares a C program's output
// with the one real rxe gave.
package tooltest

import (
	"fmt"
	"os"
	"os/exec"
	"strings"
	"testing"
)

// Need skips t, or fails it under CI=true, unless every tool is in PATH
// and every file exists; the message lists what is missing and hint
// (how to install it).
func Need(t testing.TB, tools, files []string, hint string) {
	t.Helper()
	var missing []string
	for _, tool := range tools {
		if _, err := exec.LookPath(tool); err != nil {
			missing = append(missing, tool)
		}
	}
	for _, f := range files {
		if _, err := os.Stat(f); err != nil {
			missing = append(missing, f)
		}
	}
	if len(missing) == 0 {
		return
	}
	msg := fmt.Sprintf("missing %s: %s", strings.Join(missing, ", "), hint)
	if os.Getenv("CI") == "true" {
		t.Fatal(msg)
	}
	t.Skip(msg)
}

// SameLines fails t at every line where got, a C program's output on the
// model, differs from want, the same program's output on real rxe, with
// both lines side by side ("(nothing)" past the end of either). Both are
// taken as trimmed lines.
func SameLines(t testing.TB, want, got []string) {
	t.Helper()
	for i := range max(len(got), len(want)) {
		g, w := "(nothing)", "(nothing)"
		if i < len(got) {
			g = got[i]
		}
		if i < len(want) {
			w = want[i]
		}
		if g != w {
			t.Errorf("line %d:\n  real rxe: %s\n  model:    %s", i+1, w, g)
		}
	}
}

// RpingExitRace reports whether rping's output (stdout and stderr) and
// its exit status code are its own exit race and nothing else: every
// ping done (rdma-ping-4 at least) and the disconnection seen, then its
// CM thread, back in rdma_get_cm_event after the main thread had
// destroyed the channel, got EBADF and exited 255 (rping's cm_thread
// perror and exit). librdmacm's read(2) of the closed fd answers the
// same; on a loaded machine the CM thread loses that race more often.
// It is rping's, not the model's: seen in CI on the drop-in (the
// conformance host client, exec's rping over IPv6) and on real rxe (the
// guest's server in TestInteropRping).
func RpingExitRace(out string, code int) bool {
	return code == 255 && strings.Contains(out, "ping data: rdma-ping-4: ") && strings.Contains(out, "DISCONNECT EVENT") &&
		strings.Contains(out, "rdma_get_cm_event: Bad file descriptor")
}
