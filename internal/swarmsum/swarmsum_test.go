package swarmsum

import (
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestShardCovers: the parts of a range cover each seed exactly once.
func TestShardCovers(t *testing.T) {
	for _, c := range []struct{ first, n, m uint64 }{{0, 20000, 16}, {5, 7, 3}, {100, 2, 5}, {0, 1, 1}} {
		seen := map[uint64]int{}
		next := c.first
		for k := range c.m {
			f, n := Shard(c.first, c.n, k, c.m)
			assert.Equal(t, next, f, "part %d/%d starts where the last ended", k, c.m)
			for s := f; s < f+n; s++ {
				seen[s]++
			}
			next = f + n
		}
		assert.Equal(t, c.first+c.n, next)
		assert.Len(t, seen, int(c.n))
	}
}

// TestParseShard: k/m with k below m, nothing else.
func TestParseShard(t *testing.T) {
	k, m, err := ParseShard("3/16")
	require.NoError(t, err)
	assert.Equal(t, [2]uint64{3, 16}, [2]uint64{k, m})
	for _, bad := range []string{"16/16", "3", "a/4", "1/0", ""} {
		_, _, err := ParseShard(bad)
		assert.Error(t, err, bad)
	}
}

// TestMerge: parts merge into their union, in any order, through files;
// overlapping or missing seeds are an error.
func TestMerge(t *testing.T) {
	a := Summary{First: 0, N: 10, Seeds: 10, Failed: []uint64{7}, Frames: 100, Faults: 5, Events: 1000, Counts: map[string]uint64{"sw": 4}, WallMS: 30}
	b := Summary{First: 10, N: 5, Seeds: 5, Failed: []uint64{11, 3}, Frames: 50, Faults: 1, Events: 400, Counts: map[string]uint64{"sw": 1, "uc": 2}, WallMS: 20}
	dir := t.TempDir()
	require.NoError(t, Write(filepath.Join(dir, "b.json"), b))
	rb, err := Read(filepath.Join(dir, "b.json"))
	require.NoError(t, err)
	m, err := Merge([]Summary{rb, a})
	require.NoError(t, err)
	assert.Equal(t, Summary{First: 0, N: 15, Seeds: 15, Failed: []uint64{3, 7, 11}, Frames: 150, Faults: 6, Events: 1400,
		Counts: map[string]uint64{"sw": 5, "uc": 2}, WallMS: 30}, m)
	assert.Contains(t, m.String(), "seeds 0-14, 15 run")
	_, err = Merge([]Summary{a, {First: 9, N: 3}})
	assert.ErrorContains(t, err, "overlap")
	_, err = Merge([]Summary{a, {First: 12, N: 3}})
	assert.ErrorContains(t, err, "seeds 10-11 are missing")
}
