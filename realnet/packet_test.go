//go:build linux

package realnet_test

import (
	"bytes"
	"errors"
	"fmt"
	"net/netip"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/rocesim/rocesim/nic"
	"github.com/rocesim/rocesim/realnet"
	"github.com/rocesim/rocesim/sim"
	"github.com/rocesim/rocesim/wire"
	"golang.org/x/sys/unix"
)

// openLoopback opens the AF_PACKET transport on the loopback interface,
// or skips the test where it cannot run (it needs CAP_NET_RAW).
func openLoopback(t *testing.T) *realnet.Packet {
	t.Helper()
	p, err := realnet.NewPacket(realnet.PacketConfig{Interface: "lo"})
	if err != nil {
		t.Skipf("no AF_PACKET socket on lo (needs CAP_NET_RAW): %v", err)
	}
	return p
}

// watch watches the loopback interface (the AF_PACKET transport) for
// RoCE v2 frames that match, and checks each; stop ends the watch once
// want frames matched (or after wallBound: the watcher has every frame in
// its socket's queue, but may not have read them all yet on a busy
// machine, and closing the socket drops what it has not read) and
// returns how many matched, how many failed check, and the first
// failure.
func watch(t *testing.T, match func(*wire.Packet) bool, check func(*wire.Packet) error) (stop func(want int) (seen, bad int, first error)) {
	t.Helper()
	sniff := openLoopback(t)
	var mu sync.Mutex // guards seen, bad, first
	var seen, bad int
	var first error
	done := make(chan struct{})
	go func() {
		defer close(done)
		msgs := make([]realnet.Msg, sniff.BatchSize())
		for i := range msgs {
			msgs[i].Buf = make([]byte, realnet.BufLen)
		}
		var p wire.Packet
		for {
			n, err := sniff.Receive(msgs)
			if err != nil {
				if !errors.Is(err, realnet.ErrClosed) {
					t.Error(err)
				}
				return
			}
			mu.Lock()
			for _, m := range msgs[:n] {
				if p.DecodeHeaders(m.Buf[:m.N]) != nil || !match(&p) {
					continue
				}
				seen++
				err := p.Decode(m.Buf[:m.N])
				if err == nil {
					err = check(&p)
				}
				if err != nil {
					bad++
					if first == nil {
						first = err
					}
				}
			}
			mu.Unlock()
		}
	}()
	return func(want int) (int, int, error) {
		t.Helper()
		for deadline := time.Now().Add(wallBound); time.Now().Before(deadline); time.Sleep(time.Millisecond) {
			mu.Lock()
			n := seen
			mu.Unlock()
			if n >= want {
				break
			}
		}
		if err := sniff.Close(); err != nil {
			t.Fatal(err)
		}
		<-done
		mu.Lock()
		defer mu.Unlock()
		return seen, bad, first
	}
}

// TestUDPOnTheWire watches the loopback interface with the AF_PACKET
// transport while two nodes on the UDP transport exchange a SEND, a WRITE
// and a READ: every datagram either sent must be a RoCE v2 frame whose
// ICRC verifies over the IP and UDP headers the kernel actually wrote
// (IPv4 ID, flags, lengths, source port: the UDP transport's claim about
// what the kernel chooses), and the watcher must see every one.
func TestUDPOnTheWire(t *testing.T) {
	lo1, lo2 := netip.MustParseAddr("127.0.0.1"), netip.MustParseAddr("127.0.0.2")
	stop := watch(t, func(p *wire.Packet) bool {
		return p.IPv4 != nil && (p.Src() == lo1 && p.Dst() == lo2 || p.Src() == lo2 && p.Dst() == lo1)
	}, func(p *wire.Packet) error {
		if p.IPv4.ID() != 0 || p.IPv4.Flags() != wire.IPv4FlagDF || p.UDP.SrcPort() != wire.UDPPortRoCEv2 {
			return fmt.Errorf("IPv4 ID %#x, flags %d, source port %d", p.IPv4.ID(), p.IPv4.Flags(), p.UDP.SrcPort())
		}
		return nil
	})
	dir := t.TempDir()
	a := newNode(t, "a", "127.0.0.1", filepath.Join(dir, "a.pcapng"))
	b := newNode(t, "b", "127.0.0.2", filepath.Join(dir, "b.pcapng"))
	exchange(t, a, b)
	sent := a.d.Transport().Stats().Sent + b.d.Transport().Stats().Sent
	// Closing the nodes' sockets after their last datagram was received
	// means the watcher, which sees each before the socket does, has them.
	a.close(t)
	b.close(t)
	if seen, bad, first := stop(int(sent)); seen != int(sent) || bad != 0 {
		t.Fatalf("on the wire: %d RoCE v2 frames between the nodes (they sent %d), %d bad: %v", seen, sent, bad, first)
	}
}

// TestUDPForeignIPID sends, through a raw IPv4 socket, two RoCE v2
// datagrams from a sender that is not a UDP transport (127.0.0.9) to a
// node at 127.0.0.2: one with IPv4 ID 0, one with ID 0x1234, as rxe would
// (rxe_net.c prepare_ipv4_hdr takes the ID from __ip_select_ident). The
// socket delivers both, but not their IDs; the node rebuilds ID 0, so
// the first passes its ICRC check (and is then dropped for its unknown
// QP) and the second fails it, unless the node recovers the ID from the
// ICRC (NodeConfig.RecoverIPv4ID): then both pass, one by recovery.
func TestUDPForeignIPID(t *testing.T) {
	fd, err := unix.Socket(unix.AF_INET, unix.SOCK_RAW, unix.IPPROTO_RAW) // IP_HDRINCL implied
	if err != nil {
		t.Skipf("no raw IPv4 socket (needs CAP_NET_RAW): %v", err)
	}
	defer unix.Close(fd)
	for _, solve := range []bool{false, true} {
		t.Run(fmt.Sprintf("recover=%v", solve), func(t *testing.T) {
			b := newNode(t, "b", "127.0.0.2", filepath.Join(t.TempDir(), "b.pcapng"),
				func(c *realnet.NodeConfig) { c.RecoverIPv4ID = solve })
			icrcErrors := func() uint64 {
				var n uint64
				if err := b.d.Do(func(now sim.Time, dev *nic.Device) error { n = dev.RxErrors(wire.CodeICRC); return nil }); err != nil {
					t.Fatal(err)
				}
				return n
			}
			for i, id := range []uint16{0, 0x1234} {
				f := wire.Frame{Src: netip.MustParseAddr("127.0.0.9"), Dst: netip.MustParseAddr("127.0.0.2"), TTL: 64,
					IPID: id, IPFlags: wire.IPv4FlagDF, SrcPort: 0xC001, ComputeUDPChecksum: true,
					BTH:     wire.BTHFields{Opcode: wire.OpRCSendOnly, PKey: 0xFFFF, DestQP: 0x99, PSN: 1, AckReq: true},
					Payload: []byte("hello")}
				buf := make([]byte, 256)
				n, err := wire.Encode(buf, &f)
				if err != nil {
					t.Fatal(err)
				}
				before, got := icrcErrors(), b.d.Stats().FramesIn
				// The kernel keeps a non-zero ID of a header-included
				// packet and fills a zero one (with DF set and no socket:
				// 0 again).
				if err := unix.Sendto(fd, buf[wire.EthernetLen:n], 0, &unix.SockaddrInet4{Addr: [4]byte{127, 0, 0, 2}}); err != nil {
					t.Fatal(err)
				}
				waitFor(t, func() bool { return b.d.Stats().FramesIn > got })
				want := i == 1 && !solve
				if grew := icrcErrors() > before; grew != want {
					t.Fatalf("IPv4 ID %#x: ICRC error counted %v, want %v", id, grew, want)
				}
			}
			if got, want := b.d.Transport().Stats().Recovered, map[bool]uint64{false: 0, true: 1}[solve]; got != want {
				t.Fatalf("Recovered = %d, want %d", got, want)
			}
		})
	}
}

// TestPacketLoopback sends a frame through one AF_PACKET transport on lo
// and receives it, byte for byte, on another.
func TestPacketLoopback(t *testing.T) {
	tx := openLoopback(t)
	defer tx.Close()
	rx := openLoopback(t)
	defer rx.Close()
	frame := make([]byte, 60)
	copy(frame[12:], []byte{0x88, 0xB5}) // IEEE local experimental EtherType
	copy(frame[14:], "rocesim realnet AF_PACKET loopback test")
	got := make(chan bool, 1)
	go func() {
		msgs := make([]realnet.Msg, rx.BatchSize())
		for i := range msgs {
			msgs[i].Buf = make([]byte, realnet.BufLen)
		}
		for {
			n, err := rx.Receive(msgs)
			if err != nil {
				got <- false
				return
			}
			for _, m := range msgs[:n] {
				if bytes.Equal(m.Buf[:m.N], frame) {
					got <- true
					return
				}
			}
		}
	}()
	if n, err := tx.Send([][]byte{frame}); n != 1 || err != nil {
		t.Fatalf("Send: %d, %v", n, err)
	}
	select {
	case ok := <-got:
		if !ok {
			t.Fatal("receive failed")
		}
	case <-time.After(wallBound):
		t.Fatalf("the frame did not come back within %v", wallBound)
	}
}

// waitFor polls cond until it holds, failing the test after wallBound.
func waitFor(t *testing.T, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(wallBound)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("not within %v", wallBound)
		}
		time.Sleep(time.Millisecond)
	}
}
