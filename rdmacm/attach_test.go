package rdmacm_test

import (
	"net/netip"
	"strings"
	"testing"

	"github.com/rocesim/rocesim/rdmacm"
	"github.com/rocesim/rocesim/verbs"
)

// TestAttachQP: QPs made by the program before the connection (the
// client's in RESET, the server's moved to INIT with InitQP and a
// receive posted) become the IDs' QPs and carry the connection as
// CreateQP's would.
func TestAttachQP(t *testing.T) {
	p := newPair(t, "")
	cliAttr, srvAttr := p.cli.qpAttr(), p.srv.qpAttr()
	cliAttr.Type, srvAttr.Type = verbs.QPTypeRC, verbs.QPTypeRC
	cliQP, err := p.cli.pd.CreateQP(cliAttr)
	if err != nil {
		t.Fatal(err)
	}
	srvQP, err := p.srv.pd.CreateQP(srvAttr)
	if err != nil {
		t.Fatal(err)
	}
	if err := rdmacm.InitQP(srvQP); err != nil {
		t.Fatal(err)
	}
	if _, err := srvQP.PostRecv([]verbs.RecvWR{{WRID: 7, SGList: []verbs.SGE{p.srv.mr.SGE(0, 64)}}}); err != nil {
		t.Fatal(err)
	}
	id, _ := rdmacm.CreateID(p.cli.ch, nil, rdmacm.PSTCP)
	if err := id.AttachQP(cliQP, p.cli.pd); err == nil || !strings.Contains(err.Error(), "IDLE") {
		t.Errorf("attach before resolve: %v, want EINVAL naming the state", err)
	}
	id.ResolveAddr(netip.Addr{}, netip.AddrPortFrom(netip.MustParseAddr("10.0.0.1"), rpingPort), 2000)
	id.ResolveRoute(2000)
	p.event(t, p.cli.ch, rdmacm.EventAddrResolved)
	p.event(t, p.cli.ch, rdmacm.EventRouteResolved)
	if err := id.AttachQP(cliQP, p.cli.pd); err != nil {
		t.Fatal(err)
	}
	if cliQP.State() != verbs.QPStateInit || id.QP != cliQP {
		t.Fatalf("client QP %v, ID's QP %p: want INIT and the attached QP", cliQP.State(), id.QP)
	}
	if err := id.AttachQP(cliQP, p.cli.pd); err == nil {
		t.Error("a second QP attached")
	}
	if err := id.Connect(rdmacm.ConnParam{ResponderResources: 1, InitiatorDepth: 1}); err != nil {
		t.Fatal(err)
	}
	ev := p.event(t, p.srv.ch, rdmacm.EventConnectRequest)
	if err := ev.ID.AttachQP(srvQP, p.srv.pd); err != nil {
		t.Fatal(err)
	}
	if err := ev.ID.Accept(rdmacm.ConnParam{ResponderResources: 1, InitiatorDepth: 1}); err != nil {
		t.Fatal(err)
	}
	p.event(t, p.cli.ch, rdmacm.EventEstablished)
	p.event(t, p.srv.ch, rdmacm.EventEstablished)
	p.ping(t, id)
	// A QP past INIT cannot be attached: the CM would move it backwards.
	id2, _ := rdmacm.CreateID(p.cli.ch, nil, rdmacm.PSTCP)
	id2.ResolveAddr(netip.Addr{}, netip.AddrPortFrom(netip.MustParseAddr("10.0.0.1"), rpingPort), 2000)
	id2.ResolveRoute(2000)
	if err := id2.AttachQP(cliQP, p.cli.pd); err == nil || !strings.Contains(err.Error(), "want an RC QP in RESET or INIT") {
		t.Errorf("attach of an RTS QP: %v", err)
	}
}
