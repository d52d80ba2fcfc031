package verbstest

import (
	"bufio"
	"flag"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"regexp"
	"sort"
	"strconv"
	"strings"
	"testing"

	"github.com/rocesim/rocesim/ladder"
)

// The names of the flags RegisterFlags defines.
const (
	seedFlagName = "rocesim.seed"
	keepFlagName = "rocesim.keep"
)

// RegisterFlags defines verbstest's flags on the test binary's command
// line (flag.CommandLine): -rocesim.seed=N runs every world that leaves
// Options.Seed unset with seed N, and Seeds with seed N alone;
// -rocesim.keep keeps every capture, not only those of failed tests.
// Importing the package defines no flag (a program's command line is its
// own); a test package opts in, once, before the flags are parsed:
//
//	func init() { verbstest.RegisterFlags() }
//
// Calling it again does nothing. Without it the flags are off, and a
// failure report's rerun command says how to get them.
func RegisterFlags() {
	if flag.Lookup(seedFlagName) != nil {
		return
	}
	flag.Uint64(seedFlagName, 0, "run every verbstest world with this seed (and Seeds only this seed); a failure report prints it")
	flag.Bool(keepFlagName, false, "keep every verbstest capture, not only those of failed tests, and log where")
}

// flagValue reads a flag of RegisterFlags when it is called, not at
// import: zero when the test binary did not opt in.
func flagValue[T uint64 | bool](name string) T {
	var zero T
	f := flag.Lookup(name)
	if f == nil {
		return zero
	}
	g, ok := f.Value.(flag.Getter)
	if !ok {
		return zero
	}
	v, _ := g.Get().(T)
	return v
}

// seedFlag is -rocesim.seed's value (0: not given, or not registered).
func seedFlag() uint64 { return flagValue[uint64](seedFlagName) }

// keepFlag is -rocesim.keep's value.
func keepFlag() bool { return flagValue[bool](keepFlagName) }

// cleanup closes the capture and keeps or removes it.
func (w *World) cleanup() {
	w.t.Helper()
	err := w.capture.Close()
	if err != nil {
		w.t.Errorf("verbstest: closing the capture %s: %v", w.pcap, err)
	}
	failed := w.t.Failed()
	if !failed && !keepFlag() {
		os.RemoveAll(w.dir)
		return
	}
	files := w.writeFiles()
	if failed {
		w.t.Logf("%s", w.failureReport(files))
	} else {
		w.t.Logf("verbstest: kept (-rocesim.keep): %s (%d frames), %s, %s and %s", w.pcap, len(w.frames)+w.overflow,
			files.trace, files.ladder, files.svg)
	}
	if r, ok := w.t.(*Recorder); ok && !r.KeepFiles {
		os.RemoveAll(w.dir)
	}
}

// maxLoopLines is how many pauses and stops of pollers a report lists.
const maxLoopLines = 10

// keptFiles are the paths of what a failed world leaves beside its
// capture (or why each could not be written).
type keptFiles struct{ trace, ladder, svg string }

// writeFiles writes the trace and its ladder diagrams, text and SVG, into
// the world's directory.
func (w *World) writeFiles() keptFiles {
	write := func(name string, fill func(w io.Writer) error) string {
		path := filepath.Join(w.dir, name)
		f, err := os.Create(path)
		if err == nil {
			bw := bufio.NewWriter(f) // a trace writes a line per call
			err = fill(bw)
			if ferr := bw.Flush(); err == nil {
				err = ferr
			}
			if cerr := f.Close(); err == nil {
				err = cerr
			}
		}
		if err != nil {
			return "(" + name + " not written: " + err.Error() + ")"
		}
		return path
	}
	nodes := w.hostNames()
	files := keptFiles{trace: write("trace.txt", func(f io.Writer) error { return w.trace.WriteText(f) })}
	n := len(w.trace.Events())
	files.ladder = fmt.Sprintf("(ladder.txt not drawn: %d events, more than %d)", n, maxLadderEvents)
	if n <= maxLadderEvents {
		files.ladder = write("ladder.txt", func(f io.Writer) error { return ladder.Text(f, w.trace, ladder.Options{Nodes: nodes}) })
	}
	files.svg = fmt.Sprintf("(ladder.svg not drawn: %d events, more than %d)", n, maxSVGEvents)
	if n <= maxSVGEvents {
		files.svg = write("ladder.svg", func(f io.Writer) error {
			return ladder.SVG(f, w.trace, ladder.Options{Nodes: nodes}, w.t.Name()+", seed "+strconv.FormatUint(w.seed, 10))
		})
	}
	return files
}

// The largest traces drawn as ladders: a text line, or an SVG element
// of a few hundred bytes, per event, and some kilobytes of layout in
// memory while drawing (a full trace, sim.DefaultTraceLimit events, would
// take more memory to draw than the run itself).
const (
	maxLadderEvents = 30_000
	maxSVGEvents    = 20_000
)

// failureReport is what a failed test prints: how to see the run again.
func (w *World) failureReport(files keptFiles) string {
	var b strings.Builder
	fmt.Fprintf(&b, "rocesim: the simulated run of %s, to look at or re-run:\n", w.t.Name())
	fmt.Fprintf(&b, "  seed:    %d\n", w.seed)
	for i, c := range w.history {
		label := "  plan:    "
		if i > 0 {
			label = "           "
		}
		lines := strings.Split(c.text, "\n")
		fmt.Fprintf(&b, "%sfrom %v: %s\n", label, c.at, lines[0])
		for _, l := range lines[1:] {
			fmt.Fprintf(&b, "           %*s  %s\n", len("from "+c.at.String()), "", l)
		}
	}
	// What the plan in force did: a rule that never matched a frame is
	// often why a test did not see the fault it was written for.
	for i, r := range w.plan.Report(w.RuleHits) {
		label := "  faults:  "
		if i > 0 {
			label = "           "
		}
		fmt.Fprintf(&b, "%s%v\n", label, r)
	}
	for i, c := range w.loops {
		if i == maxLoopLines {
			fmt.Fprintf(&b, "           ... and %d more (see the trace)\n", len(w.loops)-i)
			break
		}
		label := "  loops:   "
		if i > 0 {
			label = "           "
		}
		fmt.Fprintf(&b, "%sat %v: %s\n", label, c.at, c.text)
	}
	fmt.Fprintf(&b, "  rerun:   %s\n", w.reproCommand())
	fmt.Fprintf(&b, "  capture: %s (%d frames, each with a comment saying why it exists)\n", w.pcap, len(w.frames)+w.overflow)
	full := ""
	if w.trace.Full() {
		full = ", the first ones: the trace keeps no more"
	}
	fmt.Fprintf(&b, "  trace:   %s (%d events%s, ended at %v)\n", files.trace, len(w.trace.Events()), full, w.Now())
	fmt.Fprintf(&b, "  ladder:  %s\n           %s (for a browser)\n", files.ladder, files.svg)
	fmt.Fprintf(&b, "  inspect: go run github.com/rocesim/rocesim/cmd/rocesim inspect %s", w.pcap)
	return b.String()
}

// reproCommand is the go test command that runs this test alone with
// this seed, with the other flags the test binary was given (go test's
// own -test.* flags aside): the same invocation, narrowed to one test.
func (w *World) reproCommand() string {
	parts := strings.Split(w.t.Name(), "/")
	for i, p := range parts {
		parts[i] = "^" + regexp.QuoteMeta(p) + "$"
	}
	cmd := []string{"go", "test", packageDir(), "-run", shellQuote(strings.Join(parts, "/")), "-count=1"}
	var extra []string
	flag.Visit(func(f *flag.Flag) {
		if strings.HasPrefix(f.Name, "test.") || f.Name == seedFlagName {
			return
		}
		extra = append(extra, "-"+f.Name+"="+shellQuote(f.Value.String()))
	})
	sort.Strings(extra)
	cmd = append(cmd, extra...)
	if flag.Lookup(seedFlagName) == nil {
		// The binary did not opt in: the flag would be refused.
		return strings.Join(cmd, " ") + fmt.Sprintf("   (seed %d: set Options.Seed, or call verbstest.RegisterFlags for -rocesim.seed)", w.seed)
	}
	cmd = append(cmd, fmt.Sprintf("-%s=%d", seedFlagName, w.seed))
	return strings.Join(cmd, " ")
}

// packageDir is the test's package directory relative to its module's
// root ("./examples/kvstore"); a test binary runs in that directory.
func packageDir() string {
	wd, err := os.Getwd()
	if err != nil {
		return "."
	}
	for dir := wd; ; {
		if _, err := os.Stat(filepath.Join(dir, "go.mod")); err == nil {
			rel, err := filepath.Rel(dir, wd)
			if err != nil || rel == "." {
				return "."
			}
			return "./" + filepath.ToSlash(rel)
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			return "."
		}
		dir = parent
	}
}

// shellQuote quotes s for a POSIX shell when it needs it.
func shellQuote(s string) string {
	if s != "" && strings.Trim(s, "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789-_./=:,") == "" {
		return s
	}
	return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'"
}

// Seeds runs fn as a subtest ("seed=N") for seeds 1 to n, each with its
// own seed for Options.Seed; with -rocesim.seed=N it runs seed N alone.
// A property that must hold whatever the fault timing is checked this
// way, and a failing seed re-runs by itself.
func Seeds(t *testing.T, n int, fn func(t *testing.T, seed uint64)) {
	t.Helper()
	run := func(seed uint64) {
		t.Run(fmt.Sprintf("seed=%d", seed), func(t *testing.T) { fn(t, seed) })
	}
	if s := seedFlag(); s != 0 {
		run(s)
		return
	}
	for s := 1; s <= n; s++ {
		run(uint64(s))
	}
}
