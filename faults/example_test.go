package faults_test

import (
	"fmt"
	"net/netip"

	"github.com/rocesim/rocesim/faults"
	"github.com/rocesim/rocesim/sim"
	"github.com/rocesim/rocesim/wire"
)

// A plan in its text form, read and printed back in canonical order.
func ExampleParse() {
	plan, err := faults.Parse(`
		drop tx=1 psn=2          # lose PSN 2 once
		delay class=ack 50µs prob=0.1
		down link=a-sw from=1ms to=3ms
	`)
	if err != nil {
		fmt.Println(err)
		return
	}
	fmt.Print(plan)

	_, err = faults.Parse("drop psn=2\ndrop pns=3")
	fmt.Println(err)
	// Output:
	// drop psn=2 tx=1
	// delay 50us class=ack prob=0.1
	// down link=a-sw from=1ms to=3ms
	// 2:6: unknown key "pns"
}

// What the fabric does for every frame on its first hop.
func ExampleInjector_Decide() {
	plan, _ := faults.Parse("drop psn=2 tx=1")
	in := faults.NewInjector(plan, sim.NewSeeds(1).Stream("faults"))
	hop := faults.Hop{Link: "a-sw", From: "a", To: "b", First: true}
	var pkt wire.Packet
	for _, psn := range []wire.PSN{1, 2, 2} {
		f := wire.Frame{
			Src: netip.MustParseAddr("10.0.0.1"), Dst: netip.MustParseAddr("10.0.0.2"),
			BTH: wire.BTHFields{Opcode: wire.OpRCSendOnly, DestQP: 0x11, PSN: psn},
		}
		frame := make([]byte, 128)
		n, _ := wire.Encode(frame, &f)
		frame = frame[:n]
		_ = pkt.DecodeHeaders(frame)
		hop.Tx = in.CountTx(hop, &pkt)
		v := in.Decide(0, hop, frame, &pkt)
		fmt.Printf("psn %d tx %d: %v\n", psn, hop.Tx, v)
	}
	// Output:
	// psn 1 tx 1: passed
	// psn 2 tx 1: dropped by rule 1: drop psn=2 tx=1
	// psn 2 tx 2: passed
}
