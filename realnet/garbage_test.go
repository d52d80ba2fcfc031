//go:build linux

package realnet_test

import (
	"math/rand/v2"
	"net"
	"path/filepath"
	"testing"

	"github.com/rocesim/rocesim/wire"
)

// TestUDPGarbage floods a node's port 4791 with datagrams that are not
// RoCE v2 (empty, shorter than a BTH and an ICRC, random bytes of every
// length up to 2000, a seeded stream): each one the socket delivers is
// either counted by the transport as garbage or handed to the device and
// counted there as malformed, nothing else happens, and the node still
// runs a SEND, WRITE and READ afterwards.
func TestUDPGarbage(t *testing.T) {
	a := newNode(t, "a", "127.0.0.1", filepath.Join(t.TempDir(), "a.pcapng"))
	b := newNode(t, "b", "127.0.0.2", filepath.Join(t.TempDir(), "b.pcapng"))
	c, err := net.DialUDP("udp4", &net.UDPAddr{IP: net.IPv4(127, 0, 0, 3)}, &net.UDPAddr{IP: net.IPv4(127, 0, 0, 2), Port: wire.UDPPortRoCEv2})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	r := rand.New(rand.NewPCG(17, 4791))
	buf := make([]byte, 2000)
	const flood = 5000
	for i := range flood {
		n := i % 2000
		for j := range buf[:n] {
			buf[j] = byte(r.Uint32())
		}
		if _, err := c.Write(buf[:n]); err != nil {
			t.Fatal(err)
		}
	}
	// Wait until the socket's queue is drained: the kernel may drop part
	// of a flood (that is what a full socket buffer does), so count what
	// arrived rather than what was sent.
	var last uint64
	waitFor(t, func() bool {
		s, d := b.d.Transport().Stats(), b.d.Stats()
		got := s.Garbage + s.Received
		settled := d.FramesIn == s.Received && (got == flood || got == last && got > 0)
		last = got
		return settled
	})
	ts, ds := b.d.Transport().Stats(), b.d.Stats()
	malformed := b.rxErrors(t)
	if ts.Garbage == 0 || ts.Received != ds.FramesIn || malformed != ds.FramesIn || ds.FramesOut != 0 {
		t.Fatalf("transport %+v, driver %+v, device counted %d malformed", ts, ds, malformed)
	}
	t.Logf("of %d datagrams: %d garbage to the transport, %d malformed to the device", flood, ts.Garbage, malformed)
	exchange(t, a, b)
}
