package procfabric

import (
	"bytes"
	"context"
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
// last frame set under each key, in key order, the notes saying so; a
// key taken out, or a port closed, leaves nothing behind. This is how a
// killed program's rdma_cm IDs still send their DREQs (the drop-in's
// will), as the kernel sends them when it closes a dead process's files.
func TestWill(t *testing.T) {
	const suffix = " (sent by the fabric: node a's process ended without detaching)"
	type set struct {
		key  uint32
		note string // "": take the key out
	}
	for _, c := range []struct {
		name string
		sets [][]set // each SetWill in turn
		end  func(a *Port)
		want []string // notes of the frames b receives, in order
	}{
		{"killed", [][]set{{{2, "two"}, {1, "first"}}, {{1, "one"}}}, func(a *Port) { a.c.Close() },
			[]string{"one" + suffix, "two" + suffix}},
		{"taken out", [][]set{{{1, "one"}, {2, "two"}}, {{1, ""}}}, func(a *Port) { a.c.Close() },
			[]string{"two" + suffix}},
		{"closed", [][]set{{{1, "one"}}}, func(a *Port) { a.Close() }, nil},
	} {
		t.Run(c.name, func(t *testing.T) {
			ctx := bound(t, 30*time.Second)
			tap := &noteTap{}
			d, _ := testDaemon(t, ctx, Config{Tap: tap})
			a, b := attachAB(t, d)
			frame := frameTo(a, b)
			for _, sets := range c.sets {
				var w []WillEntry
				for _, st := range sets {
					e := WillEntry{Key: st.key}
					if st.note != "" {
						e.Frame, e.Note = bytes.Clone(frame), []byte(st.note)
						e.Frame[len(frame)-1] = st.note[0] // which frame it is
					}
					w = append(w, e)
				}
				if err := a.SetWill(w); err != nil {
					t.Fatal(err)
				}
			}
			// a waits once and then ends; b waits a millisecond of
			// virtual time once the daemon has seen a go.
			go func() { a.Wait(sim.Never) }()
			untilWaiting(a)
			c.end(a)
			untilDetached(t, ctx, d) // else b's wait may pass a by
			got := framesUntil(t, b, sim.Time(0).Add(sim.Millisecond))
			if len(got) != len(c.want) {
				t.Fatalf("b received %d frames, want %d (notes captured: %q)", len(got), len(c.want), tap.all())
			}
			for i, f := range got {
				if f[len(f)-1] != c.want[i][0] {
					t.Errorf("frame %d is %q's, want %q's", i, f[len(f)-1], c.want[i][0])
				}
			}
			equalStrings(t, "captured notes", tap.all(), c.want)
			if st, wills := d.Stats(), uint64(min(1, len(c.want))); st.Wills != wills || st.Refused != 0 {
				t.Errorf("stats %+v: want %d wills sent and no refusal", st, wills)
			}
		})
	}
}

// TestWillKilledMidWrite: a process killed inside a write (its stream
// ends inside a message) died; it did not misbehave: the frame it sent
// before the cut stays on its way and its will goes too, with no
// refusal. An unattached connection cut short is still refused
// (TestHostileMessages).
func TestWillKilledMidWrite(t *testing.T) {
	ctx := bound(t, 30*time.Second)
	tap := &noteTap{}
	d, _ := testDaemon(t, ctx, Config{Tap: tap})
	a, b := attachAB(t, d)
	frame := frameTo(a, b)
	if err := a.Send(frame, []byte("sent before")); err != nil {
		t.Fatal(err)
	}
	if err := a.SetWill([]WillEntry{{Key: 1, Frame: frame, Note: []byte("will")}}); err != nil { // writes both
		t.Fatal(err)
	}
	a.c.Write([]byte{0, 0, 0, 40, Version, byte(msgFrame), 0}) // 7 bytes of a 44-byte message
	a.c.Close()
	untilDetached(t, ctx, d) // else b's wait may pass a by
	if got := framesUntil(t, b, sim.Time(0).Add(sim.Millisecond)); len(got) != 2 {
		t.Errorf("b received %d frames, want the one sent and the will's (notes: %q)", len(got), tap.all())
	}
	equalStrings(t, "captured notes", tap.all(), []string{"sent before", "will (sent by the fabric: node a's process ended without detaching)"})
	if st := d.Stats(); st.Refused != 0 || st.Wills != 1 {
		t.Errorf("stats %+v: want no refusal and the will sent", st)
	}
}

// TestWillBounded: a will larger than the daemon's bound on held bytes
// sends its process away with the reason, and nothing of it is sent; a
// frame replaced or taken out gives its bytes back, so a will changed
// for ever under a few keys stays within the bound.
func TestWillBounded(t *testing.T) {
	t.Run("kept within", func(t *testing.T) {
		ctx := bound(t, 30*time.Second)
		d, _ := testDaemon(t, ctx, Config{maxHeld: 4000})
		a, b := attachAB(t, d)
		frame := frameTo(a, b)
		for range 50 { // 100 kB through keys 1 and 2, 2 kB at most at once
			if err := a.SetWill([]WillEntry{{Key: 1, Frame: frame}, {Key: 2, Frame: frame}, {Key: 2}}); err != nil {
				t.Fatal(err)
			}
		}
		a.c.Close()              // killed: the will is key 1's frame
		untilDetached(t, ctx, d) // else b's wait may pass a by
		if got := framesUntil(t, b, sim.Time(0).Add(sim.Millisecond)); len(got) != 1 {
			t.Errorf("b received %d frames, want key 1's", len(got))
		}
		if st := d.Stats(); st.Refused != 0 || st.Wills != 1 {
			t.Errorf("stats %+v: want the will sent, no refusal", st)
		}
	})
	t.Run("too large", func(t *testing.T) {
		ctx := bound(t, 30*time.Second)
		d, _ := testDaemon(t, ctx, Config{maxHeld: 4000})
		a, b := attachAB(t, d)
		frame := frameTo(a, b)
		w := make([]WillEntry, 5)
		for i := range w {
			w[i] = WillEntry{Key: uint32(i), Frame: frame, Note: []byte("last words")}
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
	})
}

// untilDetached returns once the daemon has detached a process.
func untilDetached(t *testing.T, ctx context.Context, d *Daemon) {
	t.Helper()
	for d.Stats().Detaches == 0 {
		select {
		case <-ctx.Done():
			t.Fatal("the daemon never saw a go")
		case <-time.After(time.Millisecond):
		}
	}
}

func equalStrings(t *testing.T, what string, got, want []string) {
	t.Helper()
	if strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Errorf("%s:\n got %q\nwant %q", what, got, want)
	}
}
