package fabric

import (
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
