package rocelayers_test

import (
	"bytes"
	"errors"
	"testing"

	"github.com/gopacket/gopacket"
	"github.com/gopacket/gopacket/layers"

	"github.com/rocesim/rocesim/wire"
	"github.com/rocesim/rocesim/wire/rocelayers"
)

// addOpcodeSeeds seeds f with a frame of every opcode (the committed
// corpus in testdata/fuzz holds real rxe frames), as whole frames or as
// their transport part.
func addOpcodeSeeds(f *testing.F, transportOnly bool) {
	for _, op := range wire.AllOpcodes() {
		var payload []byte
		if op.Info().Has(wire.HasPayload) {
			payload = []byte("seed!")
		}
		fr := opcodeFrame(op, op%2 == 1, payload)
		frame := encodeFrame(f, &fr)
		if transportOnly {
			var p wire.Packet
			if err := p.Decode(frame); err != nil {
				f.Fatal(err)
			}
			frame = concat(p.BTH, p.DETH, p.RETH, p.AtomicETH, p.AETH, p.AtomicAckETH, p.ImmDt, p.IETH, p.Payload, p.Pad, p.ICRC)
		}
		f.Add(frame)
	}
}

// FuzzLayers feeds whole frames to a DecodingLayerParser (panics not
// recovered) and checks it against wire: where wire decodes the frame's
// headers, the parser reaches the same RoCE layers with the same fields.
func FuzzLayers(f *testing.F) {
	addOpcodeSeeds(f, false)
	dp := newParser(layers.LayerTypeEthernet)
	f.Fuzz(func(t *testing.T, frame []byte) {
		err := dp.decode(frame)
		var p wire.Packet
		if p.DecodeHeaders(frame) != nil {
			return
		}
		// gopacket's IPv4 layer is stricter than wire about options; only
		// a failure in this package's layers contradicts wire.
		var we *wire.Error
		if errors.As(err, &we) || errors.Is(err, rocelayers.ErrNoOpcode) {
			t.Fatalf("wire decodes the frame, the RoCE layers fail: %v", err)
		}
		if err != nil {
			return
		}
		checkTransport(t, "fuzz", transport(dp.layers()), &p)
	})
}

// FuzzBTH feeds transport packets (a UDP payload: BTH through ICRC) to the
// RoCE layers directly. It checks that a DecodingLayerParser and
// gopacket.NewPacket agree, and that whatever decodes re-serializes to the
// same bytes.
func FuzzBTH(f *testing.F) {
	addOpcodeSeeds(f, true)
	dp := newParser(rocelayers.LayerTypeBTH)
	f.Fuzz(func(t *testing.T, data []byte) {
		err := dp.decode(data)
		pkt := gopacket.NewPacket(data, rocelayers.LayerTypeBTH, gopacket.DecodeOptions{SkipDecodeRecovery: true})
		if err != nil {
			if len(data) > 0 && (pkt.ErrorLayer() == nil || !errors.Is(pkt.ErrorLayer().Error(), err)) {
				t.Fatalf("parser: %v; NewPacket: %v", err, pkt.ErrorLayer())
			}
			return
		}
		if pkt.ErrorLayer() != nil {
			t.Fatalf("parser decodes, NewPacket: %v", pkt.ErrorLayer().Error())
		}
		if got, want := layerTypes(pkt.Layers()), dp.decoded; !equalTypes(got, want) {
			t.Fatalf("NewPacket layers %v, parser %v", got, want)
		}
		buf := gopacket.NewSerializeBuffer()
		if err := gopacket.SerializeLayers(buf, gopacket.SerializeOptions{}, serializable(t, dp.layers())...); err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(buf.Bytes(), data) {
			t.Fatalf("re-serialized\n% x\nfrom\n% x", buf.Bytes(), data)
		}
	})
}

func equalTypes(a, b []gopacket.LayerType) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}
