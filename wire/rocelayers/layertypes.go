package rocelayers

import (
	"github.com/gopacket/gopacket"
	"github.com/gopacket/gopacket/layers"

	"github.com/rocesim/rocesim/wire"
)

// Layer type numbers, in gopacket's range for application types
// (1000–1999, array-indexed and fast). The block starts at 1791, after the
// RoCE v2 UDP port 4791, and follows the wire order of IBTA vol. 1 §9.2.
const (
	numBTH = 1791 + iota
	numDETH
	numRETH
	numAtomicETH
	numAETH
	numAtomicAckETH
	numImmDt
	numIETH
)

// The layer types, registered with gopacket. Each one's decoder can start
// a gopacket.NewPacket; decoding from LayerTypeBTH (what UDP port 4791
// leads to) decodes the whole transport packet.
var (
	// LayerTypeBTH is the Base Transport Header with the pad and ICRC (1791).
	LayerTypeBTH = gopacket.RegisterLayerType(numBTH, gopacket.LayerTypeMetadata{Name: "BTH", Decoder: gopacket.DecodeFunc(decodeBTH)})
	// LayerTypeDETH is the Datagram Extended Transport Header (1792).
	LayerTypeDETH = gopacket.RegisterLayerType(numDETH, gopacket.LayerTypeMetadata{Name: "DETH", Decoder: gopacket.DecodeFunc(decodeDETH)})
	// LayerTypeRETH is the RDMA Extended Transport Header (1793).
	LayerTypeRETH = gopacket.RegisterLayerType(numRETH, gopacket.LayerTypeMetadata{Name: "RETH", Decoder: gopacket.DecodeFunc(decodeRETH)})
	// LayerTypeAtomicETH is the Atomic Extended Transport Header (1794).
	LayerTypeAtomicETH = gopacket.RegisterLayerType(numAtomicETH, gopacket.LayerTypeMetadata{Name: "AtomicETH", Decoder: gopacket.DecodeFunc(decodeAtomicETH)})
	// LayerTypeAETH is the ACK Extended Transport Header (1795).
	LayerTypeAETH = gopacket.RegisterLayerType(numAETH, gopacket.LayerTypeMetadata{Name: "AETH", Decoder: gopacket.DecodeFunc(decodeAETH)})
	// LayerTypeAtomicAckETH is the Atomic ACK Extended Transport Header (1796).
	LayerTypeAtomicAckETH = gopacket.RegisterLayerType(numAtomicAckETH, gopacket.LayerTypeMetadata{Name: "AtomicAckETH", Decoder: gopacket.DecodeFunc(decodeAtomicAckETH)})
	// LayerTypeImmDt is the Immediate Data header (1797).
	LayerTypeImmDt = gopacket.RegisterLayerType(numImmDt, gopacket.LayerTypeMetadata{Name: "ImmDt", Decoder: gopacket.DecodeFunc(decodeImmDt)})
	// LayerTypeIETH is the Invalidate Extended Transport Header (1798).
	LayerTypeIETH = gopacket.RegisterLayerType(numIETH, gopacket.LayerTypeMetadata{Name: "IETH", Decoder: gopacket.DecodeFunc(decodeIETH)})
)

func init() {
	// Annex A17.4: RoCE v2 packets go to UDP destination port 4791.
	layers.RegisterUDPPortLayerType(layers.UDPPort(wire.UDPPortRoCEv2), LayerTypeBTH)
}
