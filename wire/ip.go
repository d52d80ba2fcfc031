package wire

import (
	"encoding/binary"
	"fmt"
	"net/netip"
)

// Outer-header constants (RFC 791, RFC 8200, RFC 768, Annex A17.4).
const (
	EthernetLen   = 14
	IPv4MinLen    = 20
	IPv6Len       = 40
	UDPLen        = 8
	EtherTypeIPv4 = 0x0800
	EtherTypeIPv6 = 0x86DD
	ProtocolUDP   = 17
	ProtocolTCP   = 6
	// UDPPortRoCEv2 is the IANA-assigned destination port of RoCE v2.
	UDPPortRoCEv2 = 4791
	// IPv4FlagDF is the don't-fragment bit in the IPv4 3-bit flags field.
	IPv4FlagDF = 0x2
	ipv4FlagMF = 0x1
)

// MAC is an Ethernet address, held by value so that frames carry no pointers.
type MAC [6]byte

// LinkLocal returns the IPv6 link-local address the kernel derives from
// the MAC (RFC 4291 appendix A, modified EUI-64: the universal/local bit
// flipped, ff:fe in the middle), which rxe lists as GID 0 of a port.
func (m MAC) LinkLocal() netip.Addr {
	return netip.AddrFrom16([16]byte{0xfe, 0x80, 8: m[0] ^ 0x02, m[1], m[2], 0xff, 0xfe, m[3], m[4], m[5]})
}

// String returns the name of the MAC, for traces and messages.
func (m MAC) String() string {
	return fmt.Sprintf("%02x:%02x:%02x:%02x:%02x:%02x", m[0], m[1], m[2], m[3], m[4], m[5])
}

// Ethernet is a byte view of an Ethernet II header (14 bytes, no 802.1Q tag).
type Ethernet []byte

// Dst returns the destination MAC.
func (e Ethernet) Dst() MAC { return MAC(e[0:6]) }

// Src returns the source MAC.
func (e Ethernet) Src() MAC { return MAC(e[6:12]) }

// EtherType returns the EtherType.
func (e Ethernet) EtherType() uint16 { return binary.BigEndian.Uint16(e[12:]) }

// IPv4 is a byte view of an IPv4 header, options included.
type IPv4 []byte

// HeaderLen returns IHL in bytes.
func (h IPv4) HeaderLen() int { return int(h[0]&0xF) * 4 }

// TOS returns the DSCP/ECN byte.
func (h IPv4) TOS() uint8 { return h[1] }

// TotalLength returns the datagram length including this header.
func (h IPv4) TotalLength() uint16 { return binary.BigEndian.Uint16(h[2:]) }

// ID returns the identification field.
func (h IPv4) ID() uint16 { return binary.BigEndian.Uint16(h[4:]) }

// Flags returns the 3-bit flags field (IPv4FlagDF is bit 1).
func (h IPv4) Flags() uint8 { return h[6] >> 5 }

// FragmentOffset returns the fragment offset in 8-byte units.
func (h IPv4) FragmentOffset() uint16 { return binary.BigEndian.Uint16(h[6:]) & 0x1FFF }

// TTL returns the time to live.
func (h IPv4) TTL() uint8 { return h[8] }

// Protocol returns the payload protocol number.
func (h IPv4) Protocol() uint8 { return h[9] }

// Checksum returns the header checksum as carried.
func (h IPv4) Checksum() uint16 { return binary.BigEndian.Uint16(h[10:]) }

// Src returns the source address.
func (h IPv4) Src() netip.Addr { return netip.AddrFrom4([4]byte(h[12:16])) }

// Dst returns the destination address.
func (h IPv4) Dst() netip.Addr { return netip.AddrFrom4([4]byte(h[16:20])) }

// Options returns the option bytes, if any.
func (h IPv4) Options() []byte { return h[IPv4MinLen:h.HeaderLen()] }

// SetChecksum recomputes the header checksum in place, after a field was
// rewritten (a driver writing the header a kernel's socket received or
// will send; the checksum is outside the ICRC, Annex A17.8).
func (h IPv4) SetChecksum() {
	h[10], h[11] = 0, 0
	binary.BigEndian.PutUint16(h[10:], ipChecksum(h[:h.HeaderLen()]))
}

// checksumOK reports whether the header checksum verifies.
func (h IPv4) checksumOK() bool { return ipChecksum(h[:h.HeaderLen()]) == 0 }

// IPv6 is a byte view of an IPv6 fixed header.
type IPv6 []byte

// TrafficClass returns the traffic class.
func (h IPv6) TrafficClass() uint8 { return uint8(binary.BigEndian.Uint16(h[0:]) >> 4) }

// FlowLabel returns the 20-bit flow label.
func (h IPv6) FlowLabel() uint32 { return binary.BigEndian.Uint32(h[0:]) & 0xFFFFF }

// PayloadLength returns the length after the fixed header.
func (h IPv6) PayloadLength() uint16 { return binary.BigEndian.Uint16(h[4:]) }

// NextHeader returns the next header protocol number.
func (h IPv6) NextHeader() uint8 { return h[6] }

// HopLimit returns the hop limit.
func (h IPv6) HopLimit() uint8 { return h[7] }

// Src returns the source address.
func (h IPv6) Src() netip.Addr { return netip.AddrFrom16([16]byte(h[8:24])) }

// Dst returns the destination address.
func (h IPv6) Dst() netip.Addr { return netip.AddrFrom16([16]byte(h[24:40])) }

// UDP is a byte view of a UDP header.
type UDP []byte

// SrcPort returns the source port.
func (u UDP) SrcPort() uint16 { return binary.BigEndian.Uint16(u[0:]) }

// DstPort returns the destination port.
func (u UDP) DstPort() uint16 { return binary.BigEndian.Uint16(u[2:]) }

// Length returns the UDP length (header included).
func (u UDP) Length() uint16 { return binary.BigEndian.Uint16(u[4:]) }

// Checksum returns the checksum as carried (rxe sends 0).
func (u UDP) Checksum() uint16 { return binary.BigEndian.Uint16(u[6:]) }

// ipChecksum returns the ones-complement of the ones-complement sum of b
// (RFC 1071). Over a header whose checksum field is correct it returns 0.
func ipChecksum(b []byte) uint16 {
	if len(b) == IPv4MinLen { // the usual header: five 32-bit words
		s := uint64(binary.BigEndian.Uint32(b)) + uint64(binary.BigEndian.Uint32(b[4:])) +
			uint64(binary.BigEndian.Uint32(b[8:])) + uint64(binary.BigEndian.Uint32(b[12:])) +
			uint64(binary.BigEndian.Uint32(b[16:]))
		return ^fold(s)
	}
	return ^fold(sum16(0, b))
}

// sum16 adds b to s as big-endian 16-bit words (a trailing odd byte is
// padded with zero), without folding carries.
func sum16(s uint64, b []byte) uint64 {
	for ; len(b) >= 8; b = b[8:] {
		s += uint64(binary.BigEndian.Uint32(b)) + uint64(binary.BigEndian.Uint32(b[4:]))
	}
	for ; len(b) >= 2; b = b[2:] {
		s += uint64(b[0])<<8 | uint64(b[1])
	}
	if len(b) == 1 {
		s += uint64(b[0]) << 8
	}
	return s
}

// fold reduces a 64-bit sum of 16-bit words to 16 bits with end-around carry.
func fold(s uint64) uint16 {
	for s > 0xFFFF {
		s = s>>16 + s&0xFFFF
	}
	return uint16(s)
}

// pseudoSum is the unfolded sum of the UDP pseudo-header (RFC 768,
// RFC 8200 §8.1) for a datagram of length n.
func pseudoSum(src, dst netip.Addr, n int) uint64 {
	var s uint64
	if src.Is4() {
		a, b := src.As4(), dst.As4()
		s = sum16(sum16(0, a[:]), b[:])
	} else {
		a, b := src.As16(), dst.As16()
		s = sum16(sum16(0, a[:]), b[:])
	}
	return s + uint64(n) + ProtocolUDP
}

// CompleteChecksum writes the UDP or TCP checksum of an Ethernet frame
// (IPv4, or IPv6 without extension headers; not a fragment), computed
// over the segment as it is, and reports whether it did. A frame read
// with AF_PACKET on a virtual interface its own host sent on (a veth to
// a network namespace) may carry a checksum left to an offload that
// never ran (the kernel's CHECKSUM_PARTIAL, reported to the reader as
// TP_STATUS_CSUMNOTREADY): forwarded as it is, its receiver drops it. A
// UDP checksum of zero over IPv4 (none, as rxe sends) stays zero. The
// RoCE v2 ICRC does not cover the UDP checksum (Annex A17.8), so a
// forwarder may complete it.
func CompleteChecksum(frame []byte) bool {
	if len(frame) < EthernetLen {
		return false
	}
	var src, dst netip.Addr
	var proto byte
	var seg []byte
	ip := frame[EthernetLen:]
	switch binary.BigEndian.Uint16(frame[12:]) {
	case EtherTypeIPv4:
		if len(ip) < IPv4MinLen || ip[0]>>4 != 4 {
			return false
		}
		h, total := int(ip[0]&0xF)*4, int(binary.BigEndian.Uint16(ip[2:]))
		if h < IPv4MinLen || total < h || total > len(ip) || binary.BigEndian.Uint16(ip[6:])&0x3FFF != 0 {
			return false
		}
		src, dst, proto, seg = netip.AddrFrom4([4]byte(ip[12:16])), netip.AddrFrom4([4]byte(ip[16:20])), ip[9], ip[h:total]
	case EtherTypeIPv6:
		if len(ip) < IPv6Len || ip[0]>>4 != 6 {
			return false
		}
		n := int(binary.BigEndian.Uint16(ip[4:]))
		if IPv6Len+n > len(ip) {
			return false
		}
		src, dst, proto, seg = netip.AddrFrom16([16]byte(ip[8:24])), netip.AddrFrom16([16]byte(ip[24:40])), ip[6], ip[IPv6Len:IPv6Len+n]
	default:
		return false
	}
	var at int
	switch {
	case proto == ProtocolUDP && len(seg) >= UDPLen:
		if src.Is4() && binary.BigEndian.Uint16(seg[6:]) == 0 {
			return false
		}
		at = 6
	case proto == ProtocolTCP && len(seg) >= 20:
		at = 16
	default:
		return false
	}
	seg[at], seg[at+1] = 0, 0
	c := ^fold(sum16(pseudoSum(src, dst, len(seg))-ProtocolUDP+uint64(proto), seg))
	if c == 0 && proto == ProtocolUDP {
		c = 0xFFFF
	}
	binary.BigEndian.PutUint16(seg[at:], c)
	return true
}

// udpChecksum computes the UDP checksum of a datagram whose checksum field
// is zero.
func udpChecksum(src, dst netip.Addr, datagram []byte) uint16 {
	c := ^fold(sum16(pseudoSum(src, dst, len(datagram)), datagram))
	if c == 0 {
		c = 0xFFFF // zero means "no checksum"; RFC 768 sends all ones instead
	}
	return c
}

// RoCE v2 UDP source ports (Annex A17.4.1 leaves the choice to the sender;
// these follow Linux: include/rdma/ib_verbs.h).
const udpSourcePortMin = 0xC000

// FlowLabel returns the flow label Linux derives for a connection between
// two QPNs when the address vector gives none (rdma_calc_flow_label).
func FlowLabel(localQPN, remoteQPN uint32) uint32 {
	v := uint64(localQPN) * uint64(remoteQPN)
	v ^= v >> 20
	v ^= v >> 40
	return uint32(v & 0xFFFFF)
}

// UDPSourcePortFromFlowLabel folds a 20-bit flow label into the RoCE v2
// source port range 0xC000–0xFFFF as Linux does (rdma_flow_label_to_udp_sport).
func UDPSourcePortFromFlowLabel(fl uint32) uint16 {
	low := fl & 0x3FFF
	high := fl & 0xFC000
	return uint16((low ^ high>>14) | udpSourcePortMin)
}

// UDPSourcePort returns the source port rxe uses on a connected (RC/UC) QP:
// derived from the flow label of the QPN pair, so each connection lands on
// its own ECMP path.
func UDPSourcePort(localQPN, remoteQPN uint32) uint16 {
	return UDPSourcePortFromFlowLabel(FlowLabel(localQPN, remoteQPN))
}

// UDPSourcePortUD returns the source port rxe gives a QP before (or
// without) a connected address vector, as UD QPs keep it: 0xC000 plus a
// 14-bit multiplicative hash of the QPN (hash_32 with the golden ratio).
func UDPSourcePortUD(qpn uint32) uint16 {
	return uint16(udpSourcePortMin + (qpn*0x61C88647)>>(32-14))
}

// IsGroup reports whether m is a group address, multicast or broadcast
// (the I/G bit, the first byte's lowest): a switch floods such a frame.
func (m MAC) IsGroup() bool { return m[0]&1 != 0 }

// IsMulticastGID reports whether a GID names a multicast group: an IPv6
// multicast address (ff00::/8) or an IPv4-mapped one (224.0.0.0/4), as the
// kernel's rdma_is_multicast_addr decides.
func IsMulticastGID(a netip.Addr) bool { return a.Unmap().IsMulticast() }

// MulticastMAC returns the Ethernet group address an IP multicast
// destination is sent to, and false for an address that is not
// multicast: for IPv4, 01:00:5e and the group's low 23 bits (RFC 1112
// §6.4); for IPv6, 33:33 and its last four bytes (RFC 2464 §7). An
// IPv4-mapped GID maps as its IPv4 address, as the kernel's
// ib_resolve_eth_dmac and libibverbs' neighbour code map an AH's DGID.
func MulticastMAC(a netip.Addr) (MAC, bool) {
	a = a.Unmap()
	if !a.IsMulticast() {
		return MAC{}, false
	}
	if a.Is4() {
		b := a.As4()
		return MAC{0x01, 0x00, 0x5e, b[1] & 0x7f, b[2], b[3]}, true
	}
	b := a.As16()
	return MAC{0x33, 0x33, b[12], b[13], b[14], b[15]}, true
}

// FrameDst returns the IP destination of an Ethernet frame carrying IPv4
// or IPv6, without decoding the rest; false if it carries neither or is
// too short to hold one.
func FrameDst(frame []byte) (netip.Addr, bool) {
	if len(frame) < EthernetLen {
		return netip.Addr{}, false
	}
	switch ip := frame[EthernetLen:]; Ethernet(frame).EtherType() {
	case EtherTypeIPv4:
		if len(ip) >= IPv4MinLen {
			return IPv4(ip).Dst(), true
		}
	case EtherTypeIPv6:
		if len(ip) >= IPv6Len {
			return IPv6(ip).Dst(), true
		}
	}
	return netip.Addr{}, false
}
