package faults_test

import (
	"strings"
	"testing"

	"github.com/rocesim/rocesim/faults"
)

// TestReference: the help text is the package documentation, whole: its
// first sentence, the grammar, every match key and the examples.
func TestReference(t *testing.T) {
	r := faults.Reference()
	for _, want := range []string{
		"Package faults holds fault plans as data",
		"    drop class=request psn=2 tx=1",
		"class=C        request",
		"tx=K           the K-th transmission of the PSN",
		"truncate len=N",
	} {
		if !strings.Contains(r, want) {
			t.Errorf("the reference lacks %q", want)
		}
	}
	if strings.Contains(r, "\npackage faults") {
		t.Errorf("the reference has Go source in it:\n%s", r)
	}
}
