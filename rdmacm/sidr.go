package rdmacm

import (
	"net/netip"
	"slices"

	"github.com/rocesim/rocesim/sim"
	"github.com/rocesim/rocesim/verbs"
	"github.com/rocesim/rocesim/wire"
)

// UD "connections" of RDMA_PS_UDP (udaddy's): Service ID Resolution
// (IBTA vol. 1 §12.11, wire/sidr.go) instead of REQ/REP/RTU.
//  1. Connect sends a SIDR_REQ with rdma_cm's IP CM header in its private
//     data (cma_resolve_ib_udp), retransmitted every 4096 ms
//     (timeout_ms = 1 << (CMA_CM_RESPONSE_TIMEOUT - 8)) at most 15 times
//     by the MAD layer, then UNREACHABLE -ETIMEDOUT (IB_CM_SIDR_REQ_ERROR
//     in cma_sidr_rep_handler);
//  2. the listener of the UDP service ID gets CONNECT_REQUEST (a SIDR_REQ
//     for a port nobody listens on is answered with status 1,
//     IB_SIDR_UNSUPPORTED, by cm_sidr_req_handler);
//  3. Accept answers with a SIDR_REP of status 0, the ID's QPN and the
//     Q_Key RDMA_UDP_QKEY (cma_send_sidr_rep); Reject with status 2,
//     IB_SIDR_REJECT;
//  4. the active side gets ESTABLISHED with the peer's QPN, Q_Key and an
//     address handle's attributes (Event.UD), or UNREACHABLE with the
//     SIDR_REP's status as the event status (cma_sidr_rep_handler).
// Nothing follows: no RTU, no DREQ; Disconnect only moves the QP to ERR.

// PSUDP is RDMA_PS_UDP, the port space of UD QPs connected through
// SIDR (udaddy's).
const PSUDP PortSpace = 0x0111

// sidrTimeout is the SIDR_REQ's MAD timeout (cma_resolve_ib_udp).
var sidrTimeout = cmConvertToMs(cmResponseTimeout)

// UDParam is what a UD ID's ESTABLISHED carries (struct rdma_ud_param):
// the peer's QPN and Q_Key and the address handle attributes to reach it.
type UDParam struct {
	QPNum  uint32
	QKey   uint32
	AHAttr verbs.AHAttr
}

// listeners returns the listeners of a port space by port: a port is
// bound per port space, as the kernel keeps one bind list for each
// (cma_ps_find). A port has more than one listener when they take
// different requests (the host's IPv4 and IPv6 addresses, or IPv4-only
// and IPv6-only IDs): listenerFor chooses.
func (a *agent) listeners(ps PortSpace) map[uint16][]*CMID {
	if ps != PSUDP {
		return a.lst
	}
	if a.udpLst == nil {
		a.udpLst = map[uint16][]*CMID{}
	}
	return a.udpLst
}

// addListener files the listener id under its port.
func (a *agent) addListener(id *CMID) {
	m := a.listeners(id.ps)
	m[id.src.Port()] = append(m[id.src.Port()], id)
}

// removeListener takes the listener id out.
func (a *agent) removeListener(id *CMID) {
	m := a.listeners(id.ps)
	port := id.src.Port()
	if l := slices.DeleteFunc(m[port], func(o *CMID) bool { return o == id }); len(l) > 0 {
		m[port] = l
	} else {
		delete(m, port)
	}
}

// listenerFor returns the listener of port space ps that takes a request
// for port with IP CM header ip, the first to listen of those that would
// (CMID.accepts), or nil; listened says whether anyone listens on the
// port. A header of another CM version or IP version matches no
// listener (cma_save_ip_info fails).
func (a *agent) listenerFor(ps PortSpace, port uint16, ip *wire.CMIPHeader) (l *CMID, listened bool) {
	ls := a.listeners(ps)[port]
	if ip.Version != 0 || (ip.IPVersion != 4 && ip.IPVersion != 6) {
		return nil, len(ls) > 0
	}
	for _, l := range ls {
		if l.accepts(ip.IPVersion == 6, ip.Dst) {
			return l, true
		}
	}
	return nil, len(ls) > 0
}

// initUDQP moves a new UD QP of the ID to RTS as librdmacm's
// ucma_init_ud_qp does: INIT with the port space's Q_Key
// (rdma_init_qp_attr → cma_ib_init_qp_attr), RTR, RTS with SQ PSN 0.
func initUDQP(qp *verbs.QP) error {
	if err := qp.Modify(&verbs.QPAttr{QPState: verbs.QPStateInit, PortNum: 1, QKey: wire.UDPQKey},
		verbs.QPAttrState|verbs.QPAttrPKeyIndex|verbs.QPAttrPort|verbs.QPAttrQKey); err != nil {
		return err
	}
	if err := qp.Modify(&verbs.QPAttr{QPState: verbs.QPStateRTR}, verbs.QPAttrState); err != nil {
		return err
	}
	return qp.Modify(&verbs.QPAttr{QPState: verbs.QPStateRTS}, verbs.QPAttrState|verbs.QPAttrSQPSN)
}

// qpType is the QP type of the ID's port space.
func (id *CMID) qpType() verbs.QPType {
	if id.ps == PSUDP {
		return verbs.QPTypeUD
	}
	return verbs.QPTypeRC
}

// initQP moves the ID's new QP to the state rdma_create_qp leaves it in.
func (id *CMID) initQP(qp *verbs.QP) error {
	if _, ia := qp.Query(); ia.Type != id.qpType() {
		return misuse("create_qp", "qp_type %v does not fit the port space %#x", ia.Type, uint16(id.ps))
	}
	if id.ps == PSUDP {
		return initUDQP(qp)
	}
	return InitQP(qp)
}

// connectUD sends the SIDR_REQ (rdma_connect on a UD ID).
func (id *CMID) connectUD(p ConnParam) error {
	if len(p.PrivateData) > wire.SIDRREQPrivateLen-wire.CMIPHeaderLen {
		return misuse("connect", "private_data_len %d > %d", len(p.PrivateData), wire.SIDRREQPrivateLen-wire.CMIPHeaderLen)
	}
	id.startExchange()
	req := wire.SIDRREQ{RequestID: id.localComm, PKey: 0xFFFF,
		ServiceID: wire.CMServiceIDPS(wire.CMPortSpaceUDP, id.dst.Port())}
	id.putIPHeader(req.PrivateData[:], p.PrivateData)
	id.sendRequest(wire.CMAttrSIDRREQ, &req, sidrTimeout)
	return nil
}

// startExchange gives an active ID its local communication ID (a REQ's
// or a SIDR_REQ's request ID: ib_cm draws both from one space) and the
// transaction ID of the exchange.
func (id *CMID) startExchange() {
	id.localComm = id.a.newCommID()
	id.a.comm[id.localComm] = id
	id.tid = tid(id.localComm)
}

// putIPHeader writes rdma_cm's IP CM header (cma_format_hdr), then the
// user's private data, into a REQ's or SIDR_REQ's private data.
func (id *CMID) putIPHeader(priv, user []byte) {
	ip := wire.CMIPHeader{IPVersion: 4, SrcPort: id.src.Port(), Src: id.src.Addr(), Dst: id.dst.Addr()}
	if id.v6 {
		ip.IPVersion = 6
	}
	ip.Encode(priv)
	copy(priv[wire.CMIPHeaderLen:], user)
}

// sendRequest sends the REQ or SIDR_REQ m of attribute attr, to be sent
// again after timeout until answered: the ID is REQ_SENT.
func (id *CMID) sendRequest(attr wire.CMAttr, m interface{ Encode([]byte) }, timeout sim.Duration) {
	id.a.header(attr, id.tid)
	m.Encode(wire.MAD(id.a.buf[:]).Data())
	id.setState(stateReqSent)
	id.sendWaiting(timeout)
}

// receiveSIDR takes a SIDR MAD: false if nothing expected it.
func (a *agent) receiveSIDR(src netip.Addr, attr wire.CMAttr, t uint64, d []byte) bool {
	if attr == wire.CMAttrSIDRREQ {
		var r wire.SIDRREQ
		r.Decode(d)
		return a.onSIDRREQ(src, t, &r)
	}
	var r wire.SIDRREP
	r.Decode(d)
	// A SIDR_REP names the request by the requester's own ID, its first
	// word (IBTA §12.11.2).
	id := a.comm[r.RequestID]
	if id == nil || id.ps != PSUDP || id.state != stateReqSent {
		return false
	}
	id.onSIDRREP(&r)
	return true
}

// onSIDRREQ is a SIDR_REQ arriving (cm_sidr_req_handler): a duplicate
// of one not yet answered is dropped; one for a port with no UDP
// listener is answered with IB_SIDR_UNSUPPORTED, one no listener of its
// port takes with IB_SIDR_REJECT; else a new ID and
// CONNECT_REQUEST on the listener's channel, with the private data after
// the IP CM header (cma_ib_req_handler).
func (a *agent) onSIDRREQ(src netip.Addr, t uint64, r *wire.SIDRREQ) bool {
	key := reqKey{src, r.RequestID}
	if a.dups[key] != nil {
		return false
	}
	ip := wire.DecodeCMIPHeader(r.PrivateData[:])
	port := uint16(r.ServiceID)
	l, listened := a.listenerFor(PSUDP, port, &ip)
	if !listened || r.ServiceID&^0xFFFF != wire.CMServiceIDPS(wire.CMPortSpaceUDP, 0) {
		a.sidrRep(src, t, &wire.SIDRREP{RequestID: r.RequestID, Status: wire.SIDRUnsupported, ServiceID: r.ServiceID})
		return true
	}
	if l == nil {
		// Listeners on the port, none of which takes the request
		// (an IPv6 one to 0.0.0.0): rdma_cm refuses it and ib_cm
		// destroys the ID it made, which rejects the request
		// (cm_destroy_id in SIDR_REQ_RCVD: cm_reject_sidr_req with
		// IB_SIDR_REJECT), as a REQ gets reason 28 (onREQ); the
		// client's UNREACHABLE has status 2 on real rxe too
		// (conformance TestCM6Rxe).
		a.sidrRep(src, t, &wire.SIDRREP{RequestID: r.RequestID, Status: wire.SIDRReject, ServiceID: r.ServiceID})
		return true
	}
	id := a.newID(l.ch, PSUDP)
	id.setState(stateReqRcvd)
	a.owe(id)
	id.peer = src
	id.remoteComm = r.RequestID
	id.tid = t
	id.v6 = ip.IPVersion == 6
	id.src = netip.AddrPortFrom(id.hostAddr(), port)
	id.dst = netip.AddrPortFrom(ip.Src, ip.SrcPort)
	a.dups[key] = id
	priv := append([]byte(nil), r.PrivateData[wire.CMIPHeaderLen:]...)
	l.post(&Event{Event: EventConnectRequest, ID: id, ListenID: l, Param: ConnParam{PrivateData: priv}})
	return true
}

// sidrRep sends a SIDR_REP answering transaction t.
func (a *agent) sidrRep(dst netip.Addr, t uint64, rep *wire.SIDRREP) {
	a.header(wire.CMAttrSIDRREP, t)
	rep.Encode(wire.MAD(a.buf[:]).Data())
	a.send(dst, a.buf[:])
}

// answerSIDR sends the ID's SIDR_REP with status st (cma_send_sidr_rep):
// the request is answered, so a retransmitted SIDR_REQ is a new one, as
// ib_cm forgets the remote ID once it replied (cm_send_sidr_rep_locked).
func (id *CMID) answerSIDR(st wire.SIDRStatus, priv []byte) {
	rep := wire.SIDRREP{RequestID: id.remoteComm, Status: st,
		ServiceID: wire.CMServiceIDPS(wire.CMPortSpaceUDP, id.src.Port())}
	if st == wire.SIDRSuccess {
		rep.QPN, rep.QKey = id.QP.QPNum, wire.UDPQKey
	}
	copy(rep.PrivateData[:], priv)
	id.a.sidrRep(id.peer, id.tid, &rep)
	if id.a.will == nil { // FarewellChanges asks what would be sent: nothing changes
		delete(id.a.dups, reqKey{id.peer, id.remoteComm})
	}
}

// acceptUD answers a UD CONNECT_REQUEST (rdma_accept on a UD ID): no
// event follows on this side.
func (id *CMID) acceptUD(p ConnParam) error {
	if id.QP == nil {
		return misuse("accept", "the ID has no QP (CreateQP)")
	}
	if len(p.PrivateData) > wire.SIDRREPPrivateLen {
		return misuse("accept", "private_data_len %d > %d", len(p.PrivateData), wire.SIDRREPPrivateLen)
	}
	id.answerSIDR(wire.SIDRSuccess, p.PrivateData)
	id.setState(stateEstablished)
	return nil
}

// rejectUD refuses a UD CONNECT_REQUEST: SIDR_REP status 2.
func (id *CMID) rejectUD(private []byte) error {
	if len(private) > wire.SIDRREPPrivateLen {
		return misuse("reject", "private_data_len %d > %d", len(private), wire.SIDRREPPrivateLen)
	}
	id.answerSIDR(wire.SIDRReject, private)
	id.setState(stateIdle)
	return nil
}

// onSIDRREP is the answer to our SIDR_REQ (cma_sidr_rep_handler).
func (id *CMID) onSIDRREP(r *wire.SIDRREP) {
	id.stopTimer()
	priv := append([]byte(nil), r.PrivateData[:]...)
	if r.Status != wire.SIDRSuccess {
		id.setState(stateIdle)
		id.post(&Event{Event: EventUnreachable, ID: id, Status: int(r.Status), Param: ConnParam{PrivateData: priv}})
		return
	}
	id.remoteQPN = r.QPN
	id.setState(stateEstablished)
	// ib_init_ah_attr_from_path on the route cma_resolve_iboe_route
	// built: the peer's GID, the flow label hashed from the ports, hop
	// limit 64, the GID of the ID's address (sgidIndex).
	ah := verbs.AHAttr{IsGlobal: true, PortNum: 1, GRH: verbs.GRH{DGID: netip.AddrFrom16(id.peer.As16()),
		FlowLabel: id.flowLabel, HopLimit: 64, SGIDIndex: id.sgidIndex()}}
	id.post(&Event{Event: EventEstablished, ID: id, Param: ConnParam{PrivateData: priv, QPNum: r.QPN},
		UD: UDParam{QPNum: r.QPN, QKey: r.QKey, AHAttr: ah}})
}

// disconnectUD is rdma_disconnect on a UD ID: the QP to ERR
// (cma_modify_qp_err); ib_cm has no connection to end, so no MAD.
func (id *CMID) disconnectUD() error {
	if id.state != stateEstablished {
		return misuse("disconnect", "the ID is %v, not connected", id.state)
	}
	if id.QP != nil {
		if err := id.QP.Modify(&verbs.QPAttr{QPState: verbs.QPStateErr}, verbs.QPAttrState); err != nil {
			return err
		}
	}
	id.setState(stateTimewait)
	return nil
}
