package sim_test

import (
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"

	"github.com/rocesim/rocesim/sim"
)

// TestTraceKeepsItsFirstEvents: a trace keeps its first Limit events and
// counts the rest, so a run of any length has a bounded trace; its Hook
// still sees every event, and once it is full without a Hook it reports
// itself disabled so emitters stop building events.
func TestTraceKeepsItsFirstEvents(t *testing.T) {
	tr := &sim.Trace{Limit: 3}
	for i := range 5 {
		assert.True(t, tr.Enabled() || i >= 3)
		tr.Add(sim.Event{Time: sim.Time(i), Kind: "x"})
	}
	assert.Len(t, tr.Events(), 3)
	assert.True(t, tr.Full())
	assert.False(t, tr.Enabled(), "full, no hook")
	assert.True(t, strings.HasSuffix(tr.Text(), "# the trace is full: it keeps its first 3 events and recorded no later ones\n"), tr.Text())

	seen := 0
	hooked := &sim.Trace{Limit: 1, Hook: func(*sim.Event) { seen++ }}
	for range 4 {
		hooked.Add(sim.Event{Kind: "x"})
	}
	assert.Equal(t, 4, seen)
	assert.True(t, hooked.Enabled(), "a hook still wants the events")

	def := &sim.Trace{}
	for range sim.DefaultTraceLimit + 10 {
		def.Add(sim.Event{Kind: "x"})
	}
	assert.Len(t, def.Events(), sim.DefaultTraceLimit)

	all := &sim.Trace{Limit: -1}
	for range sim.DefaultTraceLimit + 10 {
		all.Add(sim.Event{Kind: "x"})
	}
	assert.Len(t, all.Events(), sim.DefaultTraceLimit+10)
	assert.False(t, all.Full())
}

// TestTraceClear: a cleared trace has no events and records again, a full
// one included; a nil trace's Clear does nothing.
func TestTraceClear(t *testing.T) {
	tr := &sim.Trace{Limit: 2}
	tr.Add(sim.Event{Time: 1, Kind: "a"})
	tr.Add(sim.Event{Time: 2, Kind: "b"})
	assert.True(t, tr.Full())
	tr.Clear()
	assert.Empty(t, tr.Events())
	assert.True(t, tr.Enabled())
	tr.Add(sim.Event{Time: 3, Kind: "c"})
	assert.Equal(t, "3ns - c\n", tr.Text())
	var none *sim.Trace
	none.Clear()
}

// TestTraceOff: a trace turned off takes nothing, not even for its Hook,
// and says it is disabled; turned on again, it records.
func TestTraceOff(t *testing.T) {
	seen := 0
	tr := &sim.Trace{Hook: func(*sim.Event) { seen++ }, Off: true}
	assert.False(t, tr.Enabled())
	tr.Add(sim.Event{Kind: "x"})
	assert.Empty(t, tr.Events())
	assert.Zero(t, seen)
	tr.Off = false
	assert.True(t, tr.Enabled())
	tr.Add(sim.Event{Kind: "y"})
	assert.Len(t, tr.Events(), 1)
	assert.Equal(t, 1, seen)
}
