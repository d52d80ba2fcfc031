package faults_test

import (
	"math/rand/v2"
	"net/netip"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/rocesim/rocesim/faults"
	"github.com/rocesim/rocesim/sim"
	"github.com/rocesim/rocesim/wire"
)

// pktSpec is the part of a RoCE frame the fault keys look at.
type pktSpec struct {
	op  wire.Opcode
	psn uint32
	qp  uint32
	syn wire.Syndrome // AETH syndrome, for opcodes that carry one
	msn uint32
	v6  bool // IPv6 with a computed UDP checksum
	// payload replaces the default payload (a MAD, for a UD SEND to QP1)
	payload []byte
}

// build encodes a frame for s with an 8-byte payload where the opcode
// takes one (16 for a CNP).
func (s pktSpec) build(t testing.TB) []byte {
	t.Helper()
	f := wire.Frame{
		DstMAC:  wire.MAC{2, 0, 0, 0, 0, 2},
		SrcMAC:  wire.MAC{2, 0, 0, 0, 0, 1},
		Src:     netip.AddrFrom4([4]byte{10, 0, 0, 1}),
		Dst:     netip.AddrFrom4([4]byte{10, 0, 0, 2}),
		TTL:     64,
		IPFlags: wire.IPv4FlagDF,
		SrcPort: wire.UDPSourcePort(0x11, 0x12),
		BTH: wire.BTHFields{
			Opcode: s.op,
			PKey:   0xFFFF,
			DestQP: s.qp,
			PSN:    wire.PSN(s.psn),
		},
		AETH: wire.AETHFields{Syndrome: s.syn, MSN: s.msn},
	}
	if s.v6 {
		f.Src = netip.MustParseAddr("fd00::1")
		f.Dst = netip.MustParseAddr("fd00::2")
		f.ComputeUDPChecksum = true
	}
	switch {
	case s.payload != nil:
		f.Payload = s.payload
	case s.op == wire.OpCNP:
		f.Payload = make([]byte, wire.CNPPayloadLen)
	case s.op.Info().Has(wire.HasPayload):
		f.Payload = []byte{1, 2, 3, 4, 5, 6, 7, 8}
	}
	n, err := f.Len()
	require.NoError(t, err)
	b := make([]byte, n)
	_, err = wire.Encode(b, &f)
	require.NoError(t, err)
	return b
}

// decode returns the header view of frame, as the fabric passes it.
func decode(t testing.TB, frame []byte) *wire.Packet {
	t.Helper()
	var p wire.Packet
	require.NoError(t, p.DecodeHeaders(frame))
	return &p
}

// nonRoCE is an Ethernet frame that is not RoCE (an ARP request's size).
func nonRoCE() []byte {
	b := make([]byte, 60)
	b[12], b[13] = 0x08, 0x06
	return b
}

// sent is one frame of a test's traffic on one hop.
type sent struct {
	name string
	now  sim.Time
	hop  faults.Hop
	pkt  *pktSpec // nil: not RoCE
}

// frame builds s's frame and, for RoCE, its decoded view (nil otherwise).
func (s sent) frame(t testing.TB) ([]byte, *wire.Packet) {
	if s.pkt == nil {
		return nonRoCE(), nil
	}
	frame := s.pkt.build(t)
	return frame, decode(t, frame)
}

const (
	us = sim.Time(sim.Microsecond)
	ms = sim.Time(sim.Millisecond)
)

// traffic is a small exchange between a, b and c through a switch sw,
// covering every class; names say what each frame is ("@sw": the hop out
// of the switch; "#2": a retransmission).
var traffic = []sent{
	{"send1", 0, faults.Hop{Link: "a-sw", From: "a", To: "b", First: true, Tx: 1}, &pktSpec{op: wire.OpRCSendOnly, psn: 1, qp: 0x11}},
	{"send1@sw", 1 * us, faults.Hop{Link: "sw-b", From: "a", To: "b", Tx: 1}, &pktSpec{op: wire.OpRCSendOnly, psn: 1, qp: 0x11}},
	{"wfirst2", 10 * us, faults.Hop{Link: "a-sw", From: "a", To: "b", First: true, Tx: 1}, &pktSpec{op: wire.OpRCWriteFirst, psn: 2, qp: 0x11}},
	{"ack1", 20 * us, faults.Hop{Link: "b-sw", From: "b", To: "a", First: true, Tx: 1}, &pktSpec{op: wire.OpRCAcknowledge, psn: 1, qp: 0x12, syn: 0x1F}},
	{"nak2", 30 * us, faults.Hop{Link: "b-sw", From: "b", To: "a", First: true, Tx: 1}, &pktSpec{op: wire.OpRCAcknowledge, psn: 2, qp: 0x12, syn: 0x60}},
	{"rnr2", 40 * us, faults.Hop{Link: "b-sw", From: "b", To: "a", First: true, Tx: 2}, &pktSpec{op: wire.OpRCAcknowledge, psn: 2, qp: 0x12, syn: 0x2C}},
	{"wfirst2#2", 1 * ms, faults.Hop{Link: "a-sw", From: "a", To: "b", First: true, Tx: 2}, &pktSpec{op: wire.OpRCWriteFirst, psn: 2, qp: 0x11}},
	{"read3", 1100 * us, faults.Hop{Link: "a-sw", From: "a", To: "b", First: true, Tx: 1}, &pktSpec{op: wire.OpRCReadRequest, psn: 3, qp: 0x11}},
	{"rresp3", 1200 * us, faults.Hop{Link: "b-sw", From: "b", To: "a", First: true, Tx: 1}, &pktSpec{op: wire.OpRCReadResponseOnly, psn: 3, qp: 0x12, syn: 0x1F}},
	{"cas4", 1300 * us, faults.Hop{Link: "a-sw", From: "a", To: "b", First: true, Tx: 1}, &pktSpec{op: wire.OpRCCompareSwap, psn: 4, qp: 0x11}},
	{"aack4", 1400 * us, faults.Hop{Link: "b-sw", From: "b", To: "a", First: true, Tx: 1}, &pktSpec{op: wire.OpRCAtomicAcknowledge, psn: 4, qp: 0x12, syn: 0x1F}},
	{"ud100", 2 * ms, faults.Hop{Link: "c-sw", From: "c", To: "a", First: true, Tx: 1}, &pktSpec{op: wire.OpUDSendOnly, psn: 100, qp: 0x20}},
	{"cnp", 2100 * us, faults.Hop{Link: "c-sw", From: "c", To: "a", First: true, Tx: 1}, &pktSpec{op: wire.OpCNP, psn: 0, qp: 0x20}},
	{"arp", 2200 * us, faults.Hop{Link: "a-sw", From: "a", First: true}, nil},
	{"ack4@sw", 3 * ms, faults.Hop{Link: "sw-a", From: "b", To: "a", Tx: 1}, &pktSpec{op: wire.OpRCAcknowledge, psn: 4, qp: 0x12, syn: 0x1F}},
}

// firstHops names every frame of traffic on its first hop.
var firstHops = []string{"send1", "wfirst2", "ack1", "nak2", "rnr2", "wfirst2#2", "read3", "rresp3", "cas4", "aack4", "ud100", "cnp", "arp"}

// run decides every frame of frames with in and returns the names of the
// frames some rule acted on, and the verdicts.
func run(t testing.TB, in *faults.Injector, frames []sent) ([]string, []faults.Verdict) {
	t.Helper()
	var hit []string
	var vs []faults.Verdict
	for _, s := range frames {
		frame, pkt := s.frame(t)
		v := in.Decide(s.now, s.hop, frame, pkt)
		vs = append(vs, v)
		if v.Action != faults.Pass {
			hit = append(hit, s.name)
		}
	}
	return hit, vs
}

// mustParse parses a plan or fails the test.
func mustParse(t testing.TB, text string) *faults.Plan {
	t.Helper()
	p, err := faults.Parse(text)
	require.NoError(t, err, "plan:\n%s", text)
	return p
}

func newRand(seed uint64) *rand.Rand { return sim.NewSeeds(seed).Stream("faults") }
