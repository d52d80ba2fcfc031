package nic

import "github.com/rocesim/rocesim/sim"

// peek returns the bytes an SGE names, for inline data: they must lie in
// a registered MR (rocesim has no other memory), whose access flags are
// not checked, as the NIC never reads inline data from memory itself.
// Bytes outside any MR read as nothing.
func (t *memTable) peek(s SGE) []byte {
	mr := t.byLKey(s.LKey)
	if mr == nil || s.Addr < mr.Addr || s.Addr-mr.Addr+uint64(s.Length) > mr.Length {
		return nil
	}
	start := s.Addr - mr.Addr
	return mr.buf[start : start+uint64(s.Length)]
}

// memStillValid re-checks a WQE's SGEs before the device touches them:
// the user may have deregistered an MR since the post (rxe then completes
// with LOC_PROT_ERR rather than touch freed memory).
func (d *Device) memStillValid(qp *QP, sges []SGE, flow dataFlow) bool {
	_, st, _ := d.mem.resolve(qp.pd, sges, flow)
	return st == WCSuccess
}

// localProtErr fails a send WQE whose memory went away mid-message.
func (d *Device) localProtErr(now sim.Time, qp *QP, w *sendWQE) {
	w.done, w.status = true, WCLocProtErr
	if qp.sq.at(0) == w {
		d.sendQueueError(now, qp)
	}
}
