package nic

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestRingGrowsAsUsed: a queue gets storage as elements arrive, up to its
// bound, keeping their order across each move, and trim gives back what a
// burst left unused once use has fallen, never below what steady use needs.
func TestRingGrowsAsUsed(t *testing.T) {
	var r ring[int]
	r.init(16)
	assert.Empty(t, r.slots, "no storage before the first element")
	next, old := 0, 0
	push := func(n int) {
		for range n {
			require.False(t, r.full())
			*r.grow() = next
			next++
		}
	}
	pop := func(n int) {
		for range n {
			require.Equal(t, old, *r.at(0), "order kept")
			r.shift()
			old++
		}
	}
	push(3)
	assert.Len(t, r.slots, ringMin)
	pop(2)
	push(9) // wraps, then doubles twice with 10 held
	assert.Len(t, r.slots, 16)
	push(6)
	assert.True(t, r.full(), "bounded by init's n")
	pop(16)
	r.trim()
	assert.Len(t, r.slots, 16, "a burst just ended: nothing given back yet")
	for range 100 { // steady use of at most 2, posting as a QP does
		r.trim()
		push(2)
		pop(2)
	}
	r.trim()
	assert.Len(t, r.slots, ringMin, "use fell: storage back to what it needs")
	for range 64 {
		push(2)
		pop(2)
		r.trim()
	}
	assert.Len(t, r.slots, ringMin)
	allocs := testing.AllocsPerRun(100, func() {
		for range 4 {
			*r.grow() = 0
		}
		for range 4 {
			r.shift()
		}
		r.trim()
	})
	assert.Zero(t, allocs, "steady use allocates nothing")
}

// TestQPNTable: a QP is found by number anywhere in the 24-bit QPN space
// the wire can name, on either side of the pages kept in the table
// itself, a page goes when its last QP does, and a number never taken
// finds nothing.
func TestQPNTable(t *testing.T) {
	var tb qpnTable
	qps := map[uint32]*QP{}
	for _, n := range []uint32{1, 0x11, 0x12, 0x1ff, 0x200, 0x7ff, 0x800, 0x9ff, rxeMaxQPIndex} {
		qps[n] = &QP{num: n}
		tb.put(n, qps[n])
	}
	for n, qp := range qps {
		assert.Same(t, qp, tb.get(n))
	}
	for _, n := range []uint32{0, 0x13, 0x300, 0x7fe, 0x801, 0xa00, rxeMaxQPIndex + 1, 1<<24 - 1} {
		assert.Nil(t, tb.get(n), "QPN %#x", n)
	}
	tb.del(0x200)
	assert.Nil(t, tb.get(0x200))
	assert.Nil(t, tb.low[2], "the page of 0x200 went with its last QP")
	tb.del(0x1ff)
	assert.Nil(t, tb.low[1], "0x1ff was page 1's only QP")
	tb.del(0x11)
	assert.NotNil(t, tb.low[0], "QPN 1 and 0x12 still live in page 0")
	assert.Same(t, qps[0x12], tb.get(0x12))
	tb.del(0x800)
	assert.Nil(t, tb.high[0], "0x800 was the first page past the table's own")
	assert.Same(t, qps[0x9ff], tb.get(0x9ff))
	assert.Same(t, qps[0x7ff], tb.get(0x7ff))
}

// TestRingWrapsLikeModulo runs a ring whose storage is not a power of two
// (limit 6: 4 slots, then 6) through many turns and checks every element
// against a plain FIFO, so the subtraction that replaced the modulo
// (ring.wrap) finds the same slots.
func TestRingWrapsLikeModulo(t *testing.T) {
	var r ring[int]
	r.init(6)
	var fifo []int
	next := 0
	for step := range 200 {
		if !r.full() && (step%3 != 2 || r.empty()) {
			*r.grow() = next
			fifo = append(fifo, next)
			next++
		} else {
			r.shift()
			fifo = fifo[1:]
		}
		require.Equal(t, len(fifo), r.size)
		for i, v := range fifo {
			require.Equal(t, v, *r.at(i), "step %d, element %d", step, i)
		}
	}
	assert.Equal(t, 6, len(r.slots))
}
