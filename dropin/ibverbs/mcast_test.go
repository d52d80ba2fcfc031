//go:build cgo && linux

package main

import (
	"context"
	"os"
	"strings"
	"testing"

	"github.com/rocesim/rocesim/internal/tooltest"
)

// TestMcast: testdata/mcast.c on the drop-in prints what it printed on
// real rxe (testdata/mcast.rxe, the guest's output; conformance
// TestMcastRxe runs it on rxe again): ibv_attach_mcast and
// ibv_detach_mcast's answers, EBUSY for an attached QP's destroy, the
// 57th QP of a group refused, the device's multicast limits; then three
// rdma_cm IDs joined to 224.0.0.5 on one device, each join event's
// fields, the three SENDs reaching both receivers and the sender's own
// QP (looped back), a leave, and the joins the kernel refuses.
func TestMcast(t *testing.T) { sameAsRxe(t, "mcast", "-lrdmacm", "-lpthread") }

// sameAsRxe builds testdata/name.c with the drop-in libraries (and
// libs), runs it with one device, bounded by runLimit, and compares its
// output line by line with testdata/name.rxe, what the same program
// printed on real rxe.
func sameAsRxe(t *testing.T, name string, libs ...string) {
	t.Helper()
	dir := rdmacmLibrary(t)
	bin := compile(t, name, libs...)
	ctx, cancel := context.WithTimeout(context.Background(), runLimit)
	defer cancel()
	out, err := command(ctx, dir, []string{"ROCESIM_DEVICES=1"}, bin).CombinedOutput()
	if ctx.Err() != nil {
		t.Fatalf("still running after %v: killed\n%s", runLimit, out)
	}
	if err != nil {
		t.Fatalf("%v\n%s", err, out)
	}
	want, err := os.ReadFile("testdata/" + name + ".rxe")
	if err != nil {
		t.Fatal(err)
	}
	tooltest.SameLines(t, strings.Split(strings.TrimSpace(string(want)), "\n"), strings.Split(strings.TrimSpace(string(out)), "\n"))
}
