package rocelayers

import (
	"github.com/gopacket/gopacket"
	"github.com/gopacket/gopacket/layers"

	"github.com/rocesim/rocesim/wire"
)

// AtomicAckETH is the Atomic ACK Extended Transport Header layer (IBTA
// vol. 1 §9.5.3, 8 bytes), after the AETH of an ATOMIC ACKNOWLEDGE.
// Nothing follows it.
type AtomicAckETH struct {
	layers.BaseLayer
	// OrigRemoteData is the value the target held before the atomic.
	OrigRemoteData uint64
}

// LayerType returns LayerTypeAtomicAckETH.
func (a *AtomicAckETH) LayerType() gopacket.LayerType { return LayerTypeAtomicAckETH }

// CanDecode returns LayerTypeAtomicAckETH.
func (a *AtomicAckETH) CanDecode() gopacket.LayerClass { return LayerTypeAtomicAckETH }

// NextLayerType returns gopacket.LayerTypeZero: atomic ACKs carry no
// payload, or gopacket.LayerTypePayload for bytes after a header decoded
// on its own.
func (a *AtomicAckETH) NextLayerType() gopacket.LayerType { return payloadOrZero(len(a.Payload)) }

// DecodeFromBytes decodes an AtomicAckETH in place.
func (a *AtomicAckETH) DecodeFromBytes(data []byte, df gopacket.DecodeFeedback) error {
	if err := split(&a.BaseLayer, data, wire.AtomicAckETHLen, df); err != nil {
		return err
	}
	a.OrigRemoteData = wire.AtomicAckETH(data).OrigRemoteData()
	return nil
}

// SerializeTo prepends the AtomicAckETH.
func (a *AtomicAckETH) SerializeTo(b gopacket.SerializeBuffer, opts gopacket.SerializeOptions) error {
	h, err := b.PrependBytes(wire.AtomicAckETHLen)
	if err != nil {
		return err
	}
	wire.AtomicAckETH(h).SetOrigRemoteData(a.OrigRemoteData)
	return nil
}
