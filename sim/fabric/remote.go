package fabric

import (
	"errors"
	"fmt"

	"github.com/rocesim/rocesim/sim"
	"github.com/rocesim/rocesim/wire"
)

// Links between fabrics
//
// A large world can run as several fabrics, each with its own scheduler,
// that a driver advances side by side (verbs.Cluster). A link between
// two of them exists in both: in each, it joins the local port to a
// stand-in node for the far end (a node with the far port's addresses,
// or a switch's). The direction toward the stand-in is remote
// (SetRemote): its queue, faults, serialization and tap are this
// fabric's as on any link, but a frame serialized onto it is handed to
// the driver, with the time it reaches the far end, instead of arriving
// here. The driver brings it into the other fabric with Deliver on that
// fabric's copy of the link, in the direction from the stand-in, where
// it arrives at that time as if it had crossed.
//
// A switch can be cut the same way, one copy of it in every fabric, each
// owning the ports toward its own nodes (verbs.Cluster): there the nodes
// of the other fabrics are stand-ins marked elsewhere (Node.SetElsewhere),
// and a node's link to the switch diverts (Link.Divert) the frames for
// them: such a frame crosses the node's own link here, and is handed over
// when it reaches the switch, to arrive at the switch of the fabric that
// owns its destination's port at the time it would have arrived here.
// The switch forwards at once (it has no shared buffer), so with one
// switch each egress queue sees the frames, and the times, it would in
// the whole fabric. A group frame arrives here and is handed over too,
// and each copy of the switch floods it toward its own nodes only (its
// link counts it in RxFrames once in each fabric).
//
// A frame reaches the far end one propagation delay after it leaves the
// wire at the earliest, so a driver that advances every fabric by at most
// that much between two exchanges delivers every frame before its
// arrival time comes (conservative parallel simulation, lookahead the
// propagation delay).

// RemoteFrame is a frame that left a remote direction (SetRemote).
type RemoteFrame struct {
	// At is when it reaches the far end: serialization and propagation
	// after it started onto the wire.
	At sim.Time
	// Frame is its bytes, valid during the call only.
	Frame []byte
	// Sealed: its sender vouched for its ICRC and nothing has changed
	// it since (SendSealed).
	Sealed bool
	// Tx is the transmission number of its PSN, as counted on its first
	// hop (faults.Injector.CountTx), for rules with tx= on later hops.
	Tx int32
	// Note is why its sender sent it (Node.Send's note), valid during
	// the call only, and Fault what the fault plan did to it on the way
	// (its capture comment on the later hops, as on the first).
	Note  []byte
	Fault string
	// To is the node it was sent to (FrameRecord.ToNode: what the
	// records and the plan's rules name it by) and Reaches the node that
	// owns its destination MAC now, the one it goes to (To, unless a
	// fault rule rewrote the MAC on the way), both as Node.Index in the
	// sending fabric; -1 for none (a group frame, an unknown MAC).
	// Deliver finds the node from the frame's destination MAC, as its
	// stand-in's Send would; DeliverTo keeps the one it was sent to.
	To, Reaches int32
}

// ErrDeliverOrder is Deliver's error for a frame that would arrive
// before the clock or before a frame delivered earlier on the direction.
var ErrDeliverOrder = errors.New("fabric: delivered frame arrives out of order")

// SetRemote makes direction dir (0: from the first port given to
// Connect) a remote one: every frame serialized onto it goes to out,
// then its buffer here is freed. The direction's far end is a stand-in
// for a port in another fabric; nothing arrives at it.
func (l *Link) SetRemote(dir int, out func(RemoteFrame)) {
	l.dirs[dir].remote, l.dirs[dir].divert = out, false
}

// Divert makes direction dir (0: from the first port given to Connect)
// hand to out the frames it serializes for a node elsewhere
// (Node.SetElsewhere), with the time they reach the far end, instead of
// letting them arrive; a group frame (multicast, broadcast) goes to out
// and arrives here as well; every other frame arrives here as on any
// link. The direction's far end is a switch that exists in the other
// fabrics too (see the comment above).
func (l *Link) Divert(dir int, out func(RemoteFrame)) {
	l.dirs[dir].remote, l.dirs[dir].divert = out, true
}

// SetElsewhere marks n as a stand-in for a node of another fabric: a
// diverting link hands over the frames for it (Link.Divert), and no
// switch floods group frames toward it (the copy of the switch in the
// node's own fabric does). It must be called before the first frame.
func (n *Node) SetElsewhere() {
	if n.f.started {
		panic(ErrStarted)
	}
	n.f.away[n.idx] = true
}

// diverts reports whether frame b, serialized onto a diverting
// direction, is handed over (it is for a node elsewhere, or for a
// group), and the node that owns its destination MAC (noNode for a
// group). A frame whose destination a fault rule rewrote is looked up
// again, as a switch would, but keeps its addressee (b.to); one the
// plan cut shorter than an Ethernet header stays, for the switch here
// to drop as a runt.
func (f *Fabric) diverts(b *frameBuf) (reaches int32, ok bool) {
	reaches, dst := b.to, b.dst
	if dst == lookupMAC {
		if b.n < wire.EthernetLen {
			return noNode, false
		}
		reaches, dst = f.owner(wire.Ethernet(b.bytes()).Dst())
	}
	if dst == floodMAC {
		return noNode, true
	}
	return reaches, reaches >= 0 && f.away[reaches]
}

// Deliver brings a frame from another fabric through direction dir: it
// arrives at the direction's far end at r.At, no earlier than the clock
// and than the frame delivered before it on the direction, as a frame
// that crossed the link would, and is then received or forwarded, with
// its note and fault. It is not judged by this fabric's fault plan (the
// sending fabric's judged it where it entered the link) nor recorded by
// its taps there (the sending fabric's recorded it); a switch it reaches
// forwards it as any frame. The bytes are copied.
func (l *Link) Deliver(dir int, r RemoteFrame) error { return l.deliver(dir, r, noNode, false) }

// DeliverTo is Deliver for a frame sent to node to of this fabric
// (Node.Index) whose destination MAC a fault rule rewrote on the way: it
// goes where its MAC says, but the records and the plan's rules name it
// by to, as the sending fabric's did (RemoteFrame.To).
func (l *Link) DeliverTo(dir int, r RemoteFrame, to int32) error { return l.deliver(dir, r, to, true) }

func (l *Link) deliver(dir int, r RemoteFrame, to int32, keepTo bool) error {
	d := &l.dirs[dir]
	f := d.f
	at, frame := r.At, r.Frame
	if err := checkFrameLen(len(frame)); err != nil {
		return err
	}
	switch {
	case at < f.sched.Now() || at < d.lastIn:
		return fmt.Errorf("%w: %s at %v (clock %v, last frame %v)", ErrDeliverOrder, d.name, at, f.sched.Now(), d.lastIn)
	case d.from.node == nil:
		// Records name a frame's sender by its node.
		return fmt.Errorf("fabric: deliver through %s: the stand-in for the far end must be a node, not a switch", d.name)
	}
	f.start()
	d.lastIn = at
	b := f.pool.get(len(frame))
	b.n = int32(copy(b.data, frame))
	b.from, b.owner, b.tx, b.sealed = d.from.node.idx, noNode, r.Tx, r.Sealed
	f.pool.setNote(b, r.Note)
	f.pool.setFault(b, r.Fault)
	// Looked up as the stand-in would for a frame it sent.
	b.to, b.dst = d.from.node.destination(wire.Ethernet(frame).Dst())
	if keepTo {
		b.to = to
	}
	t := f.sched.Reserve(at)
	if d.flight.size == 0 {
		f.sched.ScheduleTicket(t, d, evArrive)
	}
	d.flight.push(inFlight{id: b.id, n: b.n, dst: b.dst, arrive: t})
	return nil
}
