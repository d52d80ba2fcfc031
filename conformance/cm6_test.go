package conformance

import (
	"context"
	"testing"
	"time"
)

// TestCM6Rxe: rdma_cm over IPv6 answers the same on the drop-in
// librdmacm.so.1 as on real rxe with Debian's rdma-core, in a guest:
// dropin/ibverbs's cm6.c connects the device to its own IPv6 address
// (fd00::1 in the guest; the model's node has its link-local one) and
// prints one line per step (every event, the IDs' addresses, the path
// and both QPs' address vectors as relations, a SEND, the disconnect),
// then which listener takes which request (an IPv6 request to a 0.0.0.0
// listener, an IPv4 one to a :: listener), the same for UD (SIDR: the
// reject, and the address handle of an accepted request), then the
// family mismatches
// rdma_resolve_addr refuses, then a disconnect from both sides at once
// with the server's ID destroyed at once (the client's DISCONNECTED,
// status 0); the two outputs must be the same, line for line.
func TestCM6Rxe(t *testing.T) {
	needHarness(t)
	ctx, cancel := context.WithTimeout(t.Context(), 10*time.Minute)
	defer cancel()
	// The guest gets a global IPv6 address: rxe's kernel refuses to
	// resolve its own link-local one (ENETUNREACH), which the model
	// takes; cm6.c uses the device's first IPv6 GID that is not
	// link-local, GID 0 where there is none (the model).
	prep := "ip -6 addr add fd00::1/64 dev eth0 nodad; " +
		"n=0; while ! grep -q fd000000000000000000000000000001 /proc/net/if_inet6 && [ $n -lt 50 ]; do sleep 0.1; n=$((n+1)); done"
	mout, rxe := modelAndRxeAfter(ctx, t, prep, "../dropin/ibverbs/testdata/cm6.c", []string{"-lrdmacm", "-libverbs"},
		[]string{"ROCESIM_DEVICES=1"}, nil, "")
	sameLines(t, rxe, mout, "cm6 done")
}
