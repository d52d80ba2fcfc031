package realnet_test

import (
	"bytes"
	"context"
	"net/netip"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/rocesim/rocesim/nic"
	"github.com/rocesim/rocesim/realnet"
)

// memTransport is an in-memory Transport double: whole frames, each Send
// copying into the peer's queue. refuse, if set, makes Send refuse the
// n-th frame sent (counting from 0), as a socket refusing a datagram.
type memTransport struct {
	in     chan []byte
	peer   *memTransport
	done   chan struct{}
	once   sync.Once
	sent   atomic.Int64
	refuse func(n int64) bool
}

// memPair returns two transports joined to each other.
func memPair() (a, b *memTransport) {
	a = &memTransport{in: make(chan []byte, 1024), done: make(chan struct{})}
	b = &memTransport{in: make(chan []byte, 1024), done: make(chan struct{})}
	a.peer, b.peer = b, a
	return a, b
}

func (m *memTransport) Receive(msgs []realnet.Msg) (int, error) {
	select {
	case f := <-m.in:
		msgs[0].N = copy(msgs[0].Buf, f)
	case <-m.done:
		return 0, realnet.ErrClosed
	}
	n := 1
	for n < len(msgs) {
		select {
		case f := <-m.in:
			msgs[n].N = copy(msgs[n].Buf, f)
			n++
		default:
			return n, nil
		}
	}
	return n, nil
}

func (m *memTransport) Send(frames [][]byte) (int, error) {
	for i, f := range frames {
		k := m.sent.Add(1) - 1
		if m.refuse != nil && m.refuse(k) {
			return i, realnet.ErrRefused
		}
		select {
		case m.peer.in <- bytes.Clone(f):
		default: // the peer's queue is full: lost, as on a congested link
		}
	}
	return len(frames), nil
}

func (m *memTransport) BatchSize() int                { return 8 }
func (m *memTransport) Carries() realnet.Carriage     { return realnet.WholeFrames }
func (m *memTransport) Stats() realnet.TransportStats { return realnet.TransportStats{} }
func (m *memTransport) Close() error                  { m.once.Do(func() { close(m.done) }); return nil }

// memNodes starts two nodes (10.0.0.1 and 10.0.0.2) on a memTransport
// pair, each with an RC QP connected to the other's.
func memNodes(t *testing.T, ta, tb *memTransport) (a, b *realnet.Node, ra, rb *realnet.RC) {
	t.Helper()
	var err error
	fill := func(b []byte) {
		for i := range b {
			b[i] = byte(i * 11)
		}
	}
	rcs := make([]*realnet.RC, 2)
	nodes := make([]*realnet.Node, 2)
	for i, tr := range []*memTransport{ta, tb} {
		nodes[i], err = realnet.NewNode(realnet.NodeConfig{Name: "mem", Addr: netip.AddrFrom4([4]byte{10, 0, 0, byte(i + 1)}),
			PathMTUMax: nic.MTU1024, Transport: tr})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { nodes[i].Close() })
		if rcs[i], err = nodes[i].NewRC(1<<16, fill, uint32(i+1)<<12); err != nil {
			t.Fatal(err)
		}
	}
	if err := rcs[0].Connect(rcs[1].Local()); err != nil {
		t.Fatal(err)
	}
	if err := rcs[1].Connect(rcs[0].Local()); err != nil {
		t.Fatal(err)
	}
	return nodes[0], nodes[1], rcs[0], rcs[1]
}

// TestDriverMem runs a SEND between two drivers over the in-memory
// double: the driver's loop alone, no sockets.
func TestDriverMem(t *testing.T) {
	ta, tb := memPair()
	a, _, ra, rb := memNodes(t, ta, tb)
	memSend(t, a, ra, rb)
	if s := a.Stats(); s.FramesOut != 5 || s.SendErrors != 0 {
		t.Fatalf("a's driver: %+v, want 5 frames out (5000 bytes at MTU 1024)", s)
	}
}

// TestDriverRefusedFrame has the transport refuse the second frame of a
// 5-packet SEND: the driver counts it (SendErrors), sends the rest of the
// batch, and the frame is lost as at a port that drops it: the
// responder's NAK of the gap (or the ACK timeout) brings it back, so the
// SEND completes with its data.
func TestDriverRefusedFrame(t *testing.T) {
	ta, tb := memPair()
	ta.refuse = func(n int64) bool { return n == 1 }
	a, _, ra, rb := memNodes(t, ta, tb)
	memSend(t, a, ra, rb)
	if s := a.Stats(); s.SendErrors != 1 || s.FramesOut < 5 {
		t.Fatalf("a's driver: %+v, want 1 send error and at least 5 frames out", s)
	}
}

// memSend sends 5000 bytes from ra to rb (a is ra's node), waits for both
// completions and checks the data.
func memSend(t *testing.T, a *realnet.Node, ra, rb *realnet.RC) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := rb.PostRecv(1, 0, 8192); err != nil {
		t.Fatal(err)
	}
	if err := ra.Post(nic.SendWR{WRID: 1, Opcode: nic.WRSend}, 0, 5000); err != nil {
		t.Fatal(err)
	}
	for _, r := range []*realnet.RC{ra, rb} {
		if wc, err := r.Wait(ctx); err != nil || wc.Status != nic.WCSuccess {
			t.Fatalf("completion %+v, %v (driver %+v)", wc, err, a.Stats())
		}
	}
	got, err := rb.Bytes(0, 5000)
	if err != nil {
		t.Fatal(err)
	}
	want, err := ra.Bytes(0, 5000)
	if err != nil || !bytes.Equal(got, want) {
		t.Fatalf("the SEND's data differs (%v)", err)
	}
}

// TestRCZeroLengthAndSendInv: an RC's zero-length SEND has no SGE (one
// of length 0 would mean 2^31 bytes) and completes with byte_len 0 at
// both ends; BindMW binds a type 2 window that the peer's SEND WITH
// INVALIDATE names, the receive reports the invalidated R_Key
// (IBV_WC_WITH_INV), and the freed window binds again.
func TestRCZeroLengthAndSendInv(t *testing.T) {
	ta, tb := memPair()
	_, _, ra, rb := memNodes(t, ta, tb)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	wait := func(r *realnet.RC, what string) nic.WC {
		t.Helper()
		wc, err := r.Wait(ctx)
		if err != nil || wc.Status != nic.WCSuccess {
			t.Fatalf("%s: completion %+v, %v", what, wc, err)
		}
		return wc
	}
	if err := rb.PostRecv(1, 0, 0); err != nil {
		t.Fatal(err)
	}
	if err := ra.Post(nic.SendWR{WRID: 1, Opcode: nic.WRSend}, 0, 0); err != nil {
		t.Fatal(err)
	}
	wait(ra, "zero-length SEND")
	if wc := wait(rb, "zero-length receive"); wc.ByteLen != 0 {
		t.Fatalf("zero-length receive: byte_len %d", wc.ByteLen)
	}
	for k := range 2 {
		rkey, err := rb.BindMW(uint64(10+k), 0, 4096)
		if err != nil {
			t.Fatal(err)
		}
		wait(rb, "bind")
		if err := rb.PostRecv(uint64(20+k), 0, 100); err != nil {
			t.Fatal(err)
		}
		if err := ra.Post(nic.SendWR{WRID: uint64(20 + k), Opcode: nic.WRSendWithInv, InvalidateRKey: rkey}, 0, 100); err != nil {
			t.Fatal(err)
		}
		wait(ra, "SEND_WITH_INV")
		if wc := wait(rb, "its receive"); !wc.Invalidated() || wc.ImmData != rkey || wc.ByteLen != 100 {
			t.Fatalf("receive %+v, want it to have invalidated rkey %#x, 100 bytes", wc, rkey)
		}
	}
}
