//go:build linux

package rswitch

import (
	"path/filepath"
	"testing"

	"github.com/rocesim/rocesim/faults"
	"github.com/rocesim/rocesim/realnet"
)

// nullTransport is a transport that takes every frame it is given and
// receives nothing until closed: the switch's per-frame path with no
// socket under it.
type nullTransport struct{ done chan struct{} }

func newNullTransport() *nullTransport { return &nullTransport{done: make(chan struct{})} }

func (t *nullTransport) Receive([]realnet.Msg) (int, error) {
	<-t.done
	return 0, realnet.ErrClosed
}
func (t *nullTransport) Send(frames [][]byte) (int, error) { return len(frames), nil }
func (t *nullTransport) BatchSize() int                    { return 1 }
func (t *nullTransport) Carries() realnet.Carriage         { return realnet.WholeFrames }
func (t *nullTransport) Stats() realnet.TransportStats     { return realnet.TransportStats{} }
func (t *nullTransport) Close() error {
	select {
	case <-t.done:
	default:
		close(t.done)
	}
	return nil
}

// switchCases are the per-frame configurations the allocation test and
// the benchmark run: no capture, each capture format, and a plan whose
// verdicts put a comment on every frame.
var switchCases = []struct {
	name, capture, plan string
}{
	{"nocapture", "", ""},
	{"pcap", "x.pcap", ""},
	{"pcapng", "x.pcapng", ""},
	{"pcapng+corrupt", "x.pcapng", "corrupt op=RC_SEND_ONLY byte=30\n"},
	{"pcapng+dup", "x.pcapng", "dup n=2 op=RC_SEND_ONLY\n"},
	{"pcapng+drop", "x.pcapng", "drop op=RC_SEND_ONLY\n"},
}

// newBenchSwitch is a switch on two null transports with the given
// capture (a file name in dir, or none) and plan text.
func newBenchSwitch(tb testing.TB, dir, capture, plan string) *Switch {
	tb.Helper()
	cfg := Config{A: newNullTransport(), B: newNullTransport()}
	if capture != "" {
		cfg.CapturePath = filepath.Join(dir, capture)
	}
	if plan != "" {
		p, err := faults.Parse(plan)
		if err != nil {
			tb.Fatal(err)
		}
		cfg.Plan = p
	}
	s, err := New(cfg)
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() { s.Close() })
	return s
}

// handleOne passes frame through the switch from side 0, as serve does.
func (s *Switch) handleOne(frame []byte) {
	s.mu.Lock()
	s.handle(0, frame)
	s.mu.Unlock()
}

// TestSwitchFrameAllocs holds the per-frame path to no allocation, with
// a capture and with a plan's comments (issue 17): a switch forwarding
// real traffic for hours must not feed the garbage collector per frame.
func TestSwitchFrameAllocs(t *testing.T) {
	frame := roceFrame(t, 7)
	buf := make([]byte, len(frame))
	for _, c := range switchCases {
		t.Run(c.name, func(t *testing.T) {
			s := newBenchSwitch(t, t.TempDir(), c.capture, c.plan)
			allocs := testing.AllocsPerRun(200, func() {
				copy(buf, frame) // corrupt alters the buffer in place
				s.handleOne(buf)
			})
			if allocs != 0 {
				t.Errorf("%v allocations per frame, want 0", allocs)
			}
		})
	}
}

// BenchmarkSwitchFrame is the switch's per-frame cost (decode, judge,
// send, capture) without sockets.
func BenchmarkSwitchFrame(b *testing.B) {
	frame := roceFrame(&testing.T{}, 7)
	buf := make([]byte, len(frame))
	for _, c := range switchCases {
		b.Run(c.name, func(b *testing.B) {
			s := newBenchSwitch(b, b.TempDir(), c.capture, c.plan)
			b.ReportAllocs()
			for b.Loop() {
				copy(buf, frame)
				s.handleOne(buf)
			}
		})
	}
}
