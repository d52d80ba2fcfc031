package capture

import (
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"time"
)

// Writer is a capture file being written. PcapWriter and PcapngWriter both
// satisfy it, so a fabric tap can write either format.
//
// A Writer is not safe for concurrent use: the simulator calls it from its
// one event loop, in event order.
type Writer interface {
	// AddInterface declares a capture interface (one per simulated link)
	// and returns the index WriteFrame takes. Indexes count up from 0 in
	// the order interfaces are added.
	//
	// The signature uses plain strings so that packages which only tap
	// frames (sim/fabric) can declare the same method set without
	// importing this package.
	AddInterface(name, description string) (int, error)
	// WriteFrame records one Ethernet frame seen on interface iface at
	// simulated time ns (nanoseconds since the Unix epoch; a simulation
	// starts at 0). comment is attached to the packet where the format
	// allows it (pcapng) and dropped otherwise; "" means none. The frame
	// is copied before WriteFrame returns.
	WriteFrame(ns int64, iface int, frame []byte, comment string) error
	// Flush writes buffered data to the underlying io.Writer.
	Flush() error
	// Close flushes and ends the file. Later writes fail with ErrClosed;
	// a second Close does nothing. Close closes the underlying file only
	// for a Writer made by Create.
	Close() error
}

// Interface describes a capture interface: in rocesim, one direction of
// one link. Its link type is always Ethernet.
type Interface struct {
	Name        string // short name, e.g. "a->b"; pcapng if_name
	Description string // free text, e.g. "node a port 1 to switch port 3"; pcapng if_description
}

// Format is a capture file format.
type Format uint8

// Capture file formats.
const (
	FormatPcap   Format = iota + 1 // classic libpcap, one link type, no comments
	FormatPcapng                   // pcapng: interfaces, per-packet comments
)

// String returns "pcap" or "pcapng".
func (f Format) String() string {
	switch f {
	case FormatPcap:
		return "pcap"
	case FormatPcapng:
		return "pcapng"
	}
	return "unknown-format"
}

// LinkType is a LINKTYPE_ value from a capture file's header or interface
// description (https://www.tcpdump.org/linktypes.html).
type LinkType uint32

// LinkTypeEthernet is the only link type rocesim writes and decodes.
const LinkTypeEthernet LinkType = 1

// SnapLen is the snapshot length both writers declare: the longest frame
// stored whole (tcpdump's and Wireshark's maximum). Longer frames are cut
// to SnapLen and keep their original length in the record.
const SnapLen = 262144

// MaxTime is the latest timestamp the writers accept: classic pcap stores
// seconds in 32 unsigned bits (early in the year 2106).
const MaxTime = int64(1<<32)*int64(time.Second) - 1

// maxOptionLen is the longest pcapng option value: its length is 16 bits.
const maxOptionLen = 0xFFFF

// Errors. Each is a sentinel for errors.Is; the error returned usually
// wraps it with the detail.
var (
	// ErrFormat: the input is neither a pcap nor a pcapng file.
	ErrFormat = errors.New("capture: not a pcap or pcapng file")
	// ErrClosed: the writer has been closed.
	ErrClosed = errors.New("capture: writer is closed")
	// ErrInterface: WriteFrame named an interface that was not added.
	ErrInterface = errors.New("capture: unknown interface")
	// ErrTime: a timestamp is negative or later than MaxTime.
	ErrTime = errors.New("capture: timestamp out of range")
	// ErrTooLong: a comment or interface name exceeds the 65535 bytes a
	// pcapng option can hold.
	ErrTooLong = errors.New("capture: string longer than a pcapng option allows")
)

// checkTime rejects timestamps a file cannot hold. It is on the per-frame
// path: the error allocates, the check does not.
func checkTime(ns int64) error {
	if ns < 0 || ns > MaxTime {
		return fmt.Errorf("%w: %d ns", ErrTime, ns)
	}
	return nil
}

// timeOf converts simulated nanoseconds to the time.Time pcapgo takes.
// time.Unix(0, ns) is never the zero time.Time, not even for ns == 0, so
// pcapgo's substitution of time.Now for a zero time never happens.
func timeOf(ns int64) time.Time { return time.Unix(0, ns).UTC() }

// capLen returns how many bytes of a frame are stored.
func capLen(n int) int { return min(n, SnapLen) }

// NewWriter returns a writer of the given format on w (opts is used only
// for pcapng).
func NewWriter(w io.Writer, f Format, opts PcapngOptions) (Writer, error) {
	switch f {
	case FormatPcap:
		return NewPcapWriter(w)
	case FormatPcapng:
		return NewPcapngWriter(w, opts), nil
	}
	return nil, fmt.Errorf("capture: unknown format %d", f)
}

// FormatFromName returns the format a file name asks for: pcapng for a
// name ending in ".pcapng" or ".ntar", else pcap.
func FormatFromName(name string) Format {
	switch strings.ToLower(filepath.Ext(name)) {
	case ".pcapng", ".ntar":
		return FormatPcapng
	}
	return FormatPcap
}

// Create creates (or truncates) the file at path and returns a writer in
// the format its name asks for (FormatFromName). Its Close also closes
// the file.
func Create(path string, opts PcapngOptions) (Writer, error) {
	f, err := os.Create(path)
	if err != nil {
		return nil, err
	}
	w, err := NewWriter(f, FormatFromName(path), opts)
	if err != nil {
		f.Close()
		return nil, err
	}
	return &fileWriter{Writer: w, f: f}, nil
}

// fileWriter is a Writer that owns its file.
type fileWriter struct {
	Writer
	f *os.File
}

// Close closes the capture writer, then the file.
func (w *fileWriter) Close() error {
	if w.f == nil {
		return nil
	}
	err := w.Writer.Close()
	if cerr := w.f.Close(); err == nil {
		err = cerr
	}
	w.f = nil
	return err
}
