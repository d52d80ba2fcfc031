package conformance

import (
	"context"
	"testing"
	"time"
)

// TestMcastRxe: multicast answers the same on the drop-in libibverbs.so.1
// and librdmacm.so.1 as on real rxe with Debian's rdma-core, in a guest:
// dropin/ibverbs's mcast.c prints one line per case (what
// ibv_attach_mcast and ibv_detach_mcast accept and refuse, destroying an
// attached QP, the 57th QP of a group, the device's multicast limits;
// then mckey's way with rdma_cm on 10.0.0.1: each join event's every
// field, what two receivers and the sender's own QP get of three SENDs
// to 224.0.0.5, GRH area included, a leave, the joins the kernel
// refuses) and the two outputs must be the same, line for line.
func TestMcastRxe(t *testing.T) {
	needHarness(t)
	ctx, cancel := context.WithTimeout(t.Context(), 10*time.Minute)
	defer cancel()
	mout, rxe := modelAndRxe(ctx, t, "../dropin/ibverbs/testdata/mcast.c", []string{"-lrdmacm", "-libverbs", "-lpthread"},
		[]string{"ROCESIM_DEVICES=1"}, nil, "")
	sameLines(t, rxe, mout, "mcast done")
}
