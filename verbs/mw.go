package verbs

import (
	"github.com/rocesim/rocesim/nic"
)

// MW is a memory window (ibv_mw). RKey is the R_Key the window opens
// memory by: Bind (type 1) updates it; after a successful type 2 bind
// through an IBV_WR_BIND_MW work request the user sets it to the WR's
// BindMW.RKey, as with libibverbs.
type MW struct {
	Type MWType
	RKey uint32
	c    *Context
	mw   *nic.MW
	slot int // in c.owned
}

// BindInfo says what a bind attaches a window to (ibv_mw_bind_info):
// Length bytes at Addr of MR, with the access rights given (REMOTE_READ,
// REMOTE_WRITE, REMOTE_ATOMIC). MR nil with Addr and Length 0 unbinds a
// type 1 window.
type BindInfo struct {
	MR     *MR
	Addr   uint64
	Length uint64
	Access AccessFlags
}

// BindMWWR is the bind_mw part of an IBV_WR_BIND_MW work request: the
// window, the R_Key it is to have (IncRKey(mw.RKey) is the usual choice;
// only the low byte, the key, is taken) and what it binds.
type BindMWWR struct {
	MW       *MW
	RKey     uint32
	BindInfo BindInfo
}

// MWBind is a type 1 bind request (ibv_mw_bind).
type MWBind struct {
	WRID      uint64
	SendFlags SendFlags
	BindInfo  BindInfo
}

// IncRKey returns the R_Key with the next key byte (ibv_inc_rkey).
func IncRKey(rkey uint32) uint32 { return nic.IncRKey(rkey) }

// AllocMW allocates a memory window (ibv_alloc_mw) of type 1 or 2.
func (p *PD) AllocMW(t MWType) (*MW, error) {
	if p == nil {
		return nil, nilObject("alloc_mw", "pd")
	}
	if err := p.c.usable("alloc_mw"); err != nil {
		return nil, err
	}
	w, err := p.c.dev().AllocMW(p.pd, t)
	if err != nil {
		return nil, err
	}
	v := &MW{Type: w.Type, RKey: w.RKey, c: p.c, mw: w}
	p.c.owned.add(&v.slot, func() { p.c.dev().DeallocMW(w) })
	return v, nil
}

// Dealloc frees the window (ibv_dealloc_mw), unbinding it if bound.
func (m *MW) Dealloc() error {
	if m == nil {
		return nilObject("dealloc_mw", "mw")
	}
	if err := m.c.usable("dealloc_mw"); err != nil {
		return err
	}
	return m.c.destroyed(m.slot, m.c.dev().DeallocMW(m.mw))
}

// BindMW binds a type 1 window through q (ibv_bind_mw): it posts a
// BIND_MW work request with the window's next R_Key and sets m.RKey to
// it. The bind itself completes on q's send CQ (IBV_WC_BIND_MW, or
// IBV_WC_MW_BIND_ERR, after which the user must restore m.RKey, as in C).
func (q *QP) BindMW(m *MW, b MWBind) error {
	if q == nil {
		return nilObject("bind_mw", "qp")
	}
	if m == nil {
		return nilObject("bind_mw", "mw")
	}
	if err := q.c.usable("bind_mw"); err != nil {
		return err
	}
	if err := sameContext("bind_mw", "mw", m.c, q.c); err != nil {
		return err
	}
	info, err := q.bindInfo("bind_mw", &b.BindInfo)
	if err != nil {
		return err
	}
	m.mw.RKey = m.RKey // the user's copy is what the WR names
	err = q.c.dev().Bind(q.c.now(), q.qp, m.mw, b.WRID, b.SendFlags, info)
	q.c.h.pump()
	m.RKey = m.mw.RKey
	return err
}

// bindInfo translates a BindInfo for the NIC.
func (q *QP) bindInfo(verb string, b *BindInfo) (nic.BindInfo, error) {
	info := nic.BindInfo{Addr: b.Addr, Length: b.Length, Access: b.Access}
	if b.MR != nil {
		if err := sameContext(verb, "bind_info.mr", b.MR.c, q.c); err != nil {
			return info, err
		}
		info.MR = b.MR.mr
	}
	return info, nil
}

// nicBindMW translates the bind_mw part of a send WR (nothing when it
// names no window).
func (q *QP) nicBindMW(b *BindMWWR, out *nic.BindMW) error {
	if b.MW == nil {
		return nil
	}
	if err := sameContext("post_send", "wr.bind_mw.mw", b.MW.c, q.c); err != nil {
		return err
	}
	info, err := q.bindInfo("post_send", &b.BindInfo)
	if err != nil {
		return err
	}
	// The NIC takes the window's R_Key as the user holds it, as rxe's
	// provider copies ibv_mw.rkey into the WQE.
	b.MW.mw.RKey = b.MW.RKey
	*out = nic.BindMW{MW: b.MW.mw, RKey: b.RKey, BindInfo: info}
	return nil
}
