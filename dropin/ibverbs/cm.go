package main

// Connection management for the drop-in librdmacm.so.1 (dropin/rdmacm):
// rdma_cm on the model, in this library because two Go c-shared
// libraries in one process would be two Go runtimes (not supported), and
// because an rdma_cm ID's QP is a QP of this library's world. The
// librdmacm side is plain C; it calls the rs_cm_* exports
// (cmexports.go, version node ROCESIM_PRIVATE_3), which call in here under
// the process lock. Pure Go, as model.go.
//
// Flow of an rdma_cm call:
//  1. the program calls rdma_connect (say); librdmacm.so.1 calls
//     rs_cm_connect with the ID's handle;
//  2. the call runs on package rdmacm's CMID, on the world's host: MADs
//     go out on QP1 as ib_cm's do, events are posted on the ID's channel;
//  3. settleCM (after every call, and after every run of the world in
//     settle) makes each channel's eventfd readable exactly while an
//     event waits, so a program that poll(2)s it, as rping's CM thread
//     does, sees what rdma_get_cm_event would find;
//  4. rdma_get_cm_event runs the world until its channel has an event,
//     as ibv_get_cq_event does for a completion channel.
//
// The CM lives on the process's first device (rocesim0): on a fabric or
// over UDP it has only that one; in a world of several devices the
// channels' IDs are all on rocesim0.

import (
	"net/netip"
	"syscall"
	"time"
	"unsafe"

	"github.com/rocesim/rocesim/rdmacm"
	"github.com/rocesim/rocesim/verbs"
)

// cmProc is the process's connection management.
type cmProc struct {
	cm    *rdmacm.CM
	chans []*cmChannel
	// The clock hold (cmHold): since when (wall time) the CM has owed
	// its peers an answer, and how many it owed then; zero while it
	// owes none.
	holdSince time.Time
	holdOwed  int
}

// cmHoldLimit bounds how long a program that owes a CONNECT_REQUEST or a
// DISCONNECTED its answer may keep the fabric's clock still before
// answering. Below the fabric's hold limit (10 s), which would detach
// the process.
const cmHoldLimit = 5 * time.Second

// cmHoldNap is how long a thread that would wait on the fabric sleeps
// instead while the clock is held.
const cmHoldNap = 100 * time.Microsecond

// cmChannel is an rdma_event_channel: the model's channel and its fd.
type cmChannel struct {
	ch        *rdmacm.EventChannel
	fd        int
	signalled bool
}

// cmID is an rdma_cm_id: the model's CMID, its handle, and the program's
// struct rdma_cm_id once librdmacm.so.1 made one (rs_cm_set_ptr).
type cmID struct {
	id  *rdmacm.CMID
	h   uint32
	ptr unsafe.Pointer
	qp  *qp // the QP rdma_create_qp attached
}

// cms holds each process's CM (one in a program; tests make several).
// Looked up under the process's lock, never iterated.
var cms = map[*process]*cmProc{}

// cmOf returns p's CM, made on first use; nil if p has no device.
func (p *process) cmOf() *cmProc {
	c := cms[p]
	if c == nil && len(p.devs) > 0 {
		c = &cmProc{cm: rdmacm.New(p.w)}
		cms[p] = c
	}
	return c
}

func (c *cmProc) chanByFD(fd int) *cmChannel {
	for _, ch := range c.chans {
		if ch.fd == fd {
			return ch
		}
	}
	return nil
}

// settleCM makes each channel's fd readable exactly while an event
// waits on it (settle calls it after each run of the world), and on a
// fabric renews the process's will when the CM has changed.
func (p *process) settleCM() {
	c := cms[p]
	if c == nil {
		return
	}
	for _, ch := range c.chans {
		if want := ch.ch.Pending() > 0; want != ch.signalled {
			p.fds.set(ch.fd, want)
			ch.signalled = want
		}
	}
	if p.fab != nil && !p.closed {
		p.renewWill() // fabric.go
	}
}

// cmCreateChannel opens an event channel (rdma_create_event_channel).
func (p *process) cmCreateChannel() (int, syscall.Errno) {
	c := p.cmOf()
	if c == nil {
		return -1, syscall.ENODEV
	}
	fd, err := p.fds.open()
	if err != nil {
		return -1, errnoOf(err)
	}
	c.chans = append(c.chans, &cmChannel{ch: c.cm.CreateEventChannel(p.devs[0].host), fd: fd})
	return fd, 0
}

// cmDestroyChannel closes a channel (rdma_destroy_event_channel).
func (p *process) cmDestroyChannel(fd int) syscall.Errno {
	c := cms[p]
	if c == nil {
		return syscall.EINVAL
	}
	ch := c.chanByFD(fd)
	if ch == nil {
		return syscall.EINVAL
	}
	c.chans = without(c.chans, ch)
	p.fds.close(fd)
	p.wakeAll() // a waiter on it finds it gone
	return 0
}

// cmCreateID creates an ID on the channel of fd (rdma_create_id).
func (p *process) cmCreateID(fd int, ps int) (uint32, syscall.Errno) {
	c := cms[p]
	if c == nil {
		return 0, syscall.EINVAL
	}
	ch := c.chanByFD(fd)
	if ch == nil {
		return 0, syscall.EINVAL
	}
	id, err := rdmacm.CreateID(ch.ch, nil, rdmacm.PortSpace(ps))
	if err != nil {
		return 0, errnoOf(err)
	}
	return p.wrapID(id).h, 0
}

// wrapID gives a model ID a handle (kept in its Context).
func (p *process) wrapID(id *rdmacm.CMID) *cmID {
	w := &cmID{id: id}
	w.h = p.add(w)
	id.Context = w
	return w
}

// cmIDOf returns the ID of handle h.
func (p *process) cmIDOf(h uint32) (*cmID, syscall.Errno) {
	w, ok := object[*cmID](p, h)
	if !ok {
		return nil, syscall.EINVAL
	}
	return w, 0
}

// The ID options rdma_set_option hands on (rdma_cma.h's
// RDMA_OPTION_ID_*); the shim checks their sizes, and takes the type of
// service and the ACK timeout itself.
const (
	cmOptionReuseAddr = 1
	cmOptionAFOnly    = 2
)

// cmSetOption sets an ID's address reuse or IPv6-only option, in the
// states the kernel takes it (rdmacm.CMID.SetReuseAddr, SetAFOnly).
func (p *process) cmSetOption(h uint32, optname int, on bool) syscall.Errno {
	w, e := p.cmIDOf(h)
	if e != 0 {
		return e
	}
	switch optname {
	case cmOptionReuseAddr:
		return errnoOf(w.id.SetReuseAddr(on))
	case cmOptionAFOnly:
		return errnoOf(w.id.SetAFOnly(on))
	}
	return syscall.ENOSYS
}

// cmDestroyID releases an ID (rdma_destroy_id).
// farewellCM destroys, at exit, the CM IDs the program left, as the
// kernel does when the process's rdma_cm file closes (ucma_close
// destroys each ID): a peer connected to one gets its DREQ and
// DISCONNECTED, a peer waiting on an unanswered request or accept its
// REJ, rather than silence until its QP or its CM times out. The IDs go
// in handle order, and their MADs leave at the process's current
// instant, before the port closes (on a fabric the daemon puts the
// frames of a process that detached on the wire with its round). Only
// on a fabric or the real network: in a world of its own a program has
// no peer left to tell.
func (p *process) farewellCM() {
	if cms[p] == nil {
		return
	}
	left := false
	for _, o := range p.objs {
		if w, ok := o.(*cmID); ok {
			left = w.id.Destroy() == nil || left // an ID destroyed already says so
		}
	}
	if left {
		// The world at its current instant only: the device hands the
		// MADs to the port; no virtual time passes.
		_ = p.w.RunTo(p.w.Now())
	}
}

func (p *process) cmDestroyID(h uint32) syscall.Errno {
	e := destroy(p, h, func(w *cmID) error { return w.id.Destroy() })
	if e == 0 {
		// The farewell MAD Destroy sent leaves now, as after any CM
		// call (a thread waiting on the fabric is woken for it), and
		// the will forgets the ID.
		p.settleCM()
		p.poke()
	}
	return e
}

// cmAddrs returns an ID's addresses (rdma_cm_id.route.addr), whether
// they are IPv6, and whether the ID has its device (an address, not the
// any address).
func (p *process) cmAddrs(h uint32) (src, dst netip.AddrPort, v6, bound bool, e syscall.Errno) {
	w, e := p.cmIDOf(h)
	if e != 0 {
		return
	}
	src, dst = w.id.LocalAddr(), w.id.RemoteAddr()
	return src, dst, w.id.IsIPv6(), src.Addr().IsValid() && !src.Addr().IsUnspecified(), 0
}

// cmAddr reads an address the program gave (4 or 16 bytes; none: the
// unspecified address).
func cmAddr(b []byte) (netip.Addr, bool) {
	switch len(b) {
	case 0:
		return netip.Addr{}, true
	case 4:
		return netip.AddrFrom4([4]byte(b)), true
	case 16:
		return netip.AddrFrom16([16]byte(b)).Unmap(), true
	}
	return netip.Addr{}, false
}

// cmBind binds an ID (rdma_bind_addr).
func (p *process) cmBind(h uint32, addr []byte, port uint16) syscall.Errno {
	w, e := p.cmIDOf(h)
	if e != 0 {
		return e
	}
	a, ok := cmAddr(addr)
	if !ok {
		return syscall.EAFNOSUPPORT
	}
	if w6(a) && p.udpTransport() {
		return syscall.EAFNOSUPPORT // see cmResolveAddr
	}
	return p.cmDone(w.id.BindAddr(netip.AddrPortFrom(a, port)))
}

// w6 reports whether a, as cmAddr read it, is IPv6 (AF_INET6 with an
// address that is not IPv4 mapped into IPv6; :: included).
func w6(a netip.Addr) bool { return a.Is6() && !a.Is4In6() }

// cmDone settles the channels after a CM call and wakes whoever waits:
// the call may have posted an event or built a MAD.
func (p *process) cmDone(err error) syscall.Errno {
	p.settleCM()
	p.poke()
	return errnoOf(err)
}

// cmListen makes a bound ID a listener (rdma_listen).
func (p *process) cmListen(h uint32, backlog int) syscall.Errno {
	w, e := p.cmIDOf(h)
	if e != 0 {
		return e
	}
	return p.cmDone(w.id.Listen(backlog))
}

// cmResolveAddr resolves dst (rdma_resolve_addr): ADDR_RESOLVED is
// posted at once when the address is a node of the fabric, ADDR_ERROR
// (-EHOSTUNREACH, as the kernel's neighbour resolution times out) when
// it is not, as rdma_cm reports a destination without a route.
func (p *process) cmResolveAddr(h uint32, src, dst []byte, port uint16, timeoutMs int) syscall.Errno {
	w, e := p.cmIDOf(h)
	if e != 0 {
		return e
	}
	s, ok1 := cmAddr(src)
	d, ok2 := cmAddr(dst)
	if !ok1 || !ok2 || !d.IsValid() {
		return syscall.EINVAL
	}
	if w6(d) && p.udpTransport() {
		// The real network's rdma_cm is IPv4 only: its socket sends
		// from the one address it was given (ROCESIM_ADDR), which an
		// IPv6 ID's link-local GID is not. (Untried: an IPv6
		// ROCESIM_ADDR, whose device has no IPv4 address either.)
		return syscall.EAFNOSUPPORT
	}
	// On a real network the device learns where the peer is here, as
	// rdma_cm's address resolution fills the neighbour (udp.go).
	p.addNeighbour(d)
	return p.cmDone(w.id.ResolveAddr(s, netip.AddrPortFrom(d, port), timeoutMs))
}

// cmJoin joins ID h to the multicast group addr (rdma_join_multicast,
// rdma_join_multicast_ex); context comes back in the event's
// param.ud.private_data.
func (p *process) cmJoin(h uint32, addr []byte, sendOnly bool, context uintptr) syscall.Errno {
	w, e := p.cmIDOf(h)
	if e != 0 {
		return e
	}
	if p.udpTransport() {
		return syscall.EOPNOTSUPP
	}
	var a netip.Addr
	switch len(addr) {
	case 4:
		a = netip.AddrFrom4([4]byte(addr))
	case 16:
		// Kept IPv6 even when IPv4-mapped: the kernel refuses an
		// AF_INET6 group on RoCE v2 whatever it holds.
		a = netip.AddrFrom16([16]byte(addr))
	default:
		return syscall.EINVAL
	}
	return p.cmDone(w.id.JoinMulticast(a, context, sendOnly))
}

// cmLeave leaves the group addr (rdma_leave_multicast).
func (p *process) cmLeave(h uint32, addr []byte) syscall.Errno {
	w, e := p.cmIDOf(h)
	if e != 0 {
		return e
	}
	a, ok := cmAddr(addr)
	if !ok || !a.IsValid() {
		return syscall.EINVAL
	}
	return p.cmDone(w.id.LeaveMulticast(a))
}

// cmResolveRoute resolves the route (rdma_resolve_route).
func (p *process) cmResolveRoute(h uint32, timeoutMs int) syscall.Errno {
	w, e := p.cmIDOf(h)
	if e != 0 {
		return e
	}
	return p.cmDone(w.id.ResolveRoute(timeoutMs))
}

// cmSetQP attaches a QP librdmacm created with ibv_create_qp to the ID,
// which moves it to INIT (rdma_create_qp); handle 0 detaches it
// (rdma_destroy_qp, before librdmacm destroys it).
func (p *process) cmSetQP(h, qph uint32) syscall.Errno {
	w, e := p.cmIDOf(h)
	if e != 0 {
		return e
	}
	if qph == 0 {
		w.qp = nil
		return p.cmDone(w.id.UseQP(nil))
	}
	q, ok := object[*qp](p, qph)
	if !ok {
		return syscall.EINVAL
	}
	if q.typ != verbs.QPTypeRC && q.typ != verbs.QPTypeUD {
		return syscall.EOPNOTSUPP // the model's CM connects RC (RDMA_PS_TCP) and UD (RDMA_PS_UDP) QPs
	}
	if err := w.id.UseQP(q.q); err != nil {
		return p.cmDone(err)
	}
	w.qp = q
	return p.cmDone(nil)
}

// cmConnect sends the REQ (rdma_connect).
func (p *process) cmConnect(h uint32, prm rdmacm.ConnParam) syscall.Errno {
	w, e := p.cmIDOf(h)
	if e != 0 {
		return e
	}
	return p.cmDone(w.id.Connect(prm))
}

// cmInitQPAttr answers rdma_init_qp_attr: the attributes that take a QP
// the program made itself (ibv_create_qp) to state.
func (p *process) cmInitQPAttr(h uint32, state verbs.QPState) (verbs.QPAttr, verbs.QPAttrMask, syscall.Errno) {
	w, e := p.cmIDOf(h)
	if e != 0 {
		return verbs.QPAttr{}, 0, e
	}
	a, m, err := w.id.InitQPAttr(state)
	return a, m, p.cmDone(err)
}

// cmEstablish sends the RTU of a connection whose QP the program made
// (rdma_establish).
func (p *process) cmEstablish(h uint32) syscall.Errno {
	w, e := p.cmIDOf(h)
	if e != 0 {
		return e
	}
	return p.cmDone(w.id.Establish())
}

// cmAccept sends the REP (rdma_accept).
func (p *process) cmAccept(h uint32, prm rdmacm.ConnParam) syscall.Errno {
	w, e := p.cmIDOf(h)
	if e != 0 {
		return e
	}
	return p.cmDone(w.id.Accept(prm))
}

// cmReject sends a REJ (rdma_reject).
func (p *process) cmReject(h uint32, priv []byte) syscall.Errno {
	w, e := p.cmIDOf(h)
	if e != 0 {
		return e
	}
	return p.cmDone(w.id.Reject(priv))
}

// cmDisconnect sends the DREQ or DREP (rdma_disconnect).
func (p *process) cmDisconnect(h uint32) syscall.Errno {
	w, e := p.cmIDOf(h)
	if e != 0 {
		return e
	}
	return p.cmDone(w.id.Disconnect())
}

// cmWaitSlice bounds one blocking rs_cm_get_event in wall time: the C
// side calls again after a cancellation point (pthread_testcancel), so a
// program can cancel a thread blocked in rdma_get_cm_event, as rping
// does with its CM thread at exit.
const cmWaitSlice = 50 * time.Millisecond

// cmGetEvent takes the channel's next event, running the world until
// there is one unless nonblock (rdma_get_cm_event; EAGAIN as its read
// of a non-blocking fd), for cmWaitSlice of wall time at most if slice
// (then ETIMEDOUT). A CONNECT_REQUEST's new ID gets its handle here.
func (p *process) cmGetEvent(fd int, nonblock, slice bool) (*rdmacm.Event, syscall.Errno) {
	c := cms[p]
	if c == nil {
		return nil, syscall.EINVAL
	}
	ch := c.chanByFD(fd)
	if ch == nil {
		return nil, syscall.EINVAL
	}
	alive := func() bool { return c.chanByFD(fd) == ch }
	if slice && ch.ch.Pending() == 0 {
		// Wake the wait when the slice is over (poke interrupts a wait
		// on the fabric); the world's time does not move for it.
		end := time.Now().Add(cmWaitSlice)
		t := time.AfterFunc(cmWaitSlice, func() {
			p.mu.Lock()
			p.tick()
			p.mu.Unlock()
		})
		defer t.Stop()
		over := false
		alive = func() bool {
			over = !time.Now().Before(end)
			return c.chanByFD(fd) == ch && !over
		}
		if e := p.waitFor(func() bool { return ch.ch.Pending() > 0 }, alive, false); e != 0 {
			if over && !p.closed && c.chanByFD(fd) == ch {
				return nil, syscall.ETIMEDOUT
			}
			return nil, cmGone(e)
		}
	}
	if e := p.waitFor(func() bool { return ch.ch.Pending() > 0 }, alive, nonblock); e != 0 {
		return nil, cmGone(e)
	}
	ev, _ := ch.ch.GetEvent()
	if ev.ID != nil && ev.ID.Context == nil {
		p.wrapID(ev.ID)
	}
	if ev.Event == rdmacm.EventConnectRequest {
		p.addNeighbour(ev.ID.RemoteAddr().Addr()) // the REP goes back there (udp.go)
	}
	p.settleCM()
	return ev, 0
}

// cmSetPtr records the program's struct rdma_cm_id of handle h.
func (p *process) cmSetPtr(h uint32, ptr unsafe.Pointer) syscall.Errno {
	w, e := p.cmIDOf(h)
	if e != 0 {
		return e
	}
	w.ptr = ptr
	return 0
}

// cmMigrate moves an ID to the channel of fd (rdma_migrate_id).
func (p *process) cmMigrate(h uint32, fd int) syscall.Errno {
	w, e := p.cmIDOf(h)
	if e != 0 {
		return e
	}
	ch := cms[p].chanByFD(fd)
	if ch == nil {
		return syscall.EINVAL
	}
	return p.cmDone(w.id.Migrate(ch.ch))
}

// waitFor runs the world until ready, as a blocking read of an event
// channel's fd waits: EAGAIN at once if nonblock (the program set
// O_NONBLOCK), EBADF if the channel is gone meanwhile (!alive: destroyed
// by another thread) or the process is shutting down.
func (p *process) waitFor(ready, alive func() bool, nonblock bool) syscall.Errno {
	for !ready() {
		if nonblock {
			return syscall.EAGAIN
		}
		if !p.waitStep(false) {
			p.await()
		}
		if p.closed || !alive() {
			return syscall.EBADF
		}
	}
	return 0
}

// readableCM counts the rdma_cm channels whose fd is readable now
// (idle.go's readable).
func (p *process) readableCM() int {
	n := 0
	if c := cms[p]; c != nil {
		for _, ch := range c.chans {
			if ch.signalled {
				n++
			}
		}
	}
	return n
}

// cmWaiting reports whether the program's CM waits on the network for
// an event (an address being resolved, a REQ, REP or DREQ unanswered)
// and owes no answer itself (a CONNECT_REQUEST not yet accepted: the
// world must not move past it, as cmHold holds a fabric's clock): a
// program asleep in poll(2) on its channel is waiting for that event
// (wakeIdle).
func (p *process) cmWaiting() bool {
	c := cms[p]
	if c == nil {
		return false
	}
	h := p.devs[0].host
	return c.cm.AwaitingNetwork(h) && c.cm.Unanswered(h) == 0
}

// cmHold reports whether the fabric's clock is held for the program: its
// CM received a REQ or a DREQ that the program has not answered yet
// (rdma_accept or rdma_reject, rdma_disconnect, rdma_destroy_id; when
// both sides disconnected at once, a second rdma_disconnect or the
// destroy), or the
// REP of a connection whose QP the program made, not yet answered with
// rdma_establish (rping -q's client moves its QP first:
// rdmacm.CM.Unanswered). The answer comes from a thread that does not
// wait on the fabric meanwhile: rping's CM thread is asleep in poll(2)
// on the channel's fd when the event comes, its main thread sets up the
// QP and buffers before rdma_accept, while its CQ thread waits in
// ibv_get_cq_event. Were the process counted as waiting then, the
// fabric would move the clock to the peer's next timer, and the REQ or
// DREQ would be sent again (6.1 s, 4.1 s of virtual time later) before
// the REP or DREP leaves, as no real host does: its user answers within
// milliseconds. So while held, a thread that would wait on the fabric
// sleeps a little (stepFabric) and the process counts as running.
//
// The hold starts when the REQ or DREQ is taken from the fabric, not
// when the program takes its event: between the two, the thread that
// brought the frame (the CQ thread) would wait again at once, and the
// clock could move before the CM thread is scheduled (TestExecRping's
// DREQ sent twice). It ends with the answer, not at the program's next
// CM call (rping calls rdma_create_qp before rdma_accept), or after
// cmHoldLimit of wall time; a new REQ or DREQ while one is owed starts
// it again.
//
// Over UDP there is nothing to hold: the clock is the wall clock, which
// moves whatever the process does. Holding there only stopped the world
// while the wall clock ran on: a frame that came meanwhile (the REQ's
// resend, an ACK) was taken late, and a CM call made during the hold
// acted at the instant of the event, its timers armed in the past.
func (p *process) cmHold() bool {
	if p.fab != nil && p.fab.udp != nil {
		return false
	}
	c := cms[p]
	if c == nil {
		return false
	}
	owed := c.cm.Unanswered(p.devs[0].host)
	switch {
	case owed == 0:
		c.holdSince, c.holdOwed = time.Time{}, 0
		return false
	case c.holdSince.IsZero() || owed > c.holdOwed:
		c.holdSince, c.holdOwed = time.Now(), owed
		return true
	}
	c.holdOwed = owed
	return time.Since(c.holdSince) < cmHoldLimit
}

// cmGone is waitFor's EBADF for rs_cm_get_event: the channel was
// destroyed, or the process is exiting, while the caller waited. A
// read(2) of librdmacm's fd blocks on then (closing an fd does not wake
// a reader), so the C side blocks too, in a cancellation point, rather
// than fail: rping's CM thread must not see an error while its main
// thread destroys the channel and exits (ECANCELED says so).
func cmGone(e syscall.Errno) syscall.Errno {
	if e == syscall.EBADF {
		return syscall.ECANCELED
	}
	return e
}
