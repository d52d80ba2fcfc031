package fabric_test

import (
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/rocesim/rocesim/faults"
	"github.com/rocesim/rocesim/sim"
	"github.com/rocesim/rocesim/sim/fabric"
	"github.com/rocesim/rocesim/wire"
)

// cut is four nodes n0..n3 on switch sw cut into two fabrics (a: n0, n1;
// b: n2, n3), as verbs.Cluster cuts a world: each has every node (the
// other's as stand-ins marked elsewhere), its own copy of the switch and
// every link, and its own nodes' links divert the frames for the other's
// into the mail, for run to deliver between steps.
type cut struct {
	ws    []*world
	links [][]*fabric.Link // links[p][i]: fabric p's copy of ni-sw
	mail  []mailed
	loans int // buffers lent and given back (DivertLent)
	// keep: frames lent are delivered without a copy (DeliverLent), and
	// repaid holds the loans the fabrics are done with, by lender, for
	// run to give back at the start of the next step.
	keep   bool
	repaid []repayment
	held   map[repayment][]byte // the bytes of the frames kept, by loan
}

type repayment struct {
	lender int32
	loan   fabric.Loan
}

// How a cut hands its frames over: copied by the driver (copied), lent by
// the sending fabric and copied by the receiving one (lent), or lent and
// kept by the receiving fabric until it is done with them (kept).
type handover int

const (
	copied handover = iota
	lent
	kept
)

func (h handover) String() string { return [...]string{"copied", "lent", "kept"}[h] }

type mailed struct {
	to   int // the fabric
	from int // the sender's fabric
	i    int // the sender's link
	r    fabric.RemoteFrame
}

const cutNodes = 4

func partOf(i int) int { return i / 2 }

func newCut(t *testing.T, how handover, taps ...fabric.Tap) *cut {
	return newCutWith(t, how, nil, taps...)
}

// newCutWith is newCut with a fault plan in each fabric.
func newCutWith(t *testing.T, how handover, plan *faults.Plan, taps ...fabric.Tap) *cut {
	cfg := fabric.DefaultLinkConfig()
	c := &cut{links: make([][]*fabric.Link, 2), keep: how == kept, held: map[repayment][]byte{}}
	lend := how != copied
	for p := range 2 {
		w := newWorld(t, cutNodes, plan, 1, taps[p])
		c.ws = append(c.ws, w)
		if c.keep {
			w.f.SetRepay(func(lender int32, l fabric.Loan) {
				c.repaid = append(c.repaid, repayment{lender, l})
			})
		}
		for i := range cutNodes {
			if partOf(i) != p {
				w.nodes[i].SetElsewhere()
			}
		}
		sw := w.f.AddSwitch("sw", cutNodes)
		for i := range cutNodes {
			l, err := w.f.Connect(fmt.Sprintf("n%d-sw", i), w.nodes[i].Port(0), sw.Port(i), cfg)
			require.NoError(t, err)
			c.links[p] = append(c.links[p], l)
			if partOf(i) == p {
				out := func(r fabric.RemoteFrame) {
					if r.Loan == 0 {
						// Handed over for the call only.
						r.Frame, r.Note = slices.Clone(r.Frame), slices.Clone(r.Note)
					}
					if r.Reaches < 0 {
						assert.Zero(t, r.Loan, "a group frame goes on here: not lent")
						assert.Zero(t, r.DstMAC, "a group frame's MAC: the frame's bytes say it")
						c.mail = append(c.mail, mailed{1 - p, p, i, r})
						return
					}
					assert.Equal(t, lend, r.Loan != 0, "lent exactly when the link lends")
					assert.Equal(t, wire.Ethernet(r.Frame).Dst(), r.DstMAC, "the frame's destination MAC, handed over beside it")
					assert.NotEqual(t, p, partOf(int(r.Reaches)), "a frame for a node of its own fabric was diverted")
					// Both fabrics number the nodes alike.
					c.mail = append(c.mail, mailed{partOf(int(r.Reaches)), p, i, r})
				}
				if lend {
					l.DivertLent(0, out)
				} else {
					l.Divert(0, out)
				}
			}
		}
	}
	return c
}

// run advances both fabrics a propagation delay at a time, delivering
// between two steps what crossed.
func (c *cut) run(t *testing.T) {
	lookahead := fabric.DefaultLinkConfig().Propagation
	for {
		next := min(c.ws[0].sched.NextAt(), c.ws[1].sched.NextAt())
		for _, m := range c.mail {
			next = min(next, m.r.At)
		}
		if next == sim.Never {
			return
		}
		end := next.Add(lookahead - 1)
		c.repay(t)
		for _, m := range c.mail {
			if c.keep && m.r.Loan != 0 {
				require.NoError(t, c.links[m.to][m.i].DeliverLent(0, m.r, int32(m.from)))
				c.held[repayment{int32(m.from), m.r.Loan}] = m.r.Frame
				continue
			}
			require.NoError(t, c.links[m.to][m.i].Deliver(0, m.r))
			if m.r.Loan != 0 {
				// Delivered (copied): the buffer goes back, once.
				f := c.ws[m.from].f
				require.NoError(t, f.Return(m.r.Loan))
				assert.ErrorIs(t, f.Return(m.r.Loan), fabric.ErrNoLoan, "a loan given back twice")
				c.loans++
			}
		}
		c.mail = c.mail[:0]
		for _, w := range c.ws {
			require.NoError(t, w.sched.RunUntil(end))
		}
		for _, m := range c.mail {
			require.Greater(t, m.r.At, end, "a frame arrives before the fabrics' next step")
		}
	}
}

// repay gives the buffers the fabrics are done with back to their
// lenders, as a driver does between two steps (DeliverLent).
func (c *cut) repay(t *testing.T) {
	for _, r := range c.repaid {
		f := c.ws[r.lender].f
		require.NoError(t, f.Return(r.loan))
		assert.ErrorIs(t, f.Return(r.loan), fabric.ErrNoLoan, "a loan given back twice")
		c.loans++
		// The lender may reuse the buffer from now on: a frame still
		// held, repaid too early, would arrive with these bytes.
		frame, ok := c.held[r]
		require.True(t, ok, "a loan repaid that was not kept")
		for k := range frame {
			frame[k] = 0xEE
		}
		delete(c.held, r)
	}
	c.repaid = c.repaid[:0]
}

// TestDivert: the four nodes as one fabric and as a cut. Every node
// receives the same frames at the same times in both (a burst from every
// node to every other, noted, and a broadcast from each side), the
// stand-ins receive nothing, a frame that crossed keeps its note on its
// later hop, and each direction serializes its frames in one fabric only
// (a group frame arrives at each copy of the switch, and is counted by
// each). The same with links that lend their frames' buffers
// (DivertLent): the bytes and notes handed over stay as they were until
// delivered, while both fabrics take buffers for the frames delivered to
// them, and each buffer comes back once. And with the lent frames kept
// by the fabric they are delivered to (DeliverLent): each loan is repaid
// once the frame is done with, and the lender reuses the buffer only
// then (a buffer it took back early would carry its next frame's bytes
// into the receiver's).
func TestDivert(t *testing.T) {
	for _, how := range []handover{copied, lent, kept} {
		t.Run(how.String(), func(t *testing.T) { testDivert(t, how, nil) })
	}
	// Frames kept where they were lent meet the destination fabric's
	// plan on their last hop: dropped, copied, delayed, corrupted there,
	// each released (and its loan repaid) its own way.
	plan, err := faults.Parse("drop link=n2-sw src=n0 first=1\ndup n=1 link=n3-sw src=n1 first=1\n" +
		"delay 3us link=n2-sw src=n1 first=1\ncorrupt link=n3-sw src=n0 first=1\n")
	require.NoError(t, err)
	t.Run("kept, with faults", func(t *testing.T) { testDivert(t, kept, plan) })
}

func testDivert(t *testing.T, how handover, plan *faults.Plan) {
	cfg := fabric.DefaultLinkConfig()
	send := func(nodes []*fabric.Node, local func(int) bool) {
		for k := range 2 {
			for i := range cutNodes {
				if !local(i) {
					continue
				}
				for j := range cutNodes {
					if j != i {
						note := fmt.Sprintf("n%d to n%d #%d", i, j, k)
						require.NoError(t, nodes[i].SendSealed(0, roce(t, i, j, uint32(100*i+10*j+k), 256*(j+1)), []byte(note)))
					}
				}
			}
		}
		for _, i := range []int{0, 2} {
			if local(i) {
				bc := rawFrame(i, 0, 100)
				copy(bc[0:6], []byte{0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF})
				require.NoError(t, nodes[i].Send(0, bc, nil))
			}
		}
	}

	wholeTap := &commentTap{}
	whole := newWorld(t, cutNodes, plan, 1, wholeTap)
	sw := whole.f.AddSwitch("sw", cutNodes)
	for i := range cutNodes {
		_, err := whole.f.Connect(fmt.Sprintf("n%d-sw", i), whole.nodes[i].Port(0), sw.Port(i), cfg)
		require.NoError(t, err)
	}
	send(whole.nodes, func(int) bool { return true })
	require.NoError(t, whole.sched.Run())

	taps := []*commentTap{{}, {}}
	c := newCutWith(t, how, plan, taps[0], taps[1])
	for p, w := range c.ws {
		send(w.nodes, func(i int) bool { return partOf(i) == p })
	}
	c.run(t)
	if how == kept {
		// The last frames' loans, repaid in the last step.
		c.repay(t)
		assert.Empty(t, c.held, "frames kept and never repaid")
	}
	for i := range cutNodes {
		got := c.ws[partOf(i)].sinks[i]
		require.NotEmpty(t, whole.sinks[i].frames)
		assert.Equal(t, whole.sinks[i].frames, got.frames, "n%d's frames", i)
		assert.Equal(t, whole.sinks[i].times, got.times, "n%d's arrival times", i)
		assert.Empty(t, c.ws[1-partOf(i)].sinks[i].frames, "the stand-in for n%d", i)
		for dir := range 2 {
			want := whole.f.Links()[i].Stats(dir)
			a, b := c.links[0][i].Stats(dir), c.links[1][i].Stats(dir)
			assert.Equal(t, want.TxFrames, a.TxFrames+b.TxFrames, "n%d-sw direction %d: frames serialized", i, dir)
			// A broadcast arrives at both copies of the switch.
			copies := uint64(0)
			if dir == 0 && (i == 0 || i == 2) {
				copies = 1
			}
			assert.Equal(t, want.RxFrames+copies, a.RxFrames+b.RxFrames, "n%d-sw direction %d: frames arrived", i, dir)
			assert.Zero(t, min(a.TxFrames, b.TxFrames), "n%d-sw direction %d serialized in both fabrics", i, dir)
		}
	}
	// Every frame is recorded on both of its hops, with its note, in one
	// fabric or the other: the notes of frames that crossed came along.
	got := append(slices.Clone(taps[0].comments), taps[1].comments...)
	slices.Sort(got)
	want := slices.Clone(wholeTap.comments)
	slices.Sort(want)
	assert.Equal(t, want, got)
	assert.Contains(t, taps[1].comments, "n0 to n3 #1", "a's note on b's hop to n3")
	if plan != nil {
		// Each rule acted on a frame from part a, in part b.
		for r := range plan.Rules {
			mark := fmt.Sprintf("rule %d", r+1)
			assert.True(t, slices.ContainsFunc(taps[1].comments, func(c string) bool { return strings.Contains(c, mark) }), "%s acted in b: %q", mark, taps[1].comments)
		}
	}
	if how != copied {
		// Two bursts from each of four nodes to the two of the other side.
		assert.Equal(t, 2*cutNodes*2, c.loans, "frames lent")
		assert.ErrorIs(t, c.ws[0].f.Return(0), fabric.ErrNoLoan)
		assert.ErrorIs(t, c.ws[0].f.Return(1<<30), fabric.ErrNoLoan)
	}
}

// TestDeliverRefuses: a frame that would arrive before the clock or
// before one delivered earlier, a runt, an oversized frame, a frame
// addressed to a node the fabric does not have, a frame through a
// direction from a switch, and a frame delivered as lent without a loan
// or with no one to repay it to are refused, and nothing arrives.
func TestDeliverRefuses(t *testing.T) {
	c := newCut(t, copied, nil, nil)
	b := c.ws[1]
	frame := roce(t, 0, 2, 0, 64)
	require.NoError(t, b.sched.RunUntil(100))
	at := func(t sim.Time, frame []byte) fabric.RemoteFrame {
		return fabric.RemoteFrame{At: t, Frame: frame, Sealed: true, To: -1}
	}
	n0 := c.links[1][0] // b's n0-sw: direction 0 from the stand-in for n0
	err := n0.Deliver(0, at(99, frame))
	assert.True(t, errors.Is(err, fabric.ErrDeliverOrder), "%v", err)
	require.NoError(t, n0.Deliver(0, at(200, frame)))
	err = n0.Deliver(0, at(150, frame))
	assert.True(t, errors.Is(err, fabric.ErrDeliverOrder), "%v", err)
	assert.ErrorIs(t, n0.Deliver(0, at(300, frame[:10])), fabric.ErrRunt)
	assert.ErrorIs(t, n0.Deliver(0, at(300, make([]byte, fabric.MaxFrame+1))), fabric.ErrFrameSize)
	wrong := at(300, frame)
	wrong.To = cutNodes
	assert.ErrorContains(t, n0.Deliver(0, wrong), "addressed to node 4 of 4")
	// Direction 1 of n0-sw leaves the switch itself.
	assert.ErrorContains(t, n0.Deliver(1, at(300, frame)), "must be a node")
	// A frame kept as lent needs a loan, and somewhere to repay it.
	assert.ErrorIs(t, n0.DeliverLent(0, at(300, frame), 0), fabric.ErrNoLoan)
	loaned := at(300, frame)
	loaned.Loan = 1
	assert.ErrorContains(t, n0.DeliverLent(0, loaned, 0), "no SetRepay")
	require.NoError(t, b.sched.Run())
	hop := fabric.DefaultLinkConfig().SerializationDelay(len(frame)) + fabric.DefaultLinkConfig().Propagation
	assert.Equal(t, [][]byte{frame}, b.sinks[2].frames, "only the frame delivered in order")
	assert.Equal(t, []sim.Time{sim.Time(200).Add(hop)}, b.sinks[2].times, "at the switch at 200, then one hop")
	for _, s := range append(c.ws[0].sinks, b.sinks[0], b.sinks[1], b.sinks[3]) {
		assert.Empty(t, s.frames)
	}
}
