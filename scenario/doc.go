// Package scenario reads rocesim scenario files and runs them: a
// topology, queue pairs, memory, a timed workload, a fault plan and the
// outcome the scenario claims, in a small line-based text format. The
// built-in catalogue (Builtin, Lookup) is a set of such files embedded
// from builtin/, the same files as the repository's examples/.
//
//	s, err := scenario.Parse("my.scenario", text)   // or scenario.Lookup("go-back-n")
//	res, err := s.Run(scenario.Options{Seed: 1, Profile: verbs.ProfileRXE})
//	res.Completions, res.AsyncEvents, res.Counters  // what happened
//	res.Failed                                      // expectations not met
//	res.Trace                                       // every event, for a ladder
//
// A scenario file:
//
//	scenario go-back-n
//	description A 4-packet RC SEND loses PSN 2 once: NAK, go-back-N, one cumulative ACK.
//	node a b
//	link a b
//	mr a.buf size=4096 fill=seq
//	mr b.buf size=4096
//	qp a.q rc peer=b.q psn=1
//	qp b.q rc psn=1
//	fault drop psn=2 tx=1 src=a
//	at 0 b.q recv wr=1 len=4096
//	at 0 a.q send wr=2 op=send len=4096
//	expect a.q wr=2 IBV_WC_SUCCESS
//	expect counter a.rcvd_seq_err=1
//
// # Running
//
// Run builds a world (package verbs) with one host per node, in the order
// declared (node i has MAC 02:00:00:00:00:0i and IPv4 10.0.0.i), then on
// each node opens the device, allocates one PD, registers the memory
// regions, creates the CQs and QPs, and takes every QP from RESET to its
// starting state (RTS by default) with the attributes of its qp line and
// its peer's QPN and PSN. Then, for each step in order, it runs the world
// to the step's time (events due at that very time happen first), polls
// the CQs, does the step and polls again; after the last step it runs the
// world until nothing is left to happen (or to the deadline) and polls
// every CQ once more (with on lines the world runs one instant at a
// time in between: see Closed loops). A CQ declared poll=manual is
// polled only by poll steps and at the end, so it can overflow. Every
// poll also reads the devices' asynchronous events. Result.Completions are
// in the order polled: by poll, then node, then CQ in creation order.
//
// # Closed loops: on lines
//
// An on line is a step done when a completion is polled, as a program's
// completion loop does it: "on b.q wr=1 b.q recv wr=1 len=64" re-posts
// a receive each time one completes. The trigger is a completion of the
// QP's CQs (send or receive), of work request wr= if given, with status=
// if given; times=N lets the line fire on the first N such completions
// (default 1), after=D does the step D after the completion was polled
// (the time the program takes to react; default at once). times=N on an
// at line does its step N times in a row, so
//
//	at 0 times=4 a.q send wr=1 op=write len=4096     # 4 in flight
//	on a.q wr=1 times=12 a.q send wr=1 op=write len=4096   # one more per completion
//
// keeps four WRITEs in flight until 16 have been posted (examples/
// bandwidth.scenario; see also pingpong and rnr-repost).
//
// The order is fixed, so a closed loop is as deterministic as a timed
// one. When a scenario has on lines, the world is run one instant at a
// time: all the events due at a virtual time happen, then the auto CQs
// are polled, and each completion polled, in poll order, is offered to
// the on lines in file order; every line it triggers (several may) does
// its step at once, followed by a poll whose completions are offered in
// their turn. Steps deferred with after= are done at their time after
// that instant's events and poll, in the order they were deferred. At a
// time that also has at steps, the instant's events, poll, on lines and
// deferred steps come first, then the at steps. Completions polled by the
// final poll of the run (manual CQs) trigger nothing. A completion that
// no on line waits for is only recorded. A closed loop is bounded by its
// times= and by Options.MaxEvents.
//
// Each step is recorded in the trace as a "step" event (fields line= and
// step=, the step as written); a rereg step is followed by a "rereg"
// event (fields mr= and result=, its answer). A run that fires more than
// Options.MaxEvents events (DefaultMaxEvents, 200000, unless set)
// fails with a *verbs.RunawayError that names the QP that keeps it going
// and why (a livelock: rxe's retry_cnt 7 on a dead link retries forever;
// use a deadline for such scenarios). The trace keeps its first
// sim.DefaultTraceLimit events, so a run's memory is bounded whatever its
// length. The same scenario, seed and profile give an identical Result
// and trace.
//
// # Grammar
//
// One statement a line; '#' starts a comment (except in description and
// fault lines, which take the rest of the line as it is); blank lines are
// ignored. Words are separated by white space; options are key=value in
// any order, each at most once.
//
//	file        = { line "\n" } .
//	line        = [ statement ] [ "#" comment ] .
//	statement   = "scenario" name                   (default: the file's base name)
//	            | "description" text                (one line, shown in listings)
//	            | "seed" num                        (the seed when Options.Seed is 0; default 1)
//	            | "deadline" duration               (stop there instead of running to quiescence)
//	            | "node" name { name }
//	            | "link" node node { linkopt }       (link named "a-b" in fault plans)
//	            | "switch" name node node { node } { linkopt }   (links named "a-sw", ...)
//	            | "mr" node "." name "size=" size { mropt }
//	            | "mw" node "." name "type=" ( "1" | "2" )    (a memory window)
//	            | "cq" node "." name { cqopt }
//	            | "qp" node "." name qptype { qpopt }
//	            | "fault" rule                      (one line of the faults text format)
//	            | "at" duration [ "times=" num ] step    (steps in time order)
//	            | "on" qpref { trigopt } step        (a step done on a completion)
//	            | "expect" claim .
//
//	linkopt     = "bandwidth=" rate | "delay=" duration | "mtu=" num | "queue=" size | "overhead=" num .
//	mropt       = "access=" access | "fill=" fill | "u64=" num .
//	cqopt       = "size=" num | "poll=" ( "auto" | "manual" ) .
//	qptype      = "rc" | "uc" | "ud" .
//	qpopt       = "peer=" qpref | "state=" state | "mtu=" pmtu | "psn=" num
//	            | "timeout=" num | "retry_cnt=" num | "rnr_retry=" num | "min_rnr_timer=" num
//	            | "max_rd_atomic=" num | "max_dest_rd_atomic=" num | "access=" access | "qkey=" num
//	            | "cq=" cqname | "send_cq=" cqname | "recv_cq=" cqname | "cq_size=" num
//	            | "max_send_wr=" num | "max_recv_wr=" num | "max_sge=" num | "max_inline=" num
//	            | "sig_all" | "cm=" ( "connect" | "accept" | "reject" | "closed" )
//	            | "group=" ipv4                    (UD: join a multicast group) .
//
//	trigopt     = "wr=" num | "status=" status | "times=" num | "after=" duration .
//	step        = qpref "send" "wr=" num { sendopt }
//	            | qpref "recv" "wr=" num "len=" size [ "local=" place ]
//	            | qpref "modify" modopt { modopt }
//	            | qpref "poll"                      (the QP's CQs)
//	            | "poll" { ref }                    (CQs, or QPs' CQs; none: every CQ)
//	            | mrref "rereg" reregopt { reregopt }     (ibv_rereg_mr)
//	            | qpref ( "connect" | "disconnect" ) .     (rdma_connect, rdma_disconnect: cm= QPs)
//	sendopt     = "op=" op | "len=" size | "local=" place | "remote=" place
//	            | "rkey=" ( num | "invalid" ) | "imm=" num
//	            | "compare=" num | "swap=" num | "add=" num
//	            | "dest=" qpref | "group=" ipv4 | "qkey=" num
//	            | "mw=" ref | "access=" access      (mw=: a window; access=: op=bind only)
//	            | "signaled" | "unsignaled" | "fence" | "solicited" | "inline" .
//	op          = "send" | "send_imm" | "write" | "write_imm" | "read" | "cas" | "faa"
//	            | "send_inv" | "local_inv" | "bind" .
//	reregopt    = "access=" access | "pd=" ( "own" | "other" ) | "off=" size | "len=" size .
//	modopt      = "state=" state | "mtu=" pmtu | "psn=" num | "rq_psn=" num
//	            | "timeout=" num | "retry_cnt=" num | "rnr_retry=" num | "min_rnr_timer=" num
//	            | "max_rd_atomic=" num | "max_dest_rd_atomic=" num | "access=" access | "qkey=" num .
//
//	claim       = qpref "wr=" num status { "opcode=" wcopcode | "byte_len=" num | "imm=" num | "flags=" wcflags }
//	            | qpref "completions" ( "none" | num ":" status { num ":" status } )
//	            | qpref "state" state
//	            | "event" ( node | qpref ) event [ "count=" num ]
//	            | "events" node ( "none" | event { event } )
//	            | "counter" node "." counter cmp num     (one word: a.rcvd_seq_err>=1)
//	            | "mem" place ( "u64=" num | "len=" size "equals=" place )
//	            | "rereg" mrref answer { answer }       (answer = "ok" | errno)
//	            | "frames" { matchkey } ( "count=" num | "none" )    (matchkey: package faults)
//	            | "cm" qpref ( "none" | cmevent { cmevent } ) .
//	cmevent     = rdma_cm event [ ":" status ] .   (ESTABLISHED, REJECTED:28; the RDMA_CM_EVENT_ prefix may be left out)
//	cmp         = "=" | "!=" | ">=" | "<=" | ">" | "<" .
//	wcflags     = "0" | wcflag { "|" wcflag } .   (IBV_WC_GRH, IBV_WC_WITH_IMM, IBV_WC_IP_CSUM_OK, IBV_WC_WITH_INV, ...; prefix optional)
//
//	qpref, mrref, ref = node "." name .
//	errno       = "EOPNOTSUPP" | "EINVAL" | "ENOMEM" | "EACCES" | "EPERM" | "EFAULT" | "EBUSY" | "ENOSYS" .
//	place       = node "." mr [ "+" size ] .        (an offset into a memory region)
//	name        = letter or digit, then letters, digits, '_' and '-' .
//	num         = decimal | "0x" hex .
//	size        = num [ "KiB" | "MiB" | "GiB" ] .
//	duration    = decimal [ "." decimal ] ( "ns" | "us" | "µs" | "ms" | "s" ) | "0" .
//	rate        = decimal [ "." decimal ] ( "bps" | "kbps" | "Mbps" | "Gbps" | "Tbps" ) .
//	access      = "none" | flag { "," flag } .  flag = "local_write" | "remote_write" | "remote_read" | "remote_atomic" | "mw_bind" .
//	fill        = "zero" | "seq" | "random" | num .  (byte i = i mod 256; random: seeded per region)
//	state       = "reset" | "init" | "rtr" | "rts" | "sqd" | "sqe" | "err" .  (any case)
//	pmtu        = "256" | "512" | "1024" | "2048" | "4096" .
//	status      = "IBV_WC_SUCCESS" | "IBV_WC_RETRY_EXC_ERR" | ...   (the IBV_WC_ prefix may be left out)
//	wcopcode    = "IBV_WC_SEND" | "IBV_WC_RECV" | "IBV_WC_RDMA_READ" | ...
//	event       = "IBV_EVENT_CQ_ERR" | "QP_ACCESS_ERR" | ...      (the IBV_EVENT_ prefix may be left out)
//	counter     = an rxe counter name: sent_pkts, rcvd_seq_err, retry_exceeded_err, ...
//
// # Meanings and defaults
//
// Nodes have one port each, so a node is on exactly one link or switch.
// Links default to fabric.DefaultLinkConfig: 100Gbps, delay=1us
// (propagation), mtu=1500 (IP MTU: path MTU 1024), queue=1MiB per
// direction, overhead=24. Every link of a switch line gets its options.
// The hosts' largest path MTU follows the smallest link MTU.
//
// A memory region is registered with access local_write, remote_write,
// remote_read, remote_atomic unless access= says otherwise, zero-filled
// unless fill= says otherwise; u64= then stores a little-endian 64-bit
// value in its first 8 bytes (atomics see memory in host order).
//
// A QP's options are the ibv_qp_attr fields of the same name, with these
// defaults: state=rts, psn=1 (its send PSN and its peer's receive PSN),
// mtu= the port's active MTU, timeout=14 (4.096 µs × 2^14 = 67.1 ms, which
// the rxe profile rounds down to whole 4 ms jiffies, 64 ms; 0 turns the ACK
// timer off), retry_cnt=7 (forever under the rxe profile),
// rnr_retry=7 (forever), min_rnr_timer=12 (0.64 ms), max_rd_atomic=1,
// max_dest_rd_atomic=1, access= remote_write,remote_read,remote_atomic for
// RC and remote_write for UC, qkey=0x11111111 for UD, max_send_wr=64,
// max_recv_wr=64, max_sge=1, max_inline=0. peer= names the other end of an
// RC or UC connection; it need be written on one side only. Without cq=
// (or send_cq= and recv_cq=, naming cq lines of the same node), a QP gets
// its own CQ of cq_size= entries (default what its queues hold, rxe's
// 2^k - 1 for each of max_send_wr and max_recv_wr, so it cannot
// overflow). CQ sizes are rounded up to 2^k - 1 as rxe does: a CQ
// of 4 holds 7. A declared cq defaults to size=64, poll=auto.
//
// A send posts one work request: op=send unless op= says otherwise,
// signaled unless unsignaled (or the QP is sig_all); len= bytes from
// local= (default: the node's first memory region, offset 0; len=0 posts
// no SGE). Atomics default to len=8. WRITE, READ and atomics target
// remote= (default: the first memory region of the peer's node, offset 0)
// with its R_Key, or rkey=; rkey=invalid is the region's key with another
// key byte, which names no region. cas takes compare= and swap=, faa add=.
// Memory windows (IBTA §10.6.7): an mw line allocates a window of type 1
// or 2 in the node's PD, after its memory regions. op=bind binds mw= (a
// window of the posting node) over len= bytes at local= (default: the
// node's first region, offset 0) with the rights of access=: a type 1
// window through ibv_bind_mw, a type 2 one with an IBV_WR_BIND_MW work
// request; the region needs access mw_bind. Either way the window takes
// the next R_Key (ibv_inc_rkey) at the step, as a C program does after a
// successful bind, and later steps name it by that key. op=local_inv
// invalidates mw= (a window of the posting node; no len= needed);
// op=send_inv is a SEND whose IETH carries the R_Key of mw=, a window of
// the peer's node. A write, read or atomic with mw= (a window of the
// peer's node) goes through the window: remote= gives the address, the
// window gives the R_Key.
//
// A rereg step calls ibv_rereg_mr(3) on a memory region of its node (the
// IBTA's Reregister Memory Region verb; the model keeps the region's
// keys). Its options make the flags: access=
// IBV_REREG_MR_CHANGE_ACCESS to those rights, pd= IBV_REREG_MR_CHANGE_PD
// to the node's PD (own) or to a second PD of the node, allocated on
// first use (other), len= IBV_REREG_MR_CHANGE_TRANSLATION to bytes
// [off, off+len) of the region's own buffer (off= defaults to 0). Unlike
// any other step the verbs refuse, a refused rereg does not end the run:
// its answer, "ok" or the errno, is in Result.Rereg, and an expect rereg
// line states it. rxe 6.1 has no rereg_user_mr, so under the rxe profile
// every rereg step is refused with EOPNOTSUPP (IBV_REREG_MR_ERR_CMD), as
// on real rxe, and the region keeps its buffer, PD and rights; under the
// spec profile the rereg happens. Either way mem claims and
// Result.Memory read the region's declared buffer.
//
// A UD send names its destination QP with dest= (an address handle to
// that node is made on first use); its Q_Key is the destination's, or
// qkey=. A UD QP with group=224.x.y.z joins that multicast group when it
// is created, as rdma_join_multicast does (its host joins the group, the
// QP is attached: ibv_attach_mcast); a UD send with group= goes to the
// group (an address handle whose DGID is the group, QPN 0xFFFFFF, the
// sender's own Q_Key unless qkey=), a switch floods it, and every QP in
// the group on every other node gets a copy (examples/multicast.scenario). A recv posts len= bytes at local=. modify calls ibv_modify_qp
// with the attributes given; a move from RESET to INIT, INIT to RTR or RTR
// to RTS adds the attributes the kernel requires for it from the qp line.
// A step the verbs refuse (a post to a full queue, an illegal modify)
// makes Run fail with the line and the errno.
//
// Fault lines form the fabric's fault plan (package faults, whose doc
// gives the rule format): the N-th fault line is rule N in traces and
// capture comments. Links are named after their ends: "a-b" for link a b,
// "a-sw" for node a on switch sw. A rewrite rule can change any header field
// ("fault rewrite set-opcode=RC_RDMA_READ_REQUEST op=RC_RDMA_WRITE_ONLY":
// a READ request that still carries the WRITE's payload; set-opcode=0x1d:
// a reserved opcode; set-rkey=, set-va=, set-dmalen=, set-qkey=,
// set-imm=, set-pad=, set-ecn=ce), keeping the frame otherwise valid or,
// with fix=none, leaving its checksums stale, to see which layer of the
// receiver refuses it. A link that dies after its K-th frame is "fault
// down link=a-b after=K".
//
// # Connection management
//
// A qp line with cm= connects its QP and its peer through rdma_cm
// (package rdmacm: the IBTA CM's MADs on QP1, as rxe's kernel sends
// them) instead of the direct bring-up: cm=connect is the active side,
// which a connect step connects (rdma_resolve_addr, rdma_resolve_route,
// rdma_connect, as rping -c does); cm=accept the passive side, which
// listens from the start and accepts the connect request; cm=reject one
// that rejects it (REJ reason 28); cm=closed one that does not listen,
// so its host's CM answers REJ reason 8. Both QPs are moved to INIT at
// setup, as rdma_create_qp does, so receives may be posted before the
// connection exists; the CM moves them to RTR and RTS with the
// attributes it negotiates (its PSNs drawn from the seed, timeout 19,
// retry_cnt and rnr_retry 7), so a cm= line takes no state=, psn=, mtu=,
// timeout=, retry_cnt=, rnr_retry=, min_rnr_timer= or access=;
// max_rd_atomic= and max_dest_rd_atomic= are the initiator depth and
// responder resources offered. A node's listening QPs take ports 7174,
// 7175, ... in declaration order. A disconnect step calls rdma_disconnect:
// the QP to ERR (its outstanding work requests are flushed), then the
// DREQ. The program answers its CM events at the instant they come, as
// rping does: a connect request with rdma_accept or rdma_reject, a
// DISCONNECTED brought by the peer's DREQ with rdma_disconnect (the
// DREP). Every event is in Result.CM and in the trace ("cm-event"). The
// fault plan names CM messages with cm= (fault drop cm=REP first=1);
// expect frames counts them (expect frames cm=REQ count=2). The
// built-ins cm-lost-req, cm-lost-rep, cm-lost-rtu, cm-reject,
// cm-no-listener and cm-disconnect-flush show each fault.
//
// # Expectations
//
// Each expect line is checked after the run; Result.Failed has one entry
// per claim not met, "line N: expect ...: got ...".
//
//	expect a.q wr=2 IBV_WC_RETRY_EXC_ERR        exactly one completion of wr 2 on a.q, with that status
//	                                             (and opcode=, byte_len=, imm= if given)
//	expect b.q wr=1 SUCCESS flags=IBV_WC_GRH|IBV_WC_WITH_IMM   its wc_flags, exactly (flags=0: none)
//	expect a.q completions 1:SUCCESS 2:WR_FLUSH_ERR   a.q's completions (send and receive), exactly, in
//	                                             the order polled; "none" for none
//	expect a.q state ERR                        the QP's state at the end
//	expect event b CQ_ERR count=1               b raised CQ_ERR exactly once (without count=: at least
//	                                             once); event b.q ... counts events of that QP only
//	expect events a PORT_ERR PORT_ACTIVE        a's asynchronous events, exactly, in order; or none
//	expect counter a.rcvd_seq_err=1             an rxe counter of a node at the end (absent means 0)
//	expect mem b.ctr u64=42                     8 bytes little-endian at b.ctr+0
//	expect mem b.buf+512 len=3000 equals=a.buf  two byte ranges are equal
//	expect rereg b.buf EOPNOTSUPP ok             what b.buf's rereg steps returned, exactly, in order
//	expect frames class=nak src=b count=1       exactly one frame matched these keys (see below)
//	expect frames src=a tx=2 count=3            three retransmissions by a
//	expect frames class=rnr none                no frame matched
//	expect cm b.q ADDR_RESOLVED ROUTE_RESOLVED REJECTED:28   the rdma_cm events of b.q's CM ID, exactly,
//	                                             in order (a status only where written); or none
//
// expect frames takes the match keys of a fault rule (package faults:
// link dir src dst qp op class cm psn tx from to; not nth, prob or first,
// which count frames as a plan acts on them) and counts the frames the
// fabric recorded that match them: a frame that went onto a link, or
// that the fabric dropped (a capture of the run holds exactly these),
// extra copies made by dup too. As in a fault plan, keys without link=
// look at a frame's first hop only (its sender's link), so a frame
// through a switch counts once; with link=X, at its hop over X. The time
// of a record is when the frame started onto the link.
//
// A run says what a scenario does not claim: Result.Checked counts the
// expect lines checked (the CLI prints "expectations: none" when it is
// 0), and Result.Warnings names each fault rule that never acted ("line
// N: fault rule K never matched a frame: ..."), usually a key that
// cannot match. A file without a node line is a parse error ("empty
// scenario").
//
// Any expect line may end with profile=rxe or profile=spec: the claim
// then holds only under that behaviour profile (where rxe and the IBTA
// differ, a scenario states both).
//
// flags= is where the profiles differ most (nic package doc): rxe sets
// IBV_WC_GRH on every receive, RC and UC too, IBV_WC_WITH_IMM on the send
// side of a SEND or WRITE with immediate, and flags a receive that
// invalidated an R_Key with the kernel's IB_WC_WITH_INVALIDATE, which
// libibverbs reads as IBV_WC_IP_CSUM_OK; under spec an RC receive of a
// SEND WITH INVALIDATE carries IBV_WC_WITH_INV alone. So a claim on the
// flags of a receive usually comes in two lines:
//
//	expect b.q wr=2 SUCCESS flags=IBV_WC_GRH|IBV_WC_IP_CSUM_OK profile=rxe
//	expect b.q wr=2 SUCCESS flags=IBV_WC_WITH_INV profile=spec
//
// Result.Completions spell each completion's flags the same way
// (Completion.WCFlags), so a run's JSON can be pasted into a claim. The
// flags of a completion that is not a success are whatever the NIC left
// (ibv_poll_cq(3): undefined); a claim on them is rarely meant.
//
// # Errors
//
// Parse returns a *ParseError whose text is "line:col: message", both
// 1-based, col counting characters and pointing at the offending word (at
// the value of a key=value, or at the statement when something is
// missing). For example (L is the line's number):
//
//	at ten a.q send wr=1 len=8     L:4: expected a duration like 10us, got "ten"
//	qp a.q rc peer=b.q psn=x       L:24: bad psn "x": expected a number (decimal or 0x hex)
//	link c a                       L:6: unknown node "c" (declare it first with node c)
//	fault drop pns=2               L:12: unknown key "pns"
//	at 0 b.buf rereg pd=mine       L:21: bad pd "mine": want own (the node's PD) or other (a second PD of the node)
//
// Errors inside a fault line are the faults parser's, at their column in
// the scenario line. References to QPs, CQs and memory regions are checked
// after the whole file is read (a QP may name a peer declared below it);
// their errors point at the reference.
//
// # Where it lives
//
// The format is a library at the module root, not part of the CLI: rocesim
// run and rocesim scenarios read and run files with it, conformance replays
// the same files on real rxe, and the swarm test in verbs writes its shrunk
// failures in it. Its tokenizer (fields, key=value, positioned errors) is
// internal/lineformat's, shared with the fault plans of package faults.
package scenario
