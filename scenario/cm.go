package scenario

import (
	"fmt"
	"net/netip"
	"strconv"
	"strings"
	"syscall"

	"github.com/rocesim/rocesim/internal/lineformat"
	"github.com/rocesim/rocesim/nic"
	"github.com/rocesim/rocesim/rdmacm"
	"github.com/rocesim/rocesim/sim"
)

// Connection management in a scenario, as an rdma_cm program does it:
//  1. a qp line with cm= says the pair is connected through CM, and which
//     side does what: cm=connect is the active side (rping -c), cm=accept
//     or cm=reject the passive side, which listens from the start and
//     accepts or rejects the connect request, cm=closed a passive side
//     that does not listen (its host's CM answers REJ reason 8);
//  2. at setup both QPs are created and moved to INIT as rdma_create_qp
//     does (rdmacm.InitQP), so receives can be posted before the
//     connection exists; an event channel is opened on each node with
//     a cm= QP, and each listening QP's node listens on its port;
//  3. a connect step resolves the address and route and sends the REQ
//     (rdma_resolve_addr, rdma_resolve_route, rdma_connect); a
//     disconnect step sends the DREQ (rdma_disconnect: the QP to ERR
//     first, so its outstanding work requests are flushed);
//  4. after every instant of the run the event channels are drained in
//     node order and each event is recorded (Result.CM, a "cm-event" in
//     the trace) and answered as rping answers it: CONNECT_REQUEST with
//     rdma_accept (or rdma_reject), DISCONNECTED of the peer's DREQ with
//     rdma_disconnect (the DREP);
//  5. expect cm claims the events one QP's CM ID saw, in order.

// cmRole is what a cm= QP does in the connection.
type cmRole uint8

const (
	cmNone    cmRole = iota
	cmConnect        // the active side: a connect step sends the REQ
	cmAccept         // listens, accepts the connect request
	cmReject         // listens, rejects the connect request (reason 28, consumer reject)
	cmClosed         // does not listen: the REQ meets REJ reason 8 (invalid service ID)
)

var cmRoleNames = [...]string{"", "connect", "accept", "reject", "closed"}

// cmBasePort is the port the first listening QP of a node listens on
// (rping's default); a node's later ones take the ports after it.
const cmBasePort = 7174

// cmEventPrefix is the prefix rdma_event_str puts before every name; an
// expect cm line may leave it out.
const cmEventPrefix = "RDMA_CM_EVENT_"

// CMEvent is one rdma_cm event a scenario's program took from an event
// channel.
type CMEvent struct {
	Time   sim.Time `json:"time_ns"`
	Node   string   `json:"node"`
	QP     string   `json:"qp"`     // the QP of the event's CM ID, as the scenario names it ("a.q")
	Event  string   `json:"event"`  // as rdma_event_str names it: RDMA_CM_EVENT_ESTABLISHED, ...
	Status int      `json:"status"` // the REJ's reason for REJECTED, -110 for UNREACHABLE, else 0
}

// String returns the event as expect cm writes it: ESTABLISHED, or
// REJECTED:28 when the status is not 0.
func (e CMEvent) String() string {
	s := strings.TrimPrefix(e.Event, cmEventPrefix)
	if e.Status != 0 {
		s += ":" + strconv.Itoa(e.Status)
	}
	return s
}

// cmOption is the qp line's cm= handler.
func (p *parser) cmOption(q *qpDecl) func(string, int) error {
	return func(v string, c int) error {
		for r := cmConnect; int(r) < len(cmRoleNames); r++ {
			if cmRoleNames[r] == v {
				q.cm, q.cmCol = r, c
				return nil
			}
		}
		return p.errorf(c, "bad cm %q: want connect (the active side), accept, reject or closed (the passive side)", v)
	}
}

// checkCMQP checks a cm= QP's line once its options are read: the CM
// chooses the connection's attributes, so the qp line may set only the
// resources it offers.
func (p *parser) checkCMQP(q *qpDecl, mask nic.QPAttrMask) error {
	if q.cm == cmNone {
		return nil
	}
	if q.typ != nic.QPTypeRC {
		return p.errorf(q.cmCol, "cm= connects RC QPs (RDMA_PS_TCP); %s is %v", q, q.typ)
	}
	if mask&^(nic.QPAttrMaxQPRdAtomic|nic.QPAttrMaxDestRdAtomic) != 0 {
		return p.errorf(q.cmCol, "a cm= QP takes its attributes from the CM exchange as rdma_cm chooses them: "+
			"leave out state=, psn=, mtu=, timeout=, retry_cnt=, rnr_retry=, min_rnr_timer= and access= "+
			"(max_rd_atomic= and max_dest_rd_atomic= are the initiator depth and responder resources it offers)")
	}
	q.state = nic.QPStateInit
	return nil
}

// resolveCM checks the cm= QPs once every peer is known and gives each
// passive one its port.
func (p *parser) resolveCM() error {
	ports := map[*nodeDecl]uint16{}
	for _, q := range p.s.qps {
		if q.cm == cmNone {
			continue
		}
		p.s.hasCM = true
		p.line = q.line
		switch {
		case q.peer == nil:
			return p.errorf(q.cmCol, "cm= QP %s needs a peer (peer=node.qp) to connect to", q)
		case q.peer.cm == cmNone:
			return p.errorf(q.cmCol, "QP %s is cm=%s but its peer %s has no cm=", q, cmRoleNames[q.cm], q.peer)
		case (q.cm == cmConnect) == (q.peer.cm == cmConnect):
			return p.errorf(q.cmCol, "QP %s and its peer %s: exactly one of them is cm=connect", q, q.peer)
		}
		if q.cm != cmConnect {
			q.cmPort = cmBasePort + ports[q.node]
			ports[q.node]++
		}
	}
	return nil
}

// cmStep reads a connect or disconnect step, which takes no options.
func (p *parser) cmStep(st *step, verb lineformat.Token, rest []lineformat.Token) error {
	st.kind = stepConnect
	if verb.Text == "disconnect" {
		st.kind = stepDisconnect
	}
	if len(rest) > 0 {
		return p.errorf(rest[0].Col, "unexpected %q: %s takes no options", rest[0].Text, verb.Text)
	}
	return nil
}

// resolveCMStep checks that a connect step's QP is cm=connect and a
// disconnect step's has cm=.
func (p *parser) resolveCMStep(st *step, q *qpDecl, col int) error {
	switch {
	case st.kind == stepConnect && q.cm != cmConnect:
		return p.errorf(col, "connect needs a cm=connect QP; %s is not one", q)
	case st.kind == stepDisconnect && q.cm == cmNone:
		return p.errorf(col, "disconnect needs a QP connected through CM (cm= on its qp line); %s has none", q)
	}
	return nil
}

// expectCM reads "cm node.qp EVENT[:STATUS] ..." or "cm node.qp none".
func (p *parser) expectCM(e *expectation) error {
	e.kind = expectCMEvents
	toks := p.toks[2:]
	if len(toks) < 2 {
		return p.errorf(p.toks[1].Col, "cm needs a QP and its CM events in order, or none, e.g. expect cm a.q ESTABLISHED DISCONNECTED")
	}
	var err error
	if e.qpRef, err = p.ref(toks[0].Text, toks[0].Col, "a QP"); err != nil {
		return err
	}
	e.cmEvents = []string{}
	if none, err := p.noneList(toks[1:]); none || err != nil {
		return err
	}
	for _, t := range toks[1:] {
		name, status, hasStatus := strings.Cut(strings.TrimPrefix(t.Text, cmEventPrefix), ":")
		known := false
		for ev := rdmacm.EventType(0); ev <= rdmacm.EventTimewaitExit; ev++ {
			known = known || ev.String() == cmEventPrefix+name
		}
		if !known {
			return p.errorf(t.Col, "unknown CM event %q: want an rdma_cm event such as ESTABLISHED, REJECTED:28 or UNREACHABLE (the RDMA_CM_EVENT_ prefix may be left out)", t.Text)
		}
		if hasStatus {
			if _, err := strconv.Atoi(status); err != nil {
				return p.errorf(t.Col+len(t.Text)-len(status), "bad status %q: want a whole number (REJECTED:28, UNREACHABLE:-110)", status)
			}
		}
		e.cmEvents = append(e.cmEvents, t.Text)
	}
	return nil
}

// checkCM compares one QP's CM events with an expect cm line: a claimed
// event without :STATUS matches any status.
func (e *expectation) checkCM(res *Result) string {
	var got []string
	ok := true
	for _, ev := range res.CM {
		if ev.QP != e.qp.String() {
			continue
		}
		if i := len(got); i < len(e.cmEvents) {
			name, status, hasStatus := strings.Cut(strings.TrimPrefix(e.cmEvents[i], cmEventPrefix), ":")
			n, _ := strconv.Atoi(status) // checked when parsed
			ok = ok && cmEventPrefix+name == ev.Event && (!hasStatus || n == ev.Status)
		}
		got = append(got, ev.String())
	}
	if ok && len(got) == len(e.cmEvents) {
		return ""
	}
	return "got " + orNone(got)
}

// setupCM opens an event channel on every node with a cm= QP, moves
// the cm= QPs to INIT as rdma_create_qp does, and makes the listeners.
func (r *runState) setupCM() error {
	if !r.s.hasCM {
		return nil
	}
	r.cm = rdmacm.New(r.w)
	r.cmChans = make([]*rdmacm.EventChannel, len(r.s.nodes))
	r.cmIDs = make([]*rdmacm.CMID, len(r.s.qps))
	for _, q := range r.s.qps {
		if q.cm == cmNone {
			continue
		}
		for _, n := range []*nodeDecl{q.node, q.peer.node} {
			if r.cmChans[n.idx] == nil {
				r.cmChans[n.idx] = r.cm.CreateEventChannel(r.hosts[n.idx])
			}
		}
		if err := rdmacm.InitQP(r.qps[q.idx]); err != nil {
			return fmt.Errorf("line %d: rdma_create_qp %s: %w", q.line, q, err)
		}
		if q.cm != cmAccept && q.cm != cmReject {
			continue
		}
		l, err := rdmacm.CreateID(r.cmChans[q.node.idx], q, rdmacm.PSTCP)
		if err == nil {
			err = l.BindAddr(netip.AddrPortFrom(netip.IPv4Unspecified(), q.cmPort))
		}
		if err == nil {
			err = l.Listen(1)
		}
		if err != nil {
			return fmt.Errorf("line %d: rdma_listen for %s on port %d: %w", q.line, q, q.cmPort, err)
		}
	}
	return nil
}

// cmDo does a connect or disconnect step.
func (r *runState) cmDo(st *step) error {
	q := st.qp
	if st.kind == stepDisconnect {
		id := r.cmIDs[q.idx]
		if id == nil {
			return fmt.Errorf("rdma_disconnect %s: no connection yet (no connect step or connect request): %w", q, syscall.EINVAL)
		}
		return id.Disconnect()
	}
	if r.cmIDs[q.idx] != nil {
		return fmt.Errorf("rdma_connect %s: connected once already (one connect step per QP)", q)
	}
	id, err := rdmacm.CreateID(r.cmChans[q.node.idx], q, rdmacm.PSTCP)
	if err != nil {
		return err
	}
	r.cmIDs[q.idx] = id
	dst := netip.AddrPortFrom(r.hosts[q.peer.node.idx].IPv4(), q.peer.cmPort)
	if err := id.ResolveAddr(netip.Addr{}, dst, 2000); err != nil {
		return err
	}
	if err := id.ResolveRoute(2000); err != nil {
		return err
	}
	if err := id.AttachQP(r.qps[q.idx], r.pds[q.node.idx]); err != nil {
		return err
	}
	return id.Connect(rdmacm.ConnParam{ResponderResources: q.maxDestRdAt, InitiatorDepth: q.maxRdAtomic})
}

// cmReact takes every waiting CM event, node by node, records it and
// answers it as rping does.
func (r *runState) cmReact() error {
	for i, ch := range r.cmChans {
		if ch == nil {
			continue
		}
		for {
			ev, err := ch.GetEvent()
			if err != nil {
				break
			}
			if err := r.cmEvent(r.s.nodes[i], ev); err != nil {
				return err
			}
			ev.Ack()
		}
	}
	return nil
}

func (r *runState) cmEvent(n *nodeDecl, ev *rdmacm.Event) error {
	id := ev.ID
	if ev.Event == rdmacm.EventConnectRequest {
		id.Context = ev.ListenID.Context
	}
	q := id.Context.(*qpDecl)
	rec := CMEvent{Time: r.w.Now(), Node: n.name, QP: q.String(), Event: ev.Event.String(), Status: ev.Status}
	r.res.CM = append(r.res.CM, rec)
	if tr := r.res.Trace; tr.Enabled() {
		tr.Add(sim.Event{Time: rec.Time, Kind: "cm-event", Node: n.name, QPN: r.qps[q.idx].QPNum, HasQPN: true,
			Fields: []sim.Field{{Key: "event", Value: rec.Event}, {Key: "status", Value: strconv.Itoa(rec.Status)}}})
	}
	switch ev.Event {
	case rdmacm.EventConnectRequest:
		if r.cmIDs[q.idx] != nil {
			// One connection per QP: a second request (a new REQ after
			// the first connection ended) is refused.
			return id.Reject(nil)
		}
		r.cmIDs[q.idx] = id
		if q.cm == cmReject {
			return id.Reject(nil)
		}
		if err := id.AttachQP(r.qps[q.idx], r.pds[n.idx]); err != nil {
			return fmt.Errorf("rdma_accept %s: %w", q, err)
		}
		return id.Accept(rdmacm.ConnParam{ResponderResources: q.maxDestRdAt, InitiatorDepth: q.maxRdAtomic})
	case rdmacm.EventDisconnected:
		if id.State() == "DREQ_RCVD" {
			// The peer's DREQ: rping answers DISCONNECTED with
			// rdma_disconnect, which sends the DREP.
			return id.Disconnect()
		}
	}
	return nil
}
