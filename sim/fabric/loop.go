package fabric

import "github.com/rocesim/rocesim/sim"

// loopHandler brings back the frames nodes send to themselves over a
// direct link (Node.Send), one event per frame at the instant it was
// sent, in the order sent: rxe hands a packet for a local address to its
// own receive path (rxe_loopback) instead of the network stack, so two
// QPs of one device talk even when no switch could turn the frame round.
//
// Such a frame is in no link's queue or statistics, is not judged by
// the fault plan and is not captured: on a real rxe port it is not on
// the wire either. The observers get it (a frame log sees every frame a
// node sends), on a record marked Looped whose Dir names the node to
// itself, and the trace has it as a frame-loop event at the node.
type loopHandler struct {
	f       *Fabric
	pending fifo[looped]
	// dirs[i] is node i's records' Dir ("a->a"), made at its first loop.
	dirs []string
}

// looped is a frame waiting to come back: out is the direction it would
// have left by.
type looped struct {
	out *direction
	id  int32
}

// loop takes frame b, sent by out's node to itself.
func (h *loopHandler) loop(out *direction, b *frameBuf) {
	h.pending.push(looped{out: out, id: b.id})
	h.f.sched.Schedule(h.f.sched.Now(), h, 0)
}

// Fire gives the oldest looped frame back to its node: the port is done
// with it (TxDone), then the node's receiver gets it.
func (h *loopHandler) Fire(now sim.Time, _ uint64) {
	l, ok := h.pending.pop()
	if !ok {
		return
	}
	f := h.f
	b := f.pool.at(l.id)
	b.left(f)
	f.observeFrame(l.out, b, f.pool.comment(b), false, true)
	if f.trace.Enabled() {
		f.traceFrame(l.out, b, "frame-loop", "looped back in "+l.out.from.owner+" (rxe_loopback): not on the link")
	}
	// The direction into the node's port, from the far end of its link.
	in := l.out.to.out
	if b.sealed && in.srecv != nil {
		in.srecv.ReceiveSealed(now, in.port, b.bytes())
	} else if in.recv != nil {
		in.recv.Receive(now, in.port, b.bytes())
	}
	f.release(b)
}

// dir returns the Dir of the records of frames out's node loops.
func (h *loopHandler) dir(out *direction) string {
	i := int(out.node)
	for i >= len(h.dirs) {
		h.dirs = append(h.dirs, "")
	}
	if h.dirs[i] == "" {
		h.dirs[i] = out.from.owner + "->" + out.from.owner
	}
	return h.dirs[i]
}
