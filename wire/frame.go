package wire

import (
	"encoding/binary"
	"hash/crc32"
	"net/netip"
)

// Frame describes a whole RoCE v2 frame field by field: the structured
// form at the edges (the NIC building packets, tests, tools). Encode turns
// it into bytes; Packet.Frame turns decoded bytes back into it.
//
// The opcode in BTH decides which extension headers are written; fields of
// headers the opcode does not carry are ignored. Lengths, the pad count,
// the IPv4 header checksum and the ICRC are derived, never taken from here.
type Frame struct {
	DstMAC, SrcMAC MAC

	// Src and Dst are both IPv4 or both IPv6; they select the IP version.
	Src, Dst netip.Addr
	// TOS is the IPv4 TOS byte or the IPv6 traffic class.
	TOS uint8
	// TTL is the IPv4 TTL or the IPv6 hop limit (rxe: 64).
	TTL uint8
	// IPID is the IPv4 identification (rxe increments it per packet).
	IPID uint16
	// IPFlags is the IPv4 3-bit flags field (rxe: IPv4FlagDF).
	IPFlags uint8
	// IPOptions are IPv4 options, a multiple of 4 bytes, at most 40.
	IPOptions []byte
	// FlowLabel is the IPv6 flow label (20 bits).
	FlowLabel uint32

	SrcPort     uint16 // UDP source port; see UDPSourcePort
	UDPChecksum uint16 // written as given unless ComputeUDPChecksum; rxe sends 0
	// ComputeUDPChecksum fills in the real UDP checksum instead of
	// UDPChecksum. Over IPv6 a zero checksum is illegal (RFC 8200 §8.1) and
	// Wireshark flags it, so frames rocesim builds for IPv6 set this. The
	// checksum is outside the ICRC.
	ComputeUDPChecksum bool

	BTH          BTHFields
	DETH         DETHFields
	RETH         RETHFields
	AtomicETH    AtomicETHFields
	AETH         AETHFields
	AtomicAckETH uint64 // original remote data
	ImmDt        uint32
	IETH         uint32 // R_Key to invalidate

	Payload []byte
	// PadBytes are the contents of the pad bytes (zero when built by
	// rocesim); only the first (-len(Payload))&3 are used.
	PadBytes [3]byte
	// Trailer is anything after the IP datagram (Ethernet padding),
	// kept so that a decoded frame re-encodes byte for byte.
	Trailer []byte
}

// layout is the size arithmetic shared by Encode and Len.
type layout struct {
	ipHdr, udpLen, pad, total int
	info                      *OpInfo
}

func (f *Frame) layout() (layout, error) {
	var l layout
	l.info = f.BTH.Opcode.Info()
	if !l.info.Valid {
		return l, ErrUnknownOpcode
	}
	if len(f.Payload) > 0 && !l.info.Has(HasPayload) {
		return l, ErrBadFrame
	}
	switch {
	case f.Src.Is4() && f.Dst.Is4():
		if len(f.IPOptions)%4 != 0 || len(f.IPOptions) > 40 {
			return l, ErrBadFrame
		}
		l.ipHdr = IPv4MinLen + len(f.IPOptions)
	case f.Src.Is6() && f.Dst.Is6():
		if len(f.IPOptions) != 0 {
			return l, ErrBadFrame
		}
		l.ipHdr = IPv6Len
	default:
		return l, ErrBadFrame
	}
	l.pad = -len(f.Payload) & 3
	l.udpLen = UDPLen + BTHLen + l.info.HdrLen + len(f.Payload) + l.pad + ICRCLen
	if l.udpLen+l.ipHdr > 0xFFFF {
		return l, ErrBadFrame
	}
	l.total = EthernetLen + l.ipHdr + l.udpLen + len(f.Trailer)
	return l, nil
}

// PayloadOffset returns where Encode puts f's payload in the frame: the
// offset of its first byte, after the headers f's addresses and opcode
// call for (a frame Encode refuses has no payload offset; the number is
// then meaningless). A caller that builds frames in buffers of its own
// can gather the payload there first and set f.Payload to that slice of
// the buffer: Encode then leaves it in place instead of copying it again
// (the NIC's send path: one copy of each packet's payload, not two).
func (f *Frame) PayloadOffset() int {
	ip := IPv6Len
	if f.Dst.Is4() {
		ip = IPv4MinLen + len(f.IPOptions)
	}
	return EthernetLen + ip + UDPLen + BTHLen + f.BTH.Opcode.Info().HdrLen
}

// Len returns the number of bytes Encode will write for f.
func (f *Frame) Len() (int, error) {
	l, err := f.layout()
	return l.total, err
}

// Encode writes f as a complete Ethernet frame into b and returns its
// length. It computes the IP and UDP lengths, the IPv4 header checksum,
// the BTH pad count and the ICRC. It does not allocate. f.Payload may
// already sit in b where it belongs (see PayloadOffset); any other
// overlap with b is not allowed.
func Encode(b []byte, f *Frame) (int, error) {
	l, err := f.layout()
	if err != nil {
		return 0, err
	}
	if len(b) < l.total {
		return 0, ErrBufferTooSmall
	}
	v6 := f.Src.Is6()
	ip := b[EthernetLen : EthernetLen+l.ipHdr]
	udp := UDP(b[EthernetLen+l.ipHdr:])
	bth := BTH(udp[UDPLen:])
	end := EthernetLen + l.ipHdr + l.udpLen // end of the IP datagram

	// Headers first with the ICRC's masked values in place, so the CRC runs
	// over the buffer itself in one pass.
	if v6 {
		binary.BigEndian.PutUint32(ip[0:], 6<<28|0xFFFFFFF)
		binary.BigEndian.PutUint16(ip[4:], uint16(l.udpLen))
		ip[6] = ProtocolUDP
		ip[7] = 0xFF
		s, d := f.Src.As16(), f.Dst.As16()
		copy(ip[8:24], s[:])
		copy(ip[24:40], d[:])
	} else {
		ip[0] = 4<<4 | byte(l.ipHdr/4)
		ip[1] = 0xFF
		binary.BigEndian.PutUint16(ip[2:], uint16(l.ipHdr+l.udpLen))
		binary.BigEndian.PutUint16(ip[4:], f.IPID)
		binary.BigEndian.PutUint16(ip[6:], uint16(f.IPFlags&7)<<13)
		ip[8] = 0xFF
		ip[9] = ProtocolUDP
		ip[10], ip[11] = 0xFF, 0xFF
		s, d := f.Src.As4(), f.Dst.As4()
		copy(ip[12:16], s[:])
		copy(ip[16:20], d[:])
		copy(ip[20:], f.IPOptions)
	}
	binary.BigEndian.PutUint16(udp[0:], f.SrcPort)
	binary.BigEndian.PutUint16(udp[2:], UDPPortRoCEv2)
	binary.BigEndian.PutUint16(udp[4:], uint16(l.udpLen))
	udp[6], udp[7] = 0xFF, 0xFF

	bf := f.BTH
	bf.PadCount = uint8(l.pad)
	bth.Encode(&bf)
	bth[bthFB] = 0xFF
	off := BTHLen
	h := l.info.Headers
	if h&HasDETH != 0 {
		DETH(bth[off:]).Encode(&f.DETH)
		off += DETHLen
	}
	if h&HasRETH != 0 {
		RETH(bth[off:]).Encode(&f.RETH)
		off += RETHLen
	}
	if h&HasAtomicETH != 0 {
		AtomicETH(bth[off:]).Encode(&f.AtomicETH)
		off += AtomicETHLen
	}
	if h&HasAETH != 0 {
		AETH(bth[off:]).Encode(&f.AETH)
		off += AETHLen
	}
	if h&HasAtomicAckETH != 0 {
		AtomicAckETH(bth[off:]).SetOrigRemoteData(f.AtomicAckETH)
		off += AtomicAckETHLen
	}
	if h&HasImmDt != 0 {
		ImmDt(bth[off:]).Set(f.ImmDt)
		off += ImmDtLen
	}
	if h&HasIETH != 0 {
		IETH(bth[off:]).Set(f.IETH)
		off += IETHLen
	}
	if len(f.Payload) > 0 && &f.Payload[0] == &bth[off] {
		off += len(f.Payload) // already in place (PayloadOffset)
	} else {
		off += copy(bth[off:], f.Payload)
	}
	off += copy(bth[off:off+l.pad], f.PadBytes[:])

	// The 8 bytes before the IP header (source MAC and EtherType) stand in
	// for the masked LRH while the CRC runs, then get their real values.
	copy(b[EthernetLen-8:EthernetLen], allOnes[:])
	icrcOff := end - ICRCLen
	putICRC(b[icrcOff:], crc32.ChecksumIEEE(b[EthernetLen-8:icrcOff]))

	copy(b[0:6], f.DstMAC[:])
	copy(b[6:12], f.SrcMAC[:])
	if v6 {
		binary.BigEndian.PutUint32(ip[0:], 6<<28|uint32(f.TOS)<<20|f.FlowLabel&0xFFFFF)
		ip[7] = f.TTL
		binary.BigEndian.PutUint16(b[12:], EtherTypeIPv6)
	} else {
		ip[1] = f.TOS
		ip[8] = f.TTL
		ip[10], ip[11] = 0, 0
		binary.BigEndian.PutUint16(ip[10:], ipChecksum(ip))
		binary.BigEndian.PutUint16(b[12:], EtherTypeIPv4)
	}
	bth[bthFB] = flag(f.BTH.FECN, 0x80) | flag(f.BTH.BECN, 0x40) | f.BTH.Resv6&0x3F
	if f.ComputeUDPChecksum { // last: it covers everything after the IP header
		udp[6], udp[7] = 0, 0
		binary.BigEndian.PutUint16(udp[6:], udpChecksum(f.Src, f.Dst, b[EthernetLen+l.ipHdr:end]))
	} else {
		binary.BigEndian.PutUint16(udp[6:], f.UDPChecksum)
	}
	copy(b[end:], f.Trailer)
	return l.total, nil
}
