package fabric_test

import (
	"fmt"
	"strconv"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/rocesim/rocesim/faults"
	"github.com/rocesim/rocesim/sim"
	"github.com/rocesim/rocesim/sim/fabric"
	"github.com/rocesim/rocesim/wire"
)

// commentTap is a Tap that keeps the length and comment of every frame
// written to it.
type commentTap struct {
	lens     []int
	comments []string
}

func (c *commentTap) AddInterface(name, description string) (int, error) { return 0, nil }

func (c *commentTap) WriteFrame(ns int64, iface int, frame []byte, comment string) error {
	c.lens = append(c.lens, len(frame))
	c.comments = append(c.comments, strings.Clone(comment)) // the fabric's bytes (Tap)
	return nil
}

// TestSwitchDropsRunts: a truncate rule that cuts a frame below its
// Ethernet header on the way to a switch leaves the switch no destination
// to read; the bytes where it was are the reused buffer's old contents
// (here the frame's own destination, n1), by which the switch used to
// route it. It is dropped, counted (RuntDrops), traced with drop=runt and
// captured with a comment saying why. A frame of exactly a header still
// goes where its header says. (A plan cannot cut a frame to 0 bytes;
// Node.Send refuses one: TestSendRefusesRunts.)
func TestSwitchDropsRunts(t *testing.T) {
	for _, c := range []struct {
		n     int  // truncate len=
		runt  bool // dropped at the switch
		atDst int  // frames at n1
	}{
		{1, true, 0}, {5, true, 0}, {13, true, 0}, {wire.EthernetLen, false, 1},
	} {
		t.Run(strconv.Itoa(c.n), func(t *testing.T) {
			frame := roce(t, 0, 1, 5, 64)
			rule := fmt.Sprintf("truncate len=%d link=n0-sw\n", c.n)
			if c.n == 1 {
				// The shortest frame a plan makes: len= is at least 1
				// and cut= leaves at least one byte.
				rule = fmt.Sprintf("truncate cut=%d link=n0-sw\n", len(frame)-1)
			}
			plan, err := faults.Parse(rule)
			require.NoError(t, err)
			tap := &commentTap{}
			w := newWorld(t, 2, plan, 1, tap)
			sw := w.f.AddSwitch("sw", 2)
			for i := range 2 {
				_, err := w.f.Connect(fmt.Sprintf("n%d-sw", i), w.nodes[i].Port(0), sw.Port(i), fabric.DefaultLinkConfig())
				require.NoError(t, err)
			}
			require.NoError(t, w.nodes[0].Send(0, frame, nil))
			require.NoError(t, w.sched.Run())
			assert.Len(t, w.sinks[1].frames, c.atDst, "frames at n1")
			assert.Zero(t, sw.UnknownDrops())
			if !c.runt {
				assert.Zero(t, sw.RuntDrops())
				assert.Empty(t, dropCauses(w))
				return
			}
			assert.Equal(t, uint64(1), sw.RuntDrops())
			assert.Equal(t, []string{"frame-drop " + string(sim.DropRunt)}, dropCauses(w))
			// The capture holds the cut frame twice: as it left n0
			// (altered) and where the switch dropped it (why).
			require.Len(t, tap.lens, 2)
			assert.Equal(t, []int{c.n, c.n}, tap.lens)
			assert.Contains(t, tap.comments[1], "runt of "+strconv.Itoa(c.n)+" bytes")
		})
	}
}

// TestSendRefusesRunts: Node.Send refuses a frame with no room for a
// destination MAC (it used to read past it, or panic) and sends nothing.
func TestSendRefusesRunts(t *testing.T) {
	w := pair(t, "")
	for _, n := range []int{0, 5, 13} {
		err := w.nodes[0].Send(0, make([]byte, n), nil)
		assert.ErrorIs(t, err, fabric.ErrRunt, "%d bytes", n)
	}
	require.NoError(t, w.sched.Run())
	assert.Empty(t, w.sinks[1].frames)
	assert.Zero(t, w.f.Links()[0].Stats(0).TxFrames)
}
