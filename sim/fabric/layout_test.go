package fabric

import (
	"testing"
	"unsafe"
)

// TestRecordsFillLines: every frame record begins a cache line, so that
// the record of a frame gone cold costs one miss at each visit. The
// record is one line long, and its chunk must be placed where a line
// begins: a chunk the runtime allocates with a header before it (a small
// object with pointers) puts every record across two lines.
func TestRecordsFillLines(t *testing.T) {
	if s := unsafe.Sizeof(frameBuf{}); s != 64 {
		t.Fatalf("a frame record is %d bytes, not one 64-byte line", s)
	}
	if s := unsafe.Sizeof(bufChunk{}); s <= 32<<10 {
		t.Fatalf("a chunk of records is %d bytes: at most 32 KiB, the runtime allocates it as a small object, with a header before it", s)
	}
	var p bufPool
	for range 3 * chunkSize {
		p.record()
	}
	for i, c := range p.chunks {
		if a := uintptr(unsafe.Pointer(&c.bufs[0])); a%64 != 0 {
			t.Errorf("chunk %d: its records begin %d bytes into a line", i, a%64)
		}
	}
}
