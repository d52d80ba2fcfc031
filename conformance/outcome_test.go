package conformance

import (
	"bytes"
	"io"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/rocesim/rocesim/nic"
	"github.com/rocesim/rocesim/scenario"
	"github.com/rocesim/rocesim/wire"
	"github.com/rocesim/rocesim/wire/capture"
)

// These tests need no VM: they run the differential scenarios in the
// simulation only, and check the normalisation and comparison that the
// real runs share.

// TestScenariosRunInTheModel: the 19 differential scenarios, in order,
// each a Program, each meeting its expectations under the rxe profile,
// each giving the same Outcome twice.
func TestScenariosRunInTheModel(t *testing.T) {
	ss, err := Scenarios()
	require.NoError(t, err)
	var names []string
	for _, s := range ss {
		names = append(names, s.Name)
	}
	require.Equal(t, []string{"go-back-n", "ack-timeout", "ack-loss", "duplicate", "read-response-loss",
		"atomic-ack-loss", "rnr", "rnr-exceeded", "retry-exceeded", "remote-access-error", "cq-overflow",
		"write-past-mr-end", "read-without-remote-read", "write-without-qp-access", "atomic-without-remote-atomic",
		"zero-length-write", "uc-loss", "uc-write-bad-rkey", "uc-write-loss",
		"read-multi-middle-loss", "atomic-multi-ack-loss", "read-implied-nak", "nak-seq-retry-exceeded",
		"timer-idle-gap", "timer-ack-loss-stream", "read-ghost-response",
		"read-request-with-payload", "atomic-request-with-payload", "reserved-opcode", "malformed-dropped", "read-over-max-dest-rd-atomic", "atomic-over-max-dest-rd-atomic",
		"mw-type2-write", "mw-local-inv", "mw-send-inv", "mw-send-inv-type1", "mw-type1-read", "mw-past-window", "rereg-access",
		"mw-invalidated-mid-write", "mw-bind-bound", "rewritten-fields", "link-cut-after-frames", "unacked-window", "runt-dropped"}, names)
	for _, s := range ss {
		t.Run(s.Name, func(t *testing.T) {
			assert.NotEmpty(t, s.Description)
			p, err := s.Program()
			require.NoError(t, err)
			assert.Equal(t, "a-b", p.Link)
			assert.Equal(t, "a", p.Nodes[0].Name)
			assert.Equal(t, "b", p.Nodes[1].Name)
			assert.NotEqual(t, p.Nodes[0].QP.PSN, p.Nodes[1].QP.PSN, "distinct PSN bases catch a normalisation from the wrong side")
			for _, n := range p.Nodes {
				assert.Equal(t, 0, n.QP.PathMTU, "the port's MTU: 1024 on the default link")
				assert.GreaterOrEqual(t, n.QP.Timeout, uint8(14), "real rxe under TCG needs 64 ms (16 jiffies) or more")
			}
			o1, res, err := ModelOutcome(s, "")
			require.NoError(t, err)
			assert.Empty(t, res.Failed)
			assert.NotEmpty(t, o1.Completions)
			assert.NotEmpty(t, o1.Wire)
			assert.Len(t, o1.Memory, len(p.Nodes[0].MRs)+len(p.Nodes[1].MRs))
			o2, _, err := ModelOutcome(s, "")
			require.NoError(t, err)
			assert.Equal(t, o1, o2, "the same scenario twice")
			assert.Empty(t, Compare(o1, o2))
		})
	}
}

// psnLine matches the psn= of a qp line.
var psnLine = regexp.MustCompile(`(?m)^(qp [a-z]\.q [ru]c .*)psn=\d+`)

// TestOutcomeIgnoresPSNBases: the same scenario with other PSN bases
// (one across the 2^24 wrap) has the same Outcome.
func TestOutcomeIgnoresPSNBases(t *testing.T) {
	ss, err := Scenarios()
	require.NoError(t, err)
	for _, s := range ss {
		t.Run(s.Name, func(t *testing.T) {
			i := 0
			text := psnLine.ReplaceAllStringFunc(s.Text, func(m string) string {
				i++
				psn := []string{"16777214", "3"}[i-1]
				return psnLine.ReplaceAllString(m, "${1}psn="+psn)
			})
			require.Equal(t, 2, i, "both qp lines have psn=")
			s2, err := scenario.Parse(s.File, text)
			require.NoError(t, err)
			p2, err := s2.Program()
			require.NoError(t, err)
			require.Equal(t, uint32(16777214), p2.Nodes[0].QP.PSN)
			want, _, err := ModelOutcome(s, "")
			require.NoError(t, err)
			got, res, err := ModelOutcome(s2, "")
			require.NoError(t, err)
			assert.Empty(t, res.Failed)
			assert.Equal(t, want, got)
		})
	}
}

// TestNormaliseGoBackN pins the whole normalised wire of go-back-n: the
// drop marked once, the NAK, the resend from the dropped PSN.
func TestNormaliseGoBackN(t *testing.T) {
	o := modelOutcome(t, "go-back-n")
	ab := func(op string, psn uint32, ackReq, dropped bool) WireEvent {
		return WireEvent{From: "a", To: "b", Op: op, PSN: psn, AckReq: ackReq, Dropped: dropped}
	}
	ba := func(syn string, psn, msn uint32) WireEvent {
		return WireEvent{From: "b", To: "a", Op: "RC_ACKNOWLEDGE", PSN: psn, Syndrome: syn, MSN: msn}
	}
	assert.Equal(t, []WireEvent{
		ab("RC_SEND_FIRST", 0, false, false),
		ab("RC_SEND_MIDDLE", 1, false, true),
		ab("RC_SEND_MIDDLE", 2, false, false),
		ab("RC_SEND_LAST", 3, true, false),
		ba("NAK-SEQ", 1, 0),
		ab("RC_SEND_MIDDLE", 1, false, false),
		ab("RC_SEND_MIDDLE", 2, false, false),
		ab("RC_SEND_LAST", 3, true, false),
		ba("ACK", 3, 1),
	}, o.Wire)
	assert.Equal(t, []OutcomeWC{
		{Node: "a", WRID: 2, Status: "IBV_WC_SUCCESS", Opcode: "IBV_WC_SEND", ByteLen: 4096, WCFlags: "0"},
		{Node: "b", WRID: 1, Status: "IBV_WC_SUCCESS", Opcode: "IBV_WC_RECV", ByteLen: 4096, WCFlags: "IBV_WC_GRH"},
	}, o.Completions)
	require.Len(t, o.Memory, 2)
	assert.Equal(t, "b.buf", o.Memory[1].Name)
	assert.Equal(t, o.Memory[0].Bytes, o.Memory[1].Bytes)
}

// TestNormaliseDuplicateAndResponses: a dup rule's copies are events of
// their own; READ responses and atomic ACKs count from the requester's
// PSN; a link cut marks every frame after it dropped.
func TestNormaliseDuplicateAndResponses(t *testing.T) {
	ops := func(ev []WireEvent) []string {
		var out []string
		for _, e := range ev {
			out = append(out, e.From+" "+e.String())
		}
		return out
	}
	assert.Equal(t, []string{
		"a RC_SEND_ONLY psn+0 ackreq", "a RC_SEND_ONLY psn+0 ackreq", // the original and its copy
		"a RC_SEND_ONLY psn+1 ackreq", "a RC_SEND_ONLY psn+1 ackreq",
		"b RC_ACKNOWLEDGE psn+0 ACK msn=1", "b RC_ACKNOWLEDGE psn+0 ACK msn=1", // the copy is ACKed again
		"b RC_ACKNOWLEDGE psn+1 ACK msn=2", "b RC_ACKNOWLEDGE psn+1 ACK msn=2",
	}, sortByDirection(ops(modelOutcome(t, "duplicate").Wire)))
	assert.Equal(t, []string{
		"a RC_RDMA_READ_REQUEST psn+0 ackreq",
		"a RC_RDMA_READ_REQUEST psn+1 ackreq", // re-read from the missing response
		"b RC_RDMA_READ_RESPONSE_FIRST psn+0 ACK msn=1",
		"b RC_RDMA_READ_RESPONSE_MIDDLE psn+1 dropped",
		"b RC_RDMA_READ_RESPONSE_LAST psn+2 ACK msn=1",
		"b RC_RDMA_READ_RESPONSE_MIDDLE psn+1",
		"b RC_RDMA_READ_RESPONSE_LAST psn+2 ACK msn=1",
	}, sortByDirection(ops(modelOutcome(t, "read-response-loss").Wire)))
	assert.Equal(t, []string{
		"a RC_FETCH_ADD psn+0 ackreq", "a RC_FETCH_ADD psn+0 ackreq",
		"b RC_ATOMIC_ACKNOWLEDGE psn+0 ACK msn=1 dropped", "b RC_ATOMIC_ACKNOWLEDGE psn+0 ACK msn=1",
	}, sortByDirection(ops(modelOutcome(t, "atomic-ack-loss").Wire)))
	re := modelOutcome(t, "retry-exceeded").Wire
	require.Len(t, re, 14) // SEND and ACK, then 3 SENDs sent 4 times each into the cut
	for _, e := range re[2:] {
		assert.True(t, e.Dropped, e.String())
	}
	assert.False(t, re[0].Dropped)
	rnr := modelOutcome(t, "rnr").Wire
	require.Len(t, rnr, 4)
	assert.Equal(t, "RNR", rnr[1].Syndrome)
	rae := modelOutcome(t, "remote-access-error").Wire
	assert.Contains(t, ops(rae), "b RC_ACKNOWLEDGE psn+0 NAK-ACC msn=0")
}

// sortByDirection puts a's events before b's, keeping each direction's
// order (the interleaving is timing).
func sortByDirection(ev []string) []string {
	var a, b []string
	for _, e := range ev {
		if strings.HasPrefix(e, "a ") {
			a = append(a, e)
		} else {
			b = append(b, e)
		}
	}
	return append(a, b...)
}

// TestNormaliseCaptureFile: ModelOutcome writes the capture it
// normalises; pcap (no comments) gives the same events, none dropped.
func TestNormaliseCaptureFile(t *testing.T) {
	s := lookup(t, "go-back-n")
	path := filepath.Join(t.TempDir(), "gbn.pcapng")
	o, _, err := ModelOutcome(s, path)
	require.NoError(t, err)
	assert.Equal(t, modelOutcome(t, "go-back-n"), o)
	f, err := os.Open(path)
	require.NoError(t, err)
	defer f.Close()
	p, err := s.Program()
	require.NoError(t, err)
	ev, err := NormaliseCapture(f, p)
	require.NoError(t, err)
	assert.Equal(t, o.Wire, ev)

	var buf bytes.Buffer
	w, err := capture.NewWriter(&buf, capture.FormatPcap, capture.PcapngOptions{})
	require.NoError(t, err)
	_, err = s.Run(scenario.Options{Profile: nic.ProfileRXE, Capture: w})
	require.NoError(t, err)
	require.NoError(t, w.Close())
	ev, err = NormaliseCapture(&buf, p)
	require.NoError(t, err)
	want := append([]WireEvent(nil), o.Wire...)
	for i := range want {
		want[i].Dropped = false
	}
	assert.Equal(t, want, ev)
}

// TestNormaliseSkipsOtherFramesAndRejectsStrangers: non-RoCE frames are
// skipped; RoCE from an address that is neither node's is an error.
func TestNormaliseSkipsOtherFramesAndRejectsStrangers(t *testing.T) {
	s := lookup(t, "ack-loss")
	p, err := s.Program()
	require.NoError(t, err)
	var pcap bytes.Buffer
	w, err := capture.NewWriter(&pcap, capture.FormatPcapng, capture.PcapngOptions{})
	require.NoError(t, err)
	_, err = s.Run(scenario.Options{Capture: w})
	require.NoError(t, err)
	arp := make([]byte, 42)
	copy(arp[12:], []byte{0x08, 0x06})
	require.NoError(t, w.WriteFrame(1e9, 0, arp, ""))
	require.NoError(t, w.Close())
	ev, err := NormaliseCapture(bytes.NewReader(pcap.Bytes()), p)
	require.NoError(t, err)
	assert.Len(t, ev, 4)

	p.Nodes[0].Name = "x" // names come from the program
	ev, err = NormaliseCapture(bytes.NewReader(pcap.Bytes()), p)
	require.NoError(t, err)
	assert.Equal(t, "x", ev[0].From)
	assert.Equal(t, "x", ev[len(ev)-1].To)

	// The same frames with a third party's source address.
	var pkt wire.Packet
	r, err := capture.NewReader(bytes.NewReader(pcap.Bytes()))
	require.NoError(t, err)
	var rec capture.Record
	require.NoError(t, r.Next(&rec))
	frame := append([]byte(nil), rec.Data...)
	require.NoError(t, pkt.DecodeHeaders(frame))
	require.Equal(t, byte(1), pkt.IPv4[15])
	pkt.IPv4[13], pkt.IPv4[15] = 1, 0 // 10.0.0.1 to 10.1.0.0: the same one's-complement sum, the checksum holds
	var bad bytes.Buffer
	w, err = capture.NewWriter(&bad, capture.FormatPcapng, capture.PcapngOptions{})
	require.NoError(t, err)
	_, err = w.AddInterface("x", "")
	require.NoError(t, err)
	require.NoError(t, w.WriteFrame(0, 0, frame, ""))
	require.NoError(t, w.Close())
	_, err = NormaliseCapture(&bad, p)
	if err == nil {
		t.Fatal("a frame from 10.1.0.0 was accepted")
	}
	assert.Contains(t, err.Error(), "neither node's address")

	_, err = NormaliseCapture(strings.NewReader("not a capture"), p)
	assert.Error(t, err)

	// A capture cut inside its last record is damage, not a shorter run.
	_, err = NormaliseCapture(bytes.NewReader(pcap.Bytes()[:pcap.Len()-3]), p)
	assert.ErrorIs(t, err, io.ErrUnexpectedEOF)
}

// TestCompareFindsTheFirstDifference: one change in each part is found
// and described; the interleaving of directions is not compared.
func TestCompareFindsTheFirstDifference(t *testing.T) {
	model := modelOutcome(t, "go-back-n")
	clone := func() *Outcome {
		o := &Outcome{Completions: append([]OutcomeWC(nil), model.Completions...),
			Wire: append([]WireEvent(nil), model.Wire...)}
		for _, m := range model.Memory {
			o.Memory = append(o.Memory, scenario.MemoryRegion{Name: m.Name, Bytes: append([]byte(nil), m.Bytes...)})
		}
		return o
	}
	assert.Nil(t, Compare(model, clone()))

	tests := []struct {
		name   string
		change func(o *Outcome)
		want   []Diff
	}{
		{"status", func(o *Outcome) { o.Completions[0].Status = "IBV_WC_RETRY_EXC_ERR" },
			[]Diff{{"completions a", "#0: model wr=2 IBV_WC_SUCCESS IBV_WC_SEND byte_len=4096 flags=0, rxe wr=2 IBV_WC_RETRY_EXC_ERR"}}},
		{"byte_len", func(o *Outcome) { o.Completions[1].ByteLen = 0 },
			[]Diff{{"completions b", "#0: model wr=1 IBV_WC_SUCCESS IBV_WC_RECV byte_len=4096 flags=IBV_WC_GRH, rxe wr=1 IBV_WC_SUCCESS IBV_WC_RECV byte_len=0 flags=IBV_WC_GRH"}}},
		{"wc_flags", func(o *Outcome) { o.Completions[1].WCFlags = "0" },
			[]Diff{{"completions b", "#0: model wr=1 IBV_WC_SUCCESS IBV_WC_RECV byte_len=4096 flags=IBV_WC_GRH, rxe wr=1 IBV_WC_SUCCESS IBV_WC_RECV byte_len=4096 flags=0"}}},
		{"missing completion", func(o *Outcome) { o.Completions = o.Completions[:1] },
			[]Diff{{"completions b", "#0: model wr=1 IBV_WC_SUCCESS IBV_WC_RECV byte_len=4096 flags=IBV_WC_GRH (1 in all), rxe none (0 in all)"}}},
		{"memory", func(o *Outcome) { o.Memory[1].Bytes[1000] = 7; o.Memory[1].Bytes[3000] = 0 },
			[]Diff{{"memory b.buf", "+1000: model 0xe8, rxe 0x07; 2 of 4096 bytes differ"}}},
		{"memory size", func(o *Outcome) { o.Memory[0].Bytes = o.Memory[0].Bytes[:10] },
			[]Diff{{"memory a.buf", "model 4096 bytes, rxe 10 bytes"}}},
		{"opcode", func(o *Outcome) { o.Wire[3].Op = "RC_SEND_MIDDLE"; o.Wire[7].Op = "RC_SEND_MIDDLE" },
			[]Diff{{"wire a->b", "#3: model RC_SEND_LAST psn+3 ackreq, rxe RC_SEND_MIDDLE psn+3 ackreq"}}},
		{"async event", func(o *Outcome) { o.Async = append(o.Async, OutcomeAsync{Node: "b", Type: "IBV_EVENT_CQ_ERR"}) },
			[]Diff{{"async events b", "#0: model none (0 in all), rxe IBV_EVENT_CQ_ERR (1 in all)"}}},
		{"rereg answer", func(o *Outcome) { o.Rereg = []OutcomeRereg{{MR: "b.buf", Answer: "EOPNOTSUPP"}} },
			[]Diff{{"rereg", "#0: model none (0 in all), rxe b.buf EOPNOTSUPP (1 in all)"}}},
		{"msn", func(o *Outcome) { o.Wire[8].MSN = 2 },
			[]Diff{{"wire b->a", "#1: model RC_ACKNOWLEDGE psn+3 ACK msn=1, rxe RC_ACKNOWLEDGE psn+3 ACK msn=2"}}},
		{"syndrome", func(o *Outcome) { o.Wire[4].Syndrome = "RNR" },
			[]Diff{{"wire b->a", "#0: model RC_ACKNOWLEDGE psn+1 NAK-SEQ msn=0, rxe RC_ACKNOWLEDGE psn+1 RNR msn=0"}}},
		{"extra frame", func(o *Outcome) { o.Wire = append(o.Wire, o.Wire[8]) },
			[]Diff{{"wire b->a", "#2: model none (2 in all), rxe RC_ACKNOWLEDGE psn+3 ACK msn=1 (3 in all)"}}},
		{"not dropped", func(o *Outcome) { o.Wire[1].Dropped = false },
			[]Diff{{"wire a->b", "#1: model RC_SEND_MIDDLE psn+1 dropped, rxe RC_SEND_MIDDLE psn+1"}}},
		{"everything", func(o *Outcome) {
			o.Completions[1].WRID = 9
			o.Memory[0].Bytes[0] = 1
			o.Wire[0].PSN = 5
			o.Wire[4].MSN = 9
		}, []Diff{
			{"completions b", "#0: model wr=1 IBV_WC_SUCCESS IBV_WC_RECV byte_len=4096 flags=IBV_WC_GRH, rxe wr=9 IBV_WC_SUCCESS IBV_WC_RECV byte_len=4096 flags=IBV_WC_GRH"},
			{"memory a.buf", "+0: model 0x00, rxe 0x01; 1 of 4096 bytes differ"},
			{"wire a->b", "#0: model RC_SEND_FIRST psn+0, rxe RC_SEND_FIRST psn+5"},
			{"wire b->a", "#0: model RC_ACKNOWLEDGE psn+1 NAK-SEQ msn=0, rxe RC_ACKNOWLEDGE psn+1 NAK-SEQ msn=9"},
		}},
		{"interleaving", func(o *Outcome) {
			// The NAK before the last three of the first transmission.
			w := o.Wire
			o.Wire = slices.Concat(w[:1], w[4:5], w[1:4], w[5:])
		}, nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			real := clone()
			tt.change(real)
			assert.Equal(t, tt.want, Compare(model, real))
		})
	}
}

// TestRenderResults: the table, then details of the scenarios that
// differed.
func TestRenderResults(t *testing.T) {
	got := RenderResults(Provenance{Commit: "abc123", Kernel: "6.1.0-56-amd64", Date: "2026-11-24"}, []ResultRow{
		{Scenario: "go-back-n", Verdict: VerdictMatch, CABIVerdict: VerdictMatch},
		{Scenario: "rnr", Verdict: VerdictKnownDeviation, Cause: "rxe | something",
			Diffs:       []Diff{{"wire b->a", "#0: model a, rxe b"}, {"completions a", "#1: x"}},
			CABIVerdict: VerdictMismatch, CABIDiffs: []Diff{{"memory b.buf", "+0: y"}}},
		{Scenario: "ack-loss", Verdict: VerdictMatch},
	})
	assert.True(t, strings.HasPrefix(got, "# Differential results"), got)
	assert.Contains(t, got, "\nProduced from commit abc123, on guests running kernel 6.1.0-56-amd64, on 2026-11-24.\n")
	assert.Contains(t, got, "| scenario | verdict | C ABI | what differed | cause |\n|---|---|---|---|---|\n"+
		"| go-back-n | match | match |  |  |\n"+
		"| rnr | known deviation | MISMATCH | wire b->a, completions a, C ABI: memory b.buf | rxe \\| something |\n"+
		"| ack-loss | match | - |  |  |\n")
	assert.Contains(t, got, "\n## rnr: known deviation\n\nrxe | something\n\n- wire b->a: #0: model a, rxe b\n- completions a: #1: x\n")
	assert.Contains(t, got, "\n## rnr (C ABI): MISMATCH\n\n- memory b.buf: +0: y\n")
	assert.NotContains(t, got, "## go-back-n")
}

// TestSyndromeClass names every syndrome type and NAK code.
func TestSyndromeClass(t *testing.T) {
	for s, want := range map[wire.Syndrome]string{
		wire.ACKSyndrome(wire.CreditsUnlimited):    "ACK",
		wire.ACKSyndrome(3):                        "ACK",
		wire.RNRNAKSyndrome(30):                    "RNR",
		wire.NAKSyndrome(wire.NAKPSNSequenceError): "NAK-SEQ",
		wire.NAKSyndrome(wire.NAKInvalidRequest):   "NAK-INV",
		wire.NAKSyndrome(wire.NAKRemoteAccess):     "NAK-ACC",
		wire.NAKSyndrome(wire.NAKRemoteOperation):  "NAK-OP",
		wire.NAKSyndrome(wire.NAKInvalidRDRequest): "NAK-INV-RD",
		wire.NAKSyndrome(9):                        "NAK-9",
		wire.Syndrome(0x40):                        "RESERVED",
	} {
		assert.Equal(t, want, SyndromeClass(s), "%#x", uint8(s))
	}
}

// lookup returns the differential scenario called name.
func lookup(t *testing.T, name string) *scenario.Scenario {
	t.Helper()
	ss, err := Scenarios()
	require.NoError(t, err)
	for _, s := range ss {
		if s.Name == name {
			return s
		}
	}
	t.Fatalf("no differential scenario %q", name)
	return nil
}

// modelOutcome runs the differential scenario called name in the model.
func modelOutcome(t *testing.T, name string) *Outcome {
	t.Helper()
	o, res, err := ModelOutcome(lookup(t, name), "")
	require.NoError(t, err)
	require.Empty(t, res.Failed)
	return o
}

// TestCompareIgnoresUndefinedFieldsOfErrors: a completion that is not a
// success defines only wr_id and status (ibv_poll_cq(3)); rxe zeroes the
// rest, the model fills in the opcode, and that is no difference.
func TestCompareIgnoresUndefinedFieldsOfErrors(t *testing.T) {
	model := &Outcome{Completions: []OutcomeWC{{Node: "a", WRID: 1, Status: "IBV_WC_REM_ACCESS_ERR", Opcode: "IBV_WC_RDMA_WRITE", WCFlags: "0"}}}
	real := &Outcome{Completions: []OutcomeWC{{Node: "a", WRID: 1, Status: "IBV_WC_REM_ACCESS_ERR", Opcode: "IBV_WC_SEND", ByteLen: 7, WCFlags: "IBV_WC_GRH"}}}
	if d := Compare(model, real); len(d) != 0 {
		t.Errorf("Compare = %v, want no difference", d)
	}
	real.Completions[0].Status = "IBV_WC_WR_FLUSH_ERR"
	if d := Compare(model, real); len(d) != 1 {
		t.Errorf("Compare = %v, want the status difference", d)
	}
}

// TestCheckClaimsOnAnOutcome: a scenario's claims on completions are
// evaluated on an Outcome (the rxe leg's, the C ABI leg's) as the
// simulation evaluates them on its Result: every scenario's own model
// Outcome meets them, and mw-send-inv's receive flagged as libibverbs
// means it (IBV_WC_WITH_INV) instead of as rxe does fails its flags=.
func TestCheckClaimsOnAnOutcome(t *testing.T) {
	ss, err := Scenarios()
	require.NoError(t, err)
	total := 0
	for _, s := range ss {
		p, err := s.Program()
		require.NoError(t, err)
		n, failed := CheckClaims(s, p, modelOutcome(t, s.Name))
		assert.Empty(t, failed, s.Name)
		total += n
	}
	assert.Greater(t, total, 44, "most scenarios claim completions")

	s := lookup(t, "mw-send-inv")
	p, err := s.Program()
	require.NoError(t, err)
	o := modelOutcome(t, s.Name)
	i := slices.IndexFunc(o.Completions, func(c OutcomeWC) bool { return c.Node == "b" && c.WRID == 20 })
	require.GreaterOrEqual(t, i, 0)
	require.Equal(t, "IBV_WC_GRH|IBV_WC_IP_CSUM_OK", o.Completions[i].WCFlags)
	o.Completions[i].WCFlags = "IBV_WC_WITH_INV"
	_, failed := CheckClaims(s, p, o)
	require.Len(t, failed, 1)
	assert.Regexp(t, `^line \d+: expect b\.q wr=20 IBV_WC_SUCCESS opcode=IBV_WC_RECV byte_len=16 flags=IBV_WC_GRH\|IBV_WC_IP_CSUM_OK profile=rxe: got flags IBV_WC_WITH_INV$`, failed[0])
}

// TestSpecClaimsOfScenarios: the differential runs the scenarios under
// the rxe profile only, so the claims they make for the IBTA profile
// (profile=spec, flags= of receives among them) are checked here: a
// scenario that makes one meets all its claims under spec.
func TestSpecClaimsOfScenarios(t *testing.T) {
	ss, err := Scenarios()
	require.NoError(t, err)
	n := 0
	for _, s := range ss {
		if !strings.Contains(s.Text, "profile=spec") {
			continue
		}
		n++
		res, err := s.Run(scenario.Options{Profile: nic.ProfileSpec})
		require.NoError(t, err, s.Name)
		assert.Empty(t, res.Failed, s.Name)
	}
	assert.GreaterOrEqual(t, n, 8)
}
