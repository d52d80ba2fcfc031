// Package nic is the RDMA NIC model: one RoCE v2 device with its
// resources (PDs, MRs, CQs, QPs, SRQs, AHs) and the transport, as a pure
// state machine in the shape of etcd's raft: every input is a call that
// takes the current virtual time and only changes state; everything the
// inputs caused comes out of one call, Ready, as one value the driver
// applies with no call back into the device:
//
//	dev := nic.New(nic.Config{Name: "rxe0", MAC: mac, IPv4: ip})
//	dev.PostSend(now, qp, wrs)   // verbs
//	dev.Receive(now, frame)      // frames from the wire
//	dev.Advance(now)             // time reached the last batch's Deadline: ACK timeout, RNR wait
//	dev.TxDone(now)              // the port is done with the oldest frame handed out
//	rd := dev.Ready()            // rd.Frames (each with a note: "retransmission #2"), rd.Events
//	                             // (CQ_ERR, QP_FATAL, COMM_EST, …), rd.CQs and rd.Notified (CQs
//	                             // that took completions, channels that took events), rd.Deadline
//	cq.Poll(wcs)                 // the application takes its completions
//	dev.RxErrors(code), dev.RxDrops(why) // frames dropped: malformed, or refused before any QP (receive.go)
//	dev.SendMAD(now, dst, mad)   // QP1, the GSI QP (gsi.go): MADs for a connection manager
//	                             // (package rdmacm); rd.MADs are the ones QP1 received
//
// ready.go shows the driver's loop. The device never reads a clock,
// starts a goroutine or touches a socket, so the same device runs on the
// simulated fabric (verbs/world.go's Host is its driver there) and
// against real frames in real time (conformance/modelhost.go).
//
// Each QP has a requester (requester.go: segmentation by path MTU, PSNs,
// AckReq, go-back-N rewinds), a responder (responder.go: PSN and opcode
// sequence checks, placing data, READ and atomic answers, duplicate
// handling, RNR, ACK/NAK) and a completer (completer.go: ACK/NAK and read
// response processing, in-order completion, the ACK timeout and RNR
// timers). The modify_qp rules are the Linux kernel's table (qpstate.go).
// The timers of all QPs sit in one min-heap (timers.go) holding only the
// QPs with a deadline, so NextDeadline and Advance cost the same with one
// QP or 100,000 idle ones; QPs due together fire in creation order.
//
// At scale every QP is cold when its next packet comes, so the per-packet
// path avoids touching QPs it does not work on and lines of the QP it
// does not need: the heap's entries carry their deadlines (sifting reads
// no other QP), each QP's frames in the port are counted in a dense
// table of the device (ready.go, txSlot: 8 bytes a QP, and TxDone reads
// the QP only when something waits for room), the QP's fields are laid
// out by cache line so that a message touches six of its lines on the
// sending side and five on the receiving one (QP), what the completer
// reads of a send WQE opens it (sendWQE), and a packet's payload is
// gathered once, into its frame.
//
// # Behaviour profiles
//
// ProfileRXE (the default) follows Linux rxe where it departs from the
// IBTA text; ProfileSpec follows the text. The differences modelled:
//
//   - retry_cnt 7: rxe retries forever; the IBTA counts 7 retries.
//     (rnr_retry 7 is infinite in both.)
//   - CQ overflow: rxe raises CQ_ERR for every completion lost and the CQ
//     takes completions again once polled; a lost send completion leaves
//     the QP running (its completer ignores the failed post), a lost
//     receive completion moves the QP to ERR. The IBTA (C11-37, C9-218)
//     raises CQ_ERR once and keeps the CQ in error; each QP that completes
//     into it from then on, send or receive side, raises QP_FATAL and goes
//     to ERR, when it tries (not every QP feeding the CQ at once).
//   - A receive the responder cannot fill: rxe completes it with
//     REM_INV_REQ_ERR (message longer than the buffer) or LOC_QP_OP_ERR
//     (buffer not writable); the IBTA with LOC_LEN_ERR or LOC_PROT_ERR.
//     The NAKs are the same: invalid request, remote operational error.
//   - byte_len of a successful send-side completion: rxe reports the
//     message length for every opcode (make_send_cqe: wqe->dma.length), so
//     a 3000-byte SEND completes with 3000 and an atomic with 8; the IBTA
//     leaves the field undefined there (libibverbs: valid for receives
//     only), and ProfileSpec reports only what landed in local memory: a
//     READ's length, an atomic's 8, 0 for a SEND or WRITE. A failed or
//     flushed send completion has byte_len 0 in both (rxe fills it only
//     on success).
//   - A receive that invalidated an R_Key (SEND WITH INVALIDATE): rxe
//     flags it with the kernel's IB_WC_WITH_INVALIDATE, 1<<2 (rxe_resp.c
//     do_complete writes kernel flags into the user CQE), which libibverbs
//     reads as IBV_WC_IP_CSUM_OK, so ProfileRXE sets WCFlagIPCSumOK;
//     ProfileSpec sets WCFlagWithInv (IBV_WC_WITH_INV, 1<<3). Both put
//     the R_Key in ImmData; WC.Invalidated tells either. And rxe sets
//     IB_WC_GRH (IBV_WC_GRH) on every successful receive completion, RC
//     and UC too; ProfileSpec on UD receives only, where libibverbs
//     gives it a meaning. rxe also sets IBV_WC_WITH_IMM on the send-side
//     completion of a SEND or WRITE with immediate (imm_data zero);
//     ProfileSpec leaves a send completion's flags clear.
//   - A duplicate SEND or WRITE packet (a retransmission of one already
//     received): rxe re-acknowledges every one, with the PSN before the
//     expected one (duplicate_request, citing C9-105); ProfileSpec only
//     those with AckReq set. Found by the conformance runs: after an ACK
//     timeout rxe answers the resent first packet of a message.
//   - A response for a PSN never sent, past a READ or atomic still
//     waiting for its response: rxe takes it for an implied NAK and
//     retries at once (check_psn compares it only with the oldest WQE);
//     the IBTA drops it, and the ACK timeout retries.
//   - The ACK timer: rxe arms it on a send only when it is not running,
//     and never stops it when everything is acknowledged, so a request
//     sent before it runs out is retried when it runs out (measured on
//     real rxe); ProfileSpec starts a full timeout for the first request
//     sent after everything was acknowledged. Both push it out after a
//     response that leaves something unacknowledged.
//   - The ACK timeout itself (Profile.ACKTimeout): ProfileSpec waits
//     4.096 µs × 2^timeout (IBTA vol. 1 §9.7.6.1.3); rxe converts that to
//     jiffies when the QP is modified, rounding down, at least one
//     (rxe_qp.c rxe_qp_from_attr), so at Debian 6.1's HZ=250 it waits a
//     multiple of 4 ms: timeout 14 is 64 ms, not 67.1 ms, and every
//     timeout up to 10 is 4 ms. Where in a jiffy the timer was armed,
//     and the timer wheel's slack, are not modelled.
//   - A READ request or atomic that carries a payload: rxe answers it as
//     if it had none; ProfileSpec NAKs it invalid request (IBTA vol. 1
//     §9.9.3). A READ response for a WQE that is not a READ fails it with
//     FATAL_ERR under rxe, BAD_RESP_ERR under ProfileSpec.
//   - More READs and atomics than max_dest_rd_atomic: rxe answers them
//     all; ProfileSpec NAKs invalid request one that arrives while
//     max_dest_rd_atomic earlier ones still have responses in the port
//     (IBTA §9.9.3, "too many RDMA READ or ATOMIC requests").
//   - A QP's capacities: rxe sizes a send WQE to the larger of its SGEs
//     and its inline data and reports both at that size (max_send_sge 2
//     and max_inline_data 64 become 4 and 64), and makes each queue a
//     power of two less one (max_send_wr 16 holds 31; create_qp answers
//     with the 16 asked for, query_qp with 31: rxeQPCaps); an SRQ's
//     queue the same (srqSlots), its limit armable up to what it holds.
//     ProfileSpec gives a QP or SRQ what it asked for.
//
// Both profiles spend one retry_cnt count per go-back-N round, whether
// the ACK timeout, a NAK PSN sequence error or an implied NAK (a response
// past a READ or atomic whose response was lost) started it; a NAK or
// implied NAK while a round runs starts none (rxe's comp.started_retry).
//
// A READ's responses are built as the port takes them, at most 64 of the
// QP's frames waiting there (as the requester's packets are), so a READ
// of any size costs about what a WRITE of that size does and holds a
// bounded number of frames; requests that arrive meanwhile wait in order
// (rxe's req_pkts queue), at most 4096 per QP.
//
// Where both agree but a reader might expect otherwise: a CQ's size is
// rounded up to 2^k-1 entries (rxe_queue_init) and CQE() reports it; MR
// keys are index<<8 | generation with rkey == lkey; the first user QPN is
// 0x11; atomic operands sit in memory in host (little-endian) order.
//
// # Resources and limits
//
// QueryDevice reports rxe 6.1's limits (what `ibv_devinfo -v` prints in
// the conformance guest) and each max_… count is enforced as reported,
// the way rxe's pools count: live objects only (a destroyed one frees its
// place at once), the kernel's own included. The kernel holds ib_mad's
// PD, CQ and GSI QP and the DMA MR of that PD on every rxe device, so a
// user gets max_pd-1 PDs, max_cq-1 CQs, max_qp-1 QPs and max_mr-1 MRs
// (Resources counts them as `rdma resource show` lists them). One past
// the limit is EINVAL (rxe's __rxe_add_to_pool: real rxe makes 32767
// AHs, then refuses with EINVAL), ENOMEM for an MR (rxe_alloc). QPNs are handed out cyclically over 0x11..0x100000, as
// rxe's xa_alloc_cyclic: a destroyed QP's number comes back only after
// the range has gone round. MR indices go round 1..0x80000 the same way
// (the model gives the first user MR index 1, where rxe's kernel DMA MR
// has taken index 1 and the user's first is index 2; the conformance
// comparison normalises keys).
//
// # Multicast
//
// AttachMcast puts a UD QP in a group (mcast.go), with rxe's limits: 8192
// groups, 56 QPs a group, ENOMEM past either; DestroyQP of an attached
// QP is EBUSY, as uverbs refuses it. A frame for the multicast QPN
// (0xFFFFFF) is counted once in rcvd_pkts and offered to the group's QPs
// in attach order, each checked as any UD QP is (state, P_Key, Q_Key),
// as rxe_rcv_mcast_pkt does; under ProfileRXE only while the host has
// joined the group at the IP level (JoinGroup: rdma_cm's IGMP join; the
// all-hosts group always), else it is not the device's (DropNotLocal),
// as Linux's IP layer drops it before rxe; under ProfileSpec an attached
// QP is enough. The device does not loop its own frames back: LoopsBack
// tells the driver which frames it must hand back to Receive (verbs.Host
// does, as Linux's IP layer loops a joined group's datagrams to its
// host). DetachAll is the kernel's detach when a device is closed.
//
// # The route of one SEND
//
// One signaled RC SEND from host A to host B, and its ACK back, with the
// file and function of each step (paths from the module root; a test,
// TestDocRouteExists, checks that each named function exists in the file
// named). A's side first:
//
//   - verbs/resources.go (*QP).PostSend: converts the verbs WRs to nic's and
//     calls the device, then pumps the host.
//   - nic/post.go (*Device).PostSend: validates each WR (errno and field
//     on misuse); postSend queues the WQE on the send queue.
//   - nic/requester.go (*Device).requesterRun: takes the WQE, gives it its
//     PSNs and arms the ACK timer (armAckTimer).
//   - nic/requester.go (*Device).sendPacket: builds one packet per path-MTU
//     segment (SEND_FIRST/MIDDLE/LAST or SEND_ONLY), AckReq on the last.
//   - nic/frame.go (*Device).emit: encodes the frame into the outbox and
//     counts it in flight for its QP.
//   - verbs/world.go (*Host).pump: the driver's loop. It takes the batch
//     (nic/ready.go (*Device).Ready), hands each frame to send, keeps the
//     batch's events, and re-arms the host's timer at its Deadline.
//   - verbs/world.go (*Host).send: puts each frame on the host's port.
//   - sim/fabric/fabric.go (*Node).Send: copies the frame into a pooled
//     buffer and enters it on the link (hop.go (*Fabric).enter applies the
//     fault plan, link.go (*direction).enqueue and transmit serialise it);
//     the port finishing a frame (buffer.go (*frameBuf).left) calls back
//     verbs/world.go (*Host).txDone, which tells the device
//     (nic/ready.go (*Device).TxDone), after the batch if pump is still
//     applying it.
//   - sim/fabric/hop.go (*Fabric).arrive: at the far end of the link, after
//     serialisation and propagation, hands the bytes to B's receiver.
//
// On B:
//
//   - verbs/world.go (*Host).Receive: passes the frame to B's device, then
//     pumps B.
//   - nic/receive.go (*Device).Receive: decodes and checks the headers
//     (drops are counted by reason), finds the QP, and sends a request to
//     the responder.
//   - nic/responder.go (*Device).receiveRequest: runs the responder's
//     states (respond: QP state, PSN and opcode sequence, resources).
//   - nic/responder.go (*Device).placeSend: takes the receive WQE
//     (takeRecv), copies the payload into its buffer and, on the last
//     packet, completes it.
//   - nic/qp.go (*Device).completeRecv: builds the receive completion and
//     hands it to pushCQE, which adds it to B's CQ (nic/cq.go (*CQ).push;
//     overflow rules in pushCQE).
//   - nic/responder.go (*Device).sendAck: the ACK of the last PSN (or of
//     the 66th packet since the last that asked) goes out through emit,
//     B's pump and the fabric as above.
//
// Back on A:
//
//   - nic/completer.go (*Device).receiveResponse: runs the completer's
//     states (complete) on the ACK.
//   - nic/completer.go (*Device).ackUpTo: marks the WQEs the ACK covers
//     done and moves or stops the ACK timer.
//   - nic/completer.go (*Device).completeHead: completes the done WQEs in
//     order from the head of the send queue.
//   - nic/qp.go (*Device).completeSend: builds the send completion and
//     pushes it on A's CQ (pushCQE).
//   - verbs/resources.go (*CQ).Poll: the application polls the completions
//     (nic/cq.go (*CQ).Poll), on B the receive, on A the send.
//
// If the ACK does not come, nic/timers.go (*Device).Advance fires the ACK
// timer at NextDeadline and the completer's errorRetry rewinds the
// requester (go-back-N), which sends again from requesterRun.
//
// The responder and completer run as explicit named states (respState,
// compState), after rxe's RESPST_ and COMPST_ steps.
//
// Why a frame or a completion exists is a typed value, never text that
// code reads back (reasons.go): a go-back-N round's retryReason, a failed
// completion's wcReason, a dropped UC message's msgDropReason. Their
// String methods give the notes the captures and the trace carry; the
// fabric's drops carry a sim.DropCause the same way, which the ladder
// reads.
package nic
