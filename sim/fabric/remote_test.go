package fabric_test

import (
	"errors"
	"fmt"
	"slices"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/rocesim/rocesim/sim"
	"github.com/rocesim/rocesim/sim/fabric"
)

// split is the fabric of TestSwitchForwards (n0, n1, n2 on switch sw) cut
// in two: fabric a holds n0, n2 and the switch, with a stand-in for n1;
// fabric b holds n1 and a stand-in for the switch. The link n1-sw exists
// in both, remote toward the stand-in on each side.
type split struct {
	a, b   *world
	ab, ba *fabric.Link // n1-sw in a (sw -> n1 is remote), in b (n1 -> sw is remote)
	mail   []mailed
}

type mailed struct {
	to *fabric.Link
	r  fabric.RemoteFrame
}

func newSplit(t *testing.T, tapA fabric.Tap) *split {
	cfg := fabric.DefaultLinkConfig()
	s := &split{a: newWorld(t, 3, nil, 1, tapA), b: newWorld(t, 0, nil, 1, nil)}
	// a: n0, n1 (the stand-in: its sink must get nothing), n2.
	sw := s.a.f.AddSwitch("sw", 3)
	for i := range 3 {
		l, err := s.a.f.Connect("n"+string(rune('0'+i))+"-sw", s.a.nodes[i].Port(0), sw.Port(i), cfg)
		require.NoError(t, err)
		if i == 1 {
			s.ab = l
		}
	}
	// b: n1 and a one-port stand-in for the switch.
	n1 := s.b.f.AddNode("n1", fabric.PortConfig{MAC: mac(2), IPv4: ip4(2)})
	s.b.sinks = append(s.b.sinks, &sink{})
	n1.SetReceiver(s.b.sinks[0])
	s.b.nodes = append(s.b.nodes, n1)
	swb := s.b.f.AddNode("sw", fabric.PortConfig{})
	var err error
	s.ba, err = s.b.f.Connect("n1-sw", n1.Port(0), swb.Port(0), cfg)
	require.NoError(t, err)
	// sw -> n1 is direction 1 of a's n1-sw; n1 -> sw is direction 0 of b's.
	keep := func(to *fabric.Link) func(fabric.RemoteFrame) {
		return func(r fabric.RemoteFrame) {
			r.Frame, r.Note = slices.Clone(r.Frame), slices.Clone(r.Note)
			s.mail = append(s.mail, mailed{to, r})
		}
	}
	s.ab.SetRemote(1, keep(s.ba))
	s.ba.SetRemote(0, keep(s.ab))
	return s
}

// run advances both fabrics a propagation delay at a time, delivering
// between two steps what crossed.
func (s *split) run(t *testing.T) {
	lookahead := fabric.DefaultLinkConfig().Propagation
	for {
		next := min(s.a.sched.NextAt(), s.b.sched.NextAt())
		if next == sim.Never && len(s.mail) == 0 {
			return
		}
		if next == sim.Never {
			next = s.mail[0].r.At
		}
		end := next.Add(lookahead - 1)
		require.NoError(t, s.a.sched.RunUntil(end))
		require.NoError(t, s.b.sched.RunUntil(end))
		for _, m := range s.mail {
			require.Greater(t, m.r.At, end, "a frame arrives before the fabrics' next step")
			dir := 0 // a's n1-sw, from the stand-in n1 toward the switch
			if m.to == s.ba {
				dir = 1 // b's n1-sw, from the switch's stand-in toward n1
			}
			require.NoError(t, m.to.Deliver(dir, m.r))
		}
		s.mail = s.mail[:0]
	}
}

// TestRemoteLinks runs frames across a fabric cut in two: each arrives
// at the same time, with the same bytes, as in the whole fabric, and the
// stand-ins receive nothing.
func TestRemoteLinks(t *testing.T) {
	cfg := fabric.DefaultLinkConfig()
	hop := func(n int) sim.Duration { return cfg.SerializationDelay(n) + cfg.Propagation }

	tap := &commentTap{}
	s := newSplit(t, tap)
	// n0 -> n1 crosses from a to b; n1 -> n2 from b to a and through the
	// switch there; three frames each way, queued behind each other.
	var toN1, toN2 [][]byte
	for k := range 3 {
		toN1 = append(toN1, roce(t, 0, 1, uint32(k), 512))
		toN2 = append(toN2, roce(t, 1, 2, uint32(10+k), 1024))
		require.NoError(t, s.a.nodes[0].Send(0, toN1[k], nil))
		require.NoError(t, s.b.nodes[0].SendSealed(0, toN2[k], []byte(fmt.Sprintf("note %d", k))))
	}
	s.run(t)

	require.Equal(t, toN1, s.b.sinks[0].frames)
	require.Equal(t, toN2, s.a.sinks[2].frames)
	assert.Empty(t, s.a.sinks[1].frames, "the stand-in for n1 in fabric a")
	// Store and forward: the k-th frame of a burst leaves the first wire
	// k serializations after the first, then takes one more hop.
	for k := range 3 {
		n1, n2 := len(toN1[0]), len(toN2[0])
		assert.Equal(t, sim.Time(sim.Duration(k)*cfg.SerializationDelay(n1)+2*hop(n1)), s.b.sinks[0].times[k], "n0 -> n1 frame %d", k)
		assert.Equal(t, sim.Time(sim.Duration(k)*cfg.SerializationDelay(n2)+2*hop(n2)), s.a.sinks[2].times[k], "n1 -> n2 frame %d", k)
	}
	assert.Equal(t, uint64(3), s.ab.Stats(1).TxFrames, "sw -> n1, serialized in a")
	assert.Equal(t, uint64(3), s.ba.Stats(1).RxFrames, "sw -> n1, arrived in b")
	assert.Equal(t, uint64(3), s.ab.Stats(0).RxFrames, "n1 -> sw, arrived in a")
	// Fabric a records n0's frames on both of their hops and n1's on
	// their second (sw -> n2), where n1's note came along.
	assert.Len(t, tap.comments, 9)
	var notes []string
	for _, c := range tap.comments {
		if c != "" {
			notes = append(notes, c)
		}
	}
	assert.Equal(t, []string{"note 0", "note 1", "note 2"}, notes)
}

// TestDeliverRefuses: a frame that would arrive before the clock or
// before one delivered earlier, a runt, an oversized frame, and a frame
// through a direction from a switch are refused, and nothing arrives.
func TestDeliverRefuses(t *testing.T) {
	s := newSplit(t, nil)
	frame := roce(t, 0, 1, 0, 64)
	require.NoError(t, s.b.sched.RunUntil(100))
	at := func(t sim.Time, frame []byte) fabric.RemoteFrame {
		return fabric.RemoteFrame{At: t, Frame: frame, Sealed: true}
	}
	err := s.ba.Deliver(1, at(99, frame))
	assert.True(t, errors.Is(err, fabric.ErrDeliverOrder), "%v", err)
	require.NoError(t, s.ba.Deliver(1, at(200, frame)))
	err = s.ba.Deliver(1, at(150, frame))
	assert.True(t, errors.Is(err, fabric.ErrDeliverOrder), "%v", err)
	assert.ErrorIs(t, s.ba.Deliver(1, at(300, frame[:10])), fabric.ErrRunt)
	assert.ErrorIs(t, s.ba.Deliver(1, at(300, make([]byte, fabric.MaxFrame+1))), fabric.ErrFrameSize)
	// Direction 1 of a's n1-sw leaves the switch itself.
	assert.ErrorContains(t, s.ab.Deliver(1, at(300, frame)), "must be a node")
	require.NoError(t, s.b.sched.Run())
	require.NoError(t, s.a.sched.Run())
	assert.Len(t, s.b.sinks[0].frames, 1, "only the frame delivered in order")
	assert.Equal(t, []sim.Time{200}, s.b.sinks[0].times)
	assert.Empty(t, s.a.sinks[1].frames)
}

// TestDivert cuts a switch: four nodes on switch sw, as one fabric and as
// two (a: n0, n1; b: n2, n3), each with its own copy of the switch and
// stand-ins marked elsewhere for the other's nodes, whose links divert
// the frames for those. Every node receives the same frames at the same
// times as in the whole fabric (a burst from every node to every other,
// and a broadcast from each side), the stand-ins receive nothing, and
// each direction serializes its frames in one fabric only (a group frame
// arrives at each copy of the switch, and is counted by each).
func TestDivert(t *testing.T) {
	cfg := fabric.DefaultLinkConfig()
	const n = 4
	send := func(nodes []*fabric.Node, local func(int) bool) {
		for k := range 2 {
			for i := range n {
				if !local(i) {
					continue
				}
				for j := range n {
					if j != i {
						require.NoError(t, nodes[i].Send(0, roce(t, i, j, uint32(100*i+10*j+k), 256*(j+1)), nil))
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

	whole := newWorld(t, n, nil, 1, nil)
	sw := whole.f.AddSwitch("sw", n)
	for i := range n {
		_, err := whole.f.Connect(fmt.Sprintf("n%d-sw", i), whole.nodes[i].Port(0), sw.Port(i), cfg)
		require.NoError(t, err)
	}
	send(whole.nodes, func(int) bool { return true })
	require.NoError(t, whole.sched.Run())

	type crossing struct {
		to int // the fabric
		r  fabric.RemoteFrame
		i  int // the sender's link
	}
	var mail []crossing
	ws := []*world{newWorld(t, n, nil, 1, nil), newWorld(t, n, nil, 1, nil)}
	links := make([][]*fabric.Link, 2)
	partOf := func(i int) int { return i / 2 }
	for p, w := range ws {
		for i := range n {
			if partOf(i) != p {
				w.nodes[i].SetElsewhere()
			}
		}
		sw := w.f.AddSwitch("sw", n)
		for i := range n {
			l, err := w.f.Connect(fmt.Sprintf("n%d-sw", i), w.nodes[i].Port(0), sw.Port(i), cfg)
			require.NoError(t, err)
			links[p] = append(links[p], l)
			if partOf(i) == p {
				l.Divert(0, func(r fabric.RemoteFrame) {
					r.Frame, r.Note = slices.Clone(r.Frame), slices.Clone(r.Note)
					if r.Reaches < 0 {
						mail = append(mail, crossing{1 - p, r, i})
						return
					}
					assert.NotEqual(t, p, partOf(int(r.Reaches)), "a frame for a node of its own fabric was diverted")
					mail = append(mail, crossing{partOf(int(r.Reaches)), r, i})
				})
			}
		}
		send(w.nodes, func(i int) bool { return partOf(i) == p })
	}
	lookahead := cfg.Propagation
	for {
		next := min(ws[0].sched.NextAt(), ws[1].sched.NextAt())
		for _, m := range mail {
			next = min(next, m.r.At)
		}
		if next == sim.Never {
			break
		}
		end := next.Add(lookahead - 1)
		for _, m := range mail {
			require.NoError(t, links[m.to][m.i].Deliver(0, m.r))
		}
		mail = mail[:0]
		for _, w := range ws {
			require.NoError(t, w.sched.RunUntil(end))
		}
		for _, m := range mail {
			require.Greater(t, m.r.At, end, "a frame arrives before the fabrics' next step")
		}
	}
	for i := range n {
		got := ws[partOf(i)].sinks[i]
		require.NotEmpty(t, whole.sinks[i].frames)
		assert.Equal(t, whole.sinks[i].frames, got.frames, "n%d's frames", i)
		assert.Equal(t, whole.sinks[i].times, got.times, "n%d's arrival times", i)
		assert.Empty(t, ws[1-partOf(i)].sinks[i].frames, "the stand-in for n%d", i)
		for dir := range 2 {
			want := whole.f.Links()[i].Stats(dir)
			a, b := links[0][i].Stats(dir), links[1][i].Stats(dir)
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
}
