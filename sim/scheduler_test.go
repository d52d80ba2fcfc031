package sim_test

import (
	"errors"
	"fmt"
	"math/rand/v2"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/rocesim/rocesim/sim"
)

// recorder remembers the events it was fired with.
type recorder struct {
	got []fired
}

type fired struct {
	at  sim.Time
	arg uint64
}

func (r *recorder) Fire(now sim.Time, arg uint64) { r.got = append(r.got, fired{now, arg}) }

func TestEqualTimesFireInInsertionOrder(t *testing.T) {
	s := sim.NewScheduler()
	var r recorder
	for i := range uint64(50) {
		s.Schedule(100, &r, i)
	}
	s.Schedule(50, &r, 1000)
	require.NoError(t, s.Run())
	require.Len(t, r.got, 51)
	assert.Equal(t, fired{50, 1000}, r.got[0])
	for i := range 50 {
		assert.Equal(t, fired{100, uint64(i)}, r.got[i+1])
	}
	assert.Equal(t, sim.Time(100), s.Now())
}

func TestCancelledTimerNeverFires(t *testing.T) {
	s := sim.NewScheduler()
	var r recorder
	keep := s.Schedule(10, &r, 1)
	gone := s.Schedule(20, &r, 2)
	s.Schedule(30, &r, 3)
	assert.True(t, gone.Pending())
	assert.True(t, gone.Cancel())
	assert.False(t, gone.Pending())
	assert.False(t, gone.Cancel(), "second cancel is a no-op")
	require.NoError(t, s.Run())
	assert.Equal(t, []fired{{10, 1}, {30, 3}}, r.got)
	assert.False(t, keep.Cancel(), "a fired timer cannot be cancelled")
	var zero sim.Timer
	assert.False(t, zero.Cancel())
	assert.False(t, zero.Pending())
}

// TestStaleTimerDoesNotCancelSlotReuse checks that a Timer whose event
// fired cannot cancel a later event that reuses its slot.
func TestStaleTimerDoesNotCancelSlotReuse(t *testing.T) {
	s := sim.NewScheduler()
	var r recorder
	old := s.Schedule(1, &r, 1)
	require.True(t, s.Step())
	fresh := s.Schedule(5, &r, 2) // reuses the slot
	assert.False(t, old.Cancel())
	assert.True(t, fresh.Pending())
	require.NoError(t, s.Run())
	assert.Equal(t, []fired{{1, 1}, {5, 2}}, r.got)
}

// TestCancelKeepsHeapOrder cancels from the middle of a large heap and
// checks the rest still fires in (time, insertion) order.
func TestCancelKeepsHeapOrder(t *testing.T) {
	s := sim.NewScheduler()
	var r recorder
	var timers []sim.Timer
	for i := range uint64(200) {
		timers = append(timers, s.Schedule(sim.Time((i*7919)%97), &r, i))
	}
	for i := 0; i < 200; i += 3 {
		require.True(t, timers[i].Cancel())
	}
	require.NoError(t, s.Run())
	require.Len(t, r.got, 200-67)
	for i := 1; i < len(r.got); i++ {
		a, b := r.got[i-1], r.got[i]
		require.True(t, a.at < b.at || a.at == b.at && a.arg < b.arg, "%v before %v", a, b)
		require.NotZero(t, b.arg%3, "cancelled event %d fired", b.arg)
	}
}

func TestRunUntilAndStep(t *testing.T) {
	s := sim.NewScheduler()
	var r recorder
	s.Schedule(10, &r, 1)
	s.Schedule(20, &r, 2)
	s.Schedule(30, &r, 3)
	require.NoError(t, s.RunUntil(20))
	assert.Equal(t, []fired{{10, 1}, {20, 2}}, r.got)
	assert.Equal(t, sim.Time(20), s.Now())
	require.NoError(t, s.RunUntil(25))
	assert.Equal(t, sim.Time(25), s.Now(), "RunUntil advances the clock to its bound")
	assert.Equal(t, sim.Time(30), s.NextAt())
	assert.True(t, s.Step())
	assert.False(t, s.Step())
	assert.Equal(t, sim.Never, s.NextAt())
	// Scheduling in the past means "now".
	s.Schedule(1, &r, 4)
	require.NoError(t, s.Run())
	assert.Equal(t, fired{30, 4}, r.got[len(r.got)-1])
}

// pinger reschedules itself forever: a livelock.
type pinger struct{ s *sim.Scheduler }

func (p *pinger) Fire(now sim.Time, arg uint64) { p.s.After(0, p, arg) }

func TestEventLimitEndsLivelock(t *testing.T) {
	s := sim.NewScheduler()
	s.SetEventLimit(1000)
	s.Schedule(0, &pinger{s}, 0)
	err := s.Run()
	require.Error(t, err)
	assert.True(t, errors.Is(err, sim.ErrEventLimit))
	assert.Contains(t, err.Error(), "1000 events fired")
	assert.Equal(t, uint64(1000), s.Fired())
}

func TestStop(t *testing.T) {
	s := sim.NewScheduler()
	var n int
	h := sim.HandlerFunc(func(now sim.Time, arg uint64) {
		n++
		if arg == 2 {
			s.Stop()
		}
	})
	for i := range uint64(5) {
		s.Schedule(sim.Time(i), h, i)
	}
	require.NoError(t, s.Run())
	assert.Equal(t, 3, n)
	require.NoError(t, s.Run())
	assert.Equal(t, 5, n)
}

func TestSeedsStreams(t *testing.T) {
	a1, a2 := sim.NewSeeds(7).Stream("faults"), sim.NewSeeds(7).Stream("faults")
	b := sim.NewSeeds(7).Stream("swarm")
	c := sim.NewSeeds(8).Stream("faults")
	var sa1, sa2, sb, sc []uint64
	for range 8 {
		sa1, sa2, sb, sc = append(sa1, a1.Uint64()), append(sa2, a2.Uint64()), append(sb, b.Uint64()), append(sc, c.Uint64())
	}
	assert.Equal(t, sa1, sa2, "same seed and name, same stream")
	assert.NotEqual(t, sa1, sb, "names give independent streams")
	assert.NotEqual(t, sa1, sc, "seeds give different streams")
}

func TestTraceText(t *testing.T) {
	var tr *sim.Trace
	tr.Add(sim.Event{Kind: "x"}) // a nil trace records nothing
	assert.False(t, tr.Enabled())
	assert.Empty(t, tr.Text())

	tr = &sim.Trace{}
	var hooked int
	tr.Hook = func(*sim.Event) { hooked++ }
	tr.Add(sim.Event{Time: 12288, Node: "a", QPN: 0x11, HasQPN: true, Kind: "frame-tx",
		Fields: []sim.Field{{"opcode", "RC_SEND_ONLY"}, {"psn", "2"}}})
	tr.Add(sim.Event{Time: 3 * sim.Time(sim.Millisecond), Kind: "link-down",
		Fields: []sim.Field{{"rule", "4"}, {"why", "down link=a-b from=3ms"}, {"empty", ""}}})
	assert.Equal(t, 2, hooked)
	assert.Equal(t, "12.288µs a frame-tx qp=0x000011 opcode=RC_SEND_ONLY psn=2\n"+
		"3ms - link-down rule=4 why=\"down link=a-b from=3ms\" empty=\"\"\n", tr.Text())
	v, ok := tr.Events()[0].Get("psn")
	assert.True(t, ok)
	assert.Equal(t, "2", v)
}

// TestReservedEventsFireInTheirPlace holds that an event scheduled through
// a ticket fires exactly where it would have fired had it been scheduled
// when the ticket was taken, ties at the same time included, and that
// Pending counts it meanwhile while the heap does not hold it.
func TestReservedEventsFireInTheirPlace(t *testing.T) {
	// The reference: every event scheduled at once, in this order.
	plan := []sim.Time{100, 100, 50, 100, 200, 100, 50}
	ref := sim.NewScheduler()
	var want recorder
	for i, at := range plan {
		ref.Schedule(at, &want, uint64(i))
	}
	require.NoError(t, ref.Run())

	// The same, with the events at 100 reserved and handed to the heap
	// one at a time, each when the one before it fires (as a link does).
	s := sim.NewScheduler()
	var got recorder
	var tickets []sim.Ticket
	var args []uint64
	var chain sim.HandlerFunc
	chain = func(now sim.Time, arg uint64) {
		got.Fire(now, arg)
		if len(tickets) > 0 {
			s.ScheduleTicket(tickets[0], chain, args[0])
			tickets, args = tickets[1:], args[1:]
		}
	}
	for i, at := range plan {
		if at == 100 {
			tickets = append(tickets, s.Reserve(at))
			args = append(args, uint64(i))
			continue
		}
		s.Schedule(at, &got, uint64(i))
	}
	assert.Equal(t, len(plan), s.Pending())
	assert.Equal(t, 3, s.Queued())
	s.ScheduleTicket(tickets[0], chain, args[0])
	tickets, args = tickets[1:], args[1:]
	assert.Equal(t, 4, s.Queued())
	require.NoError(t, s.Run())
	assert.Equal(t, want.got, got.got)
	assert.Equal(t, 0, s.Pending())

	// A ticket handed in after the clock passed its place is a bug.
	late := s.Reserve(s.Now() + 10)
	s.Schedule(s.Now()+20, &got, 99)
	require.NoError(t, s.Run())
	assert.Panics(t, func() { s.ScheduleTicket(late, &got, 0) })
}

// refEvent is an event of the reference queue in
// TestSchedulerMatchesReference.
type refEvent struct {
	at    sim.Time
	order uint64 // when it was scheduled, or its ticket taken
	id    uint64
	timer sim.Timer // zero while reserved and not yet scheduled
	chain bool      // reserved: a link's arrival, never cancelled
	live  bool      // pending in the reference (not fired, not cancelled)
	index int       // in the reference's list of pending events
}

// TestSchedulerMatchesReference drives the scheduler with long random
// mixes of Schedule, Reserve and ScheduleTicket (a chain of reserved
// arrivals, each handed to the heap when the one before fires, as a link
// does), Cancel (of pending, fired and cancelled timers), Step, RunUntil
// and handlers that schedule and cancel from inside Fire, at heap sizes
// from a handful to thousands and with many equal times. It checks every
// firing, NextAt, Pending, Queued and every Timer's Pending and At
// against a reference that scans a list for the least (time, scheduling
// order).
func TestSchedulerMatchesReference(t *testing.T) {
	for seed := range uint64(8) {
		rng := rand.New(rand.NewPCG(seed, 0x5eed))
		s := sim.NewScheduler()
		var (
			evs     []*refEvent // every event made, by id
			pending []*refEvent // the live ones, in no order
			order   uint64
			chain   []*refEvent // reserved, in order; the first is in the heap
			tickets []sim.Ticket
			fired   int
			peak    int
		)
		// next is the reference's earliest pending event.
		next := func() *refEvent {
			var best *refEvent
			for _, ev := range pending {
				if best == nil || ev.at < best.at || ev.at == best.at && ev.order < best.order {
					best = ev
				}
			}
			return best
		}
		later := func() sim.Time {
			switch rng.IntN(8) {
			case 0:
				return s.Now() // ties with the current time
			case 1:
				return s.Now() - sim.Time(rng.IntN(3)) // the past means now
			case 2:
				return s.Now() + sim.Time(rng.IntN(100_000)) // a timer
			default:
				return s.Now() + sim.Time(rng.IntN(50))
			}
		}
		add := func(at sim.Time) *refEvent {
			ev := &refEvent{at: max(at, s.Now()), order: order, id: uint64(len(evs)), live: true, index: len(pending)}
			order++
			evs, pending = append(evs, ev), append(pending, ev)
			return ev
		}
		gone := func(ev *refEvent) {
			ev.live = false
			last := pending[len(pending)-1]
			pending[ev.index], last.index = last, ev.index
			pending = pending[:len(pending)-1]
		}
		var h sim.HandlerFunc
		schedule := func() {
			ev := add(later())
			ev.timer = s.Schedule(ev.at, h, ev.id)
		}
		reserve := func() {
			at := later()
			if n := len(chain); n > 0 {
				at = max(at, chain[n-1].at)
			}
			ev := add(at)
			ev.chain = true
			tk := s.Reserve(at)
			require.Equal(t, ev.at, tk.At())
			chain, tickets = append(chain, ev), append(tickets, tk)
			if len(chain) == 1 {
				ev.timer = s.ScheduleTicket(tk, h, ev.id)
			}
		}
		cancel := func() {
			if len(evs) == 0 {
				return
			}
			ev := evs[rng.IntN(len(evs))]
			if ev.chain && ev.live {
				return
			}
			require.Equal(t, ev.live, ev.timer.Cancel(), "seed %d: cancel of event %d", seed, ev.id)
			if ev.live {
				gone(ev)
			}
			require.False(t, ev.timer.Cancel())
		}
		h = func(now sim.Time, id uint64) {
			fired++
			want := next()
			require.NotNil(t, want, "seed %d: event %d fired, none due", seed, id)
			require.Equal(t, want.id, id, "seed %d: fired %d, the reference %d", seed, id, want.id)
			require.Equal(t, want.at, now)
			require.Equal(t, now, s.Now())
			gone(want)
			require.False(t, want.timer.Pending(), "a firing event is no longer pending")
			if want.chain {
				require.Same(t, chain[0], want)
				chain, tickets = chain[1:], tickets[1:]
				if len(chain) > 0 {
					chain[0].timer = s.ScheduleTicket(tickets[0], h, chain[0].id)
				}
			}
			// Handlers schedule, reserve and cancel too, as the fabric
			// and the hosts do.
			for range rng.IntN(3) {
				switch rng.IntN(5) {
				case 0, 1, 2:
					schedule()
				case 3:
					cancel()
				case 4:
					reserve()
				}
			}
		}
		check := func(full bool) {
			queued := 0
			for _, ev := range pending {
				if !full {
					break
				}
				if ev.timer != (sim.Timer{}) {
					queued++
					if at := ev.timer.At(); !ev.timer.Pending() || at != ev.at {
						t.Fatalf("seed %d: event %d for %v: Pending %v, At %v", seed, ev.id, ev.at, ev.timer.Pending(), at)
					}
				}
			}
			peak = max(peak, len(pending))
			// Some of the fired and cancelled, whose slots may have
			// been reused since.
			for range min(20, len(evs)) {
				if ev := evs[rng.IntN(len(evs))]; !ev.live {
					require.False(t, ev.timer.Pending(), "seed %d: event %d", seed, ev.id)
					require.Equal(t, sim.Never, ev.timer.At())
				}
			}
			if full {
				require.Equal(t, queued, s.Queued())
			}
			require.Equal(t, len(pending), s.Pending())
			if b := next(); b != nil {
				require.Equal(t, b.at, s.NextAt())
			} else {
				require.Equal(t, sim.Never, s.NextAt())
			}
		}
		// target is about how many events are pending: it moves between
		// a handful and thousands through the run.
		target := 0
		for step := range 6000 {
			if step%500 == 0 {
				target = []int{3, 40, 700, 2500}[rng.IntN(4)]
			}
			r := rng.IntN(10)
			if s.Pending() < target {
				r -= 4 // grow: more schedules, fewer steps
			}
			switch {
			case r < 2:
				schedule()
			case r < 3:
				cancel()
			case r < 4:
				reserve()
			case r < 5:
				until := s.Now() + sim.Time(rng.IntN(5))
				require.NoError(t, s.RunUntil(until))
				if b := next(); b != nil {
					require.Greater(t, b.at, until, "seed %d: RunUntil(%v) left event %d", seed, until, b.id)
				}
				require.Equal(t, until, s.Now())
			default:
				before := fired
				require.Equal(t, next() != nil, s.Step())
				require.LessOrEqual(t, fired-before, 1)
			}
			check(step%16 == 0 || len(pending) < 64)
		}
		require.NoError(t, s.Run())
		check(true)
		require.Equal(t, 0, s.Pending())
		require.Nil(t, next())
		t.Logf("seed %d: %d events, %d fired, at most %d pending", seed, len(evs), fired, peak)
	}
}

// TestLargeHeapOrder keeps some 50,000 events pending (past the size at
// which the heap picks among children with a branch, branchyHeap) while
// firing 100,000, scheduling one new and cancelling one old every few
// steps, and checks that events fire in (time, scheduling order), each
// once, and every one not cancelled.
func TestLargeHeapOrder(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	s := sim.NewScheduler()
	var (
		timers []sim.Timer
		ats    []sim.Time
		done   []bool // fired or cancelled
		last   struct {
			at  sim.Time
			seq uint64
		}
		n int
	)
	var h sim.HandlerFunc = func(now sim.Time, seq uint64) {
		if now < last.at || now == last.at && seq < last.seq && n > 0 {
			t.Fatalf("event %d at %v fired after event %d at %v", seq, now, last.seq, last.at)
		}
		if done[seq] || ats[seq] != now {
			t.Fatalf("event %d for %v fired at %v (done %v)", seq, ats[seq], now, done[seq])
		}
		done[seq] = true
		last.at, last.seq = now, seq
		n++
	}
	add := func() {
		at := s.Now() + sim.Time(rng.IntN(5000)) // many equal times
		timers = append(timers, s.Schedule(at, h, uint64(len(timers))))
		ats, done = append(ats, at), append(done, false)
	}
	for range 50_000 {
		add()
	}
	cancelled := 0
	for i := 0; n < 100_000; i++ {
		require.True(t, s.Step())
		if i%4 != 3 {
			add()
		}
		if i%8 == 0 {
			if k := rng.IntN(len(timers)); timers[k].Cancel() {
				require.False(t, done[k])
				done[k] = true
				cancelled++
			}
		}
	}
	require.Greater(t, cancelled, 5000)
	require.NoError(t, s.Run())
	for k, d := range done {
		require.True(t, d, "event %d never fired", k)
	}
	require.Equal(t, len(timers), n+cancelled)
}

// TestQueueAndHeapAgree runs the reference tests with the pending events
// moving between the heap and the radix queue every few events (the
// bounds at 8 and 2, then 3 and 1), with every event in the queue from
// the second on, and with the queue giving way to the heap past 40: the
// order must be the reference's whichever holds them, and across every
// move.
func TestQueueAndHeapAgree(t *testing.T) {
	for _, b := range [][3]int{{8, 2, 1 << 30}, {3, 1, 1 << 30}, {1, 0, 1 << 30}, {8, 2, 40}} {
		t.Run(fmt.Sprintf("above%d-below%d-max%d", b[0], b[1], b[2]), func(t *testing.T) {
			defer sim.SetQueueBounds(b[0], b[1])()
			defer sim.SetQueueMax(b[2])()
			t.Run("reference", TestSchedulerMatchesReference)
			t.Run("large", TestLargeHeapOrder)
			t.Run("reserved", TestReservedEventsFireInTheirPlace)
			t.Run("cancel", TestCancelKeepsHeapOrder)
			t.Run("equal", TestEqualTimesFireInInsertionOrder)
			t.Run("stale", TestStaleTimerDoesNotCancelSlotReuse)
			t.Run("until", TestRunUntilAndStep)
		})
	}
}

// TestSchedulerMovesToTheQueue: a scheduler holds its events in the heap
// while few are pending, in the radix queue past radixAbove, and in the
// heap again under heapBelow, and fires them in order throughout.
func TestSchedulerMovesToTheQueue(t *testing.T) {
	defer sim.SetQueueBounds(16, 4)()
	s := sim.NewScheduler()
	var got []uint64
	h := sim.HandlerFunc(func(_ sim.Time, arg uint64) { got = append(got, arg) })
	for i := range 17 {
		s.Schedule(sim.Time(100-i), h, uint64(i)) // latest first
	}
	if !s.InQueue() {
		t.Fatalf("17 pending, bound 16: still in the heap")
	}
	for s.Queued() >= 4 {
		s.Step()
	}
	if s.InQueue() {
		t.Fatalf("%d pending, bound 4: still in the queue", s.Queued())
	}
	if err := s.Run(); err != nil {
		t.Fatal(err)
	}
	for i, arg := range got {
		if arg != uint64(16-i) {
			t.Fatalf("fired %v, want 16 down to 0", got)
		}
	}
	if len(got) != 17 {
		t.Fatalf("fired %d events, want 17", len(got))
	}
}

// TestManyEventsAtOneInstant: 200,000 events scheduled for one instant
// (a program posting in a loop at time 0), with more scheduled for it as
// they fire, fire in the order they were scheduled. In the radix queue
// they all share bucket 0, which an event for its own instant joins at
// the end (kept earliest last, as at first, each joined at the front:
// quadratic, 24 s for this test). A quadratic queue would not fail an
// assertion, only run long: the test bounds its own wall time to 5 s
// (it takes 0.04 s, 0.4 s under the race detector; the quadratic queue
// took 24 s, and would take less on a faster machine) and stops there
// with what it suspects, rather than leaving it to go test's timeout.
func TestManyEventsAtOneInstant(t *testing.T) {
	s := sim.NewScheduler()
	const n = 200_000
	const bound = 5 * time.Second
	start := time.Now()
	overrun := func(what string, i uint64) {
		if i%1024 == 0 && time.Since(start) > bound {
			t.Fatalf("%s %d of %d took over %v: is scheduling at one instant no longer linear?", what, i, n, bound)
		}
	}
	next := uint64(0)
	var h sim.HandlerFunc
	h = func(now sim.Time, arg uint64) {
		if arg != next || now != 0 {
			t.Fatalf("event %d fired at %v, want event %d at 0", arg, now, next)
		}
		overrun("firing event", next)
		next++
		if arg < 1000 {
			s.Schedule(now, h, arg+n) // joins the instant, after the rest
		}
	}
	for i := range uint64(n) {
		overrun("scheduling event", i)
		s.Schedule(0, h, i) // the clock's own instant
	}
	if !s.InQueue() {
		t.Fatalf("%d pending: not in the radix queue", s.Queued())
	}
	require.NoError(t, s.Run())
	if next != n+1000 {
		t.Fatalf("%d events fired, want %d", next, n+1000)
	}
}

// TestQueueGivesWayToTheHeap: past queueMax pending events the scheduler
// holds them in the heap, which has no bound, and takes them back into
// the queue only under half of it; the order holds throughout.
func TestQueueGivesWayToTheHeap(t *testing.T) {
	defer sim.SetQueueBounds(4, 1)()
	defer sim.SetQueueMax(16)()
	s := sim.NewScheduler()
	var got []uint64
	h := sim.HandlerFunc(func(_ sim.Time, arg uint64) { got = append(got, arg) })
	at := func(i int) sim.Time { return sim.Time((i * 37) % 101) }
	for i := range 16 {
		s.Schedule(at(i), h, uint64(i))
	}
	if !s.InQueue() {
		t.Fatalf("16 pending, bounds 4 and 16: not in the queue")
	}
	for i := 16; i < 40; i++ {
		s.Schedule(at(i), h, uint64(i))
	}
	if s.InQueue() {
		t.Fatalf("40 pending, at most 16 in the queue: still in it")
	}
	require.NoError(t, s.Run())
	require.Len(t, got, 40)
	for k := 1; k < len(got); k++ {
		a, b := got[k-1], got[k]
		if at(int(a)) > at(int(b)) || at(int(a)) == at(int(b)) && a > b {
			t.Fatalf("fired %d (at %v) before %d (at %v)", a, at(int(a)), b, at(int(b)))
		}
	}
}

// TestOneInstantStaysBounded: events that keep scheduling their
// successor for the clock's own instant (a zero-delay loop, 16 live at a
// time, 500,000 in all) fire in order while bucket 0's storage, taken
// entries included, stays within four times the live ones: the bound
// queueMax relies on for its indices to fit. Without the compaction in
// insertZero it would hold all 500,000.
func TestOneInstantStaysBounded(t *testing.T) {
	defer sim.SetQueueBounds(8, 2)()
	s := sim.NewScheduler()
	const live, total = 16, 500_000
	next, most := uint64(0), 0
	var h sim.HandlerFunc
	h = func(_ sim.Time, arg uint64) {
		if arg != next {
			t.Fatalf("event %d fired, want %d", arg, next)
		}
		next++
		if arg+live < total {
			s.Schedule(s.Now(), h, arg+live)
		}
		most = max(most, s.ZeroStorage())
	}
	for i := range uint64(live) {
		s.Schedule(0, h, i)
	}
	require.True(t, s.InQueue())
	require.NoError(t, s.Run())
	require.Equal(t, uint64(total), next)
	if most > 4*live {
		t.Fatalf("bucket 0 held %d entries, taken ones included, for %d live", most, live)
	}
}
