package rocelayers_test

import (
	"testing"

	"github.com/gopacket/gopacket"
	"github.com/gopacket/gopacket/layers"
	"github.com/stretchr/testify/require"
)

// Decoding real frames through a DecodingLayerParser allocates nothing:
// every layer resets in place.
func TestDecodeAllocs(t *testing.T) {
	_, roce := captures(t)
	dp := newParser(layers.LayerTypeEthernet)
	var err error
	var decoded int
	allocs := testing.AllocsPerRun(20, func() {
		for _, c := range roce {
			if e := dp.decode(c.frame); e != nil {
				err = e
			}
			decoded += len(dp.decoded)
		}
	})
	require.NoError(t, err)
	require.NotZero(t, decoded)
	require.Zero(t, allocs, "allocations per pass over %d frames", len(roce))
}

// Malformed packets are rejected without allocating too: the errors are
// preallocated sentinels.
func TestDecodeErrorAllocs(t *testing.T) {
	_, roce := captures(t)
	frame := append([]byte(nil), roce[0].frame...)
	frame[14+20+8] = 0x1F // a reserved RC opcode
	dp := newParser(layers.LayerTypeEthernet)
	allocs := testing.AllocsPerRun(100, func() {
		if dp.decode(frame) == nil {
			panic("reserved opcode decoded")
		}
	})
	require.Zero(t, allocs)
}

func BenchmarkDecodingLayerParser(b *testing.B) {
	_, roce := captures(b)
	dp := newParser(layers.LayerTypeEthernet)
	var n int
	for _, c := range roce {
		n += len(c.frame)
	}
	b.SetBytes(int64(n / len(roce)))
	b.ReportAllocs()
	for i := 0; b.Loop(); i++ {
		if err := dp.decode(roce[i%len(roce)].frame); err != nil {
			b.Fatal(err)
		}
	}
}

func BenchmarkNewPacket(b *testing.B) {
	_, roce := captures(b)
	b.ReportAllocs()
	for i := 0; b.Loop(); i++ {
		pkt := gopacket.NewPacket(roce[i%len(roce)].frame, layers.LayerTypeEthernet, gopacket.NoCopy)
		if pkt.ErrorLayer() != nil {
			b.Fatal(pkt.ErrorLayer().Error())
		}
	}
}
