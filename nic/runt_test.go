package nic_test

import (
	"strconv"
	"testing"

	"github.com/rocesim/rocesim/nic"
	"github.com/rocesim/rocesim/sim"
	"github.com/rocesim/rocesim/wire"
)

// TestReceiveRunts: a frame a fault cut inside its headers (below the
// Ethernet header, inside the IP header, inside the BTH) reaches a NIC on
// a direct link as it is; the device counts it as truncated (RxErrors),
// answers nothing and leaves the QP as it was. The buffer's bytes past
// the cut are a valid frame's, as in the fabric's reused buffers: only
// the length may tell.
func TestReceiveRunts(t *testing.T) {
	r := newRig(t, rigOptions{})
	whole := make([]byte, 256)
	n, err := wire.Encode(whole, &wire.Frame{SrcMAC: rigPeerMAC, DstMAC: rigMAC, Src: rigPeerIP, Dst: rigIP, TTL: 64,
		IPFlags: wire.IPv4FlagDF, SrcPort: 0xC001,
		BTH:     wire.BTHFields{Opcode: wire.OpRCSendOnly, PKey: 0xFFFF, DestQP: r.rc.Num(), PSN: rigRQPSN, AckReq: true},
		Payload: []byte("hello")})
	if err != nil {
		t.Fatal(err)
	}
	for _, l := range []int{0, 5, 13, wire.EthernetLen, wire.EthernetLen + 10, wire.EthernetLen + wire.IPv4MinLen + wire.UDPLen + 4, n - 1} {
		t.Run(strconv.Itoa(l), func(t *testing.T) {
			before := r.dev.RxErrors(wire.CodeTruncated)
			r.dev.Receive(sim.Time(1000), whole[:l])
			if got := r.dev.RxErrors(wire.CodeTruncated) - before; got != 1 {
				t.Errorf("a %d-byte cut of a %d-byte frame: RxErrors(truncated) grew by %d, want 1", l, n, got)
			}
			if out := r.dev.Ready().Frames; len(out) != 0 {
				t.Errorf("the device answered a %d-byte frame with %d frames", l, len(out))
			}
			if s := r.rc.State(); s != nic.QPStateRTS {
				t.Errorf("RC QP in %v after a %d-byte frame", s, l)
			}
		})
	}
}
