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
// that a driver advances side by side (verbs.Cluster). Every fabric has
// every node, its own or a stand-in marked elsewhere (Node.SetElsewhere),
// and a copy of the switch that owns the ports toward its own nodes. A
// node's link to the switch diverts (Link.Divert) the frames for nodes
// elsewhere: such a frame crosses the node's link here, queue, faults,
// serialization and tap as on any link, and instead of arriving at the
// switch here it is handed to the driver with the time it reaches the
// switch. The driver brings it into the fabric that owns its destination
// with Deliver on that fabric's copy of the link, in the direction from
// the stand-in, where it arrives at the switch at that time as if it
// had crossed. The switch forwards at once (it has no shared buffer), so
// each egress queue sees the frames, and the times, it would in the
// whole fabric. A group frame arrives here and is handed over too, and
// each copy of the switch floods it toward its own nodes only (its link
// counts it in RxFrames once in each fabric).
//
// A frame reaches the far end one propagation delay after it leaves the
// wire at the earliest, so a driver that advances every fabric by at most
// that much between two exchanges delivers every frame before its
// arrival time comes (conservative parallel simulation, lookahead the
// propagation delay).

// RemoteFrame is a frame a diverting direction handed over (Divert).
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
	// sending fabric; -1 for none (a group frame, an unknown MAC). For
	// Deliver, To is the node's index in the receiving fabric (the
	// driver's to translate), or -1 to take the node that owns the
	// frame's destination MAC.
	To, Reaches int32
	// Hint is the sender's hint for the frame's receiver (SendHinted),
	// which Deliver keeps.
	Hint Hint
	// DstMAC is the frame's destination MAC, as its bytes have it: the
	// sending fabric knows it without reading them, and so, given it,
	// does Deliver, where the frame's bytes are cold (written on another
	// core). The zero MAC: Deliver reads it from the frame.
	DstMAC wire.MAC
	// Loan, for a frame a direction that lends (DivertLent) handed over
	// for a node elsewhere, is its buffer's loan: Frame and Note stay
	// valid, unchanged, until the driver gives the buffer back with
	// Fabric.Return(Loan). 0 for a frame handed over for the call only.
	Loan Loan
}

// Loan names a frame buffer a fabric lent with a frame it handed over
// (DivertLent), until it is given back (Fabric.Return); 0 is none.
type Loan int32

// ErrDeliverOrder is Deliver's error for a frame that would arrive
// before the clock or before a frame delivered earlier on the direction.
var ErrDeliverOrder = errors.New("fabric: delivered frame arrives out of order")

// Divert makes direction dir (0: from the first port given to Connect)
// hand to out the frames it serializes for a node elsewhere
// (Node.SetElsewhere), with the time they reach the far end, instead of
// letting them arrive; a group frame (multicast, broadcast) goes to out
// and arrives here as well; every other frame arrives here as on any
// link. The direction's far end is a switch that exists in the other
// fabrics too (see the comment above).
func (l *Link) Divert(dir int, out func(RemoteFrame)) {
	l.dirs[dir].remote, l.dirs[dir].lend = out, false
}

// DivertLent is Divert for a driver that keeps the frames it is handed
// until it delivers them elsewhere: a frame for a node elsewhere keeps
// its buffer in this fabric, lent with it (RemoteFrame.Loan), so that
// the driver need not copy its bytes; the driver gives the buffer back
// with Return once done with them. A group frame is handed over as
// Divert hands it, for the call only: the fabric goes on with it.
func (l *Link) DivertLent(dir int, out func(RemoteFrame)) {
	l.dirs[dir].remote, l.dirs[dir].lend = out, true
}

// ErrNoLoan is Return's error for a loan the fabric does not have out.
var ErrNoLoan = errors.New("fabric: no such loan")

// Return takes back a buffer lent with a frame (DivertLent), on the
// fabric's own goroutine as every call, once whoever held it is done
// with its bytes: they may be reused from then on. A loan that is not
// out (never made, or returned already) is refused with ErrNoLoan.
func (f *Fabric) Return(l Loan) error {
	id := int32(l) - 1
	if id < 0 || id >= f.pool.n || !f.pool.at(id).lent {
		return fmt.Errorf("%w: %d", ErrNoLoan, l)
	}
	b := f.pool.at(id)
	b.lent = false
	f.release(b)
	return nil
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
// its note and fault, addressed to r.To (this fabric's node; -1: the
// owner of its destination MAC). It is not judged by this fabric's fault
// plan (the sending fabric's judged it where it entered the link) nor
// recorded by its taps there (the sending fabric's recorded it); a
// switch it reaches forwards it by its destination MAC as any frame. The
// bytes are copied.
func (l *Link) Deliver(dir int, r RemoteFrame) error { return l.deliver(dir, r, false, 0) }

// DeliverLent is Deliver for a frame whose buffer the sending fabric lent
// with it (r.Loan, DivertLent): its bytes are not copied. This fabric
// keeps the frame in r.Frame's storage (and writes there if a fault rule
// alters it on a later hop) until it is done with the frame, then hands
// the loan to the function SetRepay gave, with lender, the driver's name
// for the sending fabric, for the driver to give the buffer back there
// (Fabric.Return). Until then the lender must neither reuse nor read the
// storage; a frame refused (the error) is not kept.
func (l *Link) DeliverLent(dir int, r RemoteFrame, lender int32) error {
	if r.Loan == 0 {
		return fmt.Errorf("%w: a frame delivered as lent has none", ErrNoLoan)
	}
	if l.dirs[dir].f.repayFn == nil {
		return errors.New("fabric: a frame delivered as lent, with no SetRepay to give its buffer back")
	}
	return l.deliver(dir, r, true, lender)
}

// SetRepay gives the function that DeliverLent's frames' loans go to, on
// the fabric's goroutine, when the fabric is done with them: in the
// order it releases the frames, which is the simulation's.
func (f *Fabric) SetRepay(fn func(lender int32, l Loan)) { f.repayFn = fn }

// repay hands a borrowed buffer's loan back to the driver (SetRepay).
func (f *Fabric) repay(lender int32, l Loan) { f.repayFn(lender, l) }

func (l *Link) deliver(dir int, r RemoteFrame, keep bool, lender int32) error {
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
	case int(r.To) >= len(f.nodes):
		return fmt.Errorf("fabric: deliver through %s: addressed to node %d of %d", d.name, r.To, len(f.nodes))
	}
	f.start()
	d.lastIn = at
	var b *frameBuf
	if keep {
		b = f.pool.getBorrowed(frame, lender, r.Loan)
	} else {
		b = f.pool.get(len(frame))
		b.n = f.pool.fill(b, frame)
	}
	b.from, b.owner, b.tx, b.sealed = d.from.node.idx, noNode, r.Tx, r.Sealed
	f.pool.setNote(b, r.Note)
	f.pool.setFault(b, r.Fault)
	// Looked up as the stand-in would for a frame it sent; addressed
	// as it was sent (a rule may have rewritten its MAC on the way).
	mac := r.DstMAC
	if mac == (wire.MAC{}) {
		mac = wire.Ethernet(frame).Dst()
	}
	b.to, b.dst = d.from.node.destination(mac)
	if r.To >= 0 {
		b.to = r.To
	}
	t := f.sched.Reserve(at)
	if d.flight.size == 0 {
		f.sched.ScheduleTicket(t, d, evArrive)
	}
	d.flight.push(inFlight{id: b.id, n: b.n, dst: b.dst, arrive: t, data: b.addr(), hint: r.Hint.Addr, hlen: r.Hint.Len})
	return nil
}
