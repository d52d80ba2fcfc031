package rocelayers_test

import (
	"bytes"
	"fmt"
	"net/netip"
	"testing"

	"github.com/gopacket/gopacket"
	"github.com/gopacket/gopacket/layers"
	"github.com/stretchr/testify/require"

	"github.com/rocesim/rocesim/wire"
	"github.com/rocesim/rocesim/wire/rocelayers"
)

// opcodeFrame describes a frame with opcode op, every field set to a
// distinct value so that a field read from the wrong place shows.
func opcodeFrame(op wire.Opcode, v6 bool, payload []byte) wire.Frame {
	f := wire.Frame{
		DstMAC:  wire.MAC{0x52, 0x54, 0, 0x12, 0x34, 0x02},
		SrcMAC:  wire.MAC{0x52, 0x54, 0, 0x12, 0x34, 0x01},
		Src:     netip.MustParseAddr("10.0.0.1"),
		Dst:     netip.MustParseAddr("10.0.0.2"),
		TOS:     0x6A,
		TTL:     64,
		IPID:    0x891D,
		IPFlags: wire.IPv4FlagDF,
		SrcPort: 0xC121,
		BTH: wire.BTHFields{
			Opcode: op, SolicitedEvent: true, MigReq: true, PKey: 0xFFFF,
			FECN: true, Resv6: 0x05, DestQP: 0x123456, AckReq: true, Resv7: 0x11,
			PSN: 0xFFFFFE,
		},
		DETH:         wire.DETHFields{QKey: 0x11111111, Resv8: 0x22, SrcQP: 0x333333},
		RETH:         wire.RETHFields{VA: 0x0000_5601_3106_E000, RKey: 0x251, DMALength: 0x1000},
		AtomicETH:    wire.AtomicETHFields{VA: 0x7000, RKey: 0x44, SwapAddData: 0x5555_5555_5555_5555, CompareData: 0x6666},
		AETH:         wire.AETHFields{Syndrome: wire.NAKSyndrome(wire.NAKRemoteAccess), MSN: 0x777777},
		AtomicAckETH: 0x8888_8888_0000_0001,
		ImmDt:        0xDEADBEEF,
		IETH:         0xCAFEF00D,
		Payload:      payload,
		PadBytes:     [3]byte{0xA1, 0xA2, 0xA3}, // carried as given, not zero
	}
	if v6 {
		f.Src = netip.MustParseAddr("fe80::5054:ff:fe12:3401")
		f.Dst = netip.MustParseAddr("fe80::5054:ff:fe12:3402")
		f.FlowLabel = 0xABCDE
	}
	return f
}

// encodeFrame builds f with wire.Encode, padded with zeros to Ethernet's
// 60-byte minimum as a NIC sends it (and as gopacket serializes it).
func encodeFrame(t testing.TB, f *wire.Frame) []byte {
	t.Helper()
	n, err := f.Len()
	require.NoError(t, err)
	if n < 60 {
		f.Trailer = make([]byte, 60-n)
		n = 60
	}
	buf := make([]byte, n)
	m, err := wire.Encode(buf, f)
	require.NoError(t, err)
	require.Equal(t, n, m)
	return buf
}

// Every opcode rocesim speaks, over IPv4 and IPv6, with and without
// payload: frames built by wire.Encode decode through gopacket.NewPacket
// and a DecodingLayerParser into the layer sequence the opcode table
// calls for, with every field as wire decodes it; the decoded layers
// re-serialize byte for byte; and serializing them afresh (lengths, pad,
// checksums, ICRC derived) gives the frame wire.Encode builds.
func TestEveryOpcode(t *testing.T) {
	data := []byte("0123456789abcdef")
	dp := newParser(layers.LayerTypeEthernet)
	for _, op := range wire.AllOpcodes() {
		lens := []int{0}
		if op.Info().Has(wire.HasPayload) {
			lens = []int{0, 5, 16}
		}
		for _, v6 := range []bool{false, true} {
			for _, n := range lens {
				name := fmt.Sprintf("%v/v6=%v/payload=%d", op, v6, n)
				t.Run(name, func(t *testing.T) {
					f := opcodeFrame(op, v6, data[:n])
					frame := encodeFrame(t, &f)
					var p wire.Packet
					require.NoError(t, p.Decode(frame))
					want := append(outerTypes(&p), transportTypes(op, n)...)

					for _, opts := range []gopacket.DecodeOptions{gopacket.Default, gopacket.Lazy} {
						pkt := gopacket.NewPacket(frame, layers.LayerTypeEthernet, opts)
						require.Nil(t, pkt.ErrorLayer())
						require.Equal(t, want, layerTypes(pkt.Layers()))
						checkTransport(t, name, transport(pkt.Layers()), &p)
						reserialize(t, frame, pkt.Layers())
					}

					require.NoError(t, dp.decode(frame))
					require.Equal(t, want, dp.decoded)
					checkTransport(t, name, transport(dp.layers()), &p)
					reserialize(t, frame, dp.layers())

					serializeAfresh(t, &f)
				})
			}
		}
	}
}

// reserialize checks that ls, decoded from frame, serialize back to it
// with every field as decoded (FixLengths and ComputeChecksums off).
func reserialize(t *testing.T, frame []byte, ls []gopacket.Layer) {
	t.Helper()
	buf := gopacket.NewSerializeBuffer()
	require.NoError(t, gopacket.SerializeLayers(buf, gopacket.SerializeOptions{}, serializable(t, ls)...))
	require.Equal(t, frame, buf.Bytes())
}

// serializeAfresh decodes f's frame, clears every derived field (lengths,
// pad count, checksums, ICRC), serializes with FixLengths and
// ComputeChecksums, runs FixICRC, and compares with wire.Encode.
func serializeAfresh(t *testing.T, f *wire.Frame) {
	t.Helper()
	frame := encodeFrame(t, f)
	pkt := gopacket.NewPacket(frame, layers.LayerTypeEthernet, gopacket.Default)
	require.Nil(t, pkt.ErrorLayer())
	udp := pkt.Layer(layers.LayerTypeUDP).(*layers.UDP)
	udp.Length, udp.Checksum = 0, 0
	switch ip := pkt.NetworkLayer().(type) {
	case *layers.IPv4:
		ip.IHL, ip.Length, ip.Checksum = 0, 0, 0
		require.NoError(t, udp.SetNetworkLayerForChecksum(ip))
	case *layers.IPv6:
		ip.Length = 0
		require.NoError(t, udp.SetNetworkLayerForChecksum(ip))
	}
	bth := pkt.Layer(rocelayers.LayerTypeBTH).(*rocelayers.BTH)
	bth.PadCount, bth.ICRC = 0, 0

	buf := gopacket.NewSerializeBuffer()
	opts := gopacket.SerializeOptions{FixLengths: true, ComputeChecksums: true}
	require.NoError(t, gopacket.SerializeLayers(buf, opts, serializable(t, pkt.Layers())...))
	got := buf.Bytes()
	var p wire.Packet
	require.ErrorIs(t, p.Decode(got), wire.ErrICRC, "ICRC right before FixICRC")
	require.NoError(t, rocelayers.FixICRC(got))
	require.NoError(t, p.Decode(got))
	require.True(t, udpChecksumOK(&p), "UDP checksum")

	// wire.Encode writes the UDP checksum as given; the rest it derives.
	f.UDPChecksum = p.UDP.Checksum()
	require.Equal(t, encodeFrame(t, f), got)
}

// The walk-through's example: an RDMA WRITE ONLY built from layer structs
// with gopacket.SerializeLayers, its ICRC fixed, decodes with wire.
func TestSerializeRDMAWriteOnly(t *testing.T) {
	for _, v6 := range []bool{false, true} {
		t.Run(fmt.Sprintf("v6=%v", v6), func(t *testing.T) {
			src, dst := netip.MustParseAddr("10.0.0.2"), netip.MustParseAddr("10.0.0.1")
			eth := &layers.Ethernet{
				SrcMAC:       []byte{0x52, 0x54, 0, 0x12, 0x34, 0x02},
				DstMAC:       []byte{0x52, 0x54, 0, 0x12, 0x34, 0x01},
				EthernetType: layers.EthernetTypeIPv4,
			}
			var ip gopacket.NetworkLayer
			if v6 {
				src, dst = netip.MustParseAddr("fd00::2"), netip.MustParseAddr("fd00::1")
				eth.EthernetType = layers.EthernetTypeIPv6
				ip = &layers.IPv6{Version: 6, NextHeader: layers.IPProtocolUDP, HopLimit: 64,
					SrcIP: src.AsSlice(), DstIP: dst.AsSlice()}
			} else {
				ip = &layers.IPv4{Version: 4, TTL: 64, Flags: layers.IPv4DontFragment, Id: 7,
					Protocol: layers.IPProtocolUDP, SrcIP: src.AsSlice(), DstIP: dst.AsSlice()}
			}
			udp := &layers.UDP{SrcPort: 49441, DstPort: 4791}
			require.NoError(t, udp.SetNetworkLayerForChecksum(ip))
			bth := &rocelayers.BTH{BTHFields: wire.BTHFields{
				Opcode: wire.OpRCWriteOnly, PKey: 0xFFFF, DestQP: 0x11, AckReq: true, PSN: 7528939,
			}}
			reth := &rocelayers.RETH{RETHFields: wire.RETHFields{VA: 0x56013106e000, RKey: 0x251, DMALength: 13}}
			payload := gopacket.Payload("hello, world!") // 13 bytes: 3 bytes of pad

			buf := gopacket.NewSerializeBuffer()
			opts := gopacket.SerializeOptions{FixLengths: true, ComputeChecksums: true}
			require.NoError(t, gopacket.SerializeLayers(buf, opts,
				eth, ip.(gopacket.SerializableLayer), udp, bth, reth, payload))
			frame := buf.Bytes()
			require.NoError(t, rocelayers.FixICRC(frame))

			var p wire.Packet
			require.NoError(t, p.Decode(frame))
			require.Equal(t, src, p.Src())
			require.Equal(t, dst, p.Dst())
			require.EqualValues(t, 49441, p.UDP.SrcPort())
			require.True(t, udpChecksumOK(&p))
			require.EqualValues(t, 3, bth.PadCount, "FixLengths sets PadCount")
			require.Equal(t, bth.BTHFields, p.BTH.Fields())
			require.Equal(t, reth.RETHFields, p.RETH.Fields())
			require.Equal(t, []byte("hello, world!"), p.Payload)
			require.Equal(t, []byte{0, 0, 0}, p.Pad)

			// And back through gopacket: the ICRC field holds what FixICRC wrote.
			pkt := gopacket.NewPacket(frame, layers.LayerTypeEthernet, gopacket.Default)
			require.Nil(t, pkt.ErrorLayer())
			require.Equal(t, p.ICRCValue(), pkt.Layer(rocelayers.LayerTypeBTH).(*rocelayers.BTH).ICRC)
		})
	}
}

// Every real frame re-serializes byte for byte from its decoded layers,
// pad bytes and ICRC included.
func TestReserializeCaptures(t *testing.T) {
	_, roce := captures(t)
	dp := newParser(layers.LayerTypeEthernet)
	for _, c := range roce {
		pkt := gopacket.NewPacket(c.frame, layers.LayerTypeEthernet, gopacket.Default)
		require.Nil(t, pkt.ErrorLayer(), c.name)
		reserialize(t, c.frame, pkt.Layers())
		require.NoError(t, dp.decode(c.frame), c.name)
		reserialize(t, c.frame, dp.layers())
	}
}

// FixICRC on a real frame whose ICRC was damaged restores it; a zero UDP
// checksum (rxe over IPv4) stays zero.
func TestFixICRCCaptures(t *testing.T) {
	_, roce := captures(t)
	for _, c := range roce {
		frame := bytes.Clone(c.frame)
		frame[len(frame)-1] ^= 0xFF
		require.NoError(t, rocelayers.FixICRC(frame), c.name)
		require.Equal(t, c.frame, frame, c.name)
	}
}

func TestFixICRCErrors(t *testing.T) {
	f := opcodeFrame(wire.OpRCSendOnly, false, []byte("abcd"))
	frame := encodeFrame(t, &f)
	bad := bytes.Clone(frame)
	bad[14+10] ^= 1 // IPv4 header checksum
	require.ErrorIs(t, rocelayers.FixICRC(bad), wire.ErrIPChecksum)
	require.ErrorIs(t, rocelayers.FixICRC(frame[:30]), wire.ErrTruncated)
	require.ErrorIs(t, rocelayers.FixICRC(frame[:14]), wire.ErrTruncated)
}

func TestSerializePadCount(t *testing.T) {
	bth := &rocelayers.BTH{BTHFields: wire.BTHFields{Opcode: wire.OpRCSendOnly, PadCount: 4}}
	buf := gopacket.NewSerializeBuffer()
	require.ErrorIs(t, gopacket.SerializeLayers(buf, gopacket.SerializeOptions{}, bth), rocelayers.ErrPadCount)

	// Pad bytes come from Pad, zero-filled when Pad is short.
	bth = &rocelayers.BTH{BTHFields: wire.BTHFields{Opcode: wire.OpRCSendOnly}, Pad: []byte{9}, ICRC: 0x04030201}
	require.NoError(t, gopacket.SerializeLayers(buf, gopacket.SerializeOptions{FixLengths: true}, bth, gopacket.Payload("x")))
	require.Equal(t, []byte{
		0x04, 0x30, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, // BTH, PadCount 3
		'x', 9, 0, 0, // payload, pad
		1, 2, 3, 4, // ICRC, least-significant byte first
	}, buf.Bytes())
}
