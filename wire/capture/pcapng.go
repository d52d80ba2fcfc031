package capture

import (
	"fmt"
	"io"

	"github.com/gopacket/gopacket"
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
//  3. WriteFrame writes an enhanced packet block with the interface index,
//     the 64-bit nanosecond timestamp and, when comment != "", one
//     opt_comment.
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
// WriteFrame allocates nothing for a frame without a comment; with one,
// pcapgo builds its option list on the heap (four small allocations,
// about 100 bytes, measured with pcapgo v1.7.7).
type PcapngWriter struct {
	dst     io.Writer
	section pcapgo.NgWriterOptions
	ng      *pcapgo.NgWriter // nil until the first AddInterface
	ifaces  int
	closed  bool
	comment [1]string // backing array for the one-comment option list
}

// NewPcapngWriter starts a pcapng file on w. Nothing is written until the
// first AddInterface; output is buffered, so call Flush or Close.
func NewPcapngWriter(w io.Writer, opts PcapngOptions) *PcapngWriter {
	app := opts.Application
	if app == "" {
		app = "rocesim"
	}
	return &PcapngWriter{
		dst: w,
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
		ng, err := pcapgo.NewNgWriterInterface(w.dst, ngi, w.section)
		if err != nil {
			return 0, err
		}
		w.ng = ng
	} else if _, err := w.ng.AddInterface(ngi); err != nil {
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
	n := capLen(len(frame))
	ci := gopacket.CaptureInfo{Timestamp: timeOf(ns), CaptureLength: n, Length: len(frame), InterfaceIndex: iface}
	var opts pcapgo.NgPacketOptions
	if comment != "" {
		w.comment[0] = comment
		opts.Comments = w.comment[:]
	}
	err := w.ng.WritePacketWithOptions(ci, frame[:n], opts)
	w.comment[0] = "" // do not keep the caller's string alive
	return err
}

// Flush writes buffered data to the underlying writer.
func (w *PcapngWriter) Flush() error {
	if w.ng == nil {
		return nil
	}
	return w.ng.Flush()
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
	return w.ng.Flush()
}
