package rocelayers

import (
	"github.com/gopacket/gopacket"
	"github.com/gopacket/gopacket/layers"

	"github.com/rocesim/rocesim/wire"
)

// DETH is the Datagram Extended Transport Header layer (IBTA vol. 1
// §9.3.2, 8 bytes): Q_Key and source QPN, on every UD packet. The fields
// are wire.DETHFields, embedded.
type DETH struct {
	layers.BaseLayer
	wire.DETHFields
	// Opcode is the opcode of the packet carrying the header; it decides
	// what follows (ImmDt on UD SEND ONLY WITH IMMEDIATE, else payload).
	// DecodeFromBytes takes it from the linked BTH; an unlinked DETH must
	// be given it beforehand (see ErrNoOpcode). SerializeTo ignores it.
	Opcode wire.Opcode
	bth    *BTH
}

// Link makes DecodeFromBytes take Opcode from b, which decodes the same
// packet just before (as in a gopacket.DecodingLayerParser). Link(nil)
// unlinks.
func (d *DETH) Link(b *BTH) { d.bth = b }

// LayerType returns LayerTypeDETH.
func (d *DETH) LayerType() gopacket.LayerType { return LayerTypeDETH }

// CanDecode returns LayerTypeDETH.
func (d *DETH) CanDecode() gopacket.LayerClass { return LayerTypeDETH }

// NextLayerType returns the header that follows the DETH for Opcode.
func (d *DETH) NextLayerType() gopacket.LayerType {
	return nextLayer(d.Opcode, wire.HasDETH, len(d.Payload))
}

// DecodeFromBytes decodes a DETH in place; the bytes after it are Payload.
func (d *DETH) DecodeFromBytes(data []byte, df gopacket.DecodeFeedback) error {
	op, err := extOpcode(d.bth, d.Opcode, wire.HasDETH)
	if err != nil {
		return err
	}
	if err := split(&d.BaseLayer, data, wire.DETHLen, df); err != nil {
		return err
	}
	d.DETHFields = wire.DETH(data).Fields()
	d.Opcode = op
	return nil
}

// SerializeTo prepends the DETH.
func (d *DETH) SerializeTo(b gopacket.SerializeBuffer, opts gopacket.SerializeOptions) error {
	h, err := b.PrependBytes(wire.DETHLen)
	if err != nil {
		return err
	}
	wire.DETH(h).Encode(&d.DETHFields)
	return nil
}

// split sets l to the first n bytes of data and the rest, or reports a
// truncated header.
func split(l *layers.BaseLayer, data []byte, n int, df gopacket.DecodeFeedback) error {
	if len(data) < n {
		df.SetTruncated()
		return wire.ErrTruncated
	}
	*l = layers.BaseLayer{Contents: data[:n], Payload: data[n:]}
	return nil
}
