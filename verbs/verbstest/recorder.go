package verbstest

import (
	"fmt"
	"strings"
)

// Recorder is a TB for use outside go test: in a runnable example, a
// tool, or a test that wants to look at how another test fails. It
// records log lines and failures instead of reporting them. Run a
// function with it through Run.
//
// A world made with a Recorder removes its files when Run ends, even if
// the run failed (its report still names them), unless KeepFiles is set.
type Recorder struct {
	// KeepFiles keeps a failed world's capture and trace, as go test
	// does; whoever sets it removes them.
	KeepFiles bool

	name     string
	lines    []string
	failed   bool
	cleanups []func()
}

// stopRun is the panic FailNow uses to end the function Run runs.
type stopRun struct{}

// Run calls fn with the recorder as its TB, then the clean-ups fn
// registered (last first), as go test does for a test named name. It
// reports whether fn passed. A FailNow inside fn ends fn, not the caller.
// name is what Name returns, so a failure report's rerun command says
// -run '^name$': give the name of the test (or example) Run is called
// from.
func (r *Recorder) Run(name string, fn func(t TB)) (passed bool) {
	r.name, r.lines, r.failed, r.cleanups = name, nil, false, nil
	func() {
		defer func() {
			if v := recover(); v != nil {
				if _, ok := v.(stopRun); !ok {
					panic(v)
				}
			}
		}()
		fn(r)
	}()
	for i := len(r.cleanups) - 1; i >= 0; i-- {
		r.cleanups[i]()
	}
	return !r.failed
}

// Output returns what was logged and every failure message, in order,
// as go test -v would print them. A testify assertion's message includes
// its "Error Trace" of file positions, as under go test.
func (r *Recorder) Output() string { return strings.Join(r.lines, "\n") }

// Helper does nothing: a recorder adds no file positions of its own.
func (r *Recorder) Helper() {}

// Name returns the name Run was given.
func (r *Recorder) Name() string { return r.name }

// Cleanup registers fn to run when Run's function has returned.
func (r *Recorder) Cleanup(fn func()) { r.cleanups = append(r.cleanups, fn) }

// Logf records a line.
func (r *Recorder) Logf(format string, args ...any) {
	r.lines = append(r.lines, fmt.Sprintf(format, args...))
}

// Errorf records a failure.
func (r *Recorder) Errorf(format string, args ...any) {
	r.failed = true
	r.Logf(format, args...)
}

// FailNow marks the run failed and ends Run's function.
func (r *Recorder) FailNow() {
	r.failed = true
	panic(stopRun{})
}

// Failed reports whether the run has failed.
func (r *Recorder) Failed() bool { return r.failed }
