package rocelayers_test

import (
	"bytes"
	"encoding/hex"
	"testing"

	"github.com/gopacket/gopacket"
	"github.com/gopacket/gopacket/layers"
	"github.com/stretchr/testify/require"

	"github.com/rocesim/rocesim/wire"
	"github.com/rocesim/rocesim/wire/rocelayers"
)

// Every RoCE frame of every capture decodes through gopacket.NewPacket,
// eager and lazy, into the layers wire.Packet sees, field for field; the
// other frames (ARP, IPv6 neighbour discovery, ...) yield no BTH.
func TestCapturesNewPacket(t *testing.T) {
	all, _ := captures(t)
	var roce int
	for _, c := range all {
		var p wire.Packet
		isRoCE := p.Decode(c.frame) == nil
		for _, opts := range []gopacket.DecodeOptions{gopacket.Default, gopacket.Lazy} {
			pkt := gopacket.NewPacket(c.frame, layers.LayerTypeEthernet, opts)
			if !isRoCE {
				require.Nil(t, pkt.Layer(rocelayers.LayerTypeBTH), c.name)
				continue
			}
			require.Nil(t, pkt.ErrorLayer(), "%s: %v", c.name, pkt.ErrorLayer())
			ls := pkt.Layers()
			require.Equal(t, outerTypes(&p), layerTypes(ls[:3]), c.name)
			checkTransport(t, c.name, ls[3:], &p)
			if len(p.Payload) > 0 {
				app := pkt.ApplicationLayer()
				require.NotNil(t, app, c.name)
				require.True(t, bytes.Equal(p.Payload, app.Payload()), c.name)
			}
		}
		if isRoCE {
			roce++
		}
	}
	t.Logf("%d frames, %d RoCE", len(all), roce)
}

// The same frames through a DecodingLayerParser, whose layers alias the
// frame (no copy).
func TestCapturesDecodingLayerParser(t *testing.T) {
	_, roce := captures(t)
	dp := newParser(layers.LayerTypeEthernet)
	for _, c := range roce {
		var p wire.Packet
		require.NoError(t, p.Decode(c.frame))
		require.NoError(t, dp.decode(c.frame), c.name)
		ls := dp.layers()
		require.Equal(t, outerTypes(&p), layerTypes(ls[:3]), c.name)
		checkTransport(t, c.name, ls[3:], &p)
		require.Same(t, &p.BTH[0], &dp.roce.BTH.Contents[0], "%s: BTH contents copied", c.name)
	}
}

// Every opcode seen in the captures, so a capture that silently lost its
// interesting frames shows up here.
func TestCapturesCoverage(t *testing.T) {
	_, roce := captures(t)
	seen := map[wire.Opcode]bool{}
	var nak, rnr bool
	for _, c := range roce {
		var p wire.Packet
		require.NoError(t, p.Decode(c.frame))
		seen[p.BTH.Opcode()] = true
		if p.AETH != nil {
			nak = nak || p.AETH.Syndrome().IsNAK()
			rnr = rnr || p.AETH.Syndrome().IsRNRNAK()
		}
	}
	for _, op := range []wire.Opcode{
		wire.OpRCSendFirst, wire.OpRCSendMiddle, wire.OpRCSendLast, wire.OpRCSendOnly,
		wire.OpRCWriteFirst, wire.OpRCWriteMiddle, wire.OpRCWriteLast, wire.OpRCWriteOnly,
		wire.OpRCReadRequest, wire.OpRCReadResponseFirst, wire.OpRCReadResponseMiddle,
		wire.OpRCReadResponseLast, wire.OpRCReadResponseOnly, wire.OpRCAcknowledge,
		wire.OpRCAtomicAcknowledge, wire.OpRCCompareSwap, wire.OpRCFetchAdd,
		wire.OpUCSendFirst, wire.OpUCSendMiddle, wire.OpUCSendLast, wire.OpUDSendOnly,
	} {
		require.True(t, seen[op], "no %v in the captures", op)
	}
	require.True(t, rnr, "no RNR NAK in the captures")
	t.Logf("NAK seen: %v", nak)
}

// One real frame pinned in hex (ackFrame), checked against Wireshark's
// dissection, so field meanings and the ICRC byte order are settled
// against an independent decoder.
func TestWiresharkACK(t *testing.T) {
	frame, err := hex.DecodeString(ackFrame)
	require.NoError(t, err)
	pkt := gopacket.NewPacket(frame, layers.LayerTypeEthernet, gopacket.Default)
	require.Nil(t, pkt.ErrorLayer())
	bth := pkt.Layer(rocelayers.LayerTypeBTH).(*rocelayers.BTH)
	aeth := pkt.Layer(rocelayers.LayerTypeAETH).(*rocelayers.AETH)
	require.Equal(t, wire.OpRCAcknowledge, bth.Opcode)
	require.EqualValues(t, 65535, bth.PKey)
	require.EqualValues(t, 0x11, bth.DestQP)
	require.False(t, bth.AckReq)
	require.EqualValues(t, 7528939, bth.PSN)
	require.Equal(t, wire.ACKSyndrome(wire.CreditsUnlimited), aeth.Syndrome)
	require.EqualValues(t, 1, aeth.MSN)
	// Wireshark reads the ICRC bytes 8a be 7c 4b big-endian; the CRC-32
	// value is those bytes little-endian.
	require.Equal(t, []byte{0x8a, 0xbe, 0x7c, 0x4b}, frame[len(frame)-4:])
	require.EqualValues(t, uint32(0x4b7cbe8a), bth.ICRC)
	require.Equal(t, []gopacket.LayerType{
		layers.LayerTypeEthernet, layers.LayerTypeIPv4, layers.LayerTypeUDP,
		rocelayers.LayerTypeBTH, rocelayers.LayerTypeAETH,
	}, layerTypes(pkt.Layers()))
}
