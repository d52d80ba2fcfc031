//go:build cgo && linux

package main

// The rs_* functions glue.c calls: each takes the process lock, reads
// the C structure the program passed, calls the model and writes the
// answer back. They return 0 or an errno; glue.c turns that into what
// the libibverbs verb returns.

/*
#cgo CFLAGS: -std=gnu11 -Wall -Werror
// The Go runtime's calls of pthread_create, and only those, reach
// ownthreads.c, which notes the threads the library makes.
#cgo LDFLAGS: -Wl,--wrap=pthread_create
#include <stdlib.h>
#include "glue.h"
#include "ownthreads.h"

static inline void *rs_ptr(uint64_t a) { return (void *)(uintptr_t)a; }

#include <unistd.h>
#include <sys/syscall.h>

// The calling thread's kernel TID, asked of the kernel once per thread
// (threads.go watches the program's threads by it).
static inline int rs_tid(void)
{
	static __thread int tid;

	if (!tid)
		tid = syscall(SYS_gettid);
	return tid;
}
*/
import "C"

import (
	"encoding/binary"
	"net/netip"
	"os"
	"slices"
	"sync"
	"sync/atomic"
	"syscall"
	"time"
	"unsafe"

	"github.com/rocesim/rocesim/nic"
	"github.com/rocesim/rocesim/verbs"
)

// proc is the process's model, made on the first verb (a program that
// only loads the library pays nothing). If the environment asks for
// something impossible, that is said once on stderr and the process has
// no devices: ibv_get_device_list returns an empty list.
var (
	proc     *process
	procOnce sync.Once
)

// lock takes the process lock, building the model first if need be.
func lock() *process {
	procOnce.Do(func() {
		cfg, err := readConfig(os.Getenv)
		if err == nil {
			proc, err = newProcess(cfg, eventFDs{}, os.Stderr, osExit)
		}
		if err != nil {
			os.Stderr.WriteString("rocesim: " + err.Error() + "\n")
			proc = emptyProcess()
			return
		}
		proc.threads.self = func() int32 { return int32(C.rs_tid()) }
		proc.threads.inside = (*int32)(unsafe.Pointer(&C.rs_inside))
		proc.threads.list = programThreads
		if proc.cfg.IdleWake > 0 {
			go proc.idleLoop(proc.cfg.IdleWake, time.Sleep)
		}
	})
	proc.enter()
	return proc
}

func errC(e syscall.Errno) C.int { return C.int(e) }

// programThreads lists the process's threads but those the library made
// (ownthreads.c): the Go runtime's threads, which run when its collector
// pleases, are never the program's, young or not. The process's list is
// read first, the notes after: a thread listed was made, or is being
// made, by then.
func programThreads() []int32 {
	tids := listTasks()
	own := ownTIDs(nil, tids)
	return slices.DeleteFunc(tids, func(tid int32) bool { return slices.Contains(own, tid) })
}

// ownTIDs appends to buf the TIDs of the threads the library made
// (ownthreads.c), those exiting included, and returns it. listed is the
// process's threads, read just before: a thread being made shows there
// before its note, so ownTIDs first waits for the makings in progress to
// end, at most ownWait (a maker waits only for its thread's first steps;
// the caller holds the process lock meanwhile). A slot whose thread
// exited (marked, and gone from listed) is freed for the next thread.
func ownTIDs(buf, listed []int32) []int32 {
	making := (*int32)(unsafe.Pointer(&C.rs_own_making))
	if atomic.LoadInt32(making) > 0 {
		for end := time.Now().Add(ownWait); atomic.LoadInt32(making) > 0 && time.Now().Before(end); {
			time.Sleep(20 * time.Microsecond)
		}
	}
	tids := (*[ownMax]int32)(unsafe.Pointer(&C.rs_own_tids))
	for i := range tids {
		tid := atomic.LoadInt32(&tids[i])
		switch {
		case tid > 0:
			buf = append(buf, tid)
		case tid < 0 && !slices.Contains(listed, -tid):
			atomic.CompareAndSwapInt32(&tids[i], tid, 0) // it has exited
		case tid < 0:
			buf = append(buf, -tid) // exiting
		}
	}
	return buf
}

// ownMax is how many of the library's threads can be noted at once
// (ownthreads.h); a thread past it counts as the program's.
const ownMax = C.RS_OWN_MAX

// ownWait bounds ownTIDs' wait for a thread being made.
const ownWait = 10 * time.Millisecond

//export rs_device_count
func rs_device_count() C.int {
	p := lock()
	defer p.mu.Unlock()
	return C.int(len(p.devs))
}

// rs_device_name writes device i's name (ROCESIM_DEVICE_PREFIX and its
// index: rocesim0 by default) into buf, n bytes with the NUL, and returns
// its length; 0 if there is no such device or it would not fit.
//
//export rs_device_name
func rs_device_name(i C.int, buf *C.char, n C.int) C.int {
	p := lock()
	defer p.mu.Unlock()
	if i < 0 || int(i) >= len(p.devs) || buf == nil || int(n) <= len(p.devs[i].name) {
		return 0
	}
	dst := unsafe.Slice((*byte)(unsafe.Pointer(buf)), int(n))
	k := copy(dst, p.devs[i].name)
	dst[k] = 0
	return C.int(k)
}

//export rs_device_guid
func rs_device_guid(i C.int) C.__be64 {
	p := lock()
	defer p.mu.Unlock()
	if i < 0 || int(i) >= len(p.devs) {
		return 0
	}
	return bigEndian64(p.devs[i].admin.QueryDevice().NodeGUID)
}

// bigEndian64 returns v as a __be64 holds it.
func bigEndian64(v uint64) C.__be64 {
	var b [8]byte
	binary.BigEndian.PutUint64(b[:], v)
	return C.__be64(binary.NativeEndian.Uint64(b[:]))
}

//export rs_open
func rs_open(dev C.int, h *C.uint32_t, fd *C.int) C.int {
	p := lock()
	defer p.mu.Unlock()
	v, f, err := p.open(int(dev))
	*h, *fd = C.uint32_t(v), C.int(f)
	return errC(err)
}

//export rs_close
func rs_close(h C.uint32_t) C.int {
	p := lock()
	defer p.mu.Unlock()
	return errC(p.close(uint32(h)))
}

//export rs_exit
func rs_exit() {
	p := lock()
	defer p.mu.Unlock()
	p.shutdown()
}

//export rs_get_async_event
func rs_get_async_event(h C.uint32_t, nonblock C.int, ev *C.struct_ibv_async_event) C.int {
	p := lock()
	defer p.mu.Unlock()
	e, err := p.getAsyncEvent(uint32(h), nonblock != 0)
	if err != 0 {
		return errC(err)
	}
	C.rs_set_async_event(ev, e.element, C.int(e.port), C.int(e.typ))
	return 0
}

// rxe's values for what ibv_device_attr and ibv_port_attr have and the
// model does not keep (rxe_param.h), as `ibv_devinfo -v` prints them for
// rxe0 in the conformance guest (Linux 6.1); the limits come from the
// model, which the conformance suite's TestDeviceAttrMatchesRxe checks.
const (
	rxeVendorID        = 0xffffff
	rxePageSizeCap     = 0xfffff000
	rxeDeviceCapFlags  = 0x01223c76
	rxeMaxResRdAtom    = 258048
	rxeMaxPKeys        = 64
	rxeLocalCAAckDelay = 15
	rxeMaxMsgSize      = 0x800000
	rxePortCapFlags    = 0x00010000 // IB_PORT_CM_SUP
	// rxeGIDTableLen is the GID table's length: the entries past the
	// device's addresses read as zero GIDs, as on rxe.
	rxeGIDTableLen = 1024
)

//export rs_query_device
func rs_query_device(h C.uint32_t, a *C.struct_ibv_device_attr) C.int {
	p := lock()
	defer p.mu.Unlock()
	ctx, ok := object[*devContext](p, uint32(h))
	if !ok {
		return errC(syscall.EINVAL)
	}
	m := ctx.c.QueryDevice()
	for i := 0; i < len(m.FWVer) && i < len(a.fw_ver)-1; i++ {
		a.fw_ver[i] = C.char(m.FWVer[i])
	}
	a.node_guid = bigEndian64(m.NodeGUID)
	a.sys_image_guid = a.node_guid
	a.max_mr_size = C.uint64_t(m.MaxMRSize)
	a.page_size_cap = rxePageSizeCap
	a.vendor_id = rxeVendorID
	a.device_cap_flags = rxeDeviceCapFlags
	a.max_qp = C.int(m.MaxQP)
	a.max_qp_wr = C.int(m.MaxQPWR)
	a.max_sge = C.int(m.MaxSGE)
	a.max_sge_rd = C.int(m.MaxSGE)
	a.max_cq = C.int(m.MaxCQ)
	a.max_cqe = C.int(m.MaxCQE)
	a.max_mr = C.int(m.MaxMR)
	a.max_pd = C.int(m.MaxPD)
	a.max_qp_rd_atom = C.int(m.MaxQPRdAtom)
	a.max_qp_init_rd_atom = C.int(m.MaxQPInitRdAtom)
	a.max_res_rd_atom = rxeMaxResRdAtom
	a.max_mcast_grp, a.max_mcast_qp_attach, a.max_total_mcast_qp_attach = C.int(m.MaxMcastGrp), C.int(m.MaxMcastQPAttach), C.int(m.MaxTotalMcastQPAttach)
	switch m.AtomicCap {
	case "ATOMIC_HCA":
		a.atomic_cap = C.IBV_ATOMIC_HCA
	case "ATOMIC_GLOB":
		a.atomic_cap = C.IBV_ATOMIC_GLOB
	default:
		a.atomic_cap = C.IBV_ATOMIC_NONE
	}
	a.max_mw = C.int(m.MaxMW)
	a.max_ah = C.int(m.MaxAH)
	a.max_srq = C.int(m.MaxSRQ)
	a.max_srq_wr = C.int(m.MaxSRQWR)
	a.max_srq_sge = C.int(m.MaxSRQSGE)
	a.max_pkeys = rxeMaxPKeys
	a.local_ca_ack_delay = rxeLocalCAAckDelay
	a.phys_port_cnt = C.uint8_t(m.PhysPortCnt)
	return 0
}

//export rs_query_port
func rs_query_port(h C.uint32_t, port C.uint8_t, a *C.struct_ibv_port_attr) C.int {
	p := lock()
	defer p.mu.Unlock()
	ctx, ok := object[*devContext](p, uint32(h))
	if !ok {
		return errC(syscall.EINVAL)
	}
	m, err := ctx.c.QueryPort(int(port))
	if err != nil {
		return errC(errnoOf(err))
	}
	a.state = C.IBV_PORT_DOWN
	a.phys_state = 3 // disabled
	if m.State == "ACTIVE" {
		a.state = C.IBV_PORT_ACTIVE
		a.phys_state = 5 // link up
	}
	// rxe reports max_mtu 4096 whatever its netdev's MTU
	// (RXE_PORT_MAX_MTU); the model's QueryPort says the path MTU the
	// link allows there, so the C ABI says rxe's.
	a.max_mtu = C.IBV_MTU_4096
	a.active_mtu = uint32(m.ActiveMTU)
	a.gid_tbl_len = rxeGIDTableLen
	a.port_cap_flags = rxePortCapFlags
	a.pkey_tbl_len = C.uint16_t(m.PKeyTblLen)
	a.max_msg_sz = rxeMaxMsgSize
	a.max_vl_num = 1
	a.active_width = 1 // 1X
	a.active_speed = 1 // SDR: rxe reports what the netdev's speed maps to
	a.link_layer = C.IBV_LINK_LAYER_ETHERNET
	return 0
}

//export rs_query_gid
func rs_query_gid(h C.uint32_t, port C.uint8_t, index C.int, gid *C.uint8_t) C.int {
	p := lock()
	defer p.mu.Unlock()
	ctx, ok := object[*devContext](p, uint32(h))
	if !ok {
		return errC(syscall.EINVAL)
	}
	g, err := ctx.c.QueryGID(int(port), int(index))
	var b [16]byte
	switch {
	case err == nil:
		b = g.As16()
	case port == 1 && index >= 0 && index < rxeGIDTableLen:
		// an empty entry: a zero GID, as libibverbs reads it from sysfs
	default:
		return errC(errnoOf(err))
	}
	copy(unsafe.Slice((*byte)(unsafe.Pointer(gid)), 16), b[:])
	return 0
}

//export rs_query_pkey
func rs_query_pkey(h C.uint32_t, port C.uint8_t, index C.int, pkey *C.__be16) C.int {
	p := lock()
	defer p.mu.Unlock()
	ctx, ok := object[*devContext](p, uint32(h))
	if !ok {
		return errC(syscall.EINVAL)
	}
	k, err := ctx.c.QueryPKey(int(port), int(index))
	if err != nil {
		return errC(errnoOf(err))
	}
	binary.BigEndian.PutUint16(unsafe.Slice((*byte)(unsafe.Pointer(pkey)), 2), k)
	return 0
}

//export rs_alloc_pd
func rs_alloc_pd(h C.uint32_t, pd *C.uint32_t) C.int {
	p := lock()
	defer p.mu.Unlock()
	v, err := p.allocPD(uint32(h))
	*pd = C.uint32_t(v)
	return errC(err)
}

//export rs_dealloc_pd
func rs_dealloc_pd(h C.uint32_t) C.int {
	p := lock()
	defer p.mu.Unlock()
	return errC(p.deallocPD(uint32(h)))
}

// accessOptionalRange is IBV_ACCESS_OPTIONAL_RANGE (bits 20 to 29,
// IBV_ACCESS_RELAXED_ORDERING the first): access bits a device that does
// not know them ignores (the kernel's IB_ACCESS_OPTIONAL, which
// ib_check_mr_access lets through), as rxe does. perftest asks for
// relaxed ordering on every MR.
const accessOptionalRange = 0x3ff << 20

//export rs_reg_mr
func rs_reg_mr(pd C.uint32_t, addr unsafe.Pointer, length C.size_t, iova C.uint64_t, access C.uint,
	h, lkey, rkey *C.uint32_t) C.int {
	p := lock()
	defer p.mu.Unlock()
	if addr == nil && length != 0 {
		// The kernel cannot pin the page at 0 (ib_umem_get): EFAULT.
		return errC(syscall.EFAULT)
	}
	// The region is the program's own memory, outside Go's heap: the
	// device reads and writes it directly, as a NIC DMAs into pinned
	// pages.
	var buf []byte
	if length != 0 {
		buf = unsafe.Slice((*byte)(addr), int(length))
	}
	v, m, err := p.regMR(uint32(pd), buf, uint64(iova), verbs.AccessFlags(access&^accessOptionalRange))
	if err != 0 {
		return errC(err)
	}
	*h, *lkey, *rkey = C.uint32_t(v), C.uint32_t(m.mr.LKey), C.uint32_t(m.mr.RKey)
	return 0
}

//export rs_rereg_mr
func rs_rereg_mr(h C.uint32_t, flags C.int, pd C.uint32_t, addr unsafe.Pointer, length C.size_t, access C.int) C.int {
	p := lock()
	defer p.mu.Unlock()
	var buf []byte
	if verbs.ReregFlags(flags)&verbs.ReregChangeTranslation != 0 {
		buf = unsafe.Slice((*byte)(addr), int(length)) // C checked both are set
	}
	return errC(p.reregMR(uint32(h), verbs.ReregFlags(flags), uint32(pd), buf, uint64(uintptr(addr)), verbs.AccessFlags(access&^accessOptionalRange)))
}

//export rs_dereg_mr
func rs_dereg_mr(h C.uint32_t) C.int {
	p := lock()
	defer p.mu.Unlock()
	return errC(p.deregMR(uint32(h)))
}

//export rs_alloc_mw
func rs_alloc_mw(pd C.uint32_t, typ C.int, h, rkey *C.uint32_t) C.int {
	p := lock()
	defer p.mu.Unlock()
	v, k, err := p.allocMW(uint32(pd), verbs.MWType(typ))
	*h, *rkey = C.uint32_t(v), C.uint32_t(k)
	return errC(err)
}

//export rs_dealloc_mw
func rs_dealloc_mw(h C.uint32_t) C.int {
	p := lock()
	defer p.mu.Unlock()
	return errC(p.deallocMW(uint32(h)))
}

//export rs_bind_mw
func rs_bind_mw(qp, mw C.uint32_t, wrID C.uint64_t, flags C.uint, mr C.uint32_t, addr, length C.uint64_t,
	access C.uint, rkey *C.uint32_t) C.int {
	p := lock()
	defer p.mu.Unlock()
	k, err := p.bindMW(uint32(qp), uint32(mw), verbs.MWBind{WRID: uint64(wrID), SendFlags: verbs.SendFlags(flags),
		BindInfo: verbs.BindInfo{Addr: uint64(addr), Length: uint64(length), Access: verbs.AccessFlags(access)}}, uint32(mr))
	*rkey = C.uint32_t(k)
	return errC(err)
}

//export rs_create_comp_channel
func rs_create_comp_channel(h C.uint32_t, fd *C.int) C.int {
	p := lock()
	defer p.mu.Unlock()
	f, err := p.createCompChannel(uint32(h))
	*fd = C.int(f)
	return errC(err)
}

//export rs_destroy_comp_channel
func rs_destroy_comp_channel(fd C.int) C.int {
	p := lock()
	defer p.mu.Unlock()
	return errC(p.destroyCompChannel(int(fd)))
}

//export rs_create_cq
func rs_create_cq(h C.uint32_t, cqe, chFD, vector C.int, c unsafe.Pointer, out *C.uint32_t, actual *C.int) C.int {
	p := lock()
	defer p.mu.Unlock()
	v, n, err := p.createCQ(uint32(h), int(cqe), int(chFD), int(vector), c)
	*out, *actual = C.uint32_t(v), C.int(n)
	return errC(err)
}

//export rs_resize_cq
func rs_resize_cq(h C.uint32_t, cqe C.int, actual *C.int) C.int {
	p := lock()
	defer p.mu.Unlock()
	v, ok := object[*cq](p, uint32(h))
	if !ok {
		return errC(syscall.EINVAL)
	}
	if err := v.q.Resize(int(cqe)); err != nil {
		return errC(errnoOf(err))
	}
	*actual = C.int(v.q.CQE())
	return 0
}

//export rs_destroy_cq
func rs_destroy_cq(h C.uint32_t) C.int {
	p := lock()
	defer p.mu.Unlock()
	return errC(p.destroyCQ(uint32(h)))
}

//export rs_req_notify_cq
func rs_req_notify_cq(h C.uint32_t, solicited C.int) C.int {
	p := lock()
	defer p.mu.Unlock()
	v, ok := object[*cq](p, uint32(h))
	if !ok {
		return errC(syscall.EINVAL)
	}
	err := errnoOf(v.q.ReqNotify(solicited != 0))
	if err == 0 && v.ch != nil {
		v.ch.armed = true
	}
	return errC(err)
}

//export rs_poll_cq
func rs_poll_cq(h C.uint32_t, n C.int, wc *C.struct_ibv_wc) C.int {
	p := lock()
	defer p.mu.Unlock()
	wcs := p.wcs[:min(int(n), pollBatch)] // the process's scratch: no copy of 64 WCs to clear per call
	got, err := p.poll(uint32(h), wcs)
	if err != 0 {
		return -errC(err)
	}
	out := unsafe.Slice(wc, got)
	for i := range got {
		w, o := &wcs[i], &out[i]
		*o = C.struct_ibv_wc{}
		o.wr_id = C.uint64_t(w.WRID)
		o.status = uint32(w.Status)
		o.opcode = uint32(w.Opcode)
		o.vendor_err = C.uint32_t(w.VendorErr)
		o.byte_len = C.uint32_t(w.ByteLen)
		o.qp_num = C.uint32_t(w.QPNum)
		o.src_qp = C.uint32_t(w.SrcQP)
		o.wc_flags = C.uint(w.WCFlags)
		o.pkey_index = C.uint16_t(w.PKeyIndex)
		o.slid = C.uint16_t(w.SLID)
		o.sl = C.uint8_t(w.SL)
		o.dlid_path_bits = C.uint8_t(w.DLIDPathBits)
		if w.WCFlags&verbs.WCFlagWithImm != 0 || w.Invalidated() {
			inv := C.int(0)
			if w.Invalidated() {
				inv = 1
			}
			C.rs_wc_set_imm(o, C.uint32_t(w.ImmData), inv)
		}
	}
	return C.int(got)
}

//export rs_get_cq_event
func rs_get_cq_event(fd, nonblock C.int, cqp *unsafe.Pointer) C.int {
	p := lock()
	defer p.mu.Unlock()
	c, err := p.getCQEvent(int(fd), nonblock != 0)
	*cqp = c
	return errC(err)
}

//export rs_ack_cq_events
func rs_ack_cq_events(h C.uint32_t, n C.uint) {
	p := lock()
	defer p.mu.Unlock()
	if v, ok := object[*cq](p, uint32(h)); ok {
		v.q.AckEvents(int(n))
		v.unacked = max(v.unacked-int(n), 0)
		p.wakeAll() // a destroy_cq may wait for this (destroyCQ)
	}
}

//export rs_create_qp
func rs_create_qp(pd C.uint32_t, a *C.struct_ibv_qp_init_attr, c unsafe.Pointer, h, qpn *C.uint32_t) C.int {
	p := lock()
	defer p.mu.Unlock()
	ia := qpInit{typ: verbs.QPType(a.qp_type), sigAll: a.sq_sig_all != 0, cap: verbs.QPCap{
		MaxSendWR: uint32(a.cap.max_send_wr), MaxRecvWR: uint32(a.cap.max_recv_wr),
		MaxSendSGE: uint32(a.cap.max_send_sge), MaxRecvSGE: uint32(a.cap.max_recv_sge),
		MaxInlineData: uint32(a.cap.max_inline_data)}}
	if a.send_cq != nil {
		ia.sendCQ = uint32(a.send_cq.handle)
	}
	if a.recv_cq != nil {
		ia.recvCQ = uint32(a.recv_cq.handle)
	}
	if a.srq != nil {
		ia.srq = uint32(a.srq.handle)
	}
	v, n, cp, err := p.createQP(uint32(pd), ia, c)
	if err != 0 {
		return errC(err)
	}
	*h, *qpn = C.uint32_t(v), C.uint32_t(n)
	// As libibverbs: the caps the QP got go back to the caller.
	a.cap.max_send_wr, a.cap.max_recv_wr = C.uint32_t(cp.MaxSendWR), C.uint32_t(cp.MaxRecvWR)
	a.cap.max_send_sge, a.cap.max_recv_sge = C.uint32_t(cp.MaxSendSGE), C.uint32_t(cp.MaxRecvSGE)
	a.cap.max_inline_data = C.uint32_t(cp.MaxInlineData)
	return 0
}

func ahFromC(a *C.struct_ibv_ah_attr) verbs.AHAttr {
	return verbs.AHAttr{IsGlobal: a.is_global != 0, DLID: uint16(a.dlid), SL: uint8(a.sl),
		SrcPathBits: uint8(a.src_path_bits), StaticRate: uint8(a.static_rate), PortNum: uint8(a.port_num),
		GRH: verbs.GRH{DGID: netip.AddrFrom16(*(*[16]byte)(unsafe.Pointer(&a.grh.dgid))), FlowLabel: uint32(a.grh.flow_label),
			SGIDIndex: uint8(a.grh.sgid_index), HopLimit: uint8(a.grh.hop_limit), TrafficClass: uint8(a.grh.traffic_class)}}
}

func ahToC(m verbs.AHAttr, a *C.struct_ibv_ah_attr) {
	a.is_global = 0
	if m.IsGlobal {
		a.is_global = 1
	}
	a.dlid, a.sl, a.src_path_bits = C.uint16_t(m.DLID), C.uint8_t(m.SL), C.uint8_t(m.SrcPathBits)
	a.static_rate, a.port_num = C.uint8_t(m.StaticRate), C.uint8_t(m.PortNum)
	if m.GRH.DGID.IsValid() {
		*(*[16]byte)(unsafe.Pointer(&a.grh.dgid)) = m.GRH.DGID.As16()
	}
	a.grh.flow_label, a.grh.sgid_index = C.uint32_t(m.GRH.FlowLabel), C.uint8_t(m.GRH.SGIDIndex)
	a.grh.hop_limit, a.grh.traffic_class = C.uint8_t(m.GRH.HopLimit), C.uint8_t(m.GRH.TrafficClass)
}

//export rs_modify_qp
func rs_modify_qp(h C.uint32_t, a *C.struct_ibv_qp_attr, mask C.int, state *C.int) C.int {
	p := lock()
	defer p.mu.Unlock()
	m := verbs.QPAttr{QPState: verbs.QPState(a.qp_state), CurQPState: verbs.QPState(a.cur_qp_state),
		PathMTU: verbs.MTU(a.path_mtu), PathMigState: uint8(a.path_mig_state), QKey: uint32(a.qkey),
		RQPSN: uint32(a.rq_psn), SQPSN: uint32(a.sq_psn), DestQPNum: uint32(a.dest_qp_num),
		QPAccessFlags: verbs.AccessFlags(a.qp_access_flags),
		Cap: verbs.QPCap{MaxSendWR: uint32(a.cap.max_send_wr), MaxRecvWR: uint32(a.cap.max_recv_wr),
			MaxSendSGE: uint32(a.cap.max_send_sge), MaxRecvSGE: uint32(a.cap.max_recv_sge), MaxInlineData: uint32(a.cap.max_inline_data)},
		AHAttr: ahFromC(&a.ah_attr), AltAHAttr: ahFromC(&a.alt_ah_attr),
		PKeyIndex: uint16(a.pkey_index), AltPKeyIndex: uint16(a.alt_pkey_index),
		EnSQDAsyncNotify: a.en_sqd_async_notify != 0, MaxRdAtomic: uint8(a.max_rd_atomic),
		MaxDestRdAtomic: uint8(a.max_dest_rd_atomic), MinRNRTimer: uint8(a.min_rnr_timer), PortNum: uint8(a.port_num),
		Timeout: uint8(a.timeout), RetryCnt: uint8(a.retry_cnt), RNRRetry: uint8(a.rnr_retry),
		AltPortNum: uint8(a.alt_port_num), AltTimeout: uint8(a.alt_timeout), RateLimit: uint32(a.rate_limit)}
	st, err := p.modifyQP(uint32(h), &m, verbs.QPAttrMask(mask))
	*state = C.int(st)
	return errC(err)
}

//export rs_query_qp
func rs_query_qp(h C.uint32_t, a *C.struct_ibv_qp_attr, mask C.int, ia *C.struct_ibv_qp_init_attr) C.int {
	p := lock()
	defer p.mu.Unlock()
	m, init, err := p.queryQP(uint32(h))
	if err != 0 {
		return errC(err)
	}
	a.qp_state, a.cur_qp_state = uint32(m.QPState), uint32(m.CurQPState)
	a.path_mtu, a.path_mig_state = uint32(m.PathMTU), uint32(m.PathMigState)
	a.qkey, a.rq_psn, a.sq_psn, a.dest_qp_num = C.uint32_t(m.QKey), C.uint32_t(m.RQPSN), C.uint32_t(m.SQPSN), C.uint32_t(m.DestQPNum)
	a.qp_access_flags = C.uint(m.QPAccessFlags)
	// What the QP holds (rxe's query_qp: the queues at their rounded
	// sizes), in both; create_qp answered with the counts asked for.
	capToC(m.Cap, &a.cap)
	capToC(m.Cap, &ia.cap)
	ahToC(m.AHAttr, &a.ah_attr)
	ahToC(m.AltAHAttr, &a.alt_ah_attr)
	a.pkey_index, a.alt_pkey_index = C.uint16_t(m.PKeyIndex), C.uint16_t(m.AltPKeyIndex)
	if m.SQDraining {
		a.sq_draining = 1
	}
	a.max_rd_atomic, a.max_dest_rd_atomic = C.uint8_t(m.MaxRdAtomic), C.uint8_t(m.MaxDestRdAtomic)
	a.min_rnr_timer, a.port_num, a.timeout = C.uint8_t(m.MinRNRTimer), C.uint8_t(m.PortNum), C.uint8_t(m.Timeout)
	a.retry_cnt, a.rnr_retry = C.uint8_t(m.RetryCnt), C.uint8_t(m.RNRRetry)
	a.alt_port_num, a.alt_timeout, a.rate_limit = C.uint8_t(m.AltPortNum), C.uint8_t(m.AltTimeout), C.uint32_t(m.RateLimit)
	if init.SQSigAll {
		ia.sq_sig_all = 1
	}
	return 0
}

func capToC(c nic.QPCap, o *C.struct_ibv_qp_cap) {
	o.max_send_wr, o.max_recv_wr = C.uint32_t(c.MaxSendWR), C.uint32_t(c.MaxRecvWR)
	o.max_send_sge, o.max_recv_sge = C.uint32_t(c.MaxSendSGE), C.uint32_t(c.MaxRecvSGE)
	o.max_inline_data = C.uint32_t(c.MaxInlineData)
}

//export rs_mcast
func rs_mcast(h C.uint32_t, gid *C.uint8_t, lid C.uint16_t, attach C.int) C.int {
	p := lock()
	defer p.mu.Unlock()
	return errC(p.mcast(uint32(h), netip.AddrFrom16([16]byte(unsafe.Slice((*byte)(gid), 16))), uint16(lid), attach != 0))
}

//export rs_destroy_qp
func rs_destroy_qp(h C.uint32_t) C.int {
	p := lock()
	defer p.mu.Unlock()
	return errC(p.destroyQP(uint32(h)))
}

// maxSGE bounds the num_sge read from a work request before the device
// checks it against the QP's own limit: a garbage count must not make
// the library read far past the program's array.
const maxSGE = 1 << 10

// inlineLen is the bytes the SGEs name in all.
func inlineLen(sges []verbs.SGE) uint64 {
	var n uint64
	for _, s := range sges {
		n += uint64(s.Length)
	}
	return n
}

func sgesFromC(sg *C.struct_ibv_sge, n C.int) ([]verbs.SGE, bool) {
	if n < 0 || n > maxSGE || (sg == nil && n > 0) {
		return nil, false
	}
	out := make([]verbs.SGE, n)
	for i, s := range unsafe.Slice(sg, int(n)) {
		out[i] = verbs.SGE{Addr: uint64(s.addr), Length: uint32(s.length), LKey: uint32(s.lkey)}
	}
	return out, true
}

//export rs_post_send
func rs_post_send(h C.uint32_t, wr *C.struct_ibv_send_wr, bad **C.struct_ibv_send_wr) C.int {
	p := lock()
	defer p.mu.Unlock()
	return p.postSendChain(h, wr, bad)
}

// rs_wr_complete posts the n WRs an extended QP's builders chained since
// ibv_wr_start (extended.c), all of them or none: ENOSPC when the send
// queue has no room for them all (rxe's builders fill the queue in place
// and ibv_wr_complete then fails whole), or the errno of the first WR
// the device would refuse.
//
//export rs_wr_complete
func rs_wr_complete(h C.uint32_t, wr *C.struct_ibv_send_wr, n C.int) C.int {
	p := lock()
	defer p.mu.Unlock()
	v, ok := object[*qp](p, uint32(h))
	if !ok {
		return errC(syscall.EINVAL)
	}
	if int(n) > v.q.SendRoom() {
		return errC(syscall.ENOSPC)
	}
	// Every WR is checked before any is posted: a batch the device
	// would refuse part of is refused whole.
	_, init := v.q.Query()
	wrs := make([]verbs.SendWR, 0, int(n))
	for c := wr; c != nil; c = c.next {
		w, err := sendWRFromC(c, v.typ == verbs.QPTypeUD, init.Cap)
		if err == 0 {
			w.wr, _, err = p.prepareSend(v, &w)
		}
		if err != 0 {
			return errC(err)
		}
		wrs = append(wrs, w.wr)
	}
	if _, err := v.q.CheckSend(wrs); err != nil {
		return errC(errnoOf(err))
	}
	// Posted from the C chain again, one WR at a time: the checked
	// list's inline WRs all point at the context's one bounce buffer,
	// which holds only the last one's bytes.
	var bad *C.struct_ibv_send_wr
	return p.postSendChain(h, wr, &bad)
}

// postSendChain posts the chain from wr on QP h, up to the first WR the
// device refuses (set in *bad).
func (p *process) postSendChain(h C.uint32_t, wr *C.struct_ibv_send_wr, bad **C.struct_ibv_send_wr) C.int {
	// rxe_post_send clears *bad_wr first and refuses an empty list.
	*bad = nil
	if wr == nil {
		return errC(syscall.EINVAL)
	}
	v, ok := object[*qp](p, uint32(h))
	if !ok {
		*bad = wr
		return errC(syscall.EINVAL)
	}
	a, init := v.q.Query()
	switch a.QPState {
	case verbs.QPStateReset, verbs.QPStateInit, verbs.QPStateRTR:
		// rxe's provider checks each WR (validate_send_wr: *bad_wr at
		// the first it refuses), writes the good ones into the send
		// queue and rings the doorbell, which the kernel refuses for a
		// QP not ready to send (rxe_post_send): EINVAL, *bad_wr NULL
		// if every WR was good (TestPostChecksMatchRxe). The WRs are
		// not kept here.
		for ; wr != nil; wr = wr.next {
			if !providerValid(wr, v.typ, init.Cap) {
				*bad = wr
				break
			}
		}
		return errC(syscall.EINVAL)
	}
	for ; wr != nil; wr = wr.next {
		w, err := sendWRFromC(wr, v.typ == verbs.QPTypeUD, init.Cap)
		if err == 0 {
			err = p.postSend(uint32(h), &w)
		}
		if err != 0 {
			*bad = wr
			return errC(err)
		}
	}
	return 0
}

// providerValid is rxe's provider's own check of a send WR before it
// reaches the device (validate_send_wr): the SGE count within the QP's,
// an atomic's 8 bytes and alignment, inline data within the QP's, and a
// BIND_MW with no data, on RC or UC (its imm_data, which rxe also wants
// 0, is not read here).
func providerValid(wr *C.struct_ibv_send_wr, t verbs.QPType, c nic.QPCap) bool {
	sges, ok := sgesFromC(wr.sg_list, wr.num_sge)
	if !ok || len(sges) > int(c.MaxSendSGE) {
		return false
	}
	w, err := sendWRFromC(wr, t == verbs.QPTypeUD, nic.QPCap{}) // no inline data read: none fits 0 bytes
	if err != 0 && verbs.WROpcode(wr.opcode) != verbs.WRBindMW {
		return false
	}
	n := inlineLen(sges)
	switch verbs.WROpcode(wr.opcode) {
	case verbs.WRAtomicCmpAndSwp, verbs.WRAtomicFetchAndAdd:
		if n < 8 || w.wr.RemoteAddr&7 != 0 {
			return false
		}
	case verbs.WRBindMW:
		if n != 0 || len(sges) != 0 || t != verbs.QPTypeRC && t != verbs.QPTypeUC {
			return false
		}
	}
	return verbs.SendFlags(wr.send_flags)&verbs.SendInline == 0 || n <= uint64(c.MaxInlineData)
}

// sendWRFromC reads a C work request of a QP (ud: a UD one) with
// capacities c: the union members its opcode uses, its SGEs, and, for
// inline data the QP can hold, the program's bytes.
func sendWRFromC(wr *C.struct_ibv_send_wr, ud bool, c nic.QPCap) (sendWR, syscall.Errno) {
	var ext C.struct_rs_send_wr_ext
	cud := C.int(0)
	if ud {
		cud = 1
	}
	C.rs_send_wr_ext(wr, cud, &ext)
	sges, ok := sgesFromC(wr.sg_list, wr.num_sge)
	if !ok {
		return sendWR{}, syscall.EINVAL
	}
	op := verbs.WROpcode(wr.opcode)
	w := sendWR{ah: uint32(ext.ah), wr: verbs.SendWR{WRID: uint64(wr.wr_id), SGList: sges, Opcode: op,
		Flags: verbs.SendFlags(wr.send_flags), ImmData: uint32(ext.imm_data), RemoteAddr: uint64(ext.remote_addr),
		RKey: uint32(ext.rkey), CompareAdd: uint64(ext.compare_add), Swap: uint64(ext.swap),
		RemoteQPN: uint32(ext.remote_qpn), RemoteQKey: uint32(ext.remote_qkey), InvalidateRKey: uint32(ext.invalidate_rkey)}}
	switch op {
	case verbs.WRBindMW:
		w.mw, w.bindMR = uint32(ext.mw), uint32(ext.bind_mr)
		if w.mw == 0 {
			return sendWR{}, syscall.EINVAL
		}
		w.wr.BindMW = verbs.BindMWWR{RKey: uint32(ext.bind_rkey), BindInfo: verbs.BindInfo{
			Addr: uint64(ext.bind_addr), Length: uint64(ext.bind_length), Access: verbs.AccessFlags(ext.bind_access)}}
	case verbs.WRSend, verbs.WRSendWithImm, verbs.WRRDMAWrite, verbs.WRRDMAWriteWithImm, verbs.WRSendWithInv:
		if w.wr.Flags&verbs.SendInline != 0 && inlineLen(sges) <= uint64(c.MaxInlineData) {
			// Inline data is the program's bytes at the SGEs'
			// addresses, registered or not: copy them now. (More
			// than max_inline_data is not read: the device refuses
			// the WR, as rxe's post checks the length first.)
			w.inline = []byte{}
			for _, s := range sges {
				if s.Length > 0 {
					w.inline = append(w.inline, unsafe.Slice((*byte)(C.rs_ptr(C.uint64_t(s.Addr))), int(s.Length))...)
				}
			}
		}
	}
	return w, 0
}

// postRecvC posts the chain from wr to QP or SRQ h (srq), up to the first
// WR refused (set in *bad).
func postRecvC(h C.uint32_t, wr *C.struct_ibv_recv_wr, bad **C.struct_ibv_recv_wr, srq bool) C.int {
	p := lock()
	defer p.mu.Unlock()
	if !srq {
		// rxe_post_recv clears *bad_wr first, and refuses an empty
		// list and a QP in RESET before it looks at any WR: EINVAL,
		// *bad_wr NULL. (rxe_post_srq_recv does neither.)
		*bad = nil
		if wr == nil {
			return errC(syscall.EINVAL)
		}
		if v, ok := object[*qp](p, uint32(h)); ok {
			if a, _ := v.q.Query(); a.QPState == verbs.QPStateReset {
				return errC(syscall.EINVAL)
			}
		}
	}
	for ; wr != nil; wr = wr.next {
		sges, ok := sgesFromC(wr.sg_list, wr.num_sge)
		if !ok {
			*bad = wr
			return errC(syscall.EINVAL)
		}
		if err := p.postRecv(uint32(h), verbs.RecvWR{WRID: uint64(wr.wr_id), SGList: sges}); err != 0 {
			*bad = wr
			return errC(err)
		}
	}
	return 0
}

//export rs_post_recv
func rs_post_recv(h C.uint32_t, wr *C.struct_ibv_recv_wr, bad **C.struct_ibv_recv_wr) C.int {
	return postRecvC(h, wr, bad, false)
}

//export rs_post_srq_recv
func rs_post_srq_recv(h C.uint32_t, wr *C.struct_ibv_recv_wr, bad **C.struct_ibv_recv_wr) C.int {
	return postRecvC(h, wr, bad, true)
}

//export rs_create_srq
func rs_create_srq(pd C.uint32_t, a *C.struct_ibv_srq_attr, c unsafe.Pointer, h *C.uint32_t) C.int {
	p := lock()
	defer p.mu.Unlock()
	v, err := p.createSRQ(uint32(pd), verbs.SRQAttr{MaxWR: uint32(a.max_wr), MaxSGE: uint32(a.max_sge), SRQLimit: uint32(a.srq_limit)}, c)
	// As on rxe, the attributes go back as asked: ibv_query_srq has the
	// max_wr the SRQ holds (rounded up under the rxe profile).
	*h = C.uint32_t(v)
	return errC(err)
}

//export rs_modify_srq
func rs_modify_srq(h C.uint32_t, a *C.struct_ibv_srq_attr, mask C.int) C.int {
	p := lock()
	defer p.mu.Unlock()
	s, ok := object[*srq](p, uint32(h))
	if !ok {
		return errC(syscall.EINVAL)
	}
	err := s.s.Modify(verbs.SRQAttr{MaxWR: uint32(a.max_wr), MaxSGE: uint32(a.max_sge), SRQLimit: uint32(a.srq_limit)}, verbs.SRQAttrMask(mask))
	return errC(errnoOf(err))
}

//export rs_query_srq
func rs_query_srq(h C.uint32_t, a *C.struct_ibv_srq_attr) C.int {
	p := lock()
	defer p.mu.Unlock()
	s, ok := object[*srq](p, uint32(h))
	if !ok {
		return errC(syscall.EINVAL)
	}
	q, err := s.s.Query()
	if err != nil {
		return errC(errnoOf(err))
	}
	a.max_wr, a.max_sge, a.srq_limit = C.uint32_t(q.MaxWR), C.uint32_t(q.MaxSGE), C.uint32_t(q.SRQLimit)
	return 0
}

//export rs_destroy_srq
func rs_destroy_srq(h C.uint32_t) C.int {
	p := lock()
	defer p.mu.Unlock()
	return errC(p.destroySRQ(uint32(h)))
}

//export rs_create_ah
func rs_create_ah(pd C.uint32_t, a *C.struct_ibv_ah_attr, h *C.uint32_t) C.int {
	p := lock()
	defer p.mu.Unlock()
	v, err := p.createAH(uint32(pd), ahFromC(a))
	*h = C.uint32_t(v)
	return errC(err)
}

//export rs_destroy_ah
func rs_destroy_ah(h C.uint32_t) C.int {
	p := lock()
	defer p.mu.Unlock()
	return errC(p.destroyAH(uint32(h)))
}
