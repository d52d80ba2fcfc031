package verbstest

import (
	"fmt"
	"time"

	"github.com/rocesim/rocesim/sim"
	"github.com/rocesim/rocesim/verbs"
)

// Running virtual time
//
// Each Run, Await and Require method steps the simulation one instant at
// a time (every event due at that instant), and after each instant calls
// the world's pollers in the order they were added: the application's
// busy-polling loops. A method fails the test when its budget of virtual
// time (Options.Limit) runs out before its condition holds, or when
// nothing is left to happen and the condition cannot hold any more.

// Poller is an application loop the world runs: a function that polls its
// CQs and reacts (posts receives, answers requests), as a thread spinning
// on ibv_poll_cq would. It costs no virtual time.
type Poller struct {
	w       *World
	name    string
	fn      func()
	until   sim.Time // paused until then
	stopped bool
}

// Poll adds fn as a poller named name (the name appears in the trace
// when it is paused). fn runs after every instant in which something
// happened, and once at the start of each Run, Await or Require call.
func (w *World) Poll(name string, fn func()) *Poller {
	p := &Poller{w: w, name: name, fn: fn}
	w.pollers = append(w.pollers, p)
	return p
}

// Pause stops the poller for d of virtual time from now, as if its thread
// were descheduled: whatever it would have done (re-post receives, answer
// requests) waits. The world wakes at the end of the pause, so the
// poller runs then even if nothing else happens. A d of zero or less does
// nothing.
func (p *Poller) Pause(d sim.Duration) {
	if d <= 0 {
		return
	}
	now := p.w.Now()
	p.until = now.Add(d)
	p.w.trace.Add(sim.Event{Time: now, Node: p.name, Kind: "poller-pause",
		Fields: []sim.Field{{Key: "until", Value: p.until.String()}}})
	p.w.vw.Scheduler().Schedule(p.until, &p.w.wake, 0)
	p.w.loops = append(p.w.loops, reportLine{now, p.name + " paused for " + d.String()})
}

// Stop stops the poller for good: a crashed or hung application.
func (p *Poller) Stop() {
	p.stopped = true
	p.w.trace.Add(sim.Event{Time: p.w.Now(), Node: p.name, Kind: "poller-stop"})
	p.w.loops = append(p.w.loops, reportLine{p.w.Now(), p.name + " stopped"})
}

// After runs fn once d of virtual time from now has passed (while a Run,
// Await or Require call moves time): a step of a scripted workload, such
// as "1 ms from now the server's link goes down" or "at 5 ms the client
// sends another request". The pollers run after fn's instant as after
// any other.
func (w *World) After(d sim.Duration, fn func()) {
	w.vw.Scheduler().After(d, sim.HandlerFunc(func(sim.Time, uint64) { fn() }), 0)
}

// wakeHandler is the event that ends a pause; the step loop runs the
// pollers after it.
type wakeHandler struct{ w *World }

// Fire does nothing: the instant it makes is enough.
func (*wakeHandler) Fire(sim.Time, uint64) {}

// poll runs the pollers that are not paused.
func (w *World) poll() {
	now := w.Now()
	for _, p := range w.pollers {
		if !p.stopped && now >= p.until {
			p.fn()
		}
	}
}

// watchdog is the wall time one wait may take before it fails the test
// whatever its budgets say: a backstop for a world that Limit and
// MaxEvents do not catch (a poller that spins in Go code, not in
// events). The budgets decide deterministically; this never should.
const watchdog = 60 * time.Second

// instantCap bounds the events one instant of virtual time may fire: a
// poller that posts work at every instant, or pauses for nothing, would
// otherwise keep time from moving and never reach the time limit.
const instantCap = 100_000

// runUntil steps instants until done() holds, nothing is left to happen,
// or the next event is past deadline; it reports whether done() held.
// The clock stays at the last instant run. Errors fail the test, naming
// call (the method the test called).
func (w *World) runUntil(call string, deadline sim.Time, done func() bool) bool {
	w.t.Helper()
	s := w.vw.Scheduler()
	instant, fired := w.Now(), s.Fired()
	budget := fired + w.maxEvents
	start, steps := time.Now(), 0
	w.poll()
	for !done() {
		if s.Pending() == 0 || s.NextAt() > deadline {
			return false
		}
		if at := s.NextAt(); at != instant {
			instant, fired = at, s.Fired()
		} else if s.Fired()-fired > instantCap {
			w.fatalf("verbstest: %s: %d events at %v and time does not move: a poller that posts work at every instant?", call, instantCap, instant)
		}
		if s.Fired() >= budget {
			w.fatalf("verbstest: %s: still busy after %d events (Options.MaxEvents) at virtual time %v, %d frames: %s",
				call, w.maxEvents, w.Now(), w.vw.Frames(), w.diagnose())
		}
		if steps++; steps%4096 == 0 && time.Since(start) > watchdog {
			w.fatalf("verbstest: %s: still busy after %v of wall time (the watchdog; Options.MaxEvents should have stopped it first) at virtual time %v, %d events: %s",
				call, watchdog, w.Now(), s.Fired(), w.diagnose())
		}
		if err := s.RunUntil(s.NextAt()); err != nil {
			w.fatalf("verbstest: %s: %v", call, err)
		}
		w.poll()
	}
	return true
}

// RunFor runs d of virtual time: every event due by then, the pollers
// after each instant, and the clock ends exactly d later.
func (w *World) RunFor(d sim.Duration) {
	w.t.Helper()
	end := w.Now().Add(d)
	w.runUntil(fmt.Sprintf("RunFor(%v)", d), end, func() bool { return false })
	if err := w.vw.Scheduler().RunUntil(end); err != nil {
		w.fatalf("verbstest: %v", err)
	}
}

// RunUntilIdle runs until nothing is left to happen: no frame in flight,
// no timer armed, no pause pending. It fails the test if the world is
// still busy after Options.Limit (a QP retrying forever, say).
func (w *World) RunUntilIdle() {
	w.t.Helper()
	deadline := w.Now().Add(w.limit)
	s := w.vw.Scheduler()
	if !w.runUntil("RunUntilIdle", deadline, func() bool { return s.Pending() == 0 }) {
		w.fatalf("verbstest: RunUntilIdle: still busy when its limit of %v of virtual time (Options.Limit) ran out: the next event is at %v: %s",
			w.limit, s.NextAt(), w.diagnose())
	}
}

// RunUntil runs until cond holds, and fails the test, saying what, if it
// does not hold within Options.Limit or before the world falls idle.
func (w *World) RunUntil(what string, cond func() bool) {
	w.t.Helper()
	if !w.runUntil(fmt.Sprintf("RunUntil(%q)", what), w.Now().Add(w.limit), cond) {
		w.fatalf("verbstest: RunUntil(%q): did not happen %s", what, w.stuck())
	}
}

// Await runs until n completions can be polled from cq, polls them and
// returns them in order. It fails the test if they do not come within
// Options.Limit. Do not Await a CQ that a poller also polls.
func (w *World) Await(cq *verbs.CQ, n int) []verbs.WC {
	w.t.Helper()
	if n < 0 {
		w.fatalf("verbstest: Await(%s, %d): n must not be negative", w.cqName(cq), n)
	}
	call := fmt.Sprintf("Await(%s, %d)", w.cqName(cq), n)
	wcs, ok := w.awaitWCs(call, cq, n)
	if !ok {
		w.fatalf("verbstest: %s: %d of %d completions %s%s", call, len(wcs), n, w.stuck(), describeWCs(wcs))
	}
	return wcs
}

// awaitWCs runs until n completions have been polled from cq, or the
// wait ends without them (ok false); it returns those it polled. call
// names the method the test called.
func (w *World) awaitWCs(call string, cq *verbs.CQ, n int) (wcs []verbs.WC, ok bool) {
	w.t.Helper()
	wcs = make([]verbs.WC, 0, n)
	buf := make([]verbs.WC, n)
	ok = w.runUntil(call, w.Now().Add(w.limit), func() bool {
		if len(wcs) < n {
			k := cq.Poll(buf[:n-len(wcs)])
			wcs = append(wcs, buf[:k]...)
		}
		return len(wcs) == n
	})
	return wcs, ok
}
