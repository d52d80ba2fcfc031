package capture

import (
	"bufio"
	"encoding/binary"
	"fmt"
	"io"

	"github.com/gopacket/gopacket/layers"
	"github.com/gopacket/gopacket/pcapgo"
)

// Writing a pcapng file:
//
//  1. NewPcapngWriter only remembers the destination and the section
//     options: pcapgo writes the section header together with the first
//     interface description, so nothing is written before AddInterface.
//  2. The first AddInterface creates pcapgo's NgWriter, which writes the
//     section header block (shb_userappl and, if given, a comment — never
//     pcapgo's default shb_hardware/shb_os, which vary by machine) and the
//     first interface description block; later calls append more
//     interface description blocks. Each interface: LINKTYPE_ETHERNET,
//     SnapLen, if_tsresol 9 (nanoseconds), name and description.
//     pcapgo writes into the PcapngWriter's own buffer, flushed into it
//     after each call, so its blocks and ours stay in order.
//  3. WriteFrame writes an enhanced packet block with the interface index,
//     the 64-bit nanosecond timestamp and, when comment != "", one
//     opt_comment, itself (writeEPB), byte for byte as pcapgo's
//     WritePacketWithOptions lays it out: pcapgo builds the option list
//     on the heap for every packet, some 100 bytes in four allocations,
//     which with a comment on every frame was most of what a captured
//     run allocated per packet (issue 20).
//  4. Close flushes. A file closed before any interface was added still
//     gets a valid section: one placeholder interface (placeholderName).

// PcapngOptions configures a pcapng section header.
type PcapngOptions struct {
	// Application is shb_userappl; "" means "rocesim".
	Application string
	// Comment is the section comment (opt_comment), e.g. the seed and
	// scenario that produced the capture; "" writes none.
	Comment string
}

// placeholderName names the interface written when a pcapng file is closed
// without any: pcapgo writes a section header only together with an
// interface.
const placeholderName = "none"

// PcapngWriter writes a pcapng file: one section, one interface per
// AddInterface, nanosecond timestamps, a comment per packet. It
// implements Writer.
//
// WriteFrame allocates nothing, with a comment or without.
type PcapngWriter struct {
	buf     *bufio.Writer // everything goes through it to the destination
	section pcapgo.NgWriterOptions
	ng      *pcapgo.NgWriter // nil until the first AddInterface; writes into buf
	ifaces  int
	closed  bool
	hdr     [28]byte // an enhanced packet block's fixed part
	zero    [4]byte  // padding; here, not on the stack, as bufio may hand it to the destination (it would escape)
}

// NewPcapngWriter starts a pcapng file on w. Nothing is written until the
// first AddInterface; output is buffered, so call Flush or Close.
func NewPcapngWriter(w io.Writer, opts PcapngOptions) *PcapngWriter {
	app := opts.Application
	if app == "" {
		app = "rocesim"
	}
	return &PcapngWriter{
		buf: bufio.NewWriter(w),
		// Only what the caller chose: no Hardware/OS, which
		// pcapgo.DefaultNgWriterOptions fills from runtime.GOARCH/GOOS.
		section: pcapgo.NgWriterOptions{SectionInfo: pcapgo.NgSectionInfo{
			Application: app,
			Comment:     opts.Comment,
		}},
	}
}

// AddInterface appends an interface description block and returns the
// interface's index.
func (w *PcapngWriter) AddInterface(name, description string) (int, error) {
	ifc := Interface{Name: name, Description: description}
	if w.closed {
		return 0, ErrClosed
	}
	if len(ifc.Name) > maxOptionLen || len(ifc.Description) > maxOptionLen {
		return 0, fmt.Errorf("%w: interface name or description", ErrTooLong)
	}
	// Every field set explicitly: pcapgo.DefaultNgInterface would add
	// if_os from runtime.GOOS.
	ngi := pcapgo.NgInterface{
		Name:                ifc.Name,
		Description:         ifc.Description,
		LinkType:            layers.LinkTypeEthernet,
		SnapLength:          SnapLen,
		TimestampResolution: 9, // pcapgo writes 9 whatever this says
	}
	if w.ng == nil {
		ng, err := pcapgo.NewNgWriterInterface(w.buf, ngi, w.section)
		if err != nil {
			return 0, err
		}
		w.ng = ng
	} else if _, err := w.ng.AddInterface(ngi); err != nil {
		return 0, err
	}
	// Into buf now, before any packet block written after this one.
	if err := w.ng.Flush(); err != nil {
		return 0, err
	}
	w.ifaces++
	return w.ifaces - 1, nil
}

// WriteFrame writes one frame seen on interface iface at simulated time ns,
// with comment as its opt_comment unless it is "".
func (w *PcapngWriter) WriteFrame(ns int64, iface int, frame []byte, comment string) error {
	if w.closed {
		return ErrClosed
	}
	if iface < 0 || iface >= w.ifaces {
		return fmt.Errorf("%w: %d (have %d)", ErrInterface, iface, w.ifaces)
	}
	if err := checkTime(ns); err != nil {
		return err
	}
	if len(comment) > maxOptionLen {
		return fmt.Errorf("%w: comment of %d bytes", ErrTooLong, len(comment))
	}
	return w.writeEPB(ns, iface, frame, comment)
}

// Enhanced packet block layout (pcapng, draft-ietf-opsawg-pcapng §4.3):
// the block type, the total length, then the fixed fields below, the
// packet data padded to 4 bytes, the options, and the total length again.
const (
	blockTypeEPB   = 6
	optEndOfOpt    = 0
	optComment     = 1
	epbFixedLen    = 28 // type, length, interface, timestamp (2 words), captured and original length
	blockTrailerLn = 4
)

// pad4 is how many zero bytes bring n to a multiple of 4.
func pad4(n int) int { return (4 - n&3) & 3 }

// writeEPB writes one enhanced packet block, the bytes pcapgo's
// WritePacketWithOptions writes for it (ngwrite.go, v1.7.7: fixed part,
// data, padding, opt_comment and opt_endofopt when there is a comment,
// trailing length), without allocating.
func (w *PcapngWriter) writeEPB(ns int64, iface int, frame []byte, comment string) error {
	data := frame[:capLen(len(frame))]
	length := epbFixedLen + len(data) + pad4(len(data)) + blockTrailerLn
	if comment != "" {
		length += 4 + len(comment) + pad4(len(comment)) + 4
	}
	h := w.hdr[:]
	le := binary.LittleEndian
	le.PutUint32(h[0:], blockTypeEPB)
	le.PutUint32(h[4:], uint32(length))
	le.PutUint32(h[8:], uint32(iface))
	le.PutUint32(h[12:], uint32(uint64(ns)>>32))
	le.PutUint32(h[16:], uint32(ns))
	le.PutUint32(h[20:], uint32(len(data)))
	le.PutUint32(h[24:], uint32(len(frame)))
	w.buf.Write(h)
	w.buf.Write(data)
	zero := w.zero[:]
	w.buf.Write(zero[:pad4(len(data))])
	if comment != "" {
		le.PutUint16(h[0:], optComment)
		le.PutUint16(h[2:], uint16(len(comment)))
		w.buf.Write(h[:4])
		w.buf.WriteString(comment)
		w.buf.Write(zero[:pad4(len(comment))])
		le.PutUint32(h[0:], optEndOfOpt) // code 0, length 0
		w.buf.Write(h[:4])
	}
	le.PutUint32(h[0:], uint32(length))
	_, err := w.buf.Write(h[:4]) // a bufio.Writer keeps its first error: this reports any
	return err
}

// Flush writes buffered data to the underlying writer.
func (w *PcapngWriter) Flush() error {
	if w.ng == nil {
		return nil
	}
	return w.buf.Flush()
}

// Close flushes, first writing the section header with a placeholder
// interface if no interface was ever added. It does not close the
// underlying writer.
func (w *PcapngWriter) Close() error {
	if w.closed {
		return nil
	}
	if w.ng == nil {
		if _, err := w.AddInterface(placeholderName, "no link was captured"); err != nil {
			return err
		}
	}
	w.closed = true
	return w.buf.Flush()
}
