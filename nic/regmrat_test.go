package nic_test

import (
	"bytes"
	"errors"
	"strings"
	"syscall"
	"testing"

	"github.com/rocesim/rocesim/nic"
)

// TestRegMRAt: an MR registered at a caller-given address takes RDMA
// WRITEs and READs to that address (the RETH carries the caller's VA, as
// a program's own pointer on real rxe), refuses one just before it, and
// a range that wraps is EINVAL.
func TestRegMRAt(t *testing.T) {
	h := newPair(t, args{})
	const at = 0x7f12_3456_7000 // a heap address of another process
	buf := make([]byte, 8192)
	access := nic.AccessLocalWrite | nic.AccessRemoteWrite | nic.AccessRemoteRead
	mr, err := h.b.dev.RegMRAt(h.b.pd, buf, at, access)
	if err != nil {
		t.Fatal(err)
	}
	if mr.Addr != at {
		t.Fatalf("MR at %#x, want %#x", mr.Addr, at)
	}
	next, err := h.b.dev.RegMR(h.b.pd, make([]byte, 64), access)
	if err != nil || next.Addr == at || next.Addr < h.b.mr.Addr {
		t.Fatalf("the next RegMR: %v at %#x: want a simulated address past the first MR's %#x", err, next.Addr, h.b.mr.Addr)
	}
	post := func(id uint64, op nic.WROpcode, remote uint64) {
		t.Helper()
		wr := nic.SendWR{WRID: id, Opcode: op, Flags: nic.SendSignaled, RemoteAddr: remote, RKey: mr.RKey,
			SGList: []nic.SGE{{Addr: h.a.mr.Addr, Length: 3000, LKey: h.a.mr.LKey}}}
		if _, err := h.a.dev.PostSend(h.now, h.a.qp, []nic.SendWR{wr}); err != nil {
			t.Fatal(err)
		}
		h.deliver(t, args{})
	}
	post(1, nic.WRRDMAWrite, at+100)
	if want := h.a.mr.Bytes()[:3000]; !bytes.Equal(buf[100:3100], want) {
		t.Errorf("the WRITE did not land at the given address + 100")
	}
	copy(buf[5000:], bytes.Repeat([]byte{0xab}, 3000))
	post(2, nic.WRRDMARead, at+5000)
	if !bytes.Equal(h.a.mr.Bytes()[:3000], buf[5000:8000]) {
		t.Errorf("the READ did not fetch from the given address + 5000")
	}
	if got := h.poll(h.a); !strings.HasPrefix(got, "wc id=1 IBV_WC_RDMA_WRITE success len=3000\nwc id=2 IBV_WC_RDMA_READ success len=3000\n") {
		t.Errorf("completions:\n%s", got)
	}
	post(3, nic.WRRDMAWrite, at-8)
	if got := h.poll(h.a); !strings.HasPrefix(got, "wc id=3 IBV_WC_RDMA_WRITE remote access error") {
		t.Errorf("a WRITE before the MR: %s", got)
	}
	if _, err := h.b.dev.RegMRAt(h.b.pd, buf, ^uint64(0)-100, access); !errors.Is(err, syscall.EINVAL) {
		t.Errorf("a range that wraps: %v, want EINVAL", err)
	}
}
