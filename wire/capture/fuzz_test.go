package capture_test

import (
	"bytes"
	"os"
	"testing"

	"github.com/rocesim/rocesim/wire/capture"
)

// FuzzReader: any input either fails NewReader or reads records until an
// error (expected here: the input is mostly damage); it never panics, and
// records are self-consistent.
func FuzzReader(f *testing.F) {
	for _, path := range realCaptures(f) {
		b, err := os.ReadFile(path)
		if err != nil {
			f.Fatal(err)
		}
		f.Add(b[:min(len(b), 600)])
	}
	f.Add(write(f, capture.FormatPcapng, sample(f, 4)))
	f.Fuzz(func(t *testing.T, b []byte) {
		r, err := capture.NewReader(bytes.NewReader(b))
		if err != nil {
			return
		}
		n := 0
		for x, err := range r.Records() {
			if err != nil || n == 1000 {
				break
			}
			if x.Interface < 0 {
				t.Fatalf("record %d: interface %d", n, x.Interface)
			}
			n++
		}
	})
}
