package wire_test

import (
	"encoding/binary"
	"fmt"
	"os"
	"path/filepath"
	"testing"

	"github.com/rocesim/rocesim/internal/tsharktest"
)

// readPcap returns the frames of a classic little-endian pcap file (the
// format of the real rxe captures in testdata/). Test-only: the project's
// capture reader is wire/capture, which package wire must not import.
func readPcap(t testing.TB, path string) [][]byte {
	t.Helper()
	d, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if len(d) < 24 {
		t.Fatalf("%s: too short for a pcap header", path)
	}
	switch binary.LittleEndian.Uint32(d) {
	case 0xa1b2c3d4, 0xa1b23c4d:
	default:
		t.Fatalf("%s: not a little-endian classic pcap", path)
	}
	var frames [][]byte
	for off := 24; off+16 <= len(d); {
		incl := int(binary.LittleEndian.Uint32(d[off+8:]))
		if off+16+incl > len(d) {
			t.Fatalf("%s: record at %d overruns the file", path, off)
		}
		frames = append(frames, d[off+16:off+16+incl])
		off += 16 + incl
	}
	return frames
}

// writePcap writes frames as a classic nanosecond pcap with Ethernet link
// type, timestamps 1 µs apart.
func writePcap(t testing.TB, path string, frames [][]byte) {
	t.Helper()
	b := make([]byte, 24, 1<<16)
	binary.LittleEndian.PutUint32(b[0:], 0xa1b23c4d)
	binary.LittleEndian.PutUint16(b[4:], 2)
	binary.LittleEndian.PutUint16(b[6:], 4)
	binary.LittleEndian.PutUint32(b[16:], 1<<18)
	binary.LittleEndian.PutUint32(b[20:], 1)
	for i, f := range frames {
		var h [16]byte
		binary.LittleEndian.PutUint32(h[4:], uint32(i*1000))
		binary.LittleEndian.PutUint32(h[8:], uint32(len(f)))
		binary.LittleEndian.PutUint32(h[12:], uint32(len(f)))
		b = append(b, h[:]...)
		b = append(b, f...)
	}
	if err := os.WriteFile(path, b, 0o644); err != nil {
		t.Fatal(err)
	}
}

// needTshark returns the path of tshark (see tsharktest.Need).
func needTshark(t testing.TB) string { return tsharktest.Need(t) }

// tshark runs tshark with args and returns its standard output.
func tshark(t testing.TB, args ...string) []byte { return []byte(tsharktest.Run(t, args...)) }

func captures(t testing.TB) []string {
	t.Helper()
	m, err := filepath.Glob("testdata/*.pcap")
	if err != nil || len(m) == 0 {
		t.Fatalf("no captures in testdata: %v", err)
	}
	return m
}

func hexdump(b []byte) string { return fmt.Sprintf("% x", b) }
