package main

import (
	"bufio"
	"bytes"
	"encoding/binary"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/rocesim/rocesim/internal/tbtest"
	"github.com/rocesim/rocesim/wire"
	"github.com/rocesim/rocesim/wire/capture"
)

// jsonLine is the schema of an "inspect --json" line, declared apart from
// packetJSON so that the test notices a field renamed by accident.
type jsonLine struct {
	Index         int      `json:"index"`
	TimeNS        int64    `json:"time_ns"`
	RelNS         int64    `json:"rel_ns"`
	Interface     int      `json:"interface"`
	InterfaceName string   `json:"interface_name"`
	Len           int      `json:"len"`
	OrigLen       int      `json:"orig_len"`
	RoCE          bool     `json:"roce"`
	Summary       string   `json:"summary"`
	Src           string   `json:"src"`
	Dst           string   `json:"dst"`
	UDPSrcPort    *uint16  `json:"udp_sport"`
	Opcode        *uint8   `json:"opcode"`
	OpcodeName    string   `json:"opcode_name"`
	SE            bool     `json:"se"`
	PadCount      uint8    `json:"pad_count"`
	PKey          uint16   `json:"pkey"`
	FECN          bool     `json:"fecn"`
	BECN          bool     `json:"becn"`
	DestQP        uint32   `json:"dest_qp"`
	AckReq        bool     `json:"ack_req"`
	PSN           uint32   `json:"psn"`
	Comments      []string `json:"comments"`
	ErrorCode     string   `json:"error_code"`
	Error         string   `json:"error"`
	DETH          *struct {
		QKey  uint32 `json:"qkey"`
		SrcQP uint32 `json:"src_qp"`
	} `json:"deth"`
	RETH *struct {
		VA     uint64 `json:"va"`
		RKey   uint32 `json:"rkey"`
		DMALen uint32 `json:"dma_len"`
	} `json:"reth"`
	AtomicETH *struct {
		VA      uint64 `json:"va"`
		RKey    uint32 `json:"rkey"`
		SwapAdd uint64 `json:"swap_add"`
		Compare uint64 `json:"compare"`
	} `json:"atomic_eth"`
	AETH *struct {
		Syndrome     uint8  `json:"syndrome"`
		SyndromeText string `json:"syndrome_text"`
		MSN          uint32 `json:"msn"`
	} `json:"aeth"`
	AtomicAckETH *struct {
		Orig uint64 `json:"orig"`
	} `json:"atomic_ack_eth"`
	Imm  *uint32 `json:"imm"`
	IETH *struct {
		RKey uint32 `json:"rkey"`
	} `json:"ieth"`
	PayloadLen *int  `json:"payload_len"`
	ICRCOK     *bool `json:"icrc_ok"`
}

// parseJSONLines decodes JSON-lines output strictly (unknown keys fail).
func parseJSONLines(t *testing.T, out string) []jsonLine {
	t.Helper()
	var ls []jsonLine
	sc := bufio.NewScanner(strings.NewReader(out))
	sc.Buffer(nil, 1<<20)
	for sc.Scan() {
		d := json.NewDecoder(bytes.NewReader(sc.Bytes()))
		d.DisallowUnknownFields()
		var j jsonLine
		if err := d.Decode(&j); err != nil {
			t.Fatalf("line %d: %v\n%s", len(ls)+1, err, sc.Text())
		}
		ls = append(ls, j)
	}
	return ls
}

// textFragments returns the pieces of the text line that j implies.
func textFragments(j jsonLine) []string {
	f := []string{strconv.Itoa(j.Index) + " " + string(appendSeconds(nil, j.RelNS)) + " "}
	if j.InterfaceName != "" {
		f = append(f, " if="+j.InterfaceName+" ")
	}
	if j.Src != "" {
		f = append(f, " "+j.Src+"→"+j.Dst+" ")
	}
	if !j.RoCE {
		f = append(f, " non-RoCE "+j.Summary+" len="+strconv.Itoa(j.Len))
	}
	if j.Opcode != nil {
		f = append(f, fmt.Sprintf(" %s qp=0x%06x psn=%d", j.OpcodeName, j.DestQP, j.PSN))
		if j.AckReq {
			f = append(f, fmt.Sprintf(" psn=%d ack=1", j.PSN))
		}
	}
	if d := j.DETH; d != nil {
		f = append(f, fmt.Sprintf(" qkey=0x%08x srcqp=0x%06x", d.QKey, d.SrcQP))
	}
	if r := j.RETH; r != nil {
		f = append(f, fmt.Sprintf(" va=0x%x rkey=0x%x len=%d", r.VA, r.RKey, r.DMALen))
	}
	if a := j.AtomicETH; a != nil {
		f = append(f, fmt.Sprintf(" va=0x%x rkey=0x%x", a.VA, a.RKey))
		if j.OpcodeName == "RC_FETCH_ADD" {
			f = append(f, fmt.Sprintf(" add=0x%x", a.SwapAdd))
		} else {
			f = append(f, fmt.Sprintf(" swap=0x%x cmp=0x%x", a.SwapAdd, a.Compare))
		}
	}
	if a := j.AETH; a != nil {
		f = append(f, fmt.Sprintf(" %s msn=%d", a.SyndromeText, a.MSN))
	}
	if a := j.AtomicAckETH; a != nil {
		f = append(f, fmt.Sprintf(" orig=0x%x", a.Orig))
	}
	if j.Imm != nil {
		f = append(f, fmt.Sprintf(" imm=0x%08x", *j.Imm))
	}
	if i := j.IETH; i != nil {
		f = append(f, fmt.Sprintf(" inv_rkey=0x%x", i.RKey))
	}
	if j.PayloadLen != nil {
		f = append(f, fmt.Sprintf(" payload=%d", *j.PayloadLen))
	}
	if j.ICRCOK != nil {
		if *j.ICRCOK {
			f = append(f, " icrc=ok")
		} else {
			f = append(f, " icrc=BAD")
		}
	}
	if j.Error != "" && j.ErrorCode != "bad-icrc" {
		f = append(f, " error: "+j.Error)
	}
	for _, c := range j.Comments {
		if strings.ContainsFunc(c, func(r rune) bool { return r < ' ' || r == 0x7f }) {
			c = strconv.Quote(c)
		}
		f = append(f, " # "+c)
	}
	return f
}

// checkJSONMatchesText checks that the --json and text outputs of the same
// file describe the same frames.
func checkJSONMatchesText(t *testing.T, jsonOut, textOut string) []jsonLine {
	t.Helper()
	js, lines := parseJSONLines(t, jsonOut), frameLines(textOut)
	if len(js) != len(lines) {
		t.Fatalf("%d JSON lines, %d text lines", len(js), len(lines))
	}
	for i, j := range js {
		if j.Index != i+1 {
			t.Errorf("JSON line %d has index %d", i+1, j.Index)
		}
		if j.RelNS != j.TimeNS-js[0].TimeNS {
			t.Errorf("frame %d: rel_ns %d, time_ns %d - %d", j.Index, j.RelNS, j.TimeNS, js[0].TimeNS)
		}
		line := " " + lines[i] + " "
		for _, f := range textFragments(j) {
			if !strings.Contains(line, f) {
				t.Errorf("frame %d: text line lacks %q from JSON:\n%s", j.Index, f, lines[i])
			}
		}
	}
	return js
}

// Every real capture: exit 0, one line per frame as tshark counts them,
// JSON and text agree, and the BTH/AETH fields agree with Wireshark's
// dissection of the same frames.
func TestInspectRealCaptures(t *testing.T) {
	for _, path := range realCaptures(t) {
		t.Run(filepath.Base(path), func(t *testing.T) {
			code, out, errOut := runCmd("inspect", path)
			if code != exitOK || errOut != "" {
				t.Fatalf("exit %d, stderr %q", code, errOut)
			}
			for _, bad := range []string{"icrc=BAD", "error:", "MALFORMED", "cut by"} {
				if strings.Contains(out, bad) {
					t.Errorf("output contains %q", bad)
				}
			}
			lines := frameLines(out)
			ts := strings.Split(strings.TrimSuffix(tshark(t, "-r", path, "-T", "fields", "-E", "separator=|",
				"-e", "infiniband.bth.opcode", "-e", "infiniband.bth.destqp", "-e", "infiniband.bth.psn",
				"-e", "infiniband.bth.a", "-e", "infiniband.aeth.syndrome", "-e", "infiniband.aeth.msn"), "\n"), "\n")
			if len(lines) != len(ts) {
				t.Fatalf("inspect lists %d frames, tshark %d", len(lines), len(ts))
			}
			code, jout, errOut := runCmd("inspect", path, "--json")
			if code != exitOK || errOut != "" {
				t.Fatalf("--json: exit %d, stderr %q", code, errOut)
			}
			js := checkJSONMatchesText(t, jout, out)
			roce := 0
			for i, j := range js {
				var mine string
				if j.RoCE {
					roce++
					if j.ICRCOK == nil || !*j.ICRCOK {
						t.Errorf("frame %d: icrc_ok %v", j.Index, j.ICRCOK)
					}
					mine = fmt.Sprintf("%d|0x%06x|%d|%d|", *j.Opcode, j.DestQP, j.PSN, b2i(j.AckReq))
					if j.AETH != nil {
						mine += fmt.Sprintf("%d|%d", j.AETH.Syndrome, j.AETH.MSN)
					} else {
						mine += "|"
					}
				} else {
					mine = "|||||"
				}
				if mine != ts[i] {
					t.Errorf("frame %d: inspect %q, tshark %q", j.Index, mine, ts[i])
				}
			}
			if want := fmt.Sprintf("# %d frames: %d RoCE (0 bad), %d non-RoCE\n", len(js), roce, len(js)-roce); !strings.HasSuffix(out, want) {
				t.Errorf("summary is not %q", want)
			}
		})
	}
}

func b2i(b bool) int {
	if b {
		return 1
	}
	return 0
}

// payloadOffset returns where the payload of a decoded frame starts.
func payloadOffset(p *wire.Packet) int {
	return len(p.Raw) - len(p.Trailer) - wire.ICRCLen - len(p.Pad) - len(p.Payload)
}

// firstFrame returns the index of the first frame for which ok holds.
func firstFrame(t *testing.T, frames []frame, ok func(*wire.Packet) bool) int {
	t.Helper()
	var p wire.Packet
	for i, f := range frames {
		if p.Decode(f.data) == nil && ok(&p) {
			return i
		}
	}
	t.Fatal("no such frame")
	return -1
}

// One payload byte of one RC SEND flipped: exit 1, exactly that frame
// marked icrc=BAD, with all its fields still shown.
func TestInspectBadICRC(t *testing.T) {
	frames := readFrames(t, "../../wire/testdata/rc_send.pcap")
	k := firstFrame(t, frames, func(p *wire.Packet) bool {
		return p.Info.Kind == wire.KindSend && len(p.Payload) > 0
	})
	var p wire.Packet
	p.Decode(frames[k].data)
	good := string(p.Info.Name) + " qp=" + string(appendHex(nil, uint64(p.BTH.DestQP()), 6)) + " psn=" + p.BTH.PSN().String()
	frames[k].data[payloadOffset(&p)+10] ^= 0x40
	path := filepath.Join(t.TempDir(), "flipped.pcap")
	writePcap(t, path, frames)

	code, out, errOut := runCmd("inspect", path)
	if code != exitBad {
		t.Fatalf("exit %d, want %d; stderr %q", code, exitBad, errOut)
	}
	if !strings.Contains(errOut, "1 of 36 RoCE frames") {
		t.Errorf("stderr %q", errOut)
	}
	for i, l := range frameLines(out) {
		bad := strings.Contains(l, "icrc=BAD")
		if bad != (i == k) {
			t.Errorf("frame %d: icrc=BAD is %v: %s", i+1, bad, l)
		}
		if i == k && (!strings.Contains(l, good) || !strings.Contains(l, " payload=1024 ")) {
			t.Errorf("frame %d lacks its fields (%q): %s", i+1, good, l)
		}
	}
	code, jout, _ := runCmd("inspect", "--json", path)
	if code != exitBad {
		t.Errorf("--json: exit %d", code)
	}
	for _, j := range checkJSONMatchesText(t, jout, out) {
		isBad := j.ICRCOK != nil && !*j.ICRCOK
		if isBad != (j.Index == k+1) || isBad != (j.ErrorCode == "bad-icrc") {
			t.Errorf("frame %d: icrc_ok %v error_code %q", j.Index, j.ICRCOK, j.ErrorCode)
		}
	}
}

// Malformed frames: a RoCE one is an error, a non-RoCE one is not, and a
// frame the capture cut short is listed but not judged.
func TestInspectMalformed(t *testing.T) {
	frames := readFrames(t, "../../wire/testdata/rc_send.pcap")
	roceK := firstFrame(t, frames, func(p *wire.Packet) bool { return true })
	tcpK := -1
	for i, f := range frames {
		if binary.BigEndian.Uint16(f.data[12:]) == wire.EtherTypeIPv4 && f.data[14+9] == 6 {
			tcpK = i
			break
		}
	}
	if tcpK < 0 {
		t.Fatal("no TCP frame")
	}
	clone := func(i int) frame { f := frames[i]; f.data = bytes.Clone(f.data); return f }

	tver := clone(roceK)
	tver.data[14+20+8+1] |= 1 // BTH TVer = 1
	ipsum := clone(roceK)
	ipsum.data[14+10] ^= 0xff // IPv4 header checksum
	tcpsum := clone(tcpK)
	tcpsum.data[14+10] ^= 0xff
	runt := frame{ns: 1, data: tver.data[:10]}

	for _, c := range []struct {
		name string
		f    frame
		code int
		want string
	}{
		{"bad TVer", tver, exitBad, " RC_SEND_FIRST qp=0x000011 psn=626988 error: wire: BTH header version (TVer) is not 0"},
		{"RoCE with bad IP checksum", ipsum, exitBad, " 10.0.0.2→10.0.0.1 MALFORMED error: wire: IPv4 header checksum mismatch"},
		{"TCP with bad IP checksum", tcpsum, exitOK, " 10.0.0.2→10.0.0.1 non-RoCE IPv4 TCP 51122→18515 len=74"},
		{"runt", runt, exitBad, "1 0.000000000 MALFORMED error: wire: frame truncated"},
	} {
		path := filepath.Join(t.TempDir(), "x.pcap")
		writePcap(t, path, []frame{c.f})
		code, out, _ := runCmd("inspect", path)
		if code != c.code || !strings.Contains(out, c.want) {
			t.Errorf("%s: exit %d, want %d; output lacks %q:\n%s", c.name, code, c.code, c.want, out)
		}
		code, jout, _ := runCmd("inspect", "--json", path)
		if code != c.code {
			t.Errorf("%s: --json exit %d", c.name, code)
		}
		checkJSONMatchesText(t, jout, out)
	}

	// A frame cut by the capture's snap length (built by hand: the writers
	// never cut below 256 KiB).
	full := frames[roceK].data
	var b []byte
	b = binary.LittleEndian.AppendUint32(b, 0xa1b2c3d4)
	b = binary.LittleEndian.AppendUint16(b, 2)
	b = binary.LittleEndian.AppendUint16(b, 4)
	b = append(b, make([]byte, 8)...)
	b = binary.LittleEndian.AppendUint32(b, 64) // snap length
	b = binary.LittleEndian.AppendUint32(b, 1)
	b = append(b, make([]byte, 8)...)
	b = binary.LittleEndian.AppendUint32(b, 64)
	b = binary.LittleEndian.AppendUint32(b, uint32(len(full)))
	b = append(b, full[:64]...)
	path := filepath.Join(t.TempDir(), "cut.pcap")
	os.WriteFile(path, b, 0o644)
	code, out, _ := runCmd("inspect", path)
	want := fmt.Sprintf("1 0.000000000 10.0.0.2→10.0.0.1 RoCE cut by the capture (64 of %d bytes), not checked\n# 1 frame: 1 RoCE (0 bad, 1 cut by the capture), 0 non-RoCE\n", len(full))
	if code != exitOK || !strings.HasSuffix(out, want) {
		t.Errorf("cut frame: exit %d, output\n%s\nwant suffix\n%s", code, out, want)
	}
	code, jout, _ := runCmd("inspect", "--json", path)
	if js := parseJSONLines(t, jout); code != exitOK || len(js) != 1 || js[0].OrigLen != len(full) || js[0].Len != 64 || js[0].ICRCOK != nil {
		t.Errorf("cut frame --json: exit %d, %s", code, jout)
	}
}

// A capture file that ends inside a record: the frames before it are
// listed, then exit 2 with the reason.
func TestInspectTruncatedFile(t *testing.T) {
	path := cutCapture(t, "../../wire/testdata/rc_send.pcap", 7)
	code, out, errOut := runCmd("inspect", path)
	if code != exitUsage || len(frameLines(out)) != 73 || !strings.Contains(errOut, "record 74: unexpected EOF") {
		t.Errorf("exit %d, %d lines, stderr %q", code, len(frameLines(out)), errOut)
	}
	// -Y with dst= reads the file once before the listing (selector.learn):
	// the damage is reported there too.
	code, out, errOut = runCmd("inspect", "-Y", "dst=10.0.0.2", path)
	if code != exitUsage || len(frameLines(out)) != 0 || !strings.Contains(errOut, "record 74: unexpected EOF") {
		t.Errorf("-Y dst=: exit %d, %d lines, stderr %q", code, len(frameLines(out)), errOut)
	}
}

// readFrames, the tests' reader, fails the test on a damaged capture
// instead of returning the frames before the damage.
func TestReadFramesDamaged(t *testing.T) {
	path := cutCapture(t, "../../wire/testdata/rc_send.pcap", 7)
	msg, failed := tbtest.Failure(t, func(tb testing.TB) { readFrames(tb, path) })
	if !failed || !strings.Contains(msg, "after 73 frames") || !strings.Contains(msg, "unexpected EOF") {
		t.Errorf("readFrames of a cut capture: failed %v, %q; want the damage reported", failed, msg)
	}
}

// syntheticPcapng builds a small two-link pcapng from real frames, as a
// fabric tap would write it: simulated times from 0, one interface per
// direction, comments, one corrupted and one malformed frame.
func syntheticPcapng(t *testing.T) []byte {
	t.Helper()
	frames := readFrames(t, "../../wire/testdata/rc_send.pcap")
	var buf bytes.Buffer
	w := capture.NewPcapngWriter(&buf, capture.PcapngOptions{Comment: "synthetic: seed=1"})
	ab, _ := w.AddInterface("n1->n2", "10.0.0.1 to 10.0.0.2")
	ba, _ := w.AddInterface("n2->n1", "10.0.0.2 to 10.0.0.1")
	var p wire.Packet
	for i, k := range []int{4, 5, 15, 27, 28, 29, 30, 27, 28, 29, 30, 31} {
		f := bytes.Clone(frames[k].data)
		comment := ""
		switch i {
		case 4:
			p.Decode(f)
			f[payloadOffset(&p)] ^= 1
			comment = "fault: corrupt payload byte 0"
		case 5:
			f[14+20+8+1] |= 1
			comment = "fault: rewrite BTH TVer=1"
		case 7, 8, 9, 10:
			comment = "retransmission #" + strconv.Itoa(i-6)
		case 11:
			comment = "two\nlines"
		}
		link := ba
		if p.DecodeHeaders(f); p.IPv4 != nil && p.IPv4.Src().String() == "10.0.0.1" {
			link = ab
		}
		if err := w.WriteFrame(int64(i)*1500, link, f, comment); err != nil {
			t.Fatal(err)
		}
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	return buf.Bytes()
}

// Golden outputs: review any diff (go test ./cmd/rocesim -update rewrites
// them).
func TestInspectGolden(t *testing.T) {
	t.Run("rc_send", func(t *testing.T) {
		code, out, errOut := runCmd("inspect", "../../wire/testdata/rc_send.pcap")
		if code != exitOK {
			t.Fatalf("exit %d: %s", code, errOut)
		}
		golden(t, "rc_send.txt", out)
	})
	t.Run("synthetic", func(t *testing.T) {
		b := syntheticPcapng(t)
		var text, js bytes.Buffer
		for _, c := range []struct {
			json bool
			out  *bytes.Buffer
		}{{false, &text}, {true, &js}} {
			rd, err := capture.NewReader(bytes.NewReader(b))
			if err != nil {
				t.Fatal(err)
			}
			sum, err := inspect(rd, "synthetic.pcapng", c.out, c.json, nil, 0)
			if err != nil || sum.Bad != 2 || sum.Frames != 12 {
				t.Fatalf("json=%v: %+v, %v", c.json, sum, err)
			}
		}
		golden(t, "synthetic.txt", text.String())
		golden(t, "synthetic.jsonl", js.String())
		checkJSONMatchesText(t, js.String(), text.String())
	})
}

// Per frame, classifying and writing a text line allocates nothing, except
// wire.Syndrome.String for an AETH other than a plain ACK (it builds
// "RNR-NAK(timer=12: 0.64 ms)" and the like).
func TestInspectAllocs(t *testing.T) {
	frames := readFrames(t, "../../wire/testdata/rnr_send.pcap")
	rd, err := capture.Open("../../wire/testdata/rnr_send.pcap")
	if err != nil {
		t.Fatal(err)
	}
	defer rd.Close()
	in := &inspector{rd: rd, name: "x", out: bufio.NewWriter(io.Discard)}
	in.sum.Frames = 1
	for i, f := range frames {
		rec := capture.Record{Time: f.ns, Data: f.data, OrigLen: len(f.data), LinkType: capture.LinkTypeEthernet}
		allocs := testing.AllocsPerRun(20, func() {
			v, err := in.classify(&rec)
			in.writeText(&rec, v, err)
		})
		var p wire.Packet
		if p.Decode(f.data) == nil && p.AETH != nil && p.AETH.Syndrome().String() != "ACK" {
			continue // wire's String: not ours to count
		}
		if allocs != 0 {
			t.Errorf("frame %d (%v): %v allocations", i+1, p.Decode(f.data), allocs)
		}
	}
}
