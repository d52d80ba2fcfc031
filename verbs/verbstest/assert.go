package verbstest

import (
	"fmt"
	"strings"

	"github.com/rocesim/rocesim/verbs"
)

// Assertions
//
// Each Require method fails the world's test (the TB New was given) with
// a message that starts with the call as the test wrote it, objects named
// as the world knows them ("a's CQ #1", "b QP 0x000011"), and, when the
// run is stuck or a completion failed, what the world saw go wrong: the
// QP that retries, the RNR NAKs its peer sent, what the fault plan did.

// RequireCompletion runs until cq has a completion, polls it, and fails
// the test unless its status is status and, if an opcode is given, its
// opcode is that one. An error completion's opcode may not be valid
// (libibverbs: only wr_id, status, qp_num and vendor_err are, for a
// flushed or failed WR), so leave it out there. It returns the
// completion for further checks (byte_len, immediate data, wr_id).
//
//	w.RequireCompletion(client.CQ, verbs.WCSuccess, verbs.WCRDMAWrite)
//	wc := w.RequireCompletion(client.CQ, verbs.WCRetryExcErr)
func (w *World) RequireCompletion(cq *verbs.CQ, status verbs.WCStatus, opcode ...verbs.WCOpcode) verbs.WC {
	w.t.Helper()
	args := []string{w.cqName(cq), status.Name()}
	for _, op := range opcode {
		args = append(args, op.String())
	}
	call := "RequireCompletion(" + strings.Join(args, ", ") + ")"
	if len(opcode) > 1 {
		w.fatalf("verbstest: %s: give at most one opcode", call)
	}
	wcs, ok := w.awaitWCs(call, cq, 1)
	if !ok {
		w.fatalf("verbstest: %s: no completion %s", call, w.stuck())
	}
	wc := wcs[0]
	switch {
	case wc.Status != status:
		msg := fmt.Sprintf("verbstest: %s: got %s", call, describeWC(wc))
		if d := w.trouble(); d != "" {
			msg += "; " + d
		}
		w.fatalf("%s", msg)
	case len(opcode) == 1 && wc.Opcode != opcode[0]:
		w.fatalf("verbstest: %s: got opcode %v: %s", call, wc.Opcode, describeWC(wc))
	}
	return wc
}

// RequireNoCompletion fails the test if cq holds a completion now (it
// polls one to see: the test fails anyway if there was one). It does not
// run the world: run it first for as long as "nothing" has to last.
func (w *World) RequireNoCompletion(cq *verbs.CQ) {
	w.t.Helper()
	var wc [1]verbs.WC
	if cq.Poll(wc[:]) == 1 {
		w.fatalf("verbstest: RequireNoCompletion(%s): at %v: %s", w.cqName(cq), w.Now(), describeWC(wc[0]))
	}
}

// RequireQPState fails the test unless qp is in state want.
func (w *World) RequireQPState(qp *verbs.QP, want verbs.QPState) {
	w.t.Helper()
	if got := qp.State(); got != want {
		w.fatalf("verbstest: RequireQPState(%s, %v): the QP is in %v at %v", w.qpName(qp), want, got, w.Now())
	}
}

// RequireFrames fails the test unless exactly n recorded frames match
// filter (see Frames), listing the ones that did; it returns them.
func (w *World) RequireFrames(filter string, n int) []Frame {
	w.t.Helper()
	call := fmt.Sprintf("RequireFrames(%q, %d)", filter, n)
	got := w.frameList(call, filter)
	if len(got) != n {
		w.fatalf("verbstest: %s: %s:%s", call, framesMatch(len(got)), listFrames(got))
	}
	return got
}

// RequireNoFrames fails the test if any recorded frame matches filter.
func (w *World) RequireNoFrames(filter string) {
	w.t.Helper()
	call := fmt.Sprintf("RequireNoFrames(%q)", filter)
	if got := w.frameList(call, filter); len(got) != 0 {
		w.fatalf("verbstest: %s: %s:%s", call, framesMatch(len(got)), listFrames(got))
	}
}

// framesMatch says how many frames match, in English.
func framesMatch(n int) string {
	if n == 1 {
		return "1 frame matches"
	}
	return fmt.Sprintf("%d frames match", n)
}

// stuck says why a wait ended without what it waited for: the time it
// gave up and, if the world is stuck rather than idle, what keeps it
// going, a forgotten receive first.
func (w *World) stuck() string {
	if w.vw.Scheduler().Pending() == 0 {
		s := fmt.Sprintf("by %v: nothing was left to happen", w.Now())
		if d := w.trouble(); d != "" {
			s += "; " + d
		}
		return s
	}
	return fmt.Sprintf("within %v of virtual time (Options.Limit), by %v: %s", w.limit, w.Now(), w.diagnose())
}

// trouble is the diagnosis if the world saw a QP stall or the fault plan
// act, or "".
func (w *World) trouble() string {
	if len(w.vw.Stalls()) == 0 && w.vw.FaultSummary() == "" {
		return ""
	}
	return w.diagnose()
}

// diagnose says what keeps the world going (verbs.World.Diagnose), led
// by the commonest mistake when the worst stall is one: a QP refused with
// RNR NAKs because its peer has no receive posted (rxe_resp.c answers
// RNR NAK, RESPST_ERR_RNR, to a SEND that finds no receive WQE, and
// rnr_retry 7 retries forever).
func (w *World) diagnose() string {
	d := w.vw.Diagnose(nil)
	stalls := w.vw.Stalls()
	if len(stalls) == 0 {
		return d
	}
	s := stalls[0]
	if s.RNRNAKs == 0 || s.RNRNAKs < s.Retransmits {
		return d
	}
	peer := s.Peer
	if s.PeerQPN != 0 {
		peer = fmt.Sprintf("%s QP 0x%06x", s.Peer, s.PeerQPN)
	}
	return fmt.Sprintf("%d RNR NAKs from %s: no receive posted (%s)", s.RNRNAKs, peer, d)
}

// cqName names a CQ in messages: "a's CQ #1" for one Host.CQ made.
func (w *World) cqName(cq *verbs.CQ) string {
	if n, ok := w.names.cqs[cq]; ok {
		return n
	}
	return "a CQ verbstest did not make"
}

// qpName names a QP in messages: "a QP 0x000011" for one Pair, Mesh or
// Connect made or connected.
func (w *World) qpName(qp *verbs.QP) string {
	if n, ok := w.names.qps[qp]; ok {
		return n
	}
	return fmt.Sprintf("QP 0x%06x", qp.QPNum)
}

// names are what the world calls the objects it made, for messages.
// The maps are only looked up, never iterated.
type names struct {
	cqs   map[*verbs.CQ]string
	qps   map[*verbs.QP]string
	perCQ map[*Host]int // CQs made per host so far
}

// With runs fn with t, not the test that made the world, as the TB every
// method of the world fails: a subtest that checks a world its parent
// built fails itself.
//
//	t.Run("retransmitted", func(t *testing.T) {
//		w.With(t, func() { w.RequireFrames("psn=2 tx=2", 1) })
//	})
func (w *World) With(t TB, fn func()) {
	t.Helper()
	saved := w.t
	w.t = t
	defer func() { w.t = saved }()
	fn()
}
