package faults

import (
	"math"

	"github.com/rocesim/rocesim/wire"
)

// Transmission counting (CountTx), for the tx= key:
//
//  1. A flow is (sender, addressee, destination QPN, direction): requests
//     (SEND, WRITE, READ request, atomics), responses (ACK/NAK, READ
//     responses, atomic ACK) and CNPs are counted apart, because a READ
//     response reuses the PSN of its request.
//  2. Each flow keeps one counter per PSN in a window that slides forward
//     with the newest PSN seen; it remembers the last txWindowSpan PSNs, far
//     more than a go-back-N round reaches back on the links the model
//     simulates.
//  3. CountTx bumps the PSN's counter and returns it: 1 for the first
//     transmission, 2 for the first retransmission, and so on.
//  4. Memory is bounded whatever arrives (a sender with valid ICRCs and
//     random PSNs and QPNs on a real network): at most txMaxFlows flows,
//     and at most txMaxEntries counters over all of them. A new flow, or
//     a window that must grow, past either bound evicts a flow, counted
//     by TxEvictions: a second-chance clock over the flows in the order
//     they were made (deterministic: no map is iterated) skips, once, each
//     flow that sent again since the clock last passed it, so a flood of
//     one-frame flows evicts its own flows before a flow in use. An
//     evicted flow starts again from nothing: its next frame of any PSN
//     is tx=1, so a tx=2 rule misses the first retransmission after an
//     eviction and a tx=1 rule matches it.

// txWindowSpan is how many PSNs behind the newest a flow remembers (its
// window's most counters: 128 KiB). A PSN further back counts as a first
// transmission. 2^16 PSNs are 64 MiB in flight at a 1024-byte MTU, more
// than a go-back-N round resends after an ACK timeout on the fabrics the
// model simulates, and keep every comparison well inside the 2^23 that
// 24-bit PSN arithmetic can order.
const txWindowSpan = 1 << 16

// txMaxFlows and txMaxEntries bound CountTx's memory: flows (about
// 100 bytes each beside their counters), and counters over all flows (2
// bytes each: 32 MiB), room for 256 flows with full windows, or for both
// directions of 100,000 QPs with short windows.
const (
	txMaxFlows   = 1 << 18
	txMaxEntries = 1 << 24
)

// txMinWindow is a new window's capacity, in counters.
const txMinWindow = 16

type flowKey struct {
	from, to string
	qp       uint32
	dir      uint8 // 0 request, 1 response, 2 other (CNP)
}

// txWindow counts transmissions of the PSNs base .. base+len(counts)-1.
type txWindow struct {
	base   wire.PSN
	counts []uint16 // saturating
	used   bool     // sent again since the eviction clock last passed
}

// txFlows is CountTx's state: the flows' windows, their creation order
// (the eviction order) and what they hold.
type txFlows struct {
	windows   map[flowKey]*txWindow // looked up, never iterated
	order     []flowKey             // the eviction clock: order[head:] are live
	head      int
	entries   int // sum of cap(counts) over the live windows
	evictions uint64

	span, maxFlows, maxEntries int // the bounds (tests shrink them)
}

// newTxFlows returns empty state with the package's bounds.
func newTxFlows() txFlows {
	return txFlows{windows: map[flowKey]*txWindow{}, span: txWindowSpan, maxFlows: txMaxFlows, maxEntries: txMaxEntries}
}

// TxEvictions returns how many flows CountTx has forgotten to stay within
// its bounds (see CountTx); 0 in any ordinary simulation.
func (in *Injector) TxEvictions() uint64 {
	if in == nil {
		return 0
	}
	return in.tx.evictions
}

// LimitTx lowers the bounds of CountTx's memory to at most maxFlows
// flows and maxEntries counters over all of them; a bound below 1 or
// above the package's own (2^18 flows, 2^24 counters) keeps the
// package's. Flows past the new bounds are evicted as new ones arrive
// (TxEvictions). It is for a caller with less memory to spare, and for
// tests of what reports TxEvictions, which cannot otherwise reach the
// bounds without a quarter of a million flows.
func (in *Injector) LimitTx(maxFlows, maxEntries int) {
	if maxFlows >= 1 && maxFlows < in.tx.maxFlows {
		in.tx.maxFlows = maxFlows
	}
	if maxEntries >= 1 && maxEntries < in.tx.maxEntries {
		in.tx.maxEntries = maxEntries
	}
}

// evict forgets one flow other than keep, the first in the clock's order
// not used since the clock last passed it (clearing the mark of those it
// passes); false if there is none but keep.
func (f *txFlows) evict(keep *txWindow) bool {
	for range 2*(len(f.order)-f.head) + 1 {
		if f.head == len(f.order) {
			return false
		}
		k := f.order[f.head]
		f.order[f.head] = flowKey{}
		f.head++
		w := f.windows[k]
		if w == keep || w.used {
			w.used = false
			f.order = append(f.order, k) // a second chance
			f.compact()
			continue
		}
		delete(f.windows, k)
		f.entries -= cap(w.counts)
		f.evictions++
		f.compact()
		return true
	}
	return false
}

// compact moves the clock's live keys to the front of its slice once
// half of it is spent, so that appends reuse the slice.
func (f *txFlows) compact() {
	if f.head > len(f.order)/2 && f.head > 64 {
		n := copy(f.order, f.order[f.head:])
		clear(f.order[n:])
		f.order, f.head = f.order[:n], 0
	}
}

// CountTx returns which transmission of its PSN this frame is: 1 the first
// time the PSN is sent from hop.From to hop.To on the frame's destination
// QP in the frame's direction (request or response), 2 on its
// retransmission, and so on. The fabric calls it once per frame, on the
// frame's first hop, before Decide, and puts the result in Hop.Tx for that
// hop and all later ones. It returns 0 if pkt is nil (not RoCE).
//
// Responses count per PSN too: a second ACK carrying the same PSN is its
// tx=2. A PSN more than 2^16 behind the newest of its flow counts as a
// first transmission again, and so does every PSN of a flow evicted to
// bound memory (see TxEvictions).
func (in *Injector) CountTx(hop Hop, pkt *wire.Packet) int {
	if in == nil || pkt == nil || pkt.BTH == nil || pkt.Info == nil {
		return 0
	}
	var dir uint8
	switch k := pkt.Info.Kind; {
	case k.IsRequest():
		dir = 0
	case k.IsResponse():
		dir = 1
	default:
		dir = 2
	}
	key := flowKey{hop.From, hop.To, pkt.BTH.DestQP(), dir}
	f := &in.tx
	w := f.windows[key]
	if w != nil {
		w.used = true
	} else {
		for len(f.windows) >= f.maxFlows && f.evict(nil) {
		}
		w = &txWindow{}
		f.windows[key] = w
		f.order = append(f.order, key)
	}
	return f.count(w, pkt.BTH.PSN())
}

// grow gives w's counters a capacity of at least n (at most f.span),
// evicting older flows to stay within f.maxEntries; false if even then it
// would not fit.
func (f *txFlows) grow(w *txWindow, n int) bool {
	c := min(max(2*cap(w.counts), n, txMinWindow), f.span)
	for f.entries-cap(w.counts)+c > f.maxEntries {
		if !f.evict(w) {
			return false
		}
	}
	grown := make([]uint16, len(w.counts), c)
	copy(grown, w.counts)
	f.entries += c - cap(w.counts)
	w.counts = grown
	return true
}

// count bumps and returns the counter of p in w.
func (f *txFlows) count(w *txWindow, p wire.PSN) int {
	span := f.span
	if len(w.counts) == 0 {
		if cap(w.counts) == 0 && !f.grow(w, 1) {
			return 1
		}
		w.base = p
		w.counts = w.counts[:1]
		w.counts[0] = 0
	}
	d := int(p.Diff(w.base))
	switch {
	case d >= len(w.counts): // newer than any seen: extend, sliding if too long
		if d >= span {
			drop := d - span + 1
			if drop >= len(w.counts) {
				w.counts = w.counts[:0]
				w.base, d = p, 0
			} else {
				w.counts = w.counts[drop:]
				w.base = w.base.Add(uint32(drop))
				d -= drop
			}
		}
		n := len(w.counts)
		if d >= cap(w.counts) && !f.grow(w, d+1) {
			return 1 // no room: counted as a first transmission, not kept
		}
		w.counts = w.counts[:d+1]
		clear(w.counts[n:])
	case d < 0: // older than any seen: extend backwards if it is not too old
		if len(w.counts)-d > span {
			return 1
		}
		n := len(w.counts)
		if n-d > cap(w.counts) && !f.grow(w, n-d) {
			return 1
		}
		w.counts = w.counts[:n-d]
		copy(w.counts[-d:], w.counts[:n])
		clear(w.counts[:-d])
		w.base, d = p, 0
	}
	if w.counts[d] < math.MaxUint16 {
		w.counts[d]++
	}
	return int(w.counts[d])
}
