package rdmacm_test

import (
	"fmt"
	"net/netip"

	"github.com/rocesim/rocesim/rdmacm"
	"github.com/rocesim/rocesim/verbs"
)

// Example connects a client on host b to a server on host a through the
// CM, as rping does, and disconnects; it prints each side's events.
func Example() {
	w := verbs.NewWorld(verbs.WorldConfig{Seed: 1})
	ha, hb := w.AddHost("a"), w.AddHost("b")
	if err := w.Connect(ha, hb); err != nil {
		panic(err)
	}
	cm := rdmacm.New(w)
	sch, cch := cm.CreateEventChannel(ha), cm.CreateEventChannel(hb)
	qpAttr := func(h *verbs.Host) (*verbs.PD, verbs.QPInitAttr) {
		ctx, _ := h.GetDeviceList()[0].Open()
		pd, _ := ctx.AllocPD()
		cq, _ := ctx.CreateCQ(16, nil, 0)
		return pd, verbs.QPInitAttr{SendCQ: cq, RecvCQ: cq, Cap: verbs.QPCap{MaxSendWR: 4, MaxRecvWR: 4, MaxSendSGE: 1, MaxRecvSGE: 1}}
	}
	// next runs the world until the channel has an event, prints it and
	// returns it.
	next := func(who string, ch *rdmacm.EventChannel) *rdmacm.Event {
		w.RunUntil(func() bool { return ch.Pending() > 0 })
		ev, _ := ch.GetEvent()
		fmt.Println(who, ev.Event, ev.Status)
		return ev
	}

	listener, _ := rdmacm.CreateID(sch, nil, rdmacm.PSTCP)
	listener.BindAddr(netip.MustParseAddrPort("0.0.0.0:7174"))
	listener.Listen(1)

	client, _ := rdmacm.CreateID(cch, nil, rdmacm.PSTCP)
	client.ResolveAddr(netip.Addr{}, netip.MustParseAddrPort("10.0.0.1:7174"), 2000)
	next("client", cch)
	client.ResolveRoute(2000)
	next("client", cch)
	client.CreateQP(qpAttr(hb))
	client.Connect(rdmacm.ConnParam{ResponderResources: 1, InitiatorDepth: 1})

	req := next("server", sch)
	server := req.ID
	server.CreateQP(qpAttr(ha))
	server.Accept(rdmacm.ConnParam{ResponderResources: 1, InitiatorDepth: 1})
	next("client", cch)
	next("server", sch)

	client.Disconnect()
	next("server", sch)
	server.Disconnect()
	next("client", cch)
	fmt.Println(client.QP.State(), server.QP.State())
	// Output:
	// client RDMA_CM_EVENT_ADDR_RESOLVED 0
	// client RDMA_CM_EVENT_ROUTE_RESOLVED 0
	// server RDMA_CM_EVENT_CONNECT_REQUEST 0
	// client RDMA_CM_EVENT_ESTABLISHED 0
	// server RDMA_CM_EVENT_ESTABLISHED 0
	// server RDMA_CM_EVENT_DISCONNECTED 0
	// client RDMA_CM_EVENT_DISCONNECTED 0
	// ERR ERR
}
