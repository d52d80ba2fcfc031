package wire_test

import (
	"math/rand/v2"
	"net/netip"

	"github.com/rocesim/rocesim/wire"
)

// testFrame returns a frame for op with every field set to a value drawn
// from r, so that a comparison catches a field written to the wrong place.
func testFrame(r *rand.Rand, op wire.Opcode, v6 bool, payload []byte) wire.Frame {
	f := wire.Frame{
		DstMAC:    wire.MAC{0x02, 0, 0, 0, 0, byte(r.IntN(256))},
		SrcMAC:    wire.MAC{0x02, 0, 0, 0, 1, byte(r.IntN(256))},
		Src:       netip.AddrFrom4([4]byte{10, 0, 0, 1}),
		Dst:       netip.AddrFrom4([4]byte{10, 0, 0, 2}),
		TTL:       64,
		IPID:      uint16(r.Uint32()),
		IPFlags:   wire.IPv4FlagDF,
		SrcPort:   wire.UDPSourcePort(r.Uint32N(1<<24), r.Uint32N(1<<24)),
		FlowLabel: r.Uint32N(1 << 20),
		BTH: wire.BTHFields{
			Opcode:         op,
			SolicitedEvent: r.IntN(2) == 0,
			MigReq:         r.IntN(2) == 0,
			PKey:           uint16(r.Uint32()),
			DestQP:         r.Uint32N(1 << 24),
			AckReq:         r.IntN(2) == 0,
			PSN:            wire.PSN(r.Uint32N(1 << 24)),
		},
		DETH:         wire.DETHFields{QKey: r.Uint32(), SrcQP: r.Uint32N(1 << 24)},
		RETH:         wire.RETHFields{VA: r.Uint64(), RKey: r.Uint32(), DMALength: r.Uint32()},
		AtomicETH:    wire.AtomicETHFields{VA: r.Uint64() &^ 7, RKey: r.Uint32(), SwapAddData: r.Uint64(), CompareData: r.Uint64()},
		AETH:         wire.AETHFields{Syndrome: wire.Syndrome(r.IntN(128)), MSN: r.Uint32N(1 << 24)},
		AtomicAckETH: r.Uint64(),
		ImmDt:        r.Uint32(),
		IETH:         r.Uint32(),
		Payload:      payload,
	}
	if v6 {
		f.Src = netip.MustParseAddr("fd00::1")
		f.Dst = netip.MustParseAddr("fd00::2")
		f.TOS = uint8(r.IntN(256))
		f.ComputeUDPChecksum = true
	}
	return f
}

// payloadSizes are the sizes every opcode that carries payload is built
// with: empty, sizes that need 3 and 1 pad bytes, and two path MTUs.
var payloadSizes = []int{0, 1, 3, 1024, 4096}

// allTestFrames builds every opcode over IPv4 and IPv6 with every payload
// size it can carry.
func allTestFrames(seed uint64) []wire.Frame {
	r := rand.New(rand.NewPCG(seed, 0x726f6365))
	var out []wire.Frame
	for _, op := range wire.AllOpcodes() {
		for _, v6 := range []bool{false, true} {
			sizes := payloadSizes
			switch {
			case op == wire.OpCNP:
				sizes = []int{wire.CNPPayloadLen}
			case !op.Info().Has(wire.HasPayload):
				sizes = []int{0}
			}
			for _, n := range sizes {
				payload := make([]byte, n)
				for i := range payload {
					payload[i] = byte(r.IntN(256))
				}
				out = append(out, testFrame(r, op, v6, payload))
			}
		}
	}
	return out
}
