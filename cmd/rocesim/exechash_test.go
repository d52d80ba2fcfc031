package main

import (
	"os"
	"os/exec"
	"path/filepath"
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

// TestExecLibWithoutRdmacmWarns: --lib naming a directory with only
// libibverbs.so.1 is taken, with a warning that an rdma_cm program would
// load the system's librdmacm; with both there is no warning; without
// libibverbs.so.1 it is an error.
func TestExecLibWithoutRdmacmWarns(t *testing.T) {
	dir := t.TempDir()
	var stderr strings.Builder
	if _, err := execLibrary(dir, &stderr); err == nil {
		t.Fatal("--lib with no libibverbs.so.1 was taken")
	}
	if err := os.WriteFile(filepath.Join(dir, "libibverbs.so.1"), nil, 0o644); err != nil {
		t.Fatal(err)
	}
	got, err := execLibrary(dir, &stderr)
	if err != nil || got != dir {
		t.Fatalf("execLibrary(%s) = %q, %v", dir, got, err)
	}
	if !strings.Contains(stderr.String(), "has no librdmacm.so.1") {
		t.Errorf("no warning about the missing librdmacm.so.1: %q", stderr.String())
	}
	stderr.Reset()
	if err := os.WriteFile(filepath.Join(dir, "librdmacm.so.1"), nil, 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := execLibrary(dir, &stderr); err != nil || stderr.Len() != 0 {
		t.Errorf("with both libraries: %v, %q", err, stderr.String())
	}
}
