//go:build linux

package realnet_test

import (
	"bytes"
	"context"
	"fmt"
	"net/netip"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/rocesim/rocesim/nic"
	"github.com/rocesim/rocesim/realnet"
	"github.com/rocesim/rocesim/sim"
	"github.com/rocesim/rocesim/wire"
	"github.com/rocesim/rocesim/wire/capture"
)

// These tests run two model nodes on one machine over the UDP transport:
// 127.0.0.1 and 127.0.0.2, each bound to its own port 4791 (any address
// of 127.0.0.0/8 is the loopback interface's on Linux, and binding a port
// above 1023 needs no privilege, so no root is needed).

// nodeMRLen is the size of each node's memory region.
const nodeMRLen = 256 << 10

// wallBound bounds each test's real-time part.
const wallBound = 10 * time.Second

// node is one model node on the UDP transport, with an RC QP.
type node struct {
	name string
	ip   netip.Addr
	n    *realnet.Node
	d    *realnet.Driver
	rc   *realnet.RC
	peer realnet.Endpoint

	mu  sync.Mutex
	cap capture.Writer // what the node sent, as the transport left it
	err error
}

// newNode starts a node at ip:4791 whose sends are captured to capPath
// (pcapng, one comment per frame: the device's note); opts adjust its
// configuration.
func newNode(t *testing.T, name, ip string, capPath string, opts ...func(*realnet.NodeConfig)) *node {
	t.Helper()
	n := &node{name: name, ip: netip.MustParseAddr(ip)}
	w, err := capture.Create(capPath, capture.PcapngOptions{Comment: fmt.Sprintf(
		"rocesim model node %s at %s:4791 over the UDP transport: the frames it sent, outer headers as the "+
			"kernel sends them but the UDP checksum (the kernel's, shown as 0); timestamps are the device's "+
			"time (nanoseconds since the driver started)", name, ip)})
	if err != nil {
		t.Fatal(err)
	}
	n.cap = w
	if _, err := w.AddInterface(name+"->net", "frames node "+name+" sent"); err != nil {
		t.Fatal(err)
	}
	cfg := realnet.NodeConfig{Name: name, Addr: n.ip, Annotate: true,
		Sent: func(now sim.Time, frame []byte, note string, err error) {
			if err != nil {
				note += "; refused: " + err.Error()
			}
			if werr := w.WriteFrame(int64(now), 0, frame, note); werr != nil && n.err == nil {
				n.err = werr
			}
		}}
	for _, o := range opts {
		o(&cfg)
	}
	n.n, err = realnet.NewNode(cfg)
	if err != nil {
		w.Close()
		t.Fatalf("%s: %v (is another process bound to %s:4791?)", name, err, ip)
	}
	n.d = n.n.Driver
	t.Cleanup(func() { n.close(t) })
	return n
}

// close stops the node and closes its capture.
func (n *node) close(t *testing.T) {
	t.Helper()
	n.mu.Lock()
	defer n.mu.Unlock()
	if n.cap == nil {
		return
	}
	if err := n.d.Close(); err != nil {
		t.Errorf("%s: %v", n.name, err)
	}
	if err := n.cap.Close(); err != nil {
		t.Errorf("%s: capture: %v", n.name, err)
	}
	n.cap = nil
	if n.err != nil {
		t.Errorf("%s: capture: %v", n.name, n.err)
	}
}

// setup creates n's RC QP over an MR filled with a pattern.
func (n *node) setup(t *testing.T, seed byte, psn uint32) {
	t.Helper()
	var err error
	n.rc, err = n.n.NewRC(nodeMRLen, func(b []byte) {
		for i := range b {
			b[i] = seed + byte(i*7) + byte(i>>11)
		}
	}, psn)
	if err != nil {
		t.Fatalf("%s: setup: %v", n.name, err)
	}
}

// connect connects n's QP to peer's.
func (n *node) connect(t *testing.T, peer *node) {
	t.Helper()
	n.peer = peer.rc.Local()
	if err := n.rc.Connect(n.peer); err != nil {
		t.Fatalf("%s: %v", n.name, err)
	}
}

// post posts one signaled send work request of length bytes at off in
// n's MR (RemoteAddr: an offset in the peer's).
func (n *node) post(t *testing.T, wr nic.SendWR, off, length int) {
	t.Helper()
	if wr.Opcode == nic.WRRDMAWrite || wr.Opcode == nic.WRRDMARead {
		wr.RemoteAddr += n.peer.VA
		wr.RKey = n.peer.RKey
	}
	if err := n.rc.Post(wr, off, length); err != nil {
		t.Fatalf("%s: post_send %s: %v", n.name, wr.Opcode, err)
	}
}

// postRecv posts one receive of length bytes at off in n's MR.
func (n *node) postRecv(t *testing.T, wrid uint64, off, length int) {
	t.Helper()
	if err := n.rc.PostRecv(wrid, off, length); err != nil {
		t.Fatalf("%s: post_recv: %v", n.name, err)
	}
}

// wait returns n's next completion, waiting for it in real time.
func (n *node) wait(ctx context.Context, t *testing.T) nic.WC {
	t.Helper()
	wc, err := n.rc.Wait(ctx)
	if err != nil {
		t.Fatalf("%s: waiting for a completion: %v (driver %+v, transport %+v)", n.name, err, n.d.Stats(),
			n.d.Transport().Stats())
	}
	return wc
}

// mem returns a copy of n's MR bytes [off, off+length).
func (n *node) mem(t *testing.T, off, length int) []byte {
	t.Helper()
	b, err := n.rc.Bytes(off, length)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// rxErrors is the number of frames n's device dropped as malformed.
func (n *node) rxErrors(t *testing.T) uint64 {
	t.Helper()
	sum, err := n.n.RxErrors()
	if err != nil {
		t.Fatal(err)
	}
	return sum
}

// checkWC fails unless wc is a success of the opcode given.
func checkWC(t *testing.T, who string, wc nic.WC, wrid uint64, op nic.WCOpcode) {
	t.Helper()
	if wc.Status != nic.WCSuccess || wc.WRID != wrid || wc.Opcode != op {
		t.Fatalf("%s: completion %+v, want wr_id %d opcode %d success", who, wc, wrid, op)
	}
}

// capDir is where the tests write their captures: $ROCESIM_REALNET_CAPTURES
// if set (to keep them), else a temporary directory.
func capDir(t *testing.T) string {
	if d := os.Getenv("ROCESIM_REALNET_CAPTURES"); d != "" {
		if err := os.MkdirAll(d, 0o755); err != nil {
			t.Fatal(err)
		}
		return d
	}
	return t.TempDir()
}

// TestUDPTwoNodes runs an RC SEND into a posted receive, an RDMA WRITE
// and an RDMA READ between two model nodes on 127.0.0.1:4791 and
// 127.0.0.2:4791 in real time, checks the data, the counters, and the
// captures of what each sent (every frame a RoCE v2 frame whose ICRC
// verifies over the outer headers as rewritten for the kernel, with the
// device's note as its comment).
func TestUDPTwoNodes(t *testing.T) {
	dir := capDir(t)
	a := newNode(t, "a", "127.0.0.1", filepath.Join(dir, "udp-a.pcapng"))
	b := newNode(t, "b", "127.0.0.2", filepath.Join(dir, "udp-b.pcapng"))
	exchange(t, a, b)
	a.close(t)
	b.close(t)
	for _, n := range []*node{a, b} {
		checkCapture(t, filepath.Join(dir, "udp-"+n.name+".pcapng"), n.ip)
	}
}

// exchange connects a and b and runs a SEND, a WRITE and a READ between
// them, checking the data and the counters, within wallBound.
func exchange(t *testing.T, a, b *node) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), wallBound)
	defer cancel()
	// Counters are compared with their values now: a test may have sent
	// garbage before.
	rx0 := [2]uint64{a.rxErrors(t), b.rxErrors(t)}
	ta0, tb0 := a.d.Transport().Stats(), b.d.Transport().Stats()
	a.setup(t, 1, 0x1000)
	b.setup(t, 2, 0xFFFFF0) // wraps the 24-bit PSN during the run
	a.connect(t, b)
	b.connect(t, a)

	// SEND 10000 bytes (3 packets at path MTU 4096) into a receive at 4096.
	b.postRecv(t, 100, 4096, 16384)
	a.post(t, nic.SendWR{WRID: 1, Opcode: nic.WRSend}, 0, 10000)
	checkWC(t, "a: SEND", a.wait(ctx, t), 1, nic.WCSend)
	wc := b.wait(ctx, t)
	checkWC(t, "b: RECV", wc, 100, nic.WCRecv)
	if wc.ByteLen != 10000 {
		t.Fatalf("b: RECV byte_len %d, want 10000", wc.ByteLen)
	}
	if !bytes.Equal(b.mem(t, 4096, 10000), a.mem(t, 0, 10000)) {
		t.Fatal("b: the SEND's bytes differ from a's")
	}

	// RDMA WRITE 64 KiB + 1 from a's 32768 to b's 131072.
	const wlen = 64<<10 + 1
	a.post(t, nic.SendWR{WRID: 2, Opcode: nic.WRRDMAWrite, RemoteAddr: 131072}, 32768, wlen)
	checkWC(t, "a: WRITE", a.wait(ctx, t), 2, nic.WCRDMAWrite)
	if !bytes.Equal(b.mem(t, 131072, wlen), a.mem(t, 32768, wlen)) {
		t.Fatal("b: the WRITE's bytes differ from a's")
	}

	// RDMA READ 20000 bytes of a's 200000 into b's 40000: b is the
	// requester this time.
	const rlen = 20000
	b.post(t, nic.SendWR{WRID: 3, Opcode: nic.WRRDMARead, RemoteAddr: 200000}, 40000, rlen)
	checkWC(t, "b: READ", b.wait(ctx, t), 3, nic.WCRDMARead)
	if !bytes.Equal(b.mem(t, 40000, rlen), a.mem(t, 200000, rlen)) {
		t.Fatal("b: the READ's bytes differ from a's")
	}

	rx1 := [2]uint64{a.rxErrors(t), b.rxErrors(t)}
	ta, tb := sub(a.d.Transport().Stats(), ta0), sub(b.d.Transport().Stats(), tb0)
	if rx1 != rx0 || ta.Sent != tb.Received || tb.Sent != ta.Received || ta.Refused+tb.Refused+ta.Garbage+tb.Garbage != 0 {
		t.Fatalf("device receive errors a %d b %d (before: %d); transports during the exchange a %+v, b %+v",
			rx1[0], rx1[1], rx0, ta, tb)
	}
}

// checkCapture checks that every frame in a node's capture is RoCE v2
// from ip to the other node on port 4791, with the socket's source port
// 4791, IPv4 ID 0 and DF, a valid ICRC, and a comment.
func checkCapture(t *testing.T, path string, ip netip.Addr) {
	t.Helper()
	r, err := capture.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	var p wire.Packet
	frames := 0
	for rec, err := range r.Records() {
		if err != nil {
			t.Fatalf("%s after %d frames: %v", path, frames, err)
		}
		frames++
		if err := p.Decode(rec.Data); err != nil {
			t.Fatalf("%s: frame %d: %v", path, frames, err)
		}
		if p.Src() != ip || p.UDP.SrcPort() != wire.UDPPortRoCEv2 || p.IPv4.ID() != 0 || p.IPv4.Flags() != wire.IPv4FlagDF ||
			len(rec.Comments) == 0 || strings.Join(rec.Comments, "") == "" {
			t.Fatalf("%s: frame %d: from %v port %d, ID %d, flags %d, comments %q", path, frames, p.Src(),
				p.UDP.SrcPort(), p.IPv4.ID(), p.IPv4.Flags(), rec.Comments)
		}
	}
	if frames == 0 {
		t.Fatalf("%s: no frames", path)
	}
}

// sub returns the counts of s since before.
func sub(s, before realnet.TransportStats) realnet.TransportStats {
	return realnet.TransportStats{Received: s.Received - before.Received, Sent: s.Sent - before.Sent,
		Truncated: s.Truncated - before.Truncated, Garbage: s.Garbage - before.Garbage, Refused: s.Refused - before.Refused}
}

// TestUDPIPv6 runs RoCE v2 over IPv6 on one node at [::1]:4791 (the only
// IPv6 loopback address): two RC QPs of the node connected to each
// other, so every frame leaves through the socket and comes back through
// it, with the outer headers rebuilt from IPV6_PKTINFO, IPV6_HOPLIMIT and
// IPV6_TCLASS. Over IPv6 every field the ICRC covers is known to the
// receiving socket, so the check is the whole one. A SEND, a WRITE and a
// READ complete with their data.
func TestUDPIPv6(t *testing.T) {
	n, err := realnet.NewNode(realnet.NodeConfig{Name: "v6", Addr: netip.IPv6Loopback()})
	if err != nil {
		t.Skipf("no IPv6 loopback: %v", err)
	}
	defer n.Close()
	runIPv6(t, n)
}

// TestUDPIPv6OnTheWire runs TestUDPIPv6's exchange while watching the
// loopback interface: every datagram the node sent verifies over the
// IPv6 and UDP headers the kernel wrote.
func TestUDPIPv6OnTheWire(t *testing.T) {
	stop := watch(t, func(p *wire.Packet) bool {
		return p.IPv6 != nil && p.Src() == netip.IPv6Loopback() && p.UDP.SrcPort() == wire.UDPPortRoCEv2
	}, func(*wire.Packet) error { return nil })
	n, err := realnet.NewNode(realnet.NodeConfig{Name: "v6", Addr: netip.IPv6Loopback()})
	if err != nil {
		stop(0)
		t.Skipf("no IPv6 loopback: %v", err)
	}
	runIPv6(t, n)
	sent := n.Transport().Stats().Sent
	if err := n.Close(); err != nil {
		t.Fatal(err)
	}
	if seen, bad, first := stop(int(sent)); seen != int(sent) || bad != 0 {
		t.Fatalf("on the wire: %d RoCE v2 frames (the node sent %d), %d bad: %v", seen, sent, bad, first)
	}
}

// runIPv6 connects two RC QPs of n to each other and runs a SEND, a
// WRITE and a READ between them, checking the data.
func runIPv6(t *testing.T, n *realnet.Node) {
	t.Helper()
	fill := func(seed byte) func([]byte) {
		return func(b []byte) {
			for i := range b {
				b[i] = seed ^ byte(i*13)
			}
		}
	}
	r1, err := n.NewRC(nodeMRLen, fill(1), 0x100)
	if err != nil {
		t.Fatal(err)
	}
	r2, err := n.NewRC(nodeMRLen, fill(2), 0x200)
	if err != nil {
		t.Fatal(err)
	}
	if err := r1.Connect(r2.Local()); err != nil {
		t.Fatal(err)
	}
	if err := r2.Connect(r1.Local()); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), wallBound)
	defer cancel()
	wait := func(r *realnet.RC, op nic.WCOpcode) {
		t.Helper()
		wc, err := r.Wait(ctx)
		if err != nil || wc.Status != nic.WCSuccess || wc.Opcode != op {
			t.Fatalf("completion %+v, %v; want %d (driver %+v, transport %+v)", wc, err, op, n.Stats(), n.Transport().Stats())
		}
	}
	same := func(a *realnet.RC, aoff int, b *realnet.RC, boff, length int) {
		t.Helper()
		x, err1 := a.Bytes(aoff, length)
		y, err2 := b.Bytes(boff, length)
		if err1 != nil || err2 != nil || !bytes.Equal(x, y) {
			t.Fatalf("data differs (%v, %v)", err1, err2)
		}
	}
	if err := r2.PostRecv(1, 0, 8192); err != nil {
		t.Fatal(err)
	}
	if err := r1.Post(nic.SendWR{WRID: 1, Opcode: nic.WRSend}, 0, 6000); err != nil {
		t.Fatal(err)
	}
	wait(r1, nic.WCSend)
	wait(r2, nic.WCRecv)
	same(r1, 0, r2, 0, 6000)
	p2 := r2.Local()
	if err := r1.Post(nic.SendWR{WRID: 2, Opcode: nic.WRRDMAWrite, RemoteAddr: p2.VA + 10000, RKey: p2.RKey}, 20000, 30000); err != nil {
		t.Fatal(err)
	}
	wait(r1, nic.WCRDMAWrite)
	same(r1, 20000, r2, 10000, 30000)
	if err := r1.Post(nic.SendWR{WRID: 3, Opcode: nic.WRRDMARead, RemoteAddr: p2.VA + 100000, RKey: p2.RKey}, 60000, 20000); err != nil {
		t.Fatal(err)
	}
	wait(r1, nic.WCRDMARead)
	same(r1, 60000, r2, 100000, 20000)
	rx, err := n.RxErrors()
	if err != nil || rx != 0 {
		t.Fatalf("device dropped %d frames as malformed (%v)", rx, err)
	}
}
