// Package rocelayers exposes the RoCE v2 transport headers of package wire
// as gopacket layers: BTH, DETH, RETH, AtomicETH, AETH, AtomicAckETH,
// ImmDt and IETH (IBTA vol. 1 ch. 9, Annex A17).
//
// Importing the package registers the layer types (LayerTypeBTH … 1791–1798)
// and UDP port 4791, so gopacket's own decoding reaches them:
//
//	pkt := gopacket.NewPacket(frame, layers.LayerTypeEthernet, gopacket.Default)
//	// Ethernet, IPv4, UDP, BTH, RETH, Payload
//	if l := pkt.Layer(rocelayers.LayerTypeBTH); l != nil {
//		bth := l.(*rocelayers.BTH)
//		fmt.Println(bth.Opcode, bth.PSN, bth.DestQP) // fields of wire.BTHFields
//	}
//	if l := pkt.Layer(rocelayers.LayerTypeAETH); l != nil {
//		fmt.Println(l.(*rocelayers.AETH).Syndrome) // "ACK", "NAK(PSN sequence error)", ...
//	}
//
// A malformed transport packet (reserved opcode, TVer not 0, too short for
// its headers, bad pad) ends in a gopacket.DecodeFailure whose error is one
// of package wire's sentinels (errors.Is(err, wire.ErrUnknownOpcode)).
//
// For allocation-free decoding, Layers gives one linked layer of each type
// to a gopacket.DecodingLayerParser:
//
//	var roce rocelayers.Layers
//	parser := gopacket.NewDecodingLayerParser(layers.LayerTypeEthernet, &eth, &ip4, &ip6, &udp, &payload)
//	for _, l := range roce.DecodingLayers() {
//		parser.AddDecodingLayer(l)
//	}
//	err := parser.DecodeLayers(frame, &decoded) // then roce.BTH.PSN, roce.RETH.VA, ...
//
// Why the link: the transport headers name no successor; the BTH opcode
// alone says which extension headers follow, in IBTA order. The BTH checks
// the packet against its opcode and names the first one. After AtomicETH
// and AtomicAckETH nothing follows and after ImmDt and IETH only payload,
// whatever the opcode. But what follows a DETH, RETH or AETH depends on it
// (RDMA WRITE ONLY: payload; WITH IMMEDIATE: ImmDt; READ REQUEST: nothing),
// so those three layers carry an Opcode field. gopacket.NewPacket fills it
// in by passing the opcode from decoder to decoder; in a
// DecodingLayerParser, where each layer decodes alone, the linked layer
// reads it from the parser's BTH (Layers.DecodingLayers, or Link). An
// unlinked DETH, RETH or AETH without an opcode that carries it fails with
// ErrNoOpcode rather than guess. There is no package-level state, so
// parsers on different goroutines are independent.
//
// Building frames: SerializeTo prepends each header as gopacket expects,
// and BTH.SerializeTo also appends the pad and the ICRC field. The ICRC
// covers the IP and UDP headers, so compute it on the finished frame
// (FixICRC then refreshes the UDP checksum, which covers the ICRC):
//
//	udp.SetNetworkLayerForChecksum(&ip4) // ComputeChecksums includes UDP
//	buf := gopacket.NewSerializeBuffer()
//	opts := gopacket.SerializeOptions{FixLengths: true, ComputeChecksums: true}
//	err := gopacket.SerializeLayers(buf, opts, &eth, &ip4, &udp,
//		&rocelayers.BTH{BTHFields: wire.BTHFields{Opcode: wire.OpRCWriteOnly, PKey: 0xFFFF, DestQP: 17, PSN: 100}},
//		&rocelayers.RETH{RETHFields: wire.RETHFields{VA: 0x1000, RKey: 0x251, DMALength: 5}},
//		gopacket.Payload("hello"))
//	err = rocelayers.FixICRC(buf.Bytes())
//
// The layers decoded from a frame re-serialize to the same bytes with
// FixLengths off: pad bytes and ICRC are kept as carried.
package rocelayers
