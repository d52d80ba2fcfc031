package sim_test

import (
	"fmt"
	"testing"

	"github.com/rocesim/rocesim/sim"
)

type nop struct{}

func (nop) Fire(sim.Time, uint64) {}

// BenchmarkScheduleFire schedules and fires one empty event at a time
// with 64 others pending: the steady state of a simulation. The issue's
// target is at least 10 million per second on one core, 0 allocs.
func BenchmarkScheduleFire(b *testing.B) {
	s := sim.NewScheduler()
	h := nop{}
	for i := range 64 {
		s.After(sim.Duration(1000+i), h, 0)
	}
	b.ReportAllocs()
	for b.Loop() {
		s.After(500, h, 0)
		s.Step()
	}
	b.ReportMetric(float64(b.N)/b.Elapsed().Seconds()/1e6, "Mevents/s")
}

// BenchmarkScheduleCancel schedules and cancels a timer, as a NIC does
// with its retransmission timer on every ACK.
func BenchmarkScheduleCancel(b *testing.B) {
	s := sim.NewScheduler()
	h := nop{}
	for i := range 64 {
		s.After(sim.Duration(1000+i), h, 0)
	}
	b.ReportAllocs()
	for b.Loop() {
		t := s.After(500, h, 0)
		t.Cancel()
	}
}

func TestScheduleFireZeroAllocs(t *testing.T) {
	s := sim.NewScheduler()
	h := nop{}
	s.After(1, h, 0)
	s.Step()
	if a := testing.AllocsPerRun(1000, func() {
		s.After(500, h, 0).Cancel()
		s.After(500, h, 0)
		s.Step()
	}); a != 0 {
		t.Errorf("schedule+fire: %v allocs/op", a)
	}
}

// xorshift is the benchmarks' pseudo-random source: a fixed sequence, so
// every run and both sides of a comparison see the same times.
type xorshift uint64

func (x *xorshift) next(n uint64) uint64 {
	*x ^= *x << 13
	*x ^= *x >> 7
	*x ^= *x << 17
	return uint64(*x) % n
}

// BenchmarkStep schedules and fires one event at a time with a fixed
// number of others pending, each at a pseudo-random time up to 100 µs
// ahead: 8 is a small world, 1,300 the alltoall at N=256 (a queued
// arrival per link direction and a timer per host), 100,000 beyond the
// largest world. In "cancel" one step in 16 also cancels a pending timer
// and schedules it again later, as a host does when its deadline moves
// (issue 20: the event queue's cost in a large world).
func BenchmarkStep(b *testing.B) {
	for _, pending := range []int{8, 1300, 100_000} {
		for _, cancel := range []bool{false, true} {
			name := fmt.Sprintf("pending=%d", pending)
			if cancel {
				name += "/cancel"
			}
			b.Run(name, func(b *testing.B) {
				s := sim.NewScheduler()
				h := nop{}
				x := xorshift(1)
				timers := make([]sim.Timer, pending)
				for i := range timers {
					timers[i] = s.After(sim.Duration(1+x.next(100_000)), h, 0)
				}
				b.ReportAllocs()
				i := 0
				for b.Loop() {
					s.After(sim.Duration(1+x.next(100_000)), h, 0)
					s.Step()
					if i++; cancel && i%16 == 0 {
						t := &timers[x.next(uint64(pending))]
						if t.Cancel() {
							*t = s.After(sim.Duration(1+x.next(100_000)), h, 0)
						}
					}
				}
				b.ReportMetric(float64(b.N)/b.Elapsed().Seconds()/1e6, "Mevents/s")
			})
		}
	}
}
