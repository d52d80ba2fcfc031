package wire

import "strconv"

// Opcode is the BTH opcode (IBTA vol. 1 §9.2.1, table 36). The top three
// bits select the transport, the low five the operation.
type Opcode uint8

// RC opcodes (transport 000).
const (
	OpRCSendFirst              Opcode = 0x00
	OpRCSendMiddle             Opcode = 0x01
	OpRCSendLast               Opcode = 0x02
	OpRCSendLastImm            Opcode = 0x03
	OpRCSendOnly               Opcode = 0x04
	OpRCSendOnlyImm            Opcode = 0x05
	OpRCWriteFirst             Opcode = 0x06
	OpRCWriteMiddle            Opcode = 0x07
	OpRCWriteLast              Opcode = 0x08
	OpRCWriteLastImm           Opcode = 0x09
	OpRCWriteOnly              Opcode = 0x0A
	OpRCWriteOnlyImm           Opcode = 0x0B
	OpRCReadRequest            Opcode = 0x0C
	OpRCReadResponseFirst      Opcode = 0x0D
	OpRCReadResponseMiddle     Opcode = 0x0E
	OpRCReadResponseLast       Opcode = 0x0F
	OpRCReadResponseOnly       Opcode = 0x10
	OpRCAcknowledge            Opcode = 0x11
	OpRCAtomicAcknowledge      Opcode = 0x12
	OpRCCompareSwap            Opcode = 0x13
	OpRCFetchAdd               Opcode = 0x14
	OpRCSendLastWithInvalidate Opcode = 0x16
	OpRCSendOnlyWithInvalidate Opcode = 0x17
)

// UC opcodes (transport 001).
const (
	OpUCSendFirst    Opcode = 0x20
	OpUCSendMiddle   Opcode = 0x21
	OpUCSendLast     Opcode = 0x22
	OpUCSendLastImm  Opcode = 0x23
	OpUCSendOnly     Opcode = 0x24
	OpUCSendOnlyImm  Opcode = 0x25
	OpUCWriteFirst   Opcode = 0x26
	OpUCWriteMiddle  Opcode = 0x27
	OpUCWriteLast    Opcode = 0x28
	OpUCWriteLastImm Opcode = 0x29
	OpUCWriteOnly    Opcode = 0x2A
	OpUCWriteOnlyImm Opcode = 0x2B
)

// UD opcodes (transport 011) and the RoCE v2 congestion notification packet
// (Annex A17.9.3, opcode 1000 0001).
const (
	OpUDSendOnly    Opcode = 0x64
	OpUDSendOnlyImm Opcode = 0x65
	OpCNP           Opcode = 0x81
)

// Transport is the service an opcode belongs to.
type Transport uint8

// Transports, numbered as the top three opcode bits.
const (
	TransportRC  Transport = 0
	TransportUC  Transport = 1
	TransportRD  Transport = 2
	TransportUD  Transport = 3
	TransportCNP Transport = 4
)

var transportNames = [...]string{"RC", "UC", "RD", "UD", "CNP", "RESERVED5", "RESERVED6", "RESERVED7"}

// String returns the name of the Transport, for traces and messages.
func (t Transport) String() string { return transportNames[t&7] }

// Headers is a set of extension headers an opcode carries, plus whether it
// carries payload.
type Headers uint16

// Extension headers in wire order after the BTH (IBTA §9.2: DETH, RETH,
// AtomicETH, AETH, AtomicAckETH, ImmDt, IETH).
const (
	HasDETH Headers = 1 << iota
	HasRETH
	HasAtomicETH
	HasAETH
	HasAtomicAckETH
	HasImmDt
	HasIETH
	HasPayload
)

// Position is where a packet stands in its message.
type Position uint8

// Positions.
const (
	PosOnly Position = iota
	PosFirst
	PosMiddle
	PosLast
)

var positionNames = [...]string{"ONLY", "FIRST", "MIDDLE", "LAST"}

// String returns the name of the Position, for traces and messages.
func (p Position) String() string { return positionNames[p&3] }

// Starts reports whether a packet at p begins its message (FIRST or
// ONLY): it carries the RETH of a WRITE and takes a receive WQE.
func (p Position) Starts() bool { return p == PosFirst || p == PosOnly }

// Ends reports whether a packet at p ends its message (LAST or ONLY): it
// completes it, and the requester asks for an ACK on it.
func (p Position) Ends() bool { return p == PosLast || p == PosOnly }

// Kind is the operation an opcode belongs to, independent of transport and
// position.
type Kind uint8

// Operation kinds.
const (
	KindInvalid Kind = iota
	KindSend
	KindWrite
	KindReadRequest
	KindReadResponse
	KindAck
	KindAtomicAck
	KindCompareSwap
	KindFetchAdd
	KindCNP
)

var kindNames = [...]string{"INVALID", "SEND", "WRITE", "READ_REQUEST", "READ_RESPONSE", "ACK", "ATOMIC_ACK", "COMPARE_SWAP", "FETCH_ADD", "CNP"}

// String returns the name of the Kind, for traces and messages.
func (k Kind) String() string {
	if int(k) < len(kindNames) {
		return kindNames[k]
	}
	return "INVALID"
}

// IsRequest reports whether packets of this kind travel from requester to
// responder.
func (k Kind) IsRequest() bool {
	switch k {
	case KindSend, KindWrite, KindReadRequest, KindCompareSwap, KindFetchAdd:
		return true
	}
	return false
}

// IsResponse reports whether packets of this kind travel from responder to
// requester (acknowledgements and read/atomic responses).
func (k Kind) IsResponse() bool {
	return k == KindReadResponse || k == KindAck || k == KindAtomicAck
}

// OpInfo describes one opcode.
type OpInfo struct {
	Name      string // e.g. "RC_SEND_ONLY"
	Transport Transport
	Kind      Kind
	Position  Position
	Headers   Headers // extension headers and payload
	HdrLen    int     // bytes of extension headers after the BTH
	Valid     bool
}

// Has reports whether the opcode carries all of h.
func (i *OpInfo) Has(h Headers) bool { return i.Headers&h == h }

// Extension header sizes in bytes (IBTA §9.3–9.5).
const (
	BTHLen          = 12
	RETHLen         = 16
	AETHLen         = 4
	AtomicETHLen    = 28
	AtomicAckETHLen = 8
	ImmDtLen        = 4
	IETHLen         = 4
	DETHLen         = 8
	ICRCLen         = 4
	// CNPPayloadLen is the 16 reserved bytes a CNP carries (Annex A17.9.3).
	CNPPayloadLen = 16
)

// Bounds derived from the header sizes, for sizing buffers and MTUs.
const (
	// MaxExtHdrLen is the most extension-header bytes any opcode carries
	// after the BTH: the AtomicETH of a compare-and-swap or fetch-and-add
	// (TestMaxExtHdrLen holds it against the opcode table).
	MaxExtHdrLen = AtomicETHLen

	// MaxPadLen is the most pad bytes a payload gets to reach a multiple
	// of 4 (BTH PadCnt, IBTA §9.2.1).
	MaxPadLen = 3

	// MaxIPv4Overhead is the most a RoCE v2 packet over IPv4 (without
	// options) carries besides its payload and pad: the IPv4, UDP and
	// BTH headers, the largest extension headers and the ICRC. A path
	// MTU fits an IP MTU when the path MTU plus this does.
	MaxIPv4Overhead = IPv4MinLen + UDPLen + BTHLen + MaxExtHdrLen + ICRCLen
)

var opTable [256]OpInfo

func defOp(op Opcode, name string, k Kind, pos Position, h Headers) {
	n := 0
	for _, e := range [...]struct {
		h Headers
		n int
	}{{HasDETH, DETHLen}, {HasRETH, RETHLen}, {HasAtomicETH, AtomicETHLen}, {HasAETH, AETHLen},
		{HasAtomicAckETH, AtomicAckETHLen}, {HasImmDt, ImmDtLen}, {HasIETH, IETHLen}} {
		if h&e.h != 0 {
			n += e.n
		}
	}
	t := Transport(op >> 5)
	opTable[op] = OpInfo{Name: t.String() + "_" + name, Transport: t, Kind: k, Position: pos, Headers: h, HdrLen: n, Valid: true}
}

func init() {
	const P = HasPayload
	// SEND and RDMA WRITE exist on RC and UC with the same shape.
	for _, base := range [...]Opcode{0x00, 0x20} {
		defOp(base+0x00, "SEND_FIRST", KindSend, PosFirst, P)
		defOp(base+0x01, "SEND_MIDDLE", KindSend, PosMiddle, P)
		defOp(base+0x02, "SEND_LAST", KindSend, PosLast, P)
		defOp(base+0x03, "SEND_LAST_WITH_IMMEDIATE", KindSend, PosLast, P|HasImmDt)
		defOp(base+0x04, "SEND_ONLY", KindSend, PosOnly, P)
		defOp(base+0x05, "SEND_ONLY_WITH_IMMEDIATE", KindSend, PosOnly, P|HasImmDt)
		defOp(base+0x06, "RDMA_WRITE_FIRST", KindWrite, PosFirst, P|HasRETH)
		defOp(base+0x07, "RDMA_WRITE_MIDDLE", KindWrite, PosMiddle, P)
		defOp(base+0x08, "RDMA_WRITE_LAST", KindWrite, PosLast, P)
		defOp(base+0x09, "RDMA_WRITE_LAST_WITH_IMMEDIATE", KindWrite, PosLast, P|HasImmDt)
		defOp(base+0x0A, "RDMA_WRITE_ONLY", KindWrite, PosOnly, P|HasRETH)
		defOp(base+0x0B, "RDMA_WRITE_ONLY_WITH_IMMEDIATE", KindWrite, PosOnly, P|HasRETH|HasImmDt)
	}
	defOp(OpRCReadRequest, "RDMA_READ_REQUEST", KindReadRequest, PosOnly, HasRETH)
	defOp(OpRCReadResponseFirst, "RDMA_READ_RESPONSE_FIRST", KindReadResponse, PosFirst, P|HasAETH)
	defOp(OpRCReadResponseMiddle, "RDMA_READ_RESPONSE_MIDDLE", KindReadResponse, PosMiddle, P)
	defOp(OpRCReadResponseLast, "RDMA_READ_RESPONSE_LAST", KindReadResponse, PosLast, P|HasAETH)
	defOp(OpRCReadResponseOnly, "RDMA_READ_RESPONSE_ONLY", KindReadResponse, PosOnly, P|HasAETH)
	defOp(OpRCAcknowledge, "ACKNOWLEDGE", KindAck, PosOnly, HasAETH)
	defOp(OpRCAtomicAcknowledge, "ATOMIC_ACKNOWLEDGE", KindAtomicAck, PosOnly, HasAETH|HasAtomicAckETH)
	defOp(OpRCCompareSwap, "COMPARE_SWAP", KindCompareSwap, PosOnly, HasAtomicETH)
	defOp(OpRCFetchAdd, "FETCH_ADD", KindFetchAdd, PosOnly, HasAtomicETH)
	defOp(OpRCSendLastWithInvalidate, "SEND_LAST_WITH_INVALIDATE", KindSend, PosLast, P|HasIETH)
	defOp(OpRCSendOnlyWithInvalidate, "SEND_ONLY_WITH_INVALIDATE", KindSend, PosOnly, P|HasIETH)
	defOp(OpUDSendOnly, "SEND_ONLY", KindSend, PosOnly, P|HasDETH)
	defOp(OpUDSendOnlyImm, "SEND_ONLY_WITH_IMMEDIATE", KindSend, PosOnly, P|HasDETH|HasImmDt)
	defOp(OpCNP, "", KindCNP, PosOnly, P)
	opTable[OpCNP].Name = "CNP"
}

// Info returns the description of op. For an opcode rocesim does not speak
// (reserved, RD, manufacturer-specific), Info().Valid is false.
func (op Opcode) Info() *OpInfo { return &opTable[op] }

// Valid reports whether op is an RC, UC, UD or CNP opcode rocesim decodes.
func (op Opcode) Valid() bool { return opTable[op].Valid }

// Transport returns the transport selected by the top three bits.
func (op Opcode) Transport() Transport { return Transport(op >> 5) }

// String returns the opcode's name ("RC_SEND_ONLY") or a hex form for
// opcodes outside the table.
func (op Opcode) String() string {
	if opTable[op].Valid {
		return opTable[op].Name
	}
	return "OPCODE_0x" + strconv.FormatUint(uint64(op)|0x100, 16)[1:]
}

// AllOpcodes returns every valid opcode in numeric order.
func AllOpcodes() []Opcode {
	var ops []Opcode
	for i := range opTable {
		if opTable[i].Valid {
			ops = append(ops, Opcode(i))
		}
	}
	return ops
}
