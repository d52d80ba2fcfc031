package procfabric

import (
	"context"
	"errors"

	"github.com/rocesim/rocesim/sim"
)

// Holding the clock from outside: a driver in the daemon's own process
// (the conformance suite's C-ABI leg) runs programs step by step at
// given virtual instants, as the real-rxe rig holds its fault switch's
// plan clock while a console line is done (conformance's Switch.Hold).
//
// Hold(t) lets the clock run to t and no further. It returns once the
// clock stands at t, every attached process waits, and every one has
// been woken at t since the call (so each process's world has run to t:
// a verb it is then made to call happens at t, and its timers were
// armed from t), with nothing left to happen at t. A process that the
// driver then makes call a verb wakes at t (resume) and its frames enter
// the fabric at t; the next Hold wakes every waiting process at the
// current instant once more before the clock moves, so a resume that is
// still in the socket when Hold is called cannot let the clock pass the
// frames it announces. Hold(sim.Never) runs until nothing is left to
// happen (or Config.Deadline). Without a Hold the daemon runs as before.

// ErrClosed is returned by Hold when the daemon stops first.
var ErrClosed = errors.New("procfabric: the daemon stopped")

// Hold lets the clock run to t, no further, and waits until the fabric
// stands there with every process waiting (see above). It returns the
// clock's time. The hold stays until the next Hold.
func (d *Daemon) Hold(ctx context.Context, t sim.Time) (sim.Time, error) {
	reached := make(chan sim.Time, 1)
	f := func() {
		d.holding, d.holdAt, d.reached = true, t, reached
		for _, s := range d.slots {
			s.at = -1 // wake each once more before the clock moves
		}
	}
	select {
	case d.ctl <- f:
	case <-ctx.Done():
		return 0, ctx.Err()
	case <-d.quit:
		return 0, ErrClosed
	}
	select {
	case now := <-reached:
		return now, nil
	case <-ctx.Done():
		return 0, ctx.Err()
	case <-d.quit:
		return 0, ErrClosed
	}
}

// held is round's step under a Hold, when every process waits and the
// next thing to happen is at next: it reports whether the clock must
// stand. A Hold's first round wakes every process once at the current
// instant, before anything else happens (the resume of a process the
// driver just made call a verb may still be in its socket: its frames
// must enter the fabric now, not after the clock moved). Then the
// fabric runs as usual up to the hold's time; there the clock moves to
// it if nothing happens before, every process not yet woken at this
// instant is, and Hold is told once all have been and wait again.
func (d *Daemon) held(next sim.Time) bool {
	if !d.holding {
		return false
	}
	now := d.sched.Now()
	if d.wakeWhere(now, func(s *slot) bool { return s.at < 0 }) {
		return true
	}
	if next <= d.holdAt && next != sim.Never {
		return false
	}
	if d.holdAt != sim.Never && now < d.holdAt {
		d.sched.RunUntil(d.holdAt) // nothing is due before: cannot fail
		now = d.holdAt
	}
	// Input held as a process's slack (a tx-done at this instant) is
	// input all the same: the hold is reached once none is left.
	if d.wakeWhere(now, func(s *slot) bool { return s.at != now || len(s.pending) > 0 }) {
		return true
	}
	if d.reached != nil {
		d.reached <- now
		d.reached = nil
	}
	return true
}

// wakeWhere wakes, at now, every attached process for which f holds, and
// reports whether there was one.
func (d *Daemon) wakeWhere(now sim.Time, f func(*slot) bool) bool {
	woke := false
	for _, s := range d.slots {
		if s.c != nil && f(s) {
			d.wake(s, now)
			woke = true
		}
	}
	return woke
}
