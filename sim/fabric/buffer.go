package fabric

import "strings"

// frameBuf is one frame owned by the fabric, from Send until it is
// delivered or dropped. Buffers live in a slab and are recycled, so the
// per-frame path allocates nothing once the slab has grown.
type frameBuf struct {
	id   int32
	data [MaxFrame]byte
	n    int
	from string // sending node
	to   string // destination node, "" if unknown
	tx   int    // transmission number of its PSN (faults.Injector.CountTx), 0 if not RoCE
	note string // why the sender sent it
	// fault is what the fault plan did to it ("corrupted by rule 2: ...").
	fault string
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

type bufPool struct {
	slab []*frameBuf
	free []int32
}

func (p *bufPool) get() *frameBuf {
	if n := len(p.free); n > 0 {
		id := p.free[n-1]
		p.free = p.free[:n-1]
		b := p.slab[id]
		b.fault = ""
		return b
	}
	b := &frameBuf{id: int32(len(p.slab))}
	p.slab = append(p.slab, b)
	return b
}

func (p *bufPool) at(id int32) *frameBuf { return p.slab[id] }

func (p *bufPool) put(b *frameBuf) {
	b.left()
	b.note, b.fault = "", ""
	p.free = append(p.free, b.id)
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
	c := p.get()
	c.n = copy(c.data[:], b.bytes())
	c.from, c.to, c.tx, c.note, c.fault = b.from, b.to, b.tx, b.note, b.fault
	c.owner = nil // a copy the fabric made was not sent by the node
	return c
}

// fifo is a queue of buffer ids that reuses its storage.
type fifo struct {
	buf        []int32
	head, size int
}

func (q *fifo) push(id int32) {
	if q.size == len(q.buf) {
		n := make([]int32, max(8, 2*len(q.buf)))
		for i := range q.size {
			n[i] = q.buf[(q.head+i)%len(q.buf)]
		}
		q.buf, q.head = n, 0
	}
	q.buf[(q.head+q.size)%len(q.buf)] = id
	q.size++
}

func (q *fifo) pop() (int32, bool) {
	if q.size == 0 {
		return 0, false
	}
	id := q.buf[q.head]
	q.head = (q.head + 1) % len(q.buf)
	q.size--
	return id, true
}
