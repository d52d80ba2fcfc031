package capture_test

import (
	"bytes"
	"errors"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"testing"

	"github.com/rocesim/rocesim/wire/capture"
)

// needTshark returns the path of tshark. Without it the test is skipped,
// except when CI=true, where its absence is a failure.
func needTshark(t testing.TB) string {
	t.Helper()
	p, err := exec.LookPath("tshark")
	if err != nil {
		if os.Getenv("CI") == "true" {
			t.Fatal("tshark is required when CI=true: not found in PATH")
		}
		t.Skip("tshark not installed (apt-get install tshark); skipping")
	}
	return p
}

// tshark runs tshark with args and returns its standard output (it writes
// a warning about running as root to standard error, which is ignored).
func tshark(t testing.TB, args ...string) string {
	t.Helper()
	cmd := exec.Command(needTshark(t), args...)
	cmd.Env = append(os.Environ(), "LC_ALL=C", "TZ=UTC")
	out, err := cmd.Output()
	if err != nil {
		var ee *exec.ExitError
		msg := ""
		if errors.As(err, &ee) {
			msg = string(ee.Stderr)
		}
		t.Fatalf("tshark %v: %v\n%s", args, err, msg)
	}
	return string(out)
}

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
	var x capture.Record
	for {
		err := r.Next(&x)
		if err == io.EOF {
			break
		}
		if err != nil {
			t.Fatalf("Next after %d records: %v", len(out), err)
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
