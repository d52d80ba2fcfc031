package rocelayers

import (
	"github.com/gopacket/gopacket"
	"github.com/gopacket/gopacket/layers"

	"github.com/rocesim/rocesim/wire"
)

// IETH is the Invalidate Extended Transport Header layer (IBTA vol. 1
// §9.3.7, 4 bytes), on SEND_*_WITH_INVALIDATE. Only payload follows it.
type IETH struct {
	layers.BaseLayer
	// RKey is the R_Key to invalidate.
	RKey uint32
}

// LayerType returns LayerTypeIETH.
func (i *IETH) LayerType() gopacket.LayerType { return LayerTypeIETH }

// CanDecode returns LayerTypeIETH.
func (i *IETH) CanDecode() gopacket.LayerClass { return LayerTypeIETH }

// NextLayerType returns gopacket.LayerTypePayload, or
// gopacket.LayerTypeZero if the payload is empty.
func (i *IETH) NextLayerType() gopacket.LayerType { return payloadOrZero(len(i.Payload)) }

// DecodeFromBytes decodes an IETH in place; the bytes after it are Payload.
func (i *IETH) DecodeFromBytes(data []byte, df gopacket.DecodeFeedback) error {
	if err := split(&i.BaseLayer, data, wire.IETHLen, df); err != nil {
		return err
	}
	i.RKey = wire.IETH(data).RKey()
	return nil
}

// SerializeTo prepends the IETH.
func (i *IETH) SerializeTo(b gopacket.SerializeBuffer, opts gopacket.SerializeOptions) error {
	h, err := b.PrependBytes(wire.IETHLen)
	if err != nil {
		return err
	}
	wire.IETH(h).Set(i.RKey)
	return nil
}
