package main

import (
	"path/filepath"
	"strings"
	"testing"

	"github.com/rocesim/rocesim/wire"
)

// TestExecMckey: unmodified mckey (rdmacm-utils), a receiver (10.0.0.1)
// and a sender (-s, 10.0.0.2) in two processes through rocesim exec,
// both joining 224.0.0.5 with rdma_join_multicast: each gets
// MULTICAST_JOIN with the group's GID, the sender's ten datagrams go to
// the multicast QPN, the switch floods them, the receiver's QP (attached
// by the join) takes all ten, and both exit 0. The capture has the ten
// datagrams once each, from the sender to the group, each commented.
func TestExecMckey(t *testing.T) {
	needTools(t, "mckey")
	f := newFabricEnv(t)
	pcap := filepath.Join(t.TempDir(), "mckey.pcapng")
	srv, cli, _ := rdmacmPair(t, f, []string{"--pcap", pcap},
		[]string{"mckey", "-m", "224.0.0.5", "-b", "10.0.0.1"}, []string{"mckey", "-m", "224.0.0.5", "-b", "10.0.0.2", "-s"})
	for _, p := range []*execProc{srv, cli} {
		out := p.stdout.String()
		if p.code != 0 || !strings.Contains(out, "joined dgid: ::ffff:224.0.0.5") || !strings.Contains(out, "data transfers complete") ||
			!strings.Contains(out, "test complete") {
			t.Errorf("%v: exit %d\nstdout:\n%s\nstderr:\n%s", p.cmd.Args, p.code, out, p.stderr.String())
		}
	}
	if !strings.Contains(srv.stdout.String(), "receiving data transfers") {
		t.Errorf("the receiver did not wait for the data:\n%s", srv.stdout.String())
	}
	if t.Failed() {
		return
	}
	fabricTimes(t, f) // the fabric has exited: the capture is complete
	var p wire.Packet
	n := 0
	for _, fr := range readFrames(t, pcap) {
		if err := p.Decode(fr.data); err != nil {
			t.Errorf("a frame does not decode: %v", err)
			continue
		}
		if p.BTH.DestQP() != wire.MulticastQPN || p.Dst().String() != "224.0.0.5" || p.Src().Unmap().String() != "10.0.0.2" ||
			wire.Ethernet(fr.data).Dst().String() != "01:00:5e:00:00:05" || len(fr.comments) == 0 {
			t.Errorf("frame %d: %v>%v QPN %#x, MAC %v, comments %q: want the sender's datagram to the group, commented",
				n, p.Src(), p.Dst(), p.BTH.DestQP(), wire.Ethernet(fr.data).Dst(), fr.comments)
		}
		n++
	}
	if n != 10 {
		t.Errorf("%d frames captured, want mckey's 10 datagrams", n)
	}
}
