package rocelayers

import (
	"errors"

	"github.com/gopacket/gopacket"

	"github.com/rocesim/rocesim/wire"
)

// Chaining: which layer follows which.
//
// The transport headers carry no "next header" field: the BTH opcode alone
// says which extension headers follow, in the fixed order of IBTA vol. 1
// §9.2 (DETH, RETH, AtomicETH, AETH, AtomicAckETH, ImmDt, IETH), and
// whether payload follows them (wire.OpInfo.Headers). So:
//
//  1. The BTH checks the whole transport packet against its opcode (known
//     opcode, TVer 0, room for the extension headers, pad, ICRC, payload
//     only where the opcode has one) and names the first extension header.
//  2. After AtomicETH and AtomicAckETH nothing follows; after ImmDt and
//     IETH only payload. These four decide from their own identity.
//  3. After DETH, RETH and AETH it depends on the opcode: a UD SEND with
//     immediate puts ImmDt after the DETH; RDMA WRITE ONLY WITH IMMEDIATE
//     puts ImmDt after the RETH, RDMA WRITE FIRST/ONLY payload and READ
//     REQUEST nothing; ATOMIC ACKNOWLEDGE puts AtomicAckETH after the AETH,
//     a READ RESPONSE payload and an ACK nothing. These three layers carry
//     the Opcode of their packet and get it from the BTH:
//     - in gopacket.NewPacket, the BTH's decoder hands the opcode down:
//     each next decoder is a value (opDecoder) holding it;
//     - in a gopacket.DecodingLayerParser, where each layer is decoded on
//     its own, the layer is linked to the parser's BTH (Layers, or Link)
//     and reads the opcode the BTH has just decoded.
//
// There is no package-level state, so parsers on different goroutines do
// not interfere. An unlinked DETH, RETH or AETH whose Opcode does not
// carry it fails with ErrNoOpcode instead of guessing.

// ErrNoOpcode is returned by DETH, RETH and AETH DecodeFromBytes when the
// layer has no opcode that carries it: it is neither linked to a BTH (Link,
// Layers.DecodingLayers) nor given an Opcode, so it cannot tell which
// layer follows.
var ErrNoOpcode = errors.New("rocelayers: extension header decoded without its opcode; link it to the BTH (Layers.DecodingLayers or Link) or set Opcode")

// ErrPadCount is returned by BTH.SerializeTo when PadCount is above 3 and
// opts.FixLengths is off.
var ErrPadCount = errors.New("rocelayers: BTH PadCount above 3")

// extOrder lists the extension headers in wire order (IBTA vol. 1 §9.2).
var extOrder = [...]struct {
	h wire.Headers
	t gopacket.LayerType
}{
	{wire.HasDETH, LayerTypeDETH},
	{wire.HasRETH, LayerTypeRETH},
	{wire.HasAtomicETH, LayerTypeAtomicETH},
	{wire.HasAETH, LayerTypeAETH},
	{wire.HasAtomicAckETH, LayerTypeAtomicAckETH},
	{wire.HasImmDt, LayerTypeImmDt},
	{wire.HasIETH, LayerTypeIETH},
}

// nextLayer returns the layer that follows header self (0 for the BTH) in
// a packet with opcode op: the next extension header the opcode carries,
// else payload if rest (the bytes left after self) is not empty.
func nextLayer(op wire.Opcode, self wire.Headers, rest int) gopacket.LayerType {
	h := op.Info().Headers
	after := self == 0
	for _, e := range extOrder {
		if after && h&e.h != 0 {
			return e.t
		}
		if e.h == self {
			after = true
		}
	}
	return payloadOrZero(rest)
}

// payloadOrZero is what follows the last header: payload, or nothing.
func payloadOrZero(rest int) gopacket.LayerType {
	if rest > 0 {
		return gopacket.LayerTypePayload
	}
	return gopacket.LayerTypeZero
}

// extOpcode returns the opcode an opcode-dependent extension layer decodes
// with: its linked BTH's, else its own Opcode field. The opcode must carry
// the header.
func extOpcode(link *BTH, own wire.Opcode, self wire.Headers) (wire.Opcode, error) {
	op := own
	if link != nil {
		op = link.Opcode
	}
	if op.Info().Headers&self == 0 {
		return op, ErrNoOpcode
	}
	return op, nil
}

// Layers holds one layer of each RoCE type, linked for a
// gopacket.DecodingLayerParser:
//
//	var eth layers.Ethernet
//	var ip4 layers.IPv4
//	var udp layers.UDP
//	var payload gopacket.Payload
//	var roce rocelayers.Layers
//	parser := gopacket.NewDecodingLayerParser(layers.LayerTypeEthernet, &eth, &ip4, &udp, &payload)
//	for _, l := range roce.DecodingLayers() {
//		parser.AddDecodingLayer(l)
//	}
//
// After DecodeLayers, the fields of the layers the decoded slice names are
// valid (roce.BTH.PSN, roce.RETH.VA, ...). A Layers must not be copied once
// DecodingLayers has linked it.
type Layers struct {
	BTH          BTH          // every RoCE packet
	DETH         DETH         // linked to BTH
	RETH         RETH         // linked to BTH
	AtomicETH    AtomicETH    // COMPARE_SWAP, FETCH_ADD
	AETH         AETH         // linked to BTH
	AtomicAckETH AtomicAckETH // ATOMIC_ACKNOWLEDGE
	ImmDt        ImmDt        // *_WITH_IMMEDIATE
	IETH         IETH         // SEND_*_WITH_INVALIDATE
}

// DecodingLayers links l's DETH, RETH and AETH to l.BTH and returns the
// eight layers, for gopacket.NewDecodingLayerParser or AddDecodingLayer.
func (l *Layers) DecodingLayers() []gopacket.DecodingLayer {
	l.DETH.Link(&l.BTH)
	l.RETH.Link(&l.BTH)
	l.AETH.Link(&l.BTH)
	return []gopacket.DecodingLayer{&l.BTH, &l.DETH, &l.RETH, &l.AtomicETH, &l.AETH, &l.AtomicAckETH, &l.ImmDt, &l.IETH}
}

// decodingLayer is what every layer of this package is.
type decodingLayer interface {
	gopacket.Layer
	gopacket.DecodingLayer
}

// opDecoder is the gopacket.Decoder of one extension header inside a
// packet whose opcode it knows (step 3 of the chaining above).
type opDecoder struct {
	op wire.Opcode
	t  gopacket.LayerType
}

// Decode decodes the header d names, with d's opcode.
func (d opDecoder) Decode(data []byte, p gopacket.PacketBuilder) error {
	var l decodingLayer
	switch d.t {
	case LayerTypeDETH:
		l = &DETH{Opcode: d.op}
	case LayerTypeRETH:
		l = &RETH{Opcode: d.op}
	case LayerTypeAtomicETH:
		l = &AtomicETH{}
	case LayerTypeAETH:
		l = &AETH{Opcode: d.op}
	case LayerTypeAtomicAckETH:
		l = &AtomicAckETH{}
	case LayerTypeImmDt:
		l = &ImmDt{}
	case LayerTypeIETH:
		l = &IETH{}
	default:
		return d.t.Decode(data, p)
	}
	return decodeLayer(l, d.op, data, p)
}

// decodeLayer decodes l, adds it to the packet and hands on to the layer
// that follows, passing op along.
func decodeLayer(l decodingLayer, op wire.Opcode, data []byte, p gopacket.PacketBuilder) error {
	if err := l.DecodeFromBytes(data, p); err != nil {
		return err
	}
	p.AddLayer(l)
	return decodeNext(p, op, l.NextLayerType())
}

// decodeNext has the packet decode the layer of type next, if any, with
// opcode op.
func decodeNext(p gopacket.PacketBuilder, op wire.Opcode, next gopacket.LayerType) error {
	switch next {
	case gopacket.LayerTypeZero:
		return nil
	case gopacket.LayerTypePayload:
		return p.NextDecoder(gopacket.LayerTypePayload)
	default:
		return p.NextDecoder(opDecoder{op, next})
	}
}

// decodeBTH is LayerTypeBTH's decoder: the BTH, then the rest of the
// transport packet with its opcode.
func decodeBTH(data []byte, p gopacket.PacketBuilder) error {
	b := &BTH{}
	if err := b.DecodeFromBytes(data, p); err != nil {
		return err
	}
	p.AddLayer(b)
	return decodeNext(p, b.Opcode, b.NextLayerType())
}

// The decoders registered for the extension layer types decode a header
// on its own, when a user starts gopacket.NewPacket at it. DETH, RETH and
// AETH then have no opcode and fail with ErrNoOpcode.

func decodeDETH(data []byte, p gopacket.PacketBuilder) error {
	return decodeLayer(&DETH{}, 0, data, p)
}

func decodeRETH(data []byte, p gopacket.PacketBuilder) error {
	return decodeLayer(&RETH{}, 0, data, p)
}

func decodeAtomicETH(data []byte, p gopacket.PacketBuilder) error {
	return decodeLayer(&AtomicETH{}, 0, data, p)
}

func decodeAETH(data []byte, p gopacket.PacketBuilder) error {
	return decodeLayer(&AETH{}, 0, data, p)
}

func decodeAtomicAckETH(data []byte, p gopacket.PacketBuilder) error {
	return decodeLayer(&AtomicAckETH{}, 0, data, p)
}

func decodeImmDt(data []byte, p gopacket.PacketBuilder) error {
	return decodeLayer(&ImmDt{}, 0, data, p)
}

func decodeIETH(data []byte, p gopacket.PacketBuilder) error {
	return decodeLayer(&IETH{}, 0, data, p)
}
