package sim

import (
	"strconv"
	"strings"
	"time"
)

// Time is a point in simulated time: nanoseconds since the simulation
// started. It never comes from the wall clock.
type Time int64

// Duration is a span of simulated time in nanoseconds.
type Duration int64

// Units of simulated time.
const (
	Nanosecond  Duration = 1
	Microsecond          = 1000 * Nanosecond
	Millisecond          = 1000 * Microsecond
	Second               = 1000 * Millisecond
)

// Never is a Time later than any event: the deadline of nothing.
const Never = Time(1<<63 - 1)

// String formats d like time.Duration: "12.288µs", "3ms", "0s".
func (d Duration) String() string { return time.Duration(d).String() }

// Std converts d to a time.Duration (same unit).
func (d Duration) Std() time.Duration { return time.Duration(d) }

// String formats t as the duration since the start: "12.288µs".
func (t Time) String() string { return Duration(t).String() }

// Add returns t+d.
func (t Time) Add(d Duration) Time { return t + Time(d) }

// Sub returns t-u.
func (t Time) Sub(u Time) Duration { return Duration(t - u) }

// Before reports whether t is before u.
func (t Time) Before(u Time) bool { return t < u }

// After reports whether t is after u.
func (t Time) After(u Time) bool { return t > u }

// ParseDuration parses a duration such as "50us", "1.5ms", "12.288µs",
// "3s" or "0" (units ns, us, µs, ms, s; a bare 0 needs none). It is
// time.ParseDuration without hours and minutes, which no simulation needs,
// and with "us" spelled as people type it.
func ParseDuration(s string) (Duration, error) {
	if s == "0" {
		return 0, nil
	}
	if strings.ContainsAny(s, "hm") && !strings.Contains(s, "ms") {
		return 0, &strconv.NumError{Func: "ParseDuration", Num: s, Err: strconv.ErrSyntax}
	}
	d, err := time.ParseDuration(s)
	if err != nil {
		return 0, err
	}
	return Duration(d), nil
}
