package nic

// Memory regions of one device (ibv_reg_mr; rxe_mr.c is the reference).
//
// Flow:
//  1. register checks the access flags (as the kernel's
//     ib_check_mr_access does), the PD and the length, takes the next MR
//     index (cyclically, as rxe's pool does), gives the MR the next range
//     of simulated virtual addresses and keys index<<8 | generation.
//  2. resolve checks a work request's local SGEs (L_Key, PD, range, local
//     write right, total length) at the moment the NIC executes the WQE;
//     gather and scatter then copy between the SGEs and a payload.
//  3. remote checks the R_Key, PD, access right and range of an incoming
//     RDMA READ, WRITE or ATOMIC.
//  4. deregister retires the MR; its index may come back after the index
//     space wraps, its keys and addresses do not.

import (
	"fmt"
	"math"
	"strings"
	"syscall"

	"github.com/rocesim/rocesim/internal/ntcopy"
)

const (
	// mrPageSize is the page size of the simulated address space: every MR
	// starts on a page boundary.
	mrPageSize = 4096

	// mrDefaultMax is the largest MR index: rxe 6.1's RXE_MAX_MR_INDEX
	// (indices 1..0x80000). How many MRs may live at once is the device's
	// max_mr (memTable.maxLive).
	mrDefaultMax = rxeMaxMRIndex

	// mrMaxIndex keeps index<<8 inside a 32-bit key.
	mrMaxIndex = 1<<24 - 1

	// mrAccessKnown are the access bits rocesim implements.
	mrAccessKnown = AccessLocalWrite | AccessRemoteWrite | AccessRemoteRead | AccessRemoteAtomic | AccessMWBind
)

// MR is a registered memory region (ibv_mr): Go bytes at a simulated
// virtual address. The exported fields are what ibv_mr shows a user; treat
// them as read-only. RKey equals LKey, as in rxe (whose keys are both
// index<<8 | key byte); the R_Key only opens the region to the access
// rights it was registered with.
type MR struct {
	Addr   uint64 // simulated virtual address of Bytes()[0], page aligned
	Length uint64 // len(Bytes())
	LKey   uint32
	RKey   uint32
	Access AccessFlags

	buf  []byte
	pd   *PD
	mws  int // memory windows bound to it (rxe's num_mw)
	dead bool
}

// Bytes returns the registered slice: the memory the NIC reads and writes.
func (m *MR) Bytes() []byte { return m.buf }

// PD returns the protection domain the region was registered in.
func (m *MR) PD() *PD { return m.pd }

// mrSlot is one MR index: the region registered under it, if any, and the
// generation byte its next key will carry.
type mrSlot struct {
	mr  *MR
	gen uint8
}

// memTable holds the memory regions of one device. The Device embeds one,
// made by newMemTable; it may lower max before the first registration.
type memTable struct {
	slots []mrSlot // slots[i] is MR index i+1
	// stream: payloads received are written into memory with
	// non-temporal stores (Device.SetStreamingWrites). Beside slots:
	// both are read for every WRITE packet received.
	stream bool
	next   uint32 // the next index to try
	taken  idSet  // the indices of live MRs
	live   int    // registered MRs
	max    int    // the largest index
	// maxLive is the most MRs a user may hold at once: the device's
	// max_mr less the kernel's DMA MR (see kernelMRs); 0 means max.
	maxLive int

	nextAddr uint64 // the next free simulated address, page aligned

	mws mwTable // the memory windows (mw.go)
}

// newMemTable returns an empty table whose first MR lives at base (rounded
// up to a page). Addresses are handed out in registration order, each MR
// followed by an unmapped guard page, and never reused, so the same program
// sees the same addresses (and RETH VAs) on every run.
func newMemTable(base uint64) memTable {
	if base == 0 {
		base = DefaultAddrBase
	}
	base = (base + mrPageSize - 1) &^ (mrPageSize - 1)
	return memTable{next: 1, max: mrDefaultMax, nextAddr: base}
}

// register makes buf an MR of pd with the given access rights. Errors wrap
// syscall.EINVAL (bad argument) or syscall.ENOMEM (table or simulated
// address space full), checked in the order the kernel checks them: the
// access flags first, then the PD, then the buffer.
func (t *memTable) register(pd *PD, buf []byte, access AccessFlags) (*MR, error) {
	return t.registerAt(pd, buf, access, 0, false)
}

// registerAt is register; with fixed, the MR lives at addr and takes
// nothing from the simulated address space (Device.RegMRAt).
func (t *memTable) registerAt(pd *PD, buf []byte, access AccessFlags, addr uint64, fixed bool) (*MR, error) {
	if err := checkMRAccess("reg_mr", access); err != nil {
		return nil, err
	}
	if pd == nil {
		return nil, errno(syscall.EINVAL, "reg_mr: pd is nil")
	}
	if pd.dead {
		return nil, errno(syscall.EINVAL, "reg_mr: pd is deallocated")
	}
	if len(buf) == 0 {
		return nil, errno(syscall.EINVAL, "reg_mr: length 0")
	}
	if t.live >= t.liveLimit() {
		// rxe_reg_user_mr: rxe_alloc finds the MR pool at max_elem and
		// returns NULL, which the verb reports as -ENOMEM.
		return nil, errno(syscall.ENOMEM, "reg_mr: %d MRs registered, the device maximum (max_mr less the kernel's DMA MR, as rxe counts)", t.live)
	}
	length := uint64(len(buf))
	span := mrSpan(length)
	if fixed {
		span = 0
	} else if !t.roomFor(span) {
		return nil, errno(syscall.ENOMEM, "reg_mr: simulated address space exhausted")
	} else {
		addr = t.nextAddr
	}

	idx := t.allocIndex()
	s := &t.slots[idx-1]
	s.gen++
	key := idx<<8 | uint32(s.gen)
	mr := &MR{
		Addr:   addr,
		Length: length,
		LKey:   key,
		RKey:   key,
		Access: access,
		buf:    buf[:len(buf):len(buf)],
		pd:     pd,
	}
	s.mr = mr
	t.live++
	t.nextAddr += span
	pd.refs++
	return mr, nil
}

// limit is the effective table size.
func (t *memTable) limit() int {
	if t.max <= 0 || t.max > mrMaxIndex {
		return mrMaxIndex
	}
	return t.max
}

// liveLimit is the most MRs registered at once.
func (t *memTable) liveLimit() int {
	if t.maxLive <= 0 {
		return t.limit()
	}
	return min(t.maxLive, t.limit())
}

// allocIndex takes the next free index after the last one handed out,
// wrapping from the largest index to 1 (rxe allocates MR indices
// cyclically). The caller has checked that one is free.
func (t *memTable) allocIndex() uint32 {
	i, ok := t.taken.next(t.next, 1, uint32(t.limit()))
	if !ok {
		panic("nic: no free MR index although the live count had room")
	}
	t.next = i + 1
	if t.next > uint32(t.limit()) {
		t.next = 1
	}
	if int(i) > len(t.slots) { // first use of this index: i == len+1
		t.slots = append(t.slots, mrSlot{})
	}
	return i
}

// deregister retires mr (ibv_dereg_mr): its keys stop resolving at once.
// EINVAL if mr is nil, already deregistered or not of this table.
func (t *memTable) deregister(mr *MR) error {
	if mr == nil {
		return errno(syscall.EINVAL, "dereg_mr: mr is nil")
	}
	if mr.dead {
		return errno(syscall.EINVAL, "dereg_mr: MR lkey %#x already deregistered", mr.LKey)
	}
	idx := mr.LKey >> 8
	if idx == 0 || int(idx) > len(t.slots) || t.slots[idx-1].mr != mr {
		return errno(syscall.EINVAL, "dereg_mr: MR lkey %#x is not registered on this device", mr.LKey)
	}
	if mr.mws > 0 {
		// IBTA §10.6.7.2.6; rxe_dereg_mr refuses it the same way.
		return errno(syscall.EINVAL, "dereg_mr: MR lkey %#x has %d memory windows bound", mr.LKey, mr.mws)
	}
	t.slots[idx-1].mr = nil
	t.taken.free(idx)
	t.live--
	mr.dead = true
	mr.pd.refs--
	return nil
}

// byLKey returns the live MR whose L_Key is k, or nil.
func (t *memTable) byLKey(k uint32) *MR {
	idx := k >> 8
	if idx == 0 || int(idx) > len(t.slots) {
		return nil
	}
	if mr := t.slots[idx-1].mr; mr != nil && mr.LKey == k {
		return mr
	}
	return nil
}

// byRKey returns the live MR whose R_Key is k, or nil.
func (t *memTable) byRKey(k uint32) *MR {
	idx := k >> 8
	if idx == 0 || int(idx) > len(t.slots) {
		return nil
	}
	if mr := t.slots[idx-1].mr; mr != nil && mr.RKey == k {
		return mr
	}
	return nil
}

// sgeBytes is the number of bytes an SGE describes: Length, where 0 means
// 2^31 (see SGE).
func sgeBytes(s *SGE) uint64 {
	if s.Length == 0 {
		return MaxMessage
	}
	return uint64(s.Length)
}

// resolve checks a work request's local SGEs against pd and returns the
// message length they describe. flow is intoMemory when the NIC writes into
// them (receive buffers, RDMA READ destinations, atomic result buffers).
//
// Call it when the WQE is executed, not only when it is posted: the user
// may deregister an MR while a request is queued, and rxe then completes
// the request with LOC_PROT_ERR.
//
// The first SGE at fault decides, checked in order: WCLocProtErr when its
// L_Key is unknown or deregistered, its MR is in another PD, its range
// leaves the MR, or flow is intoMemory and the MR lacks LOCAL_WRITE; WCLocLenErr
// when the running total passes 2^31. An SGE of length 0 (2^31 bytes) on a
// smaller MR is therefore a protection error, not a length error. msg
// names the SGE at fault; it is built only on failure.
func (t *memTable) resolve(pd *PD, sges []SGE, flow dataFlow) (total uint64, st WCStatus, msg string) {
	for i := range sges {
		s := &sges[i]
		n := sgeBytes(s)
		mr := t.byLKey(s.LKey)
		switch {
		case mr == nil:
			return 0, WCLocProtErr, fmt.Sprintf("sge[%d]: lkey %#x unknown", i, s.LKey)
		case mr.pd != pd:
			return 0, WCLocProtErr, fmt.Sprintf("sge[%d]: lkey %#x: MR in another PD", i, s.LKey)
		case !mrCovers(mr, s.Addr, n):
			return 0, WCLocProtErr, fmt.Sprintf("sge[%d]: range %#x+%d outside MR %#x+%d (lkey %#x)",
				i, s.Addr, n, mr.Addr, mr.Length, s.LKey)
		case flow == intoMemory && mr.Access&AccessLocalWrite == 0:
			return 0, WCLocProtErr, fmt.Sprintf("sge[%d]: lkey %#x: MR lacks LOCAL_WRITE", i, s.LKey)
		}
		total += n
		if total > MaxMessage {
			return 0, WCLocLenErr, fmt.Sprintf("sge[%d]: total length %d over 2^31", i, total)
		}
	}
	return total, WCSuccess, ""
}

// checkMRAccess refuses, for the verb op, access flags a region may not
// have: as the kernel's ib_check_mr_access, remote write or atomic access
// needs local write access (the HCA writes the region on the peer's
// behalf), and bits rocesim does not implement are refused.
func checkMRAccess(op string, access AccessFlags) error {
	if remote := access & (AccessRemoteWrite | AccessRemoteAtomic); remote != 0 && access&AccessLocalWrite == 0 {
		return errno(syscall.EINVAL, "%s: access %s requires LOCAL_WRITE", op, accessString(remote))
	}
	if unknown := access &^ mrAccessKnown; unknown != 0 {
		return errno(syscall.EINVAL, "%s: access has unknown bits %#x", op, uint32(unknown))
	}
	return nil
}

// roomFor reports whether the simulated address space still has span
// bytes above the next address to give.
func (t *memTable) roomFor(span uint64) bool { return t.nextAddr <= math.MaxUint64-span }

// mrCovers reports whether [va, va+n) lies inside mr, without overflow.
func mrCovers(mr *MR, va, n uint64) bool {
	return va >= mr.Addr && n <= mr.Length && va-mr.Addr <= mr.Length-n
}

// gather copies the bytes the SGEs describe into dst, which must be as
// long as their total. It assumes resolve has just succeeded on them.
func (t *memTable) gather(sges []SGE, dst []byte) { t.gatherAt(sges, 0, dst) }

// gatherAt copies len(dst) bytes of the message the SGEs describe,
// starting at byte off of the message, into dst: one packet's payload of a
// multi-packet message. It assumes resolve has just succeeded and that
// off+len(dst) is within the total; it panics otherwise, a bug of the
// caller. It does not allocate.
func (t *memTable) gatherAt(sges []SGE, off uint64, dst []byte) {
	t.copyAt(sges, off, dst, fromMemory)
}

// scatter copies src into the SGEs, starting at byte off of the message:
// the payload of one packet of a message that arrives in pieces. It
// assumes resolve has just succeeded (with intoMemory) and that off+len(src)
// is within the total; it panics otherwise, a bug of the caller. It does
// not allocate.
func (t *memTable) scatter(sges []SGE, off uint64, src []byte) {
	t.copyAt(sges, off, src, intoMemory)
}

// write copies a payload received into memory at dst, past the caches
// if the device streams its writes.
func (t *memTable) write(dst, src []byte) {
	if t.stream {
		ntcopy.Copy(dst, src)
		return
	}
	copy(dst, src)
}

// copyAt moves buf into (intoMemory) or out of the message at byte off.
func (t *memTable) copyAt(sges []SGE, off uint64, buf []byte, flow dataFlow) {
	for i := range sges {
		if len(buf) == 0 {
			return
		}
		s := &sges[i]
		n := sgeBytes(s)
		if off >= n {
			off -= n
			continue
		}
		mr := t.mustLKey(flow.String(), sges, i)
		start := s.Addr - mr.Addr + off
		k := min(n-off, uint64(len(buf)))
		if flow == intoMemory {
			t.write(mr.buf[start:start+k], buf)
		} else {
			copy(buf, mr.buf[start:start+k])
		}
		buf = buf[k:]
		off = 0
	}
	if len(buf) != 0 {
		panic(fmt.Sprintf("nic: %s: %d bytes beyond the end of the SGEs", flow, len(buf)))
	}
}

// mustLKey returns the MR of sges[i] for a copy that resolve has allowed.
func (t *memTable) mustLKey(op string, sges []SGE, i int) *MR {
	mr := t.byLKey(sges[i].LKey)
	if mr == nil || !mrCovers(mr, sges[i].Addr, sgeBytes(&sges[i])) {
		panic(fmt.Sprintf("nic: %s: sge[%d] (lkey %#x) does not resolve; call resolve just before copying",
			op, i, sges[i].LKey))
	}
	return mr
}

// remote checks an incoming RDMA READ, WRITE or ATOMIC on qp, as rxe's
// check_rkey does: the R_Key names a live MR of the QP's PD, or a window
// (see lookupRemote), the MR or window grants every right in need, and
// [va, va+length) lies inside the range allowed. On failure ok is false
// and msg says why (the responder answers NAK remote access error, 0x62).
// The MR returned is the region the bytes are in; VAs stay absolute.
//
// A zero-length READ or WRITE needs neither a valid R_Key nor VA (IBTA
// vol. 1 C9-88, as rxe's check_rkey): length 0 returns (nil, true, "").
// Atomics always pass length 8.
func (t *memTable) remote(qp *QP, rkey uint32, va uint64, length uint64, need AccessFlags) (*MR, bool, string) {
	if length == 0 {
		return nil, true, ""
	}
	if isMWKey(rkey) {
		mr, lo, n, why := t.lookupRemote(qp, rkey, need)
		switch {
		case mr == nil:
			return nil, false, why
		case va < lo || length > n || va-lo > n-length:
			return nil, false, fmt.Sprintf("rkey %#x: va range outside MW: %#x+%d not within %#x+%d", rkey, va, length, lo, n)
		}
		return mr, true, ""
	}
	mr := t.byRKey(rkey)
	switch {
	case mr == nil:
		return nil, false, fmt.Sprintf("rkey %#x unknown", rkey)
	case mr.pd != qp.pd:
		return nil, false, fmt.Sprintf("rkey %#x: MR in another PD", rkey)
	case mr.Access&need != need:
		return nil, false, fmt.Sprintf("rkey %#x: MR lacks %s", rkey, accessString(need&^mr.Access))
	case !mrCovers(mr, va, length):
		return nil, false, fmt.Sprintf("rkey %#x: va range outside MR: %#x+%d not within %#x+%d",
			rkey, va, length, mr.Addr, mr.Length)
	}
	return mr, true, ""
}

// accessString names access flags in libibverbs' words without the
// IBV_ACCESS_ prefix, e.g. "REMOTE_WRITE|REMOTE_ATOMIC", for messages.
func accessString(a AccessFlags) string {
	names := [...]string{"LOCAL_WRITE", "REMOTE_WRITE", "REMOTE_READ", "REMOTE_ATOMIC", "MW_BIND"}
	var parts []string
	for i, name := range names {
		if a&(1<<i) != 0 {
			parts = append(parts, name)
		}
	}
	if rest := a &^ mrAccessKnown; rest != 0 {
		parts = append(parts, fmt.Sprintf("%#x", uint32(rest)))
	}
	if len(parts) == 0 {
		return "0"
	}
	return strings.Join(parts, "|")
}

// mrSpan is the number of simulated address bytes an MR of length n
// occupies: its pages and one unmapped guard page after them, so that no
// two MRs are adjacent.
func mrSpan(n uint64) uint64 {
	return (n+mrPageSize-1)&^(mrPageSize-1) + mrPageSize
}

// ReregFlags say what ibv_rereg_mr changes (ibv_rereg_mr_flags).
type ReregFlags uint32

// Rereg flags.
const (
	ReregChangeTranslation ReregFlags = 1 << 0 // a new buffer (address and length)
	ReregChangePD          ReregFlags = 1 << 1
	ReregChangeAccess      ReregFlags = 1 << 2

	reregKnown = ReregChangeTranslation | ReregChangePD | ReregChangeAccess
)

// rereg changes mr in place (ibv_rereg_mr): its buffer (given a new
// simulated address), its PD and/or its access rights, keeping its keys.
// The checks libibverbs makes before calling the device come first
// (IBV_REREG_MR_ERR_INPUT, EINVAL): unknown flags, a translation without
// a buffer. Then, when the device does not support rereg (supported
// false: rxe 6.1 has no rereg_user_mr, and real rxe answers every call
// that reaches the kernel with EOPNOTSUPP, checked by conformance
// TestReregMRMatchesRxe), IBV_REREG_MR_ERR_CMD with EOPNOTSUPP. Else the
// kernel's checks (IBV_REREG_MR_ERR_CMD, EINVAL): no flag, a dead PD, the
// access rules of reg_mr. Nothing changes on an error.
func (t *memTable) rereg(mr *MR, flags ReregFlags, pd *PD, buf []byte, access AccessFlags, supported bool) error {
	switch {
	case mr == nil:
		return errno(syscall.EINVAL, "rereg_mr: mr is nil")
	case mr.dead:
		return errno(syscall.EINVAL, "rereg_mr: MR lkey %#x is deregistered", mr.LKey)
	case flags&^reregKnown != 0:
		return errno(syscall.EINVAL, "rereg_mr: IBV_REREG_MR_ERR_INPUT: flags has unknown bits %#x", uint32(flags&^reregKnown))
	case flags&ReregChangeTranslation != 0 && len(buf) == 0:
		return errno(syscall.EINVAL, "rereg_mr: IBV_REREG_MR_ERR_INPUT: CHANGE_TRANSLATION needs addr and length")
	case !supported:
		return errno(syscall.EOPNOTSUPP, "rereg_mr: IBV_REREG_MR_ERR_CMD: the device does not support rereg (rxe 6.1 has no rereg_user_mr)")
	case flags == 0:
		return errno(syscall.EINVAL, "rereg_mr: IBV_REREG_MR_ERR_CMD: flags is 0")
	}
	if flags&ReregChangePD != 0 && (pd == nil || pd.dead) {
		return errno(syscall.EINVAL, "rereg_mr: IBV_REREG_MR_ERR_CMD: pd is not a live PD")
	}
	if flags&ReregChangeAccess != 0 {
		if err := checkMRAccess("rereg_mr: IBV_REREG_MR_ERR_CMD", access); err != nil {
			return err
		}
	}
	if flags&ReregChangeTranslation != 0 {
		span := mrSpan(uint64(len(buf)))
		if !t.roomFor(span) {
			return errno(syscall.ENOMEM, "rereg_mr: IBV_REREG_MR_ERR_CMD: simulated address space exhausted")
		}
		mr.buf, mr.Addr, mr.Length = buf[:len(buf):len(buf)], t.nextAddr, uint64(len(buf))
		t.nextAddr += span
	}
	if flags&ReregChangePD != 0 {
		mr.pd.refs--
		mr.pd = pd
		pd.refs++
	}
	if flags&ReregChangeAccess != 0 {
		mr.Access = access
	}
	return nil
}

// ReregMR changes mr's buffer, PD and/or access rights (ibv_rereg_mr).
// Under the rxe profile every call that passes libibverbs' own checks
// fails with EOPNOTSUPP, as on real rxe 6.1 (see memTable.rereg).
func (d *Device) ReregMR(mr *MR, flags ReregFlags, pd *PD, buf []byte, access AccessFlags) error {
	if pd != nil && pd.dev != d {
		return errno(syscall.EINVAL, "rereg_mr: pd is not of this device")
	}
	return d.mem.rereg(mr, flags, pd, buf, access, d.cfg.Profile != ProfileRXE)
}
