package fabric

import (
	"bytes"
	"testing"
	"unsafe"
)

// TestSizeClasses: every frame up to MaxFrame has a class that holds it,
// wasting at most a quarter of its size beyond the smallest class, and a
// buffer's size gives back its class (put files it where get took it).
func TestSizeClasses(t *testing.T) {
	for n := 1; n <= MaxFrame; n++ {
		c := sizeClass(n)
		if c >= numClasses || classSize(c) < n {
			t.Fatalf("a %d-byte frame: class %d of %d holds %d bytes", n, c, numClasses, classSize(c))
		}
		if s := classSize(c); s > 1<<minClassShift && 4*s > 5*n+4*32 {
			t.Fatalf("a %d-byte frame gets %d bytes, over a quarter more", n, s)
		}
		if c > 0 && classSize(c-1) >= n {
			t.Fatalf("a %d-byte frame: class %d, but class %d (%d bytes) holds it", n, c, c-1, classSize(c-1))
		}
	}
	for c := range numClasses {
		if sizeClass(classSize(c)) != c {
			t.Fatalf("class %d: its %d-byte buffers are filed as class %d", c, classSize(c), sizeClass(classSize(c)))
		}
	}
	if sizeClass(1098) == sizeClass(2048) {
		t.Fatal("a 1,098-byte WRITE packet is held in a 2 KiB buffer")
	}
}

// TestFrameBufOneLine: a frame's bookkeeping fills one 64-byte cache
// line exactly, so that in a chunk (24 KiB, which Go's allocator places
// on a 64-byte boundary) each buffer has a line of its own: every hop of
// a frame in a large world finds it cold (see frameBuf).
func TestFrameBufOneLine(t *testing.T) {
	if s := unsafe.Sizeof(frameBuf{}); s != 64 {
		t.Fatalf("frameBuf is %d bytes, not 64", s)
	}
}

// TestFifo: the queue gives back what was pushed, oldest first, through
// growth, wrap-around and emptying, and peek (which reads the copy of the
// oldest entry kept beside the header) always agrees with the next pop.
func TestFifo(t *testing.T) {
	var q fifo[int32]
	var ref []int32
	next := int32(0)
	rng := uint32(1)
	empties := 0
	for step := range 10000 {
		rng = rng*1664525 + 1013904223
		// Phases of 500 steps: pushes three times in four, then pops
		// three times in four, so the queue grows (and its storage
		// with it), wraps, and empties again and again.
		push := rng>>30 < 3
		if step/500%2 == 1 {
			push = !push
		}
		if push {
			q.push(next)
			ref = append(ref, next)
			next++
		} else {
			v, ok := q.pop()
			if ok != (len(ref) > 0) || ok && v != ref[0] {
				t.Fatalf("step %d: pop = %d, %v; want %v", step, v, ok, ref)
			}
			if ok {
				ref = ref[1:]
				if len(ref) == 0 {
					empties++
				}
			}
		}
		v, ok := q.peek()
		if ok != (len(ref) > 0) || ok && v != ref[0] || q.size != len(ref) {
			t.Fatalf("step %d: peek = %d, %v, size %d; want the head of %d entries", step, v, ok, q.size, len(ref))
		}
	}
	for _, want := range ref {
		if v, ok := q.pop(); !ok || v != want {
			t.Fatalf("draining: pop = %d, %v; want %d", v, ok, want)
		}
	}
	if _, ok := q.peek(); ok {
		t.Fatal("peek found an entry in the drained queue")
	}
	if empties < 5 {
		t.Errorf("the queue emptied %d times: the test no longer exercises emptying", empties)
	}
}

// TestFillPastTheCaches: a pool whose buffers outgrow the caches copies
// frames in with non-temporal stores (fill), and every frame's bytes are
// what a small pool's ordinary copy puts there, whatever its length.
func TestFillPastTheCaches(t *testing.T) {
	var small, large bufPool
	large.bytes = streamBytes
	for _, n := range []int{14, 60, 255, 256, 300, 1082, 1500, 4154, MaxFrame} {
		frame := make([]byte, n)
		for i := range frame {
			frame[i] = byte(i*13 + n)
		}
		a, b := small.get(n), large.get(n)
		// Buffers come back dirty: fill must overwrite, not merge.
		for i := range b.data {
			a.data[i], b.data[i] = 0xA5, 0xA5
		}
		if na, nb := small.fill(a, frame), large.fill(b, frame); na != int32(n) || nb != int32(n) {
			t.Fatalf("%d bytes: fill returned %d and %d", n, na, nb)
		}
		if !bytes.Equal(a.data, b.data) || !bytes.Equal(b.data[:n], frame) {
			t.Fatalf("%d bytes: the large pool's buffer differs", n)
		}
	}
	if small.bytes >= streamBytes {
		t.Fatalf("the small pool reached %d bytes", small.bytes)
	}
}
