package nic

// Memory windows (ibv_alloc_mw, ibv_bind_mw, IBV_WR_BIND_MW, LOCAL_INV and
// SEND_WITH_INV; IBTA vol. 1 §10.6.7; rxe_mw.c is the reference).
//
// Flow:
//  1. alloc gives the window an index of its own range (rxe's MW pool,
//     RXE_MIN_MW_INDEX on, above every MR index, which is how an R_Key
//     names a window rather than a region: rxe's rkey_is_mw) and a key
//     byte. A type 1 window starts VALID but empty, a type 2 one FREE.
//  2. bind runs when the requester reaches a BIND_MW WQE (rxe_do_local_ops
//     → rxe_bind_mw): the checks of rxe_check_bind_mw, then the window
//     takes the MR, range, access rights and the new key byte of the WR.
//     A failed bind completes the WQE with MW_BIND_ERR.
//  3. lookupRemote resolves an incoming R_Key that names a window
//     (rxe_lookup_mw): live, same key, same PD, a type 2 window bound
//     through this QP, non-empty, granting the access, VALID.
//  4. invalidate (LOCAL_INV, or the IETH of a SEND_WITH_INV at the
//     responder; rxe_invalidate_mw) returns a type 2 window to FREE. An
//     R_Key of a region cannot be invalidated: rxe_invalidate_mr accepts
//     only fast-registration MRs, which rocesim does not have.

import (
	"fmt"
	"syscall"

	"github.com/rocesim/rocesim/sim"
	"github.com/rocesim/rocesim/wire"
)

// MWType is a memory window's type (ibv_mw_type).
type MWType uint8

// Memory window types. rxe implements type 1 and type 2B.
const (
	MWType1 MWType = 1
	MWType2 MWType = 2
)

// mwState is a window's state (rxe_mw.c's RXE_MW_STATE_*).
type mwState uint8

const (
	mwFree  mwState = iota // type 2: not bound
	mwValid                // bound (a type 1 window is VALID from allocation on, empty until bound)
)

const (
	// mwAccessKnown are the access rights a window may grant. rxe accepts
	// the MR bits and ZERO_BASED (RXE_ACCESS_SUPPORTED_MW); rocesim does
	// not model zero-based windows (a bind asking for one fails).
	mwAccessKnown = mrAccessKnown
)

// MW is a memory window (ibv_mw). RKey is the R_Key it opens memory by
// once bound; as in libibverbs, the user updates it after a type 2 bind
// (ibv_bind_mw does so itself for type 1).
type MW struct {
	Type MWType
	RKey uint32

	pd     *PD
	key    uint32 // the key the device holds (mw->rkey in rxe)
	state  mwState
	mr     *MR // bound region, nil when empty
	qp     *QP // type 2: the QP that bound it
	addr   uint64
	length uint64
	access AccessFlags
	dead   bool
}

// RKeyOrZero returns w.RKey, or 0 for a nil window.
func (w *MW) RKeyOrZero() uint32 {
	if w == nil {
		return 0
	}
	return w.RKey
}

// PD returns the protection domain the window was allocated in.
func (w *MW) PD() *PD { return w.pd }

// Bound reports whether the window opens memory now: bound to a region
// with a non-zero length and not invalidated.
func (w *MW) Bound() bool { return !w.dead && w.state == mwValid && w.length > 0 }

// mwSlot is one window index and the key byte it handed out last.
type mwSlot struct {
	mw  *MW
	gen uint8
}

// mwTable holds the windows of one device, inside its memTable.
type mwTable struct {
	slots []mwSlot // slots[i] is index rxeMinMWIndex+i
	next  uint32   // the next index to try, relative to rxeMinMWIndex
	taken idSet    // live windows' indices, relative to rxeMinMWIndex
	live  int
}

// allocMW allocates a window of type t in pd (ibv_alloc_mw): EINVAL for
// another type or a dead PD, ENOMEM when every index is taken.
func (t *memTable) allocMW(pd *PD, typ MWType) (*MW, error) {
	if pd == nil || pd.dead {
		return nil, errno(syscall.EINVAL, "alloc_mw: pd is not a live PD")
	}
	if typ != MWType1 && typ != MWType2 {
		return nil, errno(syscall.EINVAL, "alloc_mw: type %d is neither IBV_MW_TYPE_1 nor IBV_MW_TYPE_2", typ)
	}
	m := &t.mws
	span := uint32(rxeMaxMWIndex - rxeMinMWIndex + 1)
	if m.live >= int(span) {
		return nil, errno(syscall.ENOMEM, "alloc_mw: %d memory windows allocated, the device maximum", m.live)
	}
	// Cyclic, as rxe's pools hand out indices; idSet finds the next free
	// one without walking past the live ones.
	i, ok := m.taken.next(m.next, 0, span-1)
	if !ok {
		panic("nic: no free MW index although the live count had room")
	}
	m.next = (i + 1) % span
	if int(i) == len(m.slots) {
		m.slots = append(m.slots, mwSlot{})
	}
	s := &m.slots[i]
	s.gen++
	key := (rxeMinMWIndex+i)<<8 | uint32(s.gen)
	w := &MW{Type: typ, RKey: key, pd: pd, key: key, state: mwFree}
	if typ == MWType1 {
		w.state = mwValid // rxe_alloc_mw: type 1 starts VALID, with length 0
	}
	s.mw = w
	m.live++
	pd.refs++
	return w, nil
}

// deallocMW frees w (ibv_dealloc_mw). A bound window is unbound: rxe's
// rxe_mw_cleanup drops its MR and QP.
func (t *memTable) deallocMW(w *MW) error {
	if w == nil {
		return errno(syscall.EINVAL, "dealloc_mw: mw is nil")
	}
	if w.dead || t.mwByIndex(w.key) != w {
		return errno(syscall.EINVAL, "dealloc_mw: MW rkey %#x is not allocated on this device", w.RKey)
	}
	w.unbind()
	t.mws.slots[w.key>>8-rxeMinMWIndex].mw = nil
	t.mws.taken.free(w.key>>8 - rxeMinMWIndex)
	t.mws.live--
	w.dead = true
	w.pd.refs--
	return nil
}

// mwByIndex returns the live window whose index the key carries, whatever
// its key byte, or nil.
func (t *memTable) mwByIndex(key uint32) *MW {
	idx := key >> 8
	if idx < rxeMinMWIndex || idx > rxeMaxMWIndex || int(idx-rxeMinMWIndex) >= len(t.mws.slots) {
		return nil
	}
	return t.mws.slots[idx-rxeMinMWIndex].mw
}

// isMWKey reports whether a key names a window rather than a region
// (rxe's rkey_is_mw: the index lies in the MW range).
func isMWKey(key uint32) bool {
	idx := key >> 8
	return idx >= rxeMinMWIndex && idx <= rxeMaxMWIndex
}

// unbind empties the window and lets go of its MR.
func (w *MW) unbind() {
	if w.mr != nil {
		w.mr.mws--
	}
	w.mr, w.qp, w.addr, w.length, w.access = nil, nil, 0, 0, 0
}

// bindMW executes a BIND_MW WQE posted on qp, as rxe_bind_mw and
// rxe_check_bind_mw do, in their order. On failure it returns why, and the
// WQE completes with MW_BIND_ERR.
func (t *memTable) bindMW(qp *QP, b *BindMW) string {
	w := t.mwByIndex(b.mwKey)
	switch {
	case w == nil:
		return fmt.Sprintf("bind_mw: no MW with rkey %#x", b.mwKey)
	case w.key != b.mwKey:
		return fmt.Sprintf("bind_mw: MW rkey is %#x, the WR names %#x", w.key, b.mwKey)
	}
	in := &b.BindInfo
	var mr *MR
	if in.Length != 0 {
		if in.MR != nil {
			mr = t.byLKey(in.MR.LKey)
		}
		if mr == nil {
			return "bind_mw: bind_info.mr is not a registered MR"
		}
	}
	if unknown := in.Access &^ mwAccessKnown; unknown != 0 {
		return fmt.Sprintf("bind_mw: mw_access_flags has unsupported bits %#x", uint32(unknown))
	}
	switch w.Type {
	case MWType1:
		if w.state != mwValid {
			return "bind_mw: type 1 MW not in the valid state"
		}
	case MWType2:
		switch {
		case w.state != mwFree: // o10-37.2.30
			return "bind_mw: type 2 MW is bound; invalidate it first"
		case qp.pd != w.pd: // C10-72
			return "bind_mw: type 2 MW is in another PD than the QP"
		case mr == nil: // o10-37.2.40
			return "bind_mw: a type 2 MW cannot be bound with length 0"
		}
	}
	if mr != nil {
		switch {
		case mr.Access&AccessMWBind == 0: // C10-73
			return fmt.Sprintf("bind_mw: MR lkey %#x lacks MW_BIND", mr.LKey)
		case in.Access&(AccessRemoteWrite|AccessRemoteAtomic) != 0 && mr.Access&AccessLocalWrite == 0: // C10-74
			return fmt.Sprintf("bind_mw: MW access %s needs an MR with LOCAL_WRITE", accessString(in.Access&(AccessRemoteWrite|AccessRemoteAtomic)))
		case !mrCovers(mr, in.Addr, in.Length): // C10-75
			return fmt.Sprintf("bind_mw: range %#x+%d outside MR %#x+%d", in.Addr, in.Length, mr.Addr, mr.Length)
		}
	}
	// rxe_do_bind_mw: the new key byte, the rights, the range.
	w.unbind()
	w.key = w.key&^0xff | b.RKey&0xff
	w.state, w.access, w.addr, w.length = mwValid, in.Access, in.Addr, in.Length
	if mr != nil {
		w.mr = mr
		mr.mws++
	}
	if w.Type == MWType2 {
		w.qp = qp
	}
	return ""
}

// invalidate executes a LOCAL_INV, or the invalidation a SEND_WITH_INV
// asks of the responder (rxe's rxe_invalidate_mw / rxe_invalidate_mr). It
// checks neither the PD nor the QP, as rxe does not. On failure it
// returns why.
func (t *memTable) invalidate(key uint32) string {
	if !isMWKey(key) {
		// rxe_invalidate_mr accepts only IB_MR_TYPE_MEM_REG (fast
		// registration) regions; every region rocesim registers is a user
		// MR, so its key cannot be invalidated.
		if t.byRKey(key) == nil {
			return fmt.Sprintf("invalidate: rkey %#x names no MR or MW", key)
		}
		return fmt.Sprintf("invalidate: rkey %#x is a user MR, which cannot be invalidated", key)
	}
	w := t.mwByIndex(key)
	switch {
	case w == nil || w.key != key:
		return fmt.Sprintf("invalidate: rkey %#x names no MW", key)
	case w.Type == MWType1: // o10-37.2.26
		return fmt.Sprintf("invalidate: rkey %#x is a type 1 MW", key)
	case w.state != mwValid:
		// rxe 6.1 would go on and drop the references of a window that
		// holds none; rocesim refuses a second invalidation instead.
		return fmt.Sprintf("invalidate: MW rkey %#x is not bound", key)
	}
	w.unbind()
	w.state = mwFree
	return ""
}

// lookupRemote resolves an R_Key that names a window for an incoming
// request on qp (rxe_lookup_mw) and returns the region behind it and the
// range the request must stay in: the region's under the rxe profile
// (rxe's check_rkey checks the VA range against the MR, not the window),
// the window's under the spec profile (IBTA §10.6.7.3: access through a
// window is bounded by the window).
func (t *memTable) lookupRemote(qp *QP, rkey uint32, need AccessFlags) (mr *MR, lo, n uint64, why string) {
	w := t.mwByIndex(rkey)
	switch {
	case w == nil || w.key != rkey:
		return nil, 0, 0, fmt.Sprintf("rkey %#x names no MW", rkey)
	case w.pd != qp.pd:
		return nil, 0, 0, fmt.Sprintf("rkey %#x: MW in another PD", rkey)
	case w.length == 0 || w.state != mwValid || w.mr == nil:
		return nil, 0, 0, fmt.Sprintf("rkey %#x: MW not bound", rkey)
	case w.Type == MWType2 && w.qp != qp:
		return nil, 0, 0, fmt.Sprintf("rkey %#x: type 2 MW bound through another QP", rkey)
	case w.access&need != need:
		return nil, 0, 0, fmt.Sprintf("rkey %#x: MW lacks %s", rkey, accessString(need&^w.access))
	}
	if qp.dev != nil && qp.dev.cfg.Profile == ProfileRXE {
		return w.mr, w.mr.Addr, w.mr.Length, ""
	}
	return w.mr, w.addr, w.length, ""
}

// BindInfo says what a bind attaches a window to (ibv_mw_bind_info):
// Length bytes at Addr of MR, with the access rights given. MR nil and
// Length 0 unbind a type 1 window.
type BindInfo struct {
	MR     *MR
	Addr   uint64
	Length uint64
	Access AccessFlags
}

// BindMW is the bind part of a BIND_MW work request (ibv_send_wr.bind_mw):
// the window, the R_Key it will have (only its low byte, the key, is
// taken: ibv_inc_rkey gives the next one) and what it is bound to.
type BindMW struct {
	MW       *MW
	RKey     uint32
	BindInfo BindInfo

	mwKey uint32 // the window's key when the WR was posted (rxe: mw_rkey)
}

// AllocMW allocates a memory window of type t in pd (ibv_alloc_mw); EINVAL
// once the device holds max_mw windows (rxe_alloc_mw: rxe_add_to_pool).
func (d *Device) AllocMW(pd *PD, t MWType) (*MW, error) {
	if pd != nil && pd.dev != d {
		return nil, errno(syscall.EINVAL, "alloc_mw: pd is not of this device")
	}
	if err := d.mws.take("alloc_mw", "max_mw"); err != nil {
		return nil, err
	}
	w, err := d.mem.allocMW(pd, t)
	if err != nil {
		d.mws.put()
	}
	return w, err
}

// DeallocMW frees a memory window (ibv_dealloc_mw).
func (d *Device) DeallocMW(w *MW) error {
	if err := d.mem.deallocMW(w); err != nil {
		return err
	}
	d.mws.put()
	return nil
}

// Bind binds a type 1 window through qp (ibv_bind_mw): as rdma-core's rxe
// provider, it checks the arguments, posts a BIND_MW work request with the
// next R_Key (ibv_inc_rkey) and, once posted, sets w.RKey to it; if the
// bind then fails (MW_BIND_ERR) the user must undo that, as with the C
// verb. EINVAL for a type 2 window, a zero-based bind or a bind_info
// without an MR but with an address or length; EPERM for an MR of another
// PD; otherwise what PostSend returns.
func (d *Device) Bind(now sim.Time, qp *QP, w *MW, wrid uint64, flags SendFlags, info BindInfo) error {
	switch {
	case w == nil || w.dead:
		return errno(syscall.EINVAL, "bind_mw: mw is not a live memory window")
	case w.Type != MWType1:
		// libibverbs' ibv_bind_mw refuses type 2 windows (they are bound
		// by posting IBV_WR_BIND_MW).
		return errno(syscall.EINVAL, "bind_mw: mw is a type 2 window; post an IBV_WR_BIND_MW instead")
	case info.MR == nil && (info.Addr != 0 || info.Length != 0):
		return errno(syscall.EINVAL, "bind_mw: bind_info.mr is nil but addr or length is set")
	case info.Access&AccessZeroBased != 0:
		return errno(syscall.EINVAL, "bind_mw: mw_access_flags: a type 1 window cannot be ZERO_BASED")
	case info.MR != nil && info.MR.pd != w.pd:
		return errno(syscall.EPERM, "bind_mw: bind_info.mr is in another PD than the MW")
	}
	wr := SendWR{WRID: wrid, Opcode: WRBindMW, Flags: flags,
		BindMW: BindMW{MW: w, RKey: IncRKey(w.RKey), BindInfo: info}}
	if _, err := d.PostSend(now, qp, []SendWR{wr}); err != nil {
		return err
	}
	w.RKey = wr.BindMW.RKey
	return nil
}

// IncRKey returns the R_Key after rkey: the same index, the next key byte
// (ibv_inc_rkey).
func IncRKey(rkey uint32) uint32 { return rkey&^0xff | (rkey+1)&0xff }

// invalidateForSend invalidates the R_Key a SEND WITH INVALIDATE carries,
// at its last packet (rxe's execute → invalidate_rkey). On failure it does
// what rxe 6.1 does for RESPST_ERR_INVALIDATE_RKEY (class J): the receive
// completes with REM_INV_REQ_ERR, the SEND is acknowledged (ePSN and MSN
// unchanged, as execute returns before it updates them), and the QP moves
// to ERR with no event. It returns false then.
func (d *Device) invalidateForSend(now sim.Time, qp *QP, w *recvWQE, p *wire.Packet) bool {
	why := d.mem.invalidate(p.IETH.RKey())
	if why == "" {
		return true
	}
	d.failRecv(now, qp, w, WCRemInvReqErr, wcReason{kind: whySendInvalidate, detail: why})
	if p.BTH.AckReq() && qp.state != QPStateErr {
		d.sendAck(qp, wire.ACKSyndrome(wire.CreditsUnlimited), p.BTH.PSN(), "")
	}
	if qp.state != QPStateErr {
		d.toError(now, qp)
	}
	return false
}
