package procfabric

import (
	"slices"
	"testing"
	"time"

	"github.com/rocesim/rocesim/sim"
)

// TestHold: a Hold stops the clock at its time even when a process's
// deadline lies beyond it, wakes every process at that instant (so each
// has run to it), and the next Hold wakes every process where the clock
// stands before it lets it go on to the process's deadline and stop
// again; Hold(sim.Never) returns once nothing is left.
func TestHold(t *testing.T) {
	ctx := bound(t, 30*time.Second)
	// Held from the start: otherwise the clock could run to b's timer
	// before the first Hold reaches the daemon (Hold(5ms) = 7ms).
	d, _ := testDaemon(t, ctx, Config{Held: true})
	type wake struct {
		node string
		at   sim.Time
	}
	wakes := make(chan wake, 64)
	for _, n := range []string{"a", "b"} {
		p, err := AttachDir(d.cfg.Dir, d.cfg.Name, n)
		if err != nil {
			t.Fatal(err)
		}
		defer p.Close()
		deadline := sim.Never
		if n == "b" {
			deadline = sim.Time(7 * sim.Millisecond) // a timer
		}
		go func() {
			for {
				in, err := p.Wait(deadline)
				if err != nil {
					return
				}
				if in.Now >= deadline {
					deadline = sim.Never // the timer fired
				}
				wakes <- wake{n, in.Now}
			}
		}()
	}
	ms := func(n int) sim.Time { return sim.Time(sim.Duration(n) * sim.Millisecond) }
	check := func(hold, want sim.Time, woken ...wake) {
		t.Helper()
		got, err := d.Hold(ctx, hold)
		if err != nil || got != want {
			t.Fatalf("Hold(%v) = %v, %v; want %v", hold, got, err, want)
		}
		var seen []wake
		for len(wakes) > 0 {
			seen = append(seen, <-wakes)
		}
		for _, w := range woken {
			found := false
			for _, s := range seen {
				found = found || s == w
			}
			if !found {
				t.Errorf("Hold(%v): woken %v, want %v among them", hold, seen, w)
			}
		}
	}
	check(ms(5), ms(5), wake{"a", ms(5)}, wake{"b", ms(5)})
	// Before the clock moves, both are woken once more where it stands
	// (a resume still in a socket when Hold is called must not let the
	// clock pass the frames it announces); b's timer (7ms) comes before
	// the hold: b is woken there, then both at the hold's 10ms.
	check(ms(10), ms(10), wake{"a", ms(5)}, wake{"b", ms(5)}, wake{"b", ms(7)}, wake{"a", ms(10)}, wake{"b", ms(10)})
	check(sim.Never, ms(10), wake{"a", ms(10)}, wake{"b", ms(10)})
}

// TestHeldFromTheStart: a daemon made with Held keeps its clock at 0
// however the processes wait (b with a timer at 7 ms) until a driver's
// first Hold lets it go; without Held, the same waits run it to b's
// timer at once. The conformance suite's C-ABI leg prepares its agents
// so: a fault plan's link cut at 50 ms came before its step at 0 when
// both agents, idle between two commands, waited (seen in CI).
func TestHeldFromTheStart(t *testing.T) {
	for _, held := range []bool{false, true} {
		ctx := bound(t, 30*time.Second)
		d, _ := testDaemon(t, ctx, Config{Held: held})
		a, b := attachAB(t, d)
		timer := sim.Time(0).Add(7 * sim.Millisecond)
		woken := make(chan sim.Time, 64)
		go func() {
			for deadline := timer; ; {
				in, err := b.Wait(deadline)
				if err != nil {
					return
				}
				if in.Now >= deadline {
					deadline = sim.Never
				}
				woken <- in.Now
			}
		}()
		go waitOn(a)
		select {
		case at := <-woken:
			if held {
				t.Fatalf("held: b woken at %v before any Hold", at)
			}
			if at != timer {
				t.Errorf("not held: b woken at %v, want its timer %v", at, timer)
			}
			continue
		case <-time.After(200 * time.Millisecond):
			if !held {
				t.Fatal("not held: b's timer never fired")
			}
		}
		if now, err := d.Hold(ctx, timer); err != nil || now != timer {
			t.Fatalf("Hold(%v) = %v, %v", timer, now, err)
		}
	}
}

// TestHoldTakesSlack: a tx-done a process's wait left with the daemon
// as its slack, at the hold's own instant, is input like any other: the
// hold is reached only once the process has been woken with it, so a
// driver that then acts on the process finds its device up to date.
func TestHoldTakesSlack(t *testing.T) {
	ctx := bound(t, 30*time.Second)
	d, _ := testDaemon(t, ctx, Config{Held: true})
	a, b := attachAB(t, d)
	go waitOn(b)
	at := sim.Time(5 * sim.Millisecond)
	woken := make(chan *Inputs, 8)
	go func() {
		for sent := false; ; {
			in, err := a.Wait(sim.Never)
			if err != nil {
				return
			}
			if sent {
				// A copy: the next Wait reuses the Inputs.
				woken <- &Inputs{Events: slices.Clone(in.Events), Now: in.Now}
			}
			if in.Now == at && !sent {
				// Woken at the hold's instant: a frame, whose tx-done
				// comes at once, left as slack.
				sent = true
				a.Send(frameTo(a, b), nil)
				a.SetTxSlack(1)
			}
		}
	}()
	if now, err := d.Hold(ctx, at); err != nil || now != at {
		t.Fatalf("Hold(%v) = %v, %v", at, now, err)
	}
	select {
	case in := <-woken:
		if len(in.Events) != 1 || in.Events[0].Frame != nil || in.Events[0].At != at || in.Now != at {
			t.Errorf("woken again with %+v at %v, want the tx-done at %v", in.Events, in.Now, at)
		}
	case <-time.After(5 * time.Second):
		t.Errorf("Hold reached %v with a's tx-done still held", at)
	}
}
