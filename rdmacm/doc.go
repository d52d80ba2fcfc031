// Package rdmacm is connection management for the simulated fabric, in
// the vocabulary of librdmacm: event channels, CM IDs, resolve address
// and route, listen, connect, accept, reject, disconnect, and the events
// named as rdma_event_str names them. Underneath it speaks the IBTA CM
// protocol (vol. 1 chapter 12) as Linux's ib_cm and rdma_cm do over rxe:
// REQ, MRA, REP, RTU, REJ, DREQ and DREP MADs (wire/cm.go) on QP1 of each
// host (nic/gsi.go), with rdma_cm's IP private data, the QP attributes
// the kernel chooses, and the MAD layer's retransmissions in virtual
// time. What real rxe's hosts send was captured with the conformance
// harness (wire/testdata/cm/README.md); the tests of this package replay
// each capture's story on the model.
//
//	cm := rdmacm.New(world)
//	// server, on host a
//	sch := cm.CreateEventChannel(ha)
//	l, _ := rdmacm.CreateID(sch, nil, rdmacm.PSTCP)
//	l.BindAddr(netip.AddrPortFrom(netip.IPv4Unspecified(), 7174))
//	l.Listen(1)
//	// client, on host b
//	cch := cm.CreateEventChannel(hb)
//	id, _ := rdmacm.CreateID(cch, nil, rdmacm.PSTCP)
//	id.ResolveAddr(netip.Addr{}, netip.MustParseAddrPort("10.0.0.1:7174"), 2000) // → ADDR_RESOLVED
//	id.ResolveRoute(2000)                                                       // → ROUTE_RESOLVED
//	id.CreateQP(pd, attr)                                                       // RC QP in INIT
//	id.Connect(rdmacm.ConnParam{ResponderResources: 1, InitiatorDepth: 1})      // REQ
//	// the world runs: CONNECT_REQUEST on sch; the server calls
//	// ev.ID.CreateQP and ev.ID.Accept (REP); ESTABLISHED on cch (RTU
//	// sent), then on sch when the RTU arrives.
//
// Events wait on their channel until GetEvent takes them; the world
// runs meanwhile (World.RunUntil(func() bool { return ch.Pending() > 0 })).
// The CM holds no goroutine and reads no clock: its timers are events of
// the world's scheduler, and the same seed gives the same exchange
// (communication IDs, PSNs and ports are drawn from the seed).
//
// # What follows real rxe, and from where
//
// From the captures (wire/testdata/cm): the messages and their order
// for a connect and a disconnect; every REQ and REP field (timeouts 20,
// max CM retries 15, retry and RNR retry 7, path MTU from the port,
// local ACK timeout 19, hop limit 64, the flow label hashed from the
// ports, target ACK delay 15); which starting PSN each side sends from;
// the transaction IDs (the REQ's for REP, RTU and REJ, each DREQ its
// sender's own); both sides disconnecting at once, as ib_write_bw -R
// does (rxe_cm_write_bw.pcapng: each side's DREQ ends the other's
// retries and gives DISCONNECTED, each DREP follows its side's destroy,
// as cm_dreq_handler has it); a lost REQ sent again after the REQ timeout; a lost
// RTU repaired by the REP's retransmission, not by the first data packet
// (rping does not call rdma_notify; neither is it modelled); a REQ for a port nobody listens on
// rejected with reason 8; a consumer reject (reason 28, the REJ's
// fields but its random IDs, rxe_cm_consumer_rej.pcapng); a disconnect
// under load flushing what had not completed on both sides
// (rxe_cm_flush.txt); a peer that never answers gives UNREACHABLE
// (status -110) after 16 REQs; a late accept covered by an MRA (below).
// From conformance's TestRdmacmMisuseRxe, which runs one program on both:
// what rdma_destroy_id tells the peer in each state of a connection
// (id.go, farewell): a CONNECT_REQUEST unanswered is rejected at once
// (consumer reject, the client's REJECTED status 28; a UD one a SIDR_REP
// of status 2, the client's UNREACHABLE 2), so is an accept whose RTU
// has not come, a connection never disconnected gets a DREQ (the peer's
// DISCONNECTED), and a client destroyed while connecting voids the
// listener's request (rdma_accept and rdma_reject fail) with no event;
// rdma_disconnect on an ID with nothing to end returns 0 (EINVAL before
// rdma_connect); ports taken per port space; and rdma_init_qp_attr's
// answers for an ID
// with no device and before rdma_connect (userqp.go).
//
// From the kernel's source only (not exercised by the captures): the
// private data of a consumer reject; the DREQ's
// retransmission (a DREP was never lost); the access flags of the QP in
// INIT (cm_init_qp_init_attr); the exact REQ and REP timeouts, 6144 ms
// and 4096 ms, where real rxe under TCG took 6.34–6.41 s and 4.19–4.35 s.
//
// RDMA_PS_UDP (PSUDP, udaddy's) connects UD QPs with SIDR_REQ and
// SIDR_REP (sidr.go), as udaddy did between two rxe guests
// (wire/testdata/cm/rxe_cm_sidr_*): every field of both messages, the
// SIDR_REQ resent after 4096 ms (4.29–4.35 s under TCG) and 16 times
// before UNREACHABLE -110, SIDR_REP status 1 for a port with no UDP
// listener and 2 for rdma_reject, each the status of the client's
// UNREACHABLE. From the kernel's source only: a reject's private data,
// Disconnect on a UD ID (the QP to ERR, no MAD).
//
// A program that makes its QPs before the connection, as a scenario
// does, moves them to INIT with InitQP and gives each to its ID with
// AttachQP (package scenario's cm= QPs).
//
// A program that keeps its QP to itself, as UCX and rping -q do, leaves
// the ID without one: it moves the QP with the attributes InitQPAttr
// gives (rdma_init_qp_attr), names it in ConnParam.QPNum, and on the
// active side answers CONNECT_RESPONSE with Establish (rdma_establish),
// which sends the RTU (userqp.go has the flow and where its attributes
// come from; Linux's cma.c and cm.c, read, and rping -q against real
// rxe's in conformance's TestInteropRping).
//
// Address resolution as rxe's hosts do it (rxe_cm_addr_error,
// rxe_cm_no_route): an address nobody has gives ADDR_ERROR with -110
// when the resolve timeout runs out (ARP itself is not simulated), one
// off the network fails at once with ENETUNREACH. A lost REP is sent
// again after 4096 ms (rxe_cm_lost_rep: 4.25 s).
//
// A LAP or APR is dropped unanswered, as ib_cm drops them on a RoCE
// port (cm.c: cm_lap_handler, cm_apr_handler).
//
// An application that accepts late (after the REQ's 6144 ms) is
// covered by an MRA, as the kernel does it (cma.c cma_req_handler
// calls ib_send_cm_mra with CMA_CM_MRA_SETTING, IB_CM_MRA_FLAG_DELAY |
// 24, which sends nothing; cm.c cm_dup_req_handler answers each
// duplicate REQ with that MRA until the application accepts or
// rejects): message REQ, service timeout 24, no private data, the REQ's
// transaction ID. The active side (cm_mra_handler) then sends the REQ
// again only after the MRA's service timeout plus the path's ACK
// timeout, 65536 + 2048 ms, in state MRA_REQ_RCVD, ignores further
// MRAs, and takes the REP or REJ as in REQ_SENT; no event is posted
// for the MRA (cma_ib_handler ignores IB_CM_MRA_RECEIVED). Checked on
// rxe (rxe_cm_mra.pcapng: a server that accepts 8 s late): the same
// messages in the same order, the MRA's fields as tshark shows them,
// the REQ's second send 6.22 s after the first; and across the real
// network (conformance's TestInteropLateAccept, a 15 s late accept),
// rxe's client sends no third REQ after the model's MRA, nor the
// model's after rxe's. The exact 67584 ms wait is from the source only.
//
// IPv6: an ID is IPv4 or IPv6, fixed when it is bound, its address
// resolved, or, for a CONNECT_REQUEST's ID, by the request's IP CM
// header (family.go). An IPv6 ID sends from its host's IPv6 address and
// that address's GID (the QPs' sgid_index), and its REQ or SIDR_REQ
// carries IP version 6 and the 16-byte addresses, so every frame of the
// connection is IPv6. Listeners take requests as the kernel's
// cma_match_private_data does: one on 0.0.0.0 IPv4 requests only, one
// on :: both unless SetAFOnly, one on an address that address's; the
// host's IPv4 and IPv6 addresses may listen on one port. A request no
// listener of its port takes is rejected with reason 28 (ib_cm destroys
// the ID rdma_cm refused), one for a port nobody listens on with 8. An
// ID bound to one family resolving the other, or a src of the other
// family, is EINVAL (resolve_prepare_src), and an unbound ID is bound
// to the src it is given before that check, so it stays bound after
// it. An ID bound to the any address shows 0.0.0.0 or :: as its local
// address until resolved, and has no device. Checked on rxe (conformance
// TestCM6Rxe, a connection of a guest to its own fd00::1). Two
// differences: the model resolves its own link-local address, which
// rxe's kernel refuses (ENETUNREACH); and a link-local address needs no
// zone here (one interface per host), where the kernel binds none
// without its scope (the drop-in's rdma_bind_addr refuses that, EINVAL,
// as the kernel does).
//
// Not modelled: route resolution that fails (ROUTE_ERROR: on RoCE
// rdma_cm builds the path itself; no run provoked one), the UD port
// spaces other than RDMA_PS_UDP, IPv6 multicast groups (the kernel
// refuses them on RoCE v2 too) and IGMP on the wire, an MRA for a REP (rdma_cm
// sends none: its active side answers a REP at once), the TIMEWAIT_EXIT
// event, and a duplicate REQ answered in TIMEWAIT.
package rdmacm
