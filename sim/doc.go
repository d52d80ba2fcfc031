// Package sim will hold rocesim's deterministic simulation engine: virtual
// time (int64 nanoseconds), an event queue with a stable order for equal
// times, cancellable timers and seeded per-component random streams. It
// uses only the standard library and never reads the wall clock.
//
// The engine is the subject of issue 3; until it lands this package holds
// no code.
package sim
