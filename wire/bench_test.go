package wire_test

import (
	"hash/crc32"
	"math/rand/v2"
	"strconv"
	"testing"

	"github.com/rocesim/rocesim/wire"
)

var benchSizes = []int{64, 1024, 4096}

func benchFrame(tb testing.TB, payload int) (wire.Frame, []byte) {
	r := rand.New(rand.NewPCG(8, uint64(payload)))
	f := testFrame(r, wire.OpRCSendOnly, false, make([]byte, payload))
	return f, encodeOne(tb, &f)
}

// BenchmarkDecodeVerify parses a whole RC SEND frame and verifies its ICRC.
func BenchmarkDecodeVerify(b *testing.B) {
	for _, n := range benchSizes {
		_, frame := benchFrame(b, n)
		b.Run(strconv.Itoa(n), func(b *testing.B) {
			var p wire.Packet
			b.ReportAllocs()
			b.SetBytes(int64(len(frame)))
			for b.Loop() {
				if err := p.Decode(frame); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

// BenchmarkEncode builds a whole RC SEND frame, ICRC and IPv4 checksum included.
func BenchmarkEncode(b *testing.B) {
	for _, n := range benchSizes {
		f, frame := benchFrame(b, n)
		buf := make([]byte, len(frame))
		b.Run(strconv.Itoa(n), func(b *testing.B) {
			b.ReportAllocs()
			b.SetBytes(int64(len(frame)))
			for b.Loop() {
				if _, err := wire.Encode(buf, &f); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

// BenchmarkCRC32 is the yardstick for the decode target: crc32.ChecksumIEEE
// over the same bytes as the frame.
func BenchmarkCRC32(b *testing.B) {
	for _, n := range benchSizes {
		_, frame := benchFrame(b, n)
		b.Run(strconv.Itoa(n), func(b *testing.B) {
			b.ReportAllocs()
			b.SetBytes(int64(len(frame)))
			for b.Loop() {
				_ = crc32.ChecksumIEEE(frame)
			}
		})
	}
}

// TestZeroAllocs holds the per-packet paths to zero allocations.
func TestZeroAllocs(t *testing.T) {
	var p wire.Packet
	for _, n := range benchSizes {
		f, frame := benchFrame(t, n)
		buf := make([]byte, len(frame))
		if a := testing.AllocsPerRun(100, func() {
			if err := p.Decode(frame); err != nil {
				t.Fatal(err)
			}
		}); a != 0 {
			t.Errorf("Decode of %d-byte payload: %v allocs/op", n, a)
		}
		if a := testing.AllocsPerRun(100, func() {
			if _, err := wire.Encode(buf, &f); err != nil {
				t.Fatal(err)
			}
		}); a != 0 {
			t.Errorf("Encode of %d-byte payload: %v allocs/op", n, a)
		}
	}
	// Malformed frames are counted by the receiver, not allocated for.
	bad := []byte{1, 2, 3}
	if a := testing.AllocsPerRun(100, func() { _ = p.Decode(bad) }); a != 0 {
		t.Errorf("Decode of a malformed frame: %v allocs/op", a)
	}
	_, frame := benchFrame(t, 64)
	var fr wire.Frame
	if a := testing.AllocsPerRun(100, func() {
		_ = p.Decode(frame)
		p.Frame(&fr)
		p.UpdateICRC()
	}); a != 0 {
		t.Errorf("Packet.Frame/UpdateICRC: %v allocs/op", a)
	}
}
