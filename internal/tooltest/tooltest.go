// Package tooltest lets a test say which system tools and files it needs
// (gcc, libibverbs-dev's headers, Debian's ibverbs-utils and perftest):
// without them it is skipped, except in CI (CI=true), where
// tools/install-deps.sh has installed them and their absence is a
// failure, never a silent skip.
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
