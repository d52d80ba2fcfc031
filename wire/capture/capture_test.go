package capture_test

import (
	"bytes"
	"compress/gzip"
	"encoding/binary"
	"errors"
	"io"
	"os"
	"path/filepath"
	"reflect"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/gopacket/gopacket"
	"github.com/gopacket/gopacket/layers"
	"github.com/gopacket/gopacket/pcapgo"
	"github.com/stretchr/testify/require"

	"github.com/rocesim/rocesim/wire/capture"
)

// sample returns n real frames from rc_send.pcap, with the times, interface
// indexes and comments a two-link tap might give them.
func sample(t testing.TB, n int) []rec {
	t.Helper()
	frames := readFile(t, "../testdata/rc_send.pcap")
	if len(frames) < n {
		t.Fatalf("rc_send.pcap has %d frames, want %d", len(frames), n)
	}
	times := []int64{0, 1, 999_999_999, 1_000_000_000, 1_500_000_007, 3600_000_000_123}
	var out []rec
	for i := range n {
		r := rec{
			Data:     frames[i].Data,
			OrigLen:  len(frames[i].Data),
			Iface:    i % 2,
			LinkType: capture.LinkTypeEthernet,
		}
		if i < len(times) {
			r.Time = times[i]
		} else {
			r.Time = times[len(times)-1] + int64(i)*1000
		}
		switch i % 3 {
		case 1:
			r.Comments = []string{"retransmission #2"}
		case 2:
			r.Comments = []string{"fault: drop (plan rule 3) — ünïcode ok"}
		}
		out = append(out, r)
	}
	out[n-1].Time = capture.MaxTime
	return out
}

var links = []capture.Interface{
	{Name: "a->b", Description: "node a port 0 to node b port 0"},
	{Name: "b->a", Description: "node b port 0 to node a port 0"},
}

// write writes recs with w (which must be fresh) and returns the bytes.
func write(t testing.TB, f capture.Format, recs []rec) []byte {
	t.Helper()
	var buf bytes.Buffer
	w, err := capture.NewWriter(&buf, f, capture.PcapngOptions{Comment: "seed=1"})
	if err != nil {
		t.Fatal(err)
	}
	for i, l := range links {
		id, err := w.AddInterface(l.Name, l.Description)
		if err != nil || id != i {
			t.Fatalf("AddInterface(%v) = %d, %v; want %d", l, id, err, i)
		}
	}
	for _, r := range recs {
		c := ""
		if len(r.Comments) > 0 {
			c = r.Comments[0]
		}
		if err := w.WriteFrame(r.Time, r.Iface, []byte(r.Data), c); err != nil {
			t.Fatal(err)
		}
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	return buf.Bytes()
}

func TestRoundTrip(t *testing.T) {
	want := sample(t, 24)
	for _, f := range []capture.Format{capture.FormatPcap, capture.FormatPcapng} {
		t.Run(f.String(), func(t *testing.T) {
			gotFormat, got := readAll(t, write(t, f, want))
			if gotFormat != f {
				t.Errorf("format %v, want %v", gotFormat, f)
			}
			exp := want
			if f == capture.FormatPcap { // one interface, no comments
				exp = nil
				for _, r := range want {
					r.Iface, r.Comments = 0, nil
					exp = append(exp, r)
				}
			}
			if len(got) != len(exp) {
				t.Fatalf("read %d records, wrote %d", len(got), len(exp))
			}
			for i := range got {
				if !reflect.DeepEqual(got[i], exp[i]) {
					t.Errorf("record %d:\n got  t=%d if=%d len=%d/%d %q %v\n want t=%d if=%d len=%d/%d %q %v", i,
						got[i].Time, got[i].Iface, len(got[i].Data), got[i].OrigLen, got[i].Comments, got[i].LinkType,
						exp[i].Time, exp[i].Iface, len(exp[i].Data), exp[i].OrigLen, exp[i].Comments, exp[i].LinkType)
				}
			}
		})
	}
}

func TestReaderInterfaces(t *testing.T) {
	b := write(t, capture.FormatPcapng, sample(t, 3))
	r, err := capture.NewReader(bytes.NewReader(b))
	if err != nil {
		t.Fatal(err)
	}
	for _, err := range r.Records() {
		if err != nil {
			t.Fatal(err)
		}
	}
	for i, l := range links {
		got, ok := r.Interface(i)
		if !ok || got != l {
			t.Errorf("Interface(%d) = %+v, %v; want %+v", i, got, ok, l)
		}
	}
	if _, ok := r.Interface(len(links)); ok {
		t.Errorf("Interface(%d) exists", len(links))
	}
}

// A frame at simulated time 0 must be written at the epoch, not at the
// wall-clock time pcapgo substitutes for a zero time.Time.
func TestTimeZeroIsEpoch(t *testing.T) {
	frame := []byte(sample(t, 1)[0].Data)
	for _, f := range []capture.Format{capture.FormatPcap, capture.FormatPcapng} {
		t.Run(f.String(), func(t *testing.T) {
			b := write(t, f, []rec{{Time: 0, Data: string(frame)}})
			_, got := readAll(t, b)
			if len(got) != 1 || got[0].Time != 0 {
				t.Fatalf("records %+v, want one at time 0", got)
			}
			if f == capture.FormatPcap {
				// The record header follows the 24-byte file header:
				// seconds and nanoseconds both zero.
				if ts := b[24:32]; !bytes.Equal(ts, make([]byte, 8)) {
					t.Errorf("record timestamp bytes % x, want zeros", ts)
				}
			}
		})
	}
}

// The same frames at the same times give the same bytes, and nothing about
// the machine (OS, architecture, host name) goes into the file.
func TestDeterministic(t *testing.T) {
	recs := sample(t, 30)
	host, _ := os.Hostname()
	for _, f := range []capture.Format{capture.FormatPcap, capture.FormatPcapng} {
		t.Run(f.String(), func(t *testing.T) {
			a, b := write(t, f, recs), write(t, f, recs)
			if !bytes.Equal(a, b) {
				t.Fatal("two writes of the same frames differ")
			}
			head := write(t, f, nil) // header and interfaces only
			for _, s := range []string{runtime.GOOS, runtime.GOARCH, "gopacket", host} {
				if s != "" && bytes.Contains(head, []byte(s)) {
					t.Errorf("file header contains %q", s)
				}
			}
		})
	}
}

// The fixed header bytes: a change here changes every capture rocesim
// writes, so it must be deliberate.
func TestPcapHeader(t *testing.T) {
	b := write(t, capture.FormatPcap, nil)
	want := []byte{
		0x4d, 0x3c, 0xb2, 0xa1, // nanosecond magic, little endian
		2, 0, 4, 0, // version 2.4
		0, 0, 0, 0, 0, 0, 0, 0, // thiszone, sigfigs
		0, 0, 4, 0, // snaplen 262144
		1, 0, 0, 0, // LINKTYPE_ETHERNET
	}
	if !bytes.Equal(b, want) {
		t.Errorf("header\n got  % x\n want % x", b, want)
	}
}

func TestWriterErrors(t *testing.T) {
	frame := []byte(sample(t, 1)[0].Data)
	for _, f := range []capture.Format{capture.FormatPcap, capture.FormatPcapng} {
		t.Run(f.String(), func(t *testing.T) {
			w, err := capture.NewWriter(io.Discard, f, capture.PcapngOptions{})
			if err != nil {
				t.Fatal(err)
			}
			if f == capture.FormatPcapng {
				if err := w.WriteFrame(0, 0, frame, ""); !errors.Is(err, capture.ErrInterface) {
					t.Errorf("write before AddInterface: %v, want ErrInterface", err)
				}
			}
			if _, err := w.AddInterface(links[0].Name, links[0].Description); err != nil {
				t.Fatal(err)
			}
			for _, c := range []struct {
				name  string
				ns    int64
				iface int
				cmt   string
				want  error
			}{
				{"negative time", -1, 0, "", capture.ErrTime},
				{"past MaxTime", capture.MaxTime + 1, 0, "", capture.ErrTime},
				{"unknown interface", 0, 1, "", capture.ErrInterface},
				{"negative interface", 0, -1, "", capture.ErrInterface},
			} {
				if err := w.WriteFrame(c.ns, c.iface, frame, c.cmt); !errors.Is(err, c.want) {
					t.Errorf("%s: %v, want %v", c.name, err, c.want)
				}
			}
			long := strings.Repeat("x", 1<<16)
			err = w.WriteFrame(0, 0, frame, long)
			if f == capture.FormatPcapng && !errors.Is(err, capture.ErrTooLong) {
				t.Errorf("long comment: %v, want ErrTooLong", err)
			}
			if f == capture.FormatPcap && err != nil {
				t.Errorf("long comment on pcap (dropped): %v", err)
			}
			if err := w.Close(); err != nil {
				t.Fatal(err)
			}
			if err := w.Close(); err != nil {
				t.Errorf("second Close: %v", err)
			}
			if err := w.WriteFrame(0, 0, frame, ""); !errors.Is(err, capture.ErrClosed) {
				t.Errorf("write after Close: %v, want ErrClosed", err)
			}
			if _, err := w.AddInterface(links[1].Name, links[1].Description); !errors.Is(err, capture.ErrClosed) {
				t.Errorf("AddInterface after Close: %v, want ErrClosed", err)
			}
		})
	}
}

// A frame longer than SnapLen is stored cut, with its original length.
func TestSnapLen(t *testing.T) {
	big := strings.Repeat("\xab", capture.SnapLen+100)
	for _, f := range []capture.Format{capture.FormatPcap, capture.FormatPcapng} {
		_, got := readAll(t, write(t, f, []rec{{Time: 5, Data: big}}))
		if len(got) != 1 || len(got[0].Data) != capture.SnapLen || got[0].OrigLen != len(big) {
			t.Errorf("%v: got %d records, first %d of %d bytes", f, len(got), len(got[0].Data), got[0].OrigLen)
		}
	}
}

// A pcapng writer closed without interfaces still makes a valid, empty file.
func TestPcapngNoInterfaces(t *testing.T) {
	var buf bytes.Buffer
	w := capture.NewPcapngWriter(&buf, capture.PcapngOptions{})
	if err := w.Flush(); err != nil || buf.Len() != 0 {
		t.Fatalf("Flush before any interface: %v, %d bytes", err, buf.Len())
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	f, got := readAll(t, buf.Bytes())
	if f != capture.FormatPcapng || len(got) != 0 {
		t.Errorf("format %v, %d records; want pcapng, 0", f, len(got))
	}
}

// Interfaces may be added after frames have been written.
func TestPcapngLateInterface(t *testing.T) {
	var buf bytes.Buffer
	w := capture.NewPcapngWriter(&buf, capture.PcapngOptions{})
	frame := []byte(sample(t, 1)[0].Data)
	a, _ := w.AddInterface(links[0].Name, links[0].Description)
	if err := w.WriteFrame(1, a, frame, "first"); err != nil {
		t.Fatal(err)
	}
	b, _ := w.AddInterface(links[1].Name, links[1].Description)
	if err := w.WriteFrame(2, b, frame, "second"); err != nil {
		t.Fatal(err)
	}
	w.Close()
	_, got := readAll(t, buf.Bytes())
	if len(got) != 2 || got[0].Iface != 0 || got[1].Iface != 1 || got[1].Comments[0] != "second" {
		t.Errorf("got %+v", got)
	}
}

func TestCreate(t *testing.T) {
	dir := t.TempDir()
	frame := sample(t, 1)[0].Data
	for name, want := range map[string]capture.Format{
		"x.pcap": capture.FormatPcap, "x.pcapng": capture.FormatPcapng, "X.PCAPNG": capture.FormatPcapng, "x.cap": capture.FormatPcap,
	} {
		if got := capture.FormatFromName(name); got != want {
			t.Errorf("FormatFromName(%q) = %v, want %v", name, got, want)
		}
		path := filepath.Join(dir, name)
		w, err := capture.Create(path, capture.PcapngOptions{})
		if err != nil {
			t.Fatal(err)
		}
		w.AddInterface(links[0].Name, links[0].Description)
		if err := w.WriteFrame(7, 0, []byte(frame), "c"); err != nil {
			t.Fatal(err)
		}
		if err := w.Close(); err != nil {
			t.Fatal(err)
		}
		if err := w.Close(); err != nil {
			t.Errorf("%s: second Close: %v", name, err)
		}
		r, err := capture.Open(path)
		if err != nil {
			t.Fatal(err)
		}
		var x capture.Record
		if err := r.Next(&x); err != nil || x.Time != 7 || r.Format() != want {
			t.Errorf("%s: Next = %v, time %d, format %v", name, err, x.Time, r.Format())
		}
		if err := r.Close(); err != nil {
			t.Error(err)
		}
	}
}

// classic builds a one-record classic pcap in the given byte order and
// resolution, the record at 3 s + frac (frac in the file's unit).
func classic(order binary.AppendByteOrder, nanos bool, frac uint32, frame []byte) []byte {
	var b []byte
	magic := uint32(0xa1b2c3d4)
	if nanos {
		magic = 0xa1b23c4d
	}
	b = order.AppendUint32(b, magic)
	b = order.AppendUint16(b, 2)
	b = order.AppendUint16(b, 4)
	b = order.AppendUint32(b, 0)
	b = order.AppendUint32(b, 0)
	b = order.AppendUint32(b, 65535)
	b = order.AppendUint32(b, 1)
	b = order.AppendUint32(b, 3)
	b = order.AppendUint32(b, frac)
	b = order.AppendUint32(b, uint32(len(frame)))
	b = order.AppendUint32(b, uint32(len(frame)))
	return append(b, frame...)
}

func TestReaderClassicVariants(t *testing.T) {
	frame := []byte(sample(t, 1)[0].Data)
	for _, c := range []struct {
		name  string
		order binary.AppendByteOrder
		nanos bool
		frac  uint32
		want  int64
	}{
		{"LE µs", binary.LittleEndian, false, 250_000, 3_250_000_000},
		{"BE µs", binary.BigEndian, false, 999_999, 3_999_999_000},
		{"LE ns", binary.LittleEndian, true, 123_456_789, 3_123_456_789},
		{"BE ns", binary.BigEndian, true, 1, 3_000_000_001},
	} {
		f, got := readAll(t, classic(c.order, c.nanos, c.frac, frame))
		if f != capture.FormatPcap || len(got) != 1 || got[0].Time != c.want || got[0].Data != string(frame) {
			t.Errorf("%s: format %v, %d records, time %d; want pcap, 1, %d", c.name, f, len(got), got[0].Time, c.want)
		}
	}
}

func TestReaderGzip(t *testing.T) {
	plain := write(t, capture.FormatPcapng, sample(t, 5))
	var z bytes.Buffer
	zw := gzip.NewWriter(&z)
	zw.Write(plain)
	zw.Close()
	_, a := readAll(t, plain)
	f, b := readAll(t, z.Bytes())
	if f != capture.FormatPcapng || !reflect.DeepEqual(a, b) {
		t.Errorf("gzip: format %v, %d records; want pcapng, %d", f, len(b), len(a))
	}
}

func TestReaderNotACapture(t *testing.T) {
	for name, in := range map[string][]byte{
		"empty":   nil,
		"short":   {0xd4, 0xc3},
		"text":    []byte("hello, this is not a capture file\n"),
		"elf":     {0x7f, 'E', 'L', 'F', 2, 1, 1, 0},
		"gzipped": gz([]byte("plain text inside gzip")),
	} {
		_, err := capture.NewReader(bytes.NewReader(in))
		if !errors.Is(err, capture.ErrFormat) {
			t.Errorf("%s: %v, want ErrFormat", name, err)
		}
	}
	// The message says what was found.
	_, err := capture.NewReader(strings.NewReader("hello"))
	if err == nil || !strings.Contains(err.Error(), "68 65 6c 6c") {
		t.Errorf("error %q does not show the bytes seen", err)
	}
	// Open names the file.
	path := filepath.Join(t.TempDir(), "notes.txt")
	os.WriteFile(path, []byte("hello"), 0o644)
	if _, err := capture.Open(path); !errors.Is(err, capture.ErrFormat) || !strings.Contains(err.Error(), path) {
		t.Errorf("Open: %v", err)
	}
}

func gz(b []byte) []byte {
	var z bytes.Buffer
	zw := gzip.NewWriter(&z)
	zw.Write(b)
	zw.Close()
	return z.Bytes()
}

// A file cut anywhere inside a record reads the records before the cut,
// then fails with io.ErrUnexpectedEOF, never a silent io.EOF.
func TestReaderTruncated(t *testing.T) {
	recs := sample(t, 3)
	for _, f := range []capture.Format{capture.FormatPcap, capture.FormatPcapng} {
		full := write(t, f, recs)
		// Find where the last record starts: the length of the file with
		// two records.
		two := write(t, f, recs[:2])
		for cut := len(two) + 1; cut < len(full); cut++ {
			r, err := capture.NewReader(bytes.NewReader(full[:cut]))
			if err != nil {
				t.Fatal(err)
			}
			var x capture.Record
			n := 0
			for err = r.Next(&x); err == nil; err = r.Next(&x) {
				n++
			}
			if n != 2 || !errors.Is(err, io.ErrUnexpectedEOF) {
				t.Fatalf("%v cut at %d of %d: %d records then %v; want 2 then unexpected EOF", f, cut, len(full), n, err)
			}
		}
	}
}

// Records gives what Next gives: every record of a whole file and a clean
// end; for a cut file, the records before the cut, then the damage as a
// last (nil, error) pair; and a loop that breaks early stops the reading.
func TestReaderRecords(t *testing.T) {
	recs := sample(t, 3)
	for _, f := range []capture.Format{capture.FormatPcap, capture.FormatPcapng} {
		full := write(t, f, recs)
		r, err := capture.NewReader(bytes.NewReader(full))
		if err != nil {
			t.Fatal(err)
		}
		n := 0
		for rec, err := range r.Records() {
			if err != nil {
				t.Fatalf("%v: record %d: %v", f, n+1, err)
			}
			if string(rec.Data) != recs[n].Data || rec.Time != recs[n].Time {
				t.Errorf("%v: record %d is %x at %d, want %x at %d", f, n+1, rec.Data, rec.Time, recs[n].Data, recs[n].Time)
			}
			n++
		}
		if n != len(recs) {
			t.Errorf("%v: %d records, want %d", f, n, len(recs))
		}

		r, _ = capture.NewReader(bytes.NewReader(full[:len(full)-3]))
		var errs []error
		n = 0
		for rec, err := range r.Records() {
			if err != nil {
				errs = append(errs, err)
				if rec != nil {
					t.Errorf("%v: the error came with a record", f)
				}
				continue
			}
			n++
		}
		if n != 2 || len(errs) != 1 || !errors.Is(errs[0], io.ErrUnexpectedEOF) {
			t.Errorf("%v cut: %d records then %v; want 2 then one unexpected EOF", f, n, errs)
		}

		r, _ = capture.NewReader(bytes.NewReader(full))
		for range r.Records() {
			break
		}
		var x capture.Record
		if err := r.Next(&x); err != nil || string(x.Data) != recs[1].Data {
			t.Errorf("%v: after a loop broken at the first record, Next gives %x, %v; want the second record", f, x.Data, err)
		}
	}
}

// The real rxe captures: every frame is read, as many as tshark lists, in
// time order, and the first timestamp agrees with tshark's.
func TestRealCaptures(t *testing.T) {
	for _, path := range realCaptures(t) {
		t.Run(filepath.Base(path), func(t *testing.T) {
			recs := readFile(t, path)
			if want := tsharkCount(t, path); len(recs) != want {
				t.Errorf("read %d frames, tshark lists %d", len(recs), want)
			}
			for i, r := range recs {
				if r.LinkType != capture.LinkTypeEthernet || r.Iface != 0 || len(r.Data) != r.OrigLen {
					t.Errorf("frame %d: link %d, interface %d, %d of %d bytes", i+1, r.LinkType, r.Iface, len(r.Data), r.OrigLen)
				}
				if i > 0 && r.Time < recs[i-1].Time {
					t.Errorf("frame %d goes back in time", i+1)
				}
			}
			epoch := strings.TrimSpace(tshark(t, "-r", path, "-c", "1", "-T", "fields", "-e", "frame.time_epoch"))
			if got := formatEpoch(recs[0].Time); got != epoch {
				t.Errorf("first frame at %s, tshark says %s", got, epoch)
			}
		})
	}
}

// formatEpoch formats ns as tshark prints frame.time_epoch (seconds with
// nine decimals).
func formatEpoch(ns int64) string {
	s := []byte{}
	s = appendInt(s, ns/1e9)
	s = append(s, '.')
	frac := ns % 1e9
	for d := int64(1e8); d > 0; d /= 10 {
		s = append(s, byte('0'+frac/d%10))
	}
	return string(s)
}

func appendInt(b []byte, v int64) []byte {
	if v >= 10 {
		b = appendInt(b, v/10)
	}
	return append(b, byte('0'+v%10))
}

// Per-frame work allocates nothing, with a comment or without (issue 20:
// pcapgo's WritePacketWithOptions allocated four times for a comment).
func TestAllocs(t *testing.T) {
	frame := []byte(sample(t, 1)[0].Data)
	pw, _ := capture.NewPcapWriter(io.Discard)
	ng := capture.NewPcapngWriter(io.Discard, capture.PcapngOptions{})
	ng.AddInterface(links[0].Name, links[0].Description)
	var ns int64
	for _, c := range []struct {
		name string
		w    capture.Writer
		cmt  string
		max  float64
	}{
		{"pcap", pw, "", 0},
		{"pcap with comment", pw, "dropped", 0},
		{"pcapng", ng, "", 0},
		{"pcapng with comment", ng, "retransmission #2", 0},
		{"pcapng with a comment of 4n bytes", ng, "retransmission", 0},
	} {
		got := testing.AllocsPerRun(100, func() {
			ns += 1000
			if err := c.w.WriteFrame(ns, 0, frame, c.cmt); err != nil {
				t.Fatal(err)
			}
		})
		if got > c.max {
			t.Errorf("%s: %v allocations per frame, want at most %v", c.name, got, c.max)
		}
	}

	b, err := os.ReadFile("../testdata/rc_send.pcap")
	if err != nil {
		t.Fatal(err)
	}
	r, _ := capture.NewReader(bytes.NewReader(b))
	var x capture.Record
	r.Next(&x) // first record sizes the buffer
	if got := testing.AllocsPerRun(50, func() { r.Next(&x) }); got != 0 {
		t.Errorf("Reader.Next, pcap: %v allocations per record", got)
	}
	recs := sample(t, 60)
	for i := range recs {
		recs[i].Comments = nil
	}
	r, _ = capture.NewReader(bytes.NewReader(write(t, capture.FormatPcapng, recs)))
	r.Next(&x)
	if got := testing.AllocsPerRun(50, func() { r.Next(&x) }); got != 0 {
		t.Errorf("Reader.Next, pcapng without comments: %v allocations per record", got)
	}
}

func BenchmarkWriteFrame(b *testing.B) {
	frame := []byte(sample(b, 1)[0].Data)
	for _, f := range []capture.Format{capture.FormatPcap, capture.FormatPcapng} {
		for _, cmt := range []string{"", "retransmission #2"} {
			name := f.String()
			if cmt != "" {
				name += "/comment"
			}
			b.Run(name, func(b *testing.B) {
				w, _ := capture.NewWriter(io.Discard, f, capture.PcapngOptions{})
				w.AddInterface(links[0].Name, links[0].Description)
				b.ReportAllocs()
				b.SetBytes(int64(len(frame)))
				for i := 0; b.Loop(); i++ {
					w.WriteFrame(int64(i), 0, frame, cmt)
				}
			})
		}
	}
}

// TestPcapngSameBytesAsPcapgo: the writer's own enhanced packet blocks
// are byte for byte those of pcapgo's WritePacketWithOptions, which wrote
// them before (every golden capture was made with it), for data and
// comments of every length modulo 4, a frame over SnapLen, and
// interfaces added between packets.
func TestPcapngSameBytesAsPcapgo(t *testing.T) {
	frame := []byte(sample(t, 1)[0].Data)
	big := bytes.Repeat([]byte{0xa5}, capture.SnapLen+3)
	var ours, theirs bytes.Buffer
	w := capture.NewPcapngWriter(&ours, capture.PcapngOptions{Comment: "seed 7"})
	section := pcapgo.NgWriterOptions{SectionInfo: pcapgo.NgSectionInfo{Application: "rocesim", Comment: "seed 7"}}
	iface := func(name string) pcapgo.NgInterface {
		return pcapgo.NgInterface{Name: name, Description: "d " + name, LinkType: layers.LinkTypeEthernet,
			SnapLength: capture.SnapLen, TimestampResolution: 9}
	}
	ng, err := pcapgo.NewNgWriterInterface(&theirs, iface("a->b"), section)
	if err != nil {
		t.Fatal(err)
	}
	_, err = w.AddInterface("a->b", "d a->b")
	if err != nil {
		t.Fatal(err)
	}
	ns := int64(5_000_000_123)
	write := func(ifc int, data []byte, comment string) {
		t.Helper()
		ns += 77_777
		if err := w.WriteFrame(ns, ifc, data, comment); err != nil {
			t.Fatal(err)
		}
		n := min(len(data), capture.SnapLen)
		var opts pcapgo.NgPacketOptions
		if comment != "" {
			opts.Comments = []string{comment}
		}
		ci := gopacket.CaptureInfo{Timestamp: time.Unix(0, ns).UTC(), CaptureLength: n, Length: len(data), InterfaceIndex: ifc}
		if err := ng.WritePacketWithOptions(ci, data[:n], opts); err != nil {
			t.Fatal(err)
		}
	}
	for dl := range 5 {
		for cl := range 6 {
			write(0, frame[:len(frame)-dl], strings.Repeat("c", cl))
		}
	}
	if _, err := ng.AddInterface(iface("b->a")); err != nil {
		t.Fatal(err)
	}
	if _, err := w.AddInterface("b->a", "d b->a"); err != nil {
		t.Fatal(err)
	}
	write(1, big, "cut to the snap length")
	write(0, frame[:0], "")
	write(1, frame, "")
	require.NoError(t, w.Close())
	require.NoError(t, ng.Flush())
	if !bytes.Equal(ours.Bytes(), theirs.Bytes()) {
		a, b := ours.Bytes(), theirs.Bytes()
		i := 0
		for i < min(len(a), len(b)) && a[i] == b[i] {
			i++
		}
		t.Fatalf("pcapng bytes differ from pcapgo's at offset %d (%d bytes ours, %d theirs)", i, len(a), len(b))
	}
}
