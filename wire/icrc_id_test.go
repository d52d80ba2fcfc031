package wire

import (
	"math/rand/v2"
	"net/netip"
	"testing"
)

// TestRecoverIPv4ID builds RoCE v2 frames with random IPv4 IDs and
// payload lengths, zeroes the ID (what a receiver on a UDP socket
// rebuilds), and recovers it from the ICRC; then it corrupts one payload
// bit of each and counts how many still yield an ID (the check keeps 16
// of its 32 bits: about one in 65536 should).
func TestRecoverIPv4ID(t *testing.T) {
	r := rand.New(rand.NewPCG(4791, 17))
	buf := make([]byte, 9000)
	var p Packet
	const n = 2000
	passed := 0
	for i := range n {
		id := uint16(r.Uint32())
		payload := make([]byte, r.IntN(4097))
		for j := range payload {
			payload[j] = byte(r.Uint32())
		}
		f := Frame{Src: netip.MustParseAddr("192.0.2.1"), Dst: netip.MustParseAddr("192.0.2.2"), TTL: 64,
			IPID: id, IPFlags: IPv4FlagDF, SrcPort: 0xC000 + uint16(i),
			BTH:     BTHFields{Opcode: OpRCSendOnly, PKey: 0xFFFF, DestQP: 0x11, PSN: PSN(i)},
			Payload: payload}
		l, err := Encode(buf, &f)
		if err != nil {
			t.Fatal(err)
		}
		frame := buf[:l]
		frame[EthernetLen+4], frame[EthernetLen+5] = 0, 0
		IPv4(frame[EthernetLen:]).SetChecksum()
		if err := p.DecodeHeaders(frame); err != nil {
			t.Fatal(err)
		}
		got, ok := p.RecoverIPv4ID()
		if !ok || got != id {
			t.Fatalf("frame %d (payload %d bytes): recovered %#x, %v; want %#x", i, len(payload), got, ok, id)
		}
		if len(payload) == 0 {
			continue
		}
		p.Payload[r.IntN(len(p.Payload))] ^= 1 << r.IntN(8)
		if _, ok := p.RecoverIPv4ID(); ok {
			passed++
		}
	}
	if passed > 2 {
		t.Fatalf("%d of %d corrupted frames yielded an ID; expect about %d/65536", passed, n, n)
	}
}

// TestRecoverIPv4IDNotIPv6 checks an IPv6 packet (no ID) is refused.
func TestRecoverIPv4IDNotIPv6(t *testing.T) {
	f := Frame{Src: netip.MustParseAddr("fd00::1"), Dst: netip.MustParseAddr("fd00::2"), TTL: 64, ComputeUDPChecksum: true,
		BTH: BTHFields{Opcode: OpRCSendOnly, PKey: 0xFFFF, DestQP: 0x11}, Payload: []byte("x")}
	buf := make([]byte, 256)
	l, err := Encode(buf, &f)
	if err != nil {
		t.Fatal(err)
	}
	var p Packet
	if err := p.DecodeHeaders(buf[:l]); err != nil {
		t.Fatal(err)
	}
	if _, ok := p.RecoverIPv4ID(); ok {
		t.Fatal("recovered an IPv4 ID from an IPv6 packet")
	}
}
