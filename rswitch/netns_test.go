//go:build linux

package rswitch

import (
	"net/netip"
	"testing"

	"github.com/rocesim/rocesim/faults"
	"github.com/rocesim/rocesim/internal/netnstest"
	"github.com/rocesim/rocesim/nic"
	"github.com/rocesim/rocesim/realnet"
)

// TestPacketNamespaces: two model nodes in two network namespaces, each
// joined to the switch's by a veth pair, the switch on the outer ends
// through AF_PACKET. ARP crosses untouched, the plan loses the first
// transmission of the SEND's last packet, the retransmission delivers
// it. The nodes' kernels leave the UDP checksums to an offload the veths
// never run: the Packet transport completes them, or the receiving
// kernel would drop every datagram. Root only.
func TestPacketNamespaces(t *testing.T) {
	netnstest.Skip(t)
	ns := [2]netnstest.NS{netnstest.New(t, "a", "10.99.0.1/24"), netnstest.New(t, "b", "10.99.0.2/24")}
	plan, err := faults.Parse("drop op=RC_SEND_LAST tx=1")
	if err != nil {
		t.Fatal(err)
	}
	var tr [2]realnet.Transport
	for i := range 2 {
		p, err := realnet.NewPacket(realnet.PacketConfig{Interface: ns[i].Outer, CompleteChecksums: true})
		if err != nil {
			t.Fatal(err)
		}
		tr[i] = p
	}
	s, err := New(Config{A: tr[0], B: tr[1], Plan: plan})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()

	addrs := [2]netip.Addr{netip.MustParseAddr("10.99.0.1"), netip.MustParseAddr("10.99.0.2")}
	var nodes [2]*realnet.Node
	for i := range 2 {
		err := ns[i].Do(func() (err error) {
			// Path MTU 1024: the veths' MTU is 1500, and the UDP
			// transport sends with DF.
			nodes[i], err = realnet.NewNode(realnet.NodeConfig{Name: string(rune('a' + i)), Addr: addrs[i], PathMTUMax: nic.MTU1024})
			return err
		})
		if err != nil {
			t.Fatal(err)
		}
		defer nodes[i].Close()
	}
	sendThrough(t, nodes, [2]netip.Addr{addrs[1], addrs[0]}, 2000)
	st := s.Stats()
	if s.Hits(1) != 1 || st.Dropped != 1 || st.Frames == st.RoCE {
		t.Errorf("rule 1 hit %d times; stats %+v (want one drop, and ARP among the frames)", s.Hits(1), st)
	}
	if c := tr[0].Stats().Checksummed; c == 0 {
		t.Errorf("no checksum completed on %s", ns[0].Outer)
	}
}
