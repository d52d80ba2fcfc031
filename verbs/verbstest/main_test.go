package verbstest_test

import (
	"flag"
	"fmt"
	"os"
	"testing"

	"github.com/rocesim/rocesim/verbs/verbstest"
)

// TestMain checks that importing verbstest defines no flag (a program's
// command line is its own: issue 15), then opts this binary in, as every
// test package that wants -rocesim.seed and -rocesim.keep does.
func TestMain(m *testing.M) {
	for _, name := range []string{"rocesim.seed", "rocesim.keep"} {
		if flag.Lookup(name) != nil {
			fmt.Fprintf(os.Stderr, "importing verbstest defined the flag -%s: flags are the test binary's to opt into (verbstest.RegisterFlags)\n", name)
			os.Exit(1)
		}
	}
	verbstest.RegisterFlags()
	verbstest.RegisterFlags() // a second call does nothing
	os.Exit(m.Run())
}
