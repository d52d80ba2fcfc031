package wire_test

import (
	"bytes"
	"encoding/hex"
	"flag"
	"fmt"
	"math/bits"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/rocesim/rocesim/wire"
)

var update = flag.Bool("update", false, "regenerate golden files from tshark")

// dissectFields are the tshark fields compared with our decoder. Wireshark
// shows the AtomicETH address and key under the infiniband.reth names, and
// the payload as data.len (absent when empty).
var dissectFields = []string{
	"frame.number",
	"eth.src", "eth.dst", "ip.src", "ip.dst", "ipv6.src", "ipv6.dst", "udp.srcport", "udp.dstport",
	"infiniband.bth.opcode", "infiniband.bth.se", "infiniband.bth.m", "infiniband.bth.padcnt",
	"infiniband.bth.tver", "infiniband.bth.p_key", "infiniband.bth.destqp", "infiniband.bth.a",
	"infiniband.bth.reserved7", "infiniband.bth.psn",
	"infiniband.deth.q_key", "infiniband.deth.srcqp",
	"infiniband.reth.va", "infiniband.reth.r_key", "infiniband.reth.dmalen",
	"infiniband.atomiceth.swapdt", "infiniband.atomiceth.cmpdt",
	"infiniband.aeth.syndrome", "infiniband.aeth.msn",
	"infiniband.atomicacketh.origremdt", "infiniband.immdt", "infiniband.ieth",
	"data.len", "infiniband.invariant.crc",
}

// payloadHeuristics are the short names of the heuristic dissectors that
// Wireshark 4.0 registers on infiniband.payload. Every tshark run of these
// tests keeps them on, as a user's Wireshark does; only the second pass
// over the short SENDs a heuristic breaks (checkHeuristics)
// turns them off, to see those frames' payload and ICRC.
var payloadHeuristics = []string{"smcr_infiniband", "smb_direct_infiniband", "rpcrdma_infiniband",
	"nvme_rdma", "lnet_ib", "iser_infiniband", "eth_over_ib", "mellanox_eoib", "sdp_infiniband", "fc_infiniband"}

// rpcrdmaMinLen is the shortest SEND payload (pad included: Wireshark
// hands everything between the headers and the ICRC to the payload
// dissectors) that Wireshark 4.0's heuristic payload dissectors read
// without running off its end. It is MIN_RPCRDMA_HDR_SZ in
// epan/dissectors/packet-rpcrdma.c: dissect_rpcrdma_ib_heur, registered on
// infiniband.payload for the RC SEND opcodes, reads the RPC-over-RDMA
// message type at payload bytes 12..15 before it checks the length, so
// every shorter RC SEND (ONLY, LAST, with invalidate) throws and shows as
// [Malformed Packet], whatever it holds. The Mellanox EoIB heuristic
// (dissect_mellanox_eoib, packet-infiniband.c) does the same to a UD SEND
// with an empty payload (measured with 4.0.17: TestEncodedFramesDissectCleanly).
// The InfiniBand headers above the payload are dissected before the throw.
const rpcrdmaMinLen = 16

// heuristicClaimers are the last protocol of frame.protocols for the two
// heuristics of rpcrdmaMinLen: the only ones allowed to break a frame.
var heuristicClaimers = []string{"rpcordma", "infiniband.eoib"}

// shortSend reports whether Wireshark's payload heuristics may break the
// dissection of p (see rpcrdmaMinLen): a SEND (any transport, with
// immediate or invalidate too) whose payload and pad are shorter than
// rpcrdmaMinLen. Such a frame may show as malformed, and tshark then
// leaves its data.len and ICRC empty; no other frame may.
func shortSend(p *wire.Packet) bool {
	return p.BTH.Opcode().Info().Kind == wire.KindSend && len(p.Payload)+len(p.Pad) < rpcrdmaMinLen
}

// dissect runs tshark over a capture and returns its field table for the
// RoCE frames, header line first. With heuristics false, Wireshark's
// heuristic payload dissectors are turned off (the second pass of
// checkHeuristics); every other caller passes true.
func dissect(t testing.TB, pcap string, heuristics bool, extra ...string) []byte {
	args := []string{"-r", pcap}
	if !heuristics {
		for _, h := range payloadHeuristics {
			args = append(args, "--disable-heuristic", h)
		}
	}
	args = append(args, extra...)
	args = append(args, "-Y", "udp.dstport == 4791", "-T", "fields", "-E", "header=y", "-E", "separator=\t")
	for _, f := range dissectFields {
		args = append(args, "-e", f)
	}
	return tshark(t, args...)
}

// checkHeuristics opens pcap in tshark with every heuristic dissector on
// (plus extra preferences) and fails t for any RoCE frame tshark flags as
// malformed or with an expert warning or error, except a shortSend the
// RPC-over-RDMA or EoIB heuristic broke: the documented Wireshark
// limitation (README, "Wireshark"). The heuristics may also take a longer
// SEND's payload without a word (RPC-over-RDMA does so with rxe's 64 zero
// bytes in rxe_rnr_exceeded.pcap: no data.len, nothing malformed), so it
// dissects every SEND again with the heuristics off and compares every
// field, payload length and ICRC included, with our decode; that pass must
// flag nothing. It returns the frame numbers a heuristic broke.
func checkHeuristics(t *testing.T, pcap string, frames [][]byte, extra ...string) []int {
	t.Helper()
	// RoCE frames only: the real captures also hold the harness's own
	// TCP control connection, whose resets tshark rightly warns about.
	filter := "udp.port == 4791 && (_ws.malformed || _ws.expert.severity >= \"warning\")"
	flagged := func(heuristics bool) [][]string {
		args := []string{"-r", pcap}
		if !heuristics {
			for _, h := range payloadHeuristics {
				args = append(args, "--disable-heuristic", h)
			}
		}
		args = append(append(args, extra...), "-Y", filter, "-T", "fields", "-E", "separator=|",
			"-e", "frame.number", "-e", "frame.protocols", "-e", "_ws.malformed", "-e", "_ws.col.Info", "-e", "_ws.expert.message")
		var rows [][]string
		for _, line := range strings.Split(strings.TrimSpace(string(tshark(t, args...))), "\n") {
			if line != "" {
				rows = append(rows, strings.Split(line, "|"))
			}
		}
		return rows
	}
	var broken []int
	var p wire.Packet
	for _, r := range flagged(true) {
		no, err := strconv.Atoi(r[0])
		if err != nil || no < 1 || no > len(frames) || len(r) < 4 {
			t.Fatalf("tshark row %q", r)
		}
		protos := strings.Split(r[1], ":")
		if p.Decode(frames[no-1]) != nil || !shortSend(&p) || !slices.Contains(heuristicClaimers, protos[len(protos)-1]) || r[2] == "" {
			t.Errorf("frame %d: tshark (heuristics on) flags it and it is not a SEND shorter than %d bytes a payload heuristic broke: %s", no, rpcrdmaMinLen, strings.Join(r[1:], " | "))
			continue
		}
		broken = append(broken, no)
	}
	sends := map[string]bool{}
	for i, f := range frames {
		if p.Decode(f) == nil && p.BTH.Opcode().Info().Kind == wire.KindSend {
			sends[strconv.Itoa(i+1)] = true
		}
	}
	if len(sends) == 0 {
		return broken
	}
	for _, r := range flagged(false) {
		t.Errorf("frame %s: tshark (heuristics off) flags it: %s", r[0], strings.Join(r[1:], " | "))
	}
	lines := strings.Split(strings.TrimRight(string(dissect(t, pcap, false, extra...)), "\n"), "\n")
	table := "# " + lines[0] + "\n"
	for _, line := range lines[1:] {
		if no, _, _ := strings.Cut(line, "\t"); sends[no] {
			table += line + "\n"
		}
	}
	if n := compareDissection(t, []byte(table), frames); n != len(sends) {
		t.Errorf("heuristics off, tshark dissected %d of the %d SENDs as RoCE", n, len(sends))
	}
	return broken
}

// canon turns a field value into a comparable form: numbers in decimal
// (tshark mixes hex and decimal, and prints byte fields as aa:bb:..),
// addresses as text.
func canon(field, v string) string {
	if v == "" {
		return ""
	}
	switch field {
	case "eth.src", "eth.dst", "ip.src", "ip.dst", "ipv6.src", "ipv6.dst":
		return strings.ToLower(v)
	case "infiniband.immdt", "infiniband.ieth":
		// Wireshark 4.0 adds the ImmDt item twice ("a,a"); one value is enough.
		v, _, _ = strings.Cut(v, ",")
		b, err := hex.DecodeString(strings.ReplaceAll(v, ":", ""))
		if err != nil || len(b) > 8 {
			return "bytes?" + v
		}
		var n uint64
		for _, c := range b {
			n = n<<8 | uint64(c)
		}
		return strconv.FormatUint(n, 10)
	}
	switch v {
	case "True":
		return "1"
	case "False":
		return "0"
	}
	n, err := strconv.ParseUint(v, 0, 64)
	if err != nil {
		return "?" + v
	}
	return strconv.FormatUint(n, 10)
}

// ourFields renders a decoded packet as the dissectFields columns, in the
// canonical form of canon.
func ourFields(frameNo int, p *wire.Packet) map[string]string {
	u := func(v uint64) string { return strconv.FormatUint(v, 10) }
	b := func(v bool) string {
		if v {
			return "1"
		}
		return "0"
	}
	m := map[string]string{
		"frame.number":             strconv.Itoa(frameNo),
		"eth.src":                  p.Eth.Src().String(),
		"eth.dst":                  p.Eth.Dst().String(),
		"udp.srcport":              u(uint64(p.UDP.SrcPort())),
		"udp.dstport":              u(uint64(p.UDP.DstPort())),
		"infiniband.bth.opcode":    u(uint64(p.BTH.Opcode())),
		"infiniband.bth.se":        b(p.BTH.SolicitedEvent()),
		"infiniband.bth.m":         b(p.BTH.MigReq()),
		"infiniband.bth.padcnt":    u(uint64(p.BTH.PadCount())),
		"infiniband.bth.tver":      u(uint64(p.BTH.TVer())),
		"infiniband.bth.p_key":     u(uint64(p.BTH.PKey())),
		"infiniband.bth.destqp":    u(uint64(p.BTH.DestQP())),
		"infiniband.bth.a":         b(p.BTH.AckReq()),
		"infiniband.bth.reserved7": u(uint64(p.BTH.Fields().Resv7)),
		"infiniband.bth.psn":       u(uint64(p.BTH.PSN())),
		// Wireshark reads the ICRC bytes big-endian; the CRC value is
		// carried least-significant byte first.
		"infiniband.invariant.crc": u(uint64(bits.ReverseBytes32(p.ICRCValue()))),
	}
	if p.IPv4 != nil {
		m["ip.src"], m["ip.dst"] = p.Src().String(), p.Dst().String()
	} else {
		m["ipv6.src"], m["ipv6.dst"] = p.Src().String(), p.Dst().String()
	}
	if p.DETH != nil {
		m["infiniband.deth.q_key"] = u(uint64(p.DETH.QKey()))
		m["infiniband.deth.srcqp"] = u(uint64(p.DETH.SrcQP()))
	}
	if p.RETH != nil {
		m["infiniband.reth.va"] = u(p.RETH.VA())
		m["infiniband.reth.r_key"] = u(uint64(p.RETH.RKey()))
		m["infiniband.reth.dmalen"] = u(uint64(p.RETH.DMALength()))
	}
	if p.AtomicETH != nil {
		m["infiniband.reth.va"] = u(p.AtomicETH.VA())
		m["infiniband.reth.r_key"] = u(uint64(p.AtomicETH.RKey()))
		m["infiniband.atomiceth.swapdt"] = u(p.AtomicETH.SwapAddData())
		m["infiniband.atomiceth.cmpdt"] = u(p.AtomicETH.CompareData())
	}
	if p.AETH != nil {
		m["infiniband.aeth.syndrome"] = u(uint64(p.AETH.Syndrome()))
		m["infiniband.aeth.msn"] = u(uint64(p.AETH.MSN()))
	}
	if p.AtomicAckETH != nil {
		m["infiniband.atomicacketh.origremdt"] = u(p.AtomicAckETH.OrigRemoteData())
	}
	if p.ImmDt != nil {
		m["infiniband.immdt"] = u(uint64(p.ImmDt.Value()))
	}
	if p.IETH != nil {
		m["infiniband.ieth"] = u(uint64(p.IETH.RKey()))
	}
	// Wireshark hands everything between the headers and the ICRC, pad
	// included, to the data dissector.
	if n := len(p.Payload) + len(p.Pad); n > 0 {
		m["data.len"] = strconv.Itoa(n)
	}
	if p.BTH.Opcode() == wire.OpCNP {
		// Wireshark 4.0 does not know the RoCE v2 CNP opcode: it shows the
		// BTH as "Unknown OpCode" and neither the reserved bytes nor the ICRC.
		delete(m, "data.len")
		delete(m, "infiniband.invariant.crc")
	}
	return m
}

// compareDissection checks every row of a tshark field table against our
// decode of the same frame (frames indexed by frame.number, from 1).
func compareDissection(t *testing.T, table []byte, frames [][]byte) int {
	t.Helper()
	lines := strings.Split(strings.TrimRight(string(table), "\n"), "\n")
	header := strings.Split(strings.TrimPrefix(lines[0], "# "), "\t")
	if strings.Join(header, " ") != strings.Join(dissectFields, " ") {
		t.Fatalf("field table header %q does not match dissectFields", lines[0])
	}
	var p wire.Packet
	rows := 0
	for _, line := range lines[1:] {
		cols := strings.Split(line, "\t")
		if len(cols) != len(dissectFields) {
			t.Fatalf("row %q has %d columns, want %d", line, len(cols), len(dissectFields))
		}
		no, err := strconv.Atoi(cols[0])
		if err != nil || no < 1 || no > len(frames) {
			t.Fatalf("bad frame number in row %q", line)
		}
		if err := p.Decode(frames[no-1]); err != nil {
			t.Errorf("frame %d: tshark dissects it as RoCE, we fail: %v", no, err)
			continue
		}
		ours := ourFields(no, &p)
		for i, f := range dissectFields {
			if cols[i] == "" && (f == "data.len" && p.BTH.Opcode().Info().Kind == wire.KindSend ||
				f == "infiniband.invariant.crc" && shortSend(&p)) {
				// A payload heuristic took the SEND's payload, or threw
				// before the ICRC was added (rpcrdmaMinLen);
				// checkHeuristics compares both with the heuristics off.
				continue
			}
			if want, got := canon(f, cols[i]), ours[f]; want != got {
				t.Errorf("frame %d (%s): %s: tshark %q, ours %q", no, p.Info.Name, f, cols[i], got)
			}
		}
		rows++
	}
	return rows
}

func goldenPath(pcap string) string {
	return strings.TrimSuffix(pcap, filepath.Ext(pcap)) + ".tshark.txt"
}

// TestCapturesMatchTsharkGolden compares our decode of every RoCE frame of
// every real rxe capture with tshark's dissection, held in a golden file
// beside the capture so this runs without tshark.
func TestCapturesMatchTsharkGolden(t *testing.T) {
	for _, pcap := range captures(t) {
		t.Run(filepath.Base(pcap), func(t *testing.T) {
			golden, err := os.ReadFile(goldenPath(pcap))
			if err != nil {
				t.Fatalf("missing golden (run go test ./wire -run TestTsharkGoldensCurrent -update): %v", err)
			}
			frames := readPcap(t, pcap)
			if n := compareDissection(t, golden, frames); n == 0 {
				t.Fatal("golden file lists no RoCE frames")
			}
		})
	}
}

// TestTsharkGoldensCurrent checks that the golden files are what tshark
// says today, heuristic dissectors on (-update rewrites them), and that
// tshark flags no frame of the real captures but the short SENDs a payload
// heuristic breaks (checkHeuristics).
func TestTsharkGoldensCurrent(t *testing.T) {
	for _, pcap := range captures(t) {
		checkHeuristics(t, pcap, readPcap(t, pcap))
		got := dissect(t, pcap, true)
		got = append([]byte("# "), got...)
		path := goldenPath(pcap)
		if *update {
			if err := os.WriteFile(path, got, 0o644); err != nil {
				t.Fatal(err)
			}
			continue
		}
		want, err := os.ReadFile(path)
		if err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(got, want) {
			t.Errorf("%s: tshark's dissection differs from the golden file; review and run with -update", pcap)
		}
	}
}

func TestDissectHelpers(t *testing.T) {
	for _, c := range []struct{ field, in, want string }{
		{"infiniband.bth.destqp", "0x000011", "17"},
		{"infiniband.bth.se", "True", "1"},
		{"infiniband.immdt", "00:00:01:02", "258"},
		{"eth.src", "52:54:00:12:34:0A", "52:54:00:12:34:0a"},
		{"data.len", "", ""},
	} {
		if got := canon(c.field, c.in); got != c.want {
			t.Errorf("canon(%s, %q) = %q, want %q", c.field, c.in, got, c.want)
		}
	}
	_ = fmt.Sprint()
}
