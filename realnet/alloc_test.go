//go:build linux

package realnet_test

import (
	"net/netip"
	"testing"

	"github.com/rocesim/rocesim/realnet"
	"github.com/rocesim/rocesim/wire"
)

// TestUDPTransportAllocs checks that the UDP transport's per-packet path
// allocates nothing: a batch of RoCE v2 frames rewritten and sent by one
// transport, received and rebuilt by another (127.0.0.1 → 127.0.0.2).
func TestUDPTransportAllocs(t *testing.T) {
	a, err := realnet.NewUDP(realnet.UDPConfig{Addr: netip.MustParseAddrPort("127.0.0.1:4791")})
	if err != nil {
		t.Fatal(err)
	}
	defer a.Close()
	b, err := realnet.NewUDP(realnet.UDPConfig{Addr: netip.MustParseAddrPort("127.0.0.2:4791"), RecoverIPv4ID: true})
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	const batch = 8
	frames := make([][]byte, batch)
	for i := range frames {
		f := wire.Frame{Src: netip.MustParseAddr("127.0.0.1"), Dst: netip.MustParseAddr("127.0.0.2"), TTL: 64,
			IPFlags: wire.IPv4FlagDF, SrcPort: 0xC000,
			BTH:     wire.BTHFields{Opcode: wire.OpRCSendOnly, PKey: 0xFFFF, DestQP: 0x11, PSN: wire.PSN(i)},
			Payload: make([]byte, 1000)}
		frames[i] = make([]byte, 2048)
		n, err := wire.Encode(frames[i], &f)
		if err != nil {
			t.Fatal(err)
		}
		frames[i] = frames[i][:n]
	}
	msgs := make([]realnet.Msg, batch)
	for i := range msgs {
		msgs[i].Buf = make([]byte, realnet.BufLen)
	}
	var p wire.Packet
	allocs := testing.AllocsPerRun(100, func() {
		if n, err := a.Send(frames); n != batch || err != nil {
			t.Fatalf("Send: %d, %v", n, err)
		}
		for got := 0; got < batch; {
			n, err := b.Receive(msgs[:batch-got])
			if err != nil {
				t.Fatal(err)
			}
			for _, m := range msgs[:n] {
				if err := p.Decode(m.Buf[:m.N]); err != nil {
					t.Fatalf("received frame: %v", err)
				}
			}
			got += n
		}
	})
	if allocs != 0 {
		t.Fatalf("%.1f allocations per batch of %d", allocs, batch)
	}
}
