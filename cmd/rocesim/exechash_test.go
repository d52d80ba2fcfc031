package main

import (
	"os/exec"
	"strings"
	"testing"
)

// TestSourceHashCoversTheLibrary: every package of this module the drop-in
// libraries are built from lies where sourceHash looks, so a change to any
// of them makes rocesim exec rebuild its cached library (realnet was once
// skipped, and a udp-transport fix left the old library in use).
func TestSourceHashCoversTheLibrary(t *testing.T) {
	out, err := exec.Command("go", "list", "-deps", "-f", "{{.ImportPath}}", "../../dropin/ibverbs", "../../dropin/rdmacm").CombinedOutput()
	if err != nil {
		t.Fatalf("go list: %v\n%s", err, out)
	}
	n := 0
	for _, p := range strings.Fields(string(out)) {
		rel, ok := strings.CutPrefix(p, modulePath+"/")
		if !ok {
			continue
		}
		n++
		for _, dir := range strings.Split(rel, "/") {
			if hashSkipsDir[dir] {
				t.Errorf("the library imports %s, but sourceHash skips its directory %q", p, dir)
			}
		}
	}
	if n < 5 {
		t.Fatalf("go list named %d of the module's packages; the library imports more", n)
	}
}
