package wire_test

import (
	"hash/crc32"
	"math/rand/v2"
	"strconv"
	"testing"
	"time"

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

// BenchmarkDecodeVsCRC32 measures the decode+verify target directly: it
// alternates blocks of Decode and of crc32.ChecksumIEEE over the same
// 4 KiB-payload frame, so machine noise hits both alike, and reports the
// ratio of their times (target: at most 1.3).
func BenchmarkDecodeVsCRC32(b *testing.B) {
	_, frame := benchFrame(b, 4096)
	var p wire.Packet
	const block = 256
	var dec, crc time.Duration
	b.ReportAllocs()
	for b.Loop() {
		t0 := time.Now()
		for range block {
			if err := p.Decode(frame); err != nil {
				b.Fatal(err)
			}
		}
		t1 := time.Now()
		for range block {
			_ = crc32.ChecksumIEEE(frame)
		}
		t2 := time.Now()
		dec += t1.Sub(t0)
		crc += t2.Sub(t1)
	}
	b.ReportMetric(float64(dec)/float64(crc), "decode/crc32")
	b.ReportMetric(float64(dec)/float64(b.N*block), "decode-ns/frame")
}
