package fabric

import (
	"fmt"

	"github.com/rocesim/rocesim/internal/prefetch"
	"github.com/rocesim/rocesim/sim"
)

// A frame's life on one link direction:
//
//  1. enter: the fault plan judges it (drop, duplicate, delay, reorder,
//     corrupt, truncate, rewrite); a frame larger than the MTU is dropped.
//  2. enqueue: tail drop if the egress queue would exceed its capacity;
//     frames held for reordering are released as later frames pass.
//  3. transmit: when the direction is idle, the head of the queue is
//     serialized for (len+overhead)·8/bandwidth; the tap records it now.
//  4. arrive: propagation later, the frame reaches the far port: a node's
//     Receiver, or a switch, which forwards it (back to step 1 on the
//     egress link, as a later hop).

// EthernetOverhead is what each frame costs on the wire beyond its bytes:
// preamble and start delimiter (8), FCS (4) and the inter-frame gap (12).
const EthernetOverhead = 24

// LinkConfig describes a point-to-point Ethernet link, the same both ways.
type LinkConfig struct {
	// Bandwidth in bits per second.
	Bandwidth int64
	// Propagation delay, one way.
	Propagation sim.Duration
	// MTU is the largest IP packet (frame minus its 14-byte Ethernet
	// header) the link carries; larger frames are dropped and counted.
	MTU int
	// QueueBytes is the egress queue capacity of each direction, in frame
	// bytes; a frame that would exceed it is tail-dropped and counted.
	// 0 means unlimited.
	QueueBytes int
	// Overhead is added to each frame's length for serialization
	// (EthernetOverhead models preamble, FCS and inter-frame gap; 0 counts
	// the frame bytes alone).
	Overhead int
}

// DefaultLinkConfig is a 100 Gb/s link with 1 µs propagation, a 1500-byte
// MTU (path MTU 1024 for RoCE, as rxe picks on such a link), a 1 MiB
// queue per direction and Ethernet's per-frame overhead.
func DefaultLinkConfig() LinkConfig {
	return LinkConfig{
		Bandwidth:   100e9,
		Propagation: sim.Microsecond,
		MTU:         1500,
		QueueBytes:  1 << 20,
		Overhead:    EthernetOverhead,
	}
}

// SerializationDelay returns how long a frame of n bytes occupies the
// link: (n+Overhead)·8/Bandwidth, rounded up to the nanosecond.
func (c LinkConfig) SerializationDelay(n int) sim.Duration {
	bits := int64(n+c.Overhead) * 8
	return sim.Duration((bits*int64(sim.Second) + c.Bandwidth - 1) / c.Bandwidth)
}

// Link joins two ports.
type Link struct {
	name string
	cfg  LinkConfig
	dirs [2]direction
}

// DirStats counts what happened on one direction of a link.
type DirStats struct {
	TxFrames, TxBytes uint64 // frames and bytes serialized onto the link
	RxFrames          uint64 // frames that arrived at the far end
	QueueDrops        uint64 // tail drops at the egress queue
	FaultDrops        uint64 // dropped by the fault plan (rules, down links, partitions)
	MTUDrops          uint64 // larger than the MTU
	Altered           uint64 // corrupted, truncated or rewritten by the fault plan
	Duplicated        uint64 // extra copies made by the fault plan
	MaxQueueBytes     int    // the deepest the queue got
}

// direction is one way of a link: the egress queue at its from port, the
// wire, and the frames in flight. What every frame reads comes first and
// holds copies of what it would otherwise reach through the link, the
// ports and their nodes (the link's configuration and name, the far
// end's receiver): in a large world a direction has gone cold between
// two of its frames, and each object a frame reaches costs a miss
// (issue 20).
type direction struct {
	f      *Fabric
	queue  fifo[queued]   // waiting to be serialized, with their hints
	flight fifo[inFlight] // serialized, propagating; they arrive in order
	qBytes int
	busy   bool  // a frame is being serialized
	node   int32 // the sending end's node (FrameRecord.First), noNode for a switch
	held   []heldFrame
	tapIDs []tapID
	cfg    LinkConfig // the link's
	// The far end: a node's port (recv, its Receiver, nil until it has
	// one; port, the port's index) or a switch (sw).
	recv     Receiver
	srecv    SealedReceiver // recv, if it is one
	port     int
	sw       *Switch
	linkName string
	name     string // "a->b"
	stats    DirStats
	from, to *Port
	// remote, if set, takes the frames serialized onto the direction
	// that are for nodes elsewhere, and the group frames (Link.Divert).
	remote func(RemoteFrame)
	lend   bool // remote keeps the frames for nodes elsewhere (DivertLent)
	// lastIn is when the latest frame Deliver brought through the
	// direction arrives: frames cross a link in order.
	lastIn sim.Time
}

// setReceiver makes r the direction's far end.
func (d *direction) setReceiver(r Receiver) {
	d.recv = r
	d.srecv, _ = r.(SealedReceiver)
}

type heldFrame struct {
	id    int32
	after int // release after this many more frames enter
	rule  int
}

type tapID struct {
	tap Tap
	id  int
}

// Connect joins ports a and b with a link named name (e.g. "a-b"); the
// directions are named "A->B" after the ports' owners.
func (f *Fabric) Connect(name string, a, b *Port, cfg LinkConfig) (*Link, error) {
	if f.started {
		return nil, ErrStarted
	}
	if a.linked != nil || b.linked != nil {
		return nil, fmt.Errorf("%w: connecting %s", ErrConnected, name)
	}
	if cfg.Bandwidth <= 0 || cfg.MTU <= 0 || cfg.Propagation < 0 || cfg.QueueBytes < 0 || cfg.Overhead < 0 {
		return nil, fmt.Errorf("fabric: link %s: bandwidth and MTU must be positive, delays and sizes not negative", name)
	}
	l := &Link{name: name, cfg: cfg}
	for i, ends := range [2][2]*Port{{a, b}, {b, a}} {
		d := &l.dirs[i]
		*d = direction{f: f, name: ends[0].owner + "->" + ends[1].owner, from: ends[0], to: ends[1],
			node: noNode, cfg: cfg, linkName: name, port: ends[1].index, sw: ends[1].sw}
		if n := ends[0].node; n != nil {
			d.node = n.idx
		}
		if n := ends[1].node; n != nil {
			d.setReceiver(n.recv)
		}
		ends[0].out = d
		if f.tap != nil {
			if err := d.addTap(f.tap); err != nil {
				return nil, err
			}
		}
	}
	a.linked, b.linked = l, l
	f.links = append(f.links, l)
	return l, nil
}

// Name returns the link's name.
func (l *Link) Name() string { return l.name }

// Config returns the link's configuration.
func (l *Link) Config() LinkConfig { return l.cfg }

// Stats returns the counters of the direction that leaves port p's side
// (0: from the first port given to Connect, 1: from the second).
func (l *Link) Stats(dir int) DirStats { return l.dirs[dir].stats }

// DirName returns the name of direction dir ("a->b").
func (l *Link) DirName(dir int) string { return l.dirs[dir].name }

// AddTap records this link's two directions into tap as well (a per-link
// capture), one interface each.
func (l *Link) AddTap(tap Tap) error {
	for i := range l.dirs {
		if err := l.dirs[i].addTap(tap); err != nil {
			return err
		}
	}
	return nil
}

func (d *direction) addTap(tap Tap) error {
	desc := fmt.Sprintf("link %s: %s to %s", d.linkName, d.from, d.to)
	id, err := tap.AddInterface(d.name, desc)
	if err != nil {
		return fmt.Errorf("fabric: tap for %s: %w", d.name, err)
	}
	d.tapIDs = append(d.tapIDs, tapID{tap, id})
	return nil
}

// enqueue puts frame b, with its hint h, at the tail of the egress
// queue, or drops it when the queue is full, and starts the wire if it
// is idle.
func (d *direction) enqueue(b *frameBuf, h Hint) { d.enqueueID(b.id, int(b.n), h) }

// enqueueID is enqueue of the frame of buffer id and length n.
func (d *direction) enqueueID(id int32, n int, h Hint) {
	f := d.f
	if d.cfg.QueueBytes > 0 && d.qBytes+n > d.cfg.QueueBytes {
		d.stats.QueueDrops++
		b := f.pool.at(id)
		f.record(d, b, "queue-drop", sim.DropQueueFull, fmt.Sprintf("dropped: egress queue of %s full (%d of %d bytes queued)", d.name, d.qBytes, d.cfg.QueueBytes), 0)
		f.release(b)
		return
	}
	d.queue.push(queued{id: id, hlen: h.Len, hint: h.Addr})
	d.qBytes += n
	d.stats.MaxQueueBytes = max(d.stats.MaxQueueBytes, d.qBytes)
	d.releaseHeld()
	if !d.busy {
		d.transmit()
	}
}

// releaseHeld counts one more frame past every held frame and enqueues
// those whose count is reached, in the order they were held.
func (d *direction) releaseHeld() {
	if len(d.held) == 0 {
		return
	}
	keep := d.held[:0]
	var due []int32
	for _, h := range d.held {
		h.after--
		if h.after <= 0 {
			due = append(due, h.id)
		} else {
			keep = append(keep, h)
		}
	}
	d.held = keep
	for _, id := range due {
		b := d.f.pool.at(id)
		d.f.traceFrame(d, b, "frame-release", "released after reordering")
		d.f.requeue(d, b)
	}
}

const (
	evTxDone uint64 = iota
	evArrive
)

// transmit serializes the head of the queue. A frame the fault plan
// dropped while others waited ahead of it is recorded as dropped when it
// reaches the head, and the next one goes.
func (d *direction) transmit() {
	f := d.f
	var b *frameBuf
	var h Hint
	for {
		q, ok := d.queue.pop()
		if !ok {
			d.busy = false
			return
		}
		b, h = f.pool.at(q.id), q.hinted()
		if b.dropRule == 0 {
			break
		}
		f.record(d, b, "frame-drop", sim.DropFault, f.pool.fault(b), int(b.dropRule))
		f.release(b)
	}
	id := b.id
	d.qBytes -= int(b.n)
	d.busy = true
	d.stats.TxFrames++
	d.stats.TxBytes += uint64(b.n)
	b.left(f)
	f.writeTaps(d, b, f.pool.comment(b), false)
	f.traceFrame(d, b, "frame-tx", "")
	ser := d.cfg.SerializationDelay(int(b.n))
	f.sched.After(ser, d, evTxDone)
	if d.remote != nil && d.handOver(b, ser, h) {
		return
	}
	// Frames arrive in the order they were serialized (the link's
	// propagation delay is fixed), so only the oldest frame in flight
	// has its arrival in the event heap; the others hold their place in
	// the order (Reserve) until it is their turn (Fire): the heap stays
	// as deep as the links, not as the frames on them.
	t := f.sched.Reserve(f.sched.Now().Add(ser + d.cfg.Propagation))
	if d.flight.size == 0 {
		f.sched.ScheduleTicket(t, d, evArrive)
	}
	d.flight.push(inFlight{id: id, n: b.n, dst: b.dst, arrive: t, data: b.addr(), hint: h.Addr, hlen: h.Len})
}

// handOver gives frame b, which starts onto d now and takes ser to
// serialize, to d's remote (Divert) if it is for a node elsewhere or for
// a group; it reports whether the frame has left this fabric (a group
// frame arrives here too). Out of transmit, which a World's every frame
// runs.
func (d *direction) handOver(b *frameBuf, ser sim.Duration, h Hint) bool {
	f := d.f
	reaches, away := f.diverts(b)
	if !away {
		return false
	}
	r := RemoteFrame{At: f.sched.Now().Add(ser + d.cfg.Propagation), Frame: b.bytes(), Sealed: b.sealed, Tx: b.tx, To: b.to, Reaches: reaches, Hint: h}
	if b.dst >= 0 {
		// The MAC found at Send, unchanged since (a rule that rewrote
		// it set lookupMAC): the receiving fabric need not read it.
		r.DstMAC = f.macs[b.dst].port.cfg.MAC
	}
	if b.hasText {
		t := f.pool.text(b.id)
		r.Note, r.Fault = t.note, t.fault
	}
	if reaches == noNode {
		d.remote(r)
		return false // a group frame: its flood here too
	}
	if d.lend {
		b.lent = true
		r.Loan = Loan(b.id + 1)
		d.remote(r)
		return true
	}
	d.remote(r)
	f.release(b)
	return true
}

// A direction is a sim.Prefetcher: in a large fabric the scheduler asks
// it for its next event's memory while the event before runs.
var _ sim.Prefetcher = (*direction)(nil)

// Prefetch asks for what the direction's next event will read first:
// the record of the frame that starts onto the wire (evTxDone) or
// arrives (evArrive), and, when a node's NIC will read it, the whole
// arriving frame (see sim.Prefetcher). The whole frame, not its headers
// alone: the NIC copies the payload out next, and in a large world the
// frame has waited long enough to be cold (the alltoall at N = 256, runs
// taken in turns: 0.59 s against 0.64 s in one world, 0.33 s against
// 0.37 s as 2 parts, medians of nine and eleven).
func (d *direction) Prefetch(ev uint64) {
	switch ev {
	case evTxDone:
		if q, ok := d.queue.peek(); ok {
			prefetch.Lines(d.f.pool.addrOf(q.id), 1)
		}
	case evArrive:
		if fl, ok := d.flight.peek(); ok {
			prefetch.Lines(d.f.pool.addrOf(fl.id), 1)
			if d.sw == nil {
				prefetch.Lines(fl.data, uintptr(fl.n))
				// The receiver's own state, which its sender named
				// (Hint): with the frame's headers, what the receiving
				// NIC reads first, each a miss in a large world.
				prefetch.Lines(fl.hint, uintptr(min(fl.hlen, maxHintLen)))
			}
		}
	}
}

// Fire handles the direction's two events: the wire is free again, and
// the oldest frame in flight has arrived.
func (d *direction) Fire(now sim.Time, ev uint64) {
	switch ev {
	case evTxDone:
		d.busy = false
		d.transmit()
	case evArrive:
		fl, _ := d.flight.pop()
		if next, ok := d.flight.peek(); ok {
			d.f.sched.ScheduleTicket(next.arrive, d, evArrive)
		}
		d.stats.RxFrames++
		d.f.arrive(d, fl)
	}
}
