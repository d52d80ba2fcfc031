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

// icrcPrefixMax is the longest masked prefix: 8 + the largest IP header
// (IPv4 with 40 bytes of options) + UDP + BTH.
const icrcPrefixMax = 8 + 60 + UDPLen + BTHLen

// icrcScratchLen leaves room to top the prefix up to a 16-byte multiple
// of at least 64 bytes with what follows it (see icrc).
const icrcScratchLen = icrcPrefixMax + 15

var ieeeTable = crc32.IEEETable

// maskedPrefix writes 8×0xFF, the IP, UDP and BTH headers with their
// variant fields set to ones, and then up to top bytes of what follows the
// BTH, into dst; it returns the number of bytes written. hdrs runs from the
// start of the IP header (the headers are contiguous in a frame) and
// holds at least ipLen+UDPLen+BTHLen bytes.
func maskedPrefix(dst *[icrcScratchLen]byte, hdrs []byte, ipLen int, v6 bool) int {
	n := copy(dst[:8], allOnes[:8])
	n += copy(dst[8:], hdrs)
	ip := dst[8:]
	if v6 {
		// Version stays; traffic class and flow label (the rest of the first
		// word) become ones, and so does the hop limit.
		ip[0] |= 0x0F
		ip[1], ip[2], ip[3] = 0xFF, 0xFF, 0xFF
		ip[7] = 0xFF
	} else {
		ip[1] = 0xFF                // TOS
		ip[8] = 0xFF                // TTL
		ip[10], ip[11] = 0xFF, 0xFF // header checksum
	}
	udp := ip[ipLen:]
	udp[6], udp[7] = 0xFF, 0xFF
	udp[UDPLen+bthFB] = 0xFF // BTH byte 4
	return n
}

var allOnes = [8]byte{0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF}

// icrc computes the ICRC of a transport packet. hdrs runs from the start
// of the IP header to the start of the ICRC; ipLen is the IP header length.
//
// Speed: the standard library runs its carry-less-multiply kernel only on
// inputs of at least 64 bytes, in 16-byte blocks, and a table loop on the
// rest. The masked headers alone (48 bytes with the 0xFF prefix, for IPv4)
// would fall to the slow loop, so the scratch copy takes in the first
// bytes after the BTH up to a multiple of 16 of at least 64, and the
// second call starts on a block boundary of the message.
func icrc(scratch *[icrcScratchLen]byte, hdrs []byte, ipLen int, v6 bool) uint32 {
	n := 8 + ipLen + UDPLen + BTHLen
	top := -n & 15
	if n+top < 64 {
		top = 64 - n
	}
	k := min(ipLen+UDPLen+BTHLen+top, len(hdrs))
	n = maskedPrefix(scratch, hdrs[:k], ipLen, v6)
	crc := crc32.Update(0, ieeeTable, scratch[:n])
	return crc32.Update(crc, ieeeTable, hdrs[k:])
}

// putICRC stores an ICRC in wire order (least-significant byte first).
func putICRC(b []byte, v uint32) { binary.LittleEndian.PutUint32(b, v) }

// getICRC reads an ICRC in wire order.
func getICRC(b []byte) uint32 { return binary.LittleEndian.Uint32(b) }
