package capture

import (
	"bufio"
	"fmt"
	"io"

	"github.com/gopacket/gopacket"
	"github.com/gopacket/gopacket/layers"
	"github.com/gopacket/gopacket/pcapgo"
)

// Writing a classic pcap file:
//
//  1. NewPcapWriter buffers the destination and writes the 24-byte file
//     header: nanosecond magic (0xA1B23C4D), version 2.4, SnapLen,
//     LINKTYPE_ETHERNET.
//  2. WriteFrame checks the interface and the time, then hands pcapgo a
//     CaptureInfo whose Timestamp is time.Unix(0, ns) — never the zero
//     time, which pcapgo would replace with the wall clock.
//  3. Flush/Close push the buffer out.
//
// Classic pcap has one link and no comments: AddInterface only counts,
// every frame lands in the one stream, comments are dropped.

// PcapWriter writes a classic pcap file with nanosecond timestamps. It
// implements Writer. WriteFrame allocates nothing.
type PcapWriter struct {
	buf    *bufio.Writer
	pw     *pcapgo.Writer
	ifaces int // interfaces added; frames may name any of them (or 0)
	closed bool
}

// NewPcapWriter starts a pcap file on w. Output is buffered: call Flush or
// Close. The returned error is that of writing the file header (with a
// buffered writer it surfaces at the latest on Flush).
func NewPcapWriter(w io.Writer) (*PcapWriter, error) {
	b := bufio.NewWriter(w)
	pw := pcapgo.NewWriterNanos(b)
	if err := pw.WriteFileHeader(SnapLen, layers.LinkTypeEthernet); err != nil {
		return nil, err
	}
	return &PcapWriter{buf: b, pw: pw}, nil
}

// AddInterface records that one more link is tapped and returns its index.
// Classic pcap cannot tell links apart: frames of every interface go into
// the same stream, and the name is not stored.
func (w *PcapWriter) AddInterface(name, description string) (int, error) {
	if w.closed {
		return 0, ErrClosed
	}
	w.ifaces++
	return w.ifaces - 1, nil
}

// WriteFrame writes one frame at simulated time ns. iface must be an index
// AddInterface returned, or 0. The comment is dropped: classic pcap has
// nowhere to keep it.
func (w *PcapWriter) WriteFrame(ns int64, iface int, frame []byte, comment string) error {
	if w.closed {
		return ErrClosed
	}
	if iface < 0 || iface >= max(w.ifaces, 1) {
		return fmt.Errorf("%w: %d (have %d)", ErrInterface, iface, w.ifaces)
	}
	if err := checkTime(ns); err != nil {
		return err
	}
	n := capLen(len(frame))
	ci := gopacket.CaptureInfo{Timestamp: timeOf(ns), CaptureLength: n, Length: len(frame)}
	return w.pw.WritePacket(ci, frame[:n])
}

// Flush writes buffered data to the underlying writer.
func (w *PcapWriter) Flush() error { return w.buf.Flush() }

// Close flushes. It does not close the underlying writer.
func (w *PcapWriter) Close() error {
	if w.closed {
		return nil
	}
	w.closed = true
	return w.buf.Flush()
}
