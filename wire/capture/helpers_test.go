package capture_test

import (
	"bytes"
	"os"
	"path/filepath"
	"testing"

	"github.com/rocesim/rocesim/internal/tsharktest"
	"github.com/rocesim/rocesim/wire/capture"
)

// needTshark returns the path of tshark (see tsharktest.Need).
func needTshark(t testing.TB) string { return tsharktest.Need(t) }

// tshark runs tshark with args and returns its standard output.
func tshark(t testing.TB, args ...string) string { return tsharktest.Run(t, args...) }

// tsharkCount returns how many packets tshark lists in path.
func tsharkCount(t testing.TB, path string) int {
	t.Helper()
	return bytes.Count([]byte(tshark(t, "-r", path)), []byte("\n"))
}

// realCaptures returns the rxe captures kept in wire/testdata.
func realCaptures(t testing.TB) []string {
	t.Helper()
	m, err := filepath.Glob("../testdata/*.pcap")
	if err != nil || len(m) == 0 {
		t.Fatalf("no captures in ../testdata: %v", err)
	}
	return m
}

// rec is a Record with its data copied, for comparing.
type rec struct {
	Time     int64
	Iface    int
	Data     string
	OrigLen  int
	Comments []string
	LinkType capture.LinkType
}

// readAll reads every record of a capture held in memory.
func readAll(t testing.TB, b []byte) (capture.Format, []rec) {
	t.Helper()
	r, err := capture.NewReader(bytes.NewReader(b))
	if err != nil {
		t.Fatalf("NewReader: %v", err)
	}
	var out []rec
	for x, err := range r.Records() {
		if err != nil {
			t.Fatalf("after %d records: %v", len(out), err)
		}
		out = append(out, rec{x.Time, x.Interface, string(x.Data), x.OrigLen, x.Comments, x.LinkType})
	}
	return r.Format(), out
}

// readFile reads every frame of a capture file.
func readFile(t testing.TB, path string) []rec {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	_, recs := readAll(t, b)
	return recs
}
