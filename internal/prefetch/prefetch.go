// Package prefetch asks the CPU to bring memory into its caches ahead of
// use: a hint (PREFETCHT0 on amd64, PRFM PLDL1KEEP on arm64, nothing
// elsewhere) that changes no result, only when the loads that follow
// find their lines.
//
// A large world's state is cold at each visit: a message finds its QP,
// its work request and its frame among hundreds of megabytes, and the
// code reaches their cache lines one after another, each miss waiting for
// the one before (README, "Scale"). Asking for all the lines of an object
// at once, as soon as its address is known, lets the misses overlap.
package prefetch

import "unsafe"

// Lines asks for the cache lines of the n bytes at p. It never faults,
// whatever p is, and reads nothing into the program.
func Lines(p unsafe.Pointer, n uintptr) {
	if n == 0 {
		return
	}
	lines(uintptr(p), n)
}
