package wire

import "encoding/binary"

// RETH is a byte view of an RDMA Extended Transport Header (IBTA §9.3.3,
// 16 bytes): virtual address, R_Key, DMA length. It rides on RDMA WRITE
// FIRST/ONLY and RDMA READ requests.
type RETH []byte

// RETHFields holds a RETH's fields.
type RETHFields struct {
	VA        uint64
	RKey      uint32
	DMALength uint32
}

// VA returns the remote virtual address.
func (r RETH) VA() uint64 { return binary.BigEndian.Uint64(r[0:]) }

// RKey returns the remote key.
func (r RETH) RKey() uint32 { return binary.BigEndian.Uint32(r[8:]) }

// DMALength returns the length of the whole RDMA operation in bytes.
func (r RETH) DMALength() uint32 { return binary.BigEndian.Uint32(r[12:]) }

// Fields returns all fields.
func (r RETH) Fields() RETHFields { return RETHFields{r.VA(), r.RKey(), r.DMALength()} }

// Encode writes f into r.
func (r RETH) Encode(f *RETHFields) {
	binary.BigEndian.PutUint64(r[0:], f.VA)
	binary.BigEndian.PutUint32(r[8:], f.RKey)
	binary.BigEndian.PutUint32(r[12:], f.DMALength)
}
