package rdmacm

import (
	"encoding/binary"
	"math/bits"
	"math/rand/v2"
	"net/netip"
	"syscall"

	"github.com/rocesim/rocesim/nic"
	"github.com/rocesim/rocesim/sim"
	"github.com/rocesim/rocesim/verbs"
	"github.com/rocesim/rocesim/wire"
)

// Flow of a MAD through the host's CM (the kernel's ib_cm and rdma_cm
// in one):
//  1. verbs.Host hands each MAD QP1 received to agent.receive;
//  2. the MAD header must be a CM Send (class 0x07, version 2), else it
//     is counted in Dropped and ignored;
//  3. the message is decoded by its attribute (wire/cm.go) and matched:
//     a REQ by the listener of its service ID (a duplicate REQ by the
//     sender's address and communication ID), everything else by the
//     remote communication ID it carries, which is ours; a duplicate
//     REQ the application has not answered yet gets an MRA;
//  4. the CM ID's state decides: QP transitions, the answer MAD, the
//     event posted on the ID's channel; a message the state does not
//     expect is ignored and counted, as ib_cm drops it;
//  5. a MAD that waits for an answer (REQ, REP, DREQ) keeps a timer in
//     virtual time; when it runs out the MAD is sent again, at most
//     max_cm_retries times, then the ID fails (UNREACHABLE, or
//     DISCONNECTED for a DREQ); an MRA for a REQ lengthens its timer.

// The values rdma_cm and ib_cm use on rxe, as the REQs and REPs of
// wire/testdata/cm carry them (see wire/testdata/cm/README.md).
const (
	// cmResponseTimeout is CMA_CM_RESPONSE_TIMEOUT (cma.c): 4.096 µs × 2^20.
	cmResponseTimeout = 20
	// maxCMRetries is CMA_MAX_CM_RETRIES (cma.c).
	maxCMRetries = 15
	// packetLifeTime is CMA_IBOE_PACKET_LIFETIME (cma.c), the path's
	// packet life time on RoCE; the QPs' ACK timeout is one more
	// (cm_init_av_by_path: av->timeout = packet_life_time + 1).
	packetLifeTime = 18
	// targetACKDelay is rxe's local_ca_ack_delay, the REP's target ACK
	// delay.
	targetACKDelay = 15
	// retryCount and rnrRetryCount are what rdma_cm puts in the REQ
	// (cma_connect_ib: retry_count 7 and the user's rnr_retry_count,
	// which rping leaves at 7) and so in the QPs.
	retryCount    = 7
	rnrRetryCount = 7
	// mraServiceTimeout is the service timeout of the MRA rdma_cm sends
	// for a REQ its application has not answered yet: CMA_CM_MRA_SETTING
	// (cma.c) is IB_CM_MRA_FLAG_DELAY | 24, and the MRA's 5-bit field
	// keeps the 24 (4.096 µs × 2^24, 65536 ms by cm_convert_to_ms).
	mraServiceTimeout = 24
	// msgREQ is CM_MSG_RESPONSE_REQ, the MRA's (and REJ's) "message"
	// field naming a REQ (IBTA vol. 1 §12.6.6); msgREP names a REP.
	msgREQ = 0
	msgREP = 1
	// msgOther names neither: a REJ sent while connecting or waiting
	// for the RTU (cm_format_rej).
	msgOther = 2
	// hiTID is the high half of ib_cm's transaction IDs: its MAD
	// agent's hi_tid, 2 in every capture (the first agent registered
	// after ib_sa's).
	hiTID = 2
)

// cmConvertToMs converts a CM timeout code to milliseconds as ib_cm does
// (cm_convert_to_ms): 4.096 µs × 2^t rounded to 2^(t-8) ms.
func cmConvertToMs(t uint8) sim.Duration {
	return sim.Duration(1) << max(int(t)-8, 0) * sim.Millisecond
}

// reqTimeout is how long the active side waits for an answer to its REQ
// (ib_send_cm_req: 2 × packet life time + the remote CM response
// timeout): 6144 ms. Measured on rxe: 6.34–6.41 s between REQs.
var reqTimeout = 2*cmConvertToMs(packetLifeTime) + cmConvertToMs(cmResponseTimeout)

// repTimeout is how long the passive side waits for the RTU (cm_req_handler
// takes the REQ's local CM response timeout): 4096 ms. Measured on rxe:
// 4.19–4.35 s between REPs.
var repTimeout = cmConvertToMs(cmResponseTimeout)

// cmState is an ib_cm state (enum ib_cm_state), with rdma_cm's address
// states before it.
type cmState uint8

const (
	stateIdle cmState = iota
	stateAddrResolved
	stateRouteResolved
	stateListen
	stateReqSent
	stateReqRcvd
	stateRepSent
	stateEstablished
	stateDreqSent
	stateDreqRcvd
	stateTimewait
	stateDestroyed
	stateAddrQuery // rdma_resolve_addr waiting for a neighbour that never answers
	stateMRAReqRcvd
	// stateRepRcvd: the active side of a connection whose QP the
	// application made itself has the REP and reported CONNECT_RESPONSE;
	// Establish sends the RTU (ib_cm's MRA_REP_SENT: rdma_cm holds the
	// REP with a delayed MRA until the application answers).
	stateRepRcvd
)

var stateNames = [...]string{"IDLE", "ADDR_RESOLVED", "ROUTE_RESOLVED", "LISTEN", "REQ_SENT", "REQ_RCVD",
	"REP_SENT", "ESTABLISHED", "DREQ_SENT", "DREQ_RCVD", "TIMEWAIT", "DESTROYED", "ADDR_QUERY", "MRA_REQ_RCVD", "REP_RCVD"}

func (s cmState) String() string { return stateNames[s] }

// agent is one host's connection manager: QP1's user.
type agent struct {
	cm  *CM
	h   *verbs.Host
	rnd *rand.Rand
	// ids are the live IDs by index (timers name them by it); a
	// destroyed ID's slot is nil and goes to freeIDs, for the next ID:
	// a server that accepts connections for ever keeps a table the size
	// of its most IDs at once.
	ids     []*CMID
	freeIDs []uint64
	comm    map[uint32]*CMID   // by local communication ID (looked up, never iterated)
	lst     map[uint16][]*CMID // listeners by port (listenerFor)
	// udpLst: RDMA_PS_UDP's listeners by port (sidr.go), made on first use.
	udpLst map[uint16][]*CMID
	// ports: the IDs bound to each port of a port space, in the order
	// they bound (checkPort; looked up, never iterated).
	ports map[portKey][]*CMID
	dups  map[reqKey]*CMID // passive IDs by the REQ that made them
	// owing: IDs that received a REQ, a DREQ, or the REP of a
	// connection whose QP the user made, their user has not
	// answered yet, in the order they came (Unanswered prunes it).
	owing []*CMID
	buf   [wire.MADLen]byte // the MAD being built
	next  uint32            // the next local communication ID
	// Dropped counts MADs the CM ignored: not CM, unknown attribute, or
	// not expected in the ID's state.
	Dropped uint64
	// tracking: FarewellChanges has been called; from then on changed
	// lists, in order, the IDs whose state moved since its last call
	// (each once: CMID.dirty). Nothing is kept before, so a CM nobody
	// asks grows nothing.
	tracking bool
	changed  []*CMID
	// will, when set, takes the MADs send would send (FarewellChanges).
	will func(dst netip.Addr, mad []byte)
}

// reqKey names a REQ: who sent it and the communication ID it chose.
type reqKey struct {
	src  netip.Addr
	comm uint32
}

func newAgent(cm *CM, h *verbs.Host) *agent {
	a := &agent{cm: cm, h: h, rnd: sim.NewSeeds(h.World().Seed()).Stream("rdmacm/" + h.Name()),
		comm: map[uint32]*CMID{}, lst: map[uint16][]*CMID{}, dups: map[reqKey]*CMID{}}
	a.next = a.rnd.Uint32()
	h.SetMADHandler(a.receive)
	return a
}

// newCommID returns a fresh local communication ID (ib_cm draws them
// from an xarray with a random start; never 0, which a REJ of an unknown
// REQ carries).
func (a *agent) newCommID() uint32 {
	for {
		a.next++
		if _, used := a.comm[a.next]; !used && a.next != 0 {
			return a.next
		}
	}
}

// tid is ib_cm's transaction ID for an exchange started by the ID with
// local communication ID comm (cm_form_tid): hi_tid above the ID as it
// sits in the MAD, byte-swapped on a little-endian host.
func tid(comm uint32) uint64 { return hiTID<<32 | uint64(bits.ReverseBytes32(comm)) }

// Fire is a CM ID's timer running out (arg: the ID's index): its MAD's
// or, in ADDR_QUERY, address resolution's.
func (a *agent) Fire(now sim.Time, arg uint64) {
	id := a.ids[arg]
	if id == nil {
		return // destroyed: Destroy cancels its timer, so never
	}
	id.timerOn = false
	if id.state == stateAddrQuery {
		// rdma_resolve_ip's request timed out (process_one_req:
		// -ETIMEDOUT); rdma_cm's addr_handler takes the ID back to
		// its bound state and reports ADDR_ERROR.
		id.setState(stateIdle)
		id.post(&Event{Event: EventAddrError, ID: id, Status: -int(syscall.ETIMEDOUT)})
		return
	}
	if id.retries >= maxCMRetries {
		id.giveUp()
		return
	}
	id.retries++
	a.send(id.peer, id.lastMAD[:])
	id.armTimer(id.madTimeout)
}

// send sends a MAD; a MAD that cannot leave (no neighbour) is lost as
// the MAD layer would lose it, and its timer repairs nothing: counted.
func (a *agent) send(dst netip.Addr, mad []byte) {
	if a.will != nil {
		a.will(dst, mad)
		return
	}
	if err := a.h.SendMAD(dst, mad); err != nil {
		a.Dropped++
	}
}

// header fills the MAD header of a CM message into a.buf.
func (a *agent) header(attr wire.CMAttr, t uint64) {
	clear(a.buf[:])
	m := wire.MAD(a.buf[:])
	m.SetHeader(&wire.MADHeader{BaseVersion: wire.MADBaseVersion, MgmtClass: wire.MADClassCM,
		ClassVersion: wire.MADClassVersion, Method: wire.MADMethodSend, TransactionID: t, AttributeID: uint16(attr)})
}

// receive takes one MAD from QP1.
func (a *agent) receive(now sim.Time, in *nic.MADIn) {
	m := wire.MAD(in.MAD[:])
	if !m.IsCM() || m.Header().Method != wire.MADMethodSend {
		a.Dropped++
		return
	}
	h := m.Header()
	d := m.Data()
	attr := wire.CMAttr(h.AttributeID)
	if attr == wire.CMAttrREQ {
		var r wire.CMREQ
		r.Decode(d)
		a.onREQ(in.Src, h.TransactionID, &r)
		return
	}
	if attr == wire.CMAttrSIDRREQ || attr == wire.CMAttrSIDRREP {
		if !a.receiveSIDR(in.Src, attr, h.TransactionID, d) {
			a.Dropped++
		}
		return
	}
	// Every other CM message carries the receiver's communication ID as
	// its Remote Communication ID, at offset 4 (IBTA vol. 1 §12.6), but
	// the REJ of a requester that gave up before it learnt ours (reason
	// timeout, Remote Communication ID 0): ib_cm finds that request by
	// its sender's GUID and communication ID (cm_acquire_rejected_id),
	// the model by its sender's address and communication ID.
	id := a.comm[binary.BigEndian.Uint32(d[4:])]
	if attr == wire.CMAttrREJ && binary.BigEndian.Uint32(d[4:]) == 0 &&
		wire.CMREJReason(binary.BigEndian.Uint16(d[10:])) == wire.CMREJTimeout {
		id = a.dups[reqKey{in.Src, binary.BigEndian.Uint32(d[0:])}]
	}
	if id == nil && attr == wire.CMAttrDREQ {
		// A connection this host has no ID for (destroyed:
		// cm_destroy_id erases the local ID at once): ib_cm answers
		// the DREQ all the same (cm_issue_drep), so the peer stops
		// resending it.
		var r wire.CMDREQ
		r.Decode(d)
		a.drep(in.Src, h.TransactionID, r.RemoteCommID, r.LocalCommID)
		return
	}
	if id == nil || !id.receive(attr, h.TransactionID, d) {
		a.Dropped++
	}
}

// receive takes a CM message other than a REQ for the ID: false if the
// ID's state does not expect it (ib_cm drops it then). LAP and APR are
// dropped as ib_cm drops them on a RoCE port (cm_lap_handler,
// cm_apr_handler: "alternate path messages are not supported for RoCE",
// -EINVAL, no APR sent back). An MRA is taken for a REQ only (rdma_cm
// sends one for nothing else: see onREQ). SIDR is receiveSIDR's
// (sidr.go).
func (id *CMID) receive(attr wire.CMAttr, t uint64, d []byte) bool {
	switch attr {
	case wire.CMAttrMRA:
		var m wire.CMMRA
		m.Decode(d)
		return id.onMRA(&m)
	case wire.CMAttrREP:
		var r wire.CMREP
		r.Decode(d)
		return id.onREP(&r)
	case wire.CMAttrRTU:
		return id.answered(stateRepSent, stateEstablished, EventEstablished)
	case wire.CMAttrREJ:
		if id.state != stateReqSent && id.state != stateMRAReqRcvd && id.state != stateRepSent && id.state != stateRepRcvd &&
			id.state != stateReqRcvd {
			return false
		}
		var r wire.CMREJ
		r.Decode(d)
		id.onREJ(&r)
		return true
	case wire.CMAttrDREQ:
		return id.onDREQ(t)
	case wire.CMAttrDREP:
		return id.onDREP()
	}
	return false
}

// answered is the answer to the MAD the ID waits on in state waiting (an
// RTU for the REP, a DREP for the DREQ): the timer stops, the ID moves
// to next and posts ev.
func (id *CMID) answered(waiting, next cmState, ev EventType) bool {
	if id.state != waiting {
		return false
	}
	id.stopTimer()
	id.setState(next)
	id.post(&Event{Event: ev, ID: id})
	return true
}

// onREQ is a REQ arriving: a duplicate whose application has not
// accepted or rejected yet gets an MRA, any other duplicate is ignored
// (cm_dup_req_handler; the model does not answer one in TIMEWAIT); a
// REQ for a port nobody listens on is rejected with reason 8, invalid
// service ID, as real rxe's host did (rxe_cm_rej.pcapng), else a new ID
// and CONNECT_REQUEST on the listener's channel.
func (a *agent) onREQ(src netip.Addr, t uint64, r *wire.CMREQ) {
	key := reqKey{src, r.LocalCommID}
	if id := a.dups[key]; id != nil {
		// cma_req_handler, once the CONNECT_REQUEST is queued for the
		// application (rdma_cm's ID still RDMA_CM_CONNECT), calls
		// ib_send_cm_mra with IB_CM_MRA_FLAG_DELAY: nothing is sent,
		// ib_cm's ID goes to MRA_REQ_SENT, and from then on each
		// duplicate REQ is answered with that MRA until the
		// application accepts or rejects. The model's REQ_RCVD is that
		// state (a user-space listener is never in ib_cm's REQ_RCVD
		// when a duplicate comes).
		if id.state != stateReqRcvd {
			a.Dropped++
			return
		}
		a.sendMRA(id)
		return
	}
	ip := wire.DecodeCMIPHeader(r.PrivateData[:])
	port := uint16(r.ServiceID)
	l, listened := a.listenerFor(PSTCP, port, &ip)
	if !listened || r.ServiceID&^0xFFFF != wire.CMServiceID(0) {
		a.reject(src, t, 0, r.LocalCommID, 0, wire.CMREJInvalidServiceID, nil)
		return
	}
	if l == nil {
		// ib_cm listens on the port (for its rdma_cm listeners), but
		// none of those takes this request (an IPv6 one to 0.0.0.0,
		// say): rdma_cm refuses it, and ib_cm destroys the ID it made
		// for it, which rejects with reason 28 (cm_destroy_id in
		// REQ_RCVD; conformance TestCM6Rxe).
		a.reject(src, t, a.newCommID(), r.LocalCommID, 0, wire.CMREJConsumerReject, nil)
		return
	}
	id := a.newID(l.ch, l.ps)
	id.v6 = ip.IPVersion == 6
	id.setState(stateReqRcvd)
	a.owe(id)
	id.localComm = a.newCommID() // cm_req_handler gives the new ID its own
	a.comm[id.localComm] = id
	id.peer = src
	id.remoteComm = r.LocalCommID
	id.remoteQPN = r.LocalQPN
	id.tid = t
	id.src = netip.AddrPortFrom(id.hostAddr(), port)
	id.dst = netip.AddrPortFrom(ip.Src, ip.SrcPort)
	// The passive side's receive PSN is the one it advertises in its
	// REP; it sends from the REQ's (see wire/testdata/cm/README.md).
	id.sqPSN = uint32(r.StartingPSN)
	id.flowLabel = r.Primary.FlowLabel
	id.mtu = verbs.MTU(r.PathMTU)
	id.peerResp, id.peerInit = r.ResponderResources, r.InitiatorDepth
	id.timeout = repTimeout
	a.dups[key] = id
	priv := append([]byte(nil), r.PrivateData[wire.CMIPHeaderLen:]...)
	l.post(&Event{Event: EventConnectRequest, ID: id, ListenID: l, Param: ConnParam{PrivateData: priv,
		ResponderResources: r.ResponderResources, InitiatorDepth: r.InitiatorDepth, RetryCount: r.RetryCount,
		RNRRetryCount: r.RNRRetryCount, QPNum: r.LocalQPN}})
}

// owe records that id received a REQ, a DREQ, or the REP of a
// connection whose QP its user made, which its user must answer.
func (a *agent) owe(id *CMID) {
	if !id.owes {
		id.owes = true
		a.owing = append(a.owing, id)
	}
}

// unanswered drops from owing the IDs that answered (they left REQ_RCVD,
// DREQ_RCVD or REP_RCVD: accepted, rejected, disconnected, established,
// destroyed, timed out)
// and returns how many are left.
func (a *agent) unanswered() int {
	kept := a.owing[:0]
	for _, id := range a.owing {
		if id.state == stateReqRcvd || id.state == stateDreqRcvd || id.state == stateRepRcvd {
			kept = append(kept, id)
		} else {
			id.owes = false
		}
	}
	clear(a.owing[len(kept):])
	a.owing = kept
	return len(kept)
}

// drep sends dst a DREP: transaction ID t, our communication ID local,
// the peer's remote.
func (a *agent) drep(dst netip.Addr, t uint64, local, remote uint32) {
	a.header(wire.CMAttrDREP, t)
	r := wire.CMDREP{LocalCommID: local, RemoteCommID: remote}
	r.Encode(wire.MAD(a.buf[:]).Data())
	a.send(dst, a.buf[:])
}

// reject sends a REJ answering the message with transaction ID t.
func (a *agent) reject(dst netip.Addr, t uint64, local, remote uint32, msg uint8, reason wire.CMREJReason, priv []byte) {
	a.header(wire.CMAttrREJ, t)
	rej := wire.CMREJ{LocalCommID: local, RemoteCommID: remote, MsgRejected: msg, Reason: reason}
	copy(rej.PrivateData[:], priv)
	rej.Encode(wire.MAD(a.buf[:]).Data())
	a.send(dst, a.buf[:])
}

// sendMRA answers a duplicate REQ for id with the MRA ib_cm keeps for
// it (cm_dup_req_handler → cm_format_mra): message MRAed 0 (REQ), the
// service timeout rdma_cm gave, no private data (cma_req_handler passes
// none), the REQ's transaction ID.
func (a *agent) sendMRA(id *CMID) { a.sendMRAFor(id, msgREQ) }

// sendMRAFor sends the MRA of message msg (msgREQ, msgREP) for id:
// rdma_cm holds a REP the same way for a connection whose QP the user
// made, until rdma_establish (cma_ib_handler's IB_CM_MRA_FLAG_DELAY
// MRA, repeated for each duplicate REP by cm_dup_rep_handler).
func (a *agent) sendMRAFor(id *CMID, msg uint8) {
	a.header(wire.CMAttrMRA, id.tid)
	mra := wire.CMMRA{LocalCommID: id.localComm, RemoteCommID: id.remoteComm, MsgMRAed: msg,
		ServiceTimeout: mraServiceTimeout}
	mra.Encode(wire.MAD(a.buf[:]).Data())
	a.send(id.peer, a.buf[:])
}

func (a *agent) newID(ch *EventChannel, ps PortSpace) *CMID {
	id := &CMID{a: a, ch: ch, ps: ps}
	if n := len(a.freeIDs); n > 0 {
		id.index = a.freeIDs[n-1]
		a.freeIDs = a.freeIDs[:n-1]
		a.ids[id.index] = id
		return id
	}
	id.index = uint64(len(a.ids))
	a.ids = append(a.ids, id)
	return id
}

// forget takes a destroyed ID out of the agent's tables: its slot, its
// communication ID, the request that made it.
func (a *agent) forget(id *CMID) {
	if id.localComm != 0 {
		delete(a.comm, id.localComm)
	}
	if k := (reqKey{id.peer, id.remoteComm}); a.dups[k] == id {
		delete(a.dups, k)
	}
	a.ids[id.index] = nil
	a.freeIDs = append(a.freeIDs, id.index)
	a.unbind(id)
}
