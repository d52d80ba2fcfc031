package nic

import (
	"math/rand/v2"
	"testing"
)

// naiveNext is the walk idSet replaces: from the cursor up, wrapping
// from hi to lo, the first number not taken.
func naiveNext(taken map[uint32]bool, cursor, lo, hi uint32) (uint32, bool) {
	n := max(cursor, lo)
	for range hi - lo + 1 {
		if n > hi {
			n = lo
		}
		if !taken[n] {
			return n, true
		}
		n++
	}
	return 0, false
}

// TestIDSetMatchesWalk: idSet hands out the numbers the cyclic walk
// does, through runs of takes and frees that fill the space, cross word
// and summary boundaries and wrap.
func TestIDSetMatchesWalk(t *testing.T) {
	for _, c := range []struct{ lo, hi uint32 }{{16, 1 << 20}, {1, 300}, {5, 64*64*2 + 70}} {
		r := rand.New(rand.NewPCG(1, uint64(c.hi)))
		var s idSet
		taken := map[uint32]bool{}
		var live []uint32
		cursor := c.lo
		size := int(c.hi - c.lo + 1)
		for step := range 60000 {
			if len(live) < size && (len(live) == 0 || r.IntN(100) < 70) {
				want, wok := naiveNext(taken, cursor, c.lo, c.hi)
				got, ok := s.next(cursor, c.lo, c.hi)
				if got != want || ok != wok {
					t.Fatalf("[%d,%d] step %d: next from %d = %d %v, the walk gives %d %v", c.lo, c.hi, step, cursor, got, ok, want, wok)
				}
				taken[got] = true
				live = append(live, got)
				cursor = got + 1
				if cursor > c.hi {
					cursor = c.lo
				}
			} else {
				i := r.IntN(len(live))
				n := live[i]
				live[i] = live[len(live)-1]
				live = live[:len(live)-1]
				delete(taken, n)
				s.free(n)
			}
			if step%1000 == 0 {
				for n := range taken {
					if !s.has(n) {
						t.Fatalf("step %d: %d taken but not in the set", step, n)
					}
				}
			}
		}
	}
	var s idSet
	for n := uint32(1); n <= 10; n++ {
		s.take(n)
	}
	if n, ok := s.next(1, 1, 10); ok {
		t.Errorf("a full space gave %d", n)
	}
}

// BenchmarkRegMRNearlyFull re-registers one MR at a time in a device
// whose MR table is full but for 64 indices, freed at random: the walk
// from the cursor that idSet replaced stepped past some 8,000 live MRs
// per registration here; idSet's cost does not depend on how many live.
func BenchmarkRegMRNearlyFull(b *testing.B) {
	d := New(Config{})
	pd, err := d.AllocPD()
	if err != nil {
		b.Fatal(err)
	}
	buf := make([]byte, 8)
	n := d.mem.liveLimit()
	mrs := make([]*MR, n)
	for i := range mrs {
		if mrs[i], err = d.RegMR(pd, buf, AccessLocalWrite); err != nil {
			b.Fatalf("MR %d of %d: %v", i, n, err)
		}
	}
	r := rand.New(rand.NewPCG(1, 2))
	for range 64 {
		i := r.IntN(n)
		for mrs[i] == nil {
			i = r.IntN(n)
		}
		if err := d.DeregMR(mrs[i]); err != nil {
			b.Fatal(err)
		}
		mrs[i] = nil
	}
	b.ReportAllocs()
	b.ResetTimer()
	for range b.N {
		i := r.IntN(n)
		for mrs[i] == nil {
			i = r.IntN(n)
		}
		if err := d.DeregMR(mrs[i]); err != nil {
			b.Fatal(err)
		}
		if mrs[i], err = d.RegMR(pd, buf, AccessLocalWrite); err != nil {
			b.Fatal(err)
		}
	}
}
