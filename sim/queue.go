package sim

import "math/bits"

// queue holds the pending events in order of (time, sequence): a radix
// heap on their times (Ahuja, Mehlhorn, Orlin and Tarjan's monotone
// priority queue), which the scheduler's clock allows because no event is
// ever scheduled before the last one fired.
//
// Bucket 0 holds the entries due at base, the time of the last event
// taken; bucket i > 0 those whose time first differs from base in bit
// i-1 (each later than every entry of a lower bucket). Taking the
// earliest entry of bucket i > 0 moves base to its time, and the rest of
// that bucket to lower ones: an entry moves down a bucket or more each
// time, so it is moved at most as many times as its time has bits above
// base's (about ten for an event a microsecond ahead), and the buckets
// above are untouched, their entries first differing from the new base
// where they differed from the old.
//
// Bucket 0's entries share one time and are taken in sequence order: it
// is kept sorted, the earliest first, from zero (the entries before zero
// are taken). An event scheduled for base itself, usually later in the
// sequence than every one there, goes on the end; the entries a bucket
// above spreads into it come mostly in the order they were scheduled,
// and an insertion sort puts them in order in about one pass (a
// symmetric world, the alltoall's hosts, has hundreds of events due at
// one instant).
//
// Where it loses to the heap: times spread evenly over a long stretch
// move each entry down many buckets (BenchmarkStep, 1,300 pending due
// uniformly within 100 µs: 81–87 ns a step against the heap's 63–65).
// A fabric's events bunch instead (a symmetric world has hundreds due at
// one instant, and most fall within a link's serialization or
// propagation delay of the clock), which is where it wins. Cancelling
// the earliest entry while it is in a bucket above 0 scans that bucket
// for the next. Each bucket's storage grows to the most it has held and
// stays: at 100,000 pending uniform times the buckets' highs still creep
// up after millions of steps (17 bytes a step over 5 million; the heap
// allocates none), bounded by 64 times the peak of pending events.
//
// The scheduler keeps its events here only while many are pending
// (radixAbove, heapBelow; a few fit a heap in a cache line or two):
// taking one from a heap of 1,300 costs a sift over five levels of three
// 128-bit comparisons and a move each, some 460 instructions, and from
// the queue about 240, an entry moving down about twice per event (the
// alltoall at N = 128: 6% fewer instructions per simulated packet in
// all; N = 1024, whose heap is deeper, 13% less time). The order is the
// heap's: the key (time, sequence) is unique, and any correct priority
// queue fires the same events in the same order
// (TestSchedulerMatchesReference, TestQueueAndHeapAgree).
type queue struct {
	base Time   // the time of the last entry taken: no entry is earlier
	occ  uint64 // bit i: bucket i holds entries
	n    int
	zero int // bucket 0's entries before this one have been taken
	// minB, minI locate the earliest entry while n > 0.
	minB, minI int32
	b          [64][]heapEntry
	// pos is each pending slot's place (bucket<<posShift | index), which
	// is how Cancel finds its event; the scheduler's heap keeps its
	// indices here while the queue is not in use.
	pos []int32
}

const (
	posShift = 25 // 6 bits of bucket above, within an int32
	posIndex = 1<<posShift - 1
)

// queueMax is the most events the queue holds: bucket 0's storage, which
// counts its taken entries too, stays under four times its live ones
// (insertZero), so every index fits under posShift's bits. Past it the
// scheduler keeps its events in the heap, which has no such bound.
var queueMax = (posIndex + 1) / 4

// bucket returns the bucket of an entry due at at (at >= base; times are
// never negative, so at^base has no bit 63).
func (q *queue) bucket(at Time) int { return bits.Len64(uint64(at ^ q.base)) }

// place appends e to bucket i and records where it is (no bucket's index
// outgrows posIndex: the scheduler holds at most queueMax here).
func (q *queue) place(i int, e heapEntry) int32 {
	k := len(q.b[i])
	q.b[i] = append(q.b[i], e)
	q.pos[e.slot] = int32(i<<posShift | k)
	q.occ |= 1 << i
	return int32(k)
}

// push adds e, whose time is not before base.
func (q *queue) push(e heapEntry) {
	i := q.bucket(e.at)
	q.n++
	if i == 0 {
		q.insertZero(e)
		q.minB, q.minI = 0, int32(q.zero)
		return
	}
	k := q.place(i, e)
	if q.n == 1 || before(&e, &q.b[q.minB][q.minI]) {
		q.minB, q.minI = int32(i), k
	}
}

// insertZero puts e, due at base, in bucket 0 at its place in sequence
// order: usually the end. A bucket whose taken entries fill half its
// storage moves its live ones to the front first, so that one instant
// with many events keeps it bounded.
func (q *queue) insertZero(e heapEntry) {
	z := q.b[0]
	if q.zero > 0 && len(z) == cap(z) && 2*q.zero >= len(z) {
		z = z[:copy(z, z[q.zero:])]
		for j := range z {
			q.pos[z[j].slot] = int32(j)
		}
		q.zero = 0
	}
	z = append(z, e)
	k := len(z) - 1
	for ; k > q.zero && z[k-1].seq > e.seq; k-- {
		z[k] = z[k-1]
		q.pos[z[k].slot] = int32(k)
	}
	z[k] = e
	q.pos[e.slot] = int32(k)
	q.b[0] = z
	q.occ |= 1
}

// emptyZero resets bucket 0, whose entries have all been taken.
func (q *queue) emptyZero() {
	q.b[0], q.zero = q.b[0][:0], 0
	q.occ &^= 1
}

// min returns the earliest entry; the queue must not be empty.
func (q *queue) min() *heapEntry { return &q.b[q.minB][q.minI] }

// at returns the time of slot's entry, which is pending.
func (q *queue) at(slot int32) Time {
	p := q.pos[slot]
	return q.b[p>>posShift][p&posIndex].at
}

// pop takes the earliest entry (min) out; the queue must not be empty.
func (q *queue) pop() {
	q.n--
	i, k := int(q.minB), int(q.minI)
	if i == 0 {
		// The earliest of bucket 0 is at zero, and the next after it.
		q.zero++
		if q.zero < len(q.b[0]) {
			q.minI++
			return
		}
		q.emptyZero()
		q.findMin()
		return
	}
	// The clock moves to the earliest: the rest of its bucket goes lower
	// (bucket 0 is empty: the earliest was in the lowest bucket).
	bk := q.b[i]
	q.base = bk[k].at
	q.b[i] = bk[:0]
	q.occ &^= 1 << i
	zero := false
	for j := range bk {
		if j != k {
			d := q.bucket(bk[j].at)
			q.place(d, bk[j])
			zero = zero || d == 0
		}
	}
	if zero {
		q.sortZero()
	}
	q.findMin()
}

// sortZero puts bucket 0, just filled from a bucket above, in sequence
// order: an insertion sort, which entries mostly in order already cost
// about one pass.
func (q *queue) sortZero() {
	z := q.b[0]
	for j := 1; j < len(z); j++ {
		e := z[j]
		k := j
		for ; k > 0 && z[k-1].seq > e.seq; k-- {
			z[k] = z[k-1]
		}
		z[k] = e
	}
	for j := range z {
		q.pos[z[j].slot] = int32(j)
	}
}

// remove takes slot's pending entry out.
func (q *queue) remove(slot int32) {
	p := q.pos[slot]
	i, k := int32(p>>posShift), int32(p&posIndex)
	q.n--
	if i == 0 {
		// Keep the order: the later entries close the gap.
		z := q.b[0]
		copy(z[k:], z[k+1:])
		z = z[:len(z)-1]
		for j := int(k); j < len(z); j++ {
			q.pos[z[j].slot] = int32(j)
		}
		q.b[0] = z
		if len(z) == q.zero {
			q.emptyZero()
		}
		q.findMin()
		return
	}
	last := int32(len(q.b[i]) - 1)
	q.cut(int(i), int(k))
	switch {
	case q.minB == i && q.minI == k:
		q.findMin()
	case q.minB == i && q.minI == last:
		q.minI = k // the earliest was the bucket's last, moved into the gap
	}
}

// cut removes entry k of bucket i > 0, the bucket's last taking its
// place.
func (q *queue) cut(i, k int) {
	bk := q.b[i]
	last := len(bk) - 1
	if k != last {
		bk[k] = bk[last]
		q.pos[bk[k].slot] = int32(i<<posShift | k)
	}
	q.b[i] = bk[:last]
	if last == 0 {
		q.occ &^= 1 << i
	}
}

// findMin finds the earliest entry: bucket 0's first live one (at zero:
// the bucket is in sequence order), or the earliest of the lowest bucket
// that holds any (which the next pop spreads).
func (q *queue) findMin() {
	if q.n == 0 {
		return
	}
	i := bits.TrailingZeros64(q.occ)
	bk := q.b[i]
	if i == 0 {
		q.minB, q.minI = 0, int32(q.zero)
		return
	}
	m := 0
	for j := 1; j < len(bk); j++ {
		if before(&bk[j], &bk[m]) {
			m = j
		}
	}
	q.minB, q.minI = int32(i), int32(m)
}

// load takes the entries of a heap (the scheduler's, grown past
// radixAbove) into the empty queue, whose base becomes now: none is
// earlier.
func (q *queue) load(now Time, es []heapEntry) {
	q.base = now
	for _, e := range es {
		q.push(e)
	}
}

// drain appends every entry to es, in no order, and empties the queue.
func (q *queue) drain(es []heapEntry) []heapEntry {
	es = append(es, q.b[0][q.zero:]...)
	for i := range q.b {
		if i > 0 {
			es = append(es, q.b[i]...)
		}
		q.b[i] = q.b[i][:0]
	}
	q.occ, q.n, q.zero = 0, 0, 0
	return es
}
