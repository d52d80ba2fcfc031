package rocelayers_test

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"testing"

	"github.com/gopacket/gopacket"
	"github.com/gopacket/gopacket/layers"
	"github.com/stretchr/testify/require"

	"github.com/rocesim/rocesim/wire"
	"github.com/rocesim/rocesim/wire/rocelayers"
)

// capturedFrame is one frame of a capture in ../testdata.
type capturedFrame struct {
	name  string // "rdma_write.pcap#38", frame numbers as Wireshark counts
	frame []byte
}

func (c capturedFrame) String() string { return c.name }

// readPcap returns the frames of a classic pcap file with Ethernet link
// type. pcapgo would need golang.org/x/net in go.sum; the format is small.
func readPcap(t testing.TB, path string) [][]byte {
	t.Helper()
	b, err := os.ReadFile(path)
	require.NoError(t, err)
	require.GreaterOrEqual(t, len(b), 24, "pcap global header")
	var bo binary.ByteOrder
	switch binary.LittleEndian.Uint32(b) {
	case 0xA1B2C3D4, 0xA1B23C4D: // microsecond, nanosecond timestamps
		bo = binary.LittleEndian
	case 0xD4C3B2A1, 0x4D3CB2A1:
		bo = binary.BigEndian
	default:
		t.Fatalf("%s: not a classic pcap file", path)
	}
	require.EqualValues(t, 1, bo.Uint32(b[20:]), "%s: link type is not Ethernet", path)
	var frames [][]byte
	for b = b[24:]; len(b) > 0; {
		require.GreaterOrEqual(t, len(b), 16, "%s: record header", path)
		n := int(bo.Uint32(b[8:]))
		require.GreaterOrEqual(t, len(b), 16+n, "%s: record data", path)
		frames = append(frames, b[16:16+n:16+n])
		b = b[16+n:]
	}
	return frames
}

// captures returns every frame of every capture, and which of them wire
// decodes as RoCE. Any decode error but ErrNotRoCE fails the test: the
// captures are real rxe traffic.
func captures(t testing.TB) (all, roce []capturedFrame) {
	t.Helper()
	paths, err := filepath.Glob("../testdata/*.pcap")
	require.NoError(t, err)
	require.NotEmpty(t, paths)
	for _, path := range paths {
		for i, f := range readPcap(t, path) {
			c := capturedFrame{fmt.Sprintf("%s#%d", filepath.Base(path), i+1), f}
			all = append(all, c)
			var p wire.Packet
			err := p.Decode(f)
			if errors.Is(err, wire.ErrNotRoCE) {
				continue
			}
			require.NoError(t, err, c.name)
			roce = append(roce, c)
		}
	}
	require.NotEmpty(t, roce)
	return all, roce
}

// parser is a DecodingLayerParser over the outer layers and the linked
// RoCE layers, as a gopacket user sets one up.
type parser struct {
	eth     layers.Ethernet
	ip4     layers.IPv4
	ip6     layers.IPv6
	udp     layers.UDP
	payload gopacket.Payload
	roce    rocelayers.Layers
	dlp     *gopacket.DecodingLayerParser
	decoded []gopacket.LayerType
}

func newParser(first gopacket.LayerType) *parser {
	p := &parser{decoded: make([]gopacket.LayerType, 0, 16)}
	p.dlp = gopacket.NewDecodingLayerParser(first, &p.eth, &p.ip4, &p.ip6, &p.udp, &p.payload)
	for _, l := range p.roce.DecodingLayers() {
		p.dlp.AddDecodingLayer(l)
	}
	// Let a panic in a decoder reach the test instead of becoming an error.
	p.dlp.IgnorePanic = true
	return p
}

func (p *parser) decode(data []byte) error { return p.dlp.DecodeLayers(data, &p.decoded) }

// layers returns the decoded layers in order.
func (p *parser) layers() []gopacket.Layer {
	var out []gopacket.Layer
	for _, t := range p.decoded {
		switch t {
		case layers.LayerTypeEthernet:
			out = append(out, &p.eth)
		case layers.LayerTypeIPv4:
			out = append(out, &p.ip4)
		case layers.LayerTypeIPv6:
			out = append(out, &p.ip6)
		case layers.LayerTypeUDP:
			out = append(out, &p.udp)
		case gopacket.LayerTypePayload:
			out = append(out, &p.payload)
		case rocelayers.LayerTypeBTH:
			out = append(out, &p.roce.BTH)
		case rocelayers.LayerTypeDETH:
			out = append(out, &p.roce.DETH)
		case rocelayers.LayerTypeRETH:
			out = append(out, &p.roce.RETH)
		case rocelayers.LayerTypeAtomicETH:
			out = append(out, &p.roce.AtomicETH)
		case rocelayers.LayerTypeAETH:
			out = append(out, &p.roce.AETH)
		case rocelayers.LayerTypeAtomicAckETH:
			out = append(out, &p.roce.AtomicAckETH)
		case rocelayers.LayerTypeImmDt:
			out = append(out, &p.roce.ImmDt)
		case rocelayers.LayerTypeIETH:
			out = append(out, &p.roce.IETH)
		default:
			panic("parser decoded unexpected layer type " + t.String())
		}
	}
	return out
}

// wireOrder is IBTA vol. 1 §9.2's order of the extension headers, written
// out here independently of the package under test.
var wireOrder = []struct {
	h wire.Headers
	t gopacket.LayerType
}{
	{wire.HasDETH, rocelayers.LayerTypeDETH},
	{wire.HasRETH, rocelayers.LayerTypeRETH},
	{wire.HasAtomicETH, rocelayers.LayerTypeAtomicETH},
	{wire.HasAETH, rocelayers.LayerTypeAETH},
	{wire.HasAtomicAckETH, rocelayers.LayerTypeAtomicAckETH},
	{wire.HasImmDt, rocelayers.LayerTypeImmDt},
	{wire.HasIETH, rocelayers.LayerTypeIETH},
}

// transportTypes returns the layer types from the BTH on that a packet
// with opcode op and payloadLen bytes of payload decodes into.
func transportTypes(op wire.Opcode, payloadLen int) []gopacket.LayerType {
	ts := []gopacket.LayerType{rocelayers.LayerTypeBTH}
	for _, e := range wireOrder {
		if op.Info().Has(e.h) {
			ts = append(ts, e.t)
		}
	}
	if payloadLen > 0 {
		ts = append(ts, gopacket.LayerTypePayload)
	}
	return ts
}

// outerTypes returns Ethernet, IPv4 or IPv6, UDP.
func outerTypes(p *wire.Packet) []gopacket.LayerType {
	ip := layers.LayerTypeIPv4
	if p.IPv6 != nil {
		ip = layers.LayerTypeIPv6
	}
	return []gopacket.LayerType{layers.LayerTypeEthernet, ip, layers.LayerTypeUDP}
}

func layerTypes(ls []gopacket.Layer) []gopacket.LayerType {
	ts := make([]gopacket.LayerType, len(ls))
	for i, l := range ls {
		ts[i] = l.LayerType()
	}
	return ts
}

// checkTransport checks the layers from the BTH on against wire's decode
// of the same frame: types in order, every field, and Contents/Payload.
func checkTransport(t testing.TB, name string, ls []gopacket.Layer, p *wire.Packet) {
	t.Helper()
	op := p.BTH.Opcode()
	require.Equal(t, transportTypes(op, len(p.Payload)), layerTypes(ls), "%s: layer types", name)

	// rest is what the BTH leaves to the layers after it: the extension
	// headers and the payload, as wire saw them.
	var rest []byte
	for _, h := range [][]byte{p.DETH, p.RETH, p.AtomicETH, p.AETH, p.AtomicAckETH, p.ImmDt, p.IETH, p.Payload} {
		rest = append(rest, h...)
	}
	for _, l := range ls {
		var contents []byte
		switch l := l.(type) {
		case *rocelayers.BTH:
			require.Equal(t, p.BTH.Fields(), l.BTHFields, "%s: BTH", name)
			require.Equal(t, p.ICRCValue(), l.ICRC, "%s: ICRC", name)
			require.True(t, bytes.Equal(p.Pad, l.Pad), "%s: pad % x, want % x", name, l.Pad, p.Pad)
			contents = p.BTH
		case *rocelayers.DETH:
			require.Equal(t, p.DETH.Fields(), l.DETHFields, "%s: DETH", name)
			require.Equal(t, op, l.Opcode, "%s: DETH opcode", name)
			contents = p.DETH
		case *rocelayers.RETH:
			require.Equal(t, p.RETH.Fields(), l.RETHFields, "%s: RETH", name)
			require.Equal(t, op, l.Opcode, "%s: RETH opcode", name)
			contents = p.RETH
		case *rocelayers.AtomicETH:
			require.Equal(t, p.AtomicETH.Fields(), l.AtomicETHFields, "%s: AtomicETH", name)
			contents = p.AtomicETH
		case *rocelayers.AETH:
			require.Equal(t, p.AETH.Fields(), l.AETHFields, "%s: AETH", name)
			require.Equal(t, op, l.Opcode, "%s: AETH opcode", name)
			contents = p.AETH
		case *rocelayers.AtomicAckETH:
			require.Equal(t, p.AtomicAckETH.OrigRemoteData(), l.OrigRemoteData, "%s: AtomicAckETH", name)
			contents = p.AtomicAckETH
		case *rocelayers.ImmDt:
			require.Equal(t, p.ImmDt.Value(), l.Value, "%s: ImmDt", name)
			contents = p.ImmDt
		case *rocelayers.IETH:
			require.Equal(t, p.IETH.RKey(), l.RKey, "%s: IETH", name)
			contents = p.IETH
		case *gopacket.Payload:
			contents = p.Payload
		default:
			t.Fatalf("%s: unexpected layer %T", name, l)
		}
		require.True(t, bytes.Equal(contents, l.LayerContents()), "%s: %v contents", name, l.LayerType())
		if l.LayerType() == rocelayers.LayerTypeBTH {
			require.True(t, bytes.Equal(rest, l.LayerPayload()), "%s: BTH payload", name)
		} else {
			require.True(t, bytes.HasPrefix(rest, contents), "%s: %v is not next in line", name, l.LayerType())
			rest = rest[len(contents):]
			require.True(t, bytes.Equal(rest, l.LayerPayload()), "%s: %v payload", name, l.LayerType())
		}
	}
	require.Empty(t, rest, "%s: bytes left over", name)
}

// transport returns the layers from the BTH on.
func transport(ls []gopacket.Layer) []gopacket.Layer {
	for i, l := range ls {
		if l.LayerType() == rocelayers.LayerTypeBTH {
			return ls[i:]
		}
	}
	return nil
}

// serializable converts decoded layers for gopacket.SerializeLayers.
func serializable(t testing.TB, ls []gopacket.Layer) []gopacket.SerializableLayer {
	t.Helper()
	out := make([]gopacket.SerializableLayer, len(ls))
	for i, l := range ls {
		s, ok := l.(gopacket.SerializableLayer)
		require.True(t, ok, "%v is not serializable", l.LayerType())
		out[i] = s
	}
	return out
}

// udpChecksumOK verifies a UDP checksum over its pseudo-header (RFC 768,
// RFC 8200 §8.1); zero means none was sent.
func udpChecksumOK(p *wire.Packet) bool {
	if p.UDP.Checksum() == 0 {
		return p.IPv6 == nil
	}
	var s uint64
	add := func(b []byte) {
		for ; len(b) >= 2; b = b[2:] {
			s += uint64(b[0])<<8 | uint64(b[1])
		}
		if len(b) == 1 {
			s += uint64(b[0]) << 8
		}
	}
	if p.IPv6 != nil {
		add(p.IPv6[8:40])
	} else {
		add(p.IPv4[12:20])
	}
	s += wire.ProtocolUDP + uint64(p.UDP.Length())
	add(p.UDP)
	// The views are contiguous in the frame; summing them as one run keeps
	// the 16-bit words aligned across an odd-length payload.
	add(concat(p.BTH, p.DETH, p.RETH, p.AtomicETH, p.AETH, p.AtomicAckETH, p.ImmDt, p.IETH, p.Payload, p.Pad, p.ICRC))
	for s > 0xFFFF {
		s = s>>16 + s&0xFFFF
	}
	return s == 0xFFFF
}

func concat(bs ...[]byte) []byte {
	var out []byte
	for _, b := range bs {
		out = append(out, b...)
	}
	return out
}
