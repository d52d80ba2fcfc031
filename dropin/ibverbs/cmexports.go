//go:build cgo && linux

package main

// The rs_cm_* functions the drop-in librdmacm.so.1 calls (prototypes in
// dropin/rdmacm/shim/rocesim_cm.h; exported under the version node
// ROCESIM_PRIVATE_3 of libibverbs.map, so that nothing else binds to them
// by accident). Each takes the process lock, converts, and calls cm.go.

/*
#cgo CFLAGS: -I${SRCDIR}/../rdmacm/shim
#define ROCESIM_CM_TYPES_ONLY
#include <stdint.h>
#include <infiniband/verbs.h>
#include "rocesim_cm.h"
*/
import "C"

import (
	"net/netip"
	"unsafe"

	"github.com/rocesim/rocesim/rdmacm"
	"github.com/rocesim/rocesim/verbs"
)

// cmBytes views n bytes at b (nil for none).
func cmBytes(b *C.uint8_t, n C.int) []byte {
	if b == nil || n <= 0 {
		return nil
	}
	return unsafe.Slice((*byte)(unsafe.Pointer(b)), int(n))
}

//export rs_cm_create_channel
func rs_cm_create_channel(fd *C.int) C.int {
	p := lock()
	defer p.mu.Unlock()
	f, e := p.cmCreateChannel()
	*fd = C.int(f)
	return errC(e)
}

//export rs_cm_destroy_channel
func rs_cm_destroy_channel(fd C.int) C.int {
	p := lock()
	defer p.mu.Unlock()
	return errC(p.cmDestroyChannel(int(fd)))
}

//export rs_cm_create_id
func rs_cm_create_id(fd, ps C.int, id *C.uint32_t) C.int {
	p := lock()
	defer p.mu.Unlock()
	h, e := p.cmCreateID(int(fd), int(ps))
	*id = C.uint32_t(h)
	return errC(e)
}

//export rs_cm_set_ptr
func rs_cm_set_ptr(id C.uint32_t, ptr unsafe.Pointer) C.int {
	p := lock()
	defer p.mu.Unlock()
	return errC(p.cmSetPtr(uint32(id), ptr))
}

//export rs_cm_destroy_id
func rs_cm_destroy_id(id C.uint32_t) C.int {
	p := lock()
	defer p.mu.Unlock()
	return errC(p.cmDestroyID(uint32(id)))
}

//export rs_cm_addrs
func rs_cm_addrs(id C.uint32_t, out *C.struct_rs_cm_addrs) C.int {
	p := lock()
	defer p.mu.Unlock()
	src, dst, v6, bound, e := p.cmAddrs(uint32(id))
	if e != 0 {
		return errC(e)
	}
	put := func(a netip.AddrPort, b *[16]C.uint8_t, port *C.uint16_t) {
		*b = [16]C.uint8_t{}
		switch {
		case v6 && a.Addr().IsValid():
			for i, v := range a.Addr().As16() {
				b[i] = C.uint8_t(v)
			}
		case a.Addr().Unmap().Is4():
			for i, v := range a.Addr().Unmap().As4() {
				b[i] = C.uint8_t(v)
			}
		}
		*port = C.uint16_t(a.Port())
	}
	put(src, &out.src, &out.sport)
	put(dst, &out.dst, &out.dport)
	out.v6 = 0
	if v6 {
		out.v6 = 1
	}
	out.bound = 0
	if bound {
		out.bound = 1
	}
	return 0
}

//export rs_cm_bind_addr
func rs_cm_bind_addr(id C.uint32_t, addr *C.uint8_t, alen C.int, port C.uint16_t) C.int {
	p := lock()
	defer p.mu.Unlock()
	return errC(p.cmBind(uint32(id), cmBytes(addr, alen), uint16(port)))
}

//export rs_cm_listen
func rs_cm_listen(id C.uint32_t, backlog C.int) C.int {
	p := lock()
	defer p.mu.Unlock()
	return errC(p.cmListen(uint32(id), int(backlog)))
}

//export rs_cm_resolve_addr
func rs_cm_resolve_addr(id C.uint32_t, src *C.uint8_t, slen C.int, dst *C.uint8_t, dlen C.int, port C.uint16_t, timeout C.int) C.int {
	p := lock()
	defer p.mu.Unlock()
	return errC(p.cmResolveAddr(uint32(id), cmBytes(src, slen), cmBytes(dst, dlen), uint16(port), int(timeout)))
}

//export rs_cm_resolve_route
func rs_cm_resolve_route(id C.uint32_t, timeout C.int) C.int {
	p := lock()
	defer p.mu.Unlock()
	return errC(p.cmResolveRoute(uint32(id), int(timeout)))
}

//export rs_cm_set_qp
func rs_cm_set_qp(id, qp C.uint32_t) C.int {
	p := lock()
	defer p.mu.Unlock()
	return errC(p.cmSetQP(uint32(id), uint32(qp)))
}

// connParam converts rdma_conn_param's fields; the private data is
// copied (the model keeps what it sends). qpn is the QP a program made
// itself names (0 when the ID has the QP rdma_create_qp made).
func connParam(priv unsafe.Pointer, n C.int, resp, init, retry, rnr C.int, qpn C.uint32_t) rdmacm.ConnParam {
	return rdmacm.ConnParam{PrivateData: append([]byte(nil), cmBytes((*C.uint8_t)(priv), n)...),
		ResponderResources: uint8(resp), InitiatorDepth: uint8(init), RetryCount: uint8(retry), RNRRetryCount: uint8(rnr),
		QPNum: uint32(qpn)}
}

//export rs_cm_connect
func rs_cm_connect(id C.uint32_t, priv unsafe.Pointer, n, resp, init, retry, rnr C.int, qpn C.uint32_t) C.int {
	p := lock()
	defer p.mu.Unlock()
	return errC(p.cmConnect(uint32(id), connParam(priv, n, resp, init, retry, rnr, qpn)))
}

//export rs_cm_accept
func rs_cm_accept(id C.uint32_t, priv unsafe.Pointer, n, resp, init C.int, qpn C.uint32_t) C.int {
	p := lock()
	defer p.mu.Unlock()
	return errC(p.cmAccept(uint32(id), connParam(priv, n, resp, init, 0, 0, qpn)))
}

//export rs_cm_init_qp_attr
func rs_cm_init_qp_attr(id C.uint32_t, state C.int, a *C.struct_ibv_qp_attr, mask *C.int) C.int {
	p := lock()
	defer p.mu.Unlock()
	m, msk, e := p.cmInitQPAttr(uint32(id), verbs.QPState(state))
	if e != 0 {
		return errC(e)
	}
	// As ibv_copy_qp_attr_from_kern after the kernel zeroed and filled
	// its struct: every field is written, those the mask leaves out as
	// zero, but qp_state, which stays the caller's.
	st := a.qp_state
	*a = C.struct_ibv_qp_attr{}
	a.qp_state = st
	a.path_mtu = uint32(m.PathMTU)
	a.qkey, a.rq_psn, a.sq_psn, a.dest_qp_num = C.uint32_t(m.QKey), C.uint32_t(m.RQPSN), C.uint32_t(m.SQPSN), C.uint32_t(m.DestQPNum)
	a.qp_access_flags = C.uint(m.QPAccessFlags)
	if msk&verbs.QPAttrAV != 0 {
		ahToC(m.AHAttr, &a.ah_attr)
	}
	a.pkey_index = C.uint16_t(m.PKeyIndex)
	a.max_rd_atomic, a.max_dest_rd_atomic = C.uint8_t(m.MaxRdAtomic), C.uint8_t(m.MaxDestRdAtomic)
	a.min_rnr_timer, a.port_num, a.timeout = C.uint8_t(m.MinRNRTimer), C.uint8_t(m.PortNum), C.uint8_t(m.Timeout)
	a.retry_cnt, a.rnr_retry = C.uint8_t(m.RetryCnt), C.uint8_t(m.RNRRetry)
	*mask = C.int(msk)
	return 0
}

//export rs_cm_establish
func rs_cm_establish(id C.uint32_t) C.int {
	p := lock()
	defer p.mu.Unlock()
	return errC(p.cmEstablish(uint32(id)))
}

//export rs_cm_reject
func rs_cm_reject(id C.uint32_t, priv unsafe.Pointer, n C.int) C.int {
	p := lock()
	defer p.mu.Unlock()
	return errC(p.cmReject(uint32(id), append([]byte(nil), cmBytes((*C.uint8_t)(priv), n)...)))
}

//export rs_cm_disconnect
func rs_cm_disconnect(id C.uint32_t) C.int {
	p := lock()
	defer p.mu.Unlock()
	return errC(p.cmDisconnect(uint32(id)))
}

//export rs_cm_set_option
func rs_cm_set_option(id C.uint32_t, optname, value C.int) C.int {
	p := lock()
	defer p.mu.Unlock()
	return errC(p.cmSetOption(uint32(id), int(optname), value != 0))
}

//export rs_cm_get_event
func rs_cm_get_event(fd, mode C.int, out *C.struct_rs_cm_event) C.int {
	p := lock()
	defer p.mu.Unlock()
	ev, e := p.cmGetEvent(int(fd), mode == C.RS_CM_NONBLOCK, mode == C.RS_CM_SLICE)
	if e != 0 {
		return errC(e)
	}
	*out = C.struct_rs_cm_event{event: C.int(ev.Event), status: C.int(ev.Status),
		responder_resources: C.uint8_t(ev.Param.ResponderResources), initiator_depth: C.uint8_t(ev.Param.InitiatorDepth),
		retry_count: C.uint8_t(ev.Param.RetryCount), rnr_retry_count: C.uint8_t(ev.Param.RNRRetryCount),
		qp_num: C.uint32_t(ev.Param.QPNum)}
	if ev.ID != nil {
		w := ev.ID.Context.(*cmID)
		out.id, out.id_ptr = C.uint32_t(w.h), w.ptr
	}
	if ev.ListenID != nil {
		if w, ok := ev.ListenID.Context.(*cmID); ok {
			out.listen_id, out.listen_ptr = C.uint32_t(w.h), w.ptr
		}
	}
	n := copy(unsafe.Slice((*byte)(unsafe.Pointer(&out.private_data[0])), len(out.private_data)), ev.Param.PrivateData)
	out.private_data_len = C.uint8_t(n)
	udEvent(out, &ev.UD)
	if c, ok := ev.JoinContext.(uintptr); ok {
		// The program's own pointer, handed back as it was given.
		out.join_context = *(*unsafe.Pointer)(unsafe.Pointer(&c))
	}
	return 0
}

//export rs_cm_join
func rs_cm_join(id C.uint32_t, addr *C.uint8_t, alen C.int, sendOnly C.int, context unsafe.Pointer) C.int {
	p := lock()
	defer p.mu.Unlock()
	return errC(p.cmJoin(uint32(id), cmBytes(addr, alen), sendOnly != 0, uintptr(context)))
}

//export rs_cm_leave
func rs_cm_leave(id C.uint32_t, addr *C.uint8_t, alen C.int) C.int {
	p := lock()
	defer p.mu.Unlock()
	return errC(p.cmLeave(uint32(id), cmBytes(addr, alen)))
}

//export rs_cm_migrate
func rs_cm_migrate(id C.uint32_t, fd C.int) C.int {
	p := lock()
	defer p.mu.Unlock()
	return errC(p.cmMigrate(uint32(id), int(fd)))
}
