package conformance

import (
	"bytes"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/rocesim/rocesim/internal/tbtest"
	"github.com/rocesim/rocesim/wire/capture"
)

// readRecords reads every record of the capture at path, each with its own
// copy of the data. A damaged file fails the test, rather than letting it
// pass on the records before the damage.
func readRecords(t testing.TB, path string) []capture.Record {
	t.Helper()
	r, err := capture.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	var out []capture.Record
	for rec, err := range r.Records() {
		if err != nil {
			t.Fatalf("%s after %d records: %v", path, len(out), err)
		}
		c := *rec
		c.Data = bytes.Clone(rec.Data)
		out = append(out, c)
	}
	return out
}

// readRecords fails the test on a damaged capture, and reads a whole one
// as it is.
func TestReadRecordsDamaged(t *testing.T) {
	path := filepath.Join("..", "wire", "testdata", "cm", "rxe_cm_addr_error.pcapng")
	whole := readRecords(t, path)
	if len(whole) == 0 {
		t.Fatalf("%s: no records", path)
	}
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	cut := filepath.Join(t.TempDir(), "cut.pcapng")
	if err := os.WriteFile(cut, b[:len(b)-3], 0o644); err != nil {
		t.Fatal(err)
	}
	msg, failed := tbtest.Failure(t, func(tb testing.TB) { readRecords(tb, cut) })
	if want := fmt.Sprintf("after %d records: capture: pcapng record %d: unexpected EOF", len(whole)-1, len(whole)); !failed || !strings.Contains(msg, want) {
		t.Errorf("readRecords of a cut capture: failed %v, %q; want %q", failed, msg, want)
	}
}
