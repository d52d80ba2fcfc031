// Package tsharktest runs Debian's tshark from rocesim's tests, which
// compare our frames and captures with Wireshark's dissection.
//
// A test that needs tshark calls Need: without tshark it is skipped, except
// in CI (CI=true), where .ci/run has installed tshark and its absence is a
// failure, never a silent skip.
package tsharktest

import (
	"errors"
	"os"
	"os/exec"
	"testing"
)

// Need returns the path of tshark, skipping the test if it is missing
// (failing it when CI=true).
func Need(t testing.TB) string {
	t.Helper()
	p, err := exec.LookPath("tshark")
	if err != nil {
		if os.Getenv("CI") == "true" {
			t.Fatal("tshark is required when CI=true (.ci/run installs it): not found in PATH")
		}
		t.Skip("tshark not installed (make deps, or apt-get install tshark); skipping")
	}
	return p
}

// Run runs tshark with args in the C locale and UTC and returns its
// standard output. tshark's warning about running as root goes to standard
// error and is ignored; a failure shows standard error.
func Run(t testing.TB, args ...string) string {
	t.Helper()
	cmd := exec.Command(Need(t), args...)
	cmd.Env = append(os.Environ(), "LC_ALL=C", "TZ=UTC")
	out, err := cmd.Output()
	if err != nil {
		var ee *exec.ExitError
		msg := ""
		if errors.As(err, &ee) {
			msg = string(ee.Stderr)
		}
		t.Fatalf("tshark %v: %v\n%s", args, err, msg)
	}
	return string(out)
}
