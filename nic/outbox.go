package nic

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
// payload with the largest headers over IPv6.
const maxFrameLen = 14 + 40 + 8 + 12 + 28 + 4096 + 3 + 4 + 32

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

// Drain hands every built frame, in order, to send (which must copy what
// it keeps), then empties the outbox.
func (d *Device) Drain(send func(frame []byte, note string)) {
	o := &d.outbox
	for i := range o.frames {
		f := &o.frames[i]
		send(f.buf[:f.n], f.note)
		o.free = append(o.free, f.buf)
		f.buf = nil
	}
	o.frames = o.frames[:0]
}

// Pending returns how many frames wait to be drained.
func (d *Device) Pending() int { return len(d.outbox.frames) }
