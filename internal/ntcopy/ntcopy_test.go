package ntcopy

import (
	"bytes"
	"testing"
)

// TestCopyIsCopy: whatever the length and the alignment of either end,
// Copy leaves dst as copy would, touches nothing past the count it
// returns, and returns copy's count.
func TestCopyIsCopy(t *testing.T) {
	src := make([]byte, 6000)
	for i := range src {
		src[i] = byte(i*7 + i>>8)
	}
	for _, n := range []int{0, 1, 63, 64, 255, 256, 257, 1000, 1082, 1088, 4096, 4159} {
		for _, do := range []int{0, 1, 8, 15, 16, 33, 63} {
			for _, so := range []int{0, 3, 16, 61} {
				want := bytes.Repeat([]byte{0xEE}, 5200)
				got := bytes.Repeat([]byte{0xEE}, 5200)
				wn := copy(want[do:do+n], src[so:so+n])
				gn := Copy(got[do:do+n], src[so:so+n])
				if gn != wn || !bytes.Equal(got, want) {
					t.Fatalf("n=%d dst+%d src+%d: Copy returned %d (copy %d), bytes differ: %v", n, do, so, gn, wn, !bytes.Equal(got, want))
				}
			}
		}
	}
	// Unequal lengths: the shorter decides.
	dst := make([]byte, 300)
	if k := Copy(dst, src[:1000]); k != 300 || !bytes.Equal(dst, src[:300]) {
		t.Fatalf("dst shorter: %d", k)
	}
	if k := Copy(make([]byte, 1000), src[:299]); k != 299 {
		t.Fatalf("src shorter: %d", k)
	}
}

// BenchmarkCopy: a frame's worth into a buffer, as the fabric copies.
func BenchmarkCopy(b *testing.B) {
	src, dst := make([]byte, 1082), make([]byte, 1280)
	b.ReportAllocs()
	b.SetBytes(int64(len(src)))
	for b.Loop() {
		Copy(dst, src)
	}
}
