package sim

import (
	"hash/fnv"
	"math/rand/v2"
)

// Seeds derives the random streams of a simulation from one master seed.
// Each component asks for its own stream by a stable name ("faults",
// "swarm/topology", "node a/nic"), so adding a draw in one component never
// shifts the numbers another sees, and the same seed reproduces a run.
type Seeds struct {
	master uint64
}

// NewSeeds returns the stream source for a master seed.
func NewSeeds(master uint64) Seeds { return Seeds{master} }

// Master returns the master seed.
func (s Seeds) Master() uint64 { return s.master }

// Stream returns a new PCG generator for the named component. The same
// master seed and name always give the same sequence; different names give
// independent ones.
func (s Seeds) Stream(name string) *rand.Rand {
	h := fnv.New64a()
	h.Write([]byte(name))
	return rand.New(rand.NewPCG(s.master, h.Sum64()))
}
