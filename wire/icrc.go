package wire

import (
	"encoding/binary"
	"hash/crc32"
)

// ICRC (IBTA vol. 1 Annex A17.8 for RoCE v2).
//
// The invariant CRC is CRC-32 (IEEE 802.3, as crc32.ChecksumIEEE) over
//
//	8 bytes of 0xFF        stand-in for the InfiniBand LRH, absent in RoCE v2
//	the IP header          with the fields a router may change set to all ones:
//	                       IPv4 TOS, TTL, header checksum;
//	                       IPv6 traffic class, flow label, hop limit
//	the UDP header         with the checksum set to all ones
//	the BTH                with byte 4 (FECN, BECN, reserved) set to all ones
//	extension headers, payload and pad
//
// and is carried after the pad least-significant byte first.

// icrcScratchLen holds the masked prefix: 8 + the largest IP header (IPv4
// with 40 bytes of options) + UDP + BTH.
const icrcScratchLen = 8 + 60 + UDPLen + BTHLen

var ieeeTable = crc32.IEEETable

// maskedPrefix writes 8×0xFF and the masked IP, UDP and BTH headers into
// dst and returns the number of bytes written. ip is the whole IP header.
func maskedPrefix(dst *[icrcScratchLen]byte, ip []byte, v6 bool, udp, bth []byte) int {
	n := copy(dst[:8], allOnes[:8])
	ipOff := n
	n += copy(dst[n:], ip)
	if v6 {
		// Version stays; traffic class and flow label (the rest of the first
		// word) become ones, and so does the hop limit.
		dst[ipOff] |= 0x0F
		dst[ipOff+1], dst[ipOff+2], dst[ipOff+3] = 0xFF, 0xFF, 0xFF
		dst[ipOff+7] = 0xFF
	} else {
		dst[ipOff+1] = 0xFF                       // TOS
		dst[ipOff+8] = 0xFF                       // TTL
		dst[ipOff+10], dst[ipOff+11] = 0xFF, 0xFF // header checksum
	}
	udpOff := n
	n += copy(dst[n:], udp[:UDPLen])
	dst[udpOff+6], dst[udpOff+7] = 0xFF, 0xFF
	bthOff := n
	n += copy(dst[n:], bth[:BTHLen])
	dst[bthOff+bthFB] = 0xFF
	return n
}

var allOnes = [8]byte{0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF}

// icrc computes the ICRC. rest runs from the end of the BTH to the start
// of the ICRC (extension headers, payload, pad).
func icrc(scratch *[icrcScratchLen]byte, ip []byte, v6 bool, udp, bth, rest []byte) uint32 {
	n := maskedPrefix(scratch, ip, v6, udp, bth)
	crc := crc32.Update(0, ieeeTable, scratch[:n])
	return crc32.Update(crc, ieeeTable, rest)
}

// putICRC stores an ICRC in wire order (least-significant byte first).
func putICRC(b []byte, v uint32) { binary.LittleEndian.PutUint32(b, v) }

// getICRC reads an ICRC in wire order.
func getICRC(b []byte) uint32 { return binary.LittleEndian.Uint32(b) }
