package nic

import (
	"bytes"
	"errors"
	"net/netip"
	"syscall"
	"testing"

	"github.com/rocesim/rocesim/wire"
	"github.com/rocesim/rocesim/wire/capture"
)

// capturedMADFrames returns the QP1 frames of a real rxe CM capture.
func capturedMADFrames(t *testing.T, name string) [][]byte {
	t.Helper()
	r, err := capture.Open("../wire/testdata/cm/" + name)
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	var out [][]byte
	var p wire.Packet
	for rec, err := range r.Records() {
		if err != nil {
			t.Fatal(err)
		}
		if p.Decode(rec.Data) == nil && p.BTH.DestQP() == wire.GSIQPN {
			out = append(out, bytes.Clone(rec.Data))
		}
	}
	return out
}

// TestSendMADAsRxe: the device's MAD frame carries what real rxe's did
// (wire/testdata/cm/rxe_cm_rping.pcapng, the client's REQ): the MAC and
// IP of a host 10.0.0.2 with the MAC QEMU gave it, sent to 10.0.0.1.
// Only the IP ID (a per-host counter) and so the ICRC may differ.
func TestSendMADAsRxe(t *testing.T) {
	frames := capturedMADFrames(t, "rxe_cm_rping.pcapng")
	want := frames[0] // the REQ, the client's first MAD (PSN 0)
	var p wire.Packet
	if err := p.Decode(want); err != nil {
		t.Fatal(err)
	}
	mac, peerMAC := wire.MAC{0x52, 0x54, 0, 0, 0, 2}, wire.MAC{0x52, 0x54, 0, 0, 0, 1}
	d := New(Config{Name: "rxe0", MAC: mac, IPv4: netip.MustParseAddr("10.0.0.2")})
	d.AddNeighbour(netip.MustParseAddr("10.0.0.1"), peerMAC)
	d.ipID = p.IPv4.ID()
	if err := d.SendMAD(0, netip.MustParseAddr("::ffff:10.0.0.1"), p.Payload); err != nil {
		t.Fatal(err)
	}
	rd := d.Ready()
	if len(rd.Frames) != 1 {
		t.Fatalf("%d frames, want 1", len(rd.Frames))
	}
	if got := rd.Frames[0].Bytes; !bytes.Equal(got, want) {
		t.Errorf("MAD frame\n got %x\nwant %x", got, want)
	}
	if n := d.Counters()[CounterSentPkts]; n != 1 {
		t.Errorf("sent_pkts %d, want 1", n)
	}
	if err := d.SendMAD(0, netip.MustParseAddr("10.0.0.1"), p.Payload[:100]); !errors.Is(err, syscall.EINVAL) {
		t.Errorf("a 100-byte MAD: %v, want EINVAL", err)
	}
	if err := d.SendMAD(0, netip.MustParseAddr("10.0.0.9"), p.Payload); !errors.Is(err, syscall.EINVAL) {
		t.Errorf("a MAD to no neighbour: %v, want EINVAL", err)
	}
}

// TestMADFrameSendsNothing: MADFrame builds, byte for byte, the frame
// SendMAD then sends (real rxe's REQ again), and leaves the device as it
// was: QP1's PSN, the IP ID and the counters unmoved, nothing to send.
// A bad MAD or an unknown destination is EINVAL, as for SendMAD.
func TestMADFrameSendsNothing(t *testing.T) {
	want := capturedMADFrames(t, "rxe_cm_rping.pcapng")[0]
	var p wire.Packet
	if err := p.Decode(want); err != nil {
		t.Fatal(err)
	}
	d := New(Config{Name: "rxe0", MAC: wire.MAC{0x52, 0x54, 0, 0, 0, 2}, IPv4: netip.MustParseAddr("10.0.0.2")})
	peer := netip.MustParseAddr("10.0.0.1")
	d.AddNeighbour(peer, wire.MAC{0x52, 0x54, 0, 0, 0, 1})
	d.ipID = p.IPv4.ID()
	prefix := []byte("kept")
	for range 2 { // twice: the first left nothing behind
		got, note, err := d.MADFrame(prefix, peer, p.Payload)
		if err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(got[:4], prefix) || !bytes.Equal(got[4:], want) {
			t.Errorf("MADFrame\n got %x\nwant kept+%x", got, want)
		}
		if note != "MAD on QP1: CM REQ (connect request)" {
			t.Errorf("note %q, want the CM REQ's", note)
		}
	}
	if d.HasReady() || d.Counters()[CounterSentPkts] != 0 || d.gsi.req.psn != 0 || d.ipID != p.IPv4.ID() {
		t.Errorf("MADFrame changed the device: ready %v, sent %d, PSN %d, IP ID %d", d.HasReady(),
			d.Counters()[CounterSentPkts], d.gsi.req.psn, d.ipID)
	}
	if err := d.SendMAD(0, peer, p.Payload); err != nil {
		t.Fatal(err)
	}
	if rd := d.Ready(); len(rd.Frames) != 1 || !bytes.Equal(rd.Frames[0].Bytes, want) {
		t.Errorf("SendMAD after MADFrame sent %d frames, not the same one", len(rd.Frames))
	}
	for _, c := range []struct {
		dst netip.Addr
		mad []byte
	}{{peer, p.Payload[:255]}, {netip.MustParseAddr("10.0.0.9"), p.Payload}} {
		if _, _, err := d.MADFrame(nil, c.dst, c.mad); !errors.Is(err, syscall.EINVAL) {
			t.Errorf("MADFrame to %v, %d bytes: %v, want EINVAL", c.dst, len(c.mad), err)
		}
	}
}

// TestReceiveMAD: the server's REP reaches the client's Ready.MADs; a
// MAD with another Q_Key or a short payload is dropped and counted.
func TestReceiveMAD(t *testing.T) {
	frames := capturedMADFrames(t, "rxe_cm_rping.pcapng")
	rep := frames[1]
	d := New(Config{Name: "rxe0", MAC: wire.MAC{0x52, 0x54, 0, 0, 0, 2}, IPv4: netip.MustParseAddr("10.0.0.2")})
	d.Receive(0, rep)
	rd := d.Ready()
	if len(rd.MADs) != 1 {
		t.Fatalf("%d MADs, want 1 (drops %v)", len(rd.MADs), d.rxDrops)
	}
	var p wire.Packet
	if err := p.Decode(rep); err != nil {
		t.Fatal(err)
	}
	in := rd.MADs[0]
	if in.Src != netip.MustParseAddr("10.0.0.1") || in.SrcQP != 1 || !bytes.Equal(in.MAD[:], p.Payload) {
		t.Errorf("MAD in: src %v srcQP %d, payload equal %v", in.Src, in.SrcQP, bytes.Equal(in.MAD[:], p.Payload))
	}
	if n := d.Counters()[CounterRcvdPkts]; n != 1 {
		t.Errorf("rcvd_pkts %d, want 1", n)
	}

	bad := bytes.Clone(rep)
	p.Decode(bad)
	p.DETH[0] ^= 0x01 // another Q_Key
	p.UpdateICRC()
	d.Receive(0, bad)
	if got := d.RxDrops(DropQKey); got != 1 {
		t.Errorf("bad-qkey drops %d, want 1", got)
	}
	if rd := d.Ready(); len(rd.MADs) != 0 {
		t.Errorf("a MAD with the wrong Q_Key was delivered")
	}
}

// TestMADPathAllocatesNothing: receiving a MAD and sending one allocate
// nothing once the outbox has grown (the per-packet path's rule).
func TestMADPathAllocatesNothing(t *testing.T) {
	frames := capturedMADFrames(t, "rxe_cm_rping.pcapng")
	d := New(Config{Name: "rxe0", MAC: wire.MAC{0x52, 0x54, 0, 0, 0, 2}, IPv4: netip.MustParseAddr("10.0.0.2")})
	peer := netip.MustParseAddr("10.0.0.1")
	d.AddNeighbour(peer, wire.MAC{0x52, 0x54, 0, 0, 0, 1})
	var p wire.Packet
	if err := p.Decode(frames[0]); err != nil {
		t.Fatal(err)
	}
	mad := bytes.Clone(p.Payload)
	step := func() {
		d.Receive(0, frames[1])
		if err := d.SendMAD(0, peer, mad); err != nil {
			t.Fatal(err)
		}
		d.TxDone(0)
		d.Ready()
	}
	step()
	if n := testing.AllocsPerRun(100, step); n != 0 {
		t.Errorf("%v allocations per MAD in and out, want 0", n)
	}
}
