package rocelayers

import (
	"github.com/gopacket/gopacket"
	"github.com/gopacket/gopacket/layers"

	"github.com/rocesim/rocesim/wire"
)

// AtomicETH is the Atomic Extended Transport Header layer (IBTA vol. 1
// §9.3.5, 28 bytes): virtual address, R_Key, swap (or add) data and
// compare data, on COMPARE_SWAP and FETCH_ADD. The fields are
// wire.AtomicETHFields, embedded. Nothing follows it.
type AtomicETH struct {
	layers.BaseLayer
	wire.AtomicETHFields
}

// LayerType returns LayerTypeAtomicETH.
func (a *AtomicETH) LayerType() gopacket.LayerType { return LayerTypeAtomicETH }

// CanDecode returns LayerTypeAtomicETH.
func (a *AtomicETH) CanDecode() gopacket.LayerClass { return LayerTypeAtomicETH }

// NextLayerType returns gopacket.LayerTypeZero: atomic requests carry no
// payload (a BTH before it has checked that), or gopacket.LayerTypePayload
// for bytes after a header decoded on its own.
func (a *AtomicETH) NextLayerType() gopacket.LayerType { return payloadOrZero(len(a.Payload)) }

// DecodeFromBytes decodes an AtomicETH in place.
func (a *AtomicETH) DecodeFromBytes(data []byte, df gopacket.DecodeFeedback) error {
	if err := split(&a.BaseLayer, data, wire.AtomicETHLen, df); err != nil {
		return err
	}
	a.AtomicETHFields = wire.AtomicETH(data).Fields()
	return nil
}

// SerializeTo prepends the AtomicETH.
func (a *AtomicETH) SerializeTo(b gopacket.SerializeBuffer, opts gopacket.SerializeOptions) error {
	h, err := b.PrependBytes(wire.AtomicETHLen)
	if err != nil {
		return err
	}
	wire.AtomicETH(h).Encode(&a.AtomicETHFields)
	return nil
}
