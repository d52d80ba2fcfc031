package rocelayers_test

import (
	"bytes"
	"testing"

	"github.com/gopacket/gopacket"
	"github.com/gopacket/gopacket/layers"
	"github.com/stretchr/testify/require"

	"github.com/rocesim/rocesim/wire"
	"github.com/rocesim/rocesim/wire/rocelayers"
)

// transportOf returns the UDP payload (BTH through ICRC) of a frame built
// from f.
func transportOf(t *testing.T, f wire.Frame) []byte {
	t.Helper()
	frame := encodeFrame(t, &f)
	var p wire.Packet
	require.NoError(t, p.Decode(frame))
	return bytes.Clone(concat(p.BTH, p.DETH, p.RETH, p.AtomicETH, p.AETH, p.AtomicAckETH, p.ImmDt, p.IETH, p.Payload, p.Pad, p.ICRC))
}

// A malformed transport packet is an error from the BTH, never a panic:
// the same sentinel through BTH.DecodeFromBytes, a DecodingLayerParser and
// gopacket.NewPacket (as its DecodeFailure layer).
func TestMalformedTransport(t *testing.T) {
	send := transportOf(t, opcodeFrame(wire.OpRCSendOnly, false, []byte("hello"))) // 12 + 5 + 3 pad + 4
	write := transportOf(t, opcodeFrame(wire.OpRCWriteOnly, false, []byte("hello")))
	ack := transportOf(t, opcodeFrame(wire.OpRCAcknowledge, false, nil))
	with := func(b []byte, edit func(b []byte) []byte) []byte { return edit(bytes.Clone(b)) }

	tests := []struct {
		name string
		data []byte
		want error
	}{
		{"empty", nil, wire.ErrTruncated},
		{"shorter than BTH and ICRC", send[:15], wire.ErrTruncated},
		{"RETH cut short", write[:12+8+4], wire.ErrTruncated},
		{"AETH missing", ack[:12+4], wire.ErrTruncated},
		{"reserved RC opcode 0x15", with(send, func(b []byte) []byte { b[0] = 0x15; return b }), wire.ErrUnknownOpcode},
		{"reserved RC opcode 0x1F", with(send, func(b []byte) []byte { b[0] = 0x1F; return b }), wire.ErrUnknownOpcode},
		{"RD opcode", with(send, func(b []byte) []byte { b[0] = 0x44; return b }), wire.ErrUnknownOpcode},
		{"manufacturer opcode", with(send, func(b []byte) []byte { b[0] = 0xFF; return b }), wire.ErrUnknownOpcode},
		{"TVer 1", with(send, func(b []byte) []byte { b[1] |= 1; return b }), wire.ErrHeaderVersion},
		{"not a multiple of 4", send[:len(send)-1], wire.ErrPad},
		{"pad larger than body", with(ack[:16], func(b []byte) []byte { b[0] = byte(wire.OpRCSendOnly); b[1] |= 0x10; return b }), wire.ErrPad},
		{"payload on an ACK", append(bytes.Clone(ack), 0, 0, 0, 0), wire.ErrLength},
	}
	dp := newParser(rocelayers.LayerTypeBTH)
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var b rocelayers.BTH
			require.ErrorIs(t, b.DecodeFromBytes(tt.data, gopacket.NilDecodeFeedback), tt.want)
			require.ErrorIs(t, dp.decode(tt.data), tt.want)
			if len(tt.data) > 0 { // NewPacket decodes nothing from no data
				pkt := gopacket.NewPacket(tt.data, rocelayers.LayerTypeBTH, gopacket.DecodeOptions{SkipDecodeRecovery: true})
				require.NotNil(t, pkt.ErrorLayer())
				require.ErrorIs(t, pkt.ErrorLayer().Error(), tt.want)
				require.Nil(t, pkt.Layer(rocelayers.LayerTypeBTH))
			}
		})
	}
}

// A whole frame with a reserved opcode: the outer layers decode, and the
// failure sits where the BTH would be.
func TestMalformedFrame(t *testing.T) {
	f := opcodeFrame(wire.OpRCSendOnly, false, []byte("hello"))
	frame := encodeFrame(t, &f)
	frame[14+20+8] = 0x1F
	pkt := gopacket.NewPacket(frame, layers.LayerTypeEthernet, gopacket.Default)
	require.Equal(t, []gopacket.LayerType{
		layers.LayerTypeEthernet, layers.LayerTypeIPv4, layers.LayerTypeUDP, gopacket.LayerTypeDecodeFailure,
	}, layerTypes(pkt.Layers()))
	require.ErrorIs(t, pkt.ErrorLayer().Error(), wire.ErrUnknownOpcode)
}

// DETH, RETH and AETH need their packet's opcode to say what follows.
// Unlinked and without one they refuse; given one, they chain by it.
func TestExtensionOpcode(t *testing.T) {
	// RDMA WRITE ONLY WITH IMMEDIATE: RETH, ImmDt, payload.
	tr := transportOf(t, opcodeFrame(wire.OpRCWriteOnlyImm, false, []byte("hi")))
	afterBTH := tr[wire.BTHLen : len(tr)-2-wire.ICRCLen] // without pad and ICRC

	var r rocelayers.RETH
	require.ErrorIs(t, r.DecodeFromBytes(afterBTH, gopacket.NilDecodeFeedback), rocelayers.ErrNoOpcode)
	r.Opcode = wire.OpRCSendOnly // carries no RETH
	require.ErrorIs(t, r.DecodeFromBytes(afterBTH, gopacket.NilDecodeFeedback), rocelayers.ErrNoOpcode)

	r.Opcode = wire.OpRCWriteOnlyImm
	require.NoError(t, r.DecodeFromBytes(afterBTH, gopacket.NilDecodeFeedback))
	require.Equal(t, rocelayers.LayerTypeImmDt, r.NextLayerType())
	r.Opcode = wire.OpRCWriteOnly
	require.NoError(t, r.DecodeFromBytes(afterBTH, gopacket.NilDecodeFeedback))
	require.Equal(t, gopacket.LayerTypePayload, r.NextLayerType())

	// Linked, the BTH's opcode wins over the field.
	var b rocelayers.BTH
	require.NoError(t, b.DecodeFromBytes(tr, gopacket.NilDecodeFeedback))
	r.Link(&b)
	r.Opcode = wire.OpRCReadRequest
	require.NoError(t, r.DecodeFromBytes(b.Payload, gopacket.NilDecodeFeedback))
	require.Equal(t, wire.OpRCWriteOnlyImm, r.Opcode)
	require.Equal(t, rocelayers.LayerTypeImmDt, r.NextLayerType())
	r.Link(nil)

	// gopacket.NewPacket starting at an extension header: DETH, RETH and
	// AETH cannot know their opcode; the others can go on alone.
	pkt := gopacket.NewPacket(afterBTH, rocelayers.LayerTypeRETH, gopacket.Default)
	require.ErrorIs(t, pkt.ErrorLayer().Error(), rocelayers.ErrNoOpcode)
	pkt = gopacket.NewPacket(afterBTH[wire.RETHLen:], rocelayers.LayerTypeImmDt, gopacket.Default)
	require.Nil(t, pkt.ErrorLayer())
	require.Equal(t, []gopacket.LayerType{rocelayers.LayerTypeImmDt, gopacket.LayerTypePayload}, layerTypes(pkt.Layers()))
	require.Equal(t, uint32(0xDEADBEEF), pkt.Layer(rocelayers.LayerTypeImmDt).(*rocelayers.ImmDt).Value)
}

// Truncated extension headers decoded on their own report truncation.
func TestExtensionTruncated(t *testing.T) {
	for _, l := range []gopacket.DecodingLayer{
		&rocelayers.DETH{Opcode: wire.OpUDSendOnly},
		&rocelayers.RETH{Opcode: wire.OpRCReadRequest},
		&rocelayers.AtomicETH{},
		&rocelayers.AETH{Opcode: wire.OpRCAcknowledge},
		&rocelayers.AtomicAckETH{},
		&rocelayers.ImmDt{},
		&rocelayers.IETH{},
	} {
		dp := gopacket.NewDecodingLayerParser(l.CanDecode().LayerTypes()[0], l)
		var decoded []gopacket.LayerType
		require.ErrorIs(t, dp.DecodeLayers([]byte{1, 2, 3}, &decoded), wire.ErrTruncated, "%T", l)
		require.True(t, dp.Truncated, "%T", l)
	}
}
