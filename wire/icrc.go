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
//
// How it is computed without copying: setting a field to all ones is an
// OR with a mask, so the headers are run through a slicing-by-16 table CRC
// (two 64-bit words a step; the steps are what the latency depends on),
// each word ORed with its mask as it is loaded.
// The rest of the packet, which is most of it, then goes to the standard
// library in one call, where it runs on the carry-less-multiply kernel.
// Verification so costs one crc32.Update over the payload plus a few
// dozen table lookups, and no byte of the frame is written.

// icrcHdrMax is the longest header run the ICRC masks: the largest IP
// header (IPv4 with 40 bytes of options), UDP and BTH.
const icrcHdrMax = 60 + UDPLen + BTHLen

// crcTables are the slicing-by-16 tables of the reflected IEEE polynomial:
// crcTables[0] is the byte-at-a-time table, crcTables[k][b] is the CRC of
// byte b followed by k zero bytes.
var crcTables = func() (t [16][256]uint32) {
	t[0] = *crc32.IEEETable
	for i := range 256 {
		c := t[0][i]
		for k := 1; k < 16; k++ {
			c = t[0][c&0xFF] ^ c>>8
			t[k][i] = c
		}
	}
	return t
}()

// ffPrefixState is the raw CRC register after the eight 0xFF bytes that
// stand in for the LRH: a constant.
var ffPrefixState = ^crc32.Update(0, crc32.IEEETable, allOnes[:])

var allOnes = [8]byte{0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF}

// icrcMasks returns, per 64-bit little-endian word of the header run, the
// bits the ICRC sets to one. ipLen is the IP header length.
func icrcMasks(m *[icrcHdrMax/8 + 1]uint64, ipLen int, v6 bool) {
	set := func(pos int, b byte) { m[pos>>3] |= uint64(b) << (8 * (pos & 7)) }
	if v6 {
		set(0, 0x0F) // traffic class, high nibble; the version stays
		set(1, 0xFF) // traffic class, low nibble; flow label
		set(2, 0xFF)
		set(3, 0xFF)
		set(7, 0xFF) // hop limit
	} else {
		set(1, 0xFF)  // TOS
		set(8, 0xFF)  // TTL
		set(10, 0xFF) // header checksum
		set(11, 0xFF)
	}
	set(ipLen+6, 0xFF) // UDP checksum
	set(ipLen+7, 0xFF)
	set(ipLen+UDPLen+bthFB, 0xFF) // BTH FECN, BECN, reserved
}

// The masks of the two usual layouts, IPv4 without options and IPv6.
var masksIPv4, masksIPv6 [icrcHdrMax/8 + 1]uint64

func init() {
	icrcMasks(&masksIPv4, IPv4MinLen, false)
	icrcMasks(&masksIPv6, IPv6Len, true)
}

// icrc computes the ICRC of a transport packet. pkt runs from the start of
// the IP header to the start of the ICRC; ipLen is the IP header length.
func icrc(pkt []byte, ipLen int, v6 bool) uint32 {
	var m *[icrcHdrMax/8 + 1]uint64
	switch {
	case v6:
		m = &masksIPv6
	case ipLen == IPv4MinLen:
		m = &masksIPv4
	default:
		m = new([icrcHdrMax/8 + 1]uint64) // IPv4 options: rare, and kept on the stack
		icrcMasks(m, ipLen, false)
	}
	n := ipLen + UDPLen + BTHLen
	hdr := pkt[:n]
	t := &crcTables
	c := ffPrefixState
	i := 0
	for ; i+16 <= n; i += 16 {
		w0 := binary.LittleEndian.Uint64(hdr[i:]) | m[i>>3]
		w1 := binary.LittleEndian.Uint64(hdr[i+8:]) | m[i>>3+1]
		a := uint32(w0) ^ c
		b, d, e := uint32(w0>>32), uint32(w1), uint32(w1>>32)
		c = t[15][byte(a)] ^ t[14][byte(a>>8)] ^ t[13][byte(a>>16)] ^ t[12][a>>24] ^
			t[11][byte(b)] ^ t[10][byte(b>>8)] ^ t[9][byte(b>>16)] ^ t[8][b>>24] ^
			t[7][byte(d)] ^ t[6][byte(d>>8)] ^ t[5][byte(d>>16)] ^ t[4][d>>24] ^
			t[3][byte(e)] ^ t[2][byte(e>>8)] ^ t[1][byte(e>>16)] ^ t[0][e>>24]
	}
	for ; i+8 <= n; i += 8 {
		w := binary.LittleEndian.Uint64(hdr[i:]) | m[i>>3]
		a := uint32(w) ^ c
		b := uint32(w >> 32)
		c = t[7][byte(a)] ^ t[6][byte(a>>8)] ^ t[5][byte(a>>16)] ^ t[4][a>>24] ^
			t[3][byte(b)] ^ t[2][byte(b>>8)] ^ t[1][byte(b>>16)] ^ t[0][b>>24]
	}
	for ; i < n; i++ {
		b := hdr[i] | byte(m[i>>3]>>(8*(i&7)))
		c = t[0][byte(c)^b] ^ c>>8
	}
	return crc32.Update(^c, crc32.IEEETable, pkt[n:])
}

// putICRC stores an ICRC in wire order (least-significant byte first).
func putICRC(b []byte, v uint32) { binary.LittleEndian.PutUint32(b, v) }

// getICRC reads an ICRC in wire order.
func getICRC(b []byte) uint32 { return binary.LittleEndian.Uint32(b) }
