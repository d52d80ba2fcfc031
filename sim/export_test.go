package sim

// SetQueueBounds sets where the pending events move from the heap to the
// radix queue and back (radixAbove, heapBelow), and returns a function
// that puts the old bounds back: tests move them often.
func SetQueueBounds(above, below int) (restore func()) {
	oldAbove, oldBelow := radixAbove, heapBelow
	radixAbove, heapBelow = above, below
	return func() { radixAbove, heapBelow = oldAbove, oldBelow }
}

// InQueue reports whether s holds its events in the radix queue.
func (s *Scheduler) InQueue() bool { return s.big }
