package rocelayers

import (
	"github.com/gopacket/gopacket"
	"github.com/gopacket/gopacket/layers"

	"github.com/rocesim/rocesim/wire"
)

// ImmDt is the Immediate Data header layer (IBTA vol. 1 §9.3.6, 4 bytes),
// on the *_WITH_IMMEDIATE opcodes. Only payload follows it.
type ImmDt struct {
	layers.BaseLayer
	// Value is the immediate data as the big-endian integer on the wire
	// (libibverbs hands it over in network order), like wire.ImmDt.Value.
	Value uint32
}

// LayerType returns LayerTypeImmDt.
func (i *ImmDt) LayerType() gopacket.LayerType { return LayerTypeImmDt }

// CanDecode returns LayerTypeImmDt.
func (i *ImmDt) CanDecode() gopacket.LayerClass { return LayerTypeImmDt }

// NextLayerType returns gopacket.LayerTypePayload, or
// gopacket.LayerTypeZero if the payload is empty.
func (i *ImmDt) NextLayerType() gopacket.LayerType { return payloadOrZero(len(i.Payload)) }

// DecodeFromBytes decodes an ImmDt in place; the bytes after it are Payload.
func (i *ImmDt) DecodeFromBytes(data []byte, df gopacket.DecodeFeedback) error {
	if err := split(&i.BaseLayer, data, wire.ImmDtLen, df); err != nil {
		return err
	}
	i.Value = wire.ImmDt(data).Value()
	return nil
}

// SerializeTo prepends the ImmDt.
func (i *ImmDt) SerializeTo(b gopacket.SerializeBuffer, opts gopacket.SerializeOptions) error {
	h, err := b.PrependBytes(wire.ImmDtLen)
	if err != nil {
		return err
	}
	wire.ImmDt(h).Set(i.Value)
	return nil
}
