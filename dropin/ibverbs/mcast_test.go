//go:build cgo && linux

package main

import (
	"context"
	"os"
	"strings"
	"testing"
)

// TestMcast: testdata/mcast.c on the drop-in prints what it printed on
// real rxe (testdata/mcast.rxe, the guest's output; conformance
// TestMcastRxe runs it on rxe again): ibv_attach_mcast and
// ibv_detach_mcast's answers, EBUSY for an attached QP's destroy, the
// 57th QP of a group refused, the device's multicast limits; then three
// rdma_cm IDs joined to 224.0.0.5 on one device, each join event's
// fields, the three SENDs reaching both receivers and the sender's own
// QP (looped back), a leave, and the joins the kernel refuses.
func TestMcast(t *testing.T) {
	dir := rdmacmLibrary(t)
	bin := compile(t, "mcast", "-lrdmacm", "-lpthread")
	ctx, cancel := context.WithTimeout(context.Background(), runLimit)
	defer cancel()
	out, err := command(ctx, dir, []string{"ROCESIM_DEVICES=1"}, bin).CombinedOutput()
	if ctx.Err() != nil {
		t.Fatalf("still running after %v: killed\n%s", runLimit, out)
	}
	if err != nil {
		t.Fatalf("%v\n%s", err, out)
	}
	want, err := os.ReadFile("testdata/mcast.rxe")
	if err != nil {
		t.Fatal(err)
	}
	got, exp := strings.Split(strings.TrimSpace(string(out)), "\n"), strings.Split(strings.TrimSpace(string(want)), "\n")
	for i := range max(len(got), len(exp)) {
		g, w := "(nothing)", "(nothing)"
		if i < len(got) {
			g = got[i]
		}
		if i < len(exp) {
			w = exp[i]
		}
		if g != w {
			t.Errorf("line %d:\n  real rxe: %s\n  model:    %s", i+1, w, g)
		}
	}
}
