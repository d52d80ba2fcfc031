package wire

import "encoding/binary"

// BTH is a byte view of a Base Transport Header (IBTA vol. 1 §9.2, 12
// bytes). The slice must be at least BTHLen long.
//
//	byte 0     opcode
//	byte 1     SE(1) MigReq(1) PadCnt(2) TVer(4)
//	bytes 2-3  P_Key
//	byte 4     FECN(1) BECN(1) reserved(6)   (masked in the ICRC)
//	bytes 5-7  DestQP
//	byte 8     AckReq(1) reserved(7)
//	bytes 9-11 PSN
type BTH []byte

const (
	bthOpcode = 0
	bthFlags  = 1
	bthPKey   = 2
	bthFB     = 4
	bthDestQP = 5
	bthAck    = 8
	bthPSN    = 9
)

// BTHFields holds a BTH's fields for encoding or inspection.
type BTHFields struct {
	Opcode         Opcode
	SolicitedEvent bool
	MigReq         bool
	PadCount       uint8 // 0..3; Encode of a whole Frame derives it from the payload
	TVer           uint8
	PKey           uint16
	FECN           bool
	BECN           bool
	Resv6          uint8 // reserved bits of byte 4, kept for byte-exact re-encoding
	DestQP         uint32
	AckReq         bool
	Resv7          uint8 // reserved bits of byte 8
	PSN            PSN
}

// Opcode returns the opcode.
func (b BTH) Opcode() Opcode { return Opcode(b[bthOpcode]) }

// SolicitedEvent returns the SE bit.
func (b BTH) SolicitedEvent() bool { return b[bthFlags]&0x80 != 0 }

// MigReq returns the M bit.
func (b BTH) MigReq() bool { return b[bthFlags]&0x40 != 0 }

// PadCount returns the number of pad bytes before the ICRC (0..3).
func (b BTH) PadCount() uint8 { return (b[bthFlags] >> 4) & 3 }

// TVer returns the transport header version; 0 is the only one defined.
func (b BTH) TVer() uint8 { return b[bthFlags] & 0xF }

// PKey returns the partition key.
func (b BTH) PKey() uint16 { return binary.BigEndian.Uint16(b[bthPKey:]) }

// FECN returns the forward explicit congestion notification bit.
func (b BTH) FECN() bool { return b[bthFB]&0x80 != 0 }

// BECN returns the backward explicit congestion notification bit.
func (b BTH) BECN() bool { return b[bthFB]&0x40 != 0 }

// DestQP returns the 24-bit destination queue pair number.
func (b BTH) DestQP() uint32 { return get24(b[bthDestQP:]) }

// AckReq returns the acknowledge-request bit.
func (b BTH) AckReq() bool { return b[bthAck]&0x80 != 0 }

// PSN returns the packet sequence number.
func (b BTH) PSN() PSN { return PSN(get24(b[bthPSN:])) }

// SetPSN rewrites the PSN (the ICRC must be recomputed afterwards).
func (b BTH) SetPSN(p PSN) { put24(b[bthPSN:], uint32(p)) }

// SetOpcode rewrites the opcode (the ICRC must be recomputed afterwards;
// the headers after the BTH stay where they are, so the frame may then
// read as a different layout, which is what a fault plan wants to test).
func (b BTH) SetOpcode(op Opcode) { b[bthOpcode] = byte(op) }

// SetDestQP rewrites the destination QPN.
func (b BTH) SetDestQP(qpn uint32) { put24(b[bthDestQP:], qpn) }

// SetAckReq sets or clears the AckReq bit.
func (b BTH) SetAckReq(v bool) { setBit(&b[bthAck], 0x80, v) }

// SetFECN sets or clears FECN; FECN is outside the ICRC, as switches mark it.
func (b BTH) SetFECN(v bool) { setBit(&b[bthFB], 0x80, v) }

// Fields returns all fields.
func (b BTH) Fields() BTHFields {
	return BTHFields{
		Opcode:         b.Opcode(),
		SolicitedEvent: b.SolicitedEvent(),
		MigReq:         b.MigReq(),
		PadCount:       b.PadCount(),
		TVer:           b.TVer(),
		PKey:           b.PKey(),
		FECN:           b.FECN(),
		BECN:           b.BECN(),
		Resv6:          b[bthFB] & 0x3F,
		DestQP:         b.DestQP(),
		AckReq:         b.AckReq(),
		Resv7:          b[bthAck] & 0x7F,
		PSN:            b.PSN(),
	}
}

// Encode writes f into b.
func (b BTH) Encode(f *BTHFields) {
	b[bthOpcode] = byte(f.Opcode)
	b[bthFlags] = flag(f.SolicitedEvent, 0x80) | flag(f.MigReq, 0x40) | (f.PadCount&3)<<4 | f.TVer&0xF
	binary.BigEndian.PutUint16(b[bthPKey:], f.PKey)
	b[bthFB] = flag(f.FECN, 0x80) | flag(f.BECN, 0x40) | f.Resv6&0x3F
	put24(b[bthDestQP:], f.DestQP)
	b[bthAck] = flag(f.AckReq, 0x80) | f.Resv7&0x7F
	put24(b[bthPSN:], uint32(f.PSN))
}

func get24(b []byte) uint32 { _ = b[2]; return uint32(b[0])<<16 | uint32(b[1])<<8 | uint32(b[2]) }

func put24(b []byte, v uint32) {
	_ = b[2]
	b[0], b[1], b[2] = byte(v>>16), byte(v>>8), byte(v)
}

func flag(v bool, bit byte) byte {
	if v {
		return bit
	}
	return 0
}

func setBit(p *byte, bit byte, v bool) {
	if v {
		*p |= bit
	} else {
		*p &^= bit
	}
}

// DefaultPKey is the one P_Key of an rxe port: full member of the
// default partition (index 0 of its P_Key table).
const DefaultPKey = 0xFFFF

// PKeyMatch reports whether a packet's P_Key a matches a port's b (IBTA
// §10.9.3, as rxe's pkey_match): the same partition, neither the invalid
// 0, and at least one of the two a full member (bit 15).
func PKeyMatch(a, b uint16) bool {
	return a&0x7FFF != 0 && a&0x7FFF == b&0x7FFF && (a|b)&0x8000 != 0
}
