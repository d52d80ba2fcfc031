package wire

import (
	"math/bits"
	"sync"
)

// Recovering the IPv4 ID a RoCE v2 sender used from its ICRC.
//
// The ICRC covers the IPv4 identification (Annex A17.8 masks only TOS,
// TTL and the header checksum), but a receiver on a UDP socket never sees
// it: the kernel delivers the payload and, through control messages, the
// addresses, TTL and TOS, not the ID. rxe picks it with __ip_select_ident
// (rxe_net.c prepare_ipv4_hdr), so a receiver that rebuilds the header
// cannot guess it. It can solve for it: a CRC is affine, so flipping the
// ID bits by d changes the ICRC by L(d), a linear function of d that
// depends only on how many bytes follow the ID. With the carried ICRC and
// the one computed with a trial ID, L(d) is known; undoing the bytes that
// follow the ID (the CRC's zero-byte step is invertible) leaves the CRC
// of the two ID bytes alone, a 32-bit value that is a linear function of
// the 16 bits of d, and so determines d when one exists. The check then
// keeps 16 of its 32 bits: a corrupted packet passes with probability
// 2^-16 instead of 2^-32.
//
// Cost: one ICRC computation, at most 14 32×32 bit-matrix products for
// the bytes after the ID (one per set bit of their count), and a 16-bit
// solve from a table built once.

// crcPoly is the reflected IEEE polynomial (crc32.IEEE).
const crcPoly = 0xEDB88320

// bitMatrix is a linear map on 32-bit CRC registers: column i is the
// image of bit i.
type bitMatrix [32]uint32

// apply returns m·v.
func (m *bitMatrix) apply(v uint32) uint32 {
	var r uint32
	for v != 0 {
		i := bits.TrailingZeros32(v)
		r ^= m[i]
		v &= v - 1
	}
	return r
}

// mul returns m·n.
func (m *bitMatrix) mul(n *bitMatrix) (r bitMatrix) {
	for i := range r {
		r[i] = m.apply(n[i])
	}
	return r
}

// unZero undoes one zero byte of the raw (uninverted) reflected CRC
// register: eight steps of the bit-serial register run backwards.
func unZero(s uint32) uint32 {
	for range 8 {
		if s&0x80000000 != 0 {
			s = (s^crcPoly)<<1 | 1
		} else {
			s <<= 1
		}
	}
	return s
}

// idTables are built on first use (about 2 MB; most programs never ask):
// unZeroPow[k] undoes 2^k zero bytes; idOf maps the raw CRC of two ID
// bytes (from a zero register) back to them, one entry for each of the
// 65536 values (two bytes never share a CRC: a CRC-32 detects every
// error burst up to 32 bits long).
var idTables = sync.OnceValue(func() (t *idTableSet) {
	t = new(idTableSet)
	for i := range 32 {
		t.unZeroPow[0][i] = unZero(1 << i)
	}
	for k := 1; k < len(t.unZeroPow); k++ {
		t.unZeroPow[k] = t.unZeroPow[k-1].mul(&t.unZeroPow[k-1])
	}
	t.idOf = make(map[uint32]uint16, 1<<16)
	for d := range 1 << 16 {
		t.idOf[rawCRC2(uint16(d))] = uint16(d)
	}
	return t
})

// idTableSet is what idTables holds.
type idTableSet struct {
	unZeroPow [16]bitMatrix
	idOf      map[uint32]uint16
}

// rawCRC2 is the raw CRC register after the two bytes of d (big-endian,
// as the IPv4 header carries it) from a zero register.
func rawCRC2(d uint16) uint32 {
	s := uint32(0)
	for _, b := range [2]byte{byte(d >> 8), byte(d)} {
		s = crcTables[0][byte(s)^b] ^ s>>8
	}
	return s
}

// RecoverIPv4ID finds the IPv4 identification with which the packet's
// ICRC verifies, for a packet decoded (DecodeHeaders) from a header
// rebuilt with a guessed ID. It reports false for an IPv6 packet, or when
// no ID makes the ICRC verify (the packet is corrupt, or another field
// was guessed wrong). It does not change the packet.
func (p *Packet) RecoverIPv4ID() (uint16, bool) {
	if p.IPv4 == nil || p.ICRC == nil {
		return 0, false
	}
	diff := p.ComputeICRC() ^ getICRC(p.ICRC)
	// The CRC runs over 8 bytes of ones and the datagram up to the ICRC;
	// the ID is bytes 4 and 5 of the IP header.
	after := p.icrcOff - EthernetLen - 6
	t := idTables()
	for k := 0; after != 0; k++ {
		if after&1 != 0 {
			diff = t.unZeroPow[k].apply(diff)
		}
		after >>= 1
	}
	d, ok := t.idOf[diff]
	if !ok {
		return 0, false
	}
	return p.IPv4.ID() ^ d, true
}
