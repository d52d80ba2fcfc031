package nic

import (
	"syscall"

	"github.com/rocesim/rocesim/sim"
)

// Posting, per IBTA §10.8 and the libibverbs behaviour the DESIGN notes
// give:
//
//   - Receives may be posted from INIT on; sends from RTS on. In RESET
//     nothing may be posted (EINVAL); receives in RESET and sends before
//     RTS are refused the same way.
//   - In SQE and ERR posts are accepted and complete with WR_FLUSH_ERR.
//   - A malformed WR (too many SGEs, inline data over max_inline_data, an
//     opcode the QP type does not have, UD without an AH, an atomic with
//     an unaligned remote_addr or fewer than 8 bytes to hold its result)
//     is refused with EINVAL; a full queue with ENOMEM. The index of the first refused WR
//     is returned, the ones before it are posted.
//   - Errors only the memory check finds (an SGE outside its MR, a wrong
//     lkey, a receive or READ destination without LOCAL_WRITE: LOC_PROT_ERR;
//     a message over 2^31 bytes: LOC_LEN_ERR) are accepted by the post and
//     complete in order with that status, moving the QP to ERR, as rxe does.

// MaxMessage is the largest message a work request may describe: 2^31
// bytes, the IBTA's largest message. It is also the length an SGE of
// length 0 stands for (memory.go), and the bound of a scenario's len=.
const MaxMessage = 1 << 31

// PostSend posts wrs to qp's send queue. It returns the index of the first
// WR it refused (len(wrs) if none) and why.
func (d *Device) PostSend(now sim.Time, qp *QP, wrs []SendWR) (int, error) {
	if !d.liveQP(qp) {
		return 0, errno(syscall.EINVAL, "post_send: not a live QP of this device")
	}
	for i := range wrs {
		if err := d.postSend(now, qp, &wrs[i]); err != nil {
			d.requesterRun(now, qp)
			return i, err
		}
	}
	d.requesterRun(now, qp)
	return len(wrs), nil
}

// SendRoom returns how many more WRs qp's send queue takes now (0 for a
// QP not live on d): what a caller that posts a batch whole, or none of
// it, checks first (the drop-in's ibv_wr_complete).
func (d *Device) SendRoom(qp *QP) int {
	if !d.liveQP(qp) {
		return 0
	}
	return max(0, qp.sq.limit-qp.sq.size)
}

// CheckSend runs the checks PostSend makes of each WR (all but the
// queue's room: SendRoom) without posting anything. It returns the index
// of the first WR PostSend would refuse (len(wrs) if none) and why: what
// a caller that posts a batch whole or not at all asks first (the
// drop-in's ibv_wr_complete).
func (d *Device) CheckSend(qp *QP, wrs []SendWR) (int, error) {
	if !d.liveQP(qp) {
		return 0, errno(syscall.EINVAL, "post_send: not a live QP of this device")
	}
	for i := range wrs {
		if err := d.checkSend(qp, &wrs[i]); err != nil {
			return i, err
		}
	}
	return len(wrs), nil
}

func (d *Device) postSend(now sim.Time, qp *QP, wr *SendWR) error {
	if err := d.checkSend(qp, wr); err != nil {
		return err
	}
	if qp.sq.full() {
		return errno(syscall.ENOMEM, "post_send: send queue full (%d WRs outstanding, max_send_wr %d)", qp.sq.size, qp.sq.limit)
	}
	t := qp.init.Type
	// SEND_INLINE carries data only on SENDs and WRITEs (checkSend has
	// held its length to max_inline_data whatever the opcode).
	isInline := wr.Flags&SendInline != 0 && !wr.Opcode.isRdAtomic()
	var inlineLen uint64
	if isInline {
		for _, s := range wr.SGList {
			inlineLen += uint64(s.Length)
		}
	}
	qp.sq.trim()
	w := qp.sq.grow()
	sges, inline := w.wr.SGList[:0], w.inline[:0]
	*w = sendWQE{wr: *wr, signaled: qp.init.SQSigAll || wr.Flags&SendSignaled != 0, isInline: isInline}
	w.wr.SGList = sges // the QP's own copy, filled below (the caller keeps wr)
	if isLocalOp(wr.Opcode) {
		// No data: what to bind or invalidate is checked when the
		// requester reaches the WQE (rxe_do_local_ops). The window's
		// R_Key is taken now, as rxe's provider copies mw->rkey into the
		// WQE at post time.
		w.wr.BindMW.mwKey = wr.BindMW.MW.RKeyOrZero()
		w.inline, w.isInline = inline, false
	} else if isInline {
		// Inline data is copied now: the buffers need not be registered.
		w.inline = inline
		for _, s := range wr.SGList {
			w.inline = append(w.inline, d.mem.peek(s)...)
		}
		w.length = inlineLen
	} else {
		w.wr.SGList = append(sges, wr.SGList...)
		total, st, why := d.mem.resolve(qp.pd, w.wr.SGList, wr.Opcode.localFlow())
		w.length = total
		switch {
		case st != WCSuccess:
			w.status, w.done, w.why = st, true, memCheck(why)
		case total > MaxMessage:
			w.status, w.done, w.why = WCLocLenErr, true, wcReason{kind: whyMessageOver2G, n: total}
		case t == QPTypeUD && total > uint64(d.cfg.PathMTUMax.Bytes()):
			w.status, w.done, w.why = WCLocLenErr, true, wcReason{kind: whyUDOverMTU, n: total}
		}
	}
	if qp.state.flushesSends() {
		// Accepted, and flushed at once: the queue holds nothing else.
		// Retired first: a full CQ may move an SQE QP to ERR and flush.
		qp.sq.size--
		d.completeSend(now, qp, w, WCWRFlushErr)
	}
	return nil
}

// PostRecv posts wrs to qp's receive queue.
func (d *Device) PostRecv(now sim.Time, qp *QP, wrs []RecvWR) (int, error) {
	if !d.liveQP(qp) {
		return 0, errno(syscall.EINVAL, "post_recv: not a live QP of this device")
	}
	if qp.init.SRQ != nil {
		return 0, errno(syscall.EINVAL, "post_recv: QP 0x%06x receives from an SRQ; post to the SRQ", qp.num)
	}
	for i := range wrs {
		wr := &wrs[i]
		if qp.state == QPStateReset {
			return i, errno(syscall.EINVAL, "post_recv: QP 0x%06x is in RESET; receives may be posted from INIT on", qp.num)
		}
		if len(wr.SGList) > int(qp.init.Cap.MaxRecvSGE) {
			return i, errno(syscall.EINVAL, "post_recv: num_sge %d over the QP's max_recv_sge %d", len(wr.SGList), qp.init.Cap.MaxRecvSGE)
		}
		if qp.rq.full() {
			return i, errno(syscall.ENOMEM, "post_recv: receive queue full (%d WRs outstanding, max_recv_wr %d)", qp.rq.size, qp.rq.limit)
		}
		// A SEND in progress holds its WQE, the head, by pointer: the
		// storage may move below it.
		head := qp.resp.rwqe != nil && qp.resp.rwqe == qp.rq.at(0)
		if !head {
			qp.rq.trim()
		}
		w := qp.rq.grow()
		if head {
			qp.resp.rwqe = qp.rq.at(0)
		}
		sges := w.sges[:0]
		*w = recvWQE{wrid: wr.WRID, sges: append(sges, wr.SGList...)}
		var msg string
		w.length, w.status, msg = d.mem.resolve(qp.pd, w.sges, intoMemory)
		w.why = memCheck(msg)
		if qp.state == QPStateErr {
			qp.rq.size--
			d.completeRecv(now, qp, WC{WRID: w.wrid, Status: WCWRFlushErr, Opcode: WCRecv, QPNum: qp.num}, unsolicited)
		}
	}
	return len(wrs), nil
}

// checkSend is PostSend's check of one WR, the queue's room aside.
func (d *Device) checkSend(qp *QP, wr *SendWR) error {
	switch qp.state {
	case QPStateReset, QPStateInit, QPStateRTR:
		return errno(syscall.EINVAL, "post_send: QP 0x%06x is in %v; sends may be posted from RTS on", qp.num, qp.state)
	}
	t := qp.init.Type
	ok := false
	switch wr.Opcode {
	case WRSend, WRSendWithImm:
		ok = true
	case WRRDMAWrite, WRRDMAWriteWithImm, WRBindMW:
		// BIND_MW: RC and UC, as rxe's rxe_wr_opcode_info.
		ok = t != QPTypeUD
	case WRRDMARead, WRAtomicCmpAndSwp, WRAtomicFetchAndAdd, WRLocalInv:
		ok = t == QPTypeRC
	case WRSendWithInv:
		// Only RC has SEND WITH INVALIDATE opcodes (IBTA §9.2.5); rxe's
		// table admits the WR on UC and UD too and then fails it when it
		// finds no opcode (LOC_QP_OP_ERR): refused here instead.
		ok = t == QPTypeRC
	}
	if !ok {
		return errno(syscall.EINVAL, "post_send: opcode %v is not valid on a %v QP", wr.Opcode, t)
	}
	if wr.Opcode == WRBindMW && (wr.BindMW.MW == nil || wr.BindMW.MW.dead) {
		// The C provider would dereference bind_mw.mw (rxe's
		// init_send_wqe copies mw->rkey).
		return errno(syscall.EINVAL, "post_send: wr.bind_mw.mw is not a live memory window")
	}
	if len(wr.SGList) > int(qp.init.Cap.MaxSendSGE) {
		return errno(syscall.EINVAL, "post_send: num_sge %d over the QP's max_send_sge %d", len(wr.SGList), qp.init.Cap.MaxSendSGE)
	}
	if t == QPTypeUD && (wr.AH == nil || wr.AH.dead) {
		return errno(syscall.EINVAL, "post_send: a UD send needs wr.ah (an address handle)")
	}
	if t == QPTypeUD && wr.AH.pd != qp.pd {
		// rxe_get_av refuses an AH of another PD ("PDs don't match for
		// AH and QP"); a simulator says so at post time.
		return errno(syscall.EINVAL, "post_send: wr.ah is not in the QP's PD")
	}
	// SEND_INLINE carries data only on SENDs and WRITEs; on a READ or an
	// atomic the flag is ignored, but rxe's post_send checks the length
	// against max_inline_data whatever the opcode (validate_send_wr).
	// Inline data is copied byte for byte: an SGE of length 0 is 0 bytes
	// here, not 2^31.
	if wr.Flags&SendInline != 0 {
		var inlineLen uint64
		for _, s := range wr.SGList {
			inlineLen += uint64(s.Length)
		}
		if inlineLen > uint64(qp.init.Cap.MaxInlineData) {
			return errno(syscall.EINVAL, "post_send: inline data of %d bytes over the QP's max_inline_data %d", inlineLen, qp.init.Cap.MaxInlineData)
		}
	}
	if wr.Opcode.isAtomic() {
		if wr.RemoteAddr%8 != 0 {
			return errno(syscall.EINVAL, "post_send: atomic remote_addr 0x%x is not 8-byte aligned", wr.RemoteAddr)
		}
		// rxe's post_send (rdma-core providers/rxe, validate_send_wr)
		// sums the SGE lengths as given, a 0 counting 0, and refuses an
		// atomic with fewer than 8 bytes; more are accepted, and the
		// original value lands in the first 8.
		var n uint64
		for _, s := range wr.SGList {
			n += uint64(s.Length)
		}
		if n < 8 {
			return errno(syscall.EINVAL, "post_send: atomic sg_list holds %d bytes; the original value needs 8", n)
		}
	}
	return nil
}
