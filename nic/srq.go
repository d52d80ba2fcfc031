package nic

import "syscall"

// SRQInitAttr are the creation attributes of a shared receive queue.
type SRQInitAttr struct {
	MaxWR    uint32
	MaxSGE   uint32
	SRQLimit uint32
}

// SRQ is a shared receive queue (ibv_srq): receive WQEs any of its QPs
// may consume. When the number of WQEs falls below an armed limit, the
// device raises SRQ_LIMIT_REACHED once and disarms it.
type SRQ struct {
	dev    *Device
	pd     *PD
	rq     ring[recvWQE]
	maxSGE uint32
	limit  uint32 // armed when non-zero
	refs   int
	dead   bool
}

// CreateSRQ creates a shared receive queue in pd.
func (d *Device) CreateSRQ(pd *PD, ia SRQInitAttr) (*SRQ, error) {
	switch {
	case !d.livePD(pd):
		return nil, errno(syscall.EINVAL, "create_srq: not a live PD of this device")
	case ia.MaxWR < 1 || int(ia.MaxWR) > d.attr.MaxSRQWR:
		return nil, errno(syscall.EINVAL, "create_srq: attr.max_wr %d out of range 1..%d", ia.MaxWR, d.attr.MaxSRQWR)
	case int(ia.MaxSGE) > d.attr.MaxSRQSGE:
		return nil, errno(syscall.EINVAL, "create_srq: attr.max_sge %d over the device maximum %d", ia.MaxSGE, d.attr.MaxSRQSGE)
	case ia.SRQLimit > ia.MaxWR:
		return nil, errno(syscall.EINVAL, "create_srq: attr.srq_limit %d over max_wr %d", ia.SRQLimit, ia.MaxWR)
	}
	if err := d.srqs.take("create_srq", "max_srq"); err != nil {
		return nil, err
	}
	s := &SRQ{dev: d, pd: pd, maxSGE: ia.MaxSGE, limit: ia.SRQLimit}
	s.rq.init(int(d.srqSlots(ia.MaxWR)))
	pd.refs++
	return s, nil
}

// srqSlots is the number of WQEs an SRQ asked to hold n holds: under
// ProfileRXE, rxe's queue of a power of two slots less one (16 holds 31;
// ibv_query_srq says so, while create_srq answers with the 16 asked for:
// conformance TestNewPostRxe's srq caps lines), as a QP's queues
// (rxeQPCaps).
func (d *Device) srqSlots(n uint32) uint32 {
	if d.cfg.Profile == ProfileRXE {
		return RXEQueueSlots(n)
	}
	return n
}

// SRQAttrMask selects what ModifySRQ changes.
type SRQAttrMask uint8

// SRQ attribute mask bits (ibv_srq_attr_mask).
const (
	SRQAttrMaxWR SRQAttrMask = 1 << 0
	SRQAttrLimit SRQAttrMask = 1 << 1
)

// ModifySRQ resizes the SRQ (SRQAttrMaxWR) or arms its limit (SRQAttrLimit).
func (d *Device) ModifySRQ(s *SRQ, attr SRQInitAttr, mask SRQAttrMask) error {
	if !d.liveSRQ(s) {
		return errno(syscall.EINVAL, "modify_srq: not a live SRQ of this device")
	}
	if mask&^(SRQAttrMaxWR|SRQAttrLimit) != 0 {
		return errno(syscall.EINVAL, "modify_srq: unknown attribute mask bits 0x%x", mask)
	}
	maxWR := uint32(s.rq.limit)
	if mask&SRQAttrMaxWR != 0 {
		// What the resized queue holds must take the WRs queued
		// (rxe_queue_resize compares its rounded size).
		if attr.MaxWR < 1 || int(attr.MaxWR) > d.attr.MaxSRQWR || d.srqSlots(attr.MaxWR) < uint32(s.rq.size) {
			return errno(syscall.EINVAL, "modify_srq: max_wr %d below the %d WRs queued or out of range", attr.MaxWR, s.rq.size)
		}
		maxWR = d.srqSlots(attr.MaxWR)
	}
	if mask&SRQAttrLimit != 0 && attr.SRQLimit > maxWR {
		return errno(syscall.EINVAL, "modify_srq: srq_limit %d over max_wr %d", attr.SRQLimit, maxWR)
	}
	if mask&SRQAttrMaxWR != 0 && maxWR != uint32(s.rq.limit) {
		// The queued WQEs stay (maxWR is at least their number); storage
		// past the new bound is given back.
		s.rq.limit = int(maxWR)
		if len(s.rq.slots) > s.rq.limit {
			s.rq.resize(s.rq.limit)
		}
	}
	if mask&SRQAttrLimit != 0 {
		s.limit = attr.SRQLimit
	}
	return nil
}

// QuerySRQ returns the SRQ's max_wr, max_sge and armed limit (0 if none).
func (s *SRQ) Query() SRQInitAttr {
	return SRQInitAttr{MaxWR: uint32(s.rq.limit), MaxSGE: s.maxSGE, SRQLimit: s.limit}
}

// PostSRQRecv posts receive WRs to the SRQ.
func (d *Device) PostSRQRecv(s *SRQ, wrs []RecvWR) (int, error) {
	if !d.liveSRQ(s) {
		return 0, errno(syscall.EINVAL, "post_srq_recv: not a live SRQ of this device")
	}
	for i := range wrs {
		if len(wrs[i].SGList) > int(s.maxSGE) {
			return i, errno(syscall.EINVAL, "post_srq_recv: num_sge %d over the SRQ's max_sge %d", len(wrs[i].SGList), s.maxSGE)
		}
		if s.rq.full() {
			return i, errno(syscall.ENOMEM, "post_srq_recv: SRQ full (%d WRs)", s.rq.size)
		}
		s.rq.trim()
		w := s.rq.grow()
		sg := w.sges
		*w = recvWQE{wrid: wrs[i].WRID, sges: append(sg[:0], wrs[i].SGList...)}
		var msg string
		w.length, w.status, msg = d.mem.resolve(s.pd, w.sges, intoMemory)
		w.why = memCheck(msg)
	}
	return len(wrs), nil
}

// take moves the oldest WQE into buf (the QP's own slot, as the SRQ slot
// is reused) and raises SRQ_LIMIT_REACHED when the queue falls below the
// armed limit.
func (s *SRQ) take(d *Device, buf *recvWQE) (*recvWQE, bool) {
	if s.rq.empty() {
		return nil, false
	}
	src := s.rq.at(0)
	sg := buf.sges
	*buf = *src
	buf.sges = append(sg[:0], src.sges...)
	s.rq.shift()
	if s.limit != 0 && uint32(s.rq.size) < s.limit {
		s.limit = 0
		d.raise(AsyncEvent{Type: EventSRQLimitReached, SRQ: s})
	}
	return buf, true
}

// DestroySRQ destroys s: EBUSY while QPs use it.
func (d *Device) DestroySRQ(s *SRQ) error {
	if !d.liveSRQ(s) {
		return errno(syscall.EINVAL, "destroy_srq: not a live SRQ of this device")
	}
	if s.refs > 0 {
		return errno(syscall.EBUSY, "destroy_srq: %d QPs still use the SRQ", s.refs)
	}
	s.dead = true
	s.pd.refs--
	d.srqs.put()
	return nil
}

// CreateAH creates an address handle for UD sends.
func (d *Device) CreateAH(pd *PD, attr AHAttr) (*AH, error) {
	if !d.livePD(pd) {
		return nil, errno(syscall.EINVAL, "create_ah: not a live PD of this device")
	}
	if !attr.IsGlobal || !attr.GRH.DGID.IsValid() {
		return nil, errno(syscall.EINVAL, "create_ah: RoCE needs is_global and grh.dgid")
	}
	if err := d.checkAV("create_ah", &attr); err != nil {
		return nil, err
	}
	dgid := attr.GRH.DGID.Unmap()
	if _, ok := d.neighbour(dgid); !ok {
		return nil, errno(syscall.EINVAL, "create_ah: no route to GID %v (unknown neighbour)", attr.GRH.DGID)
	}
	if err := d.ahs.take("create_ah", "max_ah"); err != nil {
		return nil, err
	}
	pd.refs++
	return &AH{Attr: attr, pd: pd}, nil
}

// DestroyAH destroys ah.
func (d *Device) DestroyAH(ah *AH) error {
	if ah == nil || ah.dead || ah.pd.dev != d {
		return errno(syscall.EINVAL, "destroy_ah: not a live AH of this device")
	}
	ah.dead = true
	ah.pd.refs--
	d.ahs.put()
	return nil
}
