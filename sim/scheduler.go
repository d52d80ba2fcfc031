package sim

import (
	"errors"
	"fmt"
)

// The event queue, in order of what happens to an event:
//
//  1. Schedule/After puts (time, handler, arg) in a slot of the slab and
//     the slot on a binary heap ordered by (time, insertion sequence), so
//     events at equal times fire in the order they were scheduled.
//  2. Step pops the earliest, advances Now to its time, frees the slot
//     (its generation moves on, so an old Timer for it goes stale) and
//     calls the handler, which may schedule more.
//  3. Timer.Cancel removes a pending event from the heap; a cancelled
//     event never fires.
//
// Slots, heap and free list are reused, so scheduling and firing allocate
// nothing once they have grown to the largest number of pending events.

// Handler receives the events scheduled for it. arg is whatever the
// scheduler was given, so one handler serves many kinds of event without
// a closure per event.
type Handler interface {
	Fire(now Time, arg uint64)
}

// HandlerFunc adapts a function to Handler. A method value or a closure
// allocates when it is created; create it once and reuse it.
type HandlerFunc func(now Time, arg uint64)

// Fire calls f.
func (f HandlerFunc) Fire(now Time, arg uint64) { f(now, arg) }

type event struct {
	at   Time
	seq  uint64
	h    Handler
	arg  uint64
	heap int32  // index in Scheduler.heap, -1 when not pending
	gen  uint32 // bumped when the slot is freed
}

// DefaultEventLimit bounds Run and RunUntil unless SetEventLimit says
// otherwise: a simulation that fires this many events is taken to be in a
// livelock.
const DefaultEventLimit = 500_000_000

// ErrEventLimit is returned (wrapped, with the count and time) when a run
// hits its event limit.
var ErrEventLimit = errors.New("sim: event limit reached (livelock?)")

// Scheduler is the simulation's clock and event queue. It is not safe for
// concurrent use: a simulation is one goroutine.
type Scheduler struct {
	now     Time
	seq     uint64
	slots   []event
	free    []int32
	heap    []heapEntry
	fired   uint64
	limit   uint64
	stopped bool
	// reserved counts the tickets taken (Reserve) and not yet
	// scheduled: events that will fire, though not in the heap yet.
	reserved int
}

// heapEntry is a pending event in the heap: its key (time, then
// scheduling order: the stable order) kept beside its slot, so that
// sifting compares neighbouring entries rather than chasing each to its
// slot (in a world of thousands of pending events, a cache miss apiece).
type heapEntry struct {
	at   Time
	seq  uint64
	slot int32
}

// heapArity is the heap's fan-out: a 4-ary heap is half as deep as a
// binary one, and a node's four children share a cache line or two. The
// order events fire in is that of their keys, whatever the arity.
const heapArity = 4

// NewScheduler returns a scheduler at time 0 with DefaultEventLimit.
func NewScheduler() *Scheduler {
	return &Scheduler{limit: DefaultEventLimit}
}

// Now returns the current simulated time.
func (s *Scheduler) Now() Time { return s.now }

// Fired returns how many events have fired.
func (s *Scheduler) Fired() uint64 { return s.fired }

// Pending returns how many events are scheduled and not yet fired or cancelled.
func (s *Scheduler) Pending() int { return len(s.heap) + s.reserved }

// Queued returns how many events are in the heap: Pending less those
// reserved (Reserve) and not yet scheduled.
func (s *Scheduler) Queued() int { return len(s.heap) }

// SetEventLimit sets how many events Run and RunUntil may fire in all
// before they fail with ErrEventLimit; 0 means no limit.
func (s *Scheduler) SetEventLimit(n uint64) { s.limit = n }

// EventLimit returns the limit SetEventLimit set (DefaultEventLimit
// unless changed; 0 means none).
func (s *Scheduler) EventLimit() uint64 { return s.limit }

// NextAt returns the time of the earliest pending event, or Never.
func (s *Scheduler) NextAt() Time {
	if len(s.heap) == 0 {
		return Never
	}
	return s.heap[0].at
}

// Timer refers to one scheduled event. The zero Timer refers to nothing.
type Timer struct {
	s    *Scheduler
	slot int32
	gen  uint32
}

// Schedule arranges for h.Fire(at, arg) to be called at time at. A time in
// the past is taken as now: the event fires after those already due.
func (s *Scheduler) Schedule(at Time, h Handler, arg uint64) Timer {
	if h == nil {
		panic("sim: Schedule with a nil handler")
	}
	if at < s.now {
		at = s.now
	}
	seq := s.seq
	s.seq++
	return s.schedule(at, seq, h, arg)
}

// Ticket is an event's place in the firing order (its time, then its
// scheduling order), taken by Reserve before the event is scheduled.
type Ticket struct {
	at  Time
	seq uint64
}

// At returns the time the ticket's event fires.
func (t Ticket) At() Time { return t.at }

// Reserve takes the place in the firing order that an event scheduled now
// for at would have (a time in the past is taken as now), without putting
// it in the heap yet: ScheduleTicket does that later, and the event then
// fires exactly where it would have fired had it been scheduled now. A
// source of events that fire in the order they are made (a link's
// arrivals: constant propagation, frames serialized one after another)
// keeps only its next one in the heap, so the heap holds one event per
// link rather than one per frame in flight, and its depth stops growing
// with the frames a large world has on its wires (issue 20). Pending
// counts reserved events.
func (s *Scheduler) Reserve(at Time) Ticket {
	if at < s.now {
		at = s.now
	}
	t := Ticket{at: at, seq: s.seq}
	s.seq++
	s.reserved++
	return t
}

// ScheduleTicket schedules h.Fire(t.At(), arg) in the place t reserved.
// It must be called before the clock passes t (while the event firing is
// earlier in the order than t), or the order would be broken: that is a
// bug in the caller, and it panics.
func (s *Scheduler) ScheduleTicket(t Ticket, h Handler, arg uint64) Timer {
	if h == nil {
		panic("sim: ScheduleTicket with a nil handler")
	}
	if t.at < s.now {
		panic(fmt.Sprintf("sim: ScheduleTicket for %v at %v: the clock has passed the reserved place", t.at, s.now))
	}
	s.reserved--
	return s.schedule(t.at, t.seq, h, arg)
}

// schedule puts the event (at, seq) in the heap.
func (s *Scheduler) schedule(at Time, seq uint64, h Handler, arg uint64) Timer {
	var slot int32
	if n := len(s.free); n > 0 {
		slot = s.free[n-1]
		s.free = s.free[:n-1]
	} else {
		s.slots = append(s.slots, event{})
		slot = int32(len(s.slots) - 1)
	}
	e := &s.slots[slot]
	e.at, e.seq, e.h, e.arg = at, seq, h, arg
	e.heap = int32(len(s.heap))
	s.heap = append(s.heap, heapEntry{at: at, seq: e.seq, slot: slot})
	s.up(int(e.heap))
	return Timer{s, slot, e.gen}
}

// After schedules h.Fire after d from now.
func (s *Scheduler) After(d Duration, h Handler, arg uint64) Timer {
	return s.Schedule(s.now.Add(d), h, arg)
}

// Pending reports whether the timer's event is still to fire.
func (t Timer) Pending() bool {
	if t.s == nil {
		return false
	}
	e := &t.s.slots[t.slot]
	return e.gen == t.gen && e.heap >= 0
}

// At returns when the timer fires; only meaningful while Pending.
func (t Timer) At() Time {
	if !t.Pending() {
		return Never
	}
	return t.s.slots[t.slot].at
}

// Cancel stops the event from firing. It reports whether the event was
// pending; cancelling a fired, cancelled or zero Timer does nothing.
func (t Timer) Cancel() bool {
	if !t.Pending() {
		return false
	}
	s := t.s
	i := int(s.slots[t.slot].heap)
	last := len(s.heap) - 1
	if i != last {
		s.swap(i, last)
	}
	s.heap = s.heap[:last]
	if i != last {
		if !s.down(i) {
			s.up(i)
		}
	}
	s.release(t.slot)
	return true
}

func (s *Scheduler) release(slot int32) {
	e := &s.slots[slot]
	e.heap = -1
	e.gen++
	e.h = nil
	s.free = append(s.free, slot)
}

// Step fires the earliest pending event and reports whether there was one.
func (s *Scheduler) Step() bool {
	if len(s.heap) == 0 {
		return false
	}
	slot := s.heap[0].slot
	last := len(s.heap) - 1
	s.swap(0, last)
	s.heap = s.heap[:last]
	if last > 0 {
		s.down(0)
	}
	e := &s.slots[slot]
	at, h, arg := e.at, e.h, e.arg
	s.release(slot)
	s.now = at
	s.fired++
	h.Fire(at, arg)
	return true
}

// Stop makes the current Run or RunUntil return after the event being
// fired. The next Run starts afresh.
func (s *Scheduler) Stop() { s.stopped = true }

// Run fires events until none is pending or Stop is called. It fails with
// ErrEventLimit if the event limit is reached first.
func (s *Scheduler) Run() error { return s.RunUntil(Never) }

// RunUntil fires every event due at or before t, then advances the clock
// to t (unless t is Never or Stop was called). It fails with ErrEventLimit
// if the event limit is reached first.
func (s *Scheduler) RunUntil(t Time) error {
	s.stopped = false
	for len(s.heap) > 0 && s.heap[0].at <= t && !s.stopped {
		if s.limit != 0 && s.fired >= s.limit {
			return fmt.Errorf("%w: %d events fired by %v, %d still pending", ErrEventLimit, s.fired, s.now, s.Pending())
		}
		s.Step()
	}
	if !s.stopped && t != Never && t > s.now {
		s.now = t
	}
	return nil
}

func (s *Scheduler) less(i, j int) bool {
	a, b := &s.heap[i], &s.heap[j]
	if a.at != b.at {
		return a.at < b.at
	}
	return a.seq < b.seq
}

func (s *Scheduler) swap(i, j int) {
	s.heap[i], s.heap[j] = s.heap[j], s.heap[i]
	s.slots[s.heap[i].slot].heap = int32(i)
	s.slots[s.heap[j].slot].heap = int32(j)
}

func (s *Scheduler) up(i int) {
	for i > 0 {
		p := (i - 1) / heapArity
		if !s.less(i, p) {
			return
		}
		s.swap(i, p)
		i = p
	}
}

// down sifts i down and reports whether it moved.
func (s *Scheduler) down(i int) bool {
	start := i
	n := len(s.heap)
	for {
		l := heapArity*i + 1
		if l >= n {
			break
		}
		m := l
		for c := l + 1; c < min(l+heapArity, n); c++ {
			if s.less(c, m) {
				m = c
			}
		}
		if !s.less(m, i) {
			break
		}
		s.swap(i, m)
		i = m
	}
	return i > start
}
