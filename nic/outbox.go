package nic

import (
	"github.com/rocesim/rocesim/sim"
	"github.com/rocesim/rocesim/wire"
)

// outbox holds the frames the device has built and not yet handed to
// Drain. Buffers are recycled, so building a frame allocates nothing once
// the outbox has grown to the largest burst.
type outbox struct {
	frames []outFrame
	free   [][]byte
}

type outFrame struct {
	buf  []byte
	n    int
	note string
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

// push queues buf[:n] for sending with the note given.
func (o *outbox) push(buf []byte, n int, note string) {
	o.frames = append(o.frames, outFrame{buf, n, note})
}

// TxDone tells the device that the oldest frame it handed to the port has
// left it (serialized or dropped there). The port keeps frames in order,
// so the device knows whose it was.
func (d *Device) TxDone(now sim.Time) {
	q := &d.inflight
	if q.empty() {
		return
	}
	qp := *q.at(0)
	q.shift()
	if qp == nil {
		return
	}
	qp.skbOut--
	if qp.resp.reply.active && qp.skbOut <= inflightLow && !qp.dead {
		d.readReplyRun(now, qp)
	}
	if qp.blocked && qp.skbOut <= inflightLow {
		qp.blocked = false
		if !qp.dead {
			d.requesterRun(now, qp)
		}
	}
}

// Drain hands every built frame, in order, to send (which must copy what
// it keeps), then empties the outbox.
//
// send may call back into the device (a port reporting TxDone at once
// can let a blocked requester build more frames): frames built meanwhile
// are handed out by this same Drain, in order.
func (d *Device) Drain(send func(frame []byte, note string)) {
	o := &d.outbox
	for i := 0; i < len(o.frames); i++ {
		f := o.frames[i]
		o.frames[i].buf = nil
		send(f.buf[:f.n], f.note)
		o.free = append(o.free, f.buf)
	}
	o.frames = o.frames[:0]
}

// Pending returns how many frames wait to be drained.
func (d *Device) Pending() int { return len(d.outbox.frames) }
