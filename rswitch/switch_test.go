//go:build linux

package rswitch

import (
	"bytes"
	"context"
	"net"
	"net/netip"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/rocesim/rocesim/faults"
	"github.com/rocesim/rocesim/ladder"
	"github.com/rocesim/rocesim/nic"
	"github.com/rocesim/rocesim/realnet"
	"github.com/rocesim/rocesim/sim"
	"github.com/rocesim/rocesim/wire"
	"github.com/rocesim/rocesim/wire/capture"
)

var lo = netip.MustParseAddr("127.0.0.1")

// fakeVM is a QEMU stand-in: a UDP socket on 127.0.0.1 that sends frames
// to its switch port and reads what the switch delivers.
type fakeVM struct {
	t    *testing.T
	conn *net.UDPConn
	to   *net.UDPAddr
}

func newFakeVM(t *testing.T) *fakeVM {
	c, err := net.ListenUDP("udp4", &net.UDPAddr{IP: net.IPv4(127, 0, 0, 1)})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	return &fakeVM{t: t, conn: c}
}

func (v *fakeVM) port() int { return v.conn.LocalAddr().(*net.UDPAddr).Port }

func (v *fakeVM) send(frame []byte) {
	if _, err := v.conn.WriteToUDP(frame, v.to); err != nil {
		v.t.Fatal(err)
	}
}

// recv returns the next frame delivered, or nil after wait.
func (v *fakeVM) recv(wait time.Duration) []byte {
	buf := make([]byte, 4096)
	v.conn.SetReadDeadline(time.Now().Add(wait))
	n, from, err := v.conn.ReadFromUDP(buf)
	if err != nil {
		return nil
	}
	if from.Port != v.to.Port {
		v.t.Errorf("frame from %v, want the switch port %v", from, v.to)
	}
	return buf[:n]
}

// roceFrame is a SEND_ONLY from 10.0.0.1 to 10.0.0.2 with psn.
func roceFrame(t *testing.T, psn uint32) []byte {
	f := wire.Frame{Src: netip.MustParseAddr("10.0.0.1"), Dst: netip.MustParseAddr("10.0.0.2"), TTL: 64,
		IPFlags: wire.IPv4FlagDF, SrcPort: 0xC000,
		BTH:     wire.BTHFields{Opcode: wire.OpRCSendOnly, PKey: 0xFFFF, DestQP: 0x11, PSN: wire.PSN(psn), AckReq: true},
		Payload: []byte("payload")}
	b := make([]byte, 256)
	n, err := wire.Encode(b, &f)
	if err != nil {
		t.Fatal(err)
	}
	return b[:n]
}

func vmSwitch(t *testing.T, cfg Config) (s *Switch, a, b *fakeVM) {
	a, b = newFakeVM(t), newFakeVM(t)
	da, db, err := VMLinks(lo, [2]int{}, [2]int{a.port(), b.port()})
	if err != nil {
		t.Fatal(err)
	}
	cfg.A, cfg.B = da, db
	s, err = New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	a.to = net.UDPAddrFromAddrPort(s.LocalAddr(0))
	b.to = net.UDPAddrFromAddrPort(s.LocalAddr(1))
	return s, a, b
}

// TestVMForwarding: frames from VM a reach VM b from b's switch port with
// the plan's verdicts carried out (a drop, a copy, a rewrite, a delay),
// a frame that is not RoCE passes untouched, a datagram from another
// address than the VM's is not forwarded, and the capture and the trace
// show each frame with its verdict.
func TestVMForwarding(t *testing.T) {
	plan, err := faults.Parse("drop psn=2\ndup psn=3\nrewrite set-psn=+100 psn=4\ndelay 30ms psn=5")
	if err != nil {
		t.Fatal(err)
	}
	pcap := filepath.Join(t.TempDir(), "s.pcapng")
	tr := &sim.Trace{}
	s, a, b := vmSwitch(t, Config{Plan: plan, CapturePath: pcap, Trace: tr})

	arp := append(bytes.Repeat([]byte{0xff}, 6), 0x02, 0, 0, 0, 0, 1, 0x08, 0x06, 'n', 'o', 't', ' ', 'R', 'o', 'C', 'E')
	a.send(arp)
	if got := b.recv(5 * time.Second); !bytes.Equal(got, arp) {
		t.Fatalf("non-RoCE frame: got %x, want %x untouched", got, arp)
	}
	// A datagram to a's port from an address other than VM a's.
	stranger := newFakeVM(t)
	stranger.to = a.to
	stranger.send(roceFrame(t, 99))

	for psn := uint32(1); psn <= 6; psn++ {
		a.send(roceFrame(t, psn))
	}
	var psns []uint32
	for {
		f := b.recv(500 * time.Millisecond)
		if f == nil {
			break
		}
		var p wire.Packet
		if err := p.DecodeHeaders(f); err != nil {
			t.Fatalf("delivered frame does not decode: %v", err)
		}
		psns = append(psns, uint32(p.BTH.PSN()))
	}
	// 1 passes, 2 dropped, 3 twice, 4 rewritten to 104, 5 after 6.
	want := []uint32{1, 3, 3, 104, 6, 5}
	if !slices.Equal(psns, want) {
		t.Errorf("delivered PSNs %v, want %v", psns, want)
	}
	st := s.Stats()
	if st.Frames != 7 || st.RoCE != 6 || st.Dropped != 1 || st.Duplicated != 1 || st.Altered != 1 || st.Delayed != 1 || st.Forwarded != 7 {
		t.Errorf("stats %+v", st)
	}
	if f := s.tr[0].Stats().Foreign; f != 1 {
		t.Errorf("port a counted %d foreign datagrams, want 1", f)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}

	r, err := capture.Open(pcap)
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	var comments []string
	for rec, err := range r.Records() {
		if err != nil {
			t.Fatalf("%s after %d frames: %v", pcap, len(comments), err)
		}
		comments = append(comments, strings.Join(rec.Comments, ";"))
	}
	if len(comments) != 8 {
		t.Fatalf("capture has %d frames, want 8: %q", len(comments), comments)
	}
	for _, w := range []string{"dropped by rule 1", "rule 2", "rule 3", "rule 4"} {
		if !strings.Contains(strings.Join(comments, "\n"), w) {
			t.Errorf("no capture comment names %q: %q", w, comments)
		}
	}
	var lad bytes.Buffer
	if err := ladder.Text(&lad, tr, ladder.Options{Nodes: s.Names()}); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(lad.String(), "rule 1") {
		t.Errorf("ladder does not show the drop:\n%s", lad.String())
	}
	// The rewrite's trace event says what the frame was before it (the
	// ladder finds the altered frame by it, as in the fabric's traces).
	var alter []string
	for _, e := range tr.Events() {
		if e.Kind == "frame-alter" {
			for _, f := range e.Fields {
				alter = append(alter, f.Key+"="+f.Value)
			}
		}
	}
	for _, w := range []string{"psn=104", "was_psn=4", "was_op=RC_SEND_ONLY", "rule=3"} {
		if !slices.Contains(alter, w) {
			t.Errorf("frame-alter event %q: no %s", alter, w)
		}
	}
}

// TestSwitchHold: the plan's clock stands still while held, does not
// count the hold after Release, and never goes back past a frame judged.
func TestSwitchHold(t *testing.T) {
	a, b := newFakeVM(t), newFakeVM(t)
	da, db, err := VMLinks(lo, [2]int{}, [2]int{a.port(), b.port()})
	if err != nil {
		t.Fatal(err)
	}
	s, err := New(Config{A: da, B: db})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	if _, err := os.Stat("/proc/self/schedstat"); err == nil {
		// The serve loops record their threads as they start.
		for deadline := time.Now().Add(10 * time.Second); len(s.Threads()) < 2 && time.Now().Before(deadline); {
			time.Sleep(time.Millisecond)
		}
		if th := s.Threads(); len(th) != 2 || th[0] == th[1] {
			t.Errorf("switch threads %v, want two", th)
		}
	}
	s.Hold(0)
	time.Sleep(20 * time.Millisecond)
	if p := s.PlanTime(); p != 0 {
		t.Fatalf("held at 0: plan time %v", p)
	}
	r0 := time.Now()
	s.Release()
	p := s.PlanTime()
	if e := sim.Time(time.Since(r0)); p < 0 || p > e {
		t.Fatalf("after Release: plan time %v, want within [0, %v]", p, e)
	}
	// A frame judged at plan time j: a later Hold at an earlier time
	// stops the clock at j, not before.
	s.mu.Lock()
	s.judged = sim.Time(time.Hour)
	s.mu.Unlock()
	s.Hold(sim.Time(time.Millisecond))
	if p := s.PlanTime(); p != sim.Time(time.Hour) {
		t.Errorf("Hold before the last judged frame: plan time %v, want 1h", p)
	}
	s.Release()
	if err := s.Reset(nil, nil, ""); err != nil {
		t.Fatal(err)
	}
	if p := s.PlanTime(); p > sim.Time(time.Hour) {
		t.Errorf("after Reset: plan time %v", p)
	}
}

// TestUDPEndpoints: two model nodes on UDP port 4791 (127.0.0.5 and
// 127.0.0.6) each see the other at a stand-in address of the switch
// (127.0.0.7 and 127.0.0.8). The plan drops the SEND's first
// transmission and corrupts its second (B drops it for its ICRC: the
// switch's address rewrite keeps the error), and the third delivers it.
func TestUDPEndpoints(t *testing.T) {
	addr := func(s string) netip.Addr { return netip.MustParseAddr(s) }
	ea, eb, faceA, faceB := addr("127.0.0.5"), addr("127.0.0.6"), addr("127.0.0.7"), addr("127.0.0.8")
	plan, err := faults.Parse("drop op=RC_SEND_ONLY tx=1\ncorrupt op=RC_SEND_ONLY tx=2")
	if err != nil {
		t.Fatal(err)
	}
	var tr [2]realnet.Transport
	for i, a := range []netip.Addr{faceA, faceB} {
		u, err := realnet.NewUDP(realnet.UDPConfig{Addr: netip.AddrPortFrom(a, 0), MAC: realnet.StandInMAC(a),
			RecoverIPv4ID: true, KeepICRCError: true})
		if err != nil {
			t.Fatal(err)
		}
		tr[i] = u
	}
	s, err := New(Config{A: tr[0], B: tr[1], Endpoints: &Endpoints{A: ea, B: eb}, Plan: plan})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()

	var nodes [2]*realnet.Node
	for i, a := range []netip.Addr{ea, eb} {
		n, err := realnet.NewNode(realnet.NodeConfig{Name: string(rune('a' + i)), Addr: a})
		if err != nil {
			t.Fatal(err)
		}
		defer n.Close()
		nodes[i] = n
	}
	// Each reaches the other's QP at its stand-in address.
	sendThrough(t, nodes, [2]netip.Addr{faceA, faceB}, 1000)
	if h1, h2 := s.Hits(1), s.Hits(2); h1 != 1 || h2 != 1 {
		t.Errorf("rule hits %d, %d; want 1, 1", h1, h2)
	}
	if e, err := nodes[1].RxErrors(); err != nil || e != 1 {
		t.Errorf("B counted %d receive errors (%v), want 1: the corrupted copy", e, err)
	}
	if e, err := nodes[0].RxErrors(); err != nil || e != 0 {
		t.Errorf("A counted %d receive errors (%v), want 0", e, err)
	}
	if st := s.Stats(); st.Foreign != 0 || st.SendErrors != 0 {
		t.Errorf("switch stats %+v", st)
	}
}

// sendThrough connects an RC QP on each node to the other's, A reaching
// B's at peer[0] and B A's at peer[1], and sends size bytes from A to B:
// both completions succeed and B holds A's bytes.
func sendThrough(t *testing.T, nodes [2]*realnet.Node, peer [2]netip.Addr, size int) {
	t.Helper()
	var rcs [2]*realnet.RC
	for i, n := range nodes {
		var err error
		if rcs[i], err = n.NewRC(4096, func(b []byte) {
			for k := range b {
				b[k] = byte(k*7 + i)
			}
		}, uint32(100*(i+1))); err != nil {
			t.Fatal(err)
		}
	}
	for i := range 2 {
		e := rcs[1-i].Local()
		e.Addr = peer[i]
		if err := rcs[i].Connect(e); err != nil {
			t.Fatal(err)
		}
	}
	if err := rcs[1].PostRecv(1, 0, size); err != nil {
		t.Fatal(err)
	}
	if err := rcs[0].Post(nic.SendWR{WRID: 2, Opcode: nic.WRSend}, 0, size); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	for i, rc := range []*realnet.RC{rcs[1], rcs[0]} {
		wc, err := rc.Wait(ctx)
		if err != nil || wc.Status != nic.WCSuccess {
			t.Fatalf("completion %d: %+v, %v; nodes %+v %+v", i, wc, err, nodes[0].Stats(), nodes[1].Stats())
		}
	}
	sent, err := rcs[0].Bytes(0, size)
	if err != nil {
		t.Fatal(err)
	}
	got, err := rcs[1].Bytes(0, size)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(sent, got) {
		t.Error("B received other bytes than A sent")
	}
}
