package sim

import (
	"errors"
	"fmt"
	"math/bits"
)

// The event queue, in order of what happens to an event:
//
//  1. Schedule/After puts (time, handler, arg) in a slot of the slab and
//     the slot on a 4-ary heap ordered by (time, insertion sequence), so
//     events at equal times fire in the order they were scheduled; past
//     radixAbove pending events, in a radix heap instead (queue.go).
//  2. Step pops the earliest, advances Now to its time, frees the slot
//     (its generation moves on, so an old Timer for it goes stale) and
//     calls the handler, which may schedule more.
//  3. Timer.Cancel removes a pending event from the heap or the queue
//     (found through queue.pos); a cancelled event never fires.
//
// Any correct priority queue fires the same events in the same order, the
// key (time, sequence) being unique; which one holds them changes only
// the cost (issue 20: at N=256 the alltoall keeps some 1,300 events
// pending and pops one every microsecond of CPU).
//
// Slots, heap and free list are reused, so scheduling and firing allocate
// nothing once they have grown to the largest number of pending events.

// Handler receives the events scheduled for it. arg is whatever the
// scheduler was given, so one handler serves many kinds of event without
// a closure per event.
type Handler interface {
	Fire(now Time, arg uint64)
}

// Prefetcher is a Handler that can name the memory its event will touch
// before the event fires: with the hint on (SetPrefetch), Step asks the
// next event's handler just before it fires the current one, so that
// the next event's first misses overlap the current event's work (see
// package internal/prefetch). Prefetch must change nothing but what is
// in the CPU's caches.
type Prefetcher interface {
	Handler
	Prefetch(arg uint64)
}

// HandlerFunc adapts a function to Handler. A method value or a closure
// allocates when it is created; create it once and reuse it.
type HandlerFunc func(now Time, arg uint64)

// Fire calls f.
func (f HandlerFunc) Fire(now Time, arg uint64) { f(now, arg) }

// event is a slot: what a pending event fires, and the generation that
// tells a Timer whether the event it refers to is still this one. Its
// time is in its heap entry, its place in queue.pos: 32
// bytes, so that a slot never straddles two cache lines (Step's read of
// it is one of the few misses an event costs in a large world).
type event struct {
	h   Handler
	arg uint64
	gen uint32 // bumped when the slot is freed
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
	now   Time
	seq   uint64
	slots []event
	free  []int32
	heap  []heapEntry
	spare []heapEntry // toHeap's scratch, kept so that a move allocates nothing once grown
	// q holds the pending events instead of heap while big is set: from
	// when the heap outgrows radixAbove until the queue falls under
	// heapBelow. Its pos is the heap's too: each pending slot's index in
	// heap, which is how Cancel finds its event (kept apart from slots so
	// that the write a sift makes at every level lands in a small dense
	// array rather than a 32-byte slot apiece: 1,300 pending events,
	// 5 KiB, not 41), and while big its place in q.
	q       queue
	big     bool
	fired   uint64
	limit   uint64
	stopped bool
	// prefetch: Step asks the next event's handler what it will touch
	// (SetPrefetch).
	prefetch bool
	hints    uint64 // Prefetch calls made
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

// radixAbove and heapBelow are where the pending events move from the
// heap to the radix queue and back. Taking an event from a heap of 1,300
// costs about 460 instructions, a sift over five levels, and from the
// queue about 240 (the alltoall at N = 128: 6% fewer instructions per
// simulated packet in all; medians of runs in turns: N = 256 5% less
// time, N = 1024 13%); a heap of a few events (a 2-node stream's) lives
// in a cache line or two, which the queue's buckets do not
// (BenchmarkRCWriteStream 6% slower on the queue alone, unchanged with
// both). The gap between the bounds keeps a world near either size from
// moving its events back and forth.
var radixAbove, heapBelow = 256, 64

// NewScheduler returns a scheduler at time 0 with DefaultEventLimit.
func NewScheduler() *Scheduler {
	return &Scheduler{limit: DefaultEventLimit}
}

// toQueue moves the pending events from the heap to the radix queue.
func (s *Scheduler) toQueue() {
	s.q.load(s.now, s.heap)
	s.heap = s.heap[:0]
	s.big = true
}

// toHeap moves the pending events from the radix queue to the heap.
func (s *Scheduler) toHeap() {
	es := s.q.drain(s.spare[:0])
	for _, e := range es {
		s.heap = append(s.heap, heapEntry{})
		s.up(len(s.heap)-1, e)
	}
	s.spare = es[:0]
	s.big = false
}

// Now returns the current simulated time.
func (s *Scheduler) Now() Time { return s.now }

// Fired returns how many events have fired.
func (s *Scheduler) Fired() uint64 { return s.fired }

// Pending returns how many events are scheduled and not yet fired or cancelled.
func (s *Scheduler) Pending() int { return s.Queued() + s.reserved }

// Queued returns how many events are in the heap or the radix queue:
// Pending less those reserved (Reserve) and not yet scheduled.
func (s *Scheduler) Queued() int {
	if s.big {
		return s.q.n
	}
	return len(s.heap)
}

// SetEventLimit sets how many events Run and RunUntil may fire in all
// before they fail with ErrEventLimit; 0 means no limit.
func (s *Scheduler) SetEventLimit(n uint64) { s.limit = n }

// EventLimit returns the limit SetEventLimit set (DefaultEventLimit
// unless changed; 0 means none).
func (s *Scheduler) EventLimit() uint64 { return s.limit }

// NextAt returns the time of the earliest pending event, or Never.
func (s *Scheduler) NextAt() Time {
	if s.big {
		if s.q.n == 0 {
			return Never
		}
		return s.q.min().at
	}
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
		s.q.pos = append(s.q.pos, 0)
		slot = int32(len(s.slots) - 1)
	}
	e := &s.slots[slot]
	e.h, e.arg = h, arg
	if s.big && s.q.n >= queueMax {
		s.toHeap() // the heap holds any number
	}
	if s.big {
		s.q.push(heapEntry{at: at, seq: seq, slot: slot})
		return Timer{s, slot, e.gen}
	}
	s.heap = append(s.heap, heapEntry{})
	s.up(len(s.heap)-1, heapEntry{at: at, seq: seq, slot: slot})
	if n := len(s.heap); n > radixAbove && n <= queueMax/2 {
		// (Under half of queueMax: a world near it does not move its
		// events back and forth.)
		s.toQueue()
	}
	return Timer{s, slot, e.gen}
}

// After schedules h.Fire after d from now.
func (s *Scheduler) After(d Duration, h Handler, arg uint64) Timer {
	return s.Schedule(s.now.Add(d), h, arg)
}

// Pending reports whether the timer's event is still to fire.
func (t Timer) Pending() bool {
	// A slot's generation moves on when its event fires or is
	// cancelled, so a Timer of the slot's current generation refers to
	// a pending event.
	return t.s != nil && t.s.slots[t.slot].gen == t.gen
}

// At returns when the timer fires; only meaningful while Pending.
func (t Timer) At() Time {
	if !t.Pending() {
		return Never
	}
	if t.s.big {
		return t.s.q.at(t.slot)
	}
	return t.s.heap[t.s.q.pos[t.slot]].at
}

// Cancel stops the event from firing. It reports whether the event was
// pending; cancelling a fired, cancelled or zero Timer does nothing.
func (t Timer) Cancel() bool {
	if !t.Pending() {
		return false
	}
	s := t.s
	if s.big {
		s.q.remove(t.slot)
		s.release(t.slot)
		if s.q.n < heapBelow {
			s.toHeap()
		}
		return true
	}
	s.remove(int(s.q.pos[t.slot]))
	s.release(t.slot)
	return true
}

func (s *Scheduler) release(slot int32) {
	e := &s.slots[slot]
	e.gen++
	e.h = nil
	s.free = append(s.free, slot)
}

// Step fires the earliest pending event and reports whether there was one.
func (s *Scheduler) Step() bool {
	if s.big {
		return s.stepQueue()
	}
	if len(s.heap) == 0 {
		return false
	}
	// The slot is read before the heap is mended: it is likely cold,
	// and its load then overlaps the sift rather than following it.
	at, slot := s.heap[0].at, s.heap[0].slot
	e := &s.slots[slot]
	h, arg := e.h, e.arg
	s.remove(0)
	s.release(slot)
	s.now = at
	s.fired++
	if s.prefetch && len(s.heap) > 0 {
		s.hint(s.heap[0].slot)
	}
	h.Fire(at, arg)
	return true
}

// stepQueue is Step with the events in the radix queue.
func (s *Scheduler) stepQueue() bool {
	if s.q.n == 0 {
		return false
	}
	m := s.q.min()
	at, slot := m.at, m.slot
	e := &s.slots[slot]
	h, arg := e.h, e.arg
	s.q.pop()
	s.release(slot)
	s.now = at
	s.fired++
	if s.q.n < heapBelow {
		s.toHeap()
		if s.prefetch && len(s.heap) > 0 {
			s.hint(s.heap[0].slot)
		}
	} else if s.prefetch && s.q.n > 0 {
		s.hint(s.q.min().slot)
	}
	h.Fire(at, arg)
	return true
}

// hint asks the handler of the event in slot, the next to fire, for
// what it will touch (Prefetcher).
func (s *Scheduler) hint(slot int32) {
	next := &s.slots[slot]
	if p, ok := next.h.(Prefetcher); ok {
		s.hints++
		p.Prefetch(next.arg)
	}
}

// SetPrefetch turns on or off Step's hint to the next event's handler
// (Prefetcher). A new scheduler has it off: in a small world the state
// stays in the caches and the hint only costs (5–10% of a 2-node
// stream); in a large one it saves about a tenth of the time. A
// sim/fabric Fabric of 32 nodes or more turns it on when it starts (its
// first frame); call SetPrefetch after that to overrule it.
func (s *Scheduler) SetPrefetch(on bool) { s.prefetch = on }

// Prefetching reports whether the hint is on.
func (s *Scheduler) Prefetching() bool { return s.prefetch }

// Hints returns how many times Step has asked a Prefetcher.
func (s *Scheduler) Hints() uint64 { return s.hints }

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
	if err := s.RunThrough(t); err != nil {
		return err
	}
	if !s.stopped && t != Never && t > s.now {
		s.now = t
	}
	return nil
}

// RunThrough fires every event due at or before t and leaves the clock
// at the last one fired: a driver that advances several schedulers side
// by side (verbs.Cluster) steps each through a window without moving its
// clock past what happened. It fails with ErrEventLimit as RunUntil does.
func (s *Scheduler) RunThrough(t Time) error {
	s.stopped = false
	for s.Queued() > 0 && s.NextAt() <= t && !s.stopped {
		if s.limit != 0 && s.fired >= s.limit {
			return fmt.Errorf("%w: %d events fired by %v, %d still pending", ErrEventLimit, s.fired, s.now, s.Pending())
		}
		s.Step()
	}
	return nil
}

// before reports whether a fires before b: a 128-bit comparison of
// (time, scheduling order), done as one subtraction with borrow so that
// picking the least of a node's children takes no branch to mispredict
// (which child that is has no pattern a predictor could learn). Times in
// the heap are never negative (Schedule takes a time in the past as
// now), so they compare the same as unsigned.
func before(a, b *heapEntry) bool { return borrow(a, b) != 0 }

// borrow is before as 1 or 0, the subtraction's borrow itself, for
// indexing with no conversion from bool.
func borrow(a, b *heapEntry) uint64 {
	_, c := bits.Sub64(a.seq, b.seq, 0)
	_, c = bits.Sub64(uint64(a.at), uint64(b.at), c)
	return c
}

// set puts e at index i of the heap and records where its slot is.
func (s *Scheduler) set(i int, e heapEntry) {
	s.heap[i] = e
	s.q.pos[e.slot] = int32(i)
}

// up places e at index i, a hole, or above it: each parent that fires
// after e moves down into the hole instead of trading places with it, so
// a level costs one write, not a swap's two.
func (s *Scheduler) up(i int, e heapEntry) {
	h := s.heap
	for i > 0 {
		p := (i - 1) / heapArity
		if !before(&e, &h[p]) {
			break
		}
		s.set(i, h[p])
		i = p
	}
	s.set(i, e)
}

// branchyHeap is the heap size above which remove picks between the two
// finalists with a branch rather than without one. A branch-free choice
// makes the next level's address wait for the comparison; a predicted
// branch lets the processor run ahead and start loading the level below
// (right about half the time). While the heap is in a core's nearer
// caches the mispredictions cost more than the wait; once it has outgrown
// them (32,768 entries are 768 KiB, most of a 1 MiB L2) the loads run
// ahead cost less. Measured (CPU time, BenchmarkStep): branch-free takes
// some 12% less at 1,300 pending, the branch some 8% less at 100,000;
// the alltoall at N=256 (some 1,300 pending) runs 2–3% faster
// branch-free.
const branchyHeap = 1 << 15

// remove takes the entry at index i out of the heap. The hole it leaves
// moves down to a leaf, the least child rising into it at every level
// without being compared with the entry that will fill it, and the last
// entry fills it from there, sifting up (rarely far: it was a leaf, and
// leaves fire late). That is Floyd's bottom-up sift: a level costs the
// three comparisons among four children, not four.
func (s *Scheduler) remove(i int) {
	n := len(s.heap) - 1
	last := s.heap[n]
	s.heap = s.heap[:n]
	if i == n {
		return
	}
	if i > 0 && before(&last, &s.heap[(i-1)/heapArity]) {
		s.up(i, last)
		return
	}
	h := s.heap
	for {
		c := heapArity*i + 1
		var m int
		switch {
		case c+3 < n:
			// All four children: a tournament of three comparisons.
			// q, and the masks on its indices, let the compiler drop
			// the bounds checks.
			q := h[c : c+4 : c+4]
			l := borrow(&q[1], &q[0])
			r := 2 + borrow(&q[3], &q[2])
			if n > branchyHeap {
				if before(&q[r&3], &q[l&3]) {
					l = r
				}
			} else {
				l ^= (l ^ r) & -borrow(&q[r&3], &q[l&3])
			}
			m = c + int(l)
		case c < n:
			m = c
			for j := c + 1; j < n; j++ {
				if before(&h[j], &h[m]) {
					m = j
				}
			}
		default:
			s.up(i, last)
			return
		}
		s.set(i, h[m])
		i = m
	}
}
