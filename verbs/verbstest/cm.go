package verbstest

import (
	"net/netip"
	"strings"

	"github.com/rocesim/rocesim/rdmacm"
	"github.com/rocesim/rocesim/verbs"
)

// Connection management for tests, as an rdma_cm program (rping) does it:
//  1. PairCM makes an RC QP and a CQ on each host, in RESET, and an
//     event channel for each side;
//  2. the server's side listens on cmPort; the client resolves the
//     address and the route, gives its QP to its CM ID and connects
//     (the REQ);
//  3. the server takes CONNECT_REQUEST, stops listening (the port is
//     free for the next PairCM), gives its QP to the new ID and accepts
//     (the REP);
//  4. PairCM returns once both sides have ESTABLISHED (the client's
//     RTU has arrived), each event taken recorded in CMEndpoint.Events.
// The world's fault plan sees the CM's MADs like any frame, so
// Options.Faults "drop cm=REQ first=1" makes PairCM wait for the REQ's
// retransmission (6144 ms of virtual time).

// cmPort is the port PairCM's server listens on: rping's default.
const cmPort = 7174

// CMEndpoint is one side of a connection PairCM made through rdma_cm.
type CMEndpoint struct {
	*Endpoint
	// ID is this side's CM ID (on the server, the one CONNECT_REQUEST
	// brought).
	ID *rdmacm.CMID
	// Channel is the event channel of ID.
	Channel *rdmacm.EventChannel
	// Events names the CM events this side took, in order, as
	// rdma_event_str names them (RDMA_CM_EVENT_ESTABLISHED, ...).
	Events []string
	peer   *CMEndpoint
}

// CM returns the world's connection management (package rdmacm), made
// on first use, for tests that drive rdma_cm themselves; PairCM uses
// the same one (a world has one CM: one agent on each host's QP1).
func (w *World) CM() *rdmacm.CM {
	if w.cm == nil {
		w.cm = rdmacm.New(w.vw)
	}
	return w.cm
}

// PairCM connects an RC QP on host client to one on host server through
// rdma_cm, as rping -c and rping -s do, and runs the world until both
// sides are ESTABLISHED. The CM chooses the QPs' attributes (its PSNs,
// path MTU, timeout 19, retry_cnt and rnr_retry 7); of o only Depth,
// MaxInline and RdAtomic (the responder resources and initiator depth
// offered) count. It fails the test if an event other than the next one
// of a successful connect comes, or none within Options.Limit.
func (w *World) PairCM(client, server string, o QPOptions) (cli, srv *CMEndpoint) {
	w.t.Helper()
	o = o.withDefaults(w)
	if o.Type != verbs.QPTypeRC {
		w.fatalf("verbstest: PairCM: QPOptions.Type %v: rdma_cm connects RC QPs (RDMA_PS_TCP)", o.Type)
	}
	hc, hs := w.Host(client), w.Host(server)
	if hc == hs {
		w.fatalf("verbstest: PairCM(%q, %q): a connection needs two hosts", client, server)
	}
	cm := w.CM()
	cli = &CMEndpoint{Endpoint: &Endpoint{Host: hc, CQ: hc.CQ(2 * o.Depth)}, Channel: cm.CreateEventChannel(hc.Host)}
	srv = &CMEndpoint{Endpoint: &Endpoint{Host: hs, CQ: hs.CQ(2 * o.Depth)}, Channel: cm.CreateEventChannel(hs.Host)}
	cli.QP, srv.QP = w.newQP(hc, cli.CQ, o), w.newQP(hs, srv.CQ, o)
	cli.Peer, srv.Peer = srv.Endpoint, cli.Endpoint
	cli.peer, srv.peer = srv, cli

	l, err := rdmacm.CreateID(srv.Channel, nil, rdmacm.PSTCP)
	w.cmCheck("rdma_create_id", err)
	w.cmCheck("rdma_bind_addr", l.BindAddr(netip.AddrPortFrom(netip.IPv4Unspecified(), cmPort)))
	w.cmCheck("rdma_listen", l.Listen(1))

	cli.ID, err = rdmacm.CreateID(cli.Channel, nil, rdmacm.PSTCP)
	w.cmCheck("rdma_create_id", err)
	w.cmCheck("rdma_resolve_addr", cli.ID.ResolveAddr(netip.Addr{}, netip.AddrPortFrom(hs.IPv4(), cmPort), 2000))
	w.AwaitCM(cli, rdmacm.EventAddrResolved)
	w.cmCheck("rdma_resolve_route", cli.ID.ResolveRoute(2000))
	w.AwaitCM(cli, rdmacm.EventRouteResolved)
	w.cmCheck("rdma_create_qp", cli.ID.AttachQP(cli.QP, hc.PD))
	param := rdmacm.ConnParam{ResponderResources: o.RdAtomic, InitiatorDepth: o.RdAtomic}
	w.cmCheck("rdma_connect", cli.ID.Connect(param))

	req := w.AwaitCM(srv, rdmacm.EventConnectRequest)
	srv.ID = req.ID
	w.cmCheck("rdma_destroy_id (the listener)", l.Destroy())
	w.cmCheck("rdma_create_qp", srv.ID.AttachQP(srv.QP, hs.PD))
	w.cmCheck("rdma_accept", srv.ID.Accept(param))
	w.AwaitCM(cli, rdmacm.EventEstablished)
	w.AwaitCM(srv, rdmacm.EventEstablished)
	return cli, srv
}

// AwaitCM runs the world until an event waits on e's channel, takes it
// and records it in e.Events; it fails the test if the event is not
// want (saying which came, with its status) or none comes within
// Options.Limit.
func (w *World) AwaitCM(e *CMEndpoint, want rdmacm.EventType) *rdmacm.Event {
	w.t.Helper()
	w.RunUntil("the CM event "+want.String()+" on "+e.Host.Name(), func() bool { return e.Channel.Pending() > 0 })
	ev, _ := e.Channel.GetEvent()
	ev.Ack()
	e.Events = append(e.Events, ev.Event.String())
	if ev.Event != want {
		w.fatalf("verbstest: %s took %v (status %d), want %v; its CM events: %s", e.Host.Name(), ev.Event, ev.Status, want,
			strings.Join(e.Events, " "))
	}
	return ev
}

// DisconnectCM ends e's connection as rping does: e disconnects
// (rdma_disconnect: its QP to ERR, the DREQ), the peer disconnects when
// DISCONNECTED reaches it (the DREP), and e gets DISCONNECTED. Both QPs
// are in ERR when it returns, their outstanding work requests flushed.
func (w *World) DisconnectCM(e *CMEndpoint) {
	w.t.Helper()
	w.cmCheck("rdma_disconnect", e.ID.Disconnect())
	w.AwaitCM(e.peer, rdmacm.EventDisconnected)
	w.cmCheck("rdma_disconnect", e.peer.ID.Disconnect())
	w.AwaitCM(e, rdmacm.EventDisconnected)
}

func (w *World) cmCheck(verb string, err error) {
	w.t.Helper()
	if err != nil {
		w.fatalf("verbstest: %s: %v", verb, err)
	}
}
