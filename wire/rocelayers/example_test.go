package rocelayers_test

import (
	"encoding/hex"
	"fmt"
	"net"

	"github.com/gopacket/gopacket"
	"github.com/gopacket/gopacket/layers"

	"github.com/rocesim/rocesim/wire"
	"github.com/rocesim/rocesim/wire/rocelayers"
)

// ackFrame is an RC ACKNOWLEDGE captured from rxe (rdma_write.pcap frame
// 43). tshark -V:
//
//	Ethernet II, Src: 52:54:00:12:34:01, Dst: 52:54:00:12:34:02
//	Internet Protocol Version 4, Src: 10.0.0.1, Dst: 10.0.0.2
//	User Datagram Protocol, Src Port: 49441, Dst Port: 4791
//	InfiniBand
//	  Base Transport Header
//	    Opcode: Acknowledge (17)
//	    Partition Key: 65535
//	    Destination Queue Pair: 0x000011
//	    Acknowledge Request: False
//	    Packet Sequence Number: 7528939
//	  ACK Extended Transport Header
//	    Syndrome: 31
//	    Message Sequence Number: 1
//	  Invariant CRC: 0x8abe7c4b
const ackFrame = "" +
	"525400123402525400123401" + "0800" + // Ethernet
	"45000030891d400040119d9d0a0000010a000002" + // IPv4
	"c12112b7001c0000" + // UDP
	"1100ffff000000110072e1eb" + // BTH
	"1f000001" + // AETH
	"8abe7c4b" // ICRC

// Decoding with gopacket.NewPacket: UDP port 4791 leads to the BTH, the
// opcode to the AETH.
func Example_newPacket() {
	frame, _ := hex.DecodeString(ackFrame)
	pkt := gopacket.NewPacket(frame, layers.LayerTypeEthernet, gopacket.Default)
	for _, l := range pkt.Layers() {
		fmt.Println(l.LayerType())
	}
	bth := pkt.Layer(rocelayers.LayerTypeBTH).(*rocelayers.BTH)
	aeth := pkt.Layer(rocelayers.LayerTypeAETH).(*rocelayers.AETH)
	fmt.Println(bth.Opcode, bth.DestQP, bth.PSN, aeth.Syndrome, aeth.MSN)
	fmt.Printf("ICRC %#08x\n", bth.ICRC)
	// Output:
	// Ethernet
	// IPv4
	// UDP
	// BTH
	// AETH
	// RC_ACKNOWLEDGE 17 7528939 ACK 1
	// ICRC 0x4b7cbe8a
}

// Decoding without allocating: Layers links one layer of each type for a
// DecodingLayerParser.
func ExampleLayers() {
	var (
		eth     layers.Ethernet
		ip4     layers.IPv4
		ip6     layers.IPv6
		udp     layers.UDP
		payload gopacket.Payload
		roce    rocelayers.Layers
	)
	parser := gopacket.NewDecodingLayerParser(layers.LayerTypeEthernet, &eth, &ip4, &ip6, &udp, &payload)
	for _, l := range roce.DecodingLayers() {
		parser.AddDecodingLayer(l)
	}
	decoded := make([]gopacket.LayerType, 0, 8)

	frame, _ := hex.DecodeString(ackFrame)
	if err := parser.DecodeLayers(frame, &decoded); err != nil {
		fmt.Println(err)
		return
	}
	fmt.Println(decoded)
	fmt.Println(roce.BTH.PSN, roce.AETH.Syndrome.IsACK())
	// Output:
	// [Ethernet IPv4 UDP BTH AETH]
	// 7528939 true
}

// Building a frame: gopacket serializes the layers, FixICRC fills in the
// ICRC over the finished frame.
func ExampleFixICRC() {
	ip := &layers.IPv4{Version: 4, TTL: 64, Flags: layers.IPv4DontFragment, Protocol: layers.IPProtocolUDP,
		SrcIP: net.IP{10, 0, 0, 2}, DstIP: net.IP{10, 0, 0, 1}}
	udp := &layers.UDP{SrcPort: 49441, DstPort: 4791}
	_ = udp.SetNetworkLayerForChecksum(ip)
	buf := gopacket.NewSerializeBuffer()
	err := gopacket.SerializeLayers(buf, gopacket.SerializeOptions{FixLengths: true, ComputeChecksums: true},
		&layers.Ethernet{SrcMAC: net.HardwareAddr{2, 0, 0, 0, 0, 2}, DstMAC: net.HardwareAddr{2, 0, 0, 0, 0, 1},
			EthernetType: layers.EthernetTypeIPv4},
		ip, udp,
		&rocelayers.BTH{BTHFields: wire.BTHFields{Opcode: wire.OpRCWriteOnly, PKey: 0xFFFF, DestQP: 17, PSN: 100}},
		&rocelayers.RETH{RETHFields: wire.RETHFields{VA: 0x1000, RKey: 0x251, DMALength: 5}},
		gopacket.Payload("hello"))
	if err == nil {
		err = rocelayers.FixICRC(buf.Bytes())
	}
	var p wire.Packet
	if err == nil {
		err = p.Decode(buf.Bytes())
	}
	fmt.Println(err, p.BTH.Opcode(), p.BTH.PadCount(), string(p.Payload))
	// Output:
	// <nil> RC_RDMA_WRITE_ONLY 3 hello
}
