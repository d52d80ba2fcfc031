package capture

import (
	"bufio"
	"compress/gzip"
	"errors"
	"fmt"
	"io"
	"iter"
	"os"

	"github.com/gopacket/gopacket"
	"github.com/gopacket/gopacket/layers"
	"github.com/gopacket/gopacket/pcapgo"
)

// Reading a capture file:
//
//  1. Peek at the first four bytes. gzip (1f 8b): decompress and peek
//     again. Classic pcap magics, as stored: d4 c3 b2 a1 / a1 b2 c3 d4
//     (microseconds, little/big endian), 4d 3c b2 a1 / a1 b2 3c 4d
//     (nanoseconds); pcapng: 0a 0d 0d 0a, the section header block type.
//     Anything else fails with ErrFormat, naming the bytes seen.
//  2. Hand the stream to pcapgo's Reader or NgReader (the latter accepting
//     interfaces of mixed link types, so no packet is skipped silently).
//  3. Next fills a Record per packet: time as int64 nanoseconds, interface
//     index, link type, data, original length, comments. io.EOF ends it.

// Record is one packet read from a capture file.
type Record struct {
	Time      int64    // nanoseconds since the Unix epoch
	Interface int      // pcapng interface index; always 0 in a pcap file
	LinkType  LinkType // link type of that interface
	// Data is the captured bytes. It is owned by the Reader and valid only
	// until the next call to Next: copy it to keep it.
	Data     []byte
	OrigLen  int      // the frame's length on the wire; more than len(Data) if the capture cut it
	Comments []string // pcapng opt_comment values, in file order; nil if none
}

// Reader reads packets from a pcap or pcapng file.
type Reader struct {
	format Format
	pcap   *pcapgo.Reader
	ng     *pcapgo.NgReader
	closer io.Closer // set by Open
	n      int       // records returned so far
}

// File magics as the first four bytes on disk.
var (
	magicGzip        = [2]byte{0x1f, 0x8b}
	magicPcapUsLE    = [4]byte{0xd4, 0xc3, 0xb2, 0xa1}
	magicPcapUsBE    = [4]byte{0xa1, 0xb2, 0xc3, 0xd4}
	magicPcapNsLE    = [4]byte{0x4d, 0x3c, 0xb2, 0xa1}
	magicPcapNsBE    = [4]byte{0xa1, 0xb2, 0x3c, 0x4d}
	magicPcapngBlock = [4]byte{0x0a, 0x0d, 0x0d, 0x0a}
)

// NewReader reads the file header from r and returns a reader of whichever
// format r holds.
func NewReader(r io.Reader) (*Reader, error) {
	br := bufio.NewReader(r)
	magic, err := peekMagic(br)
	if err != nil {
		return nil, err
	}
	if [2]byte(magic[:2]) == magicGzip {
		zr, err := gzip.NewReader(br)
		if err != nil {
			return nil, fmt.Errorf("capture: gzip: %w", err)
		}
		br = bufio.NewReader(zr)
		if magic, err = peekMagic(br); err != nil {
			return nil, err
		}
	}
	switch magic {
	case magicPcapUsLE, magicPcapUsBE, magicPcapNsLE, magicPcapNsBE:
		pr, err := pcapgo.NewReader(br)
		if err != nil {
			return nil, fmt.Errorf("capture: pcap header: %w", err)
		}
		return &Reader{format: FormatPcap, pcap: pr}, nil
	case magicPcapngBlock:
		nr, err := pcapgo.NewNgReader(br, pcapgo.NgReaderOptions{WantMixedLinkType: true})
		if err != nil {
			return nil, fmt.Errorf("capture: pcapng section header: %w", err)
		}
		return &Reader{format: FormatPcapng, ng: nr}, nil
	}
	return nil, fmt.Errorf("%w (starts with % x)", ErrFormat, magic[:])
}

// peekMagic returns the first four bytes without consuming them.
func peekMagic(br *bufio.Reader) ([4]byte, error) {
	b, err := br.Peek(4)
	switch {
	case len(b) == 4:
		return [4]byte(b), nil
	case len(b) == 0 && (err == io.EOF || err == nil):
		return [4]byte{}, fmt.Errorf("%w: empty file", ErrFormat)
	case err == io.EOF:
		return [4]byte{}, fmt.Errorf("%w: only %d bytes", ErrFormat, len(b))
	}
	return [4]byte{}, err
}

// Open opens the capture file at path. Close the Reader to close the file.
func Open(path string) (*Reader, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	r, err := NewReader(f)
	if err != nil {
		f.Close()
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	r.closer = f
	return r, nil
}

// Close closes the file if Open opened it.
func (r *Reader) Close() error {
	if r.closer == nil {
		return nil
	}
	err := r.closer.Close()
	r.closer = nil
	return err
}

// Format reports which format the file is in.
func (r *Reader) Format() Format { return r.format }

// Interface returns the description of interface i as read so far (a
// pcapng file may describe interfaces between packets). A pcap file has
// one unnamed interface, 0.
func (r *Reader) Interface(i int) (Interface, bool) {
	if r.ng == nil {
		return Interface{}, i == 0
	}
	ifc, err := r.ng.Interface(i)
	if err != nil {
		return Interface{}, false
	}
	return Interface{Name: ifc.Name, Description: ifc.Description}, true
}

// Next reads the next packet into rec. It returns io.EOF after the last
// one; any other error means the file is damaged (a truncated last record
// gives io.ErrUnexpectedEOF), and the packets read before it stand.
// Data is reused from call to call; only a packet with comments allocates.
func (r *Reader) Next(rec *Record) error {
	var (
		data []byte
		ci   gopacket.CaptureInfo
		err  error
	)
	*rec = Record{}
	if r.ng != nil {
		var opts pcapgo.NgPacketOptions
		data, ci, opts, err = r.ng.ZeroCopyReadPacketDataWithOptions()
		rec.Comments = opts.Comments
		if len(ci.AncillaryData) > 0 {
			if lt, ok := ci.AncillaryData[0].(layers.LinkType); ok {
				rec.LinkType = LinkType(lt)
			}
		}
	} else {
		data, ci, err = r.pcap.ZeroCopyReadPacketData()
		rec.LinkType = LinkType(r.pcap.LinkType())
	}
	if err != nil {
		// io.EOF is the clean end only between records: pcapgo's classic
		// reader also returns it when the file ends right after a record
		// header, which it has then parsed into ci.
		if err == io.EOF && ci.CaptureLength == 0 {
			return io.EOF
		}
		if errors.Is(err, io.EOF) {
			err = io.ErrUnexpectedEOF
		}
		return fmt.Errorf("capture: %s record %d: %w", r.format, r.n+1, err)
	}
	r.n++
	rec.Time = ci.Timestamp.UnixNano()
	rec.Interface = ci.InterfaceIndex
	rec.Data = data
	rec.OrigLen = ci.Length
	return nil
}

// Records ranges over the packets left in the file, in file order: each
// record (valid only until the loop's next turn, as Next's), then, if the
// file is damaged, one last pair with a nil record and the error, so a
// loop that checks err reports the damage instead of stopping quietly:
//
//	for rec, err := range rd.Records() {
//		if err != nil {
//			return err
//		}
//		use(rec)
//	}
//
// The clean end of the file ends the loop with no error.
func (r *Reader) Records() iter.Seq2[*Record, error] {
	return func(yield func(*Record, error) bool) {
		var rec Record
		for {
			err := r.Next(&rec)
			if err == io.EOF {
				return
			}
			if err != nil {
				yield(nil, err)
				return
			}
			if !yield(&rec, nil) {
				return
			}
		}
	}
}
