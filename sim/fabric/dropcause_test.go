package fabric_test

import (
	"fmt"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/rocesim/rocesim/sim"
	"github.com/rocesim/rocesim/sim/fabric"
)

// dropCauses lists the kind and drop= field of every drop event traced.
func dropCauses(w *world) []string {
	var out []string
	for _, e := range w.trace.Events() {
		if e.Kind == "frame-drop" || e.Kind == "queue-drop" {
			c, _ := e.Get("drop")
			out = append(out, string(e.Kind)+" "+c)
		}
	}
	return out
}

// TestDropCauses: every frame the fabric loses is traced with its cause
// as a sim.DropCause (the drop= field the ladder reads): a full egress
// queue, a frame over the link's MTU, a fault plan's drop rule, a switch
// with no port for the destination, a held frame whose link went down.
func TestDropCauses(t *testing.T) {
	direct := func(t *testing.T, queue int) *world {
		w := newWorld(t, 2, nil, 1, nil)
		cfg := fabric.DefaultLinkConfig()
		cfg.QueueBytes = queue
		_, err := w.f.Connect("n0-n1", w.nodes[0].Port(0), w.nodes[1].Port(0), cfg)
		require.NoError(t, err)
		return w
	}
	// planned sends one RoCE frame (PSN 0) from n0 to n1 under plan.
	planned := func(plan string) func(t *testing.T) *world {
		return func(t *testing.T) *world {
			w := pair(t, plan)
			require.NoError(t, w.nodes[0].Send(0, roce(t, 0, 1, 0, 32), nil))
			return w
		}
	}
	for _, c := range []struct {
		name string
		run  func(t *testing.T) *world // sets up a world and sends into it
		want sim.DropCause
		kind string
	}{
		{"queue full", func(t *testing.T) *world {
			w := direct(t, 1000)
			for range 3 { // one on the wire, one queued, one dropped
				require.NoError(t, w.nodes[0].Send(0, rawFrame(0, 1, 1000), nil))
			}
			return w
		}, sim.DropQueueFull, "queue-drop"},
		{"MTU", func(t *testing.T) *world {
			w := direct(t, 0)
			require.NoError(t, w.nodes[0].Send(0, rawFrame(0, 1, 1515), nil))
			return w
		}, sim.DropMTU, "frame-drop"},
		{"fault rule", planned("drop psn=0\n"), sim.DropFault, "frame-drop"},
		{"no route", func(t *testing.T) *world {
			w := newWorld(t, 2, nil, 1, nil)
			sw := w.f.AddSwitch("sw", 2)
			for i := range 2 {
				_, err := w.f.Connect(fmt.Sprintf("n%d-sw", i), w.nodes[i].Port(0), sw.Port(i), fabric.DefaultLinkConfig())
				require.NoError(t, err)
			}
			require.NoError(t, w.nodes[0].Send(0, rawFrame(0, 9, 100), nil))
			return w
		}, sim.DropNoRoute, "frame-drop"},
		{"link down", planned("delay 50us psn=0\ndown link=a-b from=10us to=100us\n"), sim.DropLinkDown, "frame-drop"},
	} {
		t.Run(c.name, func(t *testing.T) {
			w := c.run(t)
			require.NoError(t, w.sched.Run())
			assert.Equal(t, []string{c.kind + " " + string(c.want)}, dropCauses(w))
		})
	}
}
