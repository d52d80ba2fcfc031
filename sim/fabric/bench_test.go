package fabric_test

import (
	"testing"

	"github.com/rocesim/rocesim/faults"
	"github.com/rocesim/rocesim/sim"
	"github.com/rocesim/rocesim/sim/fabric"
)

type discard struct{}

func (discard) Receive(sim.Time, int, []byte) {}

// setupBench is two nodes through a switch with a 10-rule plan that
// matches nothing, tracing off.
func setupBench(tb testing.TB) (*sim.Scheduler, *fabric.Node) {
	return setupBenchConfig(tb, fabric.Config{})
}

// setupBenchConfig is setupBench with cfg's Observe and CountTx.
func setupBenchConfig(tb testing.TB, cfg fabric.Config) (*sim.Scheduler, *fabric.Node) {
	plan, err := faults.Parse(`drop psn=1000000
drop qp=0x999
delay 1us class=nak
dup class=cnp
corrupt op=RC_FETCH_ADD
reorder n=2 dst=nobody
truncate len=10 src=nobody
rewrite set-psn=+1 class=rnr
drop link=nowhere
down link=nowhere from=1s to=2s
`)
	if err != nil {
		tb.Fatal(err)
	}
	s := sim.NewScheduler()
	if cfg.CountTx {
		plan = nil // counting transmissions without a plan: what verbstest does
	}
	f := fabric.New(fabric.Config{Sched: s, Plan: plan, Rand: sim.NewSeeds(1).Stream("faults"),
		Observe: cfg.Observe, CountTx: cfg.CountTx})
	a := f.AddNode("n0", fabric.PortConfig{MAC: mac(1), IPv4: ip4(1)})
	b := f.AddNode("n1", fabric.PortConfig{MAC: mac(2), IPv4: ip4(2)})
	b.SetReceiver(discard{})
	sw := f.AddSwitch("sw", 2)
	if _, err := f.Connect("a-sw", a.Port(0), sw.Port(0), fabric.DefaultLinkConfig()); err != nil {
		tb.Fatal(err)
	}
	if _, err := f.Connect("b-sw", b.Port(0), sw.Port(1), fabric.DefaultLinkConfig()); err != nil {
		tb.Fatal(err)
	}
	return s, a
}

// BenchmarkFrameThroughSwitch sends one 1 KiB RoCE frame across two links
// and a switch, judged by a 10-rule plan at each hop.
func BenchmarkFrameThroughSwitch(b *testing.B) {
	s, a := setupBench(b)
	frame := roce(b, 0, 1, 1, 1024)
	b.ReportAllocs()
	for b.Loop() {
		if err := a.Send(0, frame, nil); err != nil {
			b.Fatal(err)
		}
		if err := s.Run(); err != nil {
			b.Fatal(err)
		}
	}
}

func TestFramePathZeroAllocs(t *testing.T) {
	for _, c := range []struct {
		name string
		cfg  fabric.Config
	}{
		{"plan", fabric.Config{}},
		// No plan, transmissions counted, an observer: a verbstest world.
		// Many PSNs, so the counting windows see new ones.
		{"count-tx-observe", fabric.Config{CountTx: true, Observe: func(*fabric.FrameRecord) {}}},
		// A verbs world: the stall watch on first hops only.
		{"observe-first", fabric.Config{ObserveFirst: func(*fabric.FrameRecord) {}}},
	} {
		t.Run(c.name, func(t *testing.T) {
			s, a := setupBenchConfig(t, c.cfg)
			psn := uint32(0)
			frames := make([][]byte, 4096)
			for i := range frames {
				frames[i] = roce(t, 0, 1, uint32(i), 1024)
			}
			run := func() {
				if err := a.Send(0, frames[psn%4096], nil); err != nil {
					t.Fatal(err)
				}
				psn++
				if err := s.Run(); err != nil {
					t.Fatal(err)
				}
			}
			for range 4096 {
				run() // grow pools and counting windows
			}
			if n := testing.AllocsPerRun(1000, run); n != 0 {
				t.Errorf("a frame through the fabric: %v allocs", n)
			}
		})
	}
}
