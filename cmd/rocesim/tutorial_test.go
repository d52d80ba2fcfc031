package main

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// The README's tutorial is walked as a reader walks it: every command of
// its console blocks ("$ rocesim ..." lines, pipes and all) runs in bash
// with a rocesim built from this tree first on PATH, in a directory that
// has the repository's examples/, and prints exactly the lines the README
// shows under it (standard error after standard output, wall times
// aside).

// buildRocesim builds this command into a new temporary directory and
// returns the directory.
func buildRocesim(t *testing.T) string {
	t.Helper()
	dir := t.TempDir()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	out, err := exec.CommandContext(ctx, "go", "build", "-o", filepath.Join(dir, "rocesim"), ".").CombinedOutput()
	require.NoError(t, err, "building rocesim: %s", out)
	return dir
}

// consoleStep is one "$ command" of a README console block and the
// output shown under it.
type consoleStep struct {
	line int // of the command in README.md
	cmd  string
	want string
}

// consoleSteps returns the steps of the ```console blocks between the
// heading that starts with from and the next heading of its level.
func consoleSteps(t *testing.T, readme, from string) []consoleStep {
	t.Helper()
	lines := strings.Split(readme, "\n")
	start := -1
	for i, l := range lines {
		if strings.HasPrefix(l, from) {
			start = i
			break
		}
	}
	require.GreaterOrEqual(t, start, 0, "README.md has no heading %q", from)
	level := strings.SplitN(from, " ", 2)[0] + " "
	var steps []consoleStep
	in := false
	for i := start + 1; i < len(lines); i++ {
		l := lines[i]
		if !in && strings.HasPrefix(l, level) {
			break
		}
		switch {
		case strings.TrimSpace(l) == "```console":
			in = true
		case in && strings.TrimSpace(l) == "```":
			in = false
		case in && strings.HasPrefix(strings.TrimSpace(l), "$ "):
			steps = append(steps, consoleStep{line: i + 1, cmd: strings.TrimPrefix(strings.TrimSpace(l), "$ ")})
		case in && len(steps) > 0:
			steps[len(steps)-1].want += dedent(l) + "\n"
		}
	}
	return steps
}

// dedent removes the three spaces a code block inside a numbered list
// item is indented by.
func dedent(l string) string { return strings.TrimPrefix(l, "   ") }

// TestREADMETutorial walks the README's tutorial.
func TestREADMETutorial(t *testing.T) {
	if _, err := exec.LookPath("bash"); err != nil {
		t.Skip("no bash")
	}
	readme, err := os.ReadFile("../../README.md")
	require.NoError(t, err)
	steps := consoleSteps(t, string(readme), "### Tutorial")
	require.GreaterOrEqual(t, len(steps), 10, "the tutorial has lost its commands")
	bin := buildRocesim(t)
	examples, err := filepath.Abs("../../examples")
	require.NoError(t, err)
	dir := t.TempDir()
	require.NoError(t, os.Symlink(examples, filepath.Join(dir, "examples")))
	env := []string{"PATH=" + bin + string(os.PathListSeparator) + os.Getenv("PATH"), "HOME=" + dir, "LANG=C.UTF-8"}
	for _, s := range steps {
		require.True(t, strings.HasPrefix(s.cmd, "rocesim ") || strings.Contains(s.cmd, "| rocesim "),
			"README.md:%d: a tutorial command that is not rocesim's: %s", s.line, s.cmd)
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
		cmd := exec.CommandContext(ctx, "bash", "-c", s.cmd)
		cmd.Dir, cmd.Env = dir, env
		var out, errOut strings.Builder
		cmd.Stdout, cmd.Stderr = &out, &errOut
		err := cmd.Run()
		cancel()
		if _, ok := err.(*exec.ExitError); err != nil && !ok {
			t.Fatalf("README.md:%d: %s: %v", s.line, s.cmd, err)
		}
		got := wallTime.ReplaceAllString(out.String()+errOut.String(), "wall time X")
		want := wallTime.ReplaceAllString(s.want, "wall time X")
		assert.Equal(t, want, got, "README.md:%d: $ %s", s.line, s.cmd)
	}
}
