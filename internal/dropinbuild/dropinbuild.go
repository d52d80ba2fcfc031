// Package dropinbuild is the one command line that builds the drop-in
// libibverbs.so.1 (dropin/ibverbs, go build -buildmode=c-shared), for
// every builder of it: `rocesim exec`, the drop-in's tests and the
// conformance harness. The Makefile's dropin target spells the same
// flags (TestMakefileAgrees).
package dropinbuild

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
)

// GoDebug is the Go runtime's setting built into the library (its
// default: a GODEBUG in the program's environment still overrides it).
//
// asyncpreemptoff=1. Every verb runs Go code on the program's own
// thread (a cgo callback). The runtime preempts a goroutine that runs
// long, or whose stack its collector must scan, with a signal (SIGURG)
// to the thread it runs on; one sent just as the verb returns lands in
// the program's next system call instead, which fails with EINTR. No
// signal ever comes from rdma-core's libibverbs, so programs take a
// poll(2) that returns -1 for a timeout (testdata/cm6.c did: one run in
// about a hundred lost an rdma_cm event that way; testdata/eintr.c saw
// one interrupted poll in every 2,000). Without it the runtime preempts
// only at function calls, which every loop of the model makes.
const GoDebug = "asyncpreemptoff=1"

// LDFlags returns the linker flags of the library built from the module
// at root: the runtime's default GODEBUG, and, through -extldflags
// (cgo refuses both in #cgo LDFLAGS), the SONAME libibverbs.so.1 and
// rdma-core's symbol versions (dropin/ibverbs/libibverbs.map), which
// unmodified programs bind to.
func LDFlags(root string) string {
	return "-X=runtime.godebugDefault=" + GoDebug +
		" -extldflags=-Wl,-soname,libibverbs.so.1,--version-script," + filepath.Join(root, "dropin", "ibverbs", "libibverbs.map")
}

// Command returns the go build that writes the library of the module at
// root to out (a file named libibverbs.so.1; go build writes its C
// header, libibverbs.so.h, beside it).
func Command(ctx context.Context, root, out string) *exec.Cmd {
	cmd := exec.CommandContext(ctx, "go", "build", "-buildmode=c-shared", "-ldflags="+LDFlags(root),
		"-o", out, "./dropin/ibverbs")
	cmd.Dir = root
	cmd.Env = append(os.Environ(), "CGO_ENABLED=1")
	return cmd
}
