package rocelayers

import (
	"github.com/gopacket/gopacket"
	"github.com/gopacket/gopacket/layers"

	"github.com/rocesim/rocesim/wire"
)

// AETH is the ACK Extended Transport Header layer (IBTA vol. 1 §9.3.4,
// 4 bytes): syndrome and MSN, on ACKs, atomic ACKs and RDMA READ responses
// (first, last, only). The fields are wire.AETHFields, embedded, so
// aeth.Syndrome has the wire.Syndrome methods (IsNAK, RNRTimerCode, ...).
type AETH struct {
	layers.BaseLayer
	wire.AETHFields
	// Opcode is the opcode of the packet carrying the header; it decides
	// what follows (AtomicAckETH on ATOMIC ACKNOWLEDGE, nothing on an
	// ACKNOWLEDGE, payload on a READ RESPONSE). DecodeFromBytes takes it
	// from the linked BTH; an unlinked AETH must be given it beforehand
	// (see ErrNoOpcode). SerializeTo ignores it.
	Opcode wire.Opcode
	bth    *BTH
}

// Link makes DecodeFromBytes take Opcode from b, which decodes the same
// packet just before (as in a gopacket.DecodingLayerParser). Link(nil)
// unlinks.
func (a *AETH) Link(b *BTH) { a.bth = b }

// LayerType returns LayerTypeAETH.
func (a *AETH) LayerType() gopacket.LayerType { return LayerTypeAETH }

// CanDecode returns LayerTypeAETH.
func (a *AETH) CanDecode() gopacket.LayerClass { return LayerTypeAETH }

// NextLayerType returns the header that follows the AETH for Opcode.
func (a *AETH) NextLayerType() gopacket.LayerType {
	return nextLayer(a.Opcode, wire.HasAETH, len(a.Payload))
}

// DecodeFromBytes decodes an AETH in place; the bytes after it are Payload.
func (a *AETH) DecodeFromBytes(data []byte, df gopacket.DecodeFeedback) error {
	op, err := extOpcode(a.bth, a.Opcode, wire.HasAETH)
	if err != nil {
		return err
	}
	if err := split(&a.BaseLayer, data, wire.AETHLen, df); err != nil {
		return err
	}
	a.AETHFields = wire.AETH(data).Fields()
	a.Opcode = op
	return nil
}

// SerializeTo prepends the AETH.
func (a *AETH) SerializeTo(b gopacket.SerializeBuffer, opts gopacket.SerializeOptions) error {
	h, err := b.PrependBytes(wire.AETHLen)
	if err != nil {
		return err
	}
	wire.AETH(h).Encode(&a.AETHFields)
	return nil
}
