package main

// rdma_cm over the real-network transport (ROCESIM_TRANSPORT=udp): a
// late rdma_accept sends one REP, and every call of the program acts at
// the wall clock's instant.

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"net/netip"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/rocesim/rocesim/internal/tooltest"
	"github.com/rocesim/rocesim/procfabric"
	"github.com/rocesim/rocesim/rdmacm"
	"github.com/rocesim/rocesim/sim"
	"github.com/rocesim/rocesim/verbs"
	"github.com/rocesim/rocesim/wire"
	"github.com/rocesim/rocesim/wire/capture"
)

var (
	rdmacmOnce sync.Once
	rdmacmErr  error
)

// rdmacmLibrary builds the drop-in librdmacm.so.1 beside libibverbs.so.1
// (library), with the flags of the Makefile's dropin target, and returns
// their directory.
func rdmacmLibrary(t *testing.T) string {
	t.Helper()
	tooltest.Need(t, []string{"gcc"}, []string{"/usr/include/rdma/rdma_cma.h"}, "run tools/install-deps.sh (librdmacm-dev)")
	dir := library(t)
	rdmacmOnce.Do(func() {
		shim, err := filepath.Abs(filepath.Join("..", "rdmacm", "shim"))
		if err != nil {
			rdmacmErr = err
			return
		}
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
		defer cancel()
		out, err := exec.CommandContext(ctx, "gcc", "-std=gnu11", "-Wall", "-Werror", "-O2", "-fPIC", "-shared", "-fvisibility=hidden",
			"-o", filepath.Join(dir, "librdmacm.so.1"),
			"-Wl,-soname,librdmacm.so.1,--version-script,"+filepath.Join(shim, "librdmacm.map")+",-z,defs",
			filepath.Join(shim, "rdmacm.c"), "-L"+dir, "-l:libibverbs.so.1", "-lpthread").CombinedOutput()
		if err != nil {
			rdmacmErr = fmt.Errorf("gcc librdmacm.so.1: %v\n%s", err, out)
		}
	})
	if rdmacmErr != nil {
		t.Fatal(rdmacmErr)
	}
	return dir
}

// cmCounter is a node port that counts the CM messages it receives, by
// attribute.
type cmCounter struct {
	nodePort
	mu  sync.Mutex
	got map[wire.CMAttr]int
}

// countCM puts a cmCounter on p's port (before the program's first CM
// call).
func countCM(p *process) *cmCounter {
	c := &cmCounter{nodePort: p.fab.port, got: map[wire.CMAttr]int{}}
	p.fab.port = c
	return c
}

func (c *cmCounter) Wait(deadline sim.Time) (*procfabric.Inputs, error) {
	in, err := c.nodePort.Wait(deadline)
	if in != nil {
		for _, e := range in.Events {
			var pk wire.Packet
			if e.Frame != nil && pk.Decode(e.Frame) == nil && pk.BTH.DestQP() == wire.GSIQPN {
				c.mu.Lock()
				c.got[wire.CMAttr(wire.MAD(pk.Payload).Header().AttributeID)]++
				c.mu.Unlock()
			}
		}
	}
	return in, err
}

// count returns how many messages of attribute a came.
func (c *cmCounter) count(a wire.CMAttr) int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.got[a]
}

// udpProcess is the model of a program on the UDP transport at addr,
// made in this test's process, with its idle loop running as lock()
// starts it. At limit of wall time it shuts down: a call blocked in it
// returns (ECANCELED), and the test says so.
func udpProcess(t *testing.T, addr string, limit time.Duration) *process {
	t.Helper()
	p, err := newProcess(Config{Devices: 1, Seed: 1, UDP: true, Addr: netip.MustParseAddr(addr), IdleWake: DefaultFabricIdleWake},
		&fakeFDs{ready: map[int]bool{}}, io.Discard, func(code int) { t.Errorf("%s: exit %d", addr, code) })
	if err != nil {
		t.Fatal(err)
	}
	stop := func() {
		p.mu.Lock()
		p.shutdown()
		p.wake.Broadcast()
		p.mu.Unlock()
	}
	bound := time.AfterFunc(limit, func() { t.Errorf("%s: still running after %v: shut down", addr, limit); stop() })
	t.Cleanup(func() { bound.Stop(); stop() })
	return p
}

// call runs f as a call of the program: under the process lock, taken
// as the exports take it (enter).
func (p *process) call(f func()) {
	p.enter()
	defer p.mu.Unlock()
	f()
}

// cmEnd is an rdma_cm program in this test's process, on a udpProcess.
type cmEnd struct {
	t  *testing.T
	p  *process
	fd int
	id uint32
}

func newCMEnd(t *testing.T, p *process) *cmEnd {
	t.Helper()
	e := &cmEnd{t: t, p: p}
	var errno syscall.Errno
	p.call(func() { e.fd, errno = p.cmCreateChannel() })
	if errno == 0 {
		p.call(func() { e.id, errno = p.cmCreateID(e.fd, int(rdmacm.PSTCP)) })
	}
	if errno != 0 {
		t.Fatal(errno)
	}
	return e
}

// do runs an rdma_cm call and fails the test if it fails.
func (e *cmEnd) do(what string, f func() syscall.Errno) {
	e.t.Helper()
	var errno syscall.Errno
	e.p.call(func() { errno = f() })
	if errno != 0 {
		e.t.Fatalf("%s: %v", what, errno)
	}
}

// next takes the channel's next event (rdma_get_cm_event) and checks it.
func (e *cmEnd) next(want rdmacm.EventType) *rdmacm.Event {
	e.t.Helper()
	var ev *rdmacm.Event
	var errno syscall.Errno
	e.p.call(func() { ev, errno = e.p.cmGetEvent(e.fd, false, false) })
	if errno != 0 || ev.Event != want {
		e.t.Fatalf("rdma_get_cm_event: %v, %v; want %v", ev, errno, want)
	}
	return ev
}

// createQP gives the ID of handle id an RC QP, as rdma_create_qp.
func (e *cmEnd) createQP(id uint32) {
	e.t.Helper()
	p := e.p
	e.do("rdma_create_qp", func() syscall.Errno {
		ctx, _, errno := p.open(0)
		if errno != 0 {
			return errno
		}
		pd, errno := p.allocPD(ctx)
		if errno != 0 {
			return errno
		}
		cq, _, errno := p.createCQ(ctx, 4, -1, 0, nil)
		if errno != 0 {
			return errno
		}
		qp, _, _, errno := p.createQP(pd, qpInit{sendCQ: cq, recvCQ: cq, typ: verbs.QPTypeRC,
			cap: verbs.QPCap{MaxSendWR: 1, MaxRecvWR: 1, MaxSendSGE: 1, MaxRecvSGE: 1}}, nil)
		if errno != 0 {
			return errno
		}
		return p.cmSetQP(id, qp)
	})
}

// connect resolves dst and sends the REQ with an RC QP attached, as
// rdma_connect after rdma_create_qp.
func (e *cmEnd) connect(dst string, port uint16) {
	e.t.Helper()
	p := e.p
	a := netip.MustParseAddr(dst).As4()
	e.do("rdma_resolve_addr", func() syscall.Errno { return p.cmResolveAddr(e.id, nil, a[:], port, 2000) })
	e.next(rdmacm.EventAddrResolved)
	e.do("rdma_resolve_route", func() syscall.Errno { return p.cmResolveRoute(e.id, 2000) })
	e.next(rdmacm.EventRouteResolved)
	e.createQP(e.id)
	e.do("rdma_connect", func() syscall.Errno {
		return p.cmConnect(e.id, rdmacm.ConnParam{ResponderResources: 1, InitiatorDepth: 1, RetryCount: 7, RNRRetryCount: 7})
	})
}

// TestLateAcceptUDP: testdata/lateaccept.c, an unmodified rdma_cm server
// on the drop-in libraries over UDP at 127.0.0.41, creates its QP for a
// connect request and sleeps 5 s outside the library before
// rdma_accept; the client, a model of a program over UDP at 127.0.0.42
// in this process, counts the REPs it receives. One, as a real kernel
// sends one REP at rdma_accept (cm_send_rep; a REQ that comes again
// before the accept gets an MRA, TestLateAcceptMRA).
//
// The drop-in sent two here (three when the program slept 15 s, as
// rocesim-cmagent's later mode does): the server's idle loop waited on
// the socket for it, its world at the REQ's instant, and the accept,
// made while that thread waited, built the REP and armed its 4096 ms
// resend timer there; the waiter then ran the world to the wall clock
// and the timer ran out on the way. The server is bounded by runLimit
// and addressLimitKB and killed by its PID past them.
func TestLateAcceptUDP(t *testing.T) {
	dir := rdmacmLibrary(t)
	bin := compile(t, "lateaccept", "-lrdmacm")
	const port, delay = 7471, 5
	ctx, cancel := context.WithTimeout(context.Background(), runLimit)
	defer cancel()
	srv := command(ctx, dir, []string{"ROCESIM_TRANSPORT=udp", "ROCESIM_ADDR=127.0.0.41"}, bin,
		"127.0.0.41", strconv.Itoa(port), strconv.Itoa(delay))
	stdout, err := srv.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	var stderr strings.Builder
	srv.Stderr = &stderr
	if err := srv.Start(); err != nil {
		t.Fatal(err)
	}
	var out strings.Builder
	listening := make(chan struct{})
	read := make(chan struct{})
	go func() {
		defer close(read)
		s := bufio.NewScanner(stdout)
		for s.Scan() {
			out.WriteString(s.Text() + "\n")
			if s.Text() == "listening" {
				close(listening)
			}
		}
	}()
	finish := func() string {
		<-read
		srv.Wait()
		return "server stdout:\n" + out.String() + "server stderr:\n" + stderr.String()
	}
	defer func() {
		if ctx.Err() != nil {
			t.Errorf("server still running after %v: killed", runLimit)
		}
	}()
	select {
	case <-listening:
	case <-read:
		t.Fatalf("the server ended before listening\n%s", finish())
	}

	cp := udpProcess(t, "127.0.0.42", runLimit)
	rec := countCM(cp)
	go cp.idleLoop(cp.cfg.IdleWake, time.Sleep)
	cli := newCMEnd(t, cp)
	cli.connect("127.0.0.41", port)
	cli.next(rdmacm.EventEstablished)
	cli.do("rdma_disconnect", func() syscall.Errno { return cp.cmDisconnect(cli.id) })
	cli.next(rdmacm.EventDisconnected)
	log := finish()
	if srv.ProcessState.ExitCode() != 0 || !strings.Contains(log, "done") {
		t.Errorf("server exit %d\n%s", srv.ProcessState.ExitCode(), log)
	}
	if n := rec.count(wire.CMAttrREP); n != 1 {
		t.Errorf("the client received %d REPs, want 1\n%s", n, log)
	}
}

// TestCatchUpUDP: over UDP a call of the program finds the world at the
// wall clock's instant (catchUp), so that what it sends leaves, and the
// timers it arms run, from the real instant: when another thread waits
// on the socket for the process (the idle loop while the program sleeps
// outside the library), and when the program took a CONNECT_REQUEST and
// has not answered yet (the fabric's clock hold, cmHold, has nothing to
// hold over UDP). Both used to leave the call at the instant of the
// last frame taken.
func TestCatchUpUDP(t *testing.T) {
	for _, c := range []struct {
		name, addr string
		// setup brings p to the state under test, its idle loop
		// started.
		setup func(t *testing.T, p *process)
	}{
		{"another-thread-waits", "127.0.0.43", func(t *testing.T, p *process) {
			go p.idleLoop(p.cfg.IdleWake, time.Sleep)
			untilFabricWaiting(p)
		}},
		{"connect-request-taken", "127.0.0.44", func(t *testing.T, p *process) {
			go p.idleLoop(p.cfg.IdleWake, time.Sleep)
			srv := newCMEnd(t, p)
			srv.do("rdma_bind_addr", func() syscall.Errno {
				a := netip.MustParseAddr("127.0.0.44").As4()
				return p.cmBind(srv.id, a[:], 7472)
			})
			srv.do("rdma_listen", func() syscall.Errno { return p.cmListen(srv.id, 1) })
			cp := udpProcess(t, "127.0.0.45", runLimit)
			go cp.idleLoop(cp.cfg.IdleWake, time.Sleep)
			newCMEnd(t, cp).connect("127.0.0.44", 7472)
			srv.next(rdmacm.EventConnectRequest)
		}},
	} {
		t.Run(c.name, func(t *testing.T) {
			p := udpProcess(t, c.addr, runLimit)
			c.setup(t, p)
			// The program computes a while outside the library.
			time.Sleep(20 * time.Millisecond)
			before, _ := p.fab.udp.Quiet()
			var now sim.Time
			p.call(func() { now = p.w.Now() })
			if now < before {
				t.Errorf("a call made at %v of wall time found the world %v behind, at %v", before, before-now, now)
			}
		})
	}
}

// TestGetEventAcrossChannelDestroy: testdata/chanclose.c, a thread
// blocked in rdma_get_cm_event while the main thread destroys its
// channel, stays blocked until the process exits, as librdmacm's read(2)
// of the fd does. The drop-in waits in slices of cmWaitSlice (so that the
// thread can be cancelled between them); a slice that began after the
// destroy found no channel and returned EINVAL, and rping's CM thread
// exited its server with status 255 after a clean run (seen in
// conformance's TestInteropRping). Over UDP and on a fabric.
func TestGetEventAcrossChannelDestroy(t *testing.T) {
	dir := rdmacmLibrary(t)
	bin := compile(t, "chanclose", "-lrdmacm", "-lpthread")
	for _, env := range [][]string{{"ROCESIM_TRANSPORT=udp", "ROCESIM_ADDR=127.0.0.43"}, nil} {
		ctx, cancel := context.WithTimeout(context.Background(), runLimit)
		cmd := command(ctx, dir, env, bin)
		out, err := cmd.CombinedOutput()
		late := ctx.Err() != nil
		cancel()
		if late {
			t.Fatalf("%v: still running after %v: killed\n%s", env, runLimit, out)
		}
		if err != nil || !strings.Contains(string(out), "chanclose ok") {
			t.Errorf("%v: %v\n%s", env, err, out)
		}
	}
}

// TestOwnQP: testdata/ownqp.c connects through librdmacm with QPs it
// makes and moves itself, as UCX does: rdma_init_qp_attr before each
// ibv_modify_qp, rdma_connect and rdma_accept naming the QPs by qp_num,
// RDMA_CM_EVENT_CONNECT_RESPONSE answered by rdma_establish, ESTABLISHED
// on the passive side; then a SEND and an RDMA READ cross. Misuse is
// said (rdma_connect without a parameter, RTR before the REP: EINVAL).
// The CM messages are those of any connection: REQ, REP, RTU, each once.
func TestOwnQP(t *testing.T) {
	dir := rdmacmLibrary(t)
	bin := compile(t, "ownqp", "-lrdmacm")
	pcap := filepath.Join(t.TempDir(), "ownqp.pcapng")
	ctx, cancel := context.WithTimeout(context.Background(), runLimit)
	defer cancel()
	out, err := command(ctx, dir, []string{"ROCESIM_PCAP=" + pcap}, bin).CombinedOutput()
	if ctx.Err() != nil {
		t.Fatalf("still running after %v: killed\n%s", runLimit, out)
	}
	if err != nil || !strings.Contains(string(out), "ownqp ok") {
		t.Fatalf("%v\n%s", err, out)
	}
	rd, err := capture.Open(pcap)
	if err != nil {
		t.Fatal(err)
	}
	defer rd.Close()
	var cm []string
	var p wire.Packet
	for rec, err := range rd.Records() {
		if err != nil {
			t.Fatal(err)
		}
		if rec.Interface != 0 || p.Decode(rec.Data) != nil || p.BTH.DestQP() != wire.GSIQPN {
			continue // each frame once: as it left the device
		}
		cm = append(cm, wire.CMAttr(wire.MAD(p.Payload).Header().AttributeID).String())
	}
	if got := strings.Join(cm, " "); got != "REQ REP RTU DREQ DREP" {
		t.Errorf("CM messages %q, want REQ REP RTU DREQ DREP", got)
	}
}

// TestExitTellsThePeerUDP: a program that exits with a connection still
// up tells its peer, as the kernel does when it closes the process's
// rdma_cm file (ucma_close destroys each ID, cm_destroy_id sends the
// DREQ): the server, a model of a program over UDP at 127.0.0.47 in
// this process, gets DISCONNECTED at once, not silence until its QP
// times out. The client at 127.0.0.48 never calls rdma_disconnect.
func TestExitTellsThePeerUDP(t *testing.T) {
	sp := udpProcess(t, "127.0.0.47", runLimit)
	go sp.idleLoop(sp.cfg.IdleWake, time.Sleep)
	srv := newCMEnd(t, sp)
	const port = 7473
	srv.do("rdma_bind_addr", func() syscall.Errno {
		a := netip.MustParseAddr("127.0.0.47").As4()
		return sp.cmBind(srv.id, a[:], port)
	})
	srv.do("rdma_listen", func() syscall.Errno { return sp.cmListen(srv.id, 1) })

	cp := udpProcess(t, "127.0.0.48", runLimit)
	go cp.idleLoop(cp.cfg.IdleWake, time.Sleep)
	cli := newCMEnd(t, cp)
	cli.connect("127.0.0.47", port)
	req := srv.next(rdmacm.EventConnectRequest).ID.Context.(*cmID).h
	srv.createQP(req)
	srv.do("rdma_accept", func() syscall.Errno {
		return sp.cmAccept(req, rdmacm.ConnParam{ResponderResources: 1, InitiatorDepth: 1})
	})
	cli.next(rdmacm.EventEstablished)
	srv.next(rdmacm.EventEstablished)

	// The client's program returns from main: the library's destructor.
	cp.mu.Lock()
	cp.shutdown()
	cp.mu.Unlock()
	// Waited for in slices, for 5 s at most: without the DREQ nothing
	// would ever come.
	for start := time.Now(); ; {
		var ev *rdmacm.Event
		var errno syscall.Errno
		sp.call(func() { ev, errno = sp.cmGetEvent(srv.fd, false, true) })
		if errno == 0 {
			if ev.Event != rdmacm.EventDisconnected {
				t.Fatalf("the server got %v, want DISCONNECTED", ev.Event)
			}
			return
		}
		if errno != syscall.ETIMEDOUT || time.Since(start) > 5*time.Second {
			t.Fatalf("no DISCONNECTED %v after the client exited (%v)", time.Since(start).Round(time.Millisecond), errno)
		}
	}
}
