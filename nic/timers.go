package nic

import (
	"cmp"
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
//     (timerDue) and puts the QP in the heap, moves it or takes it out:
//     only QPs with a deadline are in the heap.
//  2. NextDeadline reads the top of the heap.
//  3. Advance pops every QP due at now, then runs them in creation order
//     (seq), as the scan over the creation-ordered QP list did, so the
//     order of frames, completions and trace lines is unchanged.
//
// Each entry carries its deadline and the QP's creation sequence, so
// comparing two reads no QP: at scale a QP's memory is cold, and a heap
// of bare QP pointers cost a cache miss per comparison each time a WR
// armed or an ACK disarmed a timer (issue 20). Only an entry that moves
// has its QP's slot rewritten.
//
// The heap's slice and the due list are kept between calls: once they
// have grown to the number of QPs with a timer, arming, moving and
// firing allocate nothing.

// timerEntry files a QP in the heap under its deadline and creation
// sequence.
type timerEntry struct {
	due sim.Time
	seq uint64
	qp  *QP
}

// before orders entries by deadline; equal deadlines by creation
// sequence, so the order never depends on how the heap was built.
func (e *timerEntry) before(o *timerEntry) bool {
	if e.due != o.due {
		return e.due < o.due
	}
	return e.seq < o.seq
}

// noSlot is QP.slot of a QP that is not in the heap.
const noSlot = -1

// place records where entry i now sits.
func (d *Device) place(i int) { d.timers[i].qp.slot = int32(i) }

// swapTimers exchanges two entries of the heap.
func (d *Device) swapTimers(i, j int) {
	h := d.timers
	h[i], h[j] = h[j], h[i]
	d.place(i)
	d.place(j)
}

// timerUp sifts entry i towards the top; it reports whether it moved.
func (d *Device) timerUp(i int) bool {
	h := d.timers
	moved := false
	for i > 0 {
		p := (i - 1) / 2
		if !h[i].before(&h[p]) {
			break
		}
		d.swapTimers(i, p)
		i, moved = p, true
	}
	return moved
}

// timerDown sifts entry i away from the top.
func (d *Device) timerDown(i int) {
	h := d.timers
	n := len(h)
	for {
		c := 2*i + 1
		if c >= n {
			return
		}
		if c+1 < n && h[c+1].before(&h[c]) {
			c++
		}
		if !h[c].before(&h[i]) {
			return
		}
		d.swapTimers(i, c)
		i = c
	}
}

// removeTimer takes entry i out of the heap and returns its QP.
func (d *Device) removeTimer(i int) *QP {
	h := d.timers
	e := h[i]
	n := len(h) - 1
	if i != n {
		h[i] = h[n]
		d.place(i)
	}
	h[n] = timerEntry{} // the heap keeps no pointer to a QP it no longer files
	d.timers = h[:n]
	if i != n && !d.timerUp(i) {
		d.timerDown(i)
	}
	e.qp.slot = noSlot
	return e.qp
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
	slot := int(qp.slot)
	switch {
	case slot < 0 && due == sim.Never:
	case slot < 0:
		d.timers = append(d.timers, timerEntry{due: due, seq: qp.seq, qp: qp})
		d.place(len(d.timers) - 1)
		d.timerUp(len(d.timers) - 1)
	case due == sim.Never:
		d.removeTimer(slot)
	case due != d.timers[slot].due:
		d.timers[slot].due = due
		if !d.timerUp(slot) {
			d.timerDown(slot)
		}
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
		due = append(due, d.removeTimer(0))
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
