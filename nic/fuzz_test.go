package nic_test

import (
	"bytes"
	"encoding/binary"
	"flag"
	"fmt"
	"net/netip"
	"os"
	"path/filepath"
	"testing"

	"github.com/rocesim/rocesim/nic"
	"github.com/rocesim/rocesim/sim"
	"github.com/rocesim/rocesim/wire"
)

var writeCorpus = flag.Bool("corpus", false, "rewrite the committed FuzzReceive seed corpus from the wire/testdata captures")

// FuzzReceive feeds the rig (live RC, UC and UD QPs, an RC QP in INIT and
// one in RESET, MRs of known contents, a WRITE, a READ and an atomic
// outstanding on the RC QP) a sequence of frames, each either raw bytes
// or a frame the target builds from fuzz input with a correct ICRC, so
// the fuzzer gets past the ICRC check (see fuzzFrame for the format).
//
// Invariants, after every frame: no panic; the frame is accounted for
// exactly once, in RxErrors, RxDrops or rcvd_pkts; every frame the device
// sends decodes with a valid ICRC and goes to the peer; the MRs no QP may
// write remotely (REMOTE_READ only, LOCAL_WRITE only, another PD's) are
// unchanged byte for byte; QP states are legal (RC, UC and UD: RTS or
// ERR, the INIT and RESET QPs unchanged).
func FuzzReceive(f *testing.F) {
	f.Add([]byte{})
	f.Fuzz(func(t *testing.T, data []byte) {
		r := newRig(t, rigOptions{outstanding: true})
		// The UD QP is in a group its host has joined: frames to the
		// group, to the multicast QPN or any other, reach it.
		if err := r.dev.JoinGroup(rigGroup); err != nil {
			t.Fatal(err)
		}
		if err := r.dev.AttachMcast(r.ud, rigGroup, 0); err != nil {
			t.Fatal(err)
		}
		var (
			now   sim.Time
			frame []byte
			p     wire.Packet
			wcs   [16]nic.WC
			buf   = make([]byte, 1<<14)
		)
		for n := 0; len(data) > 0 && n < 64; n++ {
			frame, data = fuzzFrame(r, data, buf)
			before := r.accounted()
			now = now.Add(sim.Microsecond)
			r.dev.Receive(now, frame)
			if got := r.accounted() - before; got != 1 {
				t.Fatalf("frame %d accounted %d times (RxErrors+RxDrops+rcvd_pkts)\n% x", n, got, frame)
			}
			if d := r.dev.NextDeadline(); d != sim.Never && n%8 == 7 {
				now = max(now, d)
				r.dev.Advance(now)
			}
			for _, out := range r.dev.Ready().Frames {
				if err := p.Decode(out.Bytes); err != nil {
					t.Fatalf("the device sent a frame that does not decode: %v\n% x", err, out.Bytes)
				}
				if p.Dst() != rigPeerIP {
					t.Fatalf("the device sent a frame to %v", p.Dst())
				}
			}
			for r.cq.Poll(wcs[:]) > 0 {
			}
			r.checkInvariants(t)
		}
	})
}

// accounted is the sum of the counts a received frame lands in.
func (r *rig) accounted() uint64 {
	n := r.dev.Counters()[nic.CounterRcvdPkts]
	for c := range wire.NumErrorCodes {
		n += r.dev.RxErrors(wire.ErrorCode(c))
	}
	for why := range nic.NumRxDrops {
		n += r.dev.RxDrops(nic.RxDrop(why))
	}
	return n
}

// checkInvariants checks memory and QP states.
func (r *rig) checkInvariants(t *testing.T) {
	t.Helper()
	for i, mr := range r.mrs {
		if mr == r.rw || mr == r.recv {
			continue // granted: remote writes, receives, READ/atomic results
		}
		if !bytes.Equal(mr.Bytes(), r.before[i]) {
			t.Fatalf("MR %d (access %v) changed", i, mr.Access)
		}
	}
	// A datagram longer than the UD QP's receive puts it in ERR too, as
	// in rxe 6.1 (a malformed WQE, class A).
	for _, qp := range []*nic.QP{r.rc, r.uc, r.ud} {
		if s := qp.State(); s != nic.QPStateRTS && s != nic.QPStateErr {
			t.Fatalf("%v QP in %v", qp.Type(), s)
		}
	}
	if r.initQP.State() != nic.QPStateInit || r.resetQP.State() != nic.QPStateReset {
		t.Fatalf("INIT and RESET QPs moved: %v, %v", r.initQP.State(), r.resetQP.State())
	}
}

// fuzzOpcodes are the opcodes a structured record picks from.
var fuzzOpcodes = func() []wire.Opcode {
	var ops []wire.Opcode
	for op := range 256 {
		if wire.Opcode(op).Info().Valid {
			ops = append(ops, wire.Opcode(op))
		}
	}
	return ops
}()

// fuzzHeaderLen is the size of a structured record's header.
const fuzzHeaderLen = 24

// fuzzFrame takes one record from data and returns its frame (in buf or
// aliasing data) and the rest of data. A record is:
//
//	raw:        0x00 | len(2, big-endian) | bytes
//	structured: 0x01..0xFF | 24-byte header | payload
//
// A structured header picks, byte by byte: [0] the opcode; [1] the QP
// (RC, UC, UD, the INIT QP, the RESET QP, the multicast QPN, or a QPN
// from [2:4]); [2:5] the PSN as an offset from the RC QP's initial
// expected PSN (requests) or first send PSN (responses); [5] flags
// (AckReq, solicited, P_Key variant, bad Q_Key, IPv6 destination, a
// multicast destination: the rig's group or another); [6] the MR whose R_Key the RETH or
// AtomicETH carries (or a made-up key); [7:9] the VA as a signed offset
// from that MR's address; [9:11] the DMA length (0xFFFF: 2^31); [11] the
// AETH syndrome; [12:14] the MSN; [14:22] atomic operands; [22:24] the
// payload length (taken from the bytes that follow, zero-filled).
func fuzzFrame(r *rig, data []byte, buf []byte) ([]byte, []byte) {
	mode := data[0]
	data = data[1:]
	if mode == 0 {
		if len(data) < 2 {
			return data, nil
		}
		n := min(int(binary.BigEndian.Uint16(data)), len(data)-2)
		return data[2 : 2+n], data[2+n:]
	}
	var h [fuzzHeaderLen]byte
	data = data[copy(h[:], data):]
	op := fuzzOpcodes[int(h[0])%len(fuzzOpcodes)]
	info := op.Info()
	f := wire.Frame{DstMAC: rigMAC, SrcMAC: rigPeerMAC, Src: rigPeerIP, Dst: rigIP, TTL: 64, SrcPort: 0xC000}
	qps := []*nic.QP{r.rc, r.uc, r.ud, r.initQP, r.resetQP}
	var qpn uint32
	if i := int(h[1]); i < len(qps) {
		qpn = qps[i].Num()
	} else if i == len(qps) {
		qpn = wire.MulticastQPN
	} else {
		qpn = uint32(h[2])<<16 | uint32(h[3])<<8 | uint32(h[4])
	}
	base := wire.PSN(rigRQPSN)
	if !info.Kind.IsRequest() {
		base = rigSQPSN
	}
	flags := h[5]
	f.BTH = wire.BTHFields{Opcode: op, PKey: 0xFFFF, DestQP: qpn, AckReq: flags&1 != 0, SolicitedEvent: flags&2 != 0,
		PSN: base.Add(uint32(h[2])<<16 | uint32(h[3])<<8 | uint32(h[4]))}
	switch flags >> 2 & 3 {
	case 1:
		f.BTH.PKey = 0x7FFF
	case 2:
		f.BTH.PKey = uint16(h[12])<<8 | uint16(h[13])
	}
	f.DETH = wire.DETHFields{QKey: rigQKey, SrcQP: rigPeerQPN}
	if flags&16 != 0 {
		f.DETH.QKey = binary.BigEndian.Uint32(h[14:])
	}
	if flags&32 != 0 {
		f.Src, f.Dst = netip.AddrFrom16(rigPeerIP.As16()), netip.AddrFrom16(rigIP.As16())
	}
	if flags&64 != 0 {
		// To a group: the rig's UD QP's, or (with flags&128) one the
		// device is not in.
		g := rigGroup
		if flags&128 != 0 {
			g = netip.AddrFrom4([4]byte{239, 9, 9, 9})
		}
		f.Dst, f.DstMAC = g, wire.MAC{0x01, 0x00, 0x5e, 0x00, 0x00, g.As4()[3]}
	}
	var rkey uint32 = 0xBAD00
	var addr uint64
	if i := int(h[6]); i < len(r.mrs) {
		rkey, addr = r.mrs[i].RKey, r.mrs[i].Addr
	}
	va := addr + uint64(int64(int16(binary.BigEndian.Uint16(h[7:]))))
	length := uint32(binary.BigEndian.Uint16(h[9:]))
	if length == 0xFFFF {
		length = 1 << 31
	}
	f.RETH = wire.RETHFields{VA: va, RKey: rkey, DMALength: length}
	f.AtomicETH = wire.AtomicETHFields{VA: va, RKey: rkey, SwapAddData: binary.BigEndian.Uint64(h[14:]), CompareData: uint64(h[11])}
	f.AETH = wire.AETHFields{Syndrome: wire.Syndrome(h[11]), MSN: uint32(h[12])<<8 | uint32(h[13])}
	f.AtomicAckETH = binary.BigEndian.Uint64(h[14:])
	if info.Has(wire.HasPayload) {
		n := min(int(binary.BigEndian.Uint16(h[22:]))&0x1FFF, 4200)
		payload := make([]byte, n)
		data = data[copy(payload, data):]
		f.Payload = payload
	}
	n, err := wire.Encode(buf, &f)
	if err != nil {
		return nil, data
	}
	return buf[:n], data
}

// rigGroup is the multicast group FuzzReceive's rig has joined, its UD
// QP attached.
var rigGroup = netip.AddrFrom4([4]byte{224, 0, 0, 5})

// rawRecord is a FuzzReceive record carrying frame as raw bytes.
func rawRecord(frame []byte) []byte {
	return append([]byte{0, byte(len(frame) >> 8), byte(len(frame))}, frame...)
}

// TestWriteReceiveCorpus (with -corpus, make corpus) rewrites the seeds in
// testdata/fuzz/FuzzReceive:
// for the first frame of each opcode in each real capture, the frame as
// captured (it is not for the rig: a drop) and the frame readdressed to
// the rig (its QP, PSNs, R_Key and VA in the rig's MR, a correct ICRC),
// plus a few structured sequences.
func TestWriteReceiveCorpus(t *testing.T) {
	if !*writeCorpus {
		t.Skip("run with -corpus to rewrite the seed corpus")
	}
	// Files are overwritten, never removed: inputs the fuzzer found
	// (fuzzed-*) stay.
	dir := filepath.Join("testdata", "fuzz", "FuzzReceive")
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	write := func(name string, data []byte) {
		body := fmt.Sprintf("go test fuzz v1\n[]byte(%q)\n", data)
		if err := os.WriteFile(filepath.Join(dir, name), []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	r := newRig(t, rigOptions{outstanding: true})
	pcaps, err := filepath.Glob(filepath.Join("..", "wire", "testdata", "*.pcap"))
	if err != nil || len(pcaps) == 0 {
		t.Fatalf("no captures: %v", err)
	}
	var p wire.Packet
	var fr wire.Frame
	buf := make([]byte, 1<<14)
	for _, pcap := range pcaps {
		base := filepath.Base(pcap)
		seen := map[wire.Opcode]bool{}
		for i, frame := range readPcap(t, pcap) {
			if p.Decode(frame) != nil || seen[p.BTH.Opcode()] {
				continue
			}
			seen[p.BTH.Opcode()] = true
			name := fmt.Sprintf("%s-%03d-%s", base, i+1, p.Info.Name)
			write(name+"-raw", rawRecord(frame))
			p.Frame(&fr)
			fr.DstMAC, fr.SrcMAC, fr.Src, fr.Dst, fr.Trailer = rigMAC, rigPeerMAC, rigPeerIP, rigIP, nil
			switch p.Info.Transport {
			case wire.TransportUC:
				fr.BTH.DestQP = r.uc.Num()
			case wire.TransportUD:
				fr.BTH.DestQP, fr.DETH.QKey = r.ud.Num(), rigQKey
			default:
				fr.BTH.DestQP = r.rc.Num()
			}
			if p.Info.Kind.IsRequest() {
				fr.BTH.PSN = rigRQPSN
			} else {
				fr.BTH.PSN = rigSQPSN
			}
			fr.RETH.RKey, fr.RETH.VA = r.rw.RKey, r.rw.Addr
			fr.AtomicETH.RKey, fr.AtomicETH.VA = r.rw.RKey, r.rw.Addr
			n, err := wire.Encode(buf, &fr)
			if err != nil {
				t.Fatalf("%s: %v", name, err)
			}
			write(name+"-rig", rawRecord(buf[:n]))
		}
	}
	// Structured sequences: a three-packet SEND, a WRITE in two packets,
	// a READ, an atomic, responses to the outstanding WRITE, READ, atomic.
	rec := func(op wire.Opcode, qp, psn byte, flags, mr byte, length uint16, syn byte, payload int) []byte {
		h := make([]byte, 1+fuzzHeaderLen)
		h[0] = 1
		for i, o := range fuzzOpcodes {
			if o == op {
				h[1] = byte(i)
			}
		}
		h[2], h[5], h[6], h[7] = qp, psn, flags, mr
		binary.BigEndian.PutUint16(h[10:], length)
		h[12] = syn
		binary.BigEndian.PutUint16(h[23:], uint16(payload))
		return append(h, bytes.Repeat([]byte{0xA5}, payload)...)
	}
	cat := func(parts ...[]byte) []byte { return bytes.Join(parts, nil) }
	const ack = 1
	write("seq-send-3", cat(rec(wire.OpRCSendFirst, 0, 0, 0, 0, 0, 0, 1024), rec(wire.OpRCSendMiddle, 0, 1, 0, 0, 0, 0, 1024),
		rec(wire.OpRCSendLast, 0, 2, ack, 0, 0, 0, 100)))
	write("seq-write-2", cat(rec(wire.OpRCWriteFirst, 0, 0, 0, 0, 1500, 0, 1024), rec(wire.OpRCWriteLast, 0, 1, ack, 0, 0, 0, 476)))
	write("seq-read", rec(wire.OpRCReadRequest, 0, 0, ack, 0, 3000, 0, 0))
	write("seq-atomic", rec(wire.OpRCFetchAdd, 0, 0, ack, 0, 0, 0, 0))
	write("seq-uc-write", rec(wire.OpUCWriteOnly, 1, 0, 0, 0, 64, 0, 64))
	write("seq-ud-send", rec(wire.OpUDSendOnly, 2, 0, 0, 0, 0, 0, 200))
	write("seq-responses", cat(rec(wire.OpRCAcknowledge, 0, 0, 0, 0, 0, 0x1F, 0), rec(wire.OpRCReadResponseOnly, 0, 1, 0, 0, 0, 0x1F, 64),
		rec(wire.OpRCAtomicAcknowledge, 0, 2, 0, 0, 0, 0x1F, 0)))
	write("seq-nak", rec(wire.OpRCAcknowledge, 0, 0, 0, 0, 0, 0x60, 0))
}

// readPcap returns the frames of a classic little-endian pcap file (the
// real rxe captures in wire/testdata).
func readPcap(t testing.TB, path string) [][]byte {
	t.Helper()
	d, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if len(d) < 24 {
		t.Fatalf("%s: too short for a pcap header", path)
	}
	var frames [][]byte
	for off := 24; off+16 <= len(d); {
		incl := int(binary.LittleEndian.Uint32(d[off+8:]))
		if off+16+incl > len(d) {
			t.Fatalf("%s: record at %d overruns the file", path, off)
		}
		frames = append(frames, d[off+16:off+16+incl])
		off += 16 + incl
	}
	return frames
}
