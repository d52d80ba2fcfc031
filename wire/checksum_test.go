package wire_test

import (
	"encoding/binary"
	"net/netip"
	"testing"

	"github.com/rocesim/rocesim/wire"
)

// TestCompleteChecksum: a UDP checksum left for offload (here a stale
// partial value) is completed to the one the sender's stack would have
// written, over IPv4 and IPv6; TCP too; rxe's "no checksum" over IPv4
// stays zero; anything else is not touched.
func TestCompleteChecksum(t *testing.T) {
	for _, c := range []struct {
		name     string
		src, dst string
	}{{"ipv4", "10.0.0.1", "10.0.0.2"}, {"ipv6", "fd00::1", "fd00::2"}} {
		f := wire.Frame{Src: netip.MustParseAddr(c.src), Dst: netip.MustParseAddr(c.dst), TTL: 64, SrcPort: 0xC000,
			ComputeUDPChecksum: true,
			BTH:                wire.BTHFields{Opcode: wire.OpRCSendOnly, PKey: 0xFFFF, DestQP: 0x11, PSN: 1},
			Payload:            []byte("hello, world")}
		b := make([]byte, 256)
		n, err := wire.Encode(b, &f)
		if err != nil {
			t.Fatal(err)
		}
		b = b[:n]
		var p wire.Packet
		if err := p.DecodeHeaders(b); err != nil {
			t.Fatal(err)
		}
		want := p.UDP.Checksum()
		binary.BigEndian.PutUint16(p.UDP[6:], 0x1234) // a partial sum, as offload leaves it
		if !wire.CompleteChecksum(b) || p.UDP.Checksum() != want || !p.UDPChecksumValid() {
			t.Errorf("%s: checksum %#x after CompleteChecksum, want %#x", c.name, p.UDP.Checksum(), want)
		}
	}
	// rxe over IPv4: no UDP checksum, and none is made.
	f := wire.Frame{Src: netip.MustParseAddr("10.0.0.1"), Dst: netip.MustParseAddr("10.0.0.2"), TTL: 64, SrcPort: 0xC000,
		BTH: wire.BTHFields{Opcode: wire.OpRCSendOnly, PKey: 0xFFFF, DestQP: 0x11, PSN: 1}}
	b := make([]byte, 256)
	n, _ := wire.Encode(b, &f)
	if wire.CompleteChecksum(b[:n]) {
		t.Error("an IPv4 UDP datagram without a checksum was given one")
	}
	// TCP over IPv4: the checksum verifies afterwards (one's complement
	// sum over the pseudo-header and the segment is all ones).
	tcp := make([]byte, wire.EthernetLen+20+20+5)
	binary.BigEndian.PutUint16(tcp[12:], wire.EtherTypeIPv4)
	ip := tcp[wire.EthernetLen:]
	ip[0], ip[8], ip[9] = 0x45, 64, wire.ProtocolTCP
	binary.BigEndian.PutUint16(ip[2:], uint16(len(ip)))
	copy(ip[12:], []byte{10, 0, 0, 1, 10, 0, 0, 2})
	seg := ip[20:]
	binary.BigEndian.PutUint16(seg[0:], 18515)
	binary.BigEndian.PutUint16(seg[2:], 40000)
	seg[12] = 5 << 4
	copy(seg[20:], "hello")
	binary.BigEndian.PutUint16(seg[16:], 0xBEEF)
	if !wire.CompleteChecksum(tcp) {
		t.Fatal("TCP segment not completed")
	}
	var sum uint32
	for _, w := range [][]byte{ip[12:20], {0, wire.ProtocolTCP}, {byte(len(seg) >> 8), byte(len(seg))}, append(append([]byte(nil), seg...), 0)} {
		for i := 0; i+1 < len(w); i += 2 {
			sum += uint32(w[i])<<8 | uint32(w[i+1])
		}
	}
	for sum > 0xFFFF {
		sum = sum>>16 + sum&0xFFFF
	}
	if sum != 0xFFFF {
		t.Errorf("TCP checksum %#x does not verify (sum %#x)", binary.BigEndian.Uint16(seg[16:]), sum)
	}
	if wire.CompleteChecksum([]byte{1, 2, 3}) {
		t.Error("a runt frame was given a checksum")
	}
}
