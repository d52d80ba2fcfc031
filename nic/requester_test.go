package nic

import (
	"testing"

	"github.com/stretchr/testify/assert"

	"github.com/rocesim/rocesim/sim"
	"github.com/rocesim/rocesim/wire"
)

// TestRoundLogCounts: a retransmission is numbered by the rounds that
// resent its PSN, not by the rounds of its QP.
func TestRoundLogCounts(t *testing.T) {
	var l roundLog
	// Round 1 resends PSNs 10..12 (13 was the highest sent +1).
	l.start(1, 13)
	assert.Equal(t, 1, l.covering(10, 1))
	assert.Equal(t, 1, l.covering(12, 1))
	// 13..15 are then sent for the first time; round 2 resends 11..15.
	l.start(2, 16)
	assert.Equal(t, 2, l.covering(11, 2), "PSN 11 was resent in rounds 1 and 2")
	assert.Equal(t, 1, l.covering(14, 2), "PSN 14 was first sent after round 1 began")
	// Round 3 ends where round 2 did: it covers everything round 2 did.
	l.start(3, 16)
	assert.Equal(t, 3, l.covering(12, 3))
	assert.Equal(t, 2, l.covering(15, 3))
}

// TestRoundLogWrap: ends compare across the 24-bit PSN wrap.
func TestRoundLogWrap(t *testing.T) {
	var l roundLog
	l.start(1, wire.PSN(0xFFFFFF)) // resends up to 0xFFFFFE
	l.start(2, wire.PSN(2))        // then 0xFFFFFF, 0, 1 were sent
	assert.Equal(t, 2, l.covering(wire.PSN(0xFFFFFE), 2))
	assert.Equal(t, 1, l.covering(wire.PSN(0xFFFFFF), 2))
	assert.Equal(t, 1, l.covering(wire.PSN(1), 2))
}

// TestRoundLogFull: with more distinct ends than it keeps, the log drops
// the oldest and counts from what remains; it never counts a round
// that did not cover the PSN.
func TestRoundLogFull(t *testing.T) {
	var l roundLog
	for r := 1; r <= roundLogSize+4; r++ {
		l.start(r, wire.PSN(100+r))
	}
	n := roundLogSize + 4
	// PSN 100+n-1 was first sent before round n only: covered once.
	assert.Equal(t, 1, l.covering(wire.PSN(100+n-1), n))
	// PSN 100 was covered by every round; the log remembers the last 16.
	assert.Equal(t, roundLogSize, l.covering(wire.PSN(100), n))
}

// TestACKTimeoutProfiles: the spec profile waits the IBTA's 4.096 µs ×
// 2^timeout; rxe's rounds that down to whole jiffies of 4 ms (HZ=250),
// at least one (rxe_qp.c rxe_qp_from_attr). Real rxe resent 59.6 ms after
// a loss at timeout 14 and 536-575 ms after arming at timeout 17
// (conformance/README.md), never the exact 67.1 ms and 536.9 ms.
func TestACKTimeoutProfiles(t *testing.T) {
	for _, c := range []struct {
		code      uint8
		spec, rxe sim.Duration
	}{
		{1, 8192, 4 * sim.Millisecond},                // 0 jiffies: rxe takes 1
		{8, 1_048_576, 4 * sim.Millisecond},           // 1.05 ms
		{10, 4_194_304, 4 * sim.Millisecond},          // 4.19 ms: 1 jiffy
		{11, 8_388_608, 8 * sim.Millisecond},          // 8.39 ms: 2 jiffies
		{14, 67_108_864, 64 * sim.Millisecond},        // 16.8 jiffies: 16
		{17, 536_870_912, 536 * sim.Millisecond},      // 134.2 jiffies: 134
		{31, 8_796_093_022_208, 2_199_023 * rxeJiffy}, // 2.4 hours
	} {
		assert.Equal(t, c.spec, ProfileSpec.ACKTimeout(c.code), "spec, timeout %d", c.code)
		assert.Equal(t, c.rxe, ProfileRXE.ACKTimeout(c.code), "rxe, timeout %d", c.code)
	}
}
