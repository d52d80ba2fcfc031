// Package tbtest runs a test helper against a testing.TB that records its
// failures instead of reporting them, so that a test can check that the
// helper fails where it should (a damaged capture file, say) without
// failing itself.
//
//	msg, failed := tbtest.Failure(t, func(tb testing.TB) { readFrames(tb, cut) })
//	if !failed || !strings.Contains(msg, "unexpected EOF") {
//		t.Errorf("readFrames of a cut file: failed %v, %q; want the damage reported", failed, msg)
//	}
package tbtest

import (
	"fmt"
	"runtime"
	"strings"
	"sync"
	"testing"
)

// Failure calls f with a testing.TB whose Error, Fatal, Skip and Fail
// methods (and their f-suffixed forms) record instead of reporting, and
// returns the messages f gave them, one a line, and whether f failed.
// Fatal, FailNow and Skip end f as they end a test: f runs on its own
// goroutine, which they leave with runtime.Goexit. The other methods
// (Log, TempDir, Cleanup, …) are t's.
func Failure(t testing.TB, f func(testing.TB)) (msg string, failed bool) {
	t.Helper()
	r := &recorder{TB: t}
	done := make(chan struct{})
	go func() {
		defer close(done)
		f(r)
	}()
	<-done
	r.mu.Lock()
	defer r.mu.Unlock()
	return strings.Join(r.msgs, "\n"), r.failed
}

// recorder is the testing.TB Failure hands to f. Embedding t gives it the
// unexported method that only the testing package can otherwise provide.
type recorder struct {
	testing.TB
	mu      sync.Mutex
	msgs    []string
	failed  bool
	skipped bool
}

func (r *recorder) Helper() {}

func (r *recorder) Fail() {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.failed = true
}

func (r *recorder) Failed() bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.failed
}

func (r *recorder) FailNow() {
	r.Fail()
	runtime.Goexit()
}

func (r *recorder) record(msg string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.msgs = append(r.msgs, strings.TrimSuffix(msg, "\n"))
}

func (r *recorder) Error(args ...any) {
	r.record(fmt.Sprintln(args...))
	r.Fail()
}

func (r *recorder) Errorf(format string, args ...any) {
	r.record(fmt.Sprintf(format, args...))
	r.Fail()
}

func (r *recorder) Fatal(args ...any) {
	r.Error(args...)
	runtime.Goexit()
}

func (r *recorder) Fatalf(format string, args ...any) {
	r.Errorf(format, args...)
	runtime.Goexit()
}

func (r *recorder) SkipNow() {
	r.mu.Lock()
	r.skipped = true
	r.mu.Unlock()
	runtime.Goexit()
}

func (r *recorder) Skip(args ...any) {
	r.record(fmt.Sprintln(args...))
	r.SkipNow()
}

func (r *recorder) Skipf(format string, args ...any) {
	r.record(fmt.Sprintf(format, args...))
	r.SkipNow()
}

func (r *recorder) Skipped() bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.skipped
}
