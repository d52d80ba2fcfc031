package nic

// Completion queues (ibv_cq) and completion channels (ibv_comp_channel),
// after rxe_cq.c and libibverbs.
//
// Flow:
//  1. newCQ sizes the ring as rxe does (2^k - 1 entries) and takes a
//     reference on its channel.
//  2. The device pushes completions; a full CQ refuses them (overflow: the
//     device raises IBV_EVENT_CQ_ERR), an armed CQ disarms and queues one
//     event on its channel.
//  3. The user polls, re-arms (ReqNotify), reads events (GetEvent) and
//     acknowledges them (AckEvents).
//  4. destroy refuses while QPs use the CQ or events read from its
//     channel are unacknowledged; its unread events leave the channel.

import (
	"syscall"
)

// CompChannel is a completion channel (ibv_comp_channel): the queue of
// completion events of the CQs created on it, oldest first. Where
// libibverbs blocks in ibv_get_cq_event, a simulation asks GetEvent and
// gets false when nothing has fired yet. The zero value is an empty
// channel (ibv_create_comp_channel).
type CompChannel struct {
	q    []*CQ // ring of pending events
	head int
	n    int
	refs int // CQs created on the channel
	dead bool

	inReady bool // listed in the device's next Ready (ready.go)
}

// GetEvent returns the CQ of the oldest pending event and removes the
// event (ibv_get_cq_event, without blocking). The event still has to be
// acknowledged with the CQ's AckEvents.
func (ch *CompChannel) GetEvent() (*CQ, bool) {
	if ch.n == 0 {
		return nil, false
	}
	cq := ch.q[ch.head]
	ch.q[ch.head] = nil
	ch.head++
	if ch.head == len(ch.q) {
		ch.head = 0
	}
	ch.n--
	// The kernel counts an event as reported to the user when it is
	// read (ib_uverbs_event_read increments comp_events_reported), not
	// when it is queued: an event never read is never waited for.
	cq.events++
	return cq, true
}

// Pending returns the number of events waiting to be read: a real
// channel's file descriptor is readable when it is not zero.
func (ch *CompChannel) Pending() int { return ch.n }

// post queues an event for cq. The ring grows by doubling, so a channel
// whose reader keeps up stops allocating.
func (ch *CompChannel) post(cq *CQ) {
	if ch.n == len(ch.q) {
		grown := make([]*CQ, max(8, 2*len(ch.q)))
		for i := 0; i < ch.n; i++ {
			grown[i] = ch.q[(ch.head+i)%len(ch.q)]
		}
		ch.q, ch.head = grown, 0
	}
	ch.q[(ch.head+ch.n)%len(ch.q)] = cq
	ch.n++
}

// purge drops the pending events of cq, keeping the others in order. The
// kernel does the same when a CQ is destroyed (ib_uverbs_release_ucq).
func (ch *CompChannel) purge(cq *CQ) {
	kept := 0
	for i := 0; i < ch.n; i++ {
		e := ch.q[(ch.head+i)%len(ch.q)]
		if e != cq {
			ch.q[(ch.head+kept)%len(ch.q)] = e
			kept++
		}
	}
	for i := kept; i < ch.n; i++ {
		ch.q[(ch.head+i)%len(ch.q)] = nil
	}
	ch.n = kept
}

// DestroyCompChannel retires ch (ibv_destroy_comp_channel): EINVAL if ch
// is nil or already destroyed, EBUSY while CQs created on it exist.
func (d *Device) DestroyCompChannel(ch *CompChannel) error {
	if ch == nil {
		return errno(syscall.EINVAL, "destroy_comp_channel: channel is nil")
	}
	if err := ch.destroy(); err != nil {
		return err
	}
	d.outbox.forgetChannel(ch)
	return nil
}

// destroy retires the channel (ibv_destroy_comp_channel): EBUSY while CQs
// created on it exist, as libibverbs refuses.
func (ch *CompChannel) destroy() error {
	if ch.dead {
		return errno(syscall.EINVAL, "destroy_comp_channel: channel already destroyed")
	}
	if ch.refs > 0 {
		return errno(syscall.EBUSY, "destroy_comp_channel: %d CQs use the channel", ch.refs)
	}
	ch.dead = true
	return nil
}

// CQ is a completion queue (ibv_cq).
//
// Its size is rounded as rxe rounds it: rxe keeps a ring of 2^k slots with
// one always empty, and reports the cqe it can hold, 2^k - 1 >= the cqe
// asked for (rxe_queue_init). So ibv_create_cq(ctx, 10, …) on rxe has
// cq->cqe == 15 and overflows at the 16th unpolled completion; CQE()
// reports the same.
type CQ struct {
	ring []WC // len(ring) == cqe
	head int
	n    int

	maxCQE int
	ch     *CompChannel
	vector int

	armed         bool // ReqNotify called and no event since
	solicitedOnly bool
	overflowed    bool
	errRaised     bool // the device has raised IBV_EVENT_CQ_ERR for it

	events uint64 // events read from ch (GetEvent): the kernel's comp_events_reported
	acked  uint64 // events acknowledged with AckEvents

	refs int     // QPs whose send or receive CQ this is
	dev  *Device // the device that created it (nil for a bare newCQ)
	dead bool

	inReady bool // listed in the device's next Ready (ready.go)
}

// cqRing returns the capacity rxe gives a queue asked to hold cqe
// entries (RXEQueueSlots).
func cqRing(cqe int) int { return int(RXEQueueSlots(uint32(cqe))) }

// newCQ creates a CQ able to hold at least cqe completions
// (ibv_create_cq). ch may be nil (no events). EINVAL if cqe is not in
// 1..maxCQE (rxe_cq_chk_attr), vector is negative, or ch is destroyed; the
// device checks vector against its number of completion vectors.
func newCQ(cqe int, ch *CompChannel, vector int, maxCQE int) (*CQ, error) {
	if cqe < 1 || cqe > maxCQE {
		return nil, errno(syscall.EINVAL, "create_cq: cqe %d out of range 1..%d", cqe, maxCQE)
	}
	if vector < 0 {
		return nil, errno(syscall.EINVAL, "create_cq: comp_vector %d out of range", vector)
	}
	if ch != nil && ch.dead {
		return nil, errno(syscall.EINVAL, "create_cq: channel is destroyed")
	}
	if ch != nil {
		ch.refs++
	}
	return &CQ{ring: make([]WC, cqRing(cqe)), maxCQE: maxCQE, ch: ch, vector: vector}, nil
}

// CQE returns the number of completions the CQ holds (ibv_cq.cqe): the
// requested size rounded up to 2^k - 1, as rxe reports it.
func (cq *CQ) CQE() int { return len(cq.ring) }

// Len returns the number of completions waiting to be polled.
func (cq *CQ) Len() int { return cq.n }

// Overflowed reports whether a completion was ever refused because the CQ
// was full. It stays set: a real CQ in that state is in error.
func (cq *CQ) Overflowed() bool { return cq.overflowed }

// Channel returns the completion channel the CQ reports to, or nil.
func (cq *CQ) Channel() *CompChannel { return cq.ch }

// push appends a completion. When the CQ is full it stores nothing, marks
// the CQ overflowed and returns false; the device then raises
// IBV_EVENT_CQ_ERR (rxe_cq_post returns -EBUSY). Otherwise, if the CQ is
// armed and the completion qualifies — any completion when armed with
// ReqNotify(false); a solicited one or an error when armed with
// ReqNotify(true) (ibv_req_notify_cq(3)) — the CQ disarms and queues one
// event on its channel. It does not allocate once the channel's ring has
// grown to the number of events pending.
func (cq *CQ) push(wc WC, se solicitation) bool {
	if cq.dead {
		panic("nic: completion pushed to a destroyed CQ")
	}
	if cq.n == len(cq.ring) {
		cq.overflowed = true
		return false
	}
	i := cq.head + cq.n
	if i >= len(cq.ring) {
		i -= len(cq.ring)
	}
	cq.ring[i] = wc
	cq.n++
	if cq.armed && (!cq.solicitedOnly || se == solicited || wc.Status != WCSuccess) {
		cq.armed = false
		if cq.ch != nil {
			cq.ch.post(cq)
		}
	}
	return true
}

// Poll moves up to len(wcs) of the oldest completions into wcs, in the
// order they were pushed, and returns how many (ibv_poll_cq). It does not
// allocate.
func (cq *CQ) Poll(wcs []WC) int {
	k := min(len(wcs), cq.n)
	for j := 0; j < k; j++ {
		wcs[j] = cq.ring[cq.head]
		cq.head++
		if cq.head == len(cq.ring) {
			cq.head = 0
		}
	}
	cq.n -= k
	return k
}

// ReqNotify arms the CQ for one event (ibv_req_notify_cq): on the next
// completion, or with solicitedOnly on the next solicited or unsuccessful
// one. Completions already queued do not fire. As in rxe, a CQ armed for
// any completion stays so when re-armed for solicited ones only.
func (cq *CQ) ReqNotify(solicitedOnly bool) error {
	if cq.dead {
		return errno(syscall.EINVAL, "req_notify_cq: CQ is destroyed")
	}
	if cq.armed && !cq.solicitedOnly {
		return nil
	}
	cq.armed = true
	cq.solicitedOnly = solicitedOnly
	return nil
}

// Resize changes the CQ's size (ibv_resize_cq), rounded as at creation,
// keeping the queued completions in order. EINVAL if cqe is not in
// 1..maxCQE or is below the number of completions queued
// (rxe_cq_chk_attr).
func (cq *CQ) Resize(cqe int) error {
	if cq.dead {
		return errno(syscall.EINVAL, "resize_cq: CQ is destroyed")
	}
	if cqe < 1 || cqe > cq.maxCQE {
		return errno(syscall.EINVAL, "resize_cq: cqe %d out of range 1..%d", cqe, cq.maxCQE)
	}
	if cqe < cq.n {
		return errno(syscall.EINVAL, "resize_cq: cqe %d below the %d completions queued", cqe, cq.n)
	}
	ring := make([]WC, cqRing(cqe))
	for j := 0; j < cq.n; j++ {
		ring[j] = cq.ring[(cq.head+j)%len(cq.ring)]
	}
	cq.ring, cq.head = ring, 0
	return nil
}

// EventsUnacked returns how many completion events of the CQ the user
// has read from its channel (GetEvent) and not acknowledged (with
// AckEvents): the number ibv_destroy_cq waits for.
func (cq *CQ) EventsUnacked() int {
	if cq.acked >= cq.events {
		return 0
	}
	return int(cq.events - cq.acked)
}

// AckEvents acknowledges n events of this CQ read from its channel
// (ibv_ack_cq_events). destroy waits for every event read to be
// acknowledged.
func (cq *CQ) AckEvents(n int) {
	if n > 0 {
		cq.acked += uint64(n)
	}
}

// destroy retires the CQ (ibv_destroy_cq). EBUSY while QPs use it, or
// while the events read from its channel and the events acknowledged
// differ: rdma-core's ibv_cmd_destroy_cq waits until the acknowledged
// equal the comp_events_reported the kernel returns, which counts the
// events read (a program that never acknowledges waits forever; a
// simulation says so instead). Events queued and never read are not
// waited for, as on rxe (proven by conformance
// TestDestroyCQWithEventsRXE): on success they leave the channel
// (ib_uverbs_release_ucq drops them) and the channel's reference is
// dropped.
func (cq *CQ) destroy() error {
	if cq.dead {
		return errno(syscall.EINVAL, "destroy_cq: CQ already destroyed")
	}
	if cq.refs > 0 {
		return errno(syscall.EBUSY, "destroy_cq: %d QPs use the CQ", cq.refs)
	}
	if cq.acked < cq.events {
		return errno(syscall.EBUSY, "destroy_cq: %d completion events read and not acknowledged", cq.events-cq.acked)
	}
	if cq.acked > cq.events {
		return errno(syscall.EBUSY, "destroy_cq: %d completion events acknowledged but only %d read", cq.acked, cq.events)
	}
	cq.dead = true
	if cq.ch != nil {
		cq.ch.purge(cq)
		cq.ch.refs--
	}
	return nil
}
