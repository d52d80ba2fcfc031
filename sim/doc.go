// Package sim is rocesim's deterministic simulation engine: virtual time,
// an event queue, seeded random streams and the structured trace.
//
// Time is sim.Time, nanoseconds since the simulation started, and spans
// are sim.Duration; they print like time.Duration ("12.288µs"). Nothing
// here reads the wall clock, starts a goroutine or draws from a global
// random source, so the same program and seed give the same run.
//
//	s := sim.NewScheduler()
//	t := s.After(4*sim.Microsecond, handler, arg) // handler.Fire(now, arg) later
//	t.Cancel()                                    // a cancelled event never fires
//	err := s.Run()                                // or RunUntil(t), Step()
//
// Events at the same time fire in the order they were scheduled. Run and
// RunUntil stop with ErrEventLimit when a run fires more events than its
// limit, which is how a livelock ends. Handlers are interfaces taking an
// argument, so scheduling and firing allocate nothing in steady state.
//
// Randomness: sim.NewSeeds(master).Stream("faults") gives each component
// its own math/rand/v2 PCG stream derived from the one master seed.
//
// Trace: a *sim.Trace collects sim.Events (time, node, QPN, kind, fields)
// with a stable one-line text form for golden tests; a nil *Trace records
// nothing. A trace keeps its first Trace.Limit events (DefaultTraceLimit,
// 131072, some 50 MB, unless set) and then reports itself disabled, so
// emitters stop building events and a run of any length keeps a bounded
// trace; a Hook still sees every event, to stream the whole log to a
// file.
package sim
