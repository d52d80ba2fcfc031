package main

// The machine's memory, measured as the alltoall meets it: a large world
// touches each QP's state once per message, long after it was last
// touched, so what a packet costs there depends less on the simulator's
// work than on what a dependent load to cold memory costs on this
// machine. `make scale` prints that cost at a few working-set sizes
// beside its table, so that the ratio of the alltoall to the 2-node
// stream (whose state stays in the first-level caches) can be read
// against the machine it was measured on.

import (
	"fmt"
	"math/rand/v2"
	"strings"
	"time"
)

// latencySizes are the working sets probed, in MiB: within a core's
// second-level cache, past it, and about the N = 256 and N = 1024
// alltoalls' heaps (0.3 and 2.0 GB).
var latencySizes = []int{1, 8, 256, 1024}

// missLatency returns the mean time of one dependent load over a working
// set of mib MiB: a walk of one random cycle (Sattolo's shuffle) through
// one word per 64-byte line, so that every step waits for the one
// before and no prefetcher can guess it.
func missLatency(mib int) time.Duration {
	lines := mib << 20 / 64
	order := make([]uint32, lines)
	for i := range order {
		order[i] = uint32(i)
	}
	r := rand.New(rand.NewPCG(1, 2))
	for i := lines - 1; i > 0; i-- {
		k := r.IntN(i) // below i: one cycle through every line
		order[i], order[k] = order[k], order[i]
	}
	next := make([]uint32, lines*16) // one 64-byte line per entry
	for i := range lines {
		next[i*16] = order[i] * 16
	}
	const steps = 2_000_000
	j := uint32(0)
	t := time.Now()
	for range steps {
		j = next[j]
	}
	d := time.Since(t) / steps
	if j == 1<<31 { // never (j is below 2^28): keeps the walk from being optimized away
		fmt.Print("")
	}
	return d
}

// latencyLine measures every size in latencySizes and says them as one
// line: "memory: a dependent load costs 18ns within 1 MiB, ...".
func latencyLine() string {
	var parts []string
	for _, m := range latencySizes {
		parts = append(parts, fmt.Sprintf("%v within %d MiB", missLatency(m).Round(time.Nanosecond), m))
	}
	return "memory: a dependent load costs " + strings.Join(parts, ", ")
}
