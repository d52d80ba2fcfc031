package dropinbuild

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// TestMakefileAgrees: `make dropin` links the library with the flags
// every other builder uses.
func TestMakefileAgrees(t *testing.T) {
	root, err := filepath.Abs("../..")
	if err != nil {
		t.Fatal(err)
	}
	mk, err := os.ReadFile(filepath.Join(root, "Makefile"))
	if err != nil {
		t.Fatal(err)
	}
	for _, l := range strings.Split(string(mk), "\n") {
		if v, ok := strings.CutPrefix(l, "DROPIN_LDFLAGS := "); ok {
			if got, want := strings.ReplaceAll(v, "$(CURDIR)", root), LDFlags(root); got != want {
				t.Fatalf("the Makefile's DROPIN_LDFLAGS are\n\t%s\nnot\n\t%s", got, want)
			}
			return
		}
	}
	t.Fatal("no DROPIN_LDFLAGS := line in the Makefile")
}

// TestNoDefaultGODEBUG: the go command gives the library no GODEBUG
// default of its own (it would, were go.mod's go line older than a
// setting's change), which LDFlags' -X would replace: GoDebug must then
// carry them too.
func TestNoDefaultGODEBUG(t *testing.T) {
	cmd := exec.Command("go", "list", "-f", "{{.DefaultGODEBUG}}", "./dropin/ibverbs")
	cmd.Dir = "../.."
	cmd.Env = append(os.Environ(), "CGO_ENABLED=1")
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("go list: %v\n%s", err, out)
	}
	if d := strings.TrimSpace(string(out)); d != "" {
		t.Fatalf("the library's package has the default GODEBUG %q, which LDFlags would drop: join it to GoDebug", d)
	}
}
