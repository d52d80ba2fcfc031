package tbtest_test

import (
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/rocesim/rocesim/internal/tbtest"
)

// Failure reports what the helper reported, and Fatal, FailNow (through
// require) and Skip end the helper there.
func TestFailure(t *testing.T) {
	for _, c := range []struct {
		name   string
		f      func(testing.TB)
		msg    string
		failed bool
	}{
		{"passes", func(tb testing.TB) { tb.Log("fine") }, "", false},
		{"Error", func(tb testing.TB) { tb.Error("a", 1); tb.Errorf("b %d", 2) }, "a 1\nb 2", true},
		{"Fatalf", func(tb testing.TB) { tb.Fatalf("stop %d", 3); tb.Error("after") }, "stop 3", true},
		{"Fatal", func(tb testing.TB) { tb.Fatal("stop"); tb.Error("after") }, "stop", true},
		{"require", func(tb testing.TB) { require.Equal(tb, 1, 2); tb.Error("after") }, "Not equal", true},
		{"Skip", func(tb testing.TB) { tb.Skip("skipped"); tb.Error("after") }, "skipped", false},
		{"Fail", func(tb testing.TB) { tb.Fail() }, "", true},
	} {
		t.Run(c.name, func(t *testing.T) {
			msg, failed := tbtest.Failure(t, c.f)
			if failed != c.failed || !strings.Contains(msg, c.msg) || c.msg == "" && msg != "" || strings.Contains(msg, "after") {
				t.Errorf("Failure = %q, %v; want %q, %v", msg, failed, c.msg, c.failed)
			}
		})
	}
}
