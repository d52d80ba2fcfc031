package capture_test

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/rocesim/rocesim/wire/capture"
)

// tshark reads the files we write: frame count, nanosecond timestamps
// (from t=0, the simulation's start, up), interface names and per-packet
// comments (frame.comment in Wireshark 4.x).
func TestTsharkReadsOurFiles(t *testing.T) {
	needTshark(t)
	recs := sample(t, 12)
	for _, f := range []capture.Format{capture.FormatPcap, capture.FormatPcapng} {
		t.Run(f.String(), func(t *testing.T) {
			path := filepath.Join(t.TempDir(), "x."+f.String())
			if err := os.WriteFile(path, write(t, f, recs), 0o644); err != nil {
				t.Fatal(err)
			}
			out := tshark(t, "-r", path, "-T", "fields", "-E", "separator=|",
				"-e", "frame.time_epoch", "-e", "frame.interface_name", "-e", "frame.comment", "-e", "frame.len")
			lines := strings.Split(strings.TrimSuffix(out, "\n"), "\n")
			if len(lines) != len(recs) {
				t.Fatalf("tshark lists %d frames, wrote %d:\n%s", len(lines), len(recs), out)
			}
			for i, r := range recs {
				want := []string{formatEpoch(r.Time), "", "", itoa(len(r.Data))}
				if f == capture.FormatPcapng {
					want[1] = links[r.Iface].Name
					want[2] = strings.Join(r.Comments, ",")
				}
				if got := strings.Split(lines[i], "|"); strings.Join(got, "|") != strings.Join(want, "|") {
					t.Errorf("frame %d: tshark %q, want %q", i+1, got, want)
				}
			}
		})
	}
}

func itoa(n int) string { return string(appendInt(nil, int64(n))) }
