package nic

import (
	"cmp"
	"container/heap"
	"slices"

	"github.com/rocesim/rocesim/sim"
)

// The timer heap: NextDeadline and Advance find the QPs whose ACK
// timeout or RNR wait is due without looking at the others, so a device
// with many idle QPs pays nothing for them on each event (rxe gives each
// QP its own kernel timers, rxe_qp.c rxe_qp_init_req's retrans_timer and
// rnr_nak_timer; one heap entry per QP stands in for both).
//
//  1. Every place that sets req.ackDue, req.rnrUntil, the whole req, or
//     the QP's state calls retime, which computes the QP's deadline
//     (timerDue) and puts the QP in the heap, moves it (heap.Fix) or
//     takes it out: only QPs with a deadline are in the heap.
//  2. NextDeadline reads the top of the heap.
//  3. Advance pops every QP due at now, then runs them in creation order
//     (seq), as the scan over the creation-ordered QP list did, so the
//     order of frames, completions and trace lines is unchanged.
//
// The heap's slice and the due list are kept between calls: once they
// have grown to the number of QPs with a timer, arming, moving and
// firing allocate nothing.

// timerHeap orders QPs by deadline, then by creation, for container/heap.
type timerHeap []*QP

// Len is the number of QPs with a deadline.
func (h timerHeap) Len() int { return len(h) }

// Less orders by deadline; equal deadlines by creation sequence, so the
// order never depends on how the heap was built.
func (h timerHeap) Less(i, j int) bool {
	if h[i].due != h[j].due {
		return h[i].due < h[j].due
	}
	return h[i].seq < h[j].seq
}

// Swap exchanges two entries and keeps their slots in the QPs.
func (h timerHeap) Swap(i, j int) {
	h[i], h[j] = h[j], h[i]
	h[i].slot, h[j].slot = i, j
}

// Push appends a QP (container/heap then sifts it up).
func (h *timerHeap) Push(x any) {
	qp := x.(*QP)
	qp.slot = len(*h)
	*h = append(*h, qp)
}

// Pop removes the last entry (container/heap has moved the minimum
// there); the slot it leaves is cleared so the heap keeps no dead QP.
func (h *timerHeap) Pop() any {
	old := *h
	n := len(old) - 1
	qp := old[n]
	old[n] = nil
	qp.slot = -1
	*h = old[:n]
	return qp
}

// timerDue is the QP's next timer deadline: the earlier of its ACK
// timeout and RNR wait, or sim.Never for a QP in RESET or ERR, whose
// timers do not run (what NextDeadline skipped when it scanned).
func timerDue(qp *QP) sim.Time {
	if qp.dead || qp.state == QPStateErr || qp.state == QPStateReset {
		return sim.Never
	}
	return min(qp.req.ackDue, qp.req.rnrUntil)
}

// retime brings qp's place in the timer heap up to date after its
// deadlines or its state changed.
func (d *Device) retime(qp *QP) {
	due := timerDue(qp)
	switch {
	case qp.slot < 0 && due == sim.Never:
	case qp.slot < 0:
		qp.due = due
		heap.Push(&d.timers, qp)
	case due == sim.Never:
		heap.Remove(&d.timers, qp.slot)
	case due != qp.due:
		qp.due = due
		heap.Fix(&d.timers, qp.slot)
	}
}

// NextDeadline returns when Advance must next be called: the earliest ACK
// timeout or RNR wait of any QP, or sim.Never.
func (d *Device) NextDeadline() sim.Time {
	if len(d.timers) == 0 {
		return sim.Never
	}
	return d.timers[0].due
}

// Advance runs the timers due at now: for each QP with one due, in
// creation order, the RNR wait's end, then the ACK timeout if still due.
func (d *Device) Advance(now sim.Time) {
	due := d.due[:0]
	for len(d.timers) > 0 && d.timers[0].due <= now {
		due = append(due, heap.Pop(&d.timers).(*QP))
	}
	slices.SortFunc(due, func(a, b *QP) int { return cmp.Compare(a.seq, b.seq) })
	for _, qp := range due {
		if qp.state != QPStateErr && qp.state != QPStateReset {
			r := &qp.req
			if r.rnrUntil <= now {
				d.timerState(now, qp, compRNRRetry)
			}
			if r.ackDue <= now && qp.state != QPStateErr {
				d.timerState(now, qp, compErrorRetry)
			}
		}
		d.retime(qp) // back in the heap if a timer is still (or again) set
	}
	clear(due)
	d.due = due[:0]
}
