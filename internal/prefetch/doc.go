// Package prefetch asks the CPU to bring memory into its caches ahead of
// use: a hint (PREFETCHT0 on amd64, PRFM PLDL1KEEP on arm64, nothing
// elsewhere) that changes no result, only when the loads that follow
// find their lines.
//
// A large world's state is cold at each visit: a message finds its QP,
// its work request and its frame among hundreds of megabytes, and the
// code reaches their cache lines one after another, each miss waiting for
// the one before (README, "Scale"). Asking for the lines of what the next
// event will read while the current one works lets those misses overlap
// it (sim.Prefetcher).
//
// Lines takes an address as a uintptr: the hint reads nothing, so it
// needs no pointer the collector would have to know of, and a caller may
// keep the address of a buffer in a pointer-free ring.
package prefetch
