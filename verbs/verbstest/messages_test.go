package verbstest_test

import (
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/rocesim/rocesim/verbs"
	"github.com/rocesim/rocesim/verbs/verbstest"
)

// TestRequireMessages runs each Require against a Recorder (a fake T)
// and compares the first line of what it reports: the call as the test
// wrote it, and what went wrong, a forgotten receive named as one.
func TestRequireMessages(t *testing.T) {
	// forgot is a SEND from a to b, which never posts a receive.
	forgot := func(w *verbstest.World, o verbstest.QPOptions) *verbstest.Endpoint {
		o.FixedPSN = true
		a, _ := w.Pair("a", "b", o)
		send(w.T(), a, 1, a.Host.Buffer(16), 16)
		return a
	}
	// delivered is a SEND from a to b, which posted a receive (wr_id 4).
	delivered := func(w *verbstest.World) (*verbstest.Endpoint, *verbstest.Endpoint) {
		a, b := w.Pair("a", "b", verbstest.QPOptions{})
		b.PostRecv(4, b.Host.Buffer(16).SGE(0, 16))
		send(w.T(), a, 1, a.Host.Buffer(16), 16)
		return a, b
	}
	for _, c := range []struct {
		name, want string
		body       func(w *verbstest.World)
	}{
		{"forgot-receive",
			"verbstest: RequireCompletion(a's CQ #1, IBV_WC_SUCCESS, IBV_WC_SEND): no completion within 10s of virtual time (Options.Limit), by 9.99938564s: " +
				"15576 RNR NAKs from b QP 0x000011: no receive posted (a QP 0x000011 was refused with 15576 RNR NAKs by b, resending PSN 0 every 642.015µs: " +
				"rnr_retry 7 retries forever and b never has a receive posted for it; post a receive, set a deadline or a finite rnr_retry)",
			func(w *verbstest.World) {
				a := forgot(w, verbstest.QPOptions{})
				w.RequireCompletion(a.CQ, verbs.WCSuccess, verbs.WCSend)
			}},
		{"forgot-receive-finite-rnr-retry",
			"verbstest: RequireCompletion(a's CQ #1, IBV_WC_SUCCESS): got wr_id 1: IBV_WC_RNR_RETRY_EXC_ERR (RNR retry counter exceeded) IBV_WC_SEND byte_len 0 qp 0x11; " +
				"3 RNR NAKs from b QP 0x000011: no receive posted (a QP 0x000011 was refused with 3 RNR NAKs by b, resending PSN 0 every 642.015µs: rnr_retry 2)",
			func(w *verbstest.World) {
				a := forgot(w, verbstest.QPOptions{RNRRetry: 2})
				w.RequireCompletion(a.CQ, verbs.WCSuccess)
			}},
		{"wrong-opcode",
			"verbstest: RequireCompletion(a's CQ #1, IBV_WC_SUCCESS, IBV_WC_RDMA_WRITE): got opcode IBV_WC_SEND: wr_id 1: IBV_WC_SUCCESS (success) IBV_WC_SEND byte_len 16 qp 0x11",
			func(w *verbstest.World) {
				a, _ := delivered(w)
				w.RequireCompletion(a.CQ, verbs.WCSuccess, verbs.WCRDMAWrite)
			}},
		{"await-idle",
			"verbstest: Await(b's CQ #1, 2): 1 of 2 completions by 2.015µs: nothing was left to happen\n  wr_id 4: IBV_WC_SUCCESS (success) IBV_WC_RECV byte_len 16 qp 0x11",
			func(w *verbstest.World) {
				_, b := delivered(w)
				w.Await(b.CQ, 2)
			}},
		{"qp-state",
			"verbstest: RequireQPState(a QP 0x000011, ERR): the QP is in RTS at 0s",
			func(w *verbstest.World) {
				a, _ := w.Pair("a", "b", verbstest.QPOptions{})
				w.RequireQPState(a.QP, verbs.QPStateErr)
			}},
		{"frames",
			`verbstest: RequireFrames("class=nak", 1): 0 frames match:`,
			func(w *verbstest.World) { w.RequireFrames("class=nak", 1) }},
		{"no-frames",
			`verbstest: RequireNoFrames("src=a"): 1 frame matches:` +
				"\n  0s a->b RC_SEND_ONLY qp=0x11 psn=0 (wr 1 SEND, packet 1 of 1)",
			func(w *verbstest.World) {
				a := forgot(w, verbstest.QPOptions{ZeroRNRRetry: true})
				w.Await(a.CQ, 1)
				w.RequireNoFrames("src=a")
			}},
		{"no-completion",
			"verbstest: RequireNoCompletion(a's CQ #1): at 2.015µs: wr_id 1: IBV_WC_RNR_RETRY_EXC_ERR (RNR retry counter exceeded) IBV_WC_SEND byte_len 0 qp 0x11",
			func(w *verbstest.World) {
				a := forgot(w, verbstest.QPOptions{ZeroRNRRetry: true})
				w.RunUntilIdle()
				w.RequireNoCompletion(a.CQ)
			}},
	} {
		t.Run(c.name, func(t *testing.T) {
			var r verbstest.Recorder
			require.False(t, r.Run(t.Name(), func(tb verbstest.TB) { c.body(verbstest.New(tb, verbstest.Options{})) }))
			out := r.Output()
			if i := strings.Index(out, "\nrocesim: the simulated run"); i >= 0 {
				out = out[:i]
			}
			assert.Equal(t, c.want, out)
		})
	}
}

// TestErrorCompletionWithoutOpcode: RequireCompletion checks the status
// alone when no opcode is given, as a failed WR's opcode may not be
// valid.
func TestErrorCompletionWithoutOpcode(t *testing.T) {
	w := verbstest.New(t, verbstest.Options{})
	a, _ := w.Pair("a", "b", verbstest.QPOptions{ZeroRNRRetry: true})
	send(t, a, 6, a.Host.Buffer(8), 8)
	wc := w.RequireCompletion(a.CQ, verbs.WCRNRRetryExcErr)
	assert.Equal(t, uint64(6), wc.WRID)
}
