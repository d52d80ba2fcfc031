// Package swarmsum is the summary of a swarm run (verbs' TestSwarm) over a
// range of seeds, so that a large swarm can be split across machines or
// CI jobs by seed range and its parts merged (issue 20 item 8):
//
//	make swarm SEEDS=100000 SHARD=3/16 SWARMJSON=part3.json   # on each of 16 machines
//	go run ./tools/swarmmerge part*.json                      # anywhere: one summary
//
// A seed's run depends on its seed only, never on which shard or how many
// goroutines ran it, so the merged summary of a split swarm is the summary
// of the whole.
package swarmsum

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"slices"
	"strconv"
	"strings"
)

// Summary is what a swarm run over the seeds [First, First+N) found.
type Summary struct {
	First uint64 `json:"first"`
	N     uint64 `json:"n"`
	// Seeds run, and those that failed (sorted).
	Seeds  uint64   `json:"seeds"`
	Failed []uint64 `json:"failed"`
	// Work done: frames simulated, fault decisions, events fired.
	Frames uint64 `json:"frames"`
	Faults uint64 `json:"faults"`
	Events uint64 `json:"events"`
	// Counts are the coverage counters by name (seeds with a switch,
	// finite seeds, …), summed by Merge.
	Counts map[string]uint64 `json:"counts,omitempty"`
	// WallMS is the wall time of the run (of the slowest part, merged);
	// the only field that differs between two runs of the same seeds.
	WallMS int64 `json:"wall_ms"`
}

// ParseShard parses "k/m" (the k-th of m parts, k from 0).
func ParseShard(s string) (k, m uint64, err error) {
	a, b, ok := strings.Cut(s, "/")
	if ok {
		k, err = strconv.ParseUint(a, 10, 64)
		if err == nil {
			m, err = strconv.ParseUint(b, 10, 64)
		}
	}
	if !ok || err != nil || m == 0 || k >= m {
		return 0, 0, fmt.Errorf("swarmsum: shard %q: want k/m with 0 <= k < m", s)
	}
	return k, m, nil
}

// Shard returns the k-th of m contiguous parts of the seeds
// [first, first+n): the parts cover the range once, their sizes differ by
// at most one.
func Shard(first, n, k, m uint64) (uint64, uint64) {
	lo, hi := n/m*k+min(k, n%m), n/m*(k+1)+min(k+1, n%m)
	return first + lo, hi - lo
}

// Merge combines the summaries of disjoint seed ranges into that of their
// union, which must be one range without gaps.
func Merge(parts []Summary) (Summary, error) {
	if len(parts) == 0 {
		return Summary{}, errors.New("swarmsum: nothing to merge")
	}
	ps := slices.Clone(parts)
	slices.SortFunc(ps, func(a, b Summary) int {
		switch {
		case a.First < b.First:
			return -1
		case a.First > b.First:
			return 1
		}
		return 0
	})
	out := Summary{First: ps[0].First, Counts: map[string]uint64{}}
	for i, p := range ps {
		if i > 0 && p.First != out.First+out.N {
			prev := ps[i-1]
			if p.First < out.First+out.N {
				return Summary{}, fmt.Errorf("swarmsum: seeds %d-%d and %d-%d overlap", prev.First, prev.First+prev.N-1, p.First, p.First+p.N-1)
			}
			return Summary{}, fmt.Errorf("swarmsum: seeds %d-%d are missing", out.First+out.N, p.First-1)
		}
		out.N += p.N
		out.Seeds += p.Seeds
		out.Failed = append(out.Failed, p.Failed...)
		out.Frames += p.Frames
		out.Faults += p.Faults
		out.Events += p.Events
		for k, v := range p.Counts {
			out.Counts[k] += v
		}
		out.WallMS = max(out.WallMS, p.WallMS)
	}
	slices.Sort(out.Failed)
	return out, nil
}

// String is the one-line report of a summary.
func (s Summary) String() string {
	verdict := "all passed"
	if len(s.Failed) > 0 {
		verdict = fmt.Sprintf("%d FAILED: %v", len(s.Failed), s.Failed)
	}
	return fmt.Sprintf("swarm: seeds %d-%d, %d run, %d frames simulated, %d fault decisions, %d events: %s",
		s.First, s.First+s.N-1, s.Seeds, s.Frames, s.Faults, s.Events, verdict)
}

// Write writes s to the file path as JSON.
func Write(path string, s Summary) error {
	b, err := json.MarshalIndent(s, "", "  ")
	if err != nil {
		return err
	}
	return os.WriteFile(path, append(b, '\n'), 0o644)
}

// Read reads a summary written by Write.
func Read(path string) (Summary, error) {
	var s Summary
	b, err := os.ReadFile(path)
	if err == nil {
		err = json.Unmarshal(b, &s)
	}
	if err != nil {
		return Summary{}, fmt.Errorf("swarmsum: %s: %w", path, err)
	}
	return s, nil
}
