package prefetch

// lineSize is the cache line the hint is counted in: 64 bytes on every
// amd64 and arm64 core in use (a longer line only makes a hint
// redundant).
const lineSize = 64

// Lines asks for the cache lines of the n bytes at address p. It never
// faults and never loops past the lines asked for, whatever p and n are
// (a range past the top of the address space stops there), and it reads
// nothing into the program.
func Lines(p, n uintptr) {
	if n == 0 {
		return
	}
	first, more := span(p, n)
	lines(first, more)
}

// span returns the address of the line holding p and how many lines
// after it [p, p+n) reaches into (n > 0), clipped at the top of the
// address space. It is computed from p's offset in its line, not from
// p+n, which wraps for a range that runs past the top.
func span(p, n uintptr) (first, more uintptr) {
	first = p &^ (lineSize - 1)
	more = ((p & (lineSize - 1)) + (n - 1)) / lineSize
	if top := (^uintptr(0) - first) / lineSize; more > top || more < (n-1)/lineSize {
		more = top // the range wraps (or its length does): up to the last line
	}
	return first, more
}
