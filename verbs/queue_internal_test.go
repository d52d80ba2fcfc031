package verbs

import "testing"

// TestQueueKeepsOrderAcrossGrowth: pushes and pops interleaved so the
// ring wraps before it grows; every value comes out once, in order.
func TestQueueKeepsOrderAcrossGrowth(t *testing.T) {
	var q queue[int]
	next, want := 0, 0
	for round := range 50 {
		for range round%7 + 3 {
			q.push(next)
			next++
		}
		for range round%5 + 1 {
			v, ok := q.pop()
			if !ok || v != want {
				t.Fatalf("round %d: pop gave %d, %v; want %d", round, v, ok, want)
			}
			want++
		}
	}
	for want < next {
		if v, ok := q.pop(); !ok || v != want {
			t.Fatalf("draining: pop gave %d, %v; want %d", v, ok, want)
		}
		want++
	}
	if _, ok := q.pop(); ok {
		t.Fatal("pop on an empty queue gave a value")
	}
}
