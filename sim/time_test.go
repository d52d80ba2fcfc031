package sim_test

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/rocesim/rocesim/sim"
)

func TestDurationString(t *testing.T) {
	assert.Equal(t, "12.288µs", (12288 * sim.Nanosecond).String())
	assert.Equal(t, "3ms", (3 * sim.Millisecond).String())
	assert.Equal(t, "0s", sim.Duration(0).String())
	assert.Equal(t, "1.5s", (1500 * sim.Millisecond).String())
	assert.Equal(t, "655.36ms", sim.Time(655360*sim.Microsecond).String())
	assert.Equal(t, sim.Time(5000), sim.Time(2000).Add(3*sim.Microsecond))
	assert.Equal(t, 3*sim.Microsecond, sim.Time(5000).Sub(2000))
}

func TestParseDuration(t *testing.T) {
	for in, want := range map[string]sim.Duration{
		"50us": 50 * sim.Microsecond, "50µs": 50 * sim.Microsecond, "1.5ms": 1500 * sim.Microsecond,
		"3s": 3 * sim.Second, "0": 0, "100ns": 100, "12.288µs": 12288,
	} {
		got, err := sim.ParseDuration(in)
		require.NoError(t, err, in)
		assert.Equal(t, want, got, in)
	}
	for _, bad := range []string{"", "5", "1h", "2m", "ms", "-x"} {
		_, err := sim.ParseDuration(bad)
		assert.Error(t, err, bad)
	}
}
