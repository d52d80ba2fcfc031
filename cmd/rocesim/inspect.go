package main

import (
	"bufio"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"strconv"
	"strings"
	"time"

	"github.com/rocesim/rocesim/wire"
	"github.com/rocesim/rocesim/wire/capture"
)

// Inspecting a capture, frame by frame:
//
//  1. capture.Reader.Records gives the record: time, interface, bytes,
//     pcapng comments; a damaged file ends the listing with its error.
//  2. classify decodes it with the one reused wire.Packet:
//     - no error: RoCE v2, well formed, ICRC good;
//     - wire.ErrICRC: RoCE v2 with every field decoded but a bad ICRC;
//     - wire.ErrNotRoCE, or another error on a frame whose decoded headers
//     already show it is not RoCE (a TCP segment with a bad IPv4
//     checksum, UDP to another port): not RoCE, listed, never an error;
//     - wire.ErrTruncated on a frame the capture itself cut (snap length):
//     listed as cut, not checked, not an error;
//     - anything else: a malformed RoCE frame, shown as far as it decoded.
//  3. The frame is rendered as one text line, appended into one reused
//     buffer, or as one JSON object from one reused struct.
//  4. Text mode frames the list with a '#' header (file, format, the
//     absolute time of frame 1, to which every time is relative) and a '#'
//     summary line.
//
// Malformed and bad-ICRC frames make the exit status 1.

// verdict is what classify makes of a frame.
type verdict uint8

const (
	verdictOK        verdict = iota // RoCE v2, well formed, ICRC good
	verdictBadICRC                  // RoCE v2, well formed, ICRC bad
	verdictMalformed                // RoCE v2 (or not provably anything else), does not decode
	verdictCut                      // cut short by the capture: cannot be checked
	verdictOther                    // not RoCE v2
)

// bad reports whether the verdict makes inspect fail.
func (v verdict) bad() bool { return v == verdictBadICRC || v == verdictMalformed }

// EtherTypeARP is the EtherType of ARP (RFC 826); package wire needs none.
const etherTypeARP = 0x0806

// inspectPath inspects the capture at path ("-": standard input) and
// returns the exit status.
// With sel, only the frames it selects are listed; with count > 0, the
// reading stops once count frames have been listed.
func inspectPath(path string, jsonOut bool, sel *selector, count int, stdout, stderr io.Writer) int {
	var (
		rd  *capture.Reader
		err error
	)
	if sel != nil && path != "-" {
		if err := sel.learn(path); err != nil {
			fmt.Fprintf(stderr, "rocesim inspect: %v\n", err)
			return exitUsage
		}
	}
	if path == "-" {
		rd, err = capture.NewReader(os.Stdin)
	} else {
		rd, err = capture.Open(path)
	}
	if err != nil {
		fmt.Fprintf(stderr, "rocesim inspect: %v\n", err)
		return exitUsage
	}
	defer rd.Close()
	sum, err := inspect(rd, path, stdout, jsonOut, sel, count)
	if err != nil {
		fmt.Fprintf(stderr, "rocesim inspect: %s: %v\n", path, err)
		return exitUsage
	}
	if sum.Bad > 0 {
		fmt.Fprintf(stderr, "rocesim inspect: %s: %d of %d RoCE frames malformed or with a bad ICRC\n", path, sum.Bad, sum.RoCE)
		return exitBad
	}
	return exitOK
}

// summary counts what inspect saw.
type summary struct {
	Frames int // every frame in the file
	RoCE   int // RoCE v2 frames, bad and cut ones included
	Bad    int // RoCE frames malformed or with a bad ICRC
	Cut    int // RoCE frames the capture cut short, not checked
	Other  int // frames that are not RoCE v2
}

// inspect lists every frame of rd on out, naming the file name in the text
// header. The error is that of reading rd or writing out; frames that fail
// to decode are not errors but are counted in the summary.
func inspect(rd *capture.Reader, name string, out io.Writer, jsonOut bool, sel *selector, count int) (summary, error) {
	in := &inspector{rd: rd, name: name, out: bufio.NewWriter(out), json: jsonOut, sel: sel, count: count}
	if jsonOut {
		in.enc = json.NewEncoder(in.out)
		in.enc.SetEscapeHTML(false)
	}
	err := in.run()
	if ferr := in.out.Flush(); err == nil {
		err = ferr
	}
	return in.sum, err
}

// inspector holds the state reused from frame to frame.
type inspector struct {
	rd   *capture.Reader
	name string
	out  *bufio.Writer
	json bool
	enc  *json.Encoder

	sel   *selector // -Y: nil lists every frame
	count int       // -c: stop after listing this many (0: no limit)
	shown int       // frames listed

	p    wire.Packet
	line []byte // text line under construction
	t0   int64  // time of the first frame
	sum  summary

	// JSON output: one struct and the headers it points to.
	j          packetJSON
	roce       roceJSON
	deth       dethJSON
	reth       rethJSON
	atomicETH  atomicETHJSON
	aeth       aethJSON
	atomicAck  atomicAckETHJSON
	ieth       iethJSON
	imm        uint32
	payloadLen int
	icrcOK     bool
}

func (in *inspector) run() error {
	for rec, err := range in.rd.Records() {
		if err != nil {
			return err
		}
		in.sum.Frames++
		if in.sum.Frames == 1 {
			in.t0 = rec.Time
			in.header(rec)
		}
		v, derr := in.classify(rec)
		switch v {
		case verdictOther:
			in.sum.Other++
		case verdictCut:
			in.sum.RoCE++
			in.sum.Cut++
		default:
			in.sum.RoCE++
			if v.bad() {
				in.sum.Bad++
			}
		}
		if in.sel != nil && !in.sel.match(in.rd, rec, &in.p, rec.Time-in.t0) {
			continue
		}
		in.shown++
		if in.json {
			if err := in.writeJSON(rec, v, derr); err != nil {
				return err
			}
		} else {
			in.writeText(rec, v, derr)
		}
		if in.count > 0 && in.shown == in.count {
			break
		}
	}
	if in.sum.Frames == 0 {
		in.header(nil)
	}
	in.footer()
	return nil
}

// classify decodes rec into in.p and judges it.
func (in *inspector) classify(rec *capture.Record) (verdict, error) {
	if rec.LinkType != capture.LinkTypeEthernet {
		in.p = wire.Packet{}
		return verdictOther, nil
	}
	err := in.p.Decode(rec.Data)
	switch {
	case err == nil:
		return verdictOK, nil
	case errors.Is(err, wire.ErrICRC):
		return verdictBadICRC, err
	case errors.Is(err, wire.ErrNotRoCE), provenNotRoCE(&in.p):
		return verdictOther, err
	case errors.Is(err, wire.ErrTruncated) && rec.OrigLen > len(rec.Data):
		return verdictCut, err
	}
	return verdictMalformed, err
}

// provenNotRoCE reports whether the headers a failed decode left in p show
// that the frame is not RoCE v2 after all. package wire checks the IPv4
// header checksum (and fragmentation, and lengths) before the protocol and
// the UDP port, so a TCP segment with a bad IP checksum fails with
// ErrIPChecksum, not ErrNotRoCE.
func provenNotRoCE(p *wire.Packet) bool {
	ip := l3(p)
	switch {
	case p.IPv4 != nil:
		if p.IPv4.Protocol() != wire.ProtocolUDP {
			return true
		}
		if p.IPv4.FragmentOffset() != 0 {
			return false // a later fragment: its UDP header is elsewhere
		}
	case p.IPv6 != nil:
		if p.IPv6.NextHeader() != wire.ProtocolUDP {
			return true
		}
	default:
		return false
	}
	off := wire.EthernetLen + len(ip)
	return len(p.Raw) >= off+4 && binary.BigEndian.Uint16(p.Raw[off+2:]) != wire.UDPPortRoCEv2
}

// l3 returns the decoded IP header, or nil.
func l3(p *wire.Packet) []byte {
	if p.IPv6 != nil {
		return p.IPv6
	}
	return p.IPv4
}

// header writes the text header; first is nil for an empty file.
func (in *inspector) header(first *capture.Record) {
	if in.json {
		return
	}
	b := append(in.line[:0], "# "...)
	b = append(b, in.name...)
	b = append(b, " ("...)
	b = append(b, in.rd.Format().String()...)
	b = append(b, "): "...)
	if first == nil {
		b = append(b, "no frames"...)
	} else {
		b = append(b, "time is seconds since frame 1, at "...)
		b = time.Unix(0, first.Time).UTC().AppendFormat(b, "2006-01-02T15:04:05.000000000Z")
	}
	b = append(b, '\n')
	in.out.Write(b)
	in.line = b
}

// footer writes the text summary line.
func (in *inspector) footer() {
	if in.json {
		return
	}
	s := in.sum
	fmt.Fprintf(in.out, "# %s: %d RoCE (%d bad", plural(s.Frames, "frame"), s.RoCE, s.Bad)
	if s.Cut > 0 {
		fmt.Fprintf(in.out, ", %d cut by the capture", s.Cut)
	}
	fmt.Fprintf(in.out, "), %d non-RoCE", s.Other)
	if in.sel != nil {
		fmt.Fprintf(in.out, "; %d listed, matching %s", in.shown, in.sel.text)
	}
	if in.count > 0 && in.shown == in.count {
		fmt.Fprintf(in.out, "; stopped after %s (-c %d)", plural(in.shown, "frame"), in.count)
	}
	fmt.Fprintln(in.out)
}

// writeText writes one frame as a line.
func (in *inspector) writeText(rec *capture.Record, v verdict, err error) {
	p := &in.p
	b := strconv.AppendInt(in.line[:0], int64(in.sum.Frames), 10)
	b = append(b, ' ')
	b = appendSeconds(b, rec.Time-in.t0)
	if in.rd.Format() == capture.FormatPcapng {
		b = append(b, " if="...)
		b = in.appendInterface(b, rec.Interface)
	}
	b = appendAddrs(b, p)
	switch v {
	case verdictOther:
		b = append(b, " non-RoCE "...)
		b = appendOther(b, p, rec)
		b = append(b, " len="...)
		b = strconv.AppendInt(b, int64(rec.OrigLen), 10)
	case verdictCut:
		b = append(b, " RoCE cut by the capture ("...)
		b = strconv.AppendInt(b, int64(len(rec.Data)), 10)
		b = append(b, " of "...)
		b = strconv.AppendInt(b, int64(rec.OrigLen), 10)
		b = append(b, " bytes), not checked"...)
	default:
		if p.BTH == nil {
			b = append(b, " MALFORMED"...)
		} else {
			b = appendRoCE(b, p)
		}
		switch v {
		case verdictOK:
			b = append(b, " icrc=ok"...)
		case verdictBadICRC:
			b = append(b, " icrc=BAD"...)
		case verdictMalformed:
			b = append(b, " error: "...)
			b = append(b, err.Error()...)
		}
	}
	for _, c := range rec.Comments {
		b = append(b, " # "...)
		if strings.ContainsFunc(c, func(r rune) bool { return r < ' ' || r == 0x7f }) {
			b = strconv.AppendQuote(b, c) // keep one frame on one line
		} else {
			b = append(b, c...)
		}
	}
	b = append(b, '\n')
	in.out.Write(b)
	in.line = b
}

// appendInterface appends the pcapng interface's name, or its index if it
// has none.
func (in *inspector) appendInterface(b []byte, i int) []byte {
	if ifc, ok := in.rd.Interface(i); ok && ifc.Name != "" {
		return append(b, ifc.Name...)
	}
	return strconv.AppendInt(append(b, '#'), int64(i), 10)
}

// appendSeconds appends d nanoseconds as seconds with nine decimals.
func appendSeconds(b []byte, d int64) []byte {
	u := uint64(d)
	if d < 0 {
		b = append(b, '-')
		u = -u
	}
	b = strconv.AppendUint(b, u/1e9, 10)
	b = append(b, '.')
	frac := u % 1e9
	for div := uint64(1e8); div > 0; div /= 10 {
		b = append(b, byte('0'+frac/div%10))
	}
	return b
}

// appendHex appends v as 0x and at least width hex digits.
func appendHex(b []byte, v uint64, width int) []byte {
	b = append(b, "0x"...)
	for n := hexDigits(v); n < width; n++ {
		b = append(b, '0')
	}
	return strconv.AppendUint(b, v, 16)
}

func hexDigits(v uint64) int {
	n := 1
	for ; v >= 16; v >>= 4 {
		n++
	}
	return n
}

// appendAddrs appends " src→dst" when an IP header was decoded.
func appendAddrs(b []byte, p *wire.Packet) []byte {
	if p.IPv4 == nil && p.IPv6 == nil {
		return b
	}
	b = append(b, ' ')
	b = p.Src().AppendTo(b)
	b = append(b, "→"...)
	return p.Dst().AppendTo(b)
}

// appendRoCE appends the BTH and whatever extension headers, payload
// length decoded.
func appendRoCE(b []byte, p *wire.Packet) []byte {
	bth := p.BTH
	b = append(b, ' ')
	b = append(b, bth.Opcode().String()...)
	b = append(b, " qp="...)
	b = appendHex(b, uint64(bth.DestQP()), 6)
	b = append(b, " psn="...)
	b = strconv.AppendUint(b, uint64(bth.PSN()), 10)
	if bth.AckReq() {
		b = append(b, " ack=1"...)
	}
	if bth.SolicitedEvent() {
		b = append(b, " se=1"...)
	}
	if bth.FECN() {
		b = append(b, " fecn=1"...)
	}
	if bth.BECN() {
		b = append(b, " becn=1"...)
	}
	if d := p.DETH; d != nil {
		b = append(b, " qkey="...)
		b = appendHex(b, uint64(d.QKey()), 8)
		b = append(b, " srcqp="...)
		b = appendHex(b, uint64(d.SrcQP()), 6)
	}
	if r := p.RETH; r != nil {
		b = append(b, " va="...)
		b = appendHex(b, r.VA(), 1)
		b = append(b, " rkey="...)
		b = appendHex(b, uint64(r.RKey()), 1)
		b = append(b, " len="...)
		b = strconv.AppendUint(b, uint64(r.DMALength()), 10)
	}
	if a := p.AtomicETH; a != nil {
		b = append(b, " va="...)
		b = appendHex(b, a.VA(), 1)
		b = append(b, " rkey="...)
		b = appendHex(b, uint64(a.RKey()), 1)
		if bth.Opcode() == wire.OpRCFetchAdd {
			b = append(b, " add="...)
			b = appendHex(b, a.SwapAddData(), 1)
		} else {
			b = append(b, " swap="...)
			b = appendHex(b, a.SwapAddData(), 1)
			b = append(b, " cmp="...)
			b = appendHex(b, a.CompareData(), 1)
		}
	}
	if a := p.AETH; a != nil {
		b = append(b, ' ')
		b = append(b, a.Syndrome().String()...)
		b = append(b, " msn="...)
		b = strconv.AppendUint(b, uint64(a.MSN()), 10)
	}
	if a := p.AtomicAckETH; a != nil {
		b = append(b, " orig="...)
		b = appendHex(b, a.OrigRemoteData(), 1)
	}
	if i := p.ImmDt; i != nil {
		b = append(b, " imm="...)
		b = appendHex(b, uint64(i.Value()), 8)
	}
	if i := p.IETH; i != nil {
		b = append(b, " inv_rkey="...)
		b = appendHex(b, uint64(i.RKey()), 1)
	}
	if hasPayload(p) {
		b = append(b, " payload="...)
		b = strconv.AppendInt(b, int64(len(p.Payload)), 10)
	}
	return b
}

// hasPayload reports whether the opcode carries payload and decoding got
// as far as finding it.
func hasPayload(p *wire.Packet) bool {
	return p.Info != nil && p.Info.Has(wire.HasPayload) && p.Payload != nil
}

// appendOther describes a frame that is not RoCE v2 (without its
// addresses): "IPv4 TCP 47142→18515", "ARP who-has 10.0.0.2 tell
// 10.0.0.1", "EtherType 0x88cc", "link-type 113".
func appendOther(b []byte, p *wire.Packet, rec *capture.Record) []byte {
	if rec.LinkType != capture.LinkTypeEthernet {
		b = append(b, "link-type "...)
		return strconv.AppendUint(b, uint64(rec.LinkType), 10)
	}
	var proto uint8
	switch {
	case p.IPv4 != nil:
		b = append(b, "IPv4 "...)
		proto = p.IPv4.Protocol()
	case p.IPv6 != nil:
		b = append(b, "IPv6 "...)
		proto = p.IPv6.NextHeader()
	case p.Eth != nil && p.Eth.EtherType() == etherTypeARP:
		return appendARP(b, rec.Data)
	case p.Eth != nil:
		b = append(b, "EtherType "...)
		return appendHex(b, uint64(p.Eth.EtherType()), 4)
	default:
		return append(b, "runt"...)
	}
	switch proto {
	case 0:
		b = append(b, "HOPOPT"...)
	case 1:
		b = append(b, "ICMP"...)
	case 6:
		b = append(b, "TCP"...)
	case 17:
		b = append(b, "UDP"...)
	case 58:
		b = append(b, "ICMPv6"...)
	default:
		b = append(b, "proto="...)
		b = strconv.AppendUint(b, uint64(proto), 10)
	}
	if proto == 6 || proto == 17 {
		off := wire.EthernetLen + len(l3(p))
		first := p.IPv4 == nil || p.IPv4.FragmentOffset() == 0
		if first && len(rec.Data) >= off+4 {
			b = append(b, ' ')
			b = strconv.AppendUint(b, uint64(binary.BigEndian.Uint16(rec.Data[off:])), 10)
			b = append(b, "→"...)
			b = strconv.AppendUint(b, uint64(binary.BigEndian.Uint16(rec.Data[off+2:])), 10)
		}
	}
	return b
}

// appendARP describes an Ethernet/IPv4 ARP packet (RFC 826).
func appendARP(b []byte, f []byte) []byte {
	b = append(b, "ARP"...)
	const arpEnd = wire.EthernetLen + 28
	if len(f) < arpEnd || binary.BigEndian.Uint16(f[14:]) != 1 || binary.BigEndian.Uint16(f[16:]) != wire.EtherTypeIPv4 || f[18] != 6 || f[19] != 4 {
		return b
	}
	sha, spa, tpa := wire.MAC(f[22:28]), [4]byte(f[28:32]), [4]byte(f[38:42])
	switch op := binary.BigEndian.Uint16(f[20:]); op {
	case 1:
		b = append(b, " who-has "...)
		b = appendIPv4(b, tpa)
		b = append(b, " tell "...)
		b = appendIPv4(b, spa)
	case 2:
		b = append(b, ' ')
		b = appendIPv4(b, spa)
		b = append(b, " is-at "...)
		b = appendMAC(b, sha)
	default:
		b = append(b, " op="...)
		b = strconv.AppendUint(b, uint64(op), 10)
	}
	return b
}

// appendMAC appends m as six colon-separated hex pairs (wire.MAC.String
// allocates).
func appendMAC(b []byte, m wire.MAC) []byte {
	const hex = "0123456789abcdef"
	for i, x := range m {
		if i > 0 {
			b = append(b, ':')
		}
		b = append(b, hex[x>>4], hex[x&0xF])
	}
	return b
}

func appendIPv4(b []byte, a [4]byte) []byte {
	for i, x := range a {
		if i > 0 {
			b = append(b, '.')
		}
		b = strconv.AppendUint(b, uint64(x), 10)
	}
	return b
}
