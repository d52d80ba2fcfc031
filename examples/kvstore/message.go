package kvstore

import "encoding/binary"

// The wire protocol: byte views over the registered buffers, so a
// request is built in place in the send buffer and parsed in place in
// the receive buffer. Every field is little endian. The layouts are
// drawn in doc.go.

// Request opcodes.
const (
	opGet = 1
	opPut = 2
)

// Offsets of the request header's fields.
const (
	reqOp     = 0  // uint8: opGet or opPut
	reqKeyLen = 2  // uint16: key length (byte 1 is reserved, zero)
	reqID     = 4  // uint32: the client's request slot
	reqLen    = 8  // uint32: GET: capacity of the region; PUT: value length
	reqMagic  = 12 // 4 bytes: magic (see below)
	reqAddr   = 16 // uint64: GET: virtual address of the value region
	reqRKey   = 24 // uint32: GET: R_Key of the value region
	// bytes 28..31 are reserved, zero
	reqHeaderLen = 32 // the key follows, then (PUT) the value
)

// magic fills bytes 12..15 of every message. A stock Wireshark offers
// every RC SEND payload to its RPC-over-RDMA heuristic
// (dissect_rpcrdma_ib_heur, packet-rpcrdma.c), which claims one whose
// bytes 12..15, read big endian, are 0 (RDMA_MSG) or 2 (RDMA_NOMSG) and
// then shows it as [Malformed Packet]; with zeros there (the high half
// of an address, a reserved word) every message of the store did. Four
// ASCII bytes no RPC-over-RDMA message type has keep the store's frames
// its own (README, "Wireshark").
var magic = [4]byte{'K', 'V', 'S', '1'}

// request is a view of a request message.
type request []byte

func (r request) Op() uint8        { return r[reqOp] }
func (r request) KeyLen() int      { return int(binary.LittleEndian.Uint16(r[reqKeyLen:])) }
func (r request) ID() uint32       { return binary.LittleEndian.Uint32(r[reqID:]) }
func (r request) Addr() uint64     { return binary.LittleEndian.Uint64(r[reqAddr:]) }
func (r request) RKey() uint32     { return binary.LittleEndian.Uint32(r[reqRKey:]) }
func (r request) Len() int         { return int(binary.LittleEndian.Uint32(r[reqLen:])) }
func (r request) Key() []byte      { return r[reqHeaderLen : reqHeaderLen+r.KeyLen()] }
func (r request) Value() []byte    { return r[reqHeaderLen+r.KeyLen() : reqHeaderLen+r.KeyLen()+r.Len()] }
func (r request) SetID(id uint32)  { binary.LittleEndian.PutUint32(r[reqID:], id) }
func (r request) SetAddr(a uint64) { binary.LittleEndian.PutUint64(r[reqAddr:], a) }
func (r request) SetRKey(k uint32) { binary.LittleEndian.PutUint32(r[reqRKey:], k) }
func (r request) SetLen(n int)     { binary.LittleEndian.PutUint32(r[reqLen:], uint32(n)) }
func (r request) hasMagic() bool   { return [4]byte(r[reqMagic:]) == magic }

// SetOpKey writes the opcode, the magic and the key, and zeroes the
// reserved bytes.
func (r request) SetOpKey(op uint8, key string) {
	r[reqOp] = op
	r[reqOp+1] = 0
	copy(r[reqMagic:], magic[:])
	clear(r[reqRKey+4 : reqHeaderLen])
	binary.LittleEndian.PutUint16(r[reqKeyLen:], uint16(len(key)))
	copy(r[reqHeaderLen:], key)
}

// check reports whether the request is well formed within the limits:
// a known opcode, and key and value within both the limits and the
// bytes received. Its header is readable when len(r) >= reqHeaderLen.
func (r request) check(maxKey, maxValue int) bool {
	if len(r) < reqHeaderLen || !r.hasMagic() || r.KeyLen() > maxKey {
		return false
	}
	switch r.Op() {
	case opGet:
		return len(r) == reqHeaderLen+r.KeyLen()
	case opPut:
		return r.Len() <= maxValue && len(r) == reqHeaderLen+r.KeyLen()+r.Len()
	}
	return false
}

// Response statuses.
const (
	statusOK         = 0
	statusNotFound   = 1
	statusNoSpace    = 2
	statusTooLarge   = 3
	statusBadRequest = 4
)

// statusErr is the error an Op ends with for a response status (nil for
// statusOK).
func statusErr(s uint8) error {
	switch s {
	case statusOK:
		return nil
	case statusNotFound:
		return ErrNotFound
	case statusNoSpace:
		return ErrNoSpace
	case statusTooLarge:
		return ErrTooLarge
	}
	return ErrBadRequest
}

// Offsets of the response's fields.
const (
	respID     = 0  // uint32: the request's ID
	respStatus = 4  // uint8: statusOK, ...; bytes 5..7 are reserved, zero
	respLen    = 8  // uint32: GET: the value's length; PUT: 0
	respMagic  = 12 // 4 bytes: magic
	// responseLen: a response is the header alone, 16 bytes rather than
	// 12 so that a stock Wireshark shows it: its RPC-over-RDMA heuristic
	// reads bytes 12..15 of every RC SEND before checking the length and
	// marks any shorter one [Malformed Packet] (README, "Wireshark").
	responseLen = 16
)

// response is a view of a response message.
type response []byte

func (r response) ID() uint32    { return binary.LittleEndian.Uint32(r[respID:]) }
func (r response) Status() uint8 { return r[respStatus] }
func (r response) Len() int      { return int(binary.LittleEndian.Uint32(r[respLen:])) }
func (r response) Set(id uint32, status uint8, n int) {
	binary.LittleEndian.PutUint32(r[respID:], id)
	r[respStatus], r[respStatus+1], r[respStatus+2], r[respStatus+3] = status, 0, 0, 0
	binary.LittleEndian.PutUint32(r[respLen:], uint32(n))
	copy(r[respMagic:], magic[:])
}
