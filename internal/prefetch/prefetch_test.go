package prefetch

import (
	"testing"
	"unsafe"
)

// TestLinesNeverFaults: a prefetch is a hint, so addresses no program
// could load from (nil, the top of the address space, a range running
// past the end of memory) must not fault, nor a range whose last byte
// lies one line on; a real object is read no differently after it.
func TestLinesNeverFaults(t *testing.T) {
	b := make([]byte, 1000)
	for i := range b {
		b[i] = byte(i)
	}
	Lines(nil, 0)
	Lines(nil, 4096)
	Lines(unsafe.Pointer(unsafe.SliceData(b)), uintptr(len(b)))
	Lines(unsafe.Pointer(&b[63]), 2)
	for _, c := range []struct{ p, n uintptr }{
		{1, 63},
		{^uintptr(0) &^ 63, 64}, // the last line of the address space
		{^uintptr(0) - 10, 11},
		{1 << 47, 1 << 20}, // unmapped, past user space on x86-64
	} {
		lines(c.p, c.n)
	}
	for i := range b {
		if b[i] != byte(i) {
			t.Fatalf("byte %d changed to %d", i, b[i])
		}
	}
}

func BenchmarkLines(b *testing.B) {
	buf := make([]byte, 1<<20)
	b.ReportAllocs()
	for i := 0; b.Loop(); i++ {
		Lines(unsafe.Pointer(&buf[(i*4096)&(len(buf)-1)]), 128)
	}
}
