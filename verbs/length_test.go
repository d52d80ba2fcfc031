package verbs_test

import (
	"fmt"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/rocesim/rocesim/verbs"
	"github.com/rocesim/rocesim/verbs/verbstest"
)

// The verbstest flags (-rocesim.seed, -rocesim.keep) for this test binary.
func init() { verbstest.RegisterFlags() }

// TestLongMessageUCUD sends a UC message or a UD datagram longer than
// the receive buffer, then a short one. rxe 6.1 treats the overflow as a
// malformed WQE (see TestMessageLongerThanReceive), whatever the
// transport: the receive completes with LOC_QP_OP_ERR, the QP goes to
// ERR and the next receive is flushed (on an SRQ it stays queued: an SRQ
// is not flushed with a QP). The IBTA profile completes a UD datagram
// with LOC_LEN_ERR and carries on.
func TestLongMessageUCUD(t *testing.T) {
	for _, c := range []struct {
		typ   verbs.QPType
		srq   bool
		prof  verbs.Profile
		want  []string // the receiver's completions: wr_id:status:byte_len
		state verbs.QPState
	}{
		{verbs.QPTypeUC, false, verbs.ProfileRXE, []string{"1:IBV_WC_LOC_QP_OP_ERR:0", "2:IBV_WC_WR_FLUSH_ERR:0"}, verbs.QPStateErr},
		{verbs.QPTypeUC, true, verbs.ProfileRXE, []string{"1:IBV_WC_LOC_QP_OP_ERR:0"}, verbs.QPStateErr},
		{verbs.QPTypeUD, false, verbs.ProfileRXE, []string{"1:IBV_WC_LOC_QP_OP_ERR:0", "2:IBV_WC_WR_FLUSH_ERR:0"}, verbs.QPStateErr},
		{verbs.QPTypeUD, true, verbs.ProfileRXE, []string{"1:IBV_WC_LOC_QP_OP_ERR:0"}, verbs.QPStateErr},
		{verbs.QPTypeUD, false, verbs.ProfileSpec, []string{"1:IBV_WC_LOC_LEN_ERR:0", "2:IBV_WC_SUCCESS:140"}, verbs.QPStateRTS},
	} {
		t.Run(fmt.Sprintf("%v/srq=%v/%v", c.typ, c.srq, c.prof), func(t *testing.T) {
			w := verbstest.New(t, verbstest.Options{Profile: c.prof})
			a, b := w.Host("a"), w.Host("b")
			acq, bcq := a.CQ(8), b.CQ(8)
			init := verbs.QPInitAttr{SendCQ: bcq, RecvCQ: bcq, Type: c.typ,
				Cap: verbs.QPCap{MaxSendWR: 4, MaxRecvWR: 4, MaxSendSGE: 1, MaxRecvSGE: 1}}
			var srq *verbs.SRQ
			if c.srq {
				var err error
				srq, err = b.PD.CreateSRQ(verbs.SRQAttr{MaxWR: 4, MaxSGE: 1})
				require.NoError(t, err)
				init.SRQ = srq
			}
			qb, err := b.PD.CreateQP(init)
			require.NoError(t, err)
			init.SendCQ, init.RecvCQ, init.SRQ = acq, acq, nil
			qa, err := a.PD.CreateQP(init)
			require.NoError(t, err)

			send := verbs.SendWR{Opcode: verbs.WRSend, Flags: verbs.SendSignaled}
			big := 3000
			if c.typ == verbs.QPTypeUD {
				big = 1000 // one packet; with the 40-byte GRH area over the 1024-byte buffer
				for _, q := range []*verbs.QP{qa, qb} {
					require.NoError(t, q.Modify(&verbs.QPAttr{QPState: verbs.QPStateInit, PortNum: 1, QKey: 7},
						verbs.QPAttrState|verbs.QPAttrPKeyIndex|verbs.QPAttrPort|verbs.QPAttrQKey))
					require.NoError(t, q.Modify(&verbs.QPAttr{QPState: verbs.QPStateRTR}, verbs.QPAttrState))
					require.NoError(t, q.Modify(&verbs.QPAttr{QPState: verbs.QPStateRTS}, verbs.QPAttrState|verbs.QPAttrSQPSN))
				}
				gid, err := b.Ctx.QueryGID(1, 1)
				require.NoError(t, err)
				send.AH, err = a.PD.CreateAH(verbs.AHAttr{IsGlobal: true, PortNum: 1, GRH: verbs.GRH{DGID: gid}})
				require.NoError(t, err)
				send.RemoteQPN, send.RemoteQKey = qb.QPNum, 7
			} else {
				w.Connect(qa, qb, verbstest.QPOptions{Type: verbs.QPTypeUC})
			}

			rbuf, sbuf := b.Buffer(2*1024), a.Buffer(4096)
			recvs := []verbs.RecvWR{{WRID: 1, SGList: []verbs.SGE{rbuf.SGE(0, 1024)}}, {WRID: 2, SGList: []verbs.SGE{rbuf.SGE(1024, 1024)}}}
			if srq != nil {
				_, err = srq.PostRecv(recvs)
			} else {
				_, err = qb.PostRecv(recvs)
			}
			require.NoError(t, err)
			long, short := send, send
			long.WRID, long.SGList = 10, []verbs.SGE{sbuf.SGE(0, uint64(big))}
			short.WRID, short.SGList = 11, []verbs.SGE{sbuf.SGE(0, 100)}
			_, err = qa.PostSend([]verbs.SendWR{long, short})
			require.NoError(t, err)
			w.RunUntilIdle()

			var got []string
			for _, wc := range w.Await(bcq, len(c.want)) {
				got = append(got, fmt.Sprintf("%d:%s:%d", wc.WRID, wc.Status.Name(), wc.ByteLen))
			}
			assert.Equal(t, c.want, got)
			w.RequireNoCompletion(bcq)
			assert.Equal(t, c.state, qb.State())
			for _, wc := range w.Await(acq, 2) {
				assert.Equal(t, verbs.WCSuccess, wc.Status, "UC and UD complete on send")
			}
		})
	}
}

// TestInlineZeroLengthSGE: inline data is copied as given, so an inline
// SEND whose SGE has length 0 is an empty message (rxe's post_send sums
// the lengths as they are), not 2^31 bytes over max_inline_data.
func TestInlineZeroLengthSGE(t *testing.T) {
	w := verbstest.New(t, verbstest.Options{})
	a, b := w.Pair("a", "b", verbstest.QPOptions{MaxInline: 64})
	src, dst := a.Host.Buffer(8), b.Host.Buffer(8)
	_, err := b.QP.PostRecv([]verbs.RecvWR{{WRID: 1, SGList: []verbs.SGE{dst.SGE(0, 8)}}})
	require.NoError(t, err)
	_, err = a.QP.PostSend([]verbs.SendWR{{WRID: 2, Opcode: verbs.WRSend, Flags: verbs.SendSignaled | verbs.SendInline,
		SGList: []verbs.SGE{src.SGE(0, 0)}}})
	require.NoError(t, err)
	w.RequireCompletion(a.CQ, verbs.WCSuccess, verbs.WCSend)
	wc := w.RequireCompletion(b.CQ, verbs.WCSuccess, verbs.WCRecv)
	assert.Zero(t, wc.ByteLen)
}

// TestLastWQEReachedOnSRQ: a QP on an SRQ that goes to ERR has no
// receives of its own to flush. The IBTA has it raise LAST_WQE_REACHED
// (§11.5.2.5); rxe 6.1 raises nothing (seen on real rxe: conformance
// TestLongMessageMatchesRxe, rc+srq and uc+srq).
func TestLastWQEReachedOnSRQ(t *testing.T) {
	for _, c := range []struct {
		prof verbs.Profile
		want []string
	}{{verbs.ProfileRXE, nil}, {verbs.ProfileSpec, []string{"QP_LAST_WQE_REACHED"}}} {
		t.Run(c.prof.String(), func(t *testing.T) {
			w := verbstest.New(t, verbstest.Options{Profile: c.prof})
			b := w.Host("b")
			srq, err := b.PD.CreateSRQ(verbs.SRQAttr{MaxWR: 4, MaxSGE: 1})
			require.NoError(t, err)
			cq := b.CQ(8)
			qp, err := b.PD.CreateQP(verbs.QPInitAttr{SendCQ: cq, RecvCQ: cq, SRQ: srq, Type: verbs.QPTypeRC,
				Cap: verbs.QPCap{MaxSendWR: 4, MaxSendSGE: 1}})
			require.NoError(t, err)
			require.NoError(t, qp.Modify(&verbs.QPAttr{QPState: verbs.QPStateInit, PortNum: 1},
				verbs.QPAttrState|verbs.QPAttrPKeyIndex|verbs.QPAttrPort|verbs.QPAttrAccessFlags))
			require.NoError(t, qp.Modify(&verbs.QPAttr{QPState: verbs.QPStateErr}, verbs.QPAttrState))
			var got []string
			for ev, ok := b.Ctx.GetAsyncEvent(); ok; ev, ok = b.Ctx.GetAsyncEvent() {
				got = append(got, ev.Type.String())
			}
			assert.Equal(t, c.want, got)
		})
	}
}

// TestFailedReceiveIntoFullCQ: a receive that fails (a message longer
// than its buffer) into a full CQ. The lost completion moves the QP to
// ERR and its flush must not meet the failed receive again (a regression:
// the receive was retired twice, the queue's count went negative and the
// next flush never ended). The receives behind it are flushed into the
// full CQ, lost too, and the QP takes new ones and flushes them.
func TestFailedReceiveIntoFullCQ(t *testing.T) {
	for _, typ := range []verbs.QPType{verbs.QPTypeRC, verbs.QPTypeUC} {
		t.Run(typ.String(), func(t *testing.T) {
			w := verbstest.New(t, verbstest.Options{})
			a, b := w.Host("a"), w.Host("b")
			acq, bcq := a.CQ(16), b.CQ(1)
			mk := func(h *verbstest.Host, cq *verbs.CQ) *verbs.QP {
				qp, err := h.PD.CreateQP(verbs.QPInitAttr{SendCQ: cq, RecvCQ: cq, Type: typ,
					Cap: verbs.QPCap{MaxSendWR: 8, MaxRecvWR: 8, MaxSendSGE: 1, MaxRecvSGE: 1}})
				require.NoError(t, err)
				return qp
			}
			qa, qb := mk(a, acq), mk(b, bcq)
			w.Connect(qa, qb, verbstest.QPOptions{Type: typ})
			src, dst := a.Buffer(4096), b.Buffer(4096)
			var recvs []verbs.RecvWR
			for i := range 4 {
				recvs = append(recvs, verbs.RecvWR{WRID: uint64(i + 1), SGList: []verbs.SGE{dst.SGE(uint64(i*1024), 512)}})
			}
			_, err := qb.PostRecv(recvs)
			require.NoError(t, err)
			_, err = qa.PostSend([]verbs.SendWR{
				{WRID: 10, Opcode: verbs.WRSend, SGList: []verbs.SGE{src.SGE(0, 100)}},  // fills b's CQ of 1
				{WRID: 11, Opcode: verbs.WRSend, SGList: []verbs.SGE{src.SGE(0, 1000)}}, // longer than 512: fails, lost
			})
			require.NoError(t, err)
			w.RunUntilIdle()
			w.RequireQPState(qb, verbs.QPStateErr)
			w.RequireCompletion(bcq, verbs.WCSuccess, verbs.WCRecv)
			w.RequireNoCompletion(bcq)
			// The queue is empty, not negative: another move to ERR (a
			// flush) ends, and new receives are flushed one by one.
			require.NoError(t, qb.Modify(&verbs.QPAttr{QPState: verbs.QPStateErr}, verbs.QPAttrState))
			for i := range 8 {
				_, err := qb.PostRecv([]verbs.RecvWR{{WRID: uint64(100 + i), SGList: []verbs.SGE{dst.SGE(0, 8)}}})
				require.NoError(t, err)
				assert.Equal(t, uint64(100+i), w.RequireCompletion(bcq, verbs.WCWRFlushErr, verbs.WCRecv).WRID)
			}
		})
	}
}

// TestUCLossWithSRQ: a UC message broken by a lost packet, received from
// an SRQ. The WQE it took from the shared queue must not vanish: it
// completes with REM_INV_REQ_ERR (rxe's class E), and every later
// message takes its own WQE. Under rxe the message right after the
// broken one is dropped too (TestUCLossDropsRestOfMessage).
func TestUCLossWithSRQ(t *testing.T) {
	for _, c := range []struct {
		prof verbs.Profile
		want []string // wr_id:status:byte_len
	}{
		{verbs.ProfileRXE, []string{"1:IBV_WC_REM_INV_REQ_ERR:0", "2:IBV_WC_SUCCESS:200"}},
		{verbs.ProfileSpec, []string{"1:IBV_WC_REM_INV_REQ_ERR:0", "2:IBV_WC_SUCCESS:500", "3:IBV_WC_SUCCESS:200"}},
	} {
		t.Run(c.prof.String(), func(t *testing.T) {
			w := verbstest.New(t, verbstest.Options{Profile: c.prof, Faults: "drop src=a op=UC_SEND_MIDDLE"})
			a, b := w.Host("a"), w.Host("b")
			acq, bcq := a.CQ(16), b.CQ(16)
			srq, err := b.PD.CreateSRQ(verbs.SRQAttr{MaxWR: 8, MaxSGE: 1})
			require.NoError(t, err)
			qa, err := a.PD.CreateQP(verbs.QPInitAttr{SendCQ: acq, RecvCQ: acq, Type: verbs.QPTypeUC,
				Cap: verbs.QPCap{MaxSendWR: 8, MaxRecvWR: 8, MaxSendSGE: 1, MaxRecvSGE: 1}})
			require.NoError(t, err)
			qb, err := b.PD.CreateQP(verbs.QPInitAttr{SendCQ: bcq, RecvCQ: bcq, SRQ: srq, Type: verbs.QPTypeUC,
				Cap: verbs.QPCap{MaxSendWR: 8, MaxSendSGE: 1}})
			require.NoError(t, err)
			w.Connect(qa, qb, verbstest.QPOptions{Type: verbs.QPTypeUC})
			src, dst := a.Buffer(4096), b.Buffer(4*4096)
			var recvs []verbs.RecvWR
			for i := range 4 {
				recvs = append(recvs, verbs.RecvWR{WRID: uint64(i + 1), SGList: []verbs.SGE{dst.SGE(uint64(i*4096), 4096)}})
			}
			_, err = srq.PostRecv(recvs)
			require.NoError(t, err)
			send := func(id uint64, n uint64) verbs.SendWR {
				return verbs.SendWR{WRID: id, Opcode: verbs.WRSend, SGList: []verbs.SGE{src.SGE(0, n)}}
			}
			_, err = qa.PostSend([]verbs.SendWR{send(10, 3000), send(11, 500), send(12, 200)})
			require.NoError(t, err)
			w.RunUntilIdle()
			var got []string
			var wc [8]verbs.WC
			for n := bcq.Poll(wc[:]); n > 0; n = bcq.Poll(wc[:]) {
				for _, x := range wc[:n] {
					got = append(got, fmt.Sprintf("%d:%s:%d", x.WRID, x.Status.Name(), x.ByteLen))
				}
			}
			assert.Equal(t, c.want, got)
			w.RequireQPState(qb, verbs.QPStateRTS)
		})
	}
}
