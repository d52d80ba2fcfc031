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
//     more than any go-back-N retransmission reaches back.
//  3. CountTx bumps the PSN's counter and returns it: 1 for the first
//     transmission, 2 for the first retransmission, and so on.

// txWindowSpan is how many PSNs behind the newest a flow remembers. A
// PSN further back counts as a first transmission. 2^22 keeps every
// comparison well inside the 2^23 that 24-bit PSN arithmetic can order.
const txWindowSpan = 1 << 22

type flowKey struct {
	from, to string
	qp       uint32
	dir      uint8 // 0 request, 1 response, 2 other (CNP)
}

// txWindow counts transmissions of the PSNs base .. base+len(counts)-1.
type txWindow struct {
	base   wire.PSN
	counts []uint16 // saturating
}

// CountTx returns which transmission of its PSN this frame is: 1 the first
// time the PSN is sent from hop.From to hop.To on the frame's destination
// QP in the frame's direction (request or response), 2 on its
// retransmission, and so on. The fabric calls it once per frame, on the
// frame's first hop, before Decide, and puts the result in Hop.Tx for that
// hop and all later ones. It returns 0 if pkt is nil (not RoCE).
//
// Responses count per PSN too: a second ACK carrying the same PSN is its
// tx=2. A PSN more than 2^22 behind the newest of its flow counts as a
// first transmission again.
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
	w := in.flows[key]
	if w == nil {
		w = &txWindow{}
		in.flows[key] = w
	}
	return w.count(pkt.BTH.PSN())
}

// count bumps and returns the counter of p.
func (w *txWindow) count(p wire.PSN) int {
	if len(w.counts) == 0 {
		w.base = p
		w.counts = append(w.counts, 0)
	}
	d := int(p.Diff(w.base))
	switch {
	case d >= len(w.counts): // newer than any seen: extend, sliding if too long
		if d >= txWindowSpan {
			drop := d - txWindowSpan + 1
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
		if d >= cap(w.counts) {
			grown := make([]uint16, n, max(2*cap(w.counts), d+1, 64))
			copy(grown, w.counts)
			w.counts = grown
		}
		w.counts = w.counts[:d+1]
		clear(w.counts[n:])
	case d < 0: // older than any seen: extend backwards if it is not too old
		if len(w.counts)-d > txWindowSpan {
			return 1
		}
		grown := make([]uint16, len(w.counts)-d)
		copy(grown[-d:], w.counts)
		w.counts, w.base, d = grown, p, 0
	}
	if w.counts[d] < math.MaxUint16 {
		w.counts[d]++
	}
	return int(w.counts[d])
}
