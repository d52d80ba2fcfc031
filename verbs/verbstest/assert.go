package verbstest

import (
	"github.com/stretchr/testify/require"

	"github.com/rocesim/rocesim/verbs"
)

// RequireCompletion runs until cq has a completion, polls it, and fails
// t unless its status and opcode are the ones given. It returns the
// completion for further checks (byte_len, immediate data, wr_id).
//
//	wc := w.RequireCompletion(t, client.CQ, verbs.WCRetryExcErr, verbs.WCSend)
func (w *World) RequireCompletion(t TB, cq *verbs.CQ, status verbs.WCStatus, opcode verbs.WCOpcode) verbs.WC {
	t.Helper()
	wc := w.await(t, cq, 1)[0]
	require.Equal(t, status.Name(), wc.Status.Name(), "completion status (%s)", describeWC(wc))
	require.Equal(t, opcode.String(), wc.Opcode.String(), "completion opcode (%s)", describeWC(wc))
	return wc
}

// RequireNoCompletion fails t if cq holds a completion now (it polls one
// to see: the test fails anyway if there was one). It does not run the
// world: run it first for as long as "nothing" has to last.
func (w *World) RequireNoCompletion(t TB, cq *verbs.CQ) {
	t.Helper()
	var wc [1]verbs.WC
	if cq.Poll(wc[:]) == 1 {
		require.Fail(t, "unexpected completion", "at %v: %s", w.Now(), describeWC(wc[0]))
	}
}

// RequireQPState fails t unless qp is in state want.
func (w *World) RequireQPState(t TB, qp *verbs.QP, want verbs.QPState) {
	t.Helper()
	require.Equal(t, want.String(), qp.State().String(), "state of QP 0x%x at %v", qp.QPNum, w.Now())
}
