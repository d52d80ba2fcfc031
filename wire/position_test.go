package wire_test

import (
	"testing"

	"github.com/stretchr/testify/assert"

	"github.com/rocesim/rocesim/wire"
)

// TestPositionStartsEnds: FIRST and ONLY begin a message, LAST and ONLY
// end it, MIDDLE does neither (IBTA vol. 1 §9.2: the opcode's place in
// its message).
func TestPositionStartsEnds(t *testing.T) {
	for _, c := range []struct {
		p            wire.Position
		starts, ends bool
	}{
		{wire.PosOnly, true, true},
		{wire.PosFirst, true, false},
		{wire.PosMiddle, false, false},
		{wire.PosLast, false, true},
	} {
		assert.Equal(t, c.starts, c.p.Starts(), c.p.String())
		assert.Equal(t, c.ends, c.p.Ends(), c.p.String())
	}
}
