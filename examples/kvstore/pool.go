package kvstore

// The server's value store: one registered region (the pool) carved by a
// first-fit allocator, and an index from key to the extent holding its
// value.
//
// A GET's value goes out by RDMA WRITE straight from the pool (an SGE
// into the pool MR, no copy), and the device reads it when it builds the
// packets, and again on every retransmission, until the WRITE is
// acknowledged. So an extent replaced by a PUT is not reused while a
// WRITE still reads it: each entry counts the WRITEs in flight from it
// (pins), and a replaced entry is freed at its last unpin.

// extent is a range of the pool, [off, off+n).
type extent struct {
	off, n int
}

// entry is a stored value.
type entry struct {
	extent
	pins  int  // WRITEs posted from this extent and not yet completed
	stale bool // replaced by a newer PUT: free it at the last unpin
}

// pool is a first-fit allocator over a buffer of fixed size.
type pool struct {
	buf  []byte
	free []extent // sorted by offset, never adjacent (coalesced)
}

func newPool(size int) pool {
	p := pool{buf: make([]byte, size)}
	if size > 0 {
		p.free = []extent{{0, size}}
	}
	return p
}

// alloc returns the lowest free extent of n bytes; false if none is
// large enough. A zero-length value takes no space.
func (p *pool) alloc(n int) (extent, bool) {
	if n == 0 {
		return extent{}, true
	}
	for i, f := range p.free {
		if f.n < n {
			continue
		}
		if f.n == n {
			p.free = append(p.free[:i], p.free[i+1:]...)
		} else {
			p.free[i] = extent{f.off + n, f.n - n}
		}
		return extent{f.off, n}, true
	}
	return extent{}, false
}

// release returns e to the free list, merging it with its neighbours.
func (p *pool) release(e extent) {
	if e.n == 0 {
		return
	}
	i := 0
	for i < len(p.free) && p.free[i].off < e.off {
		i++
	}
	// Merge with the following extent, then with the preceding one.
	if i < len(p.free) && e.off+e.n == p.free[i].off {
		e.n += p.free[i].n
		p.free = append(p.free[:i], p.free[i+1:]...)
	}
	if i > 0 && p.free[i-1].off+p.free[i-1].n == e.off {
		p.free[i-1].n += e.n
		return
	}
	p.free = append(p.free, extent{})
	copy(p.free[i+1:], p.free[i:])
	p.free[i] = e
}

// bytes returns the pool's bytes of e.
func (p *pool) bytes(e extent) []byte { return p.buf[e.off : e.off+e.n] }
