package rocelayers

import (
	"github.com/gopacket/gopacket"
	"github.com/gopacket/gopacket/layers"

	"github.com/rocesim/rocesim/wire"
)

// RETH is the RDMA Extended Transport Header layer (IBTA vol. 1 §9.3.3,
// 16 bytes): virtual address, R_Key and DMA length, on RDMA WRITE
// FIRST/ONLY and RDMA READ requests. The fields are wire.RETHFields,
// embedded.
type RETH struct {
	layers.BaseLayer
	wire.RETHFields
	// Opcode is the opcode of the packet carrying the header; it decides
	// what follows (ImmDt on RDMA WRITE ONLY WITH IMMEDIATE, nothing on a
	// READ REQUEST, else payload). DecodeFromBytes takes it from the
	// linked BTH; an unlinked RETH must be given it beforehand (see
	// ErrNoOpcode). SerializeTo ignores it.
	Opcode wire.Opcode
	bth    *BTH
}

// Link makes DecodeFromBytes take Opcode from b, which decodes the same
// packet just before (as in a gopacket.DecodingLayerParser). Link(nil)
// unlinks.
func (r *RETH) Link(b *BTH) { r.bth = b }

// LayerType returns LayerTypeRETH.
func (r *RETH) LayerType() gopacket.LayerType { return LayerTypeRETH }

// CanDecode returns LayerTypeRETH.
func (r *RETH) CanDecode() gopacket.LayerClass { return LayerTypeRETH }

// NextLayerType returns the header that follows the RETH for Opcode.
func (r *RETH) NextLayerType() gopacket.LayerType {
	return nextLayer(r.Opcode, wire.HasRETH, len(r.Payload))
}

// DecodeFromBytes decodes a RETH in place; the bytes after it are Payload.
func (r *RETH) DecodeFromBytes(data []byte, df gopacket.DecodeFeedback) error {
	op, err := extOpcode(r.bth, r.Opcode, wire.HasRETH)
	if err != nil {
		return err
	}
	if err := split(&r.BaseLayer, data, wire.RETHLen, df); err != nil {
		return err
	}
	r.RETHFields = wire.RETH(data).Fields()
	r.Opcode = op
	return nil
}

// SerializeTo prepends the RETH.
func (r *RETH) SerializeTo(b gopacket.SerializeBuffer, opts gopacket.SerializeOptions) error {
	h, err := b.PrependBytes(wire.RETHLen)
	if err != nil {
		return err
	}
	wire.RETH(h).Encode(&r.RETHFields)
	return nil
}
