// Package nic is the RDMA NIC model: one RoCE v2 device with its
// resources (PDs, MRs, CQs, QPs, SRQs, AHs) and the transport, as a pure
// state machine in the shape of etcd's raft. Every input is a call that
// takes the current virtual time, and every output is something the
// caller collects:
//
//	dev := nic.New(nic.Config{Name: "rxe0", MAC: mac, IPv4: ip})
//	dev.PostSend(now, qp, wrs)         // verbs
//	dev.Receive(now, frame)            // frames from the wire
//	dev.Advance(now)                   // at dev.NextDeadline(): ACK timeout, RNR wait
//	dev.Drain(func(frame, note) {...}) // frames to put on the wire (note: "retransmission #2")
//	dev.NextAsyncEvent()               // CQ_ERR, QP_FATAL, COMM_EST, SRQ_LIMIT_REACHED, ...
//	cq.Poll(wcs)                       // completions
//
// The device never reads a clock, starts a goroutine or touches a socket,
// so the same device runs on the simulated fabric (package verbs wires it
// there) and could run against real frames in real time.
//
// Each QP has a requester (requester.go: segmentation by path MTU, PSNs,
// AckReq, go-back-N rewinds), a responder (responder.go: PSN and opcode
// sequence checks, placing data, READ and atomic answers, duplicate
// handling, RNR, ACK/NAK) and a completer (completer.go: ACK/NAK and read
// response processing, in-order completion, the ACK timeout and RNR
// timers). The modify_qp rules are the Linux kernel's table (qpstate.go).
//
// # Behaviour profiles
//
// ProfileRXE (the default) follows Linux rxe where it departs from the
// IBTA text; ProfileSpec follows the text. The differences modelled:
//
//   - retry_cnt 7: rxe retries forever; the IBTA counts 7 retries.
//     (rnr_retry 7 is infinite in both.)
//   - Send-side CQ overflow: rxe raises CQ_ERR and loses the completion
//     silently, leaving the QP running (its completer ignores the failed
//     post); the IBTA moves the QP to ERR. A receive-side overflow moves
//     the QP to ERR in both.
//   - A receive the responder cannot fill: rxe completes it with
//     REM_INV_REQ_ERR (message longer than the buffer) or LOC_QP_OP_ERR
//     (buffer not writable); the IBTA with LOC_LEN_ERR or LOC_PROT_ERR.
//     The NAKs are the same: invalid request, remote operational error.
//
// Where both agree but a reader might expect otherwise: a CQ's size is
// rounded up to 2^k-1 entries (rxe_queue_init) and CQE() reports it; MR
// keys are index<<8 | generation with rkey == lkey; the first user QPN is
// 0x11; atomic operands sit in memory in host (little-endian) order.
//
// The responder and completer run as explicit named states (respState,
// compState), after rxe's RESPST_ and COMPST_ steps.
package nic
