package procfabric

import (
	"bytes"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/rocesim/rocesim/sim"
)

// noteTap keeps the comment of every frame the fabric captures.
type noteTap struct {
	mu    sync.Mutex
	notes []string
}

func (n *noteTap) AddInterface(string, string) (int, error) { return 0, nil }

func (n *noteTap) WriteFrame(_ int64, _ int, _ []byte, comment string) error {
	n.mu.Lock()
	defer n.mu.Unlock()
	n.notes = append(n.notes, strings.Clone(comment)) // valid during the call only
	return nil
}

func (n *noteTap) all() []string {
	n.mu.Lock()
	defer n.mu.Unlock()
	return append([]string(nil), n.notes...)
}

// framesUntil has b wait until virtual time until and returns the frames
// that reached it meanwhile.
func framesUntil(t *testing.T, b *Port, until sim.Time) [][]byte {
	t.Helper()
	var got [][]byte
	for b.Now() < until {
		in, err := b.Wait(until)
		if err != nil {
			t.Fatalf("b: %v", err)
		}
		for _, e := range in.Events {
			if e.Frame != nil {
				got = append(got, bytes.Clone(e.Frame))
			}
		}
	}
	return got
}

// TestWill: a process whose connection ends without a detach (killed:
// here its socket is closed under it) has the daemon send its will, the
// last one it set, with the frames' notes saying so; a process that
// closes its port, or voids its will, leaves nothing behind. This is how
// a killed program's rdma_cm IDs still send their DREQs (the drop-in's
// will), as the kernel sends them when it closes a dead process's files.
func TestWill(t *testing.T) {
	for _, c := range []struct {
		name  string
		wills [][]string // notes of each SetWill in turn
		end   func(a *Port)
		want  []string // notes of the frames b receives
	}{
		{"killed", [][]string{{"first will"}, {"last words", "and more"}}, func(a *Port) { a.c.Close() },
			[]string{"last words (sent by the fabric: node a's process ended without detaching)",
				"and more (sent by the fabric: node a's process ended without detaching)"}},
		{"voided", [][]string{{"last words"}, nil}, func(a *Port) { a.c.Close() }, nil},
		{"closed", [][]string{{"last words"}}, func(a *Port) { a.Close() }, nil},
	} {
		t.Run(c.name, func(t *testing.T) {
			ctx := bound(t, 30*time.Second)
			tap := &noteTap{}
			d, _ := testDaemon(t, ctx, Config{Tap: tap})
			a, b := attachAB(t, d)
			frame := frameTo(a, b)
			for i, notes := range c.wills {
				var w []WillFrame
				for _, n := range notes {
					f := bytes.Clone(frame)
					f[len(f)-1] = byte(i) // which will it came from
					w = append(w, WillFrame{Frame: f, Note: []byte(n)})
				}
				if err := a.SetWill(w); err != nil {
					t.Fatal(err)
				}
			}
			// a waits once (its will goes to the daemon with the wait)
			// and then ends; b waits a millisecond of virtual time.
			go func() { a.Wait(sim.Never) }()
			untilWaiting(a)
			c.end(a)
			for d.Stats().Detaches == 0 { // else b's wait may pass a by
				select {
				case <-ctx.Done():
					t.Fatal("the daemon never saw a go")
				case <-time.After(time.Millisecond):
				}
			}
			got := framesUntil(t, b, sim.Time(0).Add(sim.Millisecond))
			if len(got) != len(c.want) {
				t.Fatalf("b received %d frames, want %d (notes captured: %q)", len(got), len(c.want), tap.all())
			}
			for _, f := range got {
				if f[len(f)-1] != byte(len(c.wills)-1) {
					t.Errorf("a frame of will %d, want the last (%d)", f[len(f)-1], len(c.wills)-1)
				}
			}
			equalStrings(t, "captured notes", tap.all(), c.want)
			if st, wills := d.Stats(), uint64(min(1, len(c.want))); st.Wills != wills || st.Refused != 0 {
				t.Errorf("stats %+v: want %d wills sent and no refusal", st, wills)
			}
		})
	}
}

// TestWillBounded: a will larger than the daemon's bound on held bytes
// sends its process away with the reason, and nothing of it is sent.
func TestWillBounded(t *testing.T) {
	ctx := bound(t, 30*time.Second)
	d, _ := testDaemon(t, ctx, Config{maxHeld: 4000})
	a, b := attachAB(t, d)
	frame := frameTo(a, b)
	w := make([]WillFrame, 5)
	for i := range w {
		w[i] = WillFrame{Frame: frame, Note: []byte("last words")}
	}
	if err := a.SetWill(w); err != nil {
		t.Fatal(err)
	}
	if _, err := a.Wait(sim.Never); err == nil || !strings.Contains(err.Error(), "a will of more than 4000 bytes") {
		t.Errorf("a's wait: %v, want the daemon's reason", err)
	}
	if got := framesUntil(t, b, sim.Time(0).Add(sim.Millisecond)); len(got) != 0 {
		t.Errorf("b received %d frames of a refused will", len(got))
	}
	if st := d.Stats(); st.Refused != 1 || st.Wills != 0 {
		t.Errorf("stats %+v: want one refusal and no will sent", st)
	}
}

func equalStrings(t *testing.T, what string, got, want []string) {
	t.Helper()
	if strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Errorf("%s:\n got %q\nwant %q", what, got, want)
	}
}
