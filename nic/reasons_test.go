package nic

import (
	"testing"

	"github.com/stretchr/testify/assert"
)

// TestRetryReasonNotes pins the note text of every retry reason: the
// captures and ladders in testdata are byte-compared against it, and the
// completer decides on the reason, never on the text.
func TestRetryReasonNotes(t *testing.T) {
	want := map[retryReason]string{
		retryNone: "", retryACKTimeout: "after ACK timeout", retryNAK: "after NAK",
		retryImpliedNAK: "after an implied NAK", retryLostResponse: "after a lost response", retryRNR: "after RNR wait",
	}
	assert.Len(t, retryReasonNotes, len(want), "a reason without a note")
	for r, s := range want {
		assert.Equal(t, s, r.String(), "reason %d", r)
	}
	assert.Equal(t, "retryReason(200)", retryReason(200).String())
}

// TestWROpcodePredicates checks the one definition of "READ or atomic"
// against the opcodes it must and must not cover, and the short names the
// packet notes use.
func TestWROpcodePredicates(t *testing.T) {
	for o := WROpcode(0); int(o) < len(wrOpcodeNames); o++ {
		atomic := o == WRAtomicCmpAndSwp || o == WRAtomicFetchAndAdd
		assert.Equal(t, atomic, o.isAtomic(), o.String())
		assert.Equal(t, atomic || o == WRRDMARead, o.isRdAtomic(), o.String())
		assert.Equal(t, "IBV_WR_"+o.name(), o.String())
	}
	assert.Equal(t, "WROpcode(99)", WROpcode(99).name())
}
