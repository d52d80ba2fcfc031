package fabric_test

import (
	"os"
	"strconv"
	"strings"
	"testing"

	"github.com/rocesim/rocesim/sim/fabric"
	"github.com/rocesim/rocesim/wire/capture"
)

// TestFrameEventNamesCMMessages: in real rxe traffic (a connect whose RTU
// is lost, then a disconnect), the trace event of every CM MAD carries its
// message in the cm field, and no other frame has one. The oracle is
// tshark's listing of the same capture (frame number, attribute ID),
// committed beside it.
func TestFrameEventNamesCMMessages(t *testing.T) {
	const base = "../../wire/testdata/cm/rxe_cm_lost_rtu"
	names := map[string]string{"0x0010": "REQ", "0x0013": "REP", "0x0014": "RTU", "0x0015": "DREQ", "0x0016": "DREP"}
	listing, err := os.ReadFile(base + ".tshark.txt")
	if err != nil {
		t.Fatal(err)
	}
	want := map[int]string{}
	for _, l := range strings.Split(strings.TrimSpace(string(listing)), "\n") {
		f := strings.Split(l, "\t")
		n, err := strconv.Atoi(f[0])
		if err != nil || len(f) < 7 || names[f[6]] == "" {
			t.Fatalf("tshark listing line %q", l)
		}
		want[n] = names[f[6]]
	}
	r, err := capture.Open(base + ".pcapng")
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	n := 0
	for rec, err := range r.Records() {
		if err != nil {
			t.Fatal(err)
		}
		n++
		e := fabric.FrameEvent(0, "a", "frame-tx", "a->b", rec.Data, 0, "", "")
		got, _ := e.Get("cm")
		if got != want[n] {
			t.Errorf("frame %d: cm=%q, want %q", n, got, want[n])
		}
	}
	if n < len(want) {
		t.Errorf("%d frames read, the listing names frame %d", n, len(want))
	}
}
