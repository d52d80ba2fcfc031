package wire

import "encoding/binary"

// AtomicETH is a byte view of an Atomic Extended Transport Header (IBTA
// §9.3.5, 28 bytes): virtual address, R_Key, swap (or add) data, compare
// data. It rides on CMP_SWAP and FETCH_ADD requests.
type AtomicETH []byte

// AtomicETHFields holds an AtomicETH's fields.
type AtomicETHFields struct {
	VA          uint64
	RKey        uint32
	SwapAddData uint64 // the swap value for CMP_SWAP, the addend for FETCH_ADD
	CompareData uint64
}

// VA returns the remote virtual address (8-byte aligned for a valid request).
func (a AtomicETH) VA() uint64 { return binary.BigEndian.Uint64(a[0:]) }

// RKey returns the remote key.
func (a AtomicETH) RKey() uint32 { return binary.BigEndian.Uint32(a[8:]) }

// SwapAddData returns the swap or add operand.
func (a AtomicETH) SwapAddData() uint64 { return binary.BigEndian.Uint64(a[12:]) }

// CompareData returns the compare operand.
func (a AtomicETH) CompareData() uint64 { return binary.BigEndian.Uint64(a[20:]) }

// Fields returns all fields.
func (a AtomicETH) Fields() AtomicETHFields {
	return AtomicETHFields{a.VA(), a.RKey(), a.SwapAddData(), a.CompareData()}
}

// Encode writes f into a.
func (a AtomicETH) Encode(f *AtomicETHFields) {
	binary.BigEndian.PutUint64(a[0:], f.VA)
	binary.BigEndian.PutUint32(a[8:], f.RKey)
	binary.BigEndian.PutUint64(a[12:], f.SwapAddData)
	binary.BigEndian.PutUint64(a[20:], f.CompareData)
}

// AtomicAckETH is a byte view of an Atomic ACK Extended Transport Header
// (IBTA §9.5.3, 8 bytes): the value the target held before the atomic.
type AtomicAckETH []byte

// OrigRemoteData returns the original remote data.
func (a AtomicAckETH) OrigRemoteData() uint64 { return binary.BigEndian.Uint64(a) }

// SetOrigRemoteData writes the original remote data.
func (a AtomicAckETH) SetOrigRemoteData(v uint64) { binary.BigEndian.PutUint64(a, v) }
