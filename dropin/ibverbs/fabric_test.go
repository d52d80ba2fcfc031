package main

import (
	"bytes"
	"io"
	"os"
	"sync/atomic"
	"testing"
	"time"
	"unsafe"

	"github.com/rocesim/rocesim/procfabric"
	"github.com/rocesim/rocesim/verbs"
)

// fabricEnd is one process of TestFabricTwoProcesses: the model of a
// program on node name of the fabric, with one RC QP.
type fabricEnd struct {
	p        *process
	cq, qp   uint32
	qpn      uint32
	buf      []byte
	va, rkey uint64
}

// fabricProcess is the model of a program on node of the fabric in dir,
// made in this test's process, its idle loop running as lock() starts
// it; it shuts down when the test ends.
func fabricProcess(t *testing.T, dir, node string) *process {
	t.Helper()
	p, err := newProcess(Config{Devices: 1, Seed: 1, Fabric: "t", Node: node, FabricDir: dir, IdleWake: DefaultFabricIdleWake},
		&fakeFDs{ready: map[int]bool{}}, io.Discard, func(code int) { t.Errorf("%s: exit %d", node, code) })
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { p.mu.Lock(); p.shutdown(); p.mu.Unlock() })
	// As lock() starts it: the process waits on the fabric while the
	// program makes no verb call (b, done with its poll, must still
	// send its ACK).
	go p.idleLoop(p.cfg.IdleWake, time.Sleep)
	return p
}

func newFabricEnd(t *testing.T, dir, node string) *fabricEnd {
	t.Helper()
	p := fabricProcess(t, dir, node)
	e := &fabricEnd{p: p, buf: make([]byte, 8192)}
	e.va = uint64(uintptr(unsafe.Pointer(&e.buf[0]))) // the program's own address
	ctx, _, errno := p.open(0)
	pdh, _ := p.allocPD(ctx)
	_, m, errno2 := p.regMR(pdh, e.buf, e.va, verbs.AccessLocalWrite|verbs.AccessRemoteWrite)
	var errno3, errno4 = errno, errno2
	e.cq, _, errno3 = p.createCQ(ctx, 16, -1, 0, nil)
	e.qp, e.qpn, _, errno4 = p.createQP(pdh, qpInit{sendCQ: e.cq, recvCQ: e.cq, typ: verbs.QPTypeRC,
		cap: verbs.QPCap{MaxSendWR: 4, MaxRecvWR: 4, MaxSendSGE: 1, MaxRecvSGE: 1}}, nil)
	if errno != 0 || errno2 != 0 || errno3 != 0 || errno4 != 0 {
		t.Fatal(errno, errno2, errno3, errno4)
	}
	if m.mr.Addr != e.va {
		t.Fatalf("%s: MR at %#x, want the program's address %#x", node, m.mr.Addr, e.va)
	}
	e.rkey = uint64(m.mr.RKey)
	return e
}

// connect takes e's QP to RTS toward peer over GID 0, as
// ibv_rc_pingpong -g 0 does.
func (e *fabricEnd) connect(t *testing.T, peer *fabricEnd) {
	t.Helper()
	if g := e.p.devs[0].gids[0]; !g.IsLinkLocalUnicast() {
		t.Fatalf("GID 0 is %v, want the link-local address", g)
	}
	steps := []struct {
		attr verbs.QPAttr
		mask verbs.QPAttrMask
	}{
		{verbs.QPAttr{QPState: verbs.QPStateInit, PortNum: 1, QPAccessFlags: verbs.AccessRemoteWrite},
			verbs.QPAttrState | verbs.QPAttrPKeyIndex | verbs.QPAttrPort | verbs.QPAttrAccessFlags},
		{verbs.QPAttr{QPState: verbs.QPStateRTR, PathMTU: verbs.MTU1024, DestQPNum: peer.qpn, RQPSN: 0, MaxDestRdAtomic: 1, MinRNRTimer: 12,
			AHAttr: verbs.AHAttr{IsGlobal: true, PortNum: 1, GRH: verbs.GRH{DGID: peer.p.devs[0].gids[0], HopLimit: 1}}},
			verbs.QPAttrState | verbs.QPAttrAV | verbs.QPAttrPathMTU | verbs.QPAttrDestQPN | verbs.QPAttrRQPSN | verbs.QPAttrMaxDestRdAtomic | verbs.QPAttrMinRNRTimer},
		{verbs.QPAttr{QPState: verbs.QPStateRTS, Timeout: 14, RetryCnt: 7, RNRRetry: 7, MaxRdAtomic: 1},
			verbs.QPAttrState | verbs.QPAttrTimeout | verbs.QPAttrRetryCnt | verbs.QPAttrRNRRetry | verbs.QPAttrSQPSN | verbs.QPAttrMaxQPRdAtomic},
	}
	for _, s := range steps {
		if _, errno := e.p.modifyQP(e.qp, &s.attr, s.mask); errno != 0 {
			t.Fatalf("modify to %v: %v", s.attr.QPState, errno)
		}
	}
}

// pollUntil polls e's CQ until n completions came (each poll that finds
// nothing waits on the fabric) and returns them.
func (e *fabricEnd) pollUntil(n int) []verbs.WC {
	e.p.mu.Lock()
	defer e.p.mu.Unlock()
	var got []verbs.WC
	wcs := make([]verbs.WC, 4)
	for len(got) < n && !e.p.closed {
		k, _ := e.p.poll(e.cq, wcs)
		got = append(got, wcs[:k]...)
	}
	return got
}

// twoNodeFabric starts a procfabric daemon of nodes a (10.0.0.1) and b
// (10.0.0.2) in this test's process and returns its directory. It is
// closed when the test ends, or after 30 s of wall time (the test
// fails): whatever waits on it then returns.
func twoNodeFabric(t *testing.T) string {
	t.Helper()
	dir, err := os.MkdirTemp("", "pf")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	d, err := procfabric.Listen(procfabric.Config{Name: "t", Dir: dir + "/rocesim", Nodes: []string{"a", "b"}})
	if err != nil {
		t.Fatal(err)
	}
	served := make(chan struct{})
	go func() { d.Serve(); close(served) }()
	bound := time.AfterFunc(30*time.Second, func() { t.Error("still running after 30s: the daemon is closed"); d.Close() })
	// Cleanups run last first: the processes shut down (fabricProcess)
	// before the daemon closes.
	t.Cleanup(func() { bound.Stop(); d.Close(); <-served })
	return dir + "/rocesim"
}

// TestFabricTwoProcesses: two models on one procfabric daemon, as two
// programs through rocesim exec: over GID 0 (the link-local address the
// attach reply gives), a WRITE to the address the peer program has its
// buffer at (its MR is there: RegMRAt) and a SEND complete on both
// sides. The post comes from another thread while the sender's poller is
// blocked on the daemon: its Interrupt (poke) makes the frames leave;
// without it both pollers would wait forever.
func TestFabricTwoProcesses(t *testing.T) {
	dir := twoNodeFabric(t)
	a, b := newFabricEnd(t, dir, "a"), newFabricEnd(t, dir, "b")
	a.connect(t, b)
	b.connect(t, a)
	if errno := b.p.postRecv(b.qp, verbs.RecvWR{WRID: 7, SGList: []verbs.SGE{{Addr: b.va + 4096, Length: 4096, LKey: uint32(b.rkey)}}}); errno != 0 {
		t.Fatal(errno)
	}
	gotA, gotB := make(chan []verbs.WC, 1), make(chan []verbs.WC, 1)
	go func() { gotB <- b.pollUntil(1) }()
	go func() { gotA <- a.pollUntil(2) }()
	for { // until a's poller waits on the daemon
		a.p.mu.Lock()
		waiting := a.p.fab.waiting
		if waiting {
			break
		}
		a.p.mu.Unlock()
		time.Sleep(time.Millisecond)
	}
	copy(a.buf, "written by a, at b's own address")
	copy(a.buf[1000:], "sent by a")
	for _, wr := range []verbs.SendWR{
		{WRID: 1, Opcode: verbs.WRRDMAWrite, Flags: verbs.SendSignaled, RemoteAddr: b.va + 100, RKey: uint32(b.rkey),
			SGList: []verbs.SGE{{Addr: a.va, Length: 32, LKey: uint32(a.rkey)}}},
		{WRID: 2, Opcode: verbs.WRSend, Flags: verbs.SendSignaled, SGList: []verbs.SGE{{Addr: a.va + 1000, Length: 9, LKey: uint32(a.rkey)}}},
	} {
		if errno := a.p.postSend(a.qp, &sendWR{wr: wr}); errno != 0 {
			t.Fatal(errno)
		}
	}
	a.p.mu.Unlock()
	wa, wb := <-gotA, <-gotB
	if len(wa) != 2 || wa[0].Status != verbs.WCSuccess || wa[1].Status != verbs.WCSuccess {
		t.Errorf("a's completions: %+v", wa)
	}
	if len(wb) != 1 || wb[0].Status != verbs.WCSuccess || wb[0].ByteLen != 9 || wb[0].WRID != 7 {
		t.Errorf("b's completions: %+v", wb)
	}
	if !bytes.Equal(b.buf[100:132], a.buf[:32]) || string(b.buf[4096:4105]) != "sent by a" {
		t.Errorf("b's buffer: %q, %q", b.buf[100:132], b.buf[4096:4105])
	}
}

// TestFabricPollBesideWait: a thread that polls an empty CQ while
// another thread of its process waits on the daemon in a plain wait (here
// the idle wait, which waits again whenever it is woken) does not spin:
// its poll makes that wait a poll's (Port.Poll), which the fabric wakes
// once at an instant with nothing left to happen; polled again at that
// instant, it sleeps. Ending the other wait instead made each poll a
// round trip to the daemon at one instant, tens of thousands a second.
func TestFabricPollBesideWait(t *testing.T) {
	dir := twoNodeFabric(t)
	a := fabricProcess(t, dir, "a")
	fabricProcess(t, dir, "b") // the clock runs once both nodes are attached
	ctx, _, errno := a.open(0)
	if errno != 0 {
		t.Fatal(errno)
	}
	cq, _, errno := a.createCQ(ctx, 16, -1, 0, nil)
	if errno != 0 {
		t.Fatal(errno)
	}
	untilFabricWaiting(a) // a's idle loop
	var polls atomic.Int64
	go func() {
		wcs := make([]verbs.WC, 4)
		a.mu.Lock()
		defer a.mu.Unlock()
		for !a.closed {
			a.poll(cq, wcs)
			polls.Add(1)
		}
	}()
	time.Sleep(300 * time.Millisecond)
	if n := polls.Load(); n > 20 {
		t.Errorf("%d polls in 300ms of an idle fabric: the poll spins", n)
	}
}

// untilFabricWaiting returns once a thread of p waits on its port (the
// daemon, or a UDP socket).
func untilFabricWaiting(p *process) {
	for {
		p.mu.Lock()
		waiting := p.fab.waiting
		p.mu.Unlock()
		if waiting {
			return
		}
		time.Sleep(time.Millisecond)
	}
}
