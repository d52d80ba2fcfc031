package prefetch

import (
	"testing"
	"unsafe"
)

// TestSpan: the lines a range asks for are those it touches, from the
// line of its first byte to the line of its last, and a range past the
// top of the address space stops at the last line rather than wrapping
// round to a count of nearly 2^58 lines.
func TestSpan(t *testing.T) {
	const top = ^uintptr(0)
	for _, c := range []struct {
		p, n        uintptr
		first, more uintptr
	}{
		{0, 1, 0, 0},
		{0, 64, 0, 0},
		{0, 65, 0, 1},
		{63, 1, 0, 0},
		{63, 2, 0, 1},     // straddles two lines
		{100, 128, 64, 2}, // 100..227: lines 64, 128, 192
		{4096, 4096, 4096, 63},
		{top &^ 63, 64, top &^ 63, 0}, // the last line
		{top - 10, 11, top &^ 63, 0},
		{top - 10, 100, top &^ 63, 0}, // past the top: clipped
		{top&^63 - 64, 1 << 20, top&^63 - 64, 1},
		{1 << 12, top, 1 << 12, (top - 1<<12) / 64}, // a length that wraps
	} {
		first, more := span(c.p, c.n)
		if first != c.first || more != c.more {
			t.Errorf("span(%#x, %#x) = %#x, %d; want %#x, %d", c.p, c.n, first, more, c.first, c.more)
		}
	}
}

// TestLinesNeverFaults: a prefetch is a hint, so addresses no program
// could load from (nil, the top of the address space, unmapped memory)
// must not fault, and a range past the top must end; a real object is
// read no differently after it.
func TestLinesNeverFaults(t *testing.T) {
	b := make([]byte, 1000)
	for i := range b {
		b[i] = byte(i)
	}
	for _, c := range []struct{ p, n uintptr }{
		{0, 0},
		{0, 4096},
		{1, 63},
		{^uintptr(0) &^ 63, 64},
		{^uintptr(0) - 10, 100},           // runs past the top
		{^uintptr(0) >> 1 &^ 63, 1 << 20}, // unmapped: past user space
		{uintptr(unsafe.Pointer(unsafe.SliceData(b))), uintptr(len(b))},
	} {
		Lines(c.p, c.n)
	}
	for i := range b {
		if b[i] != byte(i) {
			t.Fatalf("byte %d changed to %d", i, b[i])
		}
	}
}

func BenchmarkLines(b *testing.B) {
	buf := make([]byte, 1<<20)
	base := uintptr(unsafe.Pointer(unsafe.SliceData(buf)))
	b.ReportAllocs()
	for i := uintptr(0); b.Loop(); i++ {
		Lines(base+(i*4096)&(1<<20-1), 128)
	}
}
