package wire_test

import (
	"testing"

	"github.com/rocesim/rocesim/wire"
)

func TestPSNArithmeticAcrossWrap(t *testing.T) {
	const max = wire.PSN(wire.PSNMask)
	cases := []struct {
		name string
		got  wire.PSN
		want wire.PSN
	}{
		{"max+1 wraps to 0", max.Add(1), 0},
		{"max.Next", max.Next(), 0},
		{"max+3", max.Add(3), 2},
		{"0-1 wraps to max", wire.PSN(0).Sub(1), max},
		{"2-5", wire.PSN(2).Sub(5), max - 2},
		{"add 2^24 is identity", wire.PSN(12345).Add(1 << 24), 12345},
		{"add 2^24+1", wire.PSN(12345).Add(1<<24 + 1), 12346},
	}
	for _, c := range cases {
		if c.got != c.want {
			t.Errorf("%s: got %d, want %d", c.name, c.got, c.want)
		}
	}

	diffs := []struct {
		a, b wire.PSN
		want int32
	}{
		{0, max, 1},
		{max, 0, -1},
		{5, max - 4, 10},
		{max - 4, 5, -10},
		{100, 100, 0},
		{1 << 23, 0, -(1 << 23)}, // exactly half the space apart: the "before" side by convention
		{1<<23 - 1, 0, 1<<23 - 1},
		{0, 1<<23 + 1, 1<<23 - 1},
	}
	for _, d := range diffs {
		if got := d.a.Diff(d.b); got != d.want {
			t.Errorf("%d.Diff(%d) = %d, want %d", d.a, d.b, got, d.want)
		}
	}

	if !max.Less(0) || wire.PSN(0).Less(max) {
		t.Error("max must be before 0 across the wrap")
	}
	if !wire.PSN(3).LessEq(3) || !max.LessEq(2) || wire.PSN(2).LessEq(max) {
		t.Error("LessEq wrong across the wrap")
	}
	// A window that straddles the wrap: [max-1, 2].
	for _, p := range []wire.PSN{max - 1, max, 0, 1, 2} {
		if !p.InRange(max-1, 2) {
			t.Errorf("%d should be in [max-1, 2]", p)
		}
	}
	for _, p := range []wire.PSN{max - 2, 3, 1 << 23} {
		if p.InRange(max-1, 2) {
			t.Errorf("%d should not be in [max-1, 2]", p)
		}
	}
	if !wire.PSN(7).InRange(7, 7) || wire.PSN(8).InRange(7, 7) {
		t.Error("single-PSN window wrong")
	}
	if !max.Valid() || wire.PSN(1<<24).Valid() {
		t.Error("Valid must accept 24 bits only")
	}
}

// TestPSNDiffProperties checks Add/Diff consistency for every distance
// around several bases, the wrap point included.
func TestPSNDiffProperties(t *testing.T) {
	for _, base := range []wire.PSN{0, 1, wire.PSNMask, wire.PSNMask - 100, 1 << 23, 1<<23 - 1} {
		for _, n := range []uint32{0, 1, 2, 63, 64, 65, 1000, 1<<23 - 1} {
			q := base.Add(n)
			if d := q.Diff(base); d != int32(n) {
				t.Fatalf("(%d+%d).Diff(%d) = %d", base, n, base, d)
			}
			if d := base.Diff(q); d != -int32(n) {
				t.Fatalf("%d.Diff(%d+%d) = %d", base, base, n, d)
			}
			if q.Sub(n) != base {
				t.Fatalf("(%d+%d)-%d != %d", base, n, n, base)
			}
			if n > 0 && (!base.Less(q) || q.Less(base)) {
				t.Fatalf("%d should be before %d", base, q)
			}
		}
	}
}
