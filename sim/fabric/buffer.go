package fabric

import (
	"math/bits"
	"strings"

	"github.com/rocesim/rocesim/sim"
)

// frameBuf is one frame owned by the fabric, from Send until it is
// delivered or dropped. Buffers live in a slab and are recycled, so the
// per-frame path allocates nothing once the slab has grown. Each buffer's
// storage is one of a few size classes, the smallest that holds the frame,
// so a burst of ACKs or of 1 KiB packets does not pin a jumbo frame's
// worth of memory apiece; four classes per doubling keep a frame's buffer
// within a quarter of its size (a 1,098-byte WRITE packet in 1,280 bytes,
// not 2,048: issue 20, frames held in buffers sized to the frame).
type frameBuf struct {
	id   int32
	data []byte // len is the buffer's size class
	n    int
	from string // sending node
	to   string // destination node, "" if unknown
	tx   int    // transmission number of its PSN (faults.Injector.CountTx), 0 if not RoCE
	note string // why the sender sent it
	// fault is what the fault plan did to it ("corrupted by rule 2: ...").
	fault string
	// copy is 0 for a frame a node sent, i for the i-th copy a dup rule
	// made of one.
	copy int
	// dropRule is, for a frame the fault plan dropped behind frames still
	// waiting for the wire, the rule that dropped it (the frame waits in
	// the queue as a placeholder, to be recorded when it reaches the
	// head: where it would have been on the wire); 0 otherwise.
	dropRule int
	// owner is the node that sent it, until the frame has left that
	// node's port (serialized or dropped); then the node's TxDone runs.
	owner *Node
}

func (b *frameBuf) bytes() []byte { return b.data[:b.n] }

// comment is the capture comment: the sender's note and any fault.
func (b *frameBuf) comment() string {
	switch {
	case b.note == "":
		return b.fault
	case b.fault == "":
		return b.note
	}
	return strings.Join([]string{b.note, b.fault}, "; ")
}

// Size classes: 128 bytes, then four per doubling (160, 192, 224, 256,
// 320, …) up to the first that holds MaxFrame.
const (
	minClassShift = 7  // 128 bytes: an ACK over IPv6 is 94
	numClasses    = 26 // ... 10240 bytes, the first class >= MaxFrame (TestSizeClasses)
)

// sizeClass returns the class of a frame of n bytes: the smallest whose
// size (classSize) holds it.
func sizeClass(n int) int {
	if n <= 1<<minClassShift {
		return 0
	}
	e := bits.Len(uint(n-1)) - 1 // 2^e <= n-1 < 2^(e+1)
	q := (n - 1 - 1<<e) >> (e - 2)
	return (e-minClassShift)*4 + q + 1
}

// classSize is the size of class c's buffers.
func classSize(c int) int {
	if c == 0 {
		return 1 << minClassShift
	}
	e, q := (c-1)/4+minClassShift, (c-1)%4
	return 1<<e + (q+1)<<(e-2)
}

type bufPool struct {
	slab []*frameBuf
	free [numClasses][]int32 // ids of free buffers, by size class
}

// get returns a free buffer that holds n bytes (its n is not set).
func (p *bufPool) get(n int) *frameBuf {
	c := sizeClass(n)
	if k := len(p.free[c]); k > 0 {
		id := p.free[c][k-1]
		p.free[c] = p.free[c][:k-1]
		b := p.slab[id]
		b.fault, b.copy, b.dropRule = "", 0, 0
		return b
	}
	b := &frameBuf{id: int32(len(p.slab)), data: make([]byte, classSize(c))}
	p.slab = append(p.slab, b)
	return b
}

func (p *bufPool) at(id int32) *frameBuf { return p.slab[id] }

func (p *bufPool) put(b *frameBuf) {
	b.left()
	b.note, b.fault = "", ""
	c := sizeClass(len(b.data))
	p.free[c] = append(p.free[c], b.id)
}

// left tells the sending node, once, that its frame has left its port.
func (b *frameBuf) left() {
	if n := b.owner; n != nil {
		b.owner = nil
		if n.txDone != nil {
			n.txDone(n.f.sched.Now())
		}
	}
}

// clone returns a new buffer holding a copy of b.
func (p *bufPool) clone(b *frameBuf) *frameBuf {
	c := p.get(b.n)
	c.n = copy(c.data, b.bytes())
	c.from, c.to, c.tx, c.note, c.fault, c.copy = b.from, b.to, b.tx, b.note, b.fault, b.copy
	c.owner = nil // a copy the fabric made was not sent by the node
	return c
}

// fifo is a queue (of buffer ids, or of frames in flight) that reuses
// its storage.
type fifo[T any] struct {
	buf        []T
	head, size int
}

func (q *fifo[T]) push(v T) {
	if q.size == len(q.buf) {
		n := make([]T, max(8, 2*len(q.buf)))
		for i := range q.size {
			n[i] = q.buf[(q.head+i)%len(q.buf)]
		}
		q.buf, q.head = n, 0
	}
	q.buf[(q.head+q.size)%len(q.buf)] = v
	q.size++
}

// peek returns the oldest entry without taking it.
func (q *fifo[T]) peek() (T, bool) {
	if q.size == 0 {
		var zero T
		return zero, false
	}
	return q.buf[q.head], true
}

func (q *fifo[T]) pop() (T, bool) {
	if q.size == 0 {
		var zero T
		return zero, false
	}
	v := q.buf[q.head]
	q.head = (q.head + 1) % len(q.buf)
	q.size--
	return v, true
}

// inFlight is a frame on the wire and its place in the event order at
// the far end (sim.Scheduler.Reserve), kept beside its id rather than in
// its buffer: the direction schedules the next arrival as the one before
// it lands, and its own small ring is in cache where the frame's buffer,
// among thousands in flight in a large world, is not.
type inFlight struct {
	id     int32
	arrive sim.Ticket
}
