package rdmacm

import (
	"github.com/rocesim/rocesim/verbs"
	"github.com/rocesim/rocesim/wire"
)

// A connection whose QP the application makes and moves itself, as UCX
// does: the ID has no QP (no CreateQP, UseQP or AttachQP), Connect and
// Accept name the QP by ConnParam.QPNum, and the application asks the ID
// for each transition's attributes (InitQPAttr, rdma_init_qp_attr). The
// flow, as Linux's rdma_cm runs it for a user-space ID (whose kernel
// side never has a QP):
//
//  1. active: INIT (ResolveRoute done), Connect with the QPN: the REQ;
//  2. passive: CONNECT_REQUEST; INIT, RTR and RTS of its own QP (RTS is
//     allowed before the REP, cm_init_qp_rts_attr), Accept with the
//     QPN: the REP;
//  3. active: CONNECT_RESPONSE instead of ESTABLISHED (cma_ib_handler
//     reports it when the ID has no QP); RTR and RTS, then Establish:
//     the RTU, and no event on this side;
//  4. passive: ESTABLISHED with the RTU.
//
// The attributes are those the model gives a QP the CM owns (toRTS),
// except where ib_cm's init_qp_attr differs for a user QP: the access
// flags of INIT (remote write, and remote read and atomic when the
// connection has responder resources; none at all before Connect,
// cma_ib_init_qp_attr), and the RDMA read depths, which are the peer's
// offer until Accept settles them (cm_init_qp_rtr_attr,
// cm_init_qp_rts_attr take cm_id_priv's responder resources and
// initiator depth).

// InitQPAttr returns the attributes, and the mask of those set, that
// take a QP the application made itself to state (rdma_init_qp_attr):
// INIT, RTR or RTS of an RC connection, or a UD ID's (INIT's fields and
// the Q_Key, whatever state is asked, cma_ib_init_qp_attr). Before
// Connect every state gets INIT's fields with no access flags, as the
// kernel answers an ID that has no ib_cm ID yet (mask 0x39 on real rxe,
// conformance TestRdmacmMisuseRxe); an ID with no device yet gets
// EINVAL. RTR and RTS are EINVAL until the peer's side is known: on the
// active side before the REP, and in any state but a connection's
// (cm_init_qp_rtr_attr).
func (id *CMID) InitQPAttr(state verbs.QPState) (verbs.QPAttr, verbs.QPAttrMask, error) {
	init := verbs.QPAttrState | verbs.QPAttrPKeyIndex | verbs.QPAttrPort
	// An ID with no device (not bound to an address of one, nor
	// resolved) has nothing to say: EINVAL, as ucma_init_qp_attr answers
	// on real rxe (conformance TestRdmacmMisuseRxe).
	if !id.hasDevice() {
		return verbs.QPAttr{}, 0, misuse("init_qp_attr", "the ID has no device yet (bind it to an address, or resolve one)")
	}
	if id.ps == PSUDP {
		return verbs.QPAttr{QPState: state, PortNum: 1, QKey: wire.UDPQKey}, init | verbs.QPAttrQKey, nil
	}
	switch id.state {
	case stateIdle, stateAddrResolved, stateRouteResolved:
		// An ID back in IDLE after a connection attempt (rejected,
		// unreachable) has an ib_cm ID in its IDLE, which answers
		// nothing (ib_cm_init_qp_attr).
		if state > verbs.QPStateErr || id.state == stateIdle && id.hasCMID() {
			break
		}
		return verbs.QPAttr{QPState: state, PortNum: 1}, init | verbs.QPAttrAccessFlags, nil
	case stateReqSent, stateMRAReqRcvd, stateReqRcvd, stateRepRcvd, stateRepSent, stateEstablished:
		dest, rd := id.rdAtomic()
		switch {
		case state == verbs.QPStateInit:
			access := verbs.AccessRemoteWrite
			if dest != 0 {
				access |= verbs.AccessRemoteRead | verbs.AccessRemoteAtomic
			}
			return verbs.QPAttr{QPState: state, PortNum: 1, QPAccessFlags: access}, init | verbs.QPAttrAccessFlags, nil
		case id.state == stateReqSent || id.state == stateMRAReqRcvd:
			// The active side before the REP: no peer to go to yet.
		case state == verbs.QPStateRTR:
			id.drawRQPSN()
			a, m := id.rtrAttr(dest)
			return a, m, nil
		case state == verbs.QPStateRTS:
			a, m := id.rtsAttr(rd)
			return a, m, nil
		}
	}
	return verbs.QPAttr{}, 0, misuse("init_qp_attr", "the ID is %v: no attributes for %v", id.state, state)
}

// hasDevice reports whether the ID is bound to its host's device: bound
// to the host's address (rdma_bind_addr to 0.0.0.0 binds a port only) or
// past address resolution.
func (id *CMID) hasDevice() bool {
	switch id.state {
	case stateIdle, stateAddrQuery:
		return id.devBound || id.hasCMID()
	}
	return true
}

// rdAtomic is the connection's RDMA read depths as ib_cm holds them for
// a user QP: max_dest_rd_atomic and max_rd_atomic. The active side
// offers its own in the REQ until the REP answers with the passive
// side's, which the passive side took from the REQ until Accept caps
// them with its own.
func (id *CMID) rdAtomic() (dest, rd uint8) {
	switch {
	case id.accepted:
		return id.respRes, id.initDepth
	case id.state == stateReqSent || id.state == stateMRAReqRcvd:
		return id.respRes, id.initDepth
	}
	return id.peerInit, id.peerResp
}

// Establish sends the RTU of a connection whose QP the application made
// itself, once it has the CONNECT_RESPONSE and has moved its QP to RTS
// (rdma_establish). The ID is then connected; no event follows on this
// side (the passive side gets ESTABLISHED). EINVAL for an ID with a QP
// of the CM's (the CM moved it and sent the RTU itself) or in any state
// but the CONNECT_RESPONSE's.
func (id *CMID) Establish() error {
	if id.QP != nil {
		return misuse("establish", "the ID has a QP: the CM established the connection itself")
	}
	if id.state != stateRepRcvd {
		return misuse("establish", "the ID is %v, not REP_RCVD (after CONNECT_RESPONSE)", id.state)
	}
	id.sendRTU()
	id.setState(stateEstablished)
	return nil
}

// repMRA is the active side's MRA for this passive ID's REP (its user
// made its QP and has not called Establish yet): the REP is not sent
// again before the MRA's service timeout plus the packet life time
// (cm_mra_handler in REP_SENT), once.
func (id *CMID) repMRA() bool {
	if id.repMRAed {
		return true // a duplicate: ib_cm's MRA_REP_RCVD ignores it
	}
	id.repMRAed = true
	id.madTimeout = cmConvertToMs(mraServiceTimeout) + cmConvertToMs(packetLifeTime+1)
	id.armTimer(id.madTimeout)
	return true
}

// hasCMID reports whether the ID has an ib_cm ID of its own, which
// rdma_connect or a CONNECT_REQUEST gives it with its communication ID
// and which outlives the connection (rdma_disconnect, rdma_init_qp_attr
// and the device an idle ID keeps depend on it).
func (id *CMID) hasCMID() bool { return id.localComm != 0 }

// rejectREP refuses the REP of a connection whose QP the user made
// (rdma_reject after CONNECT_RESPONSE: ib_send_cm_rej takes REP_RCVD): a
// REJ of the REP, consumer reject, and the ID is idle.
func (id *CMID) rejectREP(private []byte) error { // private's length checked by Reject
	id.a.reject(id.peer, id.tid, id.localComm, id.remoteComm, msgREP, wire.CMREJConsumerReject, private)
	id.setState(stateIdle)
	return nil
}

// repRcvd is the REP of a connection whose QP the application made: the
// ID waits for Establish, and the application gets CONNECT_RESPONSE with
// what the REP carried (cma_set_rep_event_data).
func (id *CMID) repRcvd(r *wire.CMREP) {
	id.setState(stateRepRcvd)
	// The peer waits for the RTU, and sends its REP again if Establish
	// is late: the user owes an answer (Unanswered), as for a REQ.
	id.a.owe(id)
	id.post(&Event{Event: EventConnectResponse, ID: id, Param: ConnParam{ResponderResources: r.ResponderResources,
		InitiatorDepth: r.InitiatorDepth, RNRRetryCount: r.RNRRetryCount, QPNum: r.LocalQPN,
		PrivateData: append([]byte(nil), r.PrivateData[:]...)}})
}

// qpNum is the QPN a REQ or REP names: the ID's QP's, or the one the
// application gives for its own QP.
func (id *CMID) qpNum(p ConnParam) uint32 {
	if id.QP != nil {
		return id.QP.QPNum
	}
	return p.QPNum
}

// portMTU is the active MTU of the ID's port (the REQ's path MTU).
func (id *CMID) portMTU() verbs.MTU {
	var c *verbs.Context
	if id.QP != nil {
		c = id.QP.Context()
	} else {
		var err error
		if c, err = id.a.h.Dev.Open(); err != nil {
			return verbs.MTU1024
		}
	}
	if pa, err := c.QueryPort(1); err == nil {
		return pa.ActiveMTU
	}
	return verbs.MTU1024
}

// drawRQPSN draws the PSN a passive ID receives from, which its REP
// advertises, once: at Accept, or before when InitQPAttr asks for RTR
// first (rdma_cm draws it with the ID, cma: get_random_u32() & 0xffffff).
func (id *CMID) drawRQPSN() {
	if !id.rqDrawn {
		id.rqPSN = id.a.rnd.Uint32N(1 << 24)
		id.rqDrawn = true
	}
}
