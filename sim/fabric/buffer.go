package fabric

import (
	"math/bits"
	"unsafe"

	"github.com/rocesim/rocesim/internal/ntcopy"
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
//
// The struct is what every hop reads (transmit, a switch's forwarding,
// the Observe record), held by value in the slab's chunks and kept to 64
// bytes, one cache line: in a large world a frame waits behind tens of
// thousands of others between two hops, so each hop finds its buffer
// cold, and what it reads there costs a miss per line (issue 20: the
// N=256 alltoall has 65,536 frames in the fabric at once). Nodes and
// destinations are indices (Fabric.names, Fabric.macs), not strings; the
// rare texts (the sender's note, what a fault did) live beside the slab
// (frameText), read only when hasText says there are some.
type frameBuf struct {
	data []byte // len is the buffer's size class
	id   int32
	n    int32
	from int32 // sending node (index in Fabric.names)
	to   int32 // destination node, noNode if unknown
	// dst is the index in Fabric.macs of the frame's destination MAC,
	// what a switch forwards by, found once at Send: noMAC if no node
	// owns it, lookupMAC if the frame's bytes must be read again (a fault
	// altered them).
	dst int32
	tx  int32 // transmission number of its PSN (faults.Injector.CountTx), 0 if not RoCE
	// copy is 0 for a frame a node sent, i for the i-th copy a dup rule
	// made of one.
	copy int32
	// dropRule is, for a frame the fault plan dropped behind frames still
	// waiting for the wire, the rule that dropped it (the frame waits in
	// the queue as a placeholder, to be recorded when it reaches the
	// head: where it would have been on the wire); 0 otherwise.
	dropRule int32
	// owner is the node that sent it (index in Fabric.nodes), until the
	// frame has left that node's port (serialized or dropped); then the
	// node's TxDone runs and owner is noNode.
	owner int32
	// hasText is set while the frame's frameText holds a note or a fault.
	hasText bool
	// sealed: the sender vouched for the frame's ICRC (SendSealed) and
	// nothing has changed its bytes since; the receiver is told so.
	sealed bool
	// lent: the frame was handed over with its buffer (DivertLent),
	// which is out of every queue until Fabric.Return.
	lent bool
	// borrowed: data is another fabric's buffer, lent with the frame
	// and kept by Link.DeliverLent; released, it is repaid (bufChunk.loans)
	// rather than freed here.
	borrowed bool
}

// frameText is a frame's texts, apart from its frameBuf: most frames
// have none. The note's storage is kept when the frame is released, so a
// fabric whose senders note every frame (a capture's comments) allocates
// nothing per frame once each slot has held its longest note.
type frameText struct {
	note []byte // why the sender sent it
	// fault is what the fault plan did to it ("corrupted by rule 2: ...").
	fault string
}

const (
	noNode    = -1 // frameBuf.to, .owner: none
	noMAC     = -1 // frameBuf.dst: no node owns the destination MAC
	lookupMAC = -2 // frameBuf.dst: read the destination MAC from the frame
	floodMAC  = -3 // frameBuf.dst: a group (multicast, broadcast) MAC, flooded by a switch
)

func (b *frameBuf) bytes() []byte { return b.data[:b.n] }

// addr is the address of the frame's bytes, for a prefetch hint.
func (b *frameBuf) addr() uintptr { return uintptr(unsafe.Pointer(unsafe.SliceData(b.data))) }

// comment is the capture comment of frame b: the sender's note and any
// fault, joined by "; ". It shares the bytes of the frame's note or of
// the pool's scratch buffer, so it is valid only until the next call or
// until the frame is released: it goes straight to the taps and the
// observers, which copy what they keep (Tap, FrameRecord).
func (p *bufPool) comment(b *frameBuf) string {
	if !b.hasText {
		return ""
	}
	t := p.text(b.id)
	switch {
	case len(t.note) == 0:
		return t.fault
	case t.fault == "":
		return unsafe.String(unsafe.SliceData(t.note), len(t.note))
	}
	p.scratch = append(append(append(p.scratch[:0], t.note...), "; "...), t.fault...)
	return unsafe.String(unsafe.SliceData(p.scratch), len(p.scratch))
}

// note returns a copy of the sender's note of frame b, for the trace.
func (p *bufPool) note(b *frameBuf) string {
	if !b.hasText {
		return ""
	}
	return string(p.text(b.id).note)
}

// fault returns what the fault plan did to frame b.
func (p *bufPool) fault(b *frameBuf) string {
	if !b.hasText {
		return ""
	}
	return p.text(b.id).fault
}

// setNote sets the sender's note of frame b to a copy of note.
func (p *bufPool) setNote(b *frameBuf, note []byte) {
	if len(note) != 0 || b.hasText {
		t := p.text(b.id)
		t.note = append(t.note[:0], note...)
		b.hasText = true
	}
}

// setFault sets what the fault plan did to frame b.
func (p *bufPool) setFault(b *frameBuf, fault string) {
	if fault != "" || b.hasText {
		p.text(b.id).fault = fault
		b.hasText = true
	}
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

// The slab grows by chunks that never move, so a *frameBuf stays valid
// while other buffers are taken (a NIC's Receive sends frames, and a dup
// rule clones, with a buffer in hand). A chunk is over 32 KiB, which the
// Go runtime allocates as a large object: from the start of its pages,
// with no header before it, so that each 64-byte record is one cache
// line. A smaller chunk (28 KiB at 256 records) is a small object with
// pointers, which the runtime puts 8 bytes past a line's start: every
// record then straddled two lines, and a frame gone cold in a large
// world cost two misses at each visit, not one (TestRecordsFillLines).
const (
	chunkShift = 9
	chunkSize  = 1 << chunkShift
)

type bufChunk struct {
	bufs  [chunkSize]frameBuf
	texts [chunkSize]frameText
	loans [chunkSize]borrowing // of the borrowed buffers
}

// borrowing is whose buffer a borrowed frame is in: the loan its lender
// made (RemoteFrame.Loan), and the driver's name for the lender
// (Link.DeliverLent).
type borrowing struct {
	lender int32
	loan   Loan
}

type bufPool struct {
	chunks []*bufChunk
	n      int32               // buffers made
	bytes  int                 // the storage of the buffers made
	free   [numClasses][]int32 // ids of free buffers, by size class
	// bare are the ids of free records without storage of their own,
	// which borrowed frames take (getBorrowed).
	bare []int32
	// scratch holds the comment of a frame with both a note and a fault
	// (comment), kept for its capacity.
	scratch []byte
}

// get returns a free buffer that holds n bytes (its n is not set), with
// no texts, copy number or drop rule.
func (p *bufPool) get(n int) *frameBuf {
	c := sizeClass(n)
	if k := len(p.free[c]); k > 0 {
		id := p.free[c][k-1]
		p.free[c] = p.free[c][:k-1]
		b := p.at(id)
		b.copy, b.dropRule, b.sealed = 0, 0, false
		return b
	}
	b := p.record()
	p.bytes += classSize(c)
	b.data = make([]byte, classSize(c))
	return b
}

// record returns a new record, without storage.
func (p *bufPool) record() *frameBuf {
	id := p.n
	if int(id)>>chunkShift == len(p.chunks) {
		p.chunks = append(p.chunks, new(bufChunk))
	}
	p.n++
	b := p.at(id)
	*b = frameBuf{id: id, owner: noNode}
	return b
}

// getBorrowed returns a record for a frame whose bytes stay in data, the
// buffer lender lent with it (loan), with no texts, copy number or drop
// rule: the frame's bytes are not copied, and when the fabric releases
// the frame it repays the loan instead of freeing the storage.
func (p *bufPool) getBorrowed(data []byte, lender int32, loan Loan) *frameBuf {
	var b *frameBuf
	if k := len(p.bare); k > 0 {
		b = p.at(p.bare[k-1])
		p.bare = p.bare[:k-1]
		b.copy, b.dropRule, b.sealed = 0, 0, false
	} else {
		b = p.record()
	}
	b.data, b.n, b.borrowed = data, int32(len(data)), true
	p.chunks[b.id>>chunkShift].loans[b.id&(chunkSize-1)] = borrowing{lender, loan}
	return b
}

// streamBytes is the storage of a pool's buffers from which frames are
// copied into them with non-temporal stores (fill): past the caches'
// reach a frame waits behind others until it is cold anyway, and an
// ordinary copy would first read the buffer's cold lines, then evict
// what the next events need (the alltoall at N = 256, 84 MB of frames
// in flight: 12–20% less time in runs taken in turns). Below it a frame
// is read soon, from the cache (a 2-node stream's 300 KB: non-temporal
// stores cost it 80%).
const streamBytes = 8 << 20

// fill copies frame into b's storage and returns its length, past the
// caches once the pool's buffers outgrow them (streamBytes). Those
// stores are not fenced (internal/ntcopy.Copy): the fabric reads the
// frame back on its own goroutine, and a cluster's part that reads a
// lent frame does so after the step's synchronization (and verbs.World
// fences at the end of every Run, RunTo, RunFor and RunUntil, and of
// each step of a cluster's part).
func (p *bufPool) fill(b *frameBuf, frame []byte) int32 {
	if p.bytes >= streamBytes {
		return int32(ntcopy.Copy(b.data, frame))
	}
	return int32(copy(b.data, frame))
}

func (p *bufPool) at(id int32) *frameBuf { return &p.chunks[id>>chunkShift].bufs[id&(chunkSize-1)] }

// addrOf is the address of buffer id's record, for a prefetch hint.
func (p *bufPool) addrOf(id int32) uintptr { return uintptr(unsafe.Pointer(p.at(id))) }

func (p *bufPool) text(id int32) *frameText {
	return &p.chunks[id>>chunkShift].texts[id&(chunkSize-1)]
}

// release tells the sender its frame has left, if it had not been told,
// and frees the frame's buffer.
func (f *Fabric) release(b *frameBuf) {
	if b.owner != noNode {
		b.left(f)
	}
	p := &f.pool
	if b.hasText {
		t := p.text(b.id)
		t.note, t.fault = t.note[:0], ""
		b.hasText = false
	}
	if b.borrowed {
		// Another fabric's buffer: its lender takes it back.
		l := p.chunks[b.id>>chunkShift].loans[b.id&(chunkSize-1)]
		b.data, b.borrowed = nil, false
		p.bare = append(p.bare, b.id)
		f.repay(l.lender, l.loan)
		return
	}
	c := sizeClass(len(b.data))
	p.free[c] = append(p.free[c], b.id)
}

// left tells the sending node, once, that its frame has left its port.
func (b *frameBuf) left(f *Fabric) {
	if o := b.owner; o != noNode {
		b.owner = noNode
		if fn := f.txDone[o]; fn != nil {
			fn(f.sched.Now())
		}
	}
}

// clone returns a new buffer holding a copy of b.
func (p *bufPool) clone(b *frameBuf) *frameBuf {
	c := p.get(int(b.n))
	c.n = int32(copy(c.data, b.bytes()))
	c.from, c.to, c.dst, c.tx, c.copy = b.from, b.to, b.dst, b.tx, b.copy
	c.owner = noNode // a copy the fabric made was not sent by the node
	c.sealed = b.sealed
	if b.hasText {
		t, u := p.text(c.id), p.text(b.id)
		t.note, t.fault = append(t.note[:0], u.note...), u.fault
		c.hasText = true
	}
	return c
}

// fifo is a queue (of buffer ids, or of frames in flight) that reuses
// its storage. It keeps a copy of its oldest entry beside its header
// (first), so that peek reads no storage: a link direction's prefetch
// hint peeks at its next frame, and in a large world the direction's
// storage is one more cold line on that hint's path, behind the
// direction's own (issue 20).
type fifo[T any] struct {
	buf        []T // its length a power of two, so that a mask wraps an index
	head, size int
	first      T // buf[head] while size > 0
}

func (q *fifo[T]) push(v T) {
	if q.size == len(q.buf) {
		n := make([]T, max(8, 2*len(q.buf)))
		for i := range q.size {
			n[i] = q.buf[(q.head+i)&(len(q.buf)-1)]
		}
		q.buf, q.head = n, 0
	}
	q.buf[(q.head+q.size)&(len(q.buf)-1)] = v
	if q.size == 0 {
		q.first = v
	}
	q.size++
}

// peek returns the oldest entry without taking it.
func (q *fifo[T]) peek() (T, bool) {
	if q.size == 0 {
		var zero T
		return zero, false
	}
	return q.first, true
}

// pop takes the oldest entry.
func (q *fifo[T]) pop() (T, bool) {
	if q.size == 0 {
		var zero T
		return zero, false
	}
	v := q.first
	q.head = (q.head + 1) & (len(q.buf) - 1)
	q.size--
	if q.size > 0 {
		q.first = q.buf[q.head]
	}
	return v, true
}

// inFlight is a frame on the wire and its place in the event order at
// the far end (sim.Scheduler.Reserve), kept beside its id rather than in
// its buffer: the direction schedules the next arrival as the one before
// it lands, and its own small ring is in cache where the frame's buffer,
// among thousands in flight in a large world, is not. For the same
// reason it carries what a switch forwards the frame by (its length and
// frameBuf.dst), so a switch queues it without reading its buffer, and
// where its bytes are, so that the arrival's hint (direction.Prefetch)
// asks for its headers without reading the buffer either.
type inFlight struct {
	id, n  int32
	dst    int32
	hlen   uint32 // hint.Len, in what would be padding
	arrive sim.Ticket
	// data is the address of the frame's bytes (frameBuf.addr), for the
	// hint alone: an address, not a pointer, keeps the ring free of
	// pointers for the collector to scan and write barriers to guard
	// (the buffer's storage lives as long as the pool).
	data uintptr
	hint uintptr // hint.Addr: a node's end asks for it too (see Hint)
}

// Hint names memory a frame's receiver will read first for it (Addr,
// Len bytes): a NIC's sender knows the receiving QP, found once when it
// was connected (nic.Device.QPHint), which the receiving NIC finds only
// through the frame's headers and its own tables, each a cache miss in a
// large world. The fabric asks the CPU for it while the event before the
// frame's arrival runs (Scheduler.SetPrefetch), with the frame's
// headers. A hint is only that: one that is stale or wrong, or zero,
// changes nothing but speed, as prefetching never faults, and the
// fabric never reads through it. It follows a frame across a switch and
// between the parts of a cluster (RemoteFrame.Hint); a frame the fault
// plan delays or holds back goes on without it, as do the copies a dup
// rule makes (the original keeps it). The fabric asks for at most
// maxHintLen bytes of a hint, whatever its Len says.
type Hint struct {
	Addr uintptr
	Len  uint32
}

// hinted is the hint of the frame in flight.
func (fl inFlight) hinted() Hint { return Hint{Addr: fl.hint, Len: fl.hlen} }

// maxHintLen is the most of a hint the fabric asks the CPU for: a QP is
// 616 bytes, and a hint that names more (a wrong one, from a program's
// SendHinted) must not cost a prefetch per line of it at every arrival.
const maxHintLen = 1024

// queued is a frame waiting in an egress queue, with its hint (Addr,
// Len), in 16 bytes.
type queued struct {
	id   int32
	hlen uint32
	hint uintptr
}

// hinted is the hint of the queued frame.
func (q queued) hinted() Hint { return Hint{Addr: q.hint, Len: q.hlen} }
