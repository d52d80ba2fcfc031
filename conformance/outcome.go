package conformance

// A differential run, in order:
//   1. The scenario runs in the simulation (ModelOutcome: the rxe profile,
//      a pcapng of the link) and, replayed from its Program, on two rxe
//      VMs through the fault switch (its pcapng, the agents' completions
//      and memory dumps).
//   2. Each side becomes an Outcome: completions per node in poll order,
//      every region's final bytes, the asynchronous events per node (but
//      port events), and the frames between the nodes normalised
//      (NormaliseCapture): QPNs, addresses, keys and times left out, PSNs
//      as offsets from the stream's base, AETH syndromes as their class.
//   3. Compare lists the first difference of each part: completions per
//      node, memory per region, async events per node, the wire per
//      direction (the interleaving of the two directions is timing, not
//      behaviour).
//   4. RenderResults writes the table of verdicts (RESULTS.md).

import (
	"bytes"
	"fmt"
	"io"
	"net/netip"
	"os"
	"slices"
	"strconv"
	"strings"

	"github.com/rocesim/rocesim/nic"
	"github.com/rocesim/rocesim/scenario"
	"github.com/rocesim/rocesim/wire"
	"github.com/rocesim/rocesim/wire/capture"
)

// Outcome is what a run of a two-node scenario did, with everything that
// legitimately differs between implementations normalised away: QPNs,
// PSN bases, addresses, keys and times. Two Outcomes of the same scenario
// are compared with Compare.
type Outcome struct {
	// Completions are the work completions polled, sorted stably by node
	// index: per node, in the order polled.
	Completions []OutcomeWC
	// Memory is every memory region's final bytes ("node.mr"), in
	// declaration order.
	Memory []scenario.MemoryRegion
	// Wire is every frame sent between the nodes' RoCE ports, in capture
	// order (NormaliseCapture).
	Wire []WireEvent
	// Async are the asynchronous events each node read, in order, but for
	// port events (ComparedAsync).
	Async []OutcomeAsync
	// Rereg are the answers of the rereg steps, node by node, in step
	// order.
	Rereg []OutcomeRereg
}

// OutcomeRereg is the answer of one ibv_rereg_mr.
type OutcomeRereg struct {
	MR     string // "node.mr"
	Answer string // "ok", or the errno's name (scenario.ErrnoName)
}

// String is "node.mr answer".
func (a OutcomeRereg) String() string { return a.MR + " " + a.Answer }

// OutcomeAsync is one asynchronous event of a node.
type OutcomeAsync struct {
	Node string
	Type string // IBV_EVENT_CQ_ERR, ...
}

// String is the event's type.
func (a OutcomeAsync) String() string { return a.Type }

// ComparedAsync reports whether an event of this type is compared. Port
// events are not: the guests' ports come up at boot, and a link the
// fault plan takes down is a port event in the simulation but only lost
// frames at the fault switch.
func ComparedAsync(typ string) bool {
	return typ != "IBV_EVENT_PORT_ACTIVE" && typ != "IBV_EVENT_PORT_ERR"
}

// OutcomeWC is one work completion without its QPN.
type OutcomeWC struct {
	Node    string
	WRID    uint64
	Status  string // IBV_WC_SUCCESS, ...
	Opcode  string // IBV_WC_SEND, ...
	ByteLen uint32
	Imm     uint32 // 0 unless the completion carries immediate data
	// WCFlags are its wc_flags as a program reads them, spelled as
	// scenario.WCFlagsName does ("IBV_WC_GRH|IBV_WC_WITH_IMM", "0"): rxe's
	// as the agent printed them, the model's from its Result.
	WCFlags string
}

// String formats the completion for a Diff: "wr=2 IBV_WC_SUCCESS
// IBV_WC_SEND byte_len=4096 flags=0".
//
// A completion that is not a success shows only its wr_id and status:
// ibv_poll_cq(3) leaves the other fields undefined then (rxe zeroes them,
// the model fills in the work request's opcode), so Compare, which
// compares these strings, compares only what is defined.
func (c OutcomeWC) String() string {
	if c.Status != "IBV_WC_SUCCESS" {
		return "wr=" + strconv.FormatUint(c.WRID, 10) + " " + c.Status
	}
	s := "wr=" + strconv.FormatUint(c.WRID, 10) + " " + c.Status + " " + c.Opcode + " byte_len=" + strconv.FormatUint(uint64(c.ByteLen), 10)
	if c.Imm != 0 {
		s += " imm=" + strconv.FormatUint(uint64(c.Imm), 10)
	}
	return s + " flags=" + c.WCFlags
}

// WireEvent is one RoCE v2 frame between the nodes, normalised.
type WireEvent struct {
	From string // node name of the sender
	To   string // node name of the receiver
	// Op is the opcode as the wire package names it (RC_SEND_FIRST,
	// RC_ACKNOWLEDGE, ...).
	Op string
	// PSN is the offset from the stream's base (mod 2^24): a request from
	// X counts from X's QP.PSN, a response from X from its peer's QP.PSN
	// (the requester's stream it answers).
	PSN    uint32
	AckReq bool
	// Syndrome is the AETH syndrome's class, for frames with an AETH:
	// "ACK", "RNR", "NAK-SEQ", "NAK-INV", "NAK-ACC", "NAK-OP",
	// "NAK-INV-RD" or "RESERVED" (not the credit count, not the RNR
	// timer); "" without an AETH.
	Syndrome string
	// MSN is the AETH's MSN; 0 without an AETH.
	MSN uint32
	// Dropped is set when the capture comment says the frame was dropped
	// (by the fault plan, or by the simulated link).
	Dropped bool
}

// String formats the event for a Diff: "RC_ACKNOWLEDGE psn+3 ACK msn=1",
// "RC_SEND_LAST psn+3 ackreq dropped".
func (e WireEvent) String() string {
	s := e.Op + " psn+" + strconv.FormatUint(uint64(e.PSN), 10)
	if e.AckReq {
		s += " ackreq"
	}
	if e.Syndrome != "" {
		s += " " + e.Syndrome + " msn=" + strconv.FormatUint(uint64(e.MSN), 10)
	}
	if e.Dropped {
		s += " dropped"
	}
	return s
}

// SyndromeClass names an AETH syndrome's class as WireEvent.Syndrome
// does: the type, and the code of a NAK (IBTA vol. 1 §9.7.5.2.1, table
// 43).
func SyndromeClass(s wire.Syndrome) string {
	switch s.Type() {
	case wire.SyndromeACK:
		return "ACK"
	case wire.SyndromeRNRNAK:
		return "RNR"
	case wire.SyndromeNAK:
		switch s.NAKCode() {
		case wire.NAKPSNSequenceError:
			return "NAK-SEQ"
		case wire.NAKInvalidRequest:
			return "NAK-INV"
		case wire.NAKRemoteAccess:
			return "NAK-ACC"
		case wire.NAKRemoteOperation:
			return "NAK-OP"
		case wire.NAKInvalidRDRequest:
			return "NAK-INV-RD"
		}
		return "NAK-" + strconv.Itoa(int(s.NAKCode()))
	}
	return "RESERVED"
}

// NodeIPv4 is the IPv4 address of node i (from 0) of a Program, in a run
// and on the VMs: 10.0.0.(i+1).
func NodeIPv4(i int) netip.Addr { return netip.AddrFrom4([4]byte{10, 0, 0, byte(i + 1)}) }

// NormaliseCapture reads a capture of the link between a Program's two
// nodes (pcap or pcapng: a fabric tap's or the fault switch's) and
// returns its RoCE v2 frames as WireEvents, in capture order. The sender
// is the node whose address is the IPv4 source (NodeIPv4); frames that do
// not decode as RoCE v2 (ARP, ICMP, TCP) are skipped, and a RoCE frame
// from another address is an error. A frame dropped on the way is in the
// capture once, with a comment saying so (both the fabric and the switch
// write it once, at the sender's side), and becomes one event with
// Dropped set; the extra copies a dup rule made were on the wire and are
// events of their own. pcap has no comments, so nothing is Dropped there.
func NormaliseCapture(r io.Reader, p *scenario.Program) ([]WireEvent, error) {
	if len(p.Nodes) != 2 {
		return nil, fmt.Errorf("conformance: normalise: program %s has %d nodes, want 2", p.Name, len(p.Nodes))
	}
	cr, err := capture.NewReader(r)
	if err != nil {
		return nil, fmt.Errorf("conformance: normalise %s: %w", p.Name, err)
	}
	var (
		out []WireEvent
		pkt wire.Packet
		n   int // record number, from 1, as Wireshark counts
	)
	for rec, err := range cr.Records() {
		n++
		if err != nil {
			return nil, fmt.Errorf("conformance: normalise %s: record %d: %w", p.Name, n, err)
		}
		if pkt.DecodeHeaders(rec.Data) != nil {
			continue
		}
		from := -1
		if pkt.IPv4 != nil {
			for i := range p.Nodes {
				if pkt.IPv4.Src() == NodeIPv4(i) {
					from = i
				}
			}
		}
		if from < 0 {
			return nil, fmt.Errorf("conformance: normalise %s: record %d: %s from %s, which is neither node's address (%s, %s)",
				p.Name, n, pkt.Info.Name, srcOf(&pkt), NodeIPv4(0), NodeIPv4(1))
		}
		// Requests count from the sender's send PSN; responses answer the
		// peer's requests and count from the peer's.
		base := p.Nodes[from].QP.PSN
		if pkt.Info.Kind.IsResponse() {
			base = p.Nodes[1-from].QP.PSN
		}
		e := WireEvent{From: p.Nodes[from].Name, To: p.Nodes[1-from].Name, Op: pkt.Info.Name,
			PSN: uint32(pkt.BTH.PSN().Sub(base)), AckReq: pkt.BTH.AckReq(), Dropped: dropped(rec.Comments)}
		if pkt.AETH != nil {
			e.Syndrome, e.MSN = SyndromeClass(pkt.AETH.Syndrome()), pkt.AETH.MSN()
		}
		out = append(out, e)
	}
	return out, nil
}

// srcOf returns the frame's IP source for messages.
func srcOf(p *wire.Packet) string {
	if p.IPv4 != nil {
		return p.IPv4.Src().String()
	}
	if p.IPv6 != nil {
		return p.IPv6.Src().String()
	}
	return "?"
}

// dropped reports whether a frame's capture comments say it was dropped:
// "dropped by rule N: ..." (faults.Verdict.String, written by the fabric
// and the switch) or the fabric's own "dropped: ..." (queue, MTU, a held
// frame whose link went down). The fabric puts the sender's note first,
// "note; dropped by rule ...".
func dropped(comments []string) bool {
	for _, c := range comments {
		for part := range strings.SplitSeq(c, "; ") {
			if strings.HasPrefix(part, "dropped by rule ") || strings.HasPrefix(part, "dropped: ") {
				return true
			}
		}
	}
	return false
}

// ModelOutcome runs s in the simulation under the rxe profile with a
// pcapng capture of the link (written to capturePath when it is not "",
// else kept in memory) and returns its normalised Outcome and the run's
// Result (whose Failed lists the expectations not met; that is not an
// error). s must be a two-node RC scenario (scenario.Program).
func ModelOutcome(s *scenario.Scenario, capturePath string) (*Outcome, *scenario.Result, error) {
	p, err := s.Program()
	if err != nil {
		return nil, nil, fmt.Errorf("conformance: %w", err)
	}
	var (
		buf bytes.Buffer
		w   capture.Writer
	)
	opts := capture.PcapngOptions{Comment: "rocesim model run of scenario " + s.Name + " (rxe profile), plan:\n" + planOrNone(p.Faults)}
	if capturePath != "" {
		w, err = capture.Create(capturePath, opts)
	} else {
		w, err = capture.NewWriter(&buf, capture.FormatPcapng, opts)
	}
	if err != nil {
		return nil, nil, fmt.Errorf("conformance: model capture of %s: %w", s.Name, err)
	}
	res, err := s.Run(scenario.Options{Profile: nic.ProfileRXE, Capture: w})
	if cerr := w.Close(); err == nil && cerr != nil {
		err = fmt.Errorf("conformance: model capture of %s: %w", s.Name, cerr)
	}
	if err != nil {
		return nil, res, err
	}
	var r io.Reader = &buf
	if capturePath != "" {
		f, err := os.Open(capturePath)
		if err != nil {
			return nil, res, fmt.Errorf("conformance: %w", err)
		}
		defer f.Close()
		r = f
	}
	ev, err := NormaliseCapture(r, p)
	if err != nil {
		return nil, res, err
	}
	o := &Outcome{Memory: res.Memory, Wire: ev}
	for _, n := range p.Nodes { // stably by node: poll order within a node
		for _, c := range res.Completions {
			if c.Node == n.Name {
				o.Completions = append(o.Completions, OutcomeWC{Node: c.Node, WRID: c.WRID, Status: c.Status,
					Opcode: c.Opcode, ByteLen: c.ByteLen, Imm: c.Imm, WCFlags: c.WCFlags})
			}
		}
		for _, a := range res.AsyncEvents {
			if a.Node == n.Name && ComparedAsync(a.Type) {
				o.Async = append(o.Async, OutcomeAsync{Node: a.Node, Type: a.Type})
			}
		}
		for _, a := range res.Rereg {
			if strings.HasPrefix(a.MR, n.Name+".") {
				o.Rereg = append(o.Rereg, OutcomeRereg{MR: a.MR, Answer: a.Errno})
			}
		}
	}
	return o, res, nil
}

// CheckClaims evaluates s's claims on completions (expect node.qp wr=N
// ... and node.qp completions ..., those for the rxe profile and those for
// any) against an Outcome of its Program p: a run on real rxe or through
// the C ABI, where the scenario's own checks never ran. Each node's
// completions are its one QP's. It returns how many claims it checked and
// those not met (scenario.Scenario.CheckCompletions).
func CheckClaims(s *scenario.Scenario, p *scenario.Program, o *Outcome) (int, []string) {
	wcs := map[string][]scenario.Completion{}
	for _, n := range p.Nodes {
		qp := n.Name + "." + n.QP.Name
		for _, c := range o.Completions {
			if c.Node == n.Name {
				wcs[qp] = append(wcs[qp], scenario.Completion{Node: c.Node, WRID: c.WRID, Status: c.Status,
					Opcode: c.Opcode, ByteLen: c.ByteLen, Imm: c.Imm, WCFlags: c.WCFlags})
			}
		}
	}
	return s.CheckCompletions(nic.ProfileRXE, wcs)
}

func planOrNone(text string) string {
	if text == "" {
		return "(none)"
	}
	return text
}

// Diff is one difference between two Outcomes.
type Diff struct {
	// What names the part that differs: "completions a", "memory b.buf",
	// "wire a->b".
	What string
	// Detail is the first difference, readable: "#3: model RC_SEND_LAST
	// psn+3, rxe RC_SEND_MIDDLE psn+2" (#N counts from 0).
	Detail string
}

// String returns "What: Detail".
func (d Diff) String() string { return d.What + ": " + d.Detail }

// Compare lists the differences between the model's Outcome and real
// rxe's, one Diff per part that differs, giving its first difference:
//
//   - completions, node by node, in poll order: wr_id, status, opcode,
//     byte_len, imm, wc_flags;
//   - memory, region by region, byte for byte (the first differing offset
//     and how many bytes differ);
//   - the answers of the rereg steps (ibv_rereg_mr), in order;
//   - the wire, direction by direction (sender to receiver), in order: op,
//     PSN offset, AckReq, syndrome class, MSN, dropped. How the two
//     directions interleave is timing and is not compared.
//
// Nodes, regions and directions are taken in the order they first appear
// in model, then in real. No differences: nil.
func Compare(model, real *Outcome) []Diff {
	var out []Diff
	// Completions per node.
	for _, n := range order(model.Completions, real.Completions, func(c OutcomeWC) string { return c.Node }) {
		m, r := filter(model.Completions, n, func(c OutcomeWC) string { return c.Node }), filter(real.Completions, n, func(c OutcomeWC) string { return c.Node })
		if d, ok := firstDiff(defined(m), defined(r), OutcomeWC.String); ok {
			out = append(out, Diff{What: "completions " + n, Detail: d})
		}
	}
	// Memory per region.
	name := func(m scenario.MemoryRegion) string { return m.Name }
	for _, n := range order(model.Memory, real.Memory, name) {
		m, r := filter(model.Memory, n, name), filter(real.Memory, n, name)
		switch {
		case len(m) == 0:
			out = append(out, Diff{What: "memory " + n, Detail: "only in rxe"})
		case len(r) == 0:
			out = append(out, Diff{What: "memory " + n, Detail: "only in the model"})
		default:
			if d, ok := memDiff(m[0].Bytes, r[0].Bytes); ok {
				out = append(out, Diff{What: "memory " + n, Detail: d})
			}
		}
	}
	// Asynchronous events per node.
	node := func(a OutcomeAsync) string { return a.Node }
	for _, n := range order(model.Async, real.Async, node) {
		if d, ok := firstDiff(filter(model.Async, n, node), filter(real.Async, n, node), OutcomeAsync.String); ok {
			out = append(out, Diff{What: "async events " + n, Detail: d})
		}
	}
	// The answers of ibv_rereg_mr, in order.
	if d, ok := firstDiff(model.Rereg, real.Rereg, OutcomeRereg.String); ok {
		out = append(out, Diff{What: "rereg", Detail: d})
	}
	// The wire per direction.
	dir := func(e WireEvent) string { return e.From + "->" + e.To }
	for _, d := range order(model.Wire, real.Wire, dir) {
		if s, ok := firstDiff(filter(model.Wire, d, dir), filter(real.Wire, d, dir), WireEvent.String); ok {
			out = append(out, Diff{What: "wire " + d, Detail: s})
		}
	}
	return out
}

// defined returns the completions with the fields ibv_poll_cq(3) leaves
// undefined (all but wr_id and status of a completion that is not a
// success) cleared.
func defined(wcs []OutcomeWC) []OutcomeWC {
	out := make([]OutcomeWC, len(wcs))
	for i, c := range wcs {
		if c.Status != "IBV_WC_SUCCESS" {
			c = OutcomeWC{Node: c.Node, WRID: c.WRID, Status: c.Status}
		}
		out[i] = c
	}
	return out
}

// order returns the keys of a then b, each once, in order of first
// appearance.
func order[T any](a, b []T, key func(T) string) []string {
	var keys []string
	for _, xs := range [][]T{a, b} {
		for _, x := range xs {
			if k := key(x); !slices.Contains(keys, k) {
				keys = append(keys, k)
			}
		}
	}
	return keys
}

// filter returns the elements of xs whose key is k, in order.
func filter[T any](xs []T, k string, key func(T) string) []T {
	var out []T
	for _, x := range xs {
		if key(x) == k {
			out = append(out, x)
		}
	}
	return out
}

// firstDiff describes the first index where m and r differ, or reports
// false when they are equal.
func firstDiff[T comparable](m, r []T, str func(T) string) (string, bool) {
	for i := range max(len(m), len(r)) {
		switch {
		case i >= len(m):
			return fmt.Sprintf("#%d: model none (%d in all), rxe %s (%d in all)", i, len(m), str(r[i]), len(r)), true
		case i >= len(r):
			return fmt.Sprintf("#%d: model %s (%d in all), rxe none (%d in all)", i, str(m[i]), len(m), len(r)), true
		case m[i] != r[i]:
			return fmt.Sprintf("#%d: model %s, rxe %s", i, str(m[i]), str(r[i])), true
		}
	}
	return "", false
}

// memDiff describes how two regions' bytes differ, or reports false when
// they are equal.
func memDiff(m, r []byte) (string, bool) {
	if len(m) != len(r) {
		return fmt.Sprintf("model %d bytes, rxe %d bytes", len(m), len(r)), true
	}
	first, n := -1, 0
	for i := range m {
		if m[i] != r[i] {
			if first < 0 {
				first = i
			}
			n++
		}
	}
	if n == 0 {
		return "", false
	}
	return fmt.Sprintf("+%d: model 0x%02x, rxe 0x%02x; %d of %d bytes differ", first, m[first], r[first], n, len(m)), true
}

// Verdicts of a ResultRow.
const (
	VerdictMatch          = "match"
	VerdictKnownDeviation = "known deviation"
	VerdictMismatch       = "MISMATCH"
)

// ResultRow is one scenario's line in the differential results.
type ResultRow struct {
	Scenario string
	// Verdict is VerdictMatch, VerdictKnownDeviation (every Diff is
	// explained by Cause) or VerdictMismatch.
	Verdict string
	// Diffs are Compare's differences (none for a match).
	Diffs []Diff
	// Cause explains a known deviation (or says why a run failed).
	Cause string
	// CABIVerdict is the C-ABI leg's verdict against the same rxe run
	// (the agent on the drop-in library: CABI), "" when it did not run;
	// CABIDiffs its differences.
	CABIVerdict string
	CABIDiffs   []Diff
}

// Provenance says what a results document was produced from, so that a
// reader can tell whether it still describes the code in front of them.
type Provenance struct {
	Commit string // the model's git commit, "-dirty" appended when the tree had changes
	Kernel string // the guests' kernel release, e.g. 6.1.0-56-amd64
	Date   string // the day of the run, YYYY-MM-DD (UTC)
}

// RenderResults writes the differential results as a markdown document:
// a title, the provenance line, a table with one row per scenario
// (scenario, verdict, what differed, cause), then the details of every
// scenario with differences.
func RenderResults(pv Provenance, rows []ResultRow) string {
	var b strings.Builder
	b.WriteString("# Differential results: rocesim against Linux rxe\n\n")
	fmt.Fprintf(&b, "Produced from commit %s, on guests running kernel %s, on %s.\n\n", pv.Commit, pv.Kernel, pv.Date)
	b.WriteString("Each scenario of conformance/scenarios ran in the simulation (two model NICs, rxe profile) and on two\n")
	b.WriteString("rxe VMs through the fault switch under the same fault plan. Compared, after normalising QPNs, PSN bases,\n")
	b.WriteString("addresses, keys and times: completions (order, wr_id, status; opcode, byte_len, imm and wc_flags of successes), final\n")
	b.WriteString("memory, asynchronous events (but port events), and the wire per direction (opcode, PSN offset, AckReq, AETH\n")
	b.WriteString("syndrome class, MSN, dropped). What is not compared, and why, and the known deviations with their causes:\n")
	b.WriteString("conformance/README.md.\n\n")
	b.WriteString("The C ABI column: the same scenario run as the conformance agent (conformance/agent/agent.c) on the\n")
	b.WriteString("drop-in libibverbs.so.1, two processes on a fabric daemon with the same plan, compared with the same\n")
	b.WriteString("rxe run (\"-\": not run).\n\n")
	b.WriteString("| scenario | verdict | C ABI | what differed | cause |\n")
	b.WriteString("|---|---|---|---|---|\n")
	for _, r := range rows {
		var what []string
		for _, d := range r.Diffs {
			what = append(what, d.What)
		}
		for _, d := range r.CABIDiffs {
			what = append(what, "C ABI: "+d.What)
		}
		cabi := r.CABIVerdict
		if cabi == "" {
			cabi = "-"
		}
		fmt.Fprintf(&b, "| %s | %s | %s | %s | %s |\n", cell(r.Scenario), cell(r.Verdict), cell(cabi), cell(strings.Join(what, ", ")), cell(r.Cause))
	}
	for _, r := range rows {
		renderDiffs(&b, r.Scenario, r.Verdict, r.Cause, r.Diffs)
		renderDiffs(&b, r.Scenario+" (C ABI)", r.CABIVerdict, "", r.CABIDiffs)
	}
	return b.String()
}

// renderDiffs writes one scenario's differences under a heading, if it
// has any.
func renderDiffs(b *strings.Builder, name, verdict, cause string, diffs []Diff) {
	if len(diffs) == 0 {
		return
	}
	fmt.Fprintf(b, "\n## %s: %s\n\n", name, verdict)
	if cause != "" {
		fmt.Fprintf(b, "%s\n\n", cause)
	}
	for _, d := range diffs {
		fmt.Fprintf(b, "- %s: %s\n", d.What, d.Detail)
	}
}

// cell makes s safe in a markdown table cell.
func cell(s string) string {
	s = strings.ReplaceAll(s, "|", `\|`)
	return strings.ReplaceAll(s, "\n", " ")
}
