package wire_test

import (
	"bytes"
	"math/rand/v2"
	"testing"

	"github.com/rocesim/rocesim/wire"
)

// peekAgrees fails t unless Peek accepts frame exactly when DecodeHeaders
// does, and returns the same BTH, opcode description and AETH.
func peekAgrees(t testing.TB, p *wire.Packet, frame []byte) {
	t.Helper()
	bth, info, aeth, ok := wire.Peek(frame)
	err := p.DecodeHeaders(frame)
	head := frame[:min(len(frame), 96)] // enough to see the headers
	if ok != (err == nil) {
		t.Fatalf("Peek ok=%v, DecodeHeaders %v, %d-byte frame starting % x", ok, err, len(frame), head)
	}
	if !ok {
		if bth != nil || info != nil || aeth != nil {
			t.Fatalf("Peek refused a frame but returned views, %d-byte frame starting % x", len(frame), head)
		}
		return
	}
	if !bytes.Equal(bth, p.BTH) || info != p.Info || !bytes.Equal(aeth, p.AETH) || (aeth == nil) != (p.AETH == nil) {
		t.Fatalf("Peek gives BTH % x, %v, AETH % x; DecodeHeaders BTH % x, %v, AETH % x; %d-byte frame starting % x",
			bth, info.Name, aeth, p.BTH, p.Info.Name, p.AETH, len(frame), head)
	}
}

// mutations is frame with one byte changed at each of its first 96
// offsets (four ways), then frame cut at every length, and grown by 1 to
// 4 bytes with the IP and UDP lengths fixed (so the transport is what is
// wrong): the ways a fault plan's corrupt, truncate and rewrite rules
// leave a frame.
func mutations(frame []byte) [][]byte {
	var out [][]byte
	for i := range min(len(frame), 96) {
		for _, f := range []func(byte) byte{
			func(b byte) byte { return b ^ 0x01 },
			func(b byte) byte { return b ^ 0x80 },
			func(byte) byte { return 0 },
			func(byte) byte { return 0xFF },
		} {
			m := bytes.Clone(frame)
			m[i] = f(m[i])
			out = append(out, m)
			if len(m) > wire.EthernetLen && m[wire.EthernetLen]>>4 == 4 {
				// The same change with the IPv4 checksum made good
				// again, so the checks after it are reached too.
				fixed := bytes.Clone(m)
				fixIPv4Checksum(fixed)
				out = append(out, fixed)
			}
		}
	}
	for n := range len(frame) {
		out = append(out, frame[:n])
	}
	if len(frame) > wire.EthernetLen+wire.IPv4MinLen && frame[wire.EthernetLen]>>4 == 4 {
		for d := 1; d <= 4; d++ {
			out = append(out, setLengths(bytes.Clone(frame), d))
		}
	}
	return out
}

// TestPeekAgreesWithDecodeHeaders holds Peek to DecodeHeaders on every
// frame of the real captures, on a frame of every opcode over IPv4 and
// IPv6 with payloads of 0 to 9 bytes, and on each of those mutated.
func TestPeekAgreesWithDecodeHeaders(t *testing.T) {
	var frames [][]byte
	for _, path := range captures(t) {
		frames = append(frames, readPcap(t, path)...)
	}
	r := rand.New(rand.NewPCG(24, 24))
	for _, op := range wire.AllOpcodes() {
		for _, v6 := range []bool{false, true} {
			for n := range 10 {
				f := testFrame(r, op, v6, make([]byte, n))
				if _, err := f.Len(); err != nil {
					continue // the opcode carries no payload
				}
				frames = append(frames, encodeOne(t, &f))
			}
		}
	}
	var p wire.Packet
	checked := 0
	for _, fr := range frames {
		peekAgrees(t, &p, fr)
		for _, m := range mutations(fr) {
			peekAgrees(t, &p, m)
			checked++
		}
	}
	if checked < 100000 {
		t.Fatalf("only %d mutated frames checked", checked)
	}
}

// FuzzPeek holds Peek to DecodeHeaders on arbitrary frames, seeded with
// the real captures.
func FuzzPeek(f *testing.F) {
	for _, path := range captures(f) {
		for _, fr := range readPcap(f, path) {
			f.Add(fr)
		}
	}
	var p wire.Packet
	f.Fuzz(func(t *testing.T, frame []byte) { peekAgrees(t, &p, frame) })
}

// TestPeekAllocatesNothing: the stall watch peeks at every frame.
func TestPeekAllocatesNothing(t *testing.T) {
	fr := readPcap(t, "testdata/rc_send.pcap")[0]
	if n := testing.AllocsPerRun(100, func() { wire.Peek(fr) }); n != 0 {
		t.Fatalf("Peek allocates %v times", n)
	}
}

func BenchmarkPeek(b *testing.B) {
	fr := readPcap(b, "testdata/rdma_write.pcap")
	b.ReportAllocs()
	for i := 0; b.Loop(); i++ {
		wire.Peek(fr[i%len(fr)])
	}
}

func BenchmarkDecodeHeadersForPeek(b *testing.B) {
	fr := readPcap(b, "testdata/rdma_write.pcap")
	var p wire.Packet
	b.ReportAllocs()
	for i := 0; b.Loop(); i++ {
		_ = p.DecodeHeaders(fr[i%len(fr)])
	}
}
