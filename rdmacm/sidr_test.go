package rdmacm_test

import (
	"fmt"
	"net/netip"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/rocesim/rocesim/internal/tsharktest"
	"github.com/rocesim/rocesim/rdmacm"
	"github.com/rocesim/rocesim/sim"
	"github.com/rocesim/rocesim/verbs"
	"github.com/rocesim/rocesim/wire"
)

// udpPair is a pair (server a, client b) with an RDMA_PS_UDP listener on
// rpingPort beside the TCP one: ports are per port space.
func udpPair(t *testing.T, plan string) (*pair, *rdmacm.CMID) {
	t.Helper()
	p := newPair(t, plan)
	return p, p.listenOn(t, rdmacm.PSUDP, rpingPort)
}

// listenOn makes a listener of port space ps on the server's port.
func (p *pair) listenOn(t *testing.T, ps rdmacm.PortSpace, port uint16) *rdmacm.CMID {
	t.Helper()
	l, err := rdmacm.CreateID(p.srv.ch, nil, ps)
	if err != nil {
		t.Fatal(err)
	}
	if err := l.BindAddr(netip.AddrPortFrom(netip.IPv4Unspecified(), port)); err != nil {
		t.Fatal(err)
	}
	if err := l.Listen(1); err != nil {
		t.Fatal(err)
	}
	return l
}

// dialUD runs udaddy's client side up to rdma_connect, to port.
func (p *pair) dialUD(t *testing.T, port uint16, priv string) *rdmacm.CMID {
	t.Helper()
	id := p.route(t, rdmacm.PSUDP, port)
	if id.QP.State() != verbs.QPStateRTS {
		t.Fatalf("UD QP %v after create_qp, want RTS (ucma_init_ud_qp)", id.QP.State())
	}
	if err := id.Connect(rdmacm.ConnParam{PrivateData: []byte(priv)}); err != nil {
		t.Fatal(err)
	}
	return id
}

// TestSIDRConnectSend: udaddy's exchange. The client's SIDR_REQ makes a
// CONNECT_REQUEST on the UDP listener (not the TCP one on the same
// port) with the client's private data; the accept's SIDR_REP gives the
// client ESTABLISHED with the server's QPN, Q_Key 0x01234567 and an
// address, with which a UD SEND reaches the server's QP.
func TestSIDRConnectSend(t *testing.T) {
	p, l := udpPair(t, "")
	cli := p.dialUD(t, rpingPort, "hello")
	ev := p.event(t, p.srv.ch, rdmacm.EventConnectRequest)
	if ev.ListenID != l || string(ev.Param.PrivateData[:5]) != "hello" || len(ev.Param.PrivateData) != 216-36 {
		t.Fatalf("CONNECT_REQUEST on %p (UDP listener %p), private %q (%d bytes)", ev.ListenID, l, ev.Param.PrivateData[:5], len(ev.Param.PrivateData))
	}
	srv := ev.ID
	if err := srv.CreateQP(p.srv.pd, p.srv.qpAttr()); err != nil {
		t.Fatal(err)
	}
	if _, err := srv.QP.PostRecv([]verbs.RecvWR{{WRID: 7, SGList: []verbs.SGE{p.srv.mr.SGE(0, 40+64)}}}); err != nil {
		t.Fatal(err)
	}
	if err := srv.Accept(rdmacm.ConnParam{PrivateData: []byte("welcome")}); err != nil {
		t.Fatal(err)
	}
	est := p.event(t, p.cli.ch, rdmacm.EventEstablished)
	if est.UD.QPNum != srv.QP.QPNum || est.UD.QKey != wire.UDPQKey || string(est.Param.PrivateData[:7]) != "welcome" ||
		est.UD.AHAttr.GRH.DGID.Unmap() != netip.MustParseAddr("10.0.0.1") || !est.UD.AHAttr.IsGlobal {
		t.Fatalf("ESTABLISHED UD %+v private %q, want QPN %d, Q_Key %#x, DGID 10.0.0.1", est.UD, est.Param.PrivateData[:7], srv.QP.QPNum, wire.UDPQKey)
	}
	if p.srv.ch.Pending() != 0 {
		t.Fatalf("%d events on the server after the accept, want none (no RTU in SIDR)", p.srv.ch.Pending())
	}
	ah, err := p.cli.pd.CreateAH(est.UD.AHAttr)
	if err != nil {
		t.Fatal(err)
	}
	// A UD receive starts with the 40-byte GRH (IBTA §11.4.1.2).
	p.send(t, cli, verbs.SendWR{AH: ah, RemoteQPN: est.UD.QPNum, RemoteQKey: est.UD.QKey}, 40)
	equal(t, "CM messages", p.rec.cm(), []string{"b>SIDR_REQ", "a>SIDR_REP"})
	if err := cli.Disconnect(); err != nil || cli.QP.State() != verbs.QPStateErr {
		t.Fatalf("disconnect: %v, QP %v", err, cli.QP.State())
	}
	equal(t, "CM messages after disconnect", p.rec.cm(), []string{"b>SIDR_REQ", "a>SIDR_REP"})
}

// TestSIDRReject: rdma_reject on a UD CONNECT_REQUEST answers with
// SIDR_REP status 2 (IB_SIDR_REJECT); the client gets UNREACHABLE with
// status 2 (as on rxe: TestSIDRAsRxe/reject) and the private data
// (cma_sidr_rep_handler; not checked on rxe).
func TestSIDRReject(t *testing.T) {
	p, _ := udpPair(t, "")
	p.dialUD(t, rpingPort, "")
	p.rejectBusy(t, rdmacm.EventUnreachable, 2, "b>SIDR_REQ", "a>SIDR_REP")
}

// rejectBusy rejects the server's CONNECT_REQUEST with private data
// "busy" and checks the client's event want, its status and private
// data, and the CM messages.
func (p *pair) rejectBusy(t *testing.T, want rdmacm.EventType, status int, msgs ...string) {
	t.Helper()
	ev := p.event(t, p.srv.ch, rdmacm.EventConnectRequest)
	if err := ev.ID.Reject([]byte("busy")); err != nil {
		t.Fatal(err)
	}
	got := p.event(t, p.cli.ch, want)
	if got.Status != status || string(got.Param.PrivateData[:4]) != "busy" {
		t.Errorf("%v status %d private %q, want %d and busy", want, got.Status, got.Param.PrivateData[:4], status)
	}
	equal(t, "CM messages", p.rec.cm(), msgs)
}

// TestSIDRNoListener: a SIDR_REQ for a UDP port nobody listens on (the
// TCP listener on the same port does not count) gets SIDR_REP status 1,
// IB_SIDR_UNSUPPORTED (cm_sidr_req_handler), the client UNREACHABLE 1.
func TestSIDRNoListener(t *testing.T) {
	p := newPair(t, "")
	p.dialUD(t, rpingPort, "")
	un := p.event(t, p.cli.ch, rdmacm.EventUnreachable)
	if un.Status != 1 {
		t.Errorf("UNREACHABLE status %d, want 1", un.Status)
	}
	if p.srv.ch.Pending() != 0 {
		t.Errorf("%d events on the server, want none", p.srv.ch.Pending())
	}
}

// TestSIDRLostREQ: the first SIDR_REQ lost; the MAD layer sends it
// again after 4096 ms (cma_resolve_ib_udp's timeout_ms) and the
// connection is made, as on rxe (rxe_cm_sidr_lost_req.pcapng). Every
// MAD of the server lost: 16 SIDR_REQs, then UNREACHABLE -110
// (IB_CM_SIDR_REQ_ERROR), as udaddy got on rxe
// (rxe_cm_sidr_unreachable.pcapng).
func TestSIDRLostREQ(t *testing.T) {
	p, _ := udpPair(t, "drop src=b qp=1 first=1")
	p.dialUD(t, rpingPort, "")
	p.acceptUD(t)
	p.event(t, p.cli.ch, rdmacm.EventEstablished)
	equal(t, "CM messages (model, rxe)", p.rec.cm(), rxeCapture(t, "rxe_cm_sidr_lost_req.pcapng").cm())
	// rxe under TCG: 4.29 s between the two.
	ts := p.rec.times("b", wire.CMAttrSIDRREQ)
	if len(ts) != 2 || ts[1].Sub(ts[0]) != 4096*sim.Millisecond {
		t.Errorf("SIDR_REQs at %v, want two 4096 ms apart", ts)
	}

	p, _ = udpPair(t, "drop src=a qp=1")
	cli := p.dialUD(t, rpingPort, "")
	start := p.w.Now()
	// udaddy's server accepts the first and reads no CM event after.
	p.acceptUD(t)
	un := p.event(t, p.cli.ch, rdmacm.EventUnreachable)
	if un.Status != -110 || cli.State() != "IDLE" {
		t.Errorf("UNREACHABLE status %d, client %s, want -110 and IDLE", un.Status, cli.State())
	}
	equal(t, "CM messages (model, rxe)", p.rec.cm(), rxeCapture(t, "rxe_cm_sidr_unreachable.pcapng").cm())
	if got, want := p.w.Now().Sub(start), 16*4096*sim.Millisecond; got != want {
		t.Errorf("UNREACHABLE after %v, want %v", got, want)
	}
}

// TestSIDRAsRxe: the model's SIDR exchanges equal real rxe's
// (wire/testdata/cm/rxe_cm_sidr_*.pcapng, conformance TestUdaddySIDR):
// udaddy's connect, accepted; a UD connect rejected by the server's
// application (no private data); one to a port with no UDP listener.
// Compared: the carrier and MAD header as tshark dissects them
// (dissectFields; tshark 4.0 names SIDR_REQ "ServiceIDResReq" but does
// not dissect its body), then every SIDR_REQ and SIDR_REP field as
// package wire decodes it, but for those drawn at random (the request
// ID and transaction ID, the client's rdma_cm port), the server's QPN
// and QP1's BTH PSN; and the client's event and status against the rxe
// client's console.
func TestSIDRAsRxe(t *testing.T) {
	tsharktest.Need(t)
	for _, c := range []struct {
		name   string
		port   uint16
		answer func(t *testing.T, p *pair)
		want   rdmacm.EventType
	}{
		{"udaddy", rpingPort, func(t *testing.T, p *pair) { p.acceptUD(t) }, rdmacm.EventEstablished},
		{"reject", 7473, func(t *testing.T, p *pair) {
			if err := p.event(t, p.srv.ch, rdmacm.EventConnectRequest).ID.Reject(nil); err != nil {
				t.Fatal(err)
			}
		}, rdmacm.EventUnreachable},
		{"no_listener", 7999, func(t *testing.T, p *pair) {}, rdmacm.EventUnreachable},
	} {
		t.Run(c.name, func(t *testing.T) {
			p := newPair(t, "")
			p.listenOn(t, rdmacm.PSUDP, 7473)
			p.listenOn(t, rdmacm.PSUDP, rpingPort)
			p.dialUD(t, c.port, "")
			c.answer(t, p)
			ev := p.event(t, p.cli.ch, c.want)
			name := "rxe_cm_sidr_" + c.name
			if c.want == rdmacm.EventUnreachable {
				console, err := os.ReadFile(filepath.Join("..", "wire", "testdata", "cm", name+".rping.txt"))
				if err != nil {
					t.Fatal(err)
				}
				if line := fmt.Sprintf("client event %v status %d", c.want, ev.Status); !strings.Contains(string(console), line) {
					t.Errorf("model %q, rxe's client:\n%s", line, console)
				}
			}
			compareSIDR(t, p, name+".pcapng")
		})
	}
}

// compareSIDR compares the SIDR frames of the pair with those of the rxe
// capture name (see TestSIDRAsRxe).
func compareSIDR(t *testing.T, p *pair, name string) {
	t.Helper()
	model, order := cmDissection(t, p.rec.writePcapng(t))
	real, realOrder := cmDissection(t, filepath.Join("..", "wire", "testdata", "cm", name))
	if strings.Join(order, " ") != strings.Join(realOrder, " ") {
		t.Fatalf("CM messages: model %v, rxe %v", order, realOrder)
	}
	for _, key := range order {
		for i, f := range dissectFields {
			// QP1's PSN counts the MADs a host sent since boot: the
			// guests had connected before the capture (the harness's
			// warm-up), the model's hosts had not.
			if f != "infiniband.bth.psn" && model[key][i] != real[key][i] {
				t.Errorf("%s %s: model %q, rxe %q", key, f, model[key][i], real[key][i])
			}
		}
	}
	mreq, mrep := sidrBodies(t, p.rec.frames)
	rreq, rrep := sidrBodies(t, rxeCapture(t, name).frames)
	for _, r := range []*wire.SIDRREQ{&mreq, &rreq} {
		r.RequestID = 0
		r.PrivateData[2], r.PrivateData[3] = 0, 0 // the client's port
	}
	if mreq != rreq {
		t.Errorf("SIDR_REQ:\nmodel %+v\n  rxe %+v", mreq, rreq)
	}
	for _, r := range []*wire.SIDRREP{&mrep, &rrep} {
		r.RequestID, r.QPN = 0, 0
	}
	if mrep != rrep {
		t.Errorf("SIDR_REP:\nmodel %+v\n  rxe %+v", mrep, rrep)
	}
	t.Logf("rxe SIDR_REQ service ID %#x, SIDR_REP status %d Q_Key %#x", rreq.ServiceID, rrep.Status, rrep.QKey)
}

// sidrBodies decodes the first SIDR_REQ and SIDR_REP of the frames.
func sidrBodies(t *testing.T, frames []recorded) (req wire.SIDRREQ, rep wire.SIDRREP) {
	t.Helper()
	var p wire.Packet
	found := 0
	for _, f := range frames {
		if p.Decode(f.data) != nil || p.BTH.DestQP() != wire.GSIQPN {
			continue
		}
		m := wire.MAD(p.Payload)
		switch wire.CMAttr(m.Header().AttributeID) {
		case wire.CMAttrSIDRREQ:
			if found&1 == 0 {
				req.Decode(m.Data())
			}
			found |= 1
		case wire.CMAttrSIDRREP:
			if found&2 == 0 {
				rep.Decode(m.Data())
			}
			found |= 2
		}
	}
	if found != 3 {
		t.Fatalf("no SIDR_REQ and SIDR_REP in the frames (found %b)", found)
	}
	return req, rep
}

// acceptUD takes the server's CONNECT_REQUEST, gives the new ID a QP and
// accepts, as udaddy's server does.
func (p *pair) acceptUD(t *testing.T) *rdmacm.CMID {
	t.Helper()
	ev := p.event(t, p.srv.ch, rdmacm.EventConnectRequest)
	if err := ev.ID.CreateQP(p.srv.pd, p.srv.qpAttr()); err != nil {
		t.Fatal(err)
	}
	if err := ev.ID.Accept(rdmacm.ConnParam{}); err != nil {
		t.Fatal(err)
	}
	return ev.ID
}
