package fabric_test

import (
	"bytes"
	"crypto/sha256"
	"fmt"
	"net/netip"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/rocesim/rocesim/faults"
	"github.com/rocesim/rocesim/sim"
	"github.com/rocesim/rocesim/sim/fabric"
	"github.com/rocesim/rocesim/wire"
	"github.com/rocesim/rocesim/wire/capture"
)

// sink is a Receiver that keeps copies of what arrives, and when.
type sink struct {
	frames [][]byte
	times  []sim.Time
}

func (s *sink) Receive(now sim.Time, port int, frame []byte) {
	s.frames = append(s.frames, append([]byte(nil), frame...))
	s.times = append(s.times, now)
}

func (s *sink) psns(t *testing.T) []uint32 {
	var out []uint32
	var p wire.Packet
	for _, f := range s.frames {
		if err := p.DecodeHeaders(f); err == nil {
			out = append(out, uint32(p.BTH.PSN()))
		}
	}
	return out
}

func mac(i byte) wire.MAC   { return wire.MAC{0x02, 0, 0, 0, 0, i} }
func ip4(i byte) netip.Addr { return netip.AddrFrom4([4]byte{10, 0, 0, i}) }

// world is a small fabric for tests: nodes n0..n(k-1) with one port each.
type world struct {
	sched *sim.Scheduler
	trace *sim.Trace
	f     *fabric.Fabric
	nodes []*fabric.Node
	sinks []*sink
}

func newWorld(t *testing.T, n int, plan *faults.Plan, seed uint64, tap fabric.Tap) *world {
	names := make([]string, n)
	for i := range names {
		names[i] = fmt.Sprintf("n%d", i)
	}
	return newWorldWith(fabric.Config{Tap: tap, Plan: plan, Rand: sim.NewSeeds(seed).Stream("faults")}, names...)
}

// newWorldWith is newWorld for a fabric of cfg (its Sched and Trace the
// world's own) and nodes of the names given, node i with MAC and IPv4
// number i+1.
func newWorldWith(cfg fabric.Config, names ...string) *world {
	w := &world{sched: sim.NewScheduler(), trace: &sim.Trace{}}
	cfg.Sched, cfg.Trace = w.sched, w.trace
	w.f = fabric.New(cfg)
	for i, name := range names {
		node := w.f.AddNode(name, fabric.PortConfig{MAC: mac(byte(i + 1)), IPv4: ip4(byte(i + 1))})
		s := &sink{}
		node.SetReceiver(s)
		w.nodes = append(w.nodes, node)
		w.sinks = append(w.sinks, s)
	}
	return w
}

// roce builds an RC SEND_ONLY frame from node i to node j with the PSN
// and payload size given.
func roce(t testing.TB, i, j int, psn uint32, payload int) []byte {
	f := wire.Frame{
		SrcMAC: mac(byte(i + 1)), DstMAC: mac(byte(j + 1)),
		Src: ip4(byte(i + 1)), Dst: ip4(byte(j + 1)),
		TTL: 64, IPFlags: wire.IPv4FlagDF, SrcPort: wire.UDPSourcePort(0x11, 0x12),
		BTH:     wire.BTHFields{Opcode: wire.OpRCSendOnly, PKey: 0xFFFF, DestQP: 0x12, AckReq: true, PSN: wire.PSN(psn)},
		Payload: make([]byte, payload),
	}
	n, err := f.Len()
	require.NoError(t, err)
	b := make([]byte, n)
	_, err = wire.Encode(b, &f)
	require.NoError(t, err)
	return b
}

// rawFrame is an Ethernet frame of n bytes that is not RoCE.
func rawFrame(i, j int, n int) []byte {
	b := make([]byte, n)
	d, s := mac(byte(j+1)), mac(byte(i+1))
	copy(b[0:6], d[:])
	copy(b[6:12], s[:])
	b[12], b[13] = 0x88, 0xB5 // local experimental EtherType
	return b
}

// TestLinkTiming sends 1 MiB in MTU-sized frames at once over a 100 Gb/s
// link with 1 µs propagation: each frame arrives exactly when the
// serialization of it and all before it, plus propagation, says.
func TestLinkTiming(t *testing.T) {
	w := newWorld(t, 2, nil, 1, nil)
	cfg := fabric.LinkConfig{Bandwidth: 100e9, Propagation: sim.Microsecond, MTU: 1500, Overhead: fabric.EthernetOverhead}
	_, err := w.f.Connect("n0-n1", w.nodes[0].Port(0), w.nodes[1].Port(0), cfg)
	require.NoError(t, err)

	const total = 1 << 20
	var sizes []int
	for left := total; left > 0; left -= 1500 {
		sizes = append(sizes, wire.EthernetLen+min(left, 1500))
	}
	for _, n := range sizes {
		require.NoError(t, w.nodes[0].Send(0, rawFrame(0, 1, n), nil))
	}
	require.NoError(t, w.sched.Run())

	got := w.sinks[1].times
	require.Len(t, got, len(sizes))
	var at sim.Time
	for i, n := range sizes {
		// (n+24)·8 bits at 100 Gb/s: 1538 bytes take 123.04 ns, rounded up.
		at = at.Add(cfg.SerializationDelay(n))
		require.Equal(t, at.Add(sim.Microsecond), got[i], "frame %d", i)
	}
	assert.Equal(t, sim.Duration(124), cfg.SerializationDelay(1514), "1538 bytes on the wire at 100 Gb/s")
	// 699 full frames and one carrying the last 76 bytes: the last bit
	// arrives at 699·124 + ceil((90+24)·8/100) + 1000 ns.
	assert.Equal(t, 700, len(sizes))
	assert.Equal(t, sim.Time(699*124+10+1000), got[len(got)-1])
	st := w.f.Links()[0].Stats(0)
	assert.Equal(t, uint64(len(sizes)), st.TxFrames)
	assert.Equal(t, uint64(len(sizes)), st.RxFrames)
	assert.Zero(t, st.QueueDrops)
}

// TestQueueTailDrop bursts more than the egress queue holds: the excess is
// dropped at the tail and counted, and the frames that fit arrive in order.
func TestQueueTailDrop(t *testing.T) {
	w := newWorld(t, 2, nil, 1, nil)
	cfg := fabric.DefaultLinkConfig()
	cfg.QueueBytes = 10 * 1000
	_, err := w.f.Connect("n0-n1", w.nodes[0].Port(0), w.nodes[1].Port(0), cfg)
	require.NoError(t, err)
	for i := range 50 {
		f := rawFrame(0, 1, 1000)
		f[14] = byte(i)
		require.NoError(t, w.nodes[0].Send(0, f, nil))
	}
	require.NoError(t, w.sched.Run())
	// The first frame goes straight onto the wire; ten more fit the queue.
	require.Len(t, w.sinks[1].frames, 11)
	for i, f := range w.sinks[1].frames {
		assert.Equal(t, byte(i), f[14])
	}
	st := w.f.Links()[0].Stats(0)
	assert.Equal(t, uint64(39), st.QueueDrops)
	assert.Equal(t, 10*1000, st.MaxQueueBytes)
	drops := 0
	for _, e := range w.trace.Events() {
		if e.Kind == "queue-drop" {
			drops++
		}
	}
	assert.Equal(t, 39, drops)
}

func TestMTUDrop(t *testing.T) {
	w := newWorld(t, 2, nil, 1, nil)
	_, err := w.f.Connect("n0-n1", w.nodes[0].Port(0), w.nodes[1].Port(0), fabric.DefaultLinkConfig())
	require.NoError(t, err)
	require.NoError(t, w.nodes[0].Send(0, rawFrame(0, 1, 1514), nil))
	require.NoError(t, w.nodes[0].Send(0, rawFrame(0, 1, 1515), nil))
	require.NoError(t, w.sched.Run())
	assert.Len(t, w.sinks[1].frames, 1)
	assert.Equal(t, uint64(1), w.f.Links()[0].Stats(0).MTUDrops)
}

// TestSwitchForwards checks store-and-forward through a switch: a frame
// crosses two links, each adding its serialization and propagation, and
// reaches only the node it is addressed to.
func TestSwitchForwards(t *testing.T) {
	w := newWorld(t, 3, nil, 1, nil)
	sw := w.f.AddSwitch("sw", 3)
	cfg := fabric.DefaultLinkConfig()
	for i := range 3 {
		_, err := w.f.Connect(fmt.Sprintf("n%d-sw", i), w.nodes[i].Port(0), sw.Port(i), cfg)
		require.NoError(t, err)
	}
	frame := roce(t, 0, 2, 5, 256)
	require.NoError(t, w.nodes[0].Send(0, frame, nil))
	require.NoError(t, w.sched.Run())
	assert.Empty(t, w.sinks[1].frames)
	require.Len(t, w.sinks[2].frames, 1)
	assert.Equal(t, frame, w.sinks[2].frames[0])
	hop := cfg.SerializationDelay(len(frame)) + cfg.Propagation
	assert.Equal(t, sim.Time(2*hop), w.sinks[2].times[0])

	// Unknown destination: dropped at the switch and counted.
	require.NoError(t, w.nodes[0].Send(0, rawFrame(0, 9, 100), nil))
	require.NoError(t, w.sched.Run())
	assert.Equal(t, uint64(1), sw.UnknownDrops())
}

// TestFaultsOnTheWire runs a plan through the fabric: drop PSN 2 on its
// first transmission only, and see the drop in the trace and the capture.
func TestFaultsOnTheWire(t *testing.T) {
	plan, err := faults.Parse("drop psn=2 tx=1\n")
	require.NoError(t, err)
	var buf bytes.Buffer
	tap := capture.NewPcapngWriter(&buf, capture.PcapngOptions{})
	w := newWorld(t, 2, plan, 1, tap)
	_, err = w.f.Connect("n0-n1", w.nodes[0].Port(0), w.nodes[1].Port(0), fabric.DefaultLinkConfig())
	require.NoError(t, err)
	for psn := uint32(1); psn <= 3; psn++ {
		require.NoError(t, w.nodes[0].Send(0, roce(t, 0, 1, psn, 64), nil))
	}
	require.NoError(t, w.nodes[0].Send(0, roce(t, 0, 1, 2, 64), []byte("retransmission #1")))
	require.NoError(t, w.sched.Run())
	require.NoError(t, tap.Close())
	assert.Equal(t, []uint32{1, 3, 2}, w.sinks[1].psns(t))
	assert.Equal(t, uint64(1), w.f.Links()[0].Stats(0).FaultDrops)

	r, err := capture.NewReader(&buf)
	require.NoError(t, err)
	var comments []string
	for rec, err := range r.Records() {
		require.NoError(t, err)
		c := ""
		if len(rec.Comments) > 0 {
			c = rec.Comments[0]
		}
		comments = append(comments, c)
	}
	assert.Equal(t, []string{"", "dropped by rule 1: drop psn=2 tx=1", "", "retransmission #1"}, comments)
	assert.Contains(t, w.trace.Text(), "frame-drop qp=0x000012 link=n0->n1 op=RC_SEND_ONLY psn=2 ackreq=1 len=")
}

// runScripted runs a fixed workload with a probabilistic plan and returns
// the pcapng bytes and the trace text.
func runScripted(t *testing.T, seed uint64) ([]byte, string) {
	plan, err := faults.Parse("drop prob=0.3\ndelay 2us class=request prob=0.2\n")
	require.NoError(t, err)
	var buf bytes.Buffer
	tap := capture.NewPcapngWriter(&buf, capture.PcapngOptions{})
	w := newWorld(t, 3, plan, seed, tap)
	sw := w.f.AddSwitch("sw", 3)
	for i := range 3 {
		_, err := w.f.Connect(fmt.Sprintf("n%d-sw", i), w.nodes[i].Port(0), sw.Port(i), fabric.DefaultLinkConfig())
		require.NoError(t, err)
	}
	for psn := range uint32(40) {
		require.NoError(t, w.nodes[psn%3].Send(0, roce(t, int(psn%3), int(psn+1)%3, psn, int(psn*13%700)), nil))
	}
	require.NoError(t, w.sched.Run())
	require.NoError(t, tap.Close())
	return buf.Bytes(), w.trace.Text()
}

func TestDeterminism(t *testing.T) {
	p1, t1 := runScripted(t, 42)
	p2, t2 := runScripted(t, 42)
	assert.Equal(t, sha256.Sum256(p1), sha256.Sum256(p2), "same seed, same pcapng")
	assert.Equal(t, sha256.Sum256([]byte(t1)), sha256.Sum256([]byte(t2)), "same seed, same trace")
	_, t3 := runScripted(t, 43)
	assert.NotEqual(t, t1, t3, "another seed draws other faults")
	assert.Contains(t, t1, "frame-drop")
}

// TestPerLinkTap captures one link of three into its own file: it sees
// exactly the frames that crossed that link, in both directions.
func TestPerLinkTap(t *testing.T) {
	w := newWorld(t, 3, nil, 1, nil)
	sw := w.f.AddSwitch("sw", 3)
	var links []*fabric.Link
	for i := range 3 {
		l, err := w.f.Connect(fmt.Sprintf("n%d-sw", i), w.nodes[i].Port(0), sw.Port(i), fabric.DefaultLinkConfig())
		require.NoError(t, err)
		links = append(links, l)
	}
	var buf bytes.Buffer
	tap := capture.NewPcapngWriter(&buf, capture.PcapngOptions{})
	require.NoError(t, links[2].AddTap(tap))
	require.NoError(t, w.nodes[0].Send(0, roce(t, 0, 1, 1, 64), nil))
	require.NoError(t, w.nodes[0].Send(0, roce(t, 0, 2, 2, 64), nil))
	require.NoError(t, w.nodes[2].Send(0, roce(t, 2, 0, 3, 64), nil))
	require.NoError(t, w.sched.Run())
	require.NoError(t, tap.Close())
	r, err := capture.NewReader(&buf)
	require.NoError(t, err)
	var got []string
	var p wire.Packet
	for rec, err := range r.Records() {
		require.NoError(t, err)
		require.NoError(t, p.Decode(rec.Data))
		ifc, _ := r.Interface(rec.Interface)
		got = append(got, fmt.Sprintf("%s psn=%d", ifc.Name, p.BTH.PSN()))
	}
	assert.Equal(t, []string{"n2->sw psn=3", "sw->n2 psn=2"}, got)
}

// TestFramesInFlightKeepOneArrivalQueued sends frames back to back over a
// link whose propagation delay holds a hundred of them on the wire at
// once: they arrive when serialization and propagation say, but only the
// oldest one's arrival sits in the event heap (the others keep their
// place in the order, sim.Reserve), so the heap of a large world is as
// deep as its links, not as the frames on them (issue 20).
func TestFramesInFlightKeepOneArrivalQueued(t *testing.T) {
	w := newWorld(t, 2, nil, 1, nil)
	cfg := fabric.LinkConfig{Bandwidth: 100e9, Propagation: 100 * sim.Microsecond, MTU: 1500, Overhead: fabric.EthernetOverhead}
	_, err := w.f.Connect("n0-n1", w.nodes[0].Port(0), w.nodes[1].Port(0), cfg)
	require.NoError(t, err)
	const frames = 200
	for range frames {
		require.NoError(t, w.nodes[0].Send(0, rawFrame(0, 1, 1514), nil))
	}
	// Run until the last frame is on the wire, none arrived yet.
	ser := cfg.SerializationDelay(1514)
	require.NoError(t, w.sched.RunUntil(sim.Time(frames)*sim.Time(ser)))
	require.Empty(t, w.sinks[1].times)
	assert.Equal(t, frames, w.sched.Pending(), "every frame's arrival is still to come")
	assert.LessOrEqual(t, w.sched.Queued(), 2, "the heap holds the oldest arrival (and the last tx-done), not one per frame")
	require.NoError(t, w.sched.Run())
	require.Len(t, w.sinks[1].times, frames)
	for i, at := range w.sinks[1].times {
		require.Equal(t, sim.Time(i+1)*sim.Time(ser)+sim.Time(cfg.Propagation), at, "frame %d", i)
	}
}
