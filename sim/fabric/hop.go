package fabric

import (
	"fmt"
	"strconv"

	"github.com/rocesim/rocesim/faults"
	"github.com/rocesim/rocesim/sim"
	"github.com/rocesim/rocesim/wire"
)

// judges reports whether enter has work for the fault plan: rules to
// judge a frame by, or transmissions to count.
func (f *Fabric) judges() bool {
	return f.countTx || f.plan != nil && len(f.plan.Rules) > 0
}

// enter brings frame b to the egress of direction d: the fault plan
// judges it, then it is queued. first is true on the frame's first hop
// (the sender's own link). h is the frame's hint (Hint), kept where the
// frame goes on as it came; the plan's detours (a delay, a hold, copies)
// drop it.
func (f *Fabric) enter(d *direction, b *frameBuf, first bool, h Hint) {
	if mtu := d.cfg.MTU; int(b.n)-wire.EthernetLen > mtu {
		d.stats.MTUDrops++
		f.record(d, b, "frame-drop", sim.DropMTU, fmt.Sprintf("dropped: %d-byte IP packet exceeds the MTU %d of %s", b.n-wire.EthernetLen, mtu, d.linkName), 0)
		f.release(b)
		return
	}
	if !f.judges() {
		d.enqueue(b, h) // no plan: nothing to judge, no transmissions to count
		return
	}
	judge := f.plan != nil && len(f.plan.Rules) > 0
	pkt := &f.pkt
	var roce *wire.Packet
	if pkt.DecodeHeaders(b.bytes()) == nil {
		roce = pkt
	}
	hop := faults.Hop{Link: d.linkName, From: f.names[b.from], To: f.name(b.to), First: first, Tx: int(b.tx)}
	if first && roce != nil {
		hop.Tx = f.inj.CountTx(hop, roce)
		b.tx = int32(hop.Tx)
	}
	if !judge {
		d.enqueue(b, h)
		return
	}
	// What identifies the frame before a rule alters it in place: a
	// frame-alter event carries it (was_qpn, was_op, was_psn), so that a
	// reader of the trace (the ladder) finds the frame that changed.
	was := WasOf(roce)
	v := f.inj.Decide(f.sched.Now(), hop, b.bytes(), roce)
	if v.Cut.Rule > 0 {
		// A down after=K event: this frame, the K-th, still goes; the
		// link is down from now on, as a timed down would be.
		f.linkChange(v.Cut.Time, v.Cut)
	}
	if v.Action == faults.Pass {
		d.enqueue(b, h)
		return
	}
	// Corrupt and Rewrite change the frame in place, Truncate shortens
	// it: a switch reads its destination again, and its receiver checks
	// its ICRC (once altered, it is no longer the frame its sender
	// sealed).
	b.dst = lookupMAC
	switch v.Action {
	case faults.Drop:
		d.stats.FaultDrops++
		if d.busy || d.queue.size > 0 {
			// Frames ahead of it still wait for the wire: record it
			// when it reaches the head of the queue, where it would
			// have started onto the wire, so captures and traces keep
			// wire order (its PSN after theirs). It takes no wire time,
			// and its sender is done with it now, as for any drop.
			b.left(f)
			f.pool.setFault(b, v.String())
			b.dropRule = int32(v.Rule)
			d.queue.push(queued{id: b.id})
			return
		}
		f.record(d, b, "frame-drop", sim.DropFault, v.String(), v.Rule)
		f.release(b)
	case faults.Duplicate:
		d.stats.Duplicated += uint64(v.Copies)
		why := v.String()
		f.pool.setFault(b, why)
		f.traceFrame(d, b, "frame-dup", why, faultFields(v)...)
		// The copies are made one at a time from a template, not all at
		// once: "dup n=100000000" must cost what the queue can hold, not
		// a buffer per copy. Nothing leaves the queue while they are
		// enqueued (no event runs), so once one copy is tail-dropped all
		// later ones would be: they are counted as queue drops together.
		tmpl := f.pool.clone(b)
		d.enqueue(b, h)
		for i := 1; i <= v.Copies; i++ {
			if q := d.cfg.QueueBytes; q > 0 && d.qBytes+int(tmpl.n) > q && i > 1 {
				rest := v.Copies - i + 1
				d.stats.QueueDrops += uint64(rest)
				f.traceFrame(d, tmpl, "queue-drop", fmt.Sprintf("dropped: copies %d to %d of rule %d: egress queue of %s full (%d of %d bytes queued)",
					i, v.Copies, v.Rule, d.name, d.qBytes, q), append([]sim.Field{sim.DropQueueFull.Field()}, faultFields(v)...)...)
				break
			}
			c := f.pool.clone(tmpl)
			f.pool.setFault(c, v.CopyNote(i))
			c.copy = int32(i)
			d.enqueue(c, Hint{})
		}
		f.release(tmpl)
	case faults.Delay:
		why := v.String()
		f.pool.setFault(b, why)
		f.traceFrame(d, b, "frame-delay", why, faultFields(v)...)
		f.delayH.hold(d, b, v.Delay)
	case faults.Reorder:
		why := v.String()
		f.pool.setFault(b, why)
		f.traceFrame(d, b, "frame-hold", why, faultFields(v)...)
		d.held = append(d.held, heldFrame{id: b.id, after: v.Hold, rule: v.Rule})
	case faults.Truncate:
		b.n = int32(min(int(b.n), max(v.Len, 0)))
		fallthrough
	case faults.Corrupt, faults.Rewrite:
		b.sealed = false
		d.stats.Altered++
		why := v.String()
		f.pool.setFault(b, why)
		if f.trace.Enabled() {
			// The fields are built only for a trace: a plan that
			// alters every frame allocates nothing per frame without one.
			f.traceFrame(d, b, "frame-alter", why, was.Fields(faultFields(v))...)
		}
		d.enqueue(b, h)
	default:
		panic(fmt.Sprintf("fabric: fault verdict with unknown action %d", v.Action))
	}
}

// arrive handles frame fl, which has crossed direction d.
func (f *Fabric) arrive(d *direction, fl inFlight) {
	sw := d.sw
	if sw == nil {
		b := f.pool.at(fl.id)
		f.traceFrame(d, b, "frame-rx", "")
		if b.sealed && d.srecv != nil {
			d.srecv.ReceiveSealed(f.sched.Now(), d.port, b.bytes())
		} else if r := d.recv; r != nil {
			r.Receive(f.sched.Now(), d.port, b.bytes())
		}
		f.release(b)
		return
	}
	// A switch forwards by what the frame's flight entry says, without
	// reading its buffer (cold in a large world: see frameBuf) when
	// nothing on the egress link needs more.
	if fl.dst == lookupMAC {
		b := f.pool.at(fl.id)
		if b.n < wire.EthernetLen {
			// Cut by a truncate rule: the bytes where its destination
			// was are the buffer's earlier contents (buffers are
			// reused), so routing by them would deliver a frame a real
			// switch discards as a runt.
			sw.runts++
			f.record(d, b, "frame-drop", sim.DropRunt, "dropped: switch "+sw.name+" got a runt of "+strconv.Itoa(int(b.n))+" bytes, shorter than an Ethernet header", 0)
			f.release(b)
			return
		}
		b.dst = f.dstIndex(wire.Ethernet(b.bytes()).Dst())
		fl.dst = b.dst
	}
	if fl.dst == floodMAC {
		f.flood(d, sw, f.pool.at(fl.id))
		return
	}
	out := sw.route(fl.dst)
	if out == nil {
		b := f.pool.at(fl.id)
		sw.unknown++
		f.record(d, b, "frame-drop", sim.DropNoRoute, "dropped: switch "+sw.name+" has no port for "+wire.Ethernet(b.bytes()).Dst().String(), 0)
		f.release(b)
		return
	}
	if o := out.out; !f.judges() && int(fl.n)-wire.EthernetLen <= o.cfg.MTU {
		o.enqueueID(fl.id, int(fl.n), fl.hinted())
		return
	}
	f.enter(out.out, f.pool.at(fl.id), false, fl.hinted())
}

// flood sends frame b, for a group MAC, out of every port of sw that
// floods (floodTree) but the one it came in by (in.to), in port order, as
// a switch without IGMP snooping floods multicast and broadcast: each
// port but the last gets a copy, the last the frame itself. A copy toward
// a node is that node's frame in the records. With no other such port
// (a switch of one host) the frame reaches no one, which is no loss: it
// is released without a record.
func (f *Fabric) flood(in *direction, sw *Switch, b *frameBuf) {
	var last *Port
	for _, q := range sw.ports {
		if !q.floods || q == in.to {
			continue
		}
		if last != nil {
			c := f.pool.clone(b)
			c.to = last.farNode()
			f.enter(last.out, c, false, Hint{})
		}
		last = q
	}
	if last == nil {
		f.release(b)
		return
	}
	b.to = last.farNode()
	f.enter(last.out, b, false, Hint{})
}

// delayHandler re-enters frames after a fault's delay.
type delayHandler struct {
	f       *Fabric
	pending []delayed
	free    []int
}

type delayed struct {
	d  *direction
	id int32
}

func (h *delayHandler) hold(d *direction, b *frameBuf, by sim.Duration) {
	var i int
	if n := len(h.free); n > 0 {
		i = h.free[n-1]
		h.free = h.free[:n-1]
		h.pending[i] = delayed{d, b.id}
	} else {
		i = len(h.pending)
		h.pending = append(h.pending, delayed{d, b.id})
	}
	h.f.sched.After(by, h, uint64(i))
}

// Fire queues a delayed frame; the plan has judged it already, but the
// link may have gone down (or the nodes been partitioned) meanwhile.
func (h *delayHandler) Fire(now sim.Time, arg uint64) {
	p := h.pending[arg]
	h.free = append(h.free, int(arg))
	h.f.requeue(p.d, h.f.pool.at(p.id))
}

// requeue enqueues a frame the plan held back (delay, reorder), unless its
// link is down or its nodes partitioned by now.
func (f *Fabric) requeue(d *direction, b *frameBuf) {
	now := f.sched.Now()
	if !f.inj.LinkUp(now, d.linkName) || f.inj.Partitioned(now, f.names[b.from], f.name(b.to)) {
		d.stats.FaultDrops++
		f.record(d, b, "frame-drop", sim.DropLinkDown, "dropped: held back by the fault plan, then its link went down", 0)
		f.release(b)
		return
	}
	d.enqueue(b, Hint{})
}

// changeHandler traces link state changes of the fault plan as they happen.
type changeHandler struct{ f *Fabric }

// Fire traces change number arg and tells the LinkHook.
func (h *changeHandler) Fire(now sim.Time, arg uint64) {
	h.f.linkChange(now, h.f.changes[arg])
}

// linkChange tells the LinkHook about c and traces it.
func (f *Fabric) linkChange(now sim.Time, c faults.LinkChange) {
	if !c.Partition {
		f.downNow[c.Link] = !c.Up
		if f.linkHook != nil {
			f.linkHook(now, c.Link, c.Up)
		}
	}
	if !f.trace.Enabled() {
		return
	}
	kind := sim.Kind("link-down")
	if c.Up {
		kind = "link-up"
	}
	fields := []sim.Field{{Key: "link", Value: c.Link}}
	if c.Rule > 0 {
		fields = append(fields, sim.Field{Key: "rule", Value: strconv.Itoa(c.Rule)})
	}
	f.trace.Add(sim.Event{Time: now, Kind: kind, Fields: append(fields, sim.Field{Key: "why", Value: c.Text})})
}

// Was is a RoCE frame's identity before a fault rule altered it in
// place, for the trace's frame-alter event (the fabric's, and rocesim
// switch's, which traces the real frames it forwards as the fabric
// does): a reader of the trace (the ladder) finds the frame that
// changed by it, even when the rule gave the frame another frame's key.
type Was struct {
	qpn uint32
	op  wire.Opcode
	psn wire.PSN
	ok  bool // the frame was RoCE v2
}

// WasOf takes the identity of the decoded frame p (nil: not RoCE); it is
// a copy, so it outlives a rule that rewrites the frame's bytes.
func WasOf(p *wire.Packet) Was {
	if p == nil {
		return Was{}
	}
	return Was{qpn: p.BTH.DestQP(), op: p.BTH.Opcode(), psn: p.BTH.PSN(), ok: true}
}

// Fields appends the identity to fs as a frame-alter event's was_qpn,
// was_op and was_psn (a frame that was not RoCE adds none).
func (w Was) Fields(fs []sim.Field) []sim.Field {
	if !w.ok {
		return fs
	}
	return append(fs, sim.Field{Key: "was_qpn", Value: strconv.FormatUint(uint64(w.qpn), 10)},
		sim.Field{Key: "was_op", Value: w.op.Info().Name}, sim.Field{Key: "was_psn", Value: w.psn.String()})
}

func faultFields(v faults.Verdict) []sim.Field {
	return []sim.Field{{Key: "rule", Value: strconv.Itoa(v.Rule)}}
}
