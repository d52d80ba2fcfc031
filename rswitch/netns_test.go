//go:build linux

package rswitch

import (
	"fmt"
	"net/netip"
	"os"
	"os/exec"
	"runtime"
	"strings"
	"testing"

	"golang.org/x/sys/unix"

	"github.com/rocesim/rocesim/faults"
	"github.com/rocesim/rocesim/nic"
	"github.com/rocesim/rocesim/realnet"
)

// netnsPair makes two network namespaces, each joined to this one by a
// veth pair whose outer end the switch takes with AF_PACKET: side i's
// namespace has 10.99.0.(i+1)/24 on its end. It needs root (creating
// namespaces and AF_PACKET); the test skips elsewhere, saying so.
// Everything made is removed when the test ends.
func netnsPair(t *testing.T) (ns [2]string, outer [2]string) {
	if os.Geteuid() != 0 {
		t.Skip("needs root: creates network namespaces and veth pairs, and AF_PACKET sockets")
	}
	if _, err := exec.LookPath("ip"); err != nil {
		t.Skip("needs iproute2's ip")
	}
	run := func(args ...string) {
		t.Helper()
		if out, err := exec.Command("ip", args...).CombinedOutput(); err != nil {
			t.Fatalf("ip %s: %v\n%s", strings.Join(args, " "), err, out)
		}
	}
	id := os.Getpid() % 100000
	for i := range 2 {
		ns[i] = fmt.Sprintf("rsw%d%c", id, 'a'+i)
		outer[i] = fmt.Sprintf("rsw%d%c0", id, 'a'+i)
		inner := fmt.Sprintf("rsw%d%c1", id, 'a'+i)
		run("netns", "add", ns[i])
		t.Cleanup(func() { exec.Command("ip", "netns", "del", ns[i]).Run() })
		run("link", "add", outer[i], "type", "veth", "peer", "name", inner)
		t.Cleanup(func() { exec.Command("ip", "link", "del", outer[i]).Run() })
		run("link", "set", inner, "netns", ns[i])
		run("-n", ns[i], "addr", "add", fmt.Sprintf("10.99.0.%d/24", i+1), "dev", inner)
		run("-n", ns[i], "link", "set", inner, "up")
		run("-n", ns[i], "link", "set", "lo", "up")
		run("link", "set", outer[i], "up")
	}
	return ns, outer
}

// inNetns runs f on a thread moved into the named namespace: sockets f
// opens live there, whatever goroutine uses them later.
func inNetns(t *testing.T, name string, f func()) {
	t.Helper()
	done := make(chan error, 1)
	go func() {
		// The thread is never unlocked: it leaves with the goroutine, so
		// no other goroutine runs in the namespace.
		runtime.LockOSThread()
		fd, err := unix.Open("/run/netns/"+name, unix.O_RDONLY|unix.O_CLOEXEC, 0)
		if err == nil {
			err = unix.Setns(fd, unix.CLONE_NEWNET)
			unix.Close(fd)
		}
		if err == nil {
			f()
		}
		done <- err
	}()
	if err := <-done; err != nil {
		t.Fatal(err)
	}
}

// TestPacketNamespaces: two model nodes in two network namespaces, each
// joined to the switch's by a veth pair, the switch on the outer ends
// through AF_PACKET. ARP crosses untouched, the plan loses the first
// transmission of the SEND's last packet, the retransmission delivers
// it. The nodes' kernels leave the UDP checksums to an offload the veths
// never run: the Packet transport completes them, or the receiving
// kernel would drop every datagram. Root only.
func TestPacketNamespaces(t *testing.T) {
	ns, outer := netnsPair(t)
	plan, err := faults.Parse("drop op=RC_SEND_LAST tx=1")
	if err != nil {
		t.Fatal(err)
	}
	var tr [2]realnet.Transport
	for i := range 2 {
		p, err := realnet.NewPacket(realnet.PacketConfig{Interface: outer[i]})
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
		inNetns(t, ns[i], func() {
			// Path MTU 1024: the veths' MTU is 1500, and the UDP
			// transport sends with DF.
			nodes[i], err = realnet.NewNode(realnet.NodeConfig{Name: string(rune('a' + i)), Addr: addrs[i], PathMTUMax: nic.MTU1024})
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
		t.Errorf("no checksum completed on %s", outer[0])
	}
}
