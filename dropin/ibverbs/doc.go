// Command ibverbs is rocesim's drop-in libibverbs.so.1: built with
// `make dropin` (go build -buildmode=c-shared) into
// build/dropin/libibverbs.so.1, it stands in for rdma-core's library, so
// an unmodified libibverbs program runs on the model:
//
//	make dropin
//	LD_LIBRARY_PATH=build/dropin ibv_devinfo -v
//	LD_LIBRARY_PATH=build/dropin ROCESIM_FAULTS='drop psn=3 tx=1' ROCESIM_PCAP=run.pcapng ./myprog
//
// The library has the SONAME libibverbs.so.1 and rdma-core's symbol
// versions (libibverbs.map: IBVERBS_1.0, IBVERBS_1.1, ...), so a program
// linked against Debian's libibverbs binds to it. glue.c holds the C
// entry points with the prototypes of <infiniband/verbs.h>: it allocates
// the structures the header defines and fills the context's ops, which
// the header's static inline ibv_post_send, ibv_post_recv, ibv_poll_cq
// and ibv_req_notify_cq call, and its verbs_context (ibv_query_port).
// Everything else is Go: exports.go converts the C structures under one
// lock (programs call from several threads), model.go runs the world.
//
// # The model in the process
//
// One verbs.World, rxe profile, with ROCESIM_DEVICES hosts (default 1)
// named rocesim0, rocesim1, ... on one switch. Each device has port 1
// ACTIVE and rxe's GID table: index 0 the IPv6 link-local address from
// the MAC (fe80::ff:fe00:1 for 02:00:00:00:00:01), index 1 the IPv4
// address 10.0.0.i mapped into IPv6, both RoCE v2, the other 1022
// entries empty, as a conformance guest's rxe0 lists them (its MAC
// 52:54:00:00:00:01 gives fe80::5054:ff:fe00:1). `ibv_devinfo -v`
// prints the model's limits and rxe's other attributes (vendor_id,
// device_cap_flags, max_mtu 4096, port_cap_flags, ...): the same text as
// for a real rxe0 but for the name and the MAC (testdata/rxe0-devinfo.txt).
// Two QPs of one device talk, as rxe loops a packet for a local address
// back (rxe_net.c): the device addresses it to its own MAC, and the
// switch sends it back down the device's own link, so the fault plan and
// the capture see it. On a fabric of two processes (ROCESIM_FABRIC, a
// direct link, no switch) the node turns it round itself, at once, and
// it is neither judged by the plan nor captured, as on a real rxe port
// (fabric.Node.Send); on a fabric of three or more, its switch does.
//
// Registered memory is the program's own: the device reads and writes
// the bytes at the address the program registered. The addresses on the
// wire are the world's simulated ones (the same on every run, whatever
// the program's heap layout); the library translates the program's
// addresses (its pointers, or the iova of ibv_reg_mr_iova) by L_Key and
// R_Key, in the device the QP's address vector names; a memory window's
// R_Key to the region its last bind named.
//
// # Virtual time
//
// Time moves only when the program waits: a poll_cq that finds nothing
// runs the world to its next event (every event at that instant) and
// looks again; ibv_get_cq_event and ibv_get_async_event run it until the
// channel or context has an event (an asynchronous event goes to the
// context that made its QP, CQ or SRQ; a port's to every context). So an ACK timeout of 67 ms costs
// microseconds, and the same program with the same seed gives the same
// capture bytes. A completion channel's fd and the context's async_fd
// are eventfds, readable exactly while an event waits, so poll and epoll
// on them see what the verbs would find. A program that sleeps in
// poll(2) or epoll_wait instead of a verb is woken too: once it has made
// no verb call for ROCESIM_IDLE_WAKE of wall time while a CQ on a channel
// is armed, or while its rdma_cm waits on the network for an event and
// owes no answer, the library runs the world until an event comes
// (idle.go).
// That run then depends on the wall clock; one that waits in verbs does
// not. A waiter on a world with nothing left to do sleeps until another
// thread of the program posts or modifies something. Threads may call in
// at once (one lock serialises them), and a thread's wait moves time only
// while no other thread of the program is about to act (threads.go):
// none runs, none is at work in the library, none was just woken. So
// rping, whose CM thread goes back into rdma_get_cm_event as soon as it
// has woken the main thread, connects and pings at once, and two runs of
// it are the same. A thread that runs on (it computes, or spins on
// memory, with verb calls between or not) holds a waiting thread back
// for 10 ms of its CPU time at most, then the wait moves time one step.
// The library's own threads (the Go runtime's, which run when its
// collector pleases) are never the program's: the library notes each one
// it makes (ownthreads.c). Nor does the runtime signal the program's
// threads: it is built with GODEBUG=asyncpreemptoff=1 as its default
// (internal/dropinbuild), as a preemption signal sent while a verb ran on
// the program's thread could land in its next poll(2), which then failed
// with EINTR, as nothing under rdma-core's libibverbs makes it fail.
//
// # On a fabric: two programs, two processes
//
// With ROCESIM_FABRIC and ROCESIM_NODE (set by `rocesim exec`, which
// also starts the fabric), the process's one device rocesim0 is a node
// of a fabric daemon (package procfabric) instead of a world of its own:
// its frames go to the daemon, which joins it to the other processes'
// devices in one virtual time, and applies the fault plan, the capture
// and the ladder there (fabric.go). The node's addresses come from the
// daemon: MAC 02:00:00:00:00:i, GID 0 the link-local fe80::ff:fe00:i,
// GID 1 ::ffff:10.0.0.i. MRs live at the program's own addresses (its
// pointer, or the iova): the peer names them in RDMA WRITEs, READs and
// atomics as the program sent them (over TCP, as ibv_rc_pingpong and
// perftest do), and no translation can happen in the peer's process.
//
// Which time a program gets: the fabric's clock moves only when every
// attached process waits. A process waits when its program waits in a
// verb (as above), and also when the program has made no verb call for
// ROCESIM_IDLE_WAKE (1ms on a fabric; idle.go): a program blocked in a TCP read,
// as perftest's server while its client WRITEs, or computing, lets the
// clock go on and its device goes on answering, as a real NIC does. A
// program that runs without either for longer than the fabric's hold
// limit (10 s) while another waits is detached, and its peers see their
// QPs time out. Programs that only wait in verbs (the pingpongs, once
// connected) run in pure virtual time; a program that is busy outside
// the verbs gets virtual time that follows the wall clock there, so the
// virtual instants of its later verbs depend on scheduling.
//
// # On a real network: ROCESIM_TRANSPORT=udp
//
// With ROCESIM_TRANSPORT=udp and ROCESIM_ADDR=ip (loopback unless
// ROCESIM_ROUTABLE=1, as `rocesim node --addr`), the process's one device
// rocesim0 is a RoCE v2 endpoint on a UDP socket at ip port 4791
// (realnet's UDP transport), in real time: GID 1 is ::ffff:ip (GID 0 the
// link-local address of its stand-in MAC, unreachable over the socket),
// MRs live at the program's own addresses as on a fabric, and the world's
// clock follows the wall clock (udp.go). Every call of the program first
// runs the world to the wall clock's instant, also while another thread
// waits on the socket (the idle loop while the program slept), so what
// the call sends leaves, and the timers it arms run, from the real
// instant: a late rdma_accept sends one REP (TestLateAcceptUDP). The
// clock hold for a CM event the program must answer (cm.go) applies on
// a fabric only: the wall clock cannot be held. Two programs on one
// machine take two loopback addresses:
//
//	ROCESIM_TRANSPORT=udp ROCESIM_ADDR=127.0.0.5 ibv_rc_pingpong -g 1 &
//	ROCESIM_TRANSPORT=udp ROCESIM_ADDR=127.0.0.6 ibv_rc_pingpong -g 1 127.0.0.1
//
// The peer may be another such process, `rocesim node`, or real rxe
// reachable over IPv4 (received packets' IPv4 ID is recovered from the
// ICRC: realnet.UDPConfig.RecoverIPv4ID). Fault plans, captures and the
// ladder do not apply there: ROCESIM_FAULTS, ROCESIM_PCAP or
// ROCESIM_LADDER with it is an error (capture on the network, or put
// `rocesim switch` in the path for faults).
//
// # The extended CQ and QP
//
// extended.c has ibv_create_cq_ex (ibv_start_poll, ibv_next_poll,
// ibv_end_poll and the ibv_wc_read_* functions of the fields asked for)
// and ibv_create_qp_ex with the work request builders (ibv_wr_start,
// ibv_wr_send, ibv_wr_rdma_write, ..., ibv_wr_set_sge, ibv_wr_complete),
// with the opcodes, completion fields and errors of rdma-core's rxe
// provider: no timestamps, the send opcodes rxe has per QP type, a batch
// with more SGEs or inline bytes than the QP holds failing whole with
// ENOSPC. The builders collect a batch in the QP's own arrays and
// ibv_wr_complete posts all of it, or none: when the send queue lacks
// room (ENOSPC, as rxe's builders find a full queue), or when the device
// would refuse one of its WRs as ibv_post_send refuses it (an atomic at
// an unaligned address, say: EINVAL; rxe's builders check no such thing
// and its device fails that WR alone). Inline data set with
// ibv_wr_set_inline_data is sent as inline data whether or not wr_flags
// has IBV_SEND_INLINE (rxe's kernel needs the flag). ATOMIC WRITE may be
// asked for at creation, as the rdma-core Debian 12 ships allows, but
// Linux 6.1's rxe cannot carry one and neither can the model: a batch
// with one fails with EINVAL. A batch may end on another thread than
// the one that began it; a second ibv_wr_start from the same thread
// starts over. The rdma-core
// Debian 12 ships sums an SGE list's lengths and an inline buffer
// list's wrongly on rxe (fixed upstream in 2026); here both are summed
// as the fixed provider does. conformance TestNewPostRxe runs
// testdata/newpost.c on both and compares every line.
//
// # rdma_cm: the drop-in librdmacm.so.1
//
// The connection manager of the drop-in librdmacm.so.1 (dropin/rdmacm,
// plain C) runs here, in this library's Go runtime (a process has one):
// cm.go puts package rdmacm on the process's first device, and
// cmexports.go exports the rs_cm_* functions librdmacm.so.1 calls, under
// the version node ROCESIM_PRIVATE_3. Its event channels are eventfds like
// the completion channels; settle makes them readable while an event
// waits.
//
// # Environment
//
//	ROCESIM_DEVICES=N      devices rocesim0..N-1 on one switch (1 to 16; default 1)
//	ROCESIM_DEVICE_PREFIX=P  name them P0..PN-1 (rxe: a script's `-d rxe0` finds rxe0; the
//	                       fault plan's links are then rxe0-sw, ...); letters, digits, _ and -
//	ROCESIM_SEED=S         the world's seed (default 1)
//	ROCESIM_PROFILE=P      rxe (default) or spec
//	ROCESIM_FAULTS=PLAN    a fault plan (faults.ParseInline: rules separated by ';' or newlines; links rocesim0-sw, ...);
//	                       at exit, stderr says what each rule did and warns of one that never matched
//	ROCESIM_PCAP=PATH      write every frame to PATH (pcapng: a comment per frame)
//	ROCESIM_LADDER=PATH    draw the run's ladder into PATH at exit (.svg: SVG, else text; a
//	                       device's frames to itself are not drawn, its completions are)
//	ROCESIM_IDLE_WAKE=D    wall time without a verb call, a CQ armed (or an rdma_cm event due from
//	                       the network), before the library runs
//	                       the world for a program asleep in poll(2) (default 50ms; off: never);
//	                       on a fabric, CQ armed or not, before the process waits on the fabric
//	                       (default 1ms)
//	ROCESIM_POLL_WAIT=off  a poll_cq that finds nothing returns 0 without moving time (for a
//	                       driver that holds a fabric's clock itself: procfabric.Daemon.Hold)
//	ROCESIM_FABRIC=NAME    put the device on a node of the fabric daemon NAME (procfabric;
//	ROCESIM_NODE=NODE      `rocesim exec` sets both); ROCESIM_FABRIC_DIR its socket directory
//	                       (default procfabric.SocketDir()). ROCESIM_DEVICES does not apply;
//	                       _FAULTS, _PCAP and _LADDER are the fabric's business (an error here)
//	ROCESIM_TRANSPORT=udp  the device on a UDP socket at ROCESIM_ADDR=ip[:4791], in real time
//	                       (ROCESIM_ROUTABLE=1 allows a non-loopback ip); ROCESIM_WILL_FD=N
//	                       a pipe to the program's keeper (rocesim exec sets it), which
//	                       sends what the CM's IDs owe if the program dies (internal/will)
//	ROCESIM_MAX_EVENTS=N   the events the whole run may fire (default 500 000 000): past them
//	                       the program ends with exit status 3 and what kept the world going
//
// An environment the model cannot follow (a plan that does not parse) is
// reported on stderr and leaves the process with no devices.
//
// # Multicast
//
// ibv_attach_mcast and ibv_detach_mcast keep the device's group table
// (nic/mcast.go) with rxe's answers and limits: EINVAL for a GID that is
// not multicast, a QP that is not UD, or a group the QP is not in; ENOMEM
// past 56 QPs a group; EBUSY for ibv_destroy_qp of an attached QP. A UD
// SEND to remote_qpn 0xFFFFFF through an AH whose DGID is a group reaches
// every attached QP on every device of the fabric whose host joined the
// group at the IP level (rdma_join_multicast's IGMP join), the sender's
// own device included (through the host's IP multicast loop, as on
// Linux); a QP attached with ibv_attach_mcast alone gets nothing, as on
// rxe, but in the all-hosts group 224.0.0.1. Closing the device detaches
// its QPs. testdata/mcast.c prints the same lines here as on real rxe
// (TestMcast; conformance TestMcastRxe). Multicast runs on the model's
// fabrics: over ROCESIM_TRANSPORT=udp, ibv_attach_mcast and
// rdma_join_multicast fail with EOPNOTSUPP.
//
// # What is not there
//
// The _ex verbs but ibv_query_device_ex, ibv_create_cq_ex and
// ibv_create_qp_ex (ibv_create_srq_ex, ibv_create_wq, ...), XRC, flows,
// device memory, ECE, dma-buf MRs,
// importing another process's objects: their entries are left NULL, so
// the header's inline wrappers return EOPNOTSUPP (or ENOSYS) as
// libibverbs does for a provider without them, or the exported verb
// fails with EOPNOTSUPP. A NULL object where
// libibverbs would crash returns EINVAL. Enough is there for librdmacm
// (marshall.c) and Debian's pyverbs to load and run
// (testdata/loopback.py). A program that forks and calls verbs in the
// child is not supported (the Go runtime does not survive fork without
// exec).
package main
