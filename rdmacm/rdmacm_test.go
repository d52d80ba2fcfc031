package rdmacm_test

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"math/bits"
	"net/netip"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"github.com/rocesim/rocesim/faults"
	"github.com/rocesim/rocesim/rdmacm"
	"github.com/rocesim/rocesim/sim"
	"github.com/rocesim/rocesim/verbs"
	"github.com/rocesim/rocesim/wire"
	"github.com/rocesim/rocesim/wire/capture"
)

// recorder is a fabric tap that keeps every frame (the fabric records
// dropped frames too, with the verdict as the comment).
type recorder struct {
	frames []recorded
}

type recorded struct {
	at      sim.Time
	data    []byte
	comment string
}

func (r *recorder) AddInterface(name, description string) (int, error) { return 0, nil }

func (r *recorder) WriteFrame(ns int64, iface int, frame []byte, comment string) error {
	r.frames = append(r.frames, recorded{sim.Time(ns), bytes.Clone(frame), strings.Clone(comment)})
	return nil
}

// rxeCapture reads a capture of real rxe in wire/testdata/cm into a
// recorder, so that its CM messages read as the model's do.
func rxeCapture(t *testing.T, name string) *recorder {
	t.Helper()
	r, err := capture.Open(filepath.Join("..", "wire", "testdata", "cm", name))
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	rec := &recorder{}
	for cr, err := range r.Records() {
		if err != nil {
			t.Fatalf("%s after %d frames: %v", name, len(rec.frames), err)
		}
		rec.WriteFrame(cr.Time, cr.Interface, cr.Data, strings.Join(cr.Comments, "; "))
	}
	return rec
}

// hostName names the sender of a frame by its IP: a is 10.0.0.1.
func hostName(p *wire.Packet) string { return string(rune('a' + p.Src().Unmap().As4()[3] - 1)) }

// cm lists the CM messages on the wire in order: "b>REQ", "a>REP",
// "b>RTU(dropped)", ...
func (r *recorder) cm() []string {
	var out []string
	var p wire.Packet
	for _, f := range r.frames {
		if p.Decode(f.data) != nil || p.BTH.DestQP() != wire.GSIQPN {
			continue
		}
		s := hostName(&p) + ">" + wire.CMAttr(wire.MAD(p.Payload).Header().AttributeID).String()
		if strings.Contains(f.comment, "dropped") {
			s += "(dropped)"
		}
		out = append(out, s)
	}
	return out
}

// times returns when each CM message of kind attr from host left.
func (r *recorder) times(from string, attr wire.CMAttr) []sim.Time {
	var out []sim.Time
	for _, m := range r.sent(from, attr) {
		out = append(out, m.at)
	}
	return out
}

// sentMAD is a CM message on the wire and when it left.
type sentMAD struct {
	at  sim.Time
	mad wire.MAD
}

// sent returns every CM message of kind attr from host, in order.
func (r *recorder) sent(from string, attr wire.CMAttr) []sentMAD {
	var out []sentMAD
	var p wire.Packet
	for _, f := range r.frames {
		if p.Decode(f.data) != nil || p.BTH.DestQP() != wire.GSIQPN || hostName(&p) != from {
			continue
		}
		if m := wire.MAD(p.Payload); wire.CMAttr(m.Header().AttributeID) == attr {
			out = append(out, sentMAD{f.at, m})
		}
	}
	return out
}

// node is one side of a test: a host with a channel, a PD, a CQ and a
// registered buffer.
type node struct {
	h   *verbs.Host
	ch  *rdmacm.EventChannel
	pd  *verbs.PD
	cq  *verbs.CQ
	mr  *verbs.MR
	buf []byte
}

type pair struct {
	w        *verbs.World
	cm       *rdmacm.CM
	srv, cli *node
	rec      *recorder
	listen   *rdmacm.CMID
}

const rpingPort = 7174 // rping's default port, as in the captures

// newPair makes server a (10.0.0.1) listening on rpingPort and client
// b (10.0.0.2), as the rxe captures have them, under the plan.
func newPair(t *testing.T, plan string) *pair {
	t.Helper()
	cfg := verbs.WorldConfig{Seed: 1}
	if plan != "" {
		p, err := faults.Parse(plan)
		if err != nil {
			t.Fatal(err)
		}
		cfg.Plan = p
	}
	rec := &recorder{}
	cfg.Capture = rec
	w := verbs.NewWorld(cfg)
	ha, hb := w.AddHost("a"), w.AddHost("b")
	if err := w.Connect(ha, hb); err != nil {
		t.Fatal(err)
	}
	cm := rdmacm.New(w)
	p := &pair{w: w, cm: cm, rec: rec, srv: newNode(t, cm, ha), cli: newNode(t, cm, hb)}
	p.listen = p.listenOn(t, rdmacm.PSTCP, rpingPort)
	return p
}

func newNode(t *testing.T, cm *rdmacm.CM, h *verbs.Host) *node {
	t.Helper()
	ctx, err := h.GetDeviceList()[0].Open()
	if err != nil {
		t.Fatal(err)
	}
	pd, err := ctx.AllocPD()
	if err != nil {
		t.Fatal(err)
	}
	cq, err := ctx.CreateCQ(16, nil, 0)
	if err != nil {
		t.Fatal(err)
	}
	buf := make([]byte, 4096)
	mr, err := pd.RegMR(buf, verbs.AccessLocalWrite|verbs.AccessRemoteWrite|verbs.AccessRemoteRead)
	if err != nil {
		t.Fatal(err)
	}
	return &node{h: h, ch: cm.CreateEventChannel(h), pd: pd, cq: cq, mr: mr, buf: buf}
}

func (n *node) qpAttr() verbs.QPInitAttr {
	return verbs.QPInitAttr{SendCQ: n.cq, RecvCQ: n.cq, Cap: verbs.QPCap{MaxSendWR: 8, MaxRecvWR: 8, MaxSendSGE: 1, MaxRecvSGE: 1}}
}

// event runs the world until ch has an event and returns it; it fails
// the test if the event is not want or none comes.
func (p *pair) event(t *testing.T, ch *rdmacm.EventChannel, want rdmacm.EventType) *rdmacm.Event {
	t.Helper()
	ok, err := p.w.RunUntil(func() bool { return ch.Pending() > 0 })
	if err != nil {
		t.Fatal(err)
	}
	if !ok {
		t.Fatalf("no event came, want %v (CM messages: %v)", want, p.rec.cm())
	}
	ev, _ := ch.GetEvent()
	if ev.Event != want {
		t.Fatalf("event %v status %d, want %v (CM messages: %v)", ev.Event, ev.Status, want, p.rec.cm())
	}
	ev.Ack()
	return ev
}

// dial runs the client's side up to Connect, to port.
func (p *pair) dial(t *testing.T, port uint16) *rdmacm.CMID {
	t.Helper()
	id := p.route(t, rdmacm.PSTCP, port)
	if err := id.Connect(rdmacm.ConnParam{ResponderResources: 1, InitiatorDepth: 1}); err != nil {
		t.Fatal(err)
	}
	return id
}

// route runs the client's side up to CreateQP, in port space ps, to
// port.
func (p *pair) route(t *testing.T, ps rdmacm.PortSpace, port uint16) *rdmacm.CMID {
	t.Helper()
	id := p.resolve(t, ps, port)
	if err := id.CreateQP(p.cli.pd, p.cli.qpAttr()); err != nil {
		t.Fatal(err)
	}
	return id
}

// resolve runs the client's side up to ROUTE_RESOLVED, in port space
// ps, to port.
func (p *pair) resolve(t *testing.T, ps rdmacm.PortSpace, port uint16) *rdmacm.CMID {
	t.Helper()
	id, err := rdmacm.CreateID(p.cli.ch, nil, ps)
	if err != nil {
		t.Fatal(err)
	}
	if err := id.ResolveAddr(netip.Addr{}, netip.AddrPortFrom(netip.MustParseAddr("10.0.0.1"), port), 2000); err != nil {
		t.Fatal(err)
	}
	p.event(t, p.cli.ch, rdmacm.EventAddrResolved)
	if err := id.ResolveRoute(2000); err != nil {
		t.Fatal(err)
	}
	p.event(t, p.cli.ch, rdmacm.EventRouteResolved)
	return id
}

// answer takes the server's CONNECT_REQUEST, gives the new ID a QP with
// a receive posted, and accepts.
func (p *pair) answer(t *testing.T) *rdmacm.CMID {
	t.Helper()
	ev := p.event(t, p.srv.ch, rdmacm.EventConnectRequest)
	if ev.ListenID != p.listen {
		t.Fatalf("CONNECT_REQUEST on ID %p, want the listener", ev.ListenID)
	}
	p.accept(t, ev)
	return ev.ID
}

// accept gives the ID of a CONNECT_REQUEST a QP with a receive posted,
// and accepts.
func (p *pair) accept(t *testing.T, ev *rdmacm.Event) {
	t.Helper()
	id := ev.ID
	if err := id.CreateQP(p.srv.pd, p.srv.qpAttr()); err != nil {
		t.Fatal(err)
	}
	if _, err := id.QP.PostRecv([]verbs.RecvWR{{WRID: 7, SGList: []verbs.SGE{p.srv.mr.SGE(0, 64)}}}); err != nil {
		t.Fatal(err)
	}
	if err := id.Accept(rdmacm.ConnParam{ResponderResources: ev.Param.ResponderResources, InitiatorDepth: ev.Param.InitiatorDepth}); err != nil {
		t.Fatal(err)
	}
}

// ping sends "ping" from the client's QP and checks the server got it.
func (p *pair) ping(t *testing.T, cli *rdmacm.CMID) {
	t.Helper()
	p.send(t, cli, verbs.SendWR{}, 0)
}

// send sends "ping" from the client's QP with wr's address fields and
// checks the server got it at offset at of its buffer.
func (p *pair) send(t *testing.T, cli *rdmacm.CMID, wr verbs.SendWR, at int) {
	t.Helper()
	copy(p.cli.buf, "ping")
	wr.WRID, wr.Opcode, wr.Flags, wr.SGList = 1, verbs.WRSend, verbs.SendSignaled, []verbs.SGE{p.cli.mr.SGE(0, 4)}
	if _, err := cli.QP.PostSend([]verbs.SendWR{wr}); err != nil {
		t.Fatal(err)
	}
	wcs := make([]verbs.WC, 4)
	var got []verbs.WC
	p.w.RunUntil(func() bool {
		n := p.srv.cq.Poll(wcs)
		got = append(got, wcs[:n]...)
		return len(got) > 0
	})
	if len(got) != 1 || got[0].Status != verbs.WCSuccess || got[0].WRID != 7 || string(p.srv.buf[at:at+4]) != "ping" {
		t.Fatalf("server completions %+v, buffer %q", got, p.srv.buf[at:at+4])
	}
}

// establish connects the client to the server and waits until both
// sides are ESTABLISHED.
func (p *pair) establish(t *testing.T) (cli, srv *rdmacm.CMID) {
	t.Helper()
	cli = p.dial(t, rpingPort)
	srv = p.answer(t)
	p.event(t, p.cli.ch, rdmacm.EventEstablished)
	p.event(t, p.srv.ch, rdmacm.EventEstablished)
	return cli, srv
}

// disconnectBoth connects the pair and has both sides disconnect at the
// same instant, which it returns.
func (p *pair) disconnectBoth(t *testing.T) (cli, srv *rdmacm.CMID, at sim.Time) {
	t.Helper()
	cli, srv = p.establish(t)
	at = p.w.Now()
	for _, id := range []*rdmacm.CMID{cli, srv} {
		if err := id.Disconnect(); err != nil {
			t.Fatal(err)
		}
	}
	return cli, srv, at
}

// settles runs the world until nothing is left to happen, which must be
// within a millisecond of virtual time from start: no CM message was
// sent again.
func (p *pair) settles(t *testing.T, start sim.Time) {
	t.Helper()
	if err := p.w.Run(); err != nil {
		t.Fatal(err)
	}
	if d := p.w.Now().Sub(start); d > sim.Millisecond {
		t.Errorf("the exchange took %v of virtual time: a message was sent again", d)
	}
}

// hangUp disconnects as rping does: first (rping's client) first, the
// other side when DISCONNECTED reaches it.
func (p *pair) hangUp(t *testing.T, first, other *rdmacm.CMID) {
	t.Helper()
	if err := first.Disconnect(); err != nil {
		t.Fatal(err)
	}
	p.event(t, other.Channel(), rdmacm.EventDisconnected)
	if err := other.Disconnect(); err != nil {
		t.Fatal(err)
	}
	p.event(t, first.Channel(), rdmacm.EventDisconnected)
}

func equal(t *testing.T, what string, got, want []string) {
	t.Helper()
	if strings.Join(got, " ") != strings.Join(want, " ") {
		t.Errorf("%s:\n got %v\nwant %v", what, got, want)
	}
}

// TestConnectSendDisconnect: the exchange of rxe_cm_rping.pcapng. The
// client connects, sends, and disconnects first; the server answers
// the DREQ when its application disconnects too (rping's server does so
// on DISCONNECTED).
func TestConnectSendDisconnect(t *testing.T) {
	p := newPair(t, "")
	cli, srv := p.establish(t)
	if cli.State() != "ESTABLISHED" || srv.State() != "ESTABLISHED" {
		t.Fatalf("states %s, %s", cli.State(), srv.State())
	}
	if cli.QP.State() != verbs.QPStateRTS || srv.QP.State() != verbs.QPStateRTS {
		t.Fatalf("QP states %v, %v, want RTS", cli.QP.State(), srv.QP.State())
	}
	p.ping(t, cli)
	p.hangUp(t, cli, srv)
	if cli.QP.State() != verbs.QPStateErr || srv.QP.State() != verbs.QPStateErr {
		t.Errorf("QP states after disconnect %v, %v, want ERR", cli.QP.State(), srv.QP.State())
	}
	equal(t, "CM messages (model, rxe)", p.rec.cm(), rxeCapture(t, "rxe_cm_rping.pcapng").cm())
	if d := p.cm.Dropped(p.srv.h) + p.cm.Dropped(p.cli.h); d != 0 {
		t.Errorf("%d MADs ignored", d)
	}
}

// TestUnanswered: the server owes an answer from the instant its CM
// takes the REQ (before the application takes the CONNECT_REQUEST) until
// Accept, and from the DREQ until Disconnect; rdma_create_qp in between
// does not answer. The drop-in library holds a fabric's clock by it.
func TestUnanswered(t *testing.T) {
	p := newPair(t, "")
	owed := func(when string, want int) {
		t.Helper()
		if n := p.cm.Unanswered(p.srv.h); n != want {
			t.Errorf("%s: the server owes %d answers, want %d", when, n, want)
		}
		if n := p.cm.Unanswered(p.cli.h); n != 0 {
			t.Errorf("%s: the client owes %d answers, want 0", when, n)
		}
	}
	owed("listening", 0)
	cli := p.dial(t, rpingPort)
	if _, err := p.w.RunUntil(func() bool { return p.srv.ch.Pending() > 0 }); err != nil {
		t.Fatal(err)
	}
	owed("CONNECT_REQUEST waiting", 1)
	ev := p.event(t, p.srv.ch, rdmacm.EventConnectRequest)
	if err := ev.ID.CreateQP(p.srv.pd, p.srv.qpAttr()); err != nil {
		t.Fatal(err)
	}
	owed("QP created", 1)
	if err := ev.ID.Accept(rdmacm.ConnParam{ResponderResources: 1, InitiatorDepth: 1}); err != nil {
		t.Fatal(err)
	}
	owed("accepted", 0)
	p.event(t, p.cli.ch, rdmacm.EventEstablished)
	p.event(t, p.srv.ch, rdmacm.EventEstablished)
	if err := cli.Disconnect(); err != nil {
		t.Fatal(err)
	}
	if _, err := p.w.RunUntil(func() bool { return p.srv.ch.Pending() > 0 }); err != nil {
		t.Fatal(err)
	}
	owed("DISCONNECTED waiting", 1)
	p.event(t, p.srv.ch, rdmacm.EventDisconnected)
	owed("DISCONNECTED taken", 1)
	if err := ev.ID.Disconnect(); err != nil {
		t.Fatal(err)
	}
	owed("disconnected", 0)
	p.event(t, p.cli.ch, rdmacm.EventDisconnected)
}

// TestLostMAD: a lost REQ is sent again one REQ timeout later (6144
// ms; real rxe: 6.34 s, rxe_cm_lost_req.pcapng); a lost REP after the
// REQ's CM response timeout (4096 ms; real rxe: 4.25 s,
// rxe_cm_lost_rep.pcapng), before the client's REQ timeout would send
// the REQ again. Either way the connection comes up and ends as
// rping's did on rxe.
func TestLostMAD(t *testing.T) {
	for _, c := range []struct {
		plan, capture, from string
		attr                wire.CMAttr
		after               sim.Duration
	}{
		{"drop src=b qp=1 first=1", "rxe_cm_lost_req.pcapng", "b", wire.CMAttrREQ, 6144 * sim.Millisecond},
		{"drop cm=REP first=1", "rxe_cm_lost_rep.pcapng", "a", wire.CMAttrREP, 4096 * sim.Millisecond},
	} {
		p := newPair(t, c.plan)
		cli, srv := p.establish(t)
		p.hangUp(t, cli, srv)
		equal(t, "CM messages (model, rxe) under "+c.plan, p.rec.cm(), rxeCapture(t, c.capture).cm())
		if ts := p.rec.times(c.from, c.attr); len(ts) != 2 || ts[1].Sub(ts[0]) != c.after {
			t.Errorf("%v from %s at %v, want two %v apart", c.attr, c.from, ts, c.after)
		}
	}
}

// TestLostRTU: the RTU lost. The client is ESTABLISHED on the REP and
// its first SEND lands (the server's QP is RTS since the accept), but
// the server's CM stays in REP_SENT (the first data reaches a CM only
// through rdma_notify of a COMM_EST, which rping does not call, and this
// package does not model), so, as on real rxe (rxe_cm_lost_rtu.pcapng),
// the server's REP goes again after 4096 ms, the client answers the
// duplicate with an RTU, and only then the server gets ESTABLISHED.
func TestLostRTU(t *testing.T) {
	p := newPair(t, "drop src=b qp=1 nth=2 first=1")
	cli := p.dial(t, rpingPort)
	srv := p.answer(t)
	p.event(t, p.cli.ch, rdmacm.EventEstablished)
	p.ping(t, cli)
	if srv.State() != "REP_SENT" || p.srv.ch.Pending() != 0 {
		t.Fatalf("server %s with %d events after the first data, want REP_SENT and none", srv.State(), p.srv.ch.Pending())
	}
	p.event(t, p.srv.ch, rdmacm.EventEstablished)
	p.hangUp(t, cli, srv)
	equal(t, "CM messages (model, rxe)", p.rec.cm(), rxeCapture(t, "rxe_cm_lost_rtu.pcapng").cm())
	reps := p.rec.times("a", wire.CMAttrREP)
	if len(reps) != 2 || reps[1].Sub(reps[0]) != 4096*sim.Millisecond {
		t.Errorf("REPs at %v, want two 4096 ms apart", reps)
	}
}

// TestRejectNoListener: a REQ for a port nobody listens on gets a REJ
// with reason 8, invalid service ID, and the client REJECTED with
// status 8, as rping got from real rxe (rxe_cm_rej.pcapng).
func TestRejectNoListener(t *testing.T) {
	p := newPair(t, "")
	cli := p.dial(t, 7999)
	ev := p.event(t, p.cli.ch, rdmacm.EventRejected)
	if ev.Status != 8 {
		t.Errorf("REJECTED status %d, want 8", ev.Status)
	}
	if cli.QP.State() != verbs.QPStateErr {
		t.Errorf("client QP %v after the REJ, want ERR", cli.QP.State())
	}
	equal(t, "CM messages (model, rxe)", p.rec.cm(), rxeCapture(t, "rxe_cm_rej.pcapng").cm())
}

// TestConsumerReject: the server's application rejects; the client gets
// REJECTED with status 28 and the private data (from the kernel's cm.c
// and cma.c only: the captures hold no consumer reject).
func TestConsumerReject(t *testing.T) {
	p := newPair(t, "")
	p.dial(t, rpingPort)
	p.rejectBusy(t, rdmacm.EventRejected, 28, "b>REQ", "a>REJ")
}

// TestUnreachable: every MAD of the server lost. The client sends the
// REQ 16 times (max_cm_retries 15), 6144 ms apart, and gets UNREACHABLE
// with status -110 one REQ timeout after the last, as rping did on real
// rxe (rxe_cm_unreachable.pcapng: 16 REQs, UNREACHABLE, error -110).
func TestUnreachable(t *testing.T) {
	p := newPair(t, "drop src=a qp=1")
	cli := p.dial(t, rpingPort)
	start := p.w.Now()
	ev := p.event(t, p.cli.ch, rdmacm.EventUnreachable)
	if ev.Status != -110 {
		t.Errorf("UNREACHABLE status %d, want -110", ev.Status)
	}
	reqs := p.rec.times("b", wire.CMAttrREQ)
	if real := rxeCapture(t, "rxe_cm_unreachable.pcapng").times("b", wire.CMAttrREQ); len(reqs) != len(real) || len(reqs) != 16 {
		t.Errorf("%d REQs, rxe sent %d, want 16", len(reqs), len(real))
	}
	if got, want := p.w.Now().Sub(start), 16*6144*sim.Millisecond; got != want {
		t.Errorf("UNREACHABLE after %v, want %v", got, want)
	}
	if cli.State() != "IDLE" {
		t.Errorf("client %s, want IDLE", cli.State())
	}
}

// TestMisuse: verbs out of order fail with EINVAL naming the state.
func TestMisuse(t *testing.T) {
	p := newPair(t, "")
	id, _ := rdmacm.CreateID(p.cli.ch, nil, rdmacm.PSTCP)
	for _, c := range []struct {
		name string
		err  error
	}{
		{"connect before resolve", id.Connect(rdmacm.ConnParam{})},
		{"accept without a request", id.Accept(rdmacm.ConnParam{})},
		{"disconnect unconnected", id.Disconnect()},
		{"resolve_route before resolve_addr", id.ResolveRoute(100)},
	} {
		if c.err == nil || !strings.Contains(c.err.Error(), "invalid argument") {
			t.Errorf("%s: %v, want EINVAL", c.name, c.err)
		}
	}
	if _, err := rdmacm.CreateID(p.cli.ch, nil, 0x013F); err == nil {
		t.Error("RDMA_PS_IB accepted")
	}
}

// TestEventNames: the names rdma_event_str prints.
func TestEventNames(t *testing.T) {
	for ev, want := range map[rdmacm.EventType]string{
		rdmacm.EventAddrResolved: "RDMA_CM_EVENT_ADDR_RESOLVED", rdmacm.EventEstablished: "RDMA_CM_EVENT_ESTABLISHED",
		rdmacm.EventRejected: "RDMA_CM_EVENT_REJECTED", rdmacm.EventUnreachable: "RDMA_CM_EVENT_UNREACHABLE",
		rdmacm.EventDisconnected: "RDMA_CM_EVENT_DISCONNECTED", rdmacm.EventTimewaitExit: "RDMA_CM_EVENT_TIMEWAIT_EXIT",
	} {
		if got := ev.String(); got != want {
			t.Errorf("%d: %s, want %s", int(ev), got, want)
		}
	}
	if got := fmt.Sprint(rdmacm.EventType(99)); got != "UNKNOWN EVENT 99" {
		t.Errorf("99: %s", got)
	}
}

// TestDeterministic: the same seed gives the same frames, byte for byte
// (communication IDs, PSNs and the client's port come from the seed).
func TestDeterministic(t *testing.T) {
	run := func() [][]byte {
		p := newPair(t, "drop src=b qp=1 first=1")
		cli, srv := p.establish(t)
		p.ping(t, cli)
		p.hangUp(t, cli, srv)
		var out [][]byte
		for _, f := range p.rec.frames {
			out = append(out, append([]byte(fmt.Sprint(f.at, f.comment)), f.data...))
		}
		return out
	}
	a, b := run(), run()
	if len(a) != len(b) {
		t.Fatalf("%d frames, then %d", len(a), len(b))
	}
	for i := range a {
		if !bytes.Equal(a[i], b[i]) {
			t.Fatalf("frame %d differs between two runs of one seed", i)
		}
	}
}

// dreqTIDs returns the transaction IDs of the DREQs each host sent, and
// the local communication ID each host put in its REQ or REP.
func (r *recorder) dreqTIDs() (tids, comms map[string]uint64) {
	tids, comms = map[string]uint64{}, map[string]uint64{}
	var p wire.Packet
	for _, f := range r.frames {
		if p.Decode(f.data) != nil || p.BTH.DestQP() != wire.GSIQPN {
			continue
		}
		m := wire.MAD(p.Payload)
		switch wire.CMAttr(m.Header().AttributeID) {
		case wire.CMAttrDREQ:
			tids[hostName(&p)] = m.Header().TransactionID
		case wire.CMAttrREQ, wire.CMAttrREP:
			comms[hostName(&p)] = uint64(binary.BigEndian.Uint32(m.Data()))
		}
	}
	return tids, comms
}

// TestDisconnectBoth: both sides disconnect at once, as perftest's
// ib_write_bw -R does (rxe_cm_write_bw.pcapng: DREQ from each, then a
// DREP from each as each program destroys its ID); each DREQ carries its
// sender's own transaction ID (hi_tid 2 above its byte-swapped
// communication ID), not the REQ's. A DREQ that finds its ID in
// DREQ_SENT ends that ID's retries and gives DISCONNECTED at once
// (cm_dreq_handler cancels the DREQ, DREQ_RCVD); the DREP waits for
// Destroy (cm_destroy_id). Nothing is sent again: the run settles
// within the round trip, and neither side waits out its DREQ's retries
// (16 DREQs 6.1 s apart, 98 s of virtual time, when the peer was gone
// before its DREP: perftest's ib_send_bw -R on two processes). A side
// whose peer's DREP comes before its own Destroy is done (TIMEWAIT, no
// second event, nothing owed): its Destroy sends nothing.
func TestDisconnectBoth(t *testing.T) {
	p := newPair(t, "")
	cli, srv, start := p.disconnectBoth(t)
	p.event(t, p.cli.ch, rdmacm.EventDisconnected)
	p.event(t, p.srv.ch, rdmacm.EventDisconnected)
	if cli.State() != "DREQ_RCVD" || srv.State() != "DREQ_RCVD" {
		t.Errorf("states %s, %s after the crossing DREQs, want DREQ_RCVD", cli.State(), srv.State())
	}
	equal(t, "CM messages before Destroy", p.rec.cm(), []string{"b>REQ", "a>REP", "b>RTU", "b>DREQ", "a>DREQ"})
	if n := p.cm.Unanswered(p.cli.h); n != 1 {
		t.Errorf("the client owes %d answers, want its DREP", n)
	}
	if err := srv.Destroy(); err != nil {
		t.Fatal(err)
	}
	p.settles(t, start)
	if cli.State() != "TIMEWAIT" || p.cli.ch.Pending() != 0 || p.cm.Unanswered(p.cli.h) != 0 {
		t.Errorf("after the server's DREP the client is %s with %d events pending, %d answers owed; want TIMEWAIT, none, none",
			cli.State(), p.cli.ch.Pending(), p.cm.Unanswered(p.cli.h))
	}
	if err := cli.Destroy(); err != nil {
		t.Fatal(err)
	}
	p.settles(t, start)
	equal(t, "CM messages", p.rec.cm(), []string{"b>REQ", "a>REP", "b>RTU", "b>DREQ", "a>DREQ", "a>DREP"})
	tids, comms := p.rec.dreqTIDs()
	for _, h := range []string{"a", "b"} {
		if want := 2<<32 | uint64(bits.ReverseBytes32(uint32(comms[h]))); tids[h] != want {
			t.Errorf("%s's DREQ TID %#x, want %#x", h, tids[h], want)
		}
	}
	// The same on real rxe: the second connection of ib_write_bw -R.
	real := rxeCapture(t, "rxe_cm_write_bw.pcapng")
	rt, _ := real.dreqTIDs()
	if rt["a"] == rt["b"] || rt["a"]>>32 != 2 || rt["b"]>>32 != 2 {
		t.Errorf("rxe's DREQ TIDs %#x, %#x: want two of hi_tid 2, each its sender's", rt["a"], rt["b"])
	}
}

// TestDisconnectCrossGone: both sides disconnect at once and the server
// destroys its ID before the client's DREQ reaches it, as a perftest -R
// server that exits at once does: the client's DREQ still gets its
// DISCONNECTED at once (the server's DREQ), and the server's CM, which
// has no ID for the connection any more, answers the DREQ with a DREP
// (cm_issue_drep: the communication IDs swapped, the transaction ID
// kept) rather than leaving it to 15 resends.
func TestDisconnectCrossGone(t *testing.T) {
	p := newPair(t, "")
	cli, srv, start := p.disconnectBoth(t)
	if err := srv.Destroy(); err != nil {
		t.Fatal(err)
	}
	p.event(t, p.cli.ch, rdmacm.EventDisconnected)
	if err := cli.Destroy(); err != nil {
		t.Fatal(err)
	}
	p.settles(t, start)
	equal(t, "CM messages", p.rec.cm(), []string{"b>REQ", "a>REP", "b>RTU", "b>DREQ", "a>DREQ", "a>DREP", "b>DREP"})
	// The stale DREP names the client's DREQ: its transaction ID, the
	// communication IDs swapped.
	dreq, drep := p.rec.sent("b", wire.CMAttrDREQ), p.rec.sent("a", wire.CMAttrDREP)
	if len(dreq) != 1 || len(drep) != 1 {
		t.Fatalf("%d DREQs from the client, %d DREPs from the server, want 1 each", len(dreq), len(drep))
	}
	var q wire.CMDREQ
	var r wire.CMDREP
	q.Decode(dreq[0].mad.Data())
	r.Decode(drep[0].mad.Data())
	if drep[0].mad.Header().TransactionID != dreq[0].mad.Header().TransactionID ||
		r.LocalCommID != q.RemoteCommID || r.RemoteCommID != q.LocalCommID {
		t.Errorf("DREP tid %#x local %#x remote %#x for DREQ tid %#x local %#x remote %#x",
			drep[0].mad.Header().TransactionID, r.LocalCommID, r.RemoteCommID,
			dreq[0].mad.Header().TransactionID, q.LocalCommID, q.RemoteCommID)
	}
	// The client's DREP to the server's DREQ finds no ID there: ignored,
	// as cm_drep_handler ignores it.
	if n := p.cm.Dropped(p.srv.h); n != 1 {
		t.Errorf("the server's CM dropped %d MADs, want the client's DREP", n)
	}
}

// TestRTUNeverArrives: every RTU lost (every MAD from the client after
// its REQ). The server sends its REP 16 times, 4096 ms apart, and its ID
// gets UNREACHABLE with -110 (ib_cm's IB_CM_REP_ERROR, which rdma_cm
// reports as UNREACHABLE: from cm.c and cma.c, not captured), while the
// client, ESTABLISHED on the first REP, answers each resent REP with an
// RTU.
func TestRTUNeverArrives(t *testing.T) {
	p := newPair(t, "drop src=b qp=1 from=1us")
	p.dial(t, rpingPort)
	srv := p.answer(t)
	p.event(t, p.cli.ch, rdmacm.EventEstablished)
	ev := p.event(t, p.srv.ch, rdmacm.EventUnreachable)
	if ev.Status != -110 || srv.State() != "IDLE" {
		t.Errorf("server UNREACHABLE status %d in %s, want -110 and IDLE", ev.Status, srv.State())
	}
	reps, rtus := p.rec.times("a", wire.CMAttrREP), p.rec.times("b", wire.CMAttrRTU)
	if len(reps) != 16 || len(rtus) != 16 {
		t.Errorf("%d REPs and %d RTUs, want 16 each", len(reps), len(rtus))
	}
	for i := 1; i < len(reps); i++ {
		if d := reps[i].Sub(reps[i-1]); d != 4096*sim.Millisecond {
			t.Errorf("REP %d sent %v after the one before, want 4096 ms", i+1, d)
		}
	}
}

// TestAddrError: an address on the hosts' network that no host has
// gives ADDR_ERROR with status -110 when rdma_resolve_addr's timeout
// (rping's 2000 ms) runs out, and no MAD leaves, as rping saw on rxe
// (rxe_cm_addr_error.pcapng: ARP requests only, then
// "RDMA_CM_EVENT_ADDR_ERROR, error -110"). The ID can resolve again.
func TestAddrError(t *testing.T) {
	p := newPair(t, "")
	id, _ := rdmacm.CreateID(p.cli.ch, nil, rdmacm.PSTCP)
	start := p.w.Now()
	if err := id.ResolveAddr(netip.Addr{}, netip.MustParseAddrPort("10.0.0.99:7174"), 2000); err != nil {
		t.Fatal(err)
	}
	ev := p.event(t, p.cli.ch, rdmacm.EventAddrError)
	if ev.Status != -110 || p.w.Now().Sub(start) != 2000*sim.Millisecond {
		t.Errorf("ADDR_ERROR status %d after %v, want -110 after 2s", ev.Status, p.w.Now().Sub(start))
	}
	equal(t, "CM messages (model, rxe)", p.rec.cm(), rxeCapture(t, "rxe_cm_addr_error.pcapng").cm())
	if err := id.ResolveAddr(netip.Addr{}, netip.MustParseAddrPort("10.0.0.1:7174"), 2000); err != nil {
		t.Fatalf("resolve again: %v", err)
	}
	p.event(t, p.cli.ch, rdmacm.EventAddrResolved)
}

// TestNoRoute: an address off the hosts' network fails rdma_resolve_addr
// at once with ENETUNREACH, as on rxe ("rdma_resolve_addr: Network is
// unreachable", rxe_cm_no_route.rping.txt), with no event and no frame.
func TestNoRoute(t *testing.T) {
	p := newPair(t, "")
	id, _ := rdmacm.CreateID(p.cli.ch, nil, rdmacm.PSTCP)
	err := id.ResolveAddr(netip.Addr{}, netip.MustParseAddrPort("192.168.77.1:7174"), 2000)
	if !errors.Is(err, syscall.ENETUNREACH) {
		t.Fatalf("resolve_addr: %v, want ENETUNREACH", err)
	}
	p.w.Run()
	if p.cli.ch.Pending() != 0 || len(p.rec.frames) != 0 || id.State() != "IDLE" {
		t.Errorf("%d events, %d frames, state %s after a refused resolve", p.cli.ch.Pending(), len(p.rec.frames), id.State())
	}
}

// TestLAPDropped: a LAP (load alternate path) for an established
// connection is dropped without an answer, as ib_cm drops LAP and APR
// on a RoCE port (cm.c, cm_lap_handler: not supported for RoCE); the
// connection goes on.
func TestLAPDropped(t *testing.T) {
	p := newPair(t, "")
	cli, srv := p.establish(t)
	_, comms := p.rec.dreqTIDs()
	var mad [wire.MADLen]byte
	m := wire.MAD(mad[:])
	m.SetHeader(&wire.MADHeader{BaseVersion: wire.MADBaseVersion, MgmtClass: wire.MADClassCM, ClassVersion: wire.MADClassVersion,
		Method: wire.MADMethodSend, TransactionID: 2<<32 | 7, AttributeID: uint16(wire.CMAttrLAP)})
	binary.BigEndian.PutUint32(m.Data()[0:], uint32(comms["a"]))
	binary.BigEndian.PutUint32(m.Data()[4:], uint32(comms["b"]))
	if err := p.srv.h.SendMAD(p.cli.h.IPv4(), mad[:]); err != nil {
		t.Fatal(err)
	}
	p.w.Run()
	equal(t, "CM messages", p.rec.cm(), []string{"b>REQ", "a>REP", "b>RTU", "a>LAP"})
	if d := p.cm.Dropped(p.cli.h); d != 1 || cli.State() != "ESTABLISHED" {
		t.Errorf("client dropped %d MADs, is %s: want the LAP dropped and ESTABLISHED", d, cli.State())
	}
	p.ping(t, cli)
	p.hangUp(t, cli, srv)
}
