package fabric_test

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/rocesim/rocesim/wire"
)

// TestTxEvictionsReported: once the plan's transmission counting has
// forgotten a flow to stay within its bounds, Fabric.TxEvictions says so
// (a tx= rule may then have misjudged a retransmission); a run within the
// bounds reports 0. Three flows (destination QPs) with room for two: the
// evicted flow's next frame counts as a first transmission again.
func TestTxEvictionsReported(t *testing.T) {
	for _, c := range []struct {
		limit int
		want  uint64
		tx    string // the tx= of the last frame, a retransmission of PSN 1 to QP 0x12
	}{
		{0, 0, "2"}, {2, 2, ""}, // QP 0x14 evicts 0x12, whose return evicts 0x13
	} {
		w := pair(t, "drop psn=999\n") // a rule, so that frames are counted
		w.f.LimitTx(c.limit, 0)
		for _, qp := range []uint32{0x12, 0x13, 0x14, 0x12} {
			f := roce(t, 0, 1, 1, 8)
			var p wire.Packet
			require.NoError(t, p.DecodeHeaders(f))
			p.BTH.SetDestQP(qp)
			p.UpdateICRC()
			require.NoError(t, w.nodes[0].Send(0, f, nil))
		}
		require.NoError(t, w.sched.Run())
		assert.Equal(t, c.want, w.f.TxEvictions(), "limit %d", c.limit)
		var tx string
		for _, e := range w.trace.Events() {
			if e.Kind == "frame-tx" {
				tx, _ = e.Get("tx")
			}
		}
		assert.Equal(t, c.tx, tx, "limit %d: tx= of the last frame", c.limit)
	}
}
