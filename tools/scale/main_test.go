package main

import (
	"errors"
	"math"
	"slices"
	"testing"
	"time"
)

// TestPoints: each kind of point runs, verifies what it must and counts
// what it did; a small alltoall sends 5 packets per WRITE (4 data, 1 ACK).
func TestPoints(t *testing.T) {
	a, err := runPoint("alltoall:5")
	if err != nil {
		t.Fatal(err)
	}
	if a.QPs != 20 || a.Checked != 20 || a.Packets != 100 {
		t.Errorf("alltoall:5: %+v, want 20 QPs, 20 completions, 100 packets", a)
	}
	// -repeat 3: the exchange three times over the same QPs, every
	// block verified each time.
	repeat = 3
	a, err = runPoint("alltoall:5")
	repeat = 1
	if err != nil || a.QPs != 20 || a.Checked != 60 || a.Packets != 300 {
		t.Errorf("alltoall:5 -repeat 3: %+v %v, want 20 QPs, 60 completions, 300 packets", a, err)
	}
	// -parts 3: the same exchange in a cluster of three parts, every
	// block verified.
	parts, workers = 3, 2
	a, err = runPoint("alltoall:7")
	parts, workers = 1, 0
	if err != nil || a.Parts != 3 || a.QPs != 42 || a.Checked != 42 || a.Packets != 210 {
		t.Errorf("alltoall:7 -parts 3: %+v %v, want 3 parts, 42 QPs, 42 completions, 210 packets", a, err)
	}
	cl, err := runPoint("cluster:6")
	if err != nil || cl.Kind != "cluster" || cl.Parts != 2 || cl.Checked != 30 || parts != 1 {
		t.Errorf("cluster:6: %+v %v (parts now %d), want a cluster of 2 parts, 30 completions", cl, err, parts)
	}
	// -msglen 64: one packet a WRITE and its ACK, and the block checked.
	msgLen = 64
	a, err = runPoint("alltoall:5")
	s64, err64 := runPoint("stream:128")
	msgLen = 4096
	if err != nil || a.Checked != 20 || a.Packets != 40 {
		t.Errorf("alltoall:5 -msglen 64: %+v %v, want 20 completions, 40 packets", a, err)
	}
	if err64 != nil || s64.Checked != 128 || s64.Packets != 256 {
		t.Errorf("stream:128 -msglen 64: %+v %v, want 128 completions, 256 packets", s64, err64)
	}
	if got := sizeName(64) + ", " + sizeName(4096); got != "64 B, 4 KiB" {
		t.Errorf("sizeName: %q", got)
	}
	s, err := runPoint("stream:128")
	if err != nil || s.Checked != 128 || s.Packets != 640 {
		t.Errorf("stream:128: %+v %v, want 128 completions, 640 packets", s, err)
	}
	sw, err := runPoint("switched:128")
	if err != nil || sw.Kind != "switched" || sw.Checked != 128 || sw.Packets != 640 {
		t.Errorf("switched:128: %+v %v, want 128 completions, 640 packets", sw, err)
	}
	i, err := runPoint("idle:200")
	if err != nil || i.QPs != 200 || i.PeakHeap == 0 {
		t.Errorf("idle:200: %+v %v", i, err)
	}
	for _, bad := range []string{"alltoall:1", "cluster:1", "idle:x", "nope:3"} {
		if _, err := runPoint(bad); err == nil {
			t.Errorf("%s: no error", bad)
		}
	}
}

// TestFit: the exponent of y = 3·x^1.5 is 1.5.
func TestFit(t *testing.T) {
	var rs []Result
	for _, n := range []float64{10, 100, 1000} {
		rs = append(rs, Result{Kind: "alltoall", Packets: uint64(n), WallS: 3 * math.Pow(n, 1.5), CPUS: 1})
	}
	for _, f := range fitAll(rs) {
		if f.y == "alltoall wall time" && math.Abs(f.exp-1.5) > 1e-9 {
			t.Errorf("exponent %v, want 1.5", f.exp)
		}
	}
}

// TestFitLeavesOutTimesBelowTheFloor: a point whose time is under
// minFitSeconds (process start and clock grain) does not bend a time fit,
// and still counts in the others.
func TestFitLeavesOutTimesBelowTheFloor(t *testing.T) {
	rs := []Result{{Kind: "idle", QPs: 100, CPUS: minFitSeconds / 2, PeakHeap: 1e5}}
	for _, n := range []float64{1e3, 1e4, 1e5} {
		rs = append(rs, Result{Kind: "idle", QPs: int(n), CPUS: n * 1e-5, PeakHeap: uint64(n * 1000)})
	}
	seen := 0
	for _, f := range fitAll(rs) {
		switch f.y {
		case "idle-QP creation CPU time":
			seen++
			if f.n != 2 || math.Abs(f.exp-1) > 1e-9 {
				t.Errorf("creation time: %d points, exponent %v; want 2 points (the ones above the floor), exponent 1", f.n, f.exp)
			}
		case "idle-QP heap":
			seen++
			if f.n != 4 {
				t.Errorf("heap: %d points, want all 4", f.n)
			}
		}
	}
	if seen != 2 {
		t.Errorf("%d of the two idle fits made", seen)
	}
}

// TestMissLatency: the memory probe's walk over 1 MiB (the smallest
// size make scale probes; the others take seconds) takes a positive time
// a dependent load can take, under 10 µs.
func TestMissLatency(t *testing.T) {
	if d := missLatency(1); d <= 0 || d > 10*time.Microsecond {
		t.Errorf("a dependent load within 1 MiB took %v", d)
	}
}

// TestRounds: each point runs k times in rounds (every point once, then
// every point again), keeps the run of median wall time whatever order
// its runs came in, a short point (under shortPoint) or one more names
// runs 2k rounds more with the others like it, and a failing point stops
// at its error while the others go on.
func TestRounds(t *testing.T) {
	walls := map[int][]float64{
		0: {0.9, 0.5, 0.7},
		1: {0.4, 0.3, 0.5},
		2: {0.09, 0.04, 0.05, 0.04, 0.04, 0.10, 0.04, 0.05, 0.04, 9}, // short
		3: {0.9, 0.5, 0.7, 1.4},
		5: {0.9, 0.8, 0.7, 0.6, 0.5, 0.4, 0.3, 0.2, 0.1}, // named by more
	}
	var order []int
	seen := map[int]int{}
	run := func(i int) (Result, error) {
		order = append(order, i)
		if i == 4 {
			return Result{}, errTest
		}
		r := Result{WallS: walls[i][seen[i]], Packets: uint64(seen[i])}
		seen[i]++
		return r, nil
	}
	picked, errs := rounds(6, 3, func(i int) bool { return i == 5 }, run)
	want := []int{0, 1, 2, 3, 4, 5, 0, 1, 2, 3, 5, 0, 1, 2, 3, 5, 2, 5, 2, 5, 2, 5, 2, 5, 2, 5, 2, 5}
	if !slices.Equal(order, want) {
		t.Errorf("runs in the order %v, want %v", order, want)
	}
	if r := picked[0]; r.WallS != 0.7 || r.Packets != 2 {
		t.Errorf("median of 0.9, 0.5, 0.7: %+v, want the run of 0.7", r)
	}
	if r := picked[1]; r.WallS != 0.4 || r.Packets != 0 {
		t.Errorf("median of 0.4, 0.3, 0.5: %+v, want the first run", r)
	}
	if r := picked[2]; r.WallS != 0.04 || seen[2] != 9 {
		t.Errorf("a short point: %+v after %d runs, want 0.04 after 9", r, seen[2])
	}
	if r := picked[3]; r.WallS != 0.7 {
		t.Errorf("median of 0.9, 0.5, 0.7: %v", r.WallS)
	}
	if r := picked[5]; r.WallS != 0.5 || seen[5] != 9 {
		t.Errorf("a point more names: %+v after %d runs, want the median 0.5 after 9", r, seen[5])
	}
	if errs[4] != errTest || slices.ContainsFunc(append(errs[:4:4], errs[5]), func(e error) bool { return e != nil }) {
		t.Errorf("errors %v, want the failing point's alone", errs)
	}
	k := 0
	four := func(int) (Result, error) {
		k++
		return Result{WallS: []float64{0.9, 0.5, 0.7, 1.4}[k-1]}, nil
	}
	if picked, _ := rounds(1, 4, func(int) bool { return false }, four); k != 4 || picked[0].WallS != 0.7 {
		t.Errorf("median of four: %v, want the lower middle 0.7", picked[0].WallS)
	}
}

var errTest = errors.New("point failed")

// TestHeapFor: each point reserves 8 KiB per alltoall QP and 2 KiB per
// idle one (its peak live heap and the collector's headroom), at least
// 64 MiB and at most 4 GiB.
func TestHeapFor(t *testing.T) {
	most := int(min(uint64(4<<30), uint64(math.MaxInt)))
	for p, want := range map[string]int{
		"stream:100000": 64 << 20,
		"alltoall:16":   64 << 20,
		"alltoall:256":  256 * 255 * 8 << 10,
		"cluster:256":   256 * 255 * 8 << 10,
		"alltoall:1024": most,
		"idle:100000":   100000 * 2 << 10,
		"idle:1000":     64 << 20,
		"alltoall:x":    64 << 20,
	} {
		if got := heapFor(p); got != want {
			t.Errorf("heapFor(%q) = %d, want %d", p, got, want)
		}
	}
}
