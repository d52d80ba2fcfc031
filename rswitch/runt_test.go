//go:build linux

package rswitch

import (
	"bytes"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"testing"

	"github.com/rocesim/rocesim/faults"
	"github.com/rocesim/rocesim/sim"
	"github.com/rocesim/rocesim/wire"
)

// sentTransport is a null transport that keeps the lengths of the
// frames it is given.
type sentTransport struct {
	*nullTransport
	lens []int
}

func (t *sentTransport) Send(frames [][]byte) (int, error) {
	for _, f := range frames {
		t.lens = append(t.lens, len(f))
	}
	return len(frames), nil
}

// TestSwitchDropsRunts: a frame shorter than an Ethernet header, cut so
// by a truncate rule or received so from a VM's link, is dropped as a
// real switch drops a runt, not sent to the other endpoint: counted
// (Stats.Runts), traced with drop=runt and captured with a comment that
// says why. A cut that leaves the header whole is forwarded.
func TestSwitchDropsRunts(t *testing.T) {
	for _, c := range []struct {
		name string
		plan string
		cut  int // the frame's length as received; 0: whole
		sent []int
		runt bool
	}{
		{"truncate len=1", "truncate len=1\n", 0, nil, true},
		{"truncate len=5", "truncate len=5\n", 0, nil, true},
		{"truncate len=13", "truncate len=13\n", 0, nil, true},
		{"truncate len=14", "truncate len=14\n", 0, []int{14}, false},
		{"received empty", "", -1, nil, true},
		{"received 13 bytes", "", 13, nil, true},
	} {
		t.Run(c.name, func(t *testing.T) {
			b := &sentTransport{nullTransport: newNullTransport()}
			path := filepath.Join(t.TempDir(), "x.pcapng")
			cfg := Config{A: newNullTransport(), B: b, CapturePath: path, Trace: &sim.Trace{}}
			if c.plan != "" {
				p, err := faults.Parse(c.plan)
				if err != nil {
					t.Fatal(err)
				}
				cfg.Plan = p
			}
			s, err := New(cfg)
			if err != nil {
				t.Fatal(err)
			}
			frame := roceFrame(t, 7)
			switch {
			case c.cut < 0:
				frame = frame[:0]
			case c.cut > 0:
				frame = frame[:c.cut]
			}
			s.handleOne(frame)
			if err := s.Close(); err != nil {
				t.Fatal(err)
			}
			if !slices.Equal(b.lens, c.sent) {
				t.Errorf("sent to B: frames of %v bytes, want %v", b.lens, c.sent)
			}
			var want uint64
			if c.runt {
				want = 1
			}
			if got := s.Stats().Runts; got != want {
				t.Errorf("Stats.Runts = %d, want %d", got, want)
			}
			var drops []string
			for _, e := range cfg.Trace.Events() {
				if e.Kind == "frame-drop" {
					d, _ := e.Get("drop")
					drops = append(drops, d)
				}
			}
			capt, err := os.ReadFile(path)
			if err != nil {
				t.Fatal(err)
			}
			hasWhy := bytes.Contains(capt, []byte("runt of "))
			if c.runt != (len(drops) == 1 && drops[0] == string(sim.DropRunt)) || c.runt != hasWhy {
				t.Errorf("drops traced %v, capture says why: %v; want a runt drop: %v", drops, hasWhy, c.runt)
			}
		})
	}
}

// TestSwitchReportsTxEvictions: Stats.TxEvictions is the injector's
// count of flows its transmission counting forgot (0 within its bounds);
// with room for one flow, frames to two QPs in turn evict each other.
func TestSwitchReportsTxEvictions(t *testing.T) {
	for _, limit := range []int{0, 1} {
		t.Run(strconv.Itoa(limit), func(t *testing.T) {
			s := newBenchSwitch(t, t.TempDir(), "", "drop psn=999\n")
			s.inj.LimitTx(limit, 0)
			for k, qp := range []uint32{0x11, 0x12, 0x11} {
				f := roceFrame(t, uint32(k))
				var p wire.Packet
				if err := p.DecodeHeaders(f); err != nil {
					t.Fatal(err)
				}
				p.BTH.SetDestQP(qp)
				p.UpdateICRC()
				s.handleOne(f)
			}
			want := uint64(0)
			if limit == 1 {
				want = 2
			}
			if got := s.Stats().TxEvictions; got != want {
				t.Errorf("with a limit of %d flows: Stats.TxEvictions = %d, want %d", limit, got, want)
			}
		})
	}
}

// TestSwitchRuntAllocs: dropping a runt allocates nothing per frame, a
// capture and its comment included, whether a truncate rule cut it or it
// came so: a VM sending runts must not feed the garbage collector.
func TestSwitchRuntAllocs(t *testing.T) {
	for _, c := range []struct{ name, plan string }{{"cut", "truncate len=5\n"}, {"received", ""}} {
		t.Run(c.name, func(t *testing.T) {
			s := newBenchSwitch(t, t.TempDir(), "x.pcapng", c.plan)
			frame := roceFrame(t, 7)
			if c.plan == "" {
				frame = frame[:5]
			}
			buf := make([]byte, len(frame))
			allocs := testing.AllocsPerRun(200, func() {
				copy(buf, frame)
				s.handleOne(buf)
			})
			if allocs != 0 {
				t.Errorf("%v allocations per runt, want 0", allocs)
			}
			if st := s.Stats(); st.Runts < 200 || st.Forwarded != 0 {
				t.Errorf("stats %+v: want every frame dropped as a runt", st)
			}
		})
	}
}
