package wire_test

import (
	"encoding/binary"
	"errors"
	"fmt"
	"testing"

	"github.com/rocesim/rocesim/wire"
)

// fixIPv4Checksum recomputes the IPv4 header checksum in place, as a router
// does after changing TTL or TOS (RFC 1071), so a test can isolate the ICRC.
func fixIPv4Checksum(frame []byte) {
	if binary.BigEndian.Uint16(frame[12:]) != wire.EtherTypeIPv4 {
		return
	}
	hl := int(frame[wire.EthernetLen]&0xF) * 4
	if hl < wire.IPv4MinLen || wire.EthernetLen+hl > len(frame) {
		return // not a header a router would touch
	}
	h := frame[wire.EthernetLen : wire.EthernetLen+hl]
	h[10], h[11] = 0, 0
	var s uint32
	for i := 0; i+1 < len(h); i += 2 {
		s += uint32(h[i])<<8 | uint32(h[i+1])
	}
	for s > 0xFFFF {
		s = s>>16 + s&0xFFFF
	}
	binary.BigEndian.PutUint16(h[10:], ^uint16(s))
}

// icrcTestFrames is a sample of frames: every generated opcode over both IP
// versions with small payloads, and one frame of each real capture.
func icrcTestFrames(t *testing.T) [][]byte {
	var frames [][]byte
	for _, f := range allTestFrames(3) {
		if len(f.Payload) <= 3 {
			n, _ := f.Len()
			b := make([]byte, n)
			if _, err := wire.Encode(b, &f); err != nil {
				t.Fatal(err)
			}
			frames = append(frames, b)
		}
	}
	var p wire.Packet
	for _, pcap := range captures(t) {
		for _, fr := range readPcap(t, pcap) {
			if p.Decode(fr) == nil {
				frames = append(frames, fr)
				break
			}
		}
	}
	return frames
}

// maskedBits reports, for each bit of frame, whether the ICRC ignores it
// (Annex A17.8): IPv4 TOS, TTL, checksum; IPv6 traffic class, flow label,
// hop limit; UDP checksum; BTH FECN/BECN/reserved byte.
func maskedBits(frame []byte, p *wire.Packet) func(byteOff int, bit uint) bool {
	ip := wire.EthernetLen
	var ipLen int
	v6 := p.IPv6 != nil
	if v6 {
		ipLen = wire.IPv6Len
	} else {
		ipLen = p.IPv4.HeaderLen()
	}
	udp := ip + ipLen
	bth := udp + wire.UDPLen
	return func(off int, bit uint) bool {
		switch {
		case !v6 && (off == ip+1 || off == ip+8 || off == ip+10 || off == ip+11):
			return true
		case v6 && off == ip && bit < 4: // low nibble of byte 0 = traffic class high bits
			return true
		case v6 && (off == ip+1 || off == ip+2 || off == ip+3 || off == ip+7):
			return true
		case off == udp+6 || off == udp+7:
			return true
		case off == bth+4:
			return true
		}
		return false
	}
}

// TestICRCSingleBitFlips flips every bit from the IP header to the end of
// the ICRC. A flip in a covered bit must make the frame fail (as ErrICRC
// whenever the rest of the frame still parses); a flip in a masked bit
// must leave the ICRC valid.
func TestICRCSingleBitFlips(t *testing.T) {
	var p wire.Packet
	for fi, orig := range icrcTestFrames(t) {
		if err := p.Decode(orig); err != nil {
			t.Fatalf("frame %d: %v", fi, err)
		}
		masked := maskedBits(orig, &p)
		end := len(orig) - len(p.Trailer)
		frame := make([]byte, len(orig))
		for off := wire.EthernetLen; off < end; off++ {
			for bit := uint(0); bit < 8; bit++ {
				copy(frame, orig)
				frame[off] ^= 1 << bit
				fixIPv4Checksum(frame)
				err := p.Decode(frame)
				where := fmt.Sprintf("frame %d (%d bytes) byte %d bit %d", fi, len(orig), off, bit)
				if masked(off, bit) {
					if err != nil {
						t.Fatalf("%s is masked in the ICRC, yet decode fails: %v", where, err)
					}
					continue
				}
				if err == nil {
					t.Fatalf("%s is covered by the ICRC, yet the frame verifies", where)
				}
				if p.DecodeHeaders(frame) == nil && !errors.Is(err, wire.ErrICRC) {
					t.Fatalf("%s: headers parse, want ErrICRC, got %v", where, err)
				}
			}
		}
	}
}

// TestICRCMaskedFieldsRewritten changes each masked field to an arbitrary
// value, as routers and switches do, and checks the ICRC still verifies.
func TestICRCMaskedFieldsRewritten(t *testing.T) {
	var p wire.Packet
	for fi, orig := range icrcTestFrames(t) {
		if err := p.Decode(orig); err != nil {
			t.Fatal(err)
		}
		frame := append([]byte(nil), orig...)
		ip := frame[wire.EthernetLen:]
		udp := wire.EthernetLen + wire.IPv6Len
		if p.IPv4 != nil {
			ip[1], ip[8] = 0xB8, 3 // DSCP EF + ECN CE, TTL 3
			udp = wire.EthernetLen + p.IPv4.HeaderLen()
		} else {
			binary.BigEndian.PutUint32(ip, 6<<28|0xA5<<20|0x12345) // traffic class, flow label
			ip[7] = 1                                              // hop limit
		}
		frame[udp+6], frame[udp+7] = 0x12, 0x34 // UDP checksum
		frame[udp+8+4] = 0xC0 | 0x15            // FECN, BECN, reserved bits
		fixIPv4Checksum(frame)
		if err := p.Decode(frame); err != nil {
			t.Errorf("frame %d: masked fields changed, decode: %v", fi, err)
		}
		if !p.BTH.FECN() || !p.BTH.BECN() {
			t.Errorf("frame %d: FECN/BECN not read back", fi)
		}
	}
}

// TestUpdateICRCAfterRewrite rewrites the PSN and the AETH as a fault rule
// does, recomputes the ICRC, and checks the frame verifies with the new values.
func TestUpdateICRCAfterRewrite(t *testing.T) {
	frames := readPcap(t, "testdata/rnr_send.pcap")
	var p wire.Packet
	for _, fr := range frames {
		if p.Decode(fr) != nil || p.AETH == nil {
			continue
		}
		frame := append([]byte(nil), fr...)
		if err := p.Decode(frame); err != nil {
			t.Fatal(err)
		}
		p.BTH.SetPSN(p.BTH.PSN().Add(5))
		p.AETH.SetSyndrome(wire.NAKSyndrome(wire.NAKPSNSequenceError))
		p.AETH.SetMSN(77)
		if err := p.Decode(frame); !errors.Is(err, wire.ErrICRC) {
			t.Fatalf("rewritten frame must fail before UpdateICRC, got %v", err)
		}
		p.UpdateICRC()
		if err := p.Decode(frame); err != nil {
			t.Fatalf("after UpdateICRC: %v", err)
		}
		if p.AETH.MSN() != 77 || !p.AETH.Syndrome().IsNAK() {
			t.Fatal("rewritten fields not read back")
		}
		return
	}
	t.Fatal("no ACK in rnr_send.pcap")
}

// TestUpdateICRCRefreshesUDPChecksum rewrites the PSN of an IPv6 frame,
// whose UDP checksum covers the ICRC, and checks both are made right.
func TestUpdateICRCRefreshesUDPChecksum(t *testing.T) {
	for _, f := range allTestFrames(9) {
		if !f.Src.Is6() || len(f.Payload) != 3 {
			continue
		}
		b := encodeOne(t, &f)
		var p wire.Packet
		if err := p.Decode(b); err != nil || !p.UDPChecksumValid() || p.UDP.Checksum() == 0 {
			t.Fatalf("%s: fresh IPv6 frame: err %v, UDP checksum %#x valid %v", f.BTH.Opcode, err, p.UDP.Checksum(), p.UDPChecksumValid())
		}
		p.BTH.SetPSN(p.BTH.PSN().Add(1))
		if p.UDPChecksumValid() {
			t.Fatal("UDP checksum still valid after a rewrite")
		}
		p.UpdateICRC()
		if err := p.Decode(b); err != nil || !p.UDPChecksumValid() {
			t.Fatalf("%s: after UpdateICRC: err %v, UDP checksum valid %v", f.BTH.Opcode, err, p.UDPChecksumValid())
		}
	}
}
