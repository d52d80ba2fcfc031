// Package rdmacm is rocesim's drop-in librdmacm.so.1: the C library in
// shim/ (rdmacm.c, librdmacm.map, rocesim_cm.h), built by `make dropin`
// and by `rocesim exec` (into its cache, beside libibverbs.so.1), so
// that an unmodified rdma_cm program (rping, rdma_server/rdma_client,
// perftest with -R) runs on the model:
//
//	make dropin
//	./rocesim exec --node server --nodes server,client -- rping -s -v -C 10 &
//	./rocesim exec --node client --nodes server,client -- rping -c -a 10.0.0.1 -C 10 -v
//
// This package has no Go code of its own: the Go side is in the drop-in
// libibverbs.so.1 (dropin/ibverbs cm.go, cmexports.go), and this file is
// its documentation.
//
// # Why C, and why two libraries with one Go runtime
//
// librdmacm and libibverbs share the model: rdma_create_qp makes an
// ibv_qp of the drop-in libibverbs' device, an rdma_cm ID's QP moves to
// RTR and RTS when the model's CM exchange says so, and rdma_cm events
// come from the same world, in the same virtual time, as completions. A
// second Go c-shared library would be a second Go runtime in the process,
// which Go does not support. So the connection manager (package rdmacm,
// speaking REQ, REP, RTU, DREQ and DREP on QP1 as rxe's hosts do) runs in
// libibverbs.so.1's runtime, which exports what it needs under a private
// version node, ROCESIM_PRIVATE_3 (rs_cm_*: rocesim_cm.h); no rdma-core
// library has that node, so no other program binds to those symbols.
// librdmacm.so.1 is then a small plain-C library, SONAME librdmacm.so.1
// with rdma-core's symbol versions (RDMACM_1.0 … RDMACM_1.3, checked with
// objdump -T on Debian's librdmacm1 44.0), linked against the drop-in
// libibverbs.so.1, whose rdma_* functions have the exact prototypes of
// <rdma/rdma_cma.h> (Debian's librdmacm-dev). It is C, not cgo, because
// only the one Go runtime may exist; cgo stays the only place C meets Go.
//
// # What it does, as rdma-core's librdmacm does it
//
// As rdma-core's (cma.c), the library is a libibverbs client: it opens
// rocesim0 once and every ID's verbs is that context; rdma_create_qp
// creates the QP with ibv_create_qp (CQs and channels of its own where
// the attributes name none, for rdma_create_ep's users) and hands it to
// the model's ID, which moves it to INIT; the model moves it to RTR and
// RTS with the attributes ib_cm derives, and to ERR on disconnect. An
// event channel's fd is an eventfd, readable exactly while an event
// waits. rdma_get_cm_event runs the world until the channel has an event,
// in slices of wall time with a cancellation point between (rping cancels
// its CM thread while it blocks there, as librdmacm's read(2) allows). A
// CONNECT_REQUEST's ID is made on the listener's channel with its
// context; the event's responder resources and initiator depth are the
// peer's seen from this side (the kernel's cm_format_req_event), and
// rdma_accept with no parameter (or RDMA_MAX_*) takes them. An ID made
// without a channel is synchronous: its calls wait for their event
// (ucma_complete); rdma_getaddrinfo (the hints' family, else IPv6 for
// an IPv6 literal and IPv4 first for a name), rdma_create_ep (the QP's type
// from the address, a passive one's attributes for each
// rdma_get_request), rdma_get_request and rdma_destroy_ep follow
// librdmacm. rdma_destroy_id waits until the events handed out about the
// ID are acked. Misuse answers as rdma-core's librdmacm does on real rxe
// (cmd/rocesim TestRdmacmMisuse; conformance TestRdmacmMisuseRxe runs
// the same program on both); where it crashes (a NULL ID, rdma_accept or
// rdma_create_qp on an ID with no device), EINVAL.
//
// Time on a fabric: a program owes the peer an answer from the moment its
// CM receives a REQ or a DREQ (the CONNECT_REQUEST, the DISCONNECTED,
// taken or not) until rdma_accept or rdma_reject, rdma_disconnect, or
// rdma_destroy_id, and from a REP for a QP it made itself (the
// CONNECT_RESPONSE) until rdma_establish; it answers from one thread while another (rping's CQ
// thread) may wait in a verb. Meanwhile the process does not count as
// waiting (at most 5 s of wall time), so the fabric does not move the
// clock past the answer and the peer does not send its REQ or DREQ
// again (dropin/ibverbs cm.go, cmHold; TestHoldUntilAnswered).
//
// # What is not there
//
// RDMA_PS_UDP (udaddy) is there: a UD ID's QP goes to RTS at
// rdma_create_qp, rdma_connect sends a SIDR_REQ, and event->param.ud
// carries the peer's QPN, Q_Key and address handle attributes
// (rdmacm/sidr.go). RDMA_PS_IPOIB is refused with EINVAL at
// rdma_create_id; rsockets (r*), SRQs on an ID,
// ECE fail with ENOSYS or EOPNOTSUPP. Multicast is there for IPv4
// groups: rdma_join_multicast(_ex) gives MULTICAST_JOIN with the group's
// address handle attributes, QPN 0xFFFFFF and the ID's Q_Key, and taking
// the event attaches the ID's QP (unless send-only), as librdmacm's
// ucma_process_join does; rdma_leave_multicast detaches it (rdmacm's
// mcast.go; unmodified mckey runs, cmd/rocesim TestExecMckey). A QP the program makes itself
// (rping -q, UCX) is there: rdma_init_qp_attr gives each transition's
// attributes, rdma_connect and rdma_accept take it by qp_num, and the
// client answers RDMA_CM_EVENT_CONNECT_RESPONSE with rdma_establish
// (package rdmacm, userqp.go). The CM lives on the process's first device; after the
// program exits its CM no longer answers (the kernel's ib_cm would
// answer a late DREQ from TIMEWAIT).
package rdmacm
