package sim_test

import (
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

// BenchmarkScheduleFireLarge is BenchmarkScheduleFire with 16,384 events
// pending at spread-out times, as in a world of a thousand hosts (every
// link direction and host timer has one): each event fired schedules one
// at a pseudo-random later time (issue 20: the event queue's cost in a
// large world).
func BenchmarkScheduleFireLarge(b *testing.B) {
	s := sim.NewScheduler()
	h := nop{}
	x := uint64(1)
	next := func() sim.Duration {
		x ^= x << 13
		x ^= x >> 7
		x ^= x << 17
		return sim.Duration(1 + x%100_000)
	}
	for range 16384 {
		s.After(next(), h, 0)
	}
	b.ReportAllocs()
	for b.Loop() {
		s.After(next(), h, 0)
		s.Step()
	}
	b.ReportMetric(float64(b.N)/b.Elapsed().Seconds()/1e6, "Mevents/s")
}
