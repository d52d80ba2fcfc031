package nic

import (
	"github.com/rocesim/rocesim/sim"
	"github.com/rocesim/rocesim/wire"
)

// The device's output, after etcd's raft.RawNode: every input (a verb, a
// frame received, Advance, TxDone) only changes state and queues what it
// caused; Ready hands all of it out as one value, and the driver applies
// it with no call back into the device:
//
//	for {
//		rd := dev.Ready()
//		for _, f := range rd.Frames { port.Send(f.Bytes, f.Note) } // copies both
//		events = append(events, rd.Events...)
//		for _, ch := range rd.Notified { wake(ch) }
//		timer.Reset(rd.Deadline)
//		if nothing new came in while applying { break }
//		// else: feed it (TxDone for frames the port finished, Receive, …) and loop
//	}
//
// A port that reports a frame gone while the driver is still sending the
// batch (a frame dropped at once) is not passed on to the device there:
// the driver counts it and calls TxDone after the batch, then asks Ready
// again. The frames that TxDone lets a blocked QP build then follow the
// batch on the wire, as they did when the port's report re-entered the
// device in the middle of a drain.

// Ready is what the device's inputs caused since the last call to Ready:
// frames for the wire, asynchronous events, the CQs that took completions
// and the completion channels that took events, and when the device next
// needs Advance. It belongs to the device and stays valid until the next
// Ready; a driver copies what it keeps.
type Ready struct {
	// Frames to put on the wire, oldest first. The port reports each one's
	// departure with TxDone, in the same order.
	Frames []OutFrame
	// Events are the asynchronous events raised, oldest first (what
	// ibv_get_async_event reads).
	Events []AsyncEvent
	// CQs took at least one completion (or refused one: overflow), each
	// listed once, in the order of their first completion; a driver wakes
	// whoever waits on them.
	CQs []*CQ
	// Notified are the completion channels that took at least one event
	// (an armed CQ fired), each listed once: a real channel's file
	// descriptor became readable.
	Notified []*CompChannel
	// MADs are the management datagrams QP1 received (gsi.go), in
	// arrival order, for the connection manager above the device.
	MADs []MADIn
	// Deadline is when the device next needs Advance: the earliest ACK
	// timeout or RNR wait of any QP, or sim.Never.
	Deadline sim.Time
}

// OutFrame is one frame for the wire and the note saying why it exists
// (empty unless Config.Annotate, or a trace for a recovery's frames).
// Both belong to the batch, as its buffers do: a driver copies them.
type OutFrame struct {
	Bytes []byte
	Note  []byte
	// Hint is the sending QP's hint for its destination (Config.PeerHint),
	// zero for frames of other QPs.
	Hint Hint
	// Round is, for a request an RC QP sends again (go-back-N), the
	// number of the QP's retransmission round it goes in (from 1; two
	// rounds in a row differ), and ConnectedAt when the QP last went from
	// RTR to RTS; both 0 for a request's first transmission and for
	// every other frame. A driver that watches for QPs resending round
	// after round (verbs' stall watch) learns from them which requests
	// are resent, without keeping the PSNs each QP has sent.
	Round       uint32
	ConnectedAt sim.Time
	// RNRNAK marks an RNR NAK (an ACKNOWLEDGE with an RNR NAK
	// syndrome), which the same watch counts.
	RNRNAK bool
}

// Empty reports whether the batch has nothing to apply but its deadline.
func (r *Ready) Empty() bool {
	return len(r.Frames) == 0 && len(r.Events) == 0 && len(r.CQs) == 0 && len(r.Notified) == 0 && len(r.MADs) == 0
}

// outbox gathers what the device's inputs cause until Ready hands it out.
// Each list is double-buffered: Ready swaps the gathered list with the one
// it handed out last time (now applied), so once both have grown to the
// largest batch, nothing is allocated; frame buffers are recycled the
// same way.
type outbox struct {
	// gathered is set when a list below took something, handed when the
	// last batch held something: the pump of a device with nothing to say
	// (most of them, on a busy fabric) tests two flags, on the line of
	// the frames it reads next.
	gathered, handed bool
	frames           []OutFrame
	free             [][]byte
	events           []AsyncEvent
	cqs              []*CQ
	notified         []*CompChannel
	mads             []MADIn
	// notes holds the bytes of the frames' notes, one after another;
	// readyNotes is the storage of the batch handed out last. Swapped as
	// the lists are, so notes cost no allocation once both have grown.
	notes, readyNotes []byte
	ready             Ready // the batch handed out last
}

// maxFrameLen is the largest frame the device builds: 4096 bytes of
// payload with the largest headers over IPv6, and 32 bytes of headroom
// the buffers have always had (no header needs them).
const maxFrameLen = wire.EthernetLen + wire.IPv6Len + wire.UDPLen + wire.BTHLen + wire.MaxExtHdrLen +
	4096 + wire.MaxPadLen + wire.ICRCLen + 32

// buffer returns a buffer to build the next frame in.
func (o *outbox) buffer() []byte {
	if n := len(o.free); n > 0 {
		b := o.free[n-1]
		o.free = o.free[:n-1]
		return b
	}
	return make([]byte, maxFrameLen)
}

// push queues buf[:n] for sending with a copy of the note given and the
// hint.
func (o *outbox) push(buf []byte, n int, note string, hint Hint, m frameMark) {
	f := OutFrame{Bytes: buf[:n], Hint: hint, Round: m.round, ConnectedAt: m.connectedAt, RNRNAK: m.rnrNAK}
	if note != "" {
		// A frame noted earlier in the batch keeps the old storage if
		// this append moves the notes: its bytes do not change.
		k := len(o.notes)
		o.notes = append(o.notes, note...)
		f.Note = o.notes[k:len(o.notes):len(o.notes)]
	}
	o.frames = append(o.frames, f)
	o.gathered = true
}

// tookCompletion lists cq in the next batch (once).
func (o *outbox) tookCompletion(cq *CQ) {
	if !cq.inReady {
		cq.inReady = true
		o.cqs = append(o.cqs, cq)
		o.gathered = true
	}
}

// tookEvent lists ch in the next batch (once).
func (o *outbox) tookEvent(ch *CompChannel) {
	if !ch.inReady {
		ch.inReady = true
		o.notified = append(o.notified, ch)
		o.gathered = true
	}
}

// forget takes a destroyed CQ out of the batch being gathered, so a
// driver is never handed an object the user has already destroyed.
func (o *outbox) forget(cq *CQ) {
	if cq.inReady {
		cq.inReady = false
		o.cqs = deleteFirst(o.cqs, cq)
		o.regather()
	}
}

// forgetChannel does for a destroyed channel what forget does for a CQ.
func (o *outbox) forgetChannel(ch *CompChannel) {
	if ch.inReady {
		ch.inReady = false
		o.notified = deleteFirst(o.notified, ch)
		o.regather()
	}
}

// regather recomputes gathered after something was taken out of a list.
func (o *outbox) regather() {
	o.gathered = len(o.frames)+len(o.events)+len(o.cqs)+len(o.notified)+len(o.mads) > 0
}

// deleteFirst removes the first x from s, keeping the order, and clears
// the slot it frees.
func deleteFirst[T comparable](s []T, x T) []T {
	for i, y := range s {
		if y == x {
			copy(s[i:], s[i+1:])
			var zero T
			s[len(s)-1] = zero
			return s[:len(s)-1]
		}
	}
	return s
}

// HasReady reports whether Ready has anything to hand out but a deadline.
func (d *Device) HasReady() bool { return d.outbox.gathered }

// Ready hands out everything the device's inputs caused since the last
// call (see the top of this file for the driver's loop) and takes back
// the previous batch's buffers: its frames must have been sent (copied)
// by now. The batch is the device's, valid until the next Ready. It
// allocates nothing once the device has seen its largest batch.
func (d *Device) Ready() *Ready {
	o := &d.outbox
	r := &o.ready
	if o.handed {
		o.recycle()
		o.handed = false
	}
	if o.gathered {
		o.gathered, o.handed = false, true
		o.frames, r.Frames = r.Frames, o.frames
		o.events, r.Events = r.Events, o.events
		o.cqs, r.CQs = r.CQs, o.cqs
		o.notified, r.Notified = r.Notified, o.notified
		o.mads, r.MADs = r.MADs, o.mads
		o.notes, o.readyNotes = o.readyNotes, o.notes
		for _, cq := range r.CQs {
			cq.inReady = false
		}
		for _, ch := range r.Notified {
			ch.inReady = false
		}
	}
	r.Deadline = d.NextDeadline()
	return r
}

// recycle takes back the batch handed out last: frame buffers go to the
// free list, and each list is emptied (its slots cleared, so the device
// keeps no pointer to a destroyed object) to gather the batch after next.
func (o *outbox) recycle() {
	r := &o.ready
	for i := range r.Frames {
		f := &r.Frames[i]
		o.free = append(o.free, f.Bytes[:cap(f.Bytes)])
		*f = OutFrame{}
	}
	clear(r.Events)
	clear(r.CQs)
	clear(r.Notified)
	o.readyNotes = o.readyNotes[:0]
	r.Frames, r.Events, r.CQs, r.Notified, r.MADs = r.Frames[:0], r.Events[:0], r.CQs[:0], r.Notified[:0], r.MADs[:0]
}

// mad queues room for one MAD received and returns it to be filled.
func (o *outbox) mad() *MADIn {
	o.mads = append(o.mads, MADIn{})
	o.gathered = true
	return &o.mads[len(o.mads)-1]
}

// TxDone tells the device that the oldest frame it handed out has left the
// port (serialized, or dropped there). The port keeps frames in order, so
// the device knows whose it was. A driver calls it between batches, never
// while it is still applying one (see Ready).
func (d *Device) TxDone(now sim.Time) {
	q := &d.inflight
	if q.empty() {
		return
	}
	i := *q.at(0)
	q.shift()
	s := &d.tx[i]
	s.out--
	if s.dead {
		if s.out == 0 {
			*s = txSlot{}
			d.txQP[i] = nil
			d.txFree = append(d.txFree, i)
		}
		return
	}
	if s.wake && s.out <= inflightLow {
		d.txWake(now, d.txQP[i])
	}
}

// TxSlack returns how many of the next TxDones would change nothing but
// counts (at most limit are looked at): none of them brings a QP that
// waits for its frames in the port (a blocked requester, a READ reply
// being built) down to inflightLow, which is all a TxDone can cause. A
// driver whose port is far away may hold that many back and apply them
// later, in order and before any other input: the device ends as it
// would have, and nothing it sends or completes moves. procfabric's
// daemon wakes a process only for the TxDone after its slack (a
// stream's sender once per inflightHigh-inflightLow frames, not once a
// frame). It walks the frames in the port from the oldest, each
// counted off its QP's slot and counted back after.
func (d *Device) TxSlack(limit int) int {
	q := &d.inflight
	n := min(q.size, limit)
	k := 0
	for k < n {
		s := &d.tx[*q.at(k)]
		s.out--
		k++
		if s.wake && !s.dead && s.out <= inflightLow {
			k-- // this one wakes the QP: the slack ends before it
			d.tx[*q.at(k)].out++
			break
		}
	}
	for i := range k {
		d.tx[*q.at(i)].out++
	}
	return k
}

// txWake runs what waited for qp's frames in the port to fall to
// inflightLow: the READ reply being built, then the blocked requester.
func (d *Device) txWake(now sim.Time, qp *QP) {
	if qp.resp.replying() {
		d.readReplyRun(now, qp)
	}
	if qp.blocked && d.skbOut(qp) <= inflightLow {
		qp.blocked = false
		d.requesterRun(now, qp)
	}
	d.tx[qp.tx].wake = qp.blocked || qp.resp.replying()
}

// txSlot is a QP's count of frames handed to the port and not yet gone
// from it (rxe's skb_out), kept in a dense table of the device rather
// than in the QP: TxDone runs once per frame, a long time after the frame
// was built when the port is busy, and at scale the QP is cold by then;
// the table far less often is (in the alltoall at N = 256 TxDone's cache
// misses to memory fell by three quarters). The slot holds only what
// TxDone reads for every frame, 8 bytes, so that the slots of the QPs a
// host sends on one after another share cache lines (the alltoall posts
// to its QPs in creation order): the QP (d.txQP) is looked at only when
// wake says something waits for the count to fall, and the frames ever
// built are counted in the QP (txBuilt), which is at hand when a frame is
// built. At 24 bytes a slot, with the QP and that count in it, TxDone's
// first-level cache misses were one a frame in the alltoall at N = 128.
type txSlot struct {
	out  int32 // the QP's skb_out
	wake bool  // the requester is blocked or a READ reply is being built
	dead bool  // the QP is destroyed; the slot is free once out is 0
}

// txSlotFor gives qp a slot in d.tx (a free one first).
func (d *Device) txSlotFor(qp *QP) int32 {
	if n := len(d.txFree); n > 0 {
		i := d.txFree[n-1]
		d.txFree = d.txFree[:n-1]
		d.tx[i], d.txQP[i] = txSlot{}, qp
		return i
	}
	d.tx, d.txQP = append(d.tx, txSlot{}), append(d.txQP, qp)
	return int32(len(d.tx) - 1)
}

// txRelease gives back a destroyed QP's slot, or marks it dead until
// its last frame has left the port (TxDone frees it then).
func (d *Device) txRelease(qp *QP) {
	s := &d.tx[qp.tx]
	if s.out > 0 {
		s.dead = true
		return
	}
	*s = txSlot{}
	d.txQP[qp.tx] = nil
	d.txFree = append(d.txFree, qp.tx)
}

// skbOut returns how many of qp's frames are in the port.
func (d *Device) skbOut(qp *QP) int { return int(d.tx[qp.tx].out) }

// block stops qp's requester until TxDone finds its frames in the port
// down to inflightLow.
func (d *Device) block(qp *QP) {
	qp.blocked = true
	d.tx[qp.tx].wake = true
}
