package conformance

import (
	"bytes"
	"context"
	"encoding/binary"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/rocesim/rocesim/nic"
	"github.com/rocesim/rocesim/sim"
	"github.com/rocesim/rocesim/wire"
	"github.com/rocesim/rocesim/wire/capture"
)

// These tests put two model hosts back to back on 127.0.0.1, each the
// other's "VM": the same sockets, ARP and real-time timers a QEMU VM's
// link uses, without QEMU.

// mhMRLen is the size of each side's memory region.
const mhMRLen = 64 << 10

// mhAccess is every access right, for the MR and the QP.
const mhAccess = nic.AccessLocalWrite | nic.AccessRemoteWrite | nic.AccessRemoteRead | nic.AccessRemoteAtomic

// mhEnd is one side of an RC connection between two model hosts. The
// resources are touched only inside Do; MR addresses and keys are
// read-only after creation.
type mhEnd struct {
	h   *ModelHost
	mr  *nic.MR
	cq  *nic.CQ
	qp  *nic.QP
	qpn uint32
	psn uint32
}

// newModelHostPair starts hosts A (10.0.0.1) and B (10.0.0.2) sending to
// each other; cfgA adds to A's configuration. Both resolve each other
// by ARP before it returns.
func newModelHostPair(t *testing.T, cfgA ModelHostConfig) (a, b *ModelHost) {
	t.Helper()
	ports, err := FreeUDPPorts(2)
	if err != nil {
		t.Fatal(err)
	}
	cfgA.Name, cfgA.IP, cfgA.PeerIP, cfgA.Port, cfgA.PeerPort = "a", "10.0.0.1", "10.0.0.2", ports[0], ports[1]
	if a, err = NewModelHost(cfgA); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := a.Close(); err != nil {
			t.Error(err)
		}
	})
	b, err = NewModelHost(ModelHostConfig{Name: "b", IP: "10.0.0.2", PeerIP: "10.0.0.1", Port: ports[1], PeerPort: ports[0]})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := b.Close(); err != nil {
			t.Error(err)
		}
	})
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	errc := make(chan error, 2)
	for _, h := range []*ModelHost{a, b} {
		go func() { errc <- h.Resolve(ctx) }()
	}
	for range 2 {
		if err := <-errc; err != nil {
			t.Fatal(err)
		}
	}
	return a, b
}

// mhSetup creates a PD, an MR filled with a pattern, a CQ and an RC QP
// on h.
func mhSetup(t *testing.T, h *ModelHost, seed byte, psn uint32) *mhEnd {
	t.Helper()
	e := &mhEnd{h: h, psn: psn}
	err := h.Do(func(now sim.Time, dev *nic.Device) error {
		pd, err := dev.AllocPD()
		if err != nil {
			return err
		}
		buf := make([]byte, mhMRLen)
		for i := range buf {
			buf[i] = seed + byte(i*7)
		}
		if e.mr, err = dev.RegMR(pd, buf, mhAccess); err != nil {
			return err
		}
		if e.cq, err = dev.CreateCQ(64, nil, 0); err != nil {
			return err
		}
		e.qp, err = dev.CreateQP(pd, nic.QPInitAttr{SendCQ: e.cq, RecvCQ: e.cq, Type: nic.QPTypeRC,
			Cap: nic.QPCap{MaxSendWR: 32, MaxRecvWR: 32, MaxSendSGE: 1, MaxRecvSGE: 1}})
		if err != nil {
			return err
		}
		e.qpn = e.qp.Num()
		return nil
	})
	if err != nil {
		t.Fatalf("%s: setup: %v", h.cfg.Name, err)
	}
	return e
}

// mhConnect takes e's QP through INIT, RTR and RTS to peer's, with the
// attributes ibv_rc_pingpong's peers exchange.
func mhConnect(t *testing.T, e, peer *mhEnd) {
	t.Helper()
	steps := []struct {
		attr nic.QPAttr
		mask nic.QPAttrMask
	}{
		{nic.QPAttr{QPState: nic.QPStateInit, PKeyIndex: 0, PortNum: 1, QPAccessFlags: mhAccess},
			nic.QPAttrState | nic.QPAttrPKeyIndex | nic.QPAttrPort | nic.QPAttrAccessFlags},
		{nic.QPAttr{QPState: nic.QPStateRTR, PathMTU: nic.MTU1024, DestQPNum: peer.qpn, RQPSN: peer.psn,
			AHAttr:          nic.AHAttr{IsGlobal: true, PortNum: 1, GRH: nic.GRH{DGID: peer.h.GID(), HopLimit: 64}},
			MaxDestRdAtomic: 16, MinRNRTimer: 12},
			nic.QPAttrState | nic.QPAttrAV | nic.QPAttrPathMTU | nic.QPAttrDestQPN | nic.QPAttrRQPSN |
				nic.QPAttrMaxDestRdAtomic | nic.QPAttrMinRNRTimer},
		{nic.QPAttr{QPState: nic.QPStateRTS, SQPSN: e.psn, Timeout: 14, RetryCnt: 7, RNRRetry: 7, MaxRdAtomic: 16},
			nic.QPAttrState | nic.QPAttrSQPSN | nic.QPAttrTimeout | nic.QPAttrRetryCnt | nic.QPAttrRNRRetry |
				nic.QPAttrMaxQPRdAtomic},
	}
	for _, s := range steps {
		err := e.h.Do(func(now sim.Time, dev *nic.Device) error { return dev.ModifyQP(now, e.qp, &s.attr, s.mask) })
		if err != nil {
			t.Fatalf("%s: modify_qp to %s: %v", e.h.cfg.Name, s.attr.QPState, err)
		}
	}
}

// mhPoll polls e's CQ until n completions have arrived, or fails after
// the timeout.
func mhPoll(t *testing.T, e *mhEnd, n int, timeout time.Duration) []nic.WC {
	t.Helper()
	var got []nic.WC
	deadline := time.Now().Add(timeout)
	for len(got) < n {
		err := e.h.Do(func(now sim.Time, dev *nic.Device) error {
			var wcs [8]nic.WC
			k := e.cq.Poll(wcs[:])
			got = append(got, wcs[:k]...)
			return nil
		})
		if err != nil {
			t.Fatal(err)
		}
		if len(got) >= n {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s: %d of %d completions after %v: %+v (stats %+v)", e.h.cfg.Name, len(got), n, timeout, got, e.h.Stats())
		}
		time.Sleep(time.Millisecond)
	}
	return got
}

// mhMem returns a copy of e's MR bytes [off, off+n).
func mhMem(t *testing.T, e *mhEnd, off, n int) []byte {
	t.Helper()
	var b []byte
	if err := e.h.Do(func(sim.Time, *nic.Device) error {
		b = append(b, e.mr.Bytes()[off:off+n]...)
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	return b
}

// mhPost posts one send work request on e.
func mhPost(t *testing.T, e *mhEnd, wr nic.SendWR) {
	t.Helper()
	wr.Flags |= nic.SendSignaled
	if err := e.h.Do(func(now sim.Time, dev *nic.Device) error {
		_, err := dev.PostSend(now, e.qp, []nic.SendWR{wr})
		return err
	}); err != nil {
		t.Fatalf("%s: post_send %s: %v", e.h.cfg.Name, wr.Opcode, err)
	}
}

// mhPostRecv posts one receive of n bytes at off in e's MR.
func mhPostRecv(t *testing.T, e *mhEnd, wrid uint64, off, n int) {
	t.Helper()
	if err := e.h.Do(func(now sim.Time, dev *nic.Device) error {
		_, err := dev.PostRecv(now, e.qp, []nic.RecvWR{{WRID: wrid,
			SGList: []nic.SGE{{Addr: e.mr.Addr + uint64(off), Length: uint32(n), LKey: e.mr.LKey}}}})
		return err
	}); err != nil {
		t.Fatalf("%s: post_recv: %v", e.h.cfg.Name, err)
	}
}

// mhAnyLen stands for any byte_len: a SEND's or WRITE's send-side
// byte_len depends on the profile (nic's package doc).
const mhAnyLen = ^uint32(0)

// mhCheckWC fails unless wc is a success of the opcode and length given.
func mhCheckWC(t *testing.T, who string, wc nic.WC, wrid uint64, op nic.WCOpcode, n uint32) {
	t.Helper()
	if wc.Status != nic.WCSuccess || wc.WRID != wrid || wc.Opcode != op || (n != mhAnyLen && wc.ByteLen != n) {
		t.Fatalf("%s: completion %+v, want wr_id %d opcode %d byte_len %d success", who, wc, wrid, op, n)
	}
}

// TestModelHostRC runs every RC operation between two model hosts over
// real UDP sockets: SEND into a posted receive, RDMA WRITE, RDMA READ,
// FETCH_AND_ADD and CMP_AND_SWP (IBTA vol. 1 §9.4), checking the
// completions on both sides and the memory they changed.
func TestModelHostRC(t *testing.T) {
	ha, hb := newModelHostPair(t, ModelHostConfig{})
	a, b := mhSetup(t, ha, 1, 0x1000), mhSetup(t, hb, 2, 0x2000)
	mhConnect(t, a, b)
	mhConnect(t, b, a)
	const wait = 3 * time.Second

	// SEND 5000 bytes (5 packets at path MTU 1024) into a receive at 1000.
	mhPostRecv(t, b, 100, 1000, 8192)
	mhPost(t, a, nic.SendWR{WRID: 1, Opcode: nic.WRSend,
		SGList: []nic.SGE{{Addr: a.mr.Addr, Length: 5000, LKey: a.mr.LKey}}})
	mhCheckWC(t, "a: SEND", mhPoll(t, a, 1, wait)[0], 1, nic.WCSend, mhAnyLen)
	mhCheckWC(t, "b: RECV", mhPoll(t, b, 1, wait)[0], 100, nic.WCRecv, 5000)
	if got, want := mhMem(t, b, 1000, 5000), mhMem(t, a, 0, 5000); !bytes.Equal(got, want) {
		t.Fatal("b: the SEND's bytes differ from a's")
	}

	// RDMA WRITE 3×1024+1 bytes from a's 8192 to b's 16384.
	const wlen = 3*1024 + 1
	mhPost(t, a, nic.SendWR{WRID: 2, Opcode: nic.WRRDMAWrite, RemoteAddr: b.mr.Addr + 16384, RKey: b.mr.RKey,
		SGList: []nic.SGE{{Addr: a.mr.Addr + 8192, Length: wlen, LKey: a.mr.LKey}}})
	mhCheckWC(t, "a: WRITE", mhPoll(t, a, 1, wait)[0], 2, nic.WCRDMAWrite, mhAnyLen)
	if got, want := mhMem(t, b, 16384, wlen), mhMem(t, a, 8192, wlen); !bytes.Equal(got, want) {
		t.Fatal("b: the WRITE's bytes differ from a's")
	}

	// RDMA READ 2048 bytes of b's 24576 into a's 32768.
	mhPost(t, a, nic.SendWR{WRID: 3, Opcode: nic.WRRDMARead, RemoteAddr: b.mr.Addr + 24576, RKey: b.mr.RKey,
		SGList: []nic.SGE{{Addr: a.mr.Addr + 32768, Length: 2048, LKey: a.mr.LKey}}})
	mhCheckWC(t, "a: READ", mhPoll(t, a, 1, wait)[0], 3, nic.WCRDMARead, 2048)
	if got, want := mhMem(t, a, 32768, 2048), mhMem(t, b, 24576, 2048); !bytes.Equal(got, want) {
		t.Fatal("a: the READ's bytes differ from b's")
	}

	// Atomics on b's 8 bytes at 40960, which hold 1000 (host order).
	const target = 40960
	if err := hb.Do(func(sim.Time, *nic.Device) error {
		binary.LittleEndian.PutUint64(b.mr.Bytes()[target:], 1000)
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	mhPost(t, a, nic.SendWR{WRID: 4, Opcode: nic.WRAtomicFetchAndAdd, RemoteAddr: b.mr.Addr + target, RKey: b.mr.RKey,
		CompareAdd: 23, SGList: []nic.SGE{{Addr: a.mr.Addr + 48000, Length: 8, LKey: a.mr.LKey}}})
	mhCheckWC(t, "a: FETCH_ADD", mhPoll(t, a, 1, wait)[0], 4, nic.WCFetchAdd, 8)
	if got := binary.LittleEndian.Uint64(mhMem(t, a, 48000, 8)); got != 1000 {
		t.Fatalf("a: FETCH_ADD returned %d, want 1000", got)
	}
	mhPost(t, a, nic.SendWR{WRID: 5, Opcode: nic.WRAtomicCmpAndSwp, RemoteAddr: b.mr.Addr + target, RKey: b.mr.RKey,
		CompareAdd: 1023, Swap: 0xDEADBEEF, SGList: []nic.SGE{{Addr: a.mr.Addr + 48008, Length: 8, LKey: a.mr.LKey}}})
	mhCheckWC(t, "a: CMP_SWP", mhPoll(t, a, 1, wait)[0], 5, nic.WCCompSwap, 8)
	if got := binary.LittleEndian.Uint64(mhMem(t, a, 48008, 8)); got != 1023 {
		t.Fatalf("a: CMP_SWP returned %d, want 1023", got)
	}
	if got := binary.LittleEndian.Uint64(mhMem(t, b, target, 8)); got != 0xDEADBEEF {
		t.Fatalf("b: after CMP_SWP the target holds %#x, want 0xdeadbeef", got)
	}

	sa, sb := ha.Stats(), hb.Stats()
	if sa.ARPAnswered+sb.ARPAnswered == 0 || sa.RoCEOut == 0 || sb.RoCEIn != sa.RoCEOut ||
		sa.Malformed+sb.Malformed != 0 || sa.SendErrors+sb.SendErrors != 0 {
		t.Fatalf("stats: a %+v, b %+v", sa, sb)
	}
}

// TestModelHostFlipICRC has a deliberately wrong model send: every frame
// of a's carries a bad ICRC, which b must drop and count (IBTA vol. 1
// Annex A17.3.3: a packet whose ICRC does not verify is discarded), so
// the receive b posted never completes.
func TestModelHostFlipICRC(t *testing.T) {
	ha, hb := newModelHostPair(t, ModelHostConfig{FlipICRC: true})
	a, b := mhSetup(t, ha, 1, 0x1000), mhSetup(t, hb, 2, 0x2000)
	mhConnect(t, a, b)
	mhConnect(t, b, a)
	mhPostRecv(t, b, 100, 0, 4096)
	mhPost(t, a, nic.SendWR{WRID: 1, Opcode: nic.WRSend,
		SGList: []nic.SGE{{Addr: a.mr.Addr, Length: 100, LKey: a.mr.LKey}}})

	deadline := time.Now().Add(300 * time.Millisecond)
	var icrc uint64
	for time.Now().Before(deadline) {
		if err := hb.Do(func(now sim.Time, dev *nic.Device) error {
			icrc = dev.RxErrors(wire.CodeICRC)
			var wcs [1]nic.WC
			if b.cq.Poll(wcs[:]) > 0 {
				t.Errorf("b: a receive completed from frames with a bad ICRC: %+v", wcs[0])
			}
			return nil
		}); err != nil {
			t.Fatal(err)
		}
		time.Sleep(5 * time.Millisecond)
	}
	if icrc == 0 {
		t.Fatalf("b counted no ICRC errors (stats a %+v, b %+v)", ha.Stats(), hb.Stats())
	}
	if s := hb.Stats(); s.Malformed != icrc {
		t.Fatalf("b: Stats().Malformed = %d, device counts %d bad ICRCs", s.Malformed, icrc)
	}
}

// TestModelHostCapture checks the capture a model host writes: both
// directions as named interfaces, the ARP exchange, and RoCE v2 frames
// whose comments are the device's notes.
func TestModelHostCapture(t *testing.T) {
	path := filepath.Join(t.TempDir(), "a.pcapng")
	ha, hb := newModelHostPair(t, ModelHostConfig{CapturePath: path})
	a, b := mhSetup(t, ha, 1, 0x1000), mhSetup(t, hb, 2, 0x2000)
	mhConnect(t, a, b)
	mhConnect(t, b, a)
	mhPostRecv(t, b, 100, 0, 4096)
	mhPost(t, a, nic.SendWR{WRID: 7, Opcode: nic.WRSend,
		SGList: []nic.SGE{{Addr: a.mr.Addr, Length: 2000, LKey: a.mr.LKey}}})
	mhPoll(t, a, 1, 3*time.Second)
	if err := ha.Close(); err != nil {
		t.Fatal(err)
	}

	r, err := capture.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	var p wire.Packet
	var arp, roce [2]int // by interface: 0 sent, 1 received
	var notes []string
	last := int64(-1)
	for rec, err := range r.Records() {
		if err != nil {
			t.Fatalf("%s: %v", path, err)
		}
		if rec.Interface > 1 || rec.Time < last {
			t.Fatalf("record on interface %d at %d ns (previous at %d)", rec.Interface, rec.Time, last)
		}
		last = rec.Time
		switch {
		case wire.Ethernet(rec.Data).EtherType() == etherTypeARP:
			arp[rec.Interface]++
		case p.Decode(rec.Data) == nil:
			roce[rec.Interface]++
			if rec.Interface == 0 {
				notes = append(notes, strings.Join(rec.Comments, "; "))
			}
		}
	}
	for i, want := range []string{"a->peer", "peer->a"} {
		if ifc, ok := r.Interface(i); !ok || ifc.Name != want {
			t.Errorf("interface %d is %+v, want %q", i, ifc, want)
		}
	}
	if arp[0] == 0 || arp[1] == 0 {
		t.Errorf("ARP frames sent %d, received %d: want both", arp[0], arp[1])
	}
	// 2000 bytes at path MTU 1024: SEND_FIRST and SEND_LAST out, their
	// ACK(s) back.
	if roce[0] != 2 || roce[1] == 0 {
		t.Errorf("RoCE v2 frames sent %d (want 2), received %d (want some)", roce[0], roce[1])
	}
	for _, n := range notes {
		if !strings.Contains(n, "wr 7 SEND") {
			t.Errorf("sent frame's comment %q does not name wr 7's SEND", n)
		}
	}
}
