//go:build linux

package realnet_test

import (
	"math/rand/v2"
	"net"
	"net/netip"
	"path/filepath"
	"runtime"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/rocesim/rocesim/nic"
	"github.com/rocesim/rocesim/sim"
	"github.com/rocesim/rocesim/wire"
)

// TestUDPGarbage floods a node's port 4791 with datagrams that are not
// RoCE v2 (empty, shorter than a BTH and an ICRC, random bytes of every
// length up to 2000, a seeded stream), in four rounds: each one the
// socket delivers is either counted by the transport as garbage or handed
// to the device and counted there as malformed, nothing else happens, the
// heap after the last round is no larger than after the first (a flood
// does not grow memory: nothing is kept per frame), and the node still
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
	const flood, rounds = 5000, 4
	var heap [rounds]uint64
	for round := range rounds {
		for i := range flood {
			n := i % 2000
			for j := range buf[:n] {
				buf[j] = byte(r.Uint32())
			}
			if _, err := c.Write(buf[:n]); err != nil {
				t.Fatal(err)
			}
		}
		// Wait until the socket's queue is drained: the kernel may drop
		// part of a flood (that is what a full socket buffer does), so
		// count what arrived rather than what was sent.
		var last uint64
		waitFor(t, func() bool {
			s, d := b.d.Transport().Stats(), b.d.Stats()
			got := s.Garbage + s.Received
			settled := d.FramesIn == s.Received && (got == uint64(round+1)*flood || got == last && got > 0)
			last = got
			return settled
		})
		heap[round] = heapInUse()
	}
	ts, ds := b.d.Transport().Stats(), b.d.Stats()
	malformed := b.rxErrors(t)
	if ts.Garbage == 0 || ts.Received != ds.FramesIn || malformed != ds.FramesIn || ds.FramesOut != 0 {
		b.d.Do(func(now sim.Time, dev *nic.Device) error {
			for r := range nic.NumRxDrops {
				t.Logf("%v: %d", nic.RxDrop(r), dev.RxDrops(nic.RxDrop(r)))
			}
			for c := range wire.NumErrorCodes {
				t.Logf("%v: %d", wire.ErrorCode(c), dev.RxErrors(wire.ErrorCode(c)))
			}
			return nil
		})
		t.Fatalf("transport %+v, driver %+v, device counted %d malformed", ts, ds, malformed)
	}
	t.Logf("of %d datagrams: %d garbage to the transport, %d malformed to the device; heap after each round %v",
		rounds*flood, ts.Garbage, malformed, heap)
	// 64 KiB of slack for the runtime's own noise: 15000 frames kept at
	// even 8 bytes each would be twice that.
	if heap[rounds-1] > heap[0]+64<<10 {
		t.Errorf("the heap grew from %d to %d bytes over %d rounds of garbage", heap[0], heap[rounds-1], rounds-1)
	}
	exchange(t, a, b)
}

// heapInUse is the live heap after a collection.
func heapInUse() uint64 {
	runtime.GC()
	var m runtime.MemStats
	runtime.ReadMemStats(&m)
	return m.HeapAlloc
}

// TestUDPBadInput sends a node, through a raw IPv4 socket (root only), a
// RoCE v2 frame for a QP it does not have, the same frame with its ICRC
// broken, and a WRITE cut inside its RETH: each is counted where it
// belongs (RxDrops no-qp; RxErrors bad-icrc; RxErrors truncated) and
// dropped, nothing is sent back, and the node still runs a SEND, WRITE
// and READ afterwards.
func TestUDPBadInput(t *testing.T) {
	fd, err := unix.Socket(unix.AF_INET, unix.SOCK_RAW, unix.IPPROTO_RAW) // IP_HDRINCL implied
	if err != nil {
		t.Skipf("no raw IPv4 socket (needs CAP_NET_RAW): %v", err)
	}
	defer unix.Close(fd)
	a := newNode(t, "a", "127.0.0.1", filepath.Join(t.TempDir(), "a.pcapng"))
	b := newNode(t, "b", "127.0.0.2", filepath.Join(t.TempDir(), "b.pcapng"))
	counters := func() (noQP, icrc, truncated uint64) {
		if err := b.d.Do(func(now sim.Time, dev *nic.Device) error {
			noQP, icrc, truncated = dev.RxDrops(nic.DropNoQP), dev.RxErrors(wire.CodeICRC), dev.RxErrors(wire.CodeTruncated)
			return nil
		}); err != nil {
			t.Fatal(err)
		}
		return
	}
	// frame is an IPv4 packet from 127.0.0.9 (the kernel fills ID 0 for
	// a header-included packet with DF set and ID 0, so the node's
	// rebuilt header matches and the ICRC verifies) of opcode op.
	frame := func(op wire.Opcode) []byte {
		f := wire.Frame{Src: netip.MustParseAddr("127.0.0.9"), Dst: netip.MustParseAddr("127.0.0.2"), TTL: 64,
			IPFlags: wire.IPv4FlagDF, SrcPort: 0xC001, ComputeUDPChecksum: true,
			BTH:     wire.BTHFields{Opcode: op, PKey: 0xFFFF, DestQP: 0x99, PSN: 1, AckReq: true},
			RETH:    wire.RETHFields{VA: 0x1000, RKey: 0x1234, DMALength: 5},
			Payload: []byte("hello")}
		buf := make([]byte, 256)
		n, err := wire.Encode(buf, &f)
		if err != nil {
			t.Fatal(err)
		}
		return buf[wire.EthernetLen:n]
	}
	noQP := frame(wire.OpRCSendOnly)
	badICRC := append([]byte(nil), noQP...)
	badICRC[len(badICRC)-1] ^= 0x5A
	badICRC[wire.IPv4MinLen+6], badICRC[wire.IPv4MinLen+7] = 0, 0 // no UDP checksum, or the kernel would drop it
	// A WRITE_ONLY cut 8 bytes into its RETH, the UDP length saying so
	// (the kernel sets the IP total length of a header-included packet).
	cut := frame(wire.OpRCWriteOnly)[:wire.IPv4MinLen+wire.UDPLen+wire.BTHLen+8]
	cut[wire.IPv4MinLen+4], cut[wire.IPv4MinLen+5] = 0, byte(wire.UDPLen+wire.BTHLen+8)
	cut[wire.IPv4MinLen+6], cut[wire.IPv4MinLen+7] = 0, 0 // no UDP checksum: it covered the whole packet
	for i, c := range []struct {
		name string
		pkt  []byte
		want [3]uint64
	}{
		{"unknown QP", noQP, [3]uint64{1, 0, 0}},
		{"bad ICRC", badICRC, [3]uint64{0, 1, 0}},
		{"truncated", cut, [3]uint64{0, 0, 1}},
	} {
		n0, i0, t0 := counters()
		in := b.d.Stats().FramesIn
		if err := unix.Sendto(fd, c.pkt, 0, &unix.SockaddrInet4{Addr: [4]byte{127, 0, 0, 2}}); err != nil {
			t.Fatal(err)
		}
		deadline := time.Now().Add(wallBound)
		for b.d.Stats().FramesIn == in {
			if time.Now().After(deadline) {
				t.Fatalf("%s: the node did not receive it: transport %+v", c.name, b.d.Transport().Stats())
			}
			time.Sleep(time.Millisecond)
		}
		n1, i1, t1 := counters()
		if got := [3]uint64{n1 - n0, i1 - i0, t1 - t0}; got != c.want {
			t.Errorf("case %d, %s: no-qp, bad-icrc, truncated grew by %v, want %v (transport %+v)",
				i, c.name, got, c.want, b.d.Transport().Stats())
		}
	}
	if s := b.d.Stats(); s.FramesOut != 0 {
		t.Errorf("the node answered bad input: %+v", s)
	}
	t.Logf("transport %+v, driver %+v", b.d.Transport().Stats(), b.d.Stats())
	exchange(t, a, b)
}
