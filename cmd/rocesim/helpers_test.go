package main

import (
	"bytes"
	"flag"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/rocesim/rocesim/internal/tsharktest"
	"github.com/rocesim/rocesim/wire/capture"
)

// init clears COLUMNS: the terminal ladder follows it (ladderWidth), and
// the golden files are drawn at the default width of output that is not
// a terminal, whatever the shell that runs go test has set.
func init() { os.Unsetenv("COLUMNS") }

var update = flag.Bool("update", false, "rewrite the golden files in testdata/")

// needTshark returns the path of tshark (see tsharktest.Need).
func needTshark(t testing.TB) string { return tsharktest.Need(t) }

// tshark runs tshark with args and returns its standard output.
func tshark(t testing.TB, args ...string) string { return tsharktest.Run(t, args...) }

// realCaptures returns the rxe captures kept in wire/testdata.
func realCaptures(t testing.TB) []string {
	t.Helper()
	m, err := filepath.Glob("../../wire/testdata/*.pcap")
	if err != nil || len(m) == 0 {
		t.Fatalf("no captures in ../../wire/testdata: %v", err)
	}
	return m
}

// writeFile writes text to path, making its directories.
func writeFile(t testing.TB, path, text string) {
	t.Helper()
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, []byte(text), 0o644); err != nil {
		t.Fatal(err)
	}
}

// runCmd runs the command line and returns its exit status and output.
func runCmd(args ...string) (code int, stdout, stderr string) {
	var o, e bytes.Buffer
	code = run(args, &o, &e)
	return code, o.String(), e.String()
}

// frameLines returns the lines of text output that describe frames (not
// the '#' header and summary).
func frameLines(out string) []string {
	var ls []string
	for _, l := range strings.Split(strings.TrimSuffix(out, "\n"), "\n") {
		if l != "" && !strings.HasPrefix(l, "#") {
			ls = append(ls, l)
		}
	}
	return ls
}

// frame is one record of a capture, copied.
type frame struct {
	ns       int64
	data     []byte
	comments []string
}

// readFrames reads every record of a capture file; a damaged file fails
// the test, rather than passing on the frames before the damage.
func readFrames(t testing.TB, path string) []frame {
	t.Helper()
	r, err := capture.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	var out []frame
	for rec, err := range r.Records() {
		if err != nil {
			t.Fatalf("%s after %d frames: %v", path, len(out), err)
		}
		out = append(out, frame{rec.Time, bytes.Clone(rec.Data), rec.Comments})
	}
	return out
}

// cutCapture writes a copy of the capture at path without its last n
// bytes, a file damaged inside its last record, and returns its path.
func cutCapture(t testing.TB, path string, n int) string {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	cut := filepath.Join(t.TempDir(), "cut-"+filepath.Base(path))
	if err := os.WriteFile(cut, b[:len(b)-n], 0o644); err != nil {
		t.Fatal(err)
	}
	return cut
}

// writePcap writes frames to a new classic pcap file in dir.
func writePcap(t testing.TB, path string, frames []frame) {
	t.Helper()
	w, err := capture.Create(path, capture.PcapngOptions{})
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range frames {
		if err := w.WriteFrame(f.ns, 0, f.data, ""); err != nil {
			t.Fatal(err)
		}
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
}

// golden compares got with testdata/name, or rewrites it under -update.
func golden(t *testing.T, name, got string) {
	t.Helper()
	path := filepath.Join("testdata", name)
	if *update {
		if err := os.WriteFile(path, []byte(got), 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	want, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("%v (run go test -update to create it)", err)
	}
	if got != string(want) {
		gl, wl := strings.Split(got, "\n"), strings.Split(string(want), "\n")
		for i := 0; i < len(gl) || i < len(wl); i++ {
			var g, w string
			if i < len(gl) {
				g = gl[i]
			}
			if i < len(wl) {
				w = wl[i]
			}
			if g != w {
				t.Fatalf("%s differs at line %d (go test -update rewrites it; review the diff):\n got  %q\n want %q", path, i+1, g, w)
			}
		}
	}
}

// envWith returns a getenv that knows only the given key, value pairs.
func envWith(kv ...string) func(string) string {
	return func(k string) string {
		for i := 0; i+1 < len(kv); i += 2 {
			if kv[i] == k {
				return kv[i+1]
			}
		}
		return ""
	}
}
