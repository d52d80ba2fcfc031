package sim

// SetQueueBounds sets where the pending events move from the heap to the
// radix queue and back (radixAbove, heapBelow), and returns a function
// that puts the old bounds back: tests move them often.
func SetQueueBounds(above, below int) (restore func()) {
	oldAbove, oldBelow := radixAbove, heapBelow
	radixAbove, heapBelow = above, below
	return func() { radixAbove, heapBelow = oldAbove, oldBelow }
}

// SetQueueMax sets the most events the radix queue holds (queueMax) and
// returns a function that puts the old bound back.
func SetQueueMax(n int) (restore func()) {
	old := queueMax
	queueMax = n
	return func() { queueMax = old }
}

// InQueue reports whether s holds its events in the radix queue.
func (s *Scheduler) InQueue() bool { return s.big }

// ZeroStorage is the length of the radix queue's bucket 0 storage, taken
// entries included (what its indices must fit in).
func (s *Scheduler) ZeroStorage() int { return len(s.q.b[0]) }
