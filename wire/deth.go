package wire

import "encoding/binary"

// DETH is a byte view of a Datagram Extended Transport Header (IBTA
// §9.3.2, 8 bytes): Q_Key, a reserved byte, and the source QPN. Every UD
// packet carries one.
type DETH []byte

// DETHFields holds a DETH's fields.
type DETHFields struct {
	QKey  uint32
	Resv8 uint8 // reserved, kept for byte-exact re-encoding
	SrcQP uint32
}

// QKey returns the queue key.
func (d DETH) QKey() uint32 { return binary.BigEndian.Uint32(d[0:]) }

// SrcQP returns the 24-bit source QPN.
func (d DETH) SrcQP() uint32 { return get24(d[5:]) }

// Fields returns all fields.
func (d DETH) Fields() DETHFields { return DETHFields{d.QKey(), d[4], d.SrcQP()} }

// Encode writes f into d.
func (d DETH) Encode(f *DETHFields) {
	binary.BigEndian.PutUint32(d[0:], f.QKey)
	d[4] = f.Resv8
	put24(d[5:], f.SrcQP)
}

// ImmDt is a byte view of the Immediate Data extended header (IBTA
// §9.3.6, 4 bytes), carried on *_WITH_IMMEDIATE opcodes.
type ImmDt []byte

// Value returns the immediate data as the big-endian integer on the wire
// (libibverbs hands it to the user in network order, imm_data is __be32).
func (i ImmDt) Value() uint32 { return binary.BigEndian.Uint32(i) }

// Set writes the immediate data.
func (i ImmDt) Set(v uint32) { binary.BigEndian.PutUint32(i, v) }

// IETH is a byte view of the Invalidate Extended Transport Header (IBTA
// §9.3.7, 4 bytes): the R_Key to invalidate, carried on SEND_*_WITH_INVALIDATE.
type IETH []byte

// RKey returns the R_Key to invalidate.
func (i IETH) RKey() uint32 { return binary.BigEndian.Uint32(i) }

// Set writes the R_Key.
func (i IETH) Set(v uint32) { binary.BigEndian.PutUint32(i, v) }
