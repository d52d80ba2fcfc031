package procfabric

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/rocesim/rocesim/faults"
	"github.com/rocesim/rocesim/nic"
	"github.com/rocesim/rocesim/sim"
	"github.com/rocesim/rocesim/sim/fabric"
	"github.com/rocesim/rocesim/wire"
	"github.com/rocesim/rocesim/wire/capture"
)

// The tests re-execute the test binary as client processes: with
// PROCFABRIC_TEST_ROLE set, TestMain runs the client program it names
// instead of the tests (see clientMain).

func TestMain(m *testing.M) {
	if role := os.Getenv("PROCFABRIC_TEST_ROLE"); role != "" {
		// A client must never outlive its test, whatever happens.
		time.AfterFunc(2*time.Minute, func() { os.Exit(9) })
		os.Exit(clientMain(role))
	}
	os.Exit(m.Run())
}

// drive is the driver loop of a NIC on a fabric port: the inputs of each
// batch in, the program's step, the device's Ready batch out. step runs
// at each wake-up (and once before the first wait) and says whether the
// program is done; the frames it caused are sent before drive returns.
// The port's tx-dones come back as inputs of a later batch, never while
// the batch is applied, so one Ready per turn is all there is.
func drive(p *Port, dev *nic.Device, step func(now sim.Time) bool) error {
	now := p.Now()
	for {
		done := step(now)
		rd := dev.Ready()
		for _, f := range rd.Frames {
			if err := p.Send(f.Bytes, f.Note); err != nil {
				return err
			}
		}
		if done {
			return nil
		}
		in, err := p.Wait(rd.Deadline)
		if err != nil {
			return err
		}
		for _, e := range in.Events {
			if e.Frame != nil {
				dev.Receive(e.At, e.Frame)
			} else {
				dev.TxDone(e.At)
			}
		}
		now = in.Now
		dev.Advance(now)
	}
}

// Offsets in each client's one MR.
const (
	mrLen     = 1 << 16
	offRecv   = 0
	offSend   = 4096
	offWSrc   = 8192
	offWDst   = 16384
	writeLen  = 3000 // three packets at path MTU 1024
	sendLen   = 64
	peerRetry = 3
)

// pattern is what node name's process writes and sends: the receiver
// checks it came whole.
func pattern(name string, n int) []byte {
	b := make([]byte, n)
	for i := range b {
		b[i] = name[0] + byte(i*7)
	}
	return b
}

// clientMain is a client process: it attaches to node $NODE of fabric
// $FABRIC in $DIR, builds an RC QP toward the other node and runs the
// program role names. Both clients build the same resources in the same
// order, so each knows the other's QPN, MR address and R_Key without an
// exchange (a real program would trade them over TCP). It prints one
// line of results and returns its exit status.
func clientMain(role string) int {
	if role == "daemon" { // for TestStart
		d, err := Listen(Config{Name: os.Getenv("FABRIC"), Dir: os.Getenv("DIR"), Nodes: []string{"a", "b"}, ExitWhenIdle: true, IdleLimit: time.Second, Log: os.Stdout})
		if err != nil {
			fmt.Println(err)
			return 2
		}
		d.Serve()
		return 0
	}
	node := os.Getenv("NODE")
	p, err := AttachDir(os.Getenv("DIR"), os.Getenv("FABRIC"), node)
	if err != nil {
		fmt.Println("attach:", err)
		return 2
	}
	defer p.Close()
	self := p.Self()
	var peer NodeInfo
	for _, n := range p.Nodes() {
		if n.Name != self.Name {
			peer = n
		}
	}
	dev := nic.New(nic.Config{Name: "rxe0", Node: self.Name, MAC: self.MAC, IPv4: self.IPv4, IPv6: self.IPv6,
		PathMTUMax: nic.MTU1024, Annotate: true})
	dev.AddNeighbour(peer.IPv4, peer.MAC)
	dev.AddNeighbour(peer.IPv6, peer.MAC)
	must := func(err error) {
		if err != nil {
			fmt.Println("setup:", err)
			os.Exit(2)
		}
	}
	pd, err := dev.AllocPD()
	must(err)
	cq, err := dev.CreateCQ(64, nil, 0)
	must(err)
	buf := make([]byte, mrLen)
	copy(buf[offSend:], pattern(self.Name, sendLen))
	copy(buf[offWSrc:], pattern(self.Name, writeLen))
	mr, err := dev.RegMR(pd, buf, nic.AccessLocalWrite|nic.AccessRemoteWrite|nic.AccessRemoteRead)
	must(err)
	qp, err := dev.CreateQP(pd, nic.QPInitAttr{SendCQ: cq, RecvCQ: cq, Type: nic.QPTypeRC,
		Cap: nic.QPCap{MaxSendWR: 16, MaxRecvWR: 16, MaxSendSGE: 1, MaxRecvSGE: 1}})
	must(err)
	now := p.Now()
	retry := uint8(7)
	if role == "victim-peer" {
		retry = peerRetry
	}
	must(dev.ModifyQP(now, qp, &nic.QPAttr{QPState: nic.QPStateInit, PortNum: 1, QPAccessFlags: nic.AccessRemoteWrite | nic.AccessRemoteRead},
		nic.QPAttrState|nic.QPAttrPKeyIndex|nic.QPAttrPort|nic.QPAttrAccessFlags))
	must(dev.ModifyQP(now, qp, &nic.QPAttr{QPState: nic.QPStateRTR, PathMTU: nic.MTU1024, DestQPNum: qp.Num(),
		AHAttr: nic.AHAttr{IsGlobal: true, PortNum: 1, GRH: nic.GRH{DGID: peer.IPv4, HopLimit: 1}}, MaxDestRdAtomic: 1, MinRNRTimer: 1},
		nic.QPAttrState|nic.QPAttrAV|nic.QPAttrPathMTU|nic.QPAttrDestQPN|nic.QPAttrRQPSN|nic.QPAttrMaxDestRdAtomic|nic.QPAttrMinRNRTimer))
	must(dev.ModifyQP(now, qp, &nic.QPAttr{QPState: nic.QPStateRTS, Timeout: 14, RetryCnt: retry, RNRRetry: 7, MaxRdAtomic: 1},
		nic.QPAttrState|nic.QPAttrSQPSN|nic.QPAttrTimeout|nic.QPAttrRetryCnt|nic.QPAttrRNRRetry|nic.QPAttrMaxQPRdAtomic))
	post := func(now sim.Time, wr nic.SendWR) {
		wr.Flags = nic.SendSignaled
		if _, err := dev.PostSend(now, qp, []nic.SendWR{wr}); err != nil {
			fmt.Println("post:", err)
			os.Exit(2)
		}
	}
	_, err = dev.PostRecv(now, qp, []nic.RecvWR{{WRID: 1, SGList: []nic.SGE{{Addr: mr.Addr + offRecv, Length: sendLen, LKey: mr.LKey}}}})
	must(err)
	post(now, nic.SendWR{WRID: 2, Opcode: nic.WRSend, SGList: []nic.SGE{{Addr: mr.Addr + offSend, Length: sendLen, LKey: mr.LKey}}})

	if role == "hog" {
		// Never waits: holds virtual time until the fabric sends it away.
		for {
			if _, err := p.Wait(sim.Never); err != nil {
				fmt.Println("hog:", err)
				return 0
			}
		}
	}

	var log []string
	stage := 0
	wcs := make([]nic.WC, 8)
	step := func(now sim.Time) bool {
		for n := cq.Poll(wcs); n > 0; n = cq.Poll(wcs) {
			for _, wc := range wcs[:n] {
				log = append(log, fmt.Sprintf("wr%d:%s@%v", wc.WRID, wc.Status, now))
				if wc.Status != nic.WCSuccess {
					stage = -100
				}
				if wc.WRID == 1 && !bytes.Equal(buf[offRecv:offRecv+sendLen], pattern(peer.Name, sendLen)) {
					log = append(log, "recv-data-bad")
				}
				stage++
			}
		}
		switch {
		case stage < 0:
			return true
		case stage == 2 && role == "victim-peer":
			// The peer is killed now: this SEND goes unanswered and
			// the QP retries peerRetry times before it gives up.
			post(now, nic.SendWR{WRID: 4, Opcode: nic.WRSend, SGList: []nic.SGE{{Addr: mr.Addr + offSend, Length: sendLen, LKey: mr.LKey}}})
			stage = 10
		case stage == 2 && role == "victim":
			fmt.Println("victim: ready") // the test kills it now; it holds time until then
			time.Sleep(time.Hour)
		case stage == 2 && self.Name == "a":
			post(now, nic.SendWR{WRID: 3, Opcode: nic.WRRDMAWrite, SGList: []nic.SGE{{Addr: mr.Addr + offWSrc, Length: writeLen, LKey: mr.LKey}},
				RemoteAddr: mr.Addr + offWDst, RKey: mr.RKey})
			stage = 3
		case stage == 2 && self.Name == "b" && bytes.Equal(buf[offWDst:offWDst+writeLen], pattern(peer.Name, writeLen)):
			log = append(log, fmt.Sprintf("write-landed@%v", now))
			return true
		case stage == 4 || stage == 11: // a's WRITE, or the victim's peer's SEND, completed
			return true
		}
		return false
	}
	err = drive(p, dev, step)
	retries, _ := dev.Counters().Get("completer_retry_err")
	exceeded, _ := dev.Counters().Get("retry_exceeded_err")
	fmt.Printf("%s: %s retries=%d exceeded=%d\n", self.Name, strings.Join(log, " "), retries, exceeded)
	if err != nil {
		fmt.Println("drive:", err)
		return 1
	}
	return 0
}

// bound gives a test a wall-time bound: at its end the returned context
// is cancelled, which kills the test's processes and closes its daemons.
func bound(t *testing.T, d time.Duration) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), d)
	t.Cleanup(cancel)
	return ctx
}

// testDaemon starts a daemon in this process, closed at the end of the
// test or when ctx ends; done closes when Serve has returned.
func testDaemon(t *testing.T, ctx context.Context, cfg Config) (d *Daemon, done chan struct{}) {
	t.Helper()
	if cfg.Dir == "" {
		cfg.Dir = shortDir(t)
	}
	if cfg.Name == "" {
		cfg.Name = "t"
	}
	if cfg.Nodes == nil && cfg.Count == 0 {
		cfg.Nodes = []string{"a", "b"}
	}
	d, err := Listen(cfg)
	if err != nil {
		t.Fatal(err)
	}
	done = make(chan struct{})
	go func() { d.Serve(); close(done) }()
	stop := context.AfterFunc(ctx, func() { d.Close() })
	t.Cleanup(func() {
		stop()
		d.Close()
		<-done
	})
	return d, done
}

// shortDir is a private socket directory with a short path: a Unix
// socket's path has at most 107 bytes, and t.TempDir's can be long.
func shortDir(t *testing.T) string {
	dir, err := os.MkdirTemp("", "pf")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	return dir + "/rocesim"
}

// client starts the test binary as a client process on node of the
// daemon d; it is killed by its PID when ctx ends or the test does.
func client(t *testing.T, ctx context.Context, d *Daemon, role, node string) *proc {
	t.Helper()
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(), "PROCFABRIC_TEST_ROLE="+role, "NODE="+node, "DIR="+d.cfg.Dir, "FABRIC="+d.cfg.Name)
	out := &syncBuffer{}
	cmd.Stdout, cmd.Stderr = out, out
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	pid := cmd.Process.Pid
	kill := func() { _ = cmd.Process.Kill() }
	stop := context.AfterFunc(ctx, kill)
	waited := make(chan struct{})
	go func() { cmd.Wait(); close(waited) }()
	t.Cleanup(func() {
		stop()
		kill()
		<-waited
		t.Logf("client %s (pid %d, %s): %s", node, pid, role, out.String())
	})
	return &proc{cmd: cmd, out: out, exited: waited}
}

// proc is a client process a test started.
type proc struct {
	cmd    *exec.Cmd
	out    *syncBuffer
	exited chan struct{}
}

// syncBuffer is a bytes.Buffer a child's output goroutine and the test
// may use at once.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// waitExit waits for p to exit, at most until ctx ends.
func waitExit(t *testing.T, ctx context.Context, p *proc) {
	t.Helper()
	select {
	case <-p.exited:
	case <-ctx.Done():
		t.Fatalf("pid %d did not exit within the test's bound: %s", p.cmd.Process.Pid, p.out)
	}
}

// exchange runs the two-process exchange once and returns the capture
// and both clients' result lines.
func exchange(t *testing.T, ctx context.Context) (pcap []byte, a, b string, st Stats) {
	plan, err := faults.Parse("drop src=a op=RC_RDMA_WRITE_MIDDLE tx=1")
	if err != nil {
		t.Fatal(err)
	}
	var buf bytes.Buffer
	w, err := capture.NewWriter(&buf, capture.FormatPcapng, capture.PcapngOptions{Comment: "procfabric exchange"})
	if err != nil {
		t.Fatal(err)
	}
	d, done := testDaemon(t, ctx, Config{Plan: plan, Tap: w, ExitWhenIdle: true})
	ca := client(t, ctx, d, "exchange", "a")
	cb := client(t, ctx, d, "exchange", "b")
	select {
	case <-done:
	case <-ctx.Done():
		t.Fatalf("the fabric did not go idle within the test's bound; a: %s b: %s", ca.out, cb.out)
	}
	waitExit(t, ctx, ca)
	waitExit(t, ctx, cb)
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	return buf.Bytes(), ca.out.String(), cb.out.String(), d.Stats()
}

// TestTwoProcessesExchange: two processes, each a nic.Device on the
// fabric, do a SEND each way, then a WRITE of three packets whose middle
// one the plan drops; the receiver gets the data whole after the
// retransmission, and a second run gives the same capture bytes.
func TestTwoProcessesExchange(t *testing.T) {
	ctx := bound(t, 60*time.Second)
	pcap1, a, b, st := exchange(t, ctx)
	for _, want := range []string{"wr1:success", "wr2:success", "wr3:success", "retries=1 exceeded=0"} {
		if !strings.Contains(a, want) {
			t.Errorf("a: %q lacks %q", a, want)
		}
	}
	if !strings.Contains(b, "write-landed@") || strings.Contains(a+b, "bad") {
		t.Errorf("b: %q: the WRITE did not land whole", b)
	}
	if st.Attaches != 2 || st.Refused != 0 {
		t.Errorf("stats %+v", st)
	}
	if !bytes.Contains(pcap1, []byte("dropped by rule 1")) {
		t.Errorf("the capture has no frame dropped by the plan")
	}
	pcap2, a2, b2, _ := exchange(t, ctx)
	if !bytes.Equal(pcap1, pcap2) {
		t.Errorf("two runs gave different captures (%d and %d bytes)", len(pcap1), len(pcap2))
	}
	if a != a2 || b != b2 {
		t.Errorf("two runs differ:\n%s%s\n%s%s", a, b, a2, b2)
	}
}

// TestKilledClient: the peer process is killed; the other's SEND goes
// unanswered, its QP retries and fails with retry exceeded, and the
// daemon goes on serving: the node can be attached again.
func TestKilledClient(t *testing.T) {
	ctx := bound(t, 60*time.Second)
	d, _ := testDaemon(t, ctx, Config{})
	ca := client(t, ctx, d, "victim-peer", "a")
	cb := client(t, ctx, d, "victim", "b")
	for !strings.Contains(cb.out.String(), "victim: ready") {
		select {
		case <-ctx.Done():
			t.Fatalf("the victim never got ready: %s / %s", ca.out, cb.out)
		case <-time.After(5 * time.Millisecond):
		}
	}
	if err := cb.cmd.Process.Kill(); err != nil { // by its PID
		t.Fatal(err)
	}
	waitExit(t, ctx, ca)
	for _, want := range []string{"wr4:transport retry counter exceeded", fmt.Sprintf("retries=%d exceeded=1", peerRetry)} {
		if !strings.Contains(ca.out.String(), want) {
			t.Errorf("a: %q lacks %q", ca.out, want)
		}
	}
	// a's exit reaches the daemon as its socket closing, a moment after
	// the process is gone: wait for that detach (within the test's bound).
	st := d.Stats()
	for st.Detaches < 2 && ctx.Err() == nil {
		time.Sleep(5 * time.Millisecond)
		st = d.Stats()
	}
	if st.Detaches != 2 || st.Undelivered != peerRetry+1 {
		t.Errorf("stats %+v: want 2 detaches and the SEND's %d transmissions undelivered", st, peerRetry+1)
	}
	// Still serving: the dead node can be taken again.
	p, err := AttachDir(d.cfg.Dir, d.cfg.Name, "b")
	if err != nil {
		t.Fatalf("attach after the kill: %v", err)
	}
	p.Close()
}

// TestHoldLimit: a process that never waits holds virtual time until the
// hold limit sends it away with a message; the daemon logs it too.
func TestHoldLimit(t *testing.T) {
	ctx := bound(t, 30*time.Second)
	var log syncBuffer
	d, _ := testDaemon(t, ctx, Config{HoldLimit: 200 * time.Millisecond, Log: &log})
	hog, err := AttachDir(d.cfg.Dir, d.cfg.Name, "a")
	if err != nil {
		t.Fatal(err)
	}
	defer hog.Close()
	other, err := AttachDir(d.cfg.Dir, d.cfg.Name, "b")
	if err != nil {
		t.Fatal(err)
	}
	defer other.Close()
	// b waits; a never does. b is woken only when a has been sent away.
	in, err := other.Wait(sim.Time(sim.Millisecond))
	if err != nil {
		t.Fatal(err)
	}
	if in.Now != sim.Time(sim.Millisecond) {
		t.Errorf("b woke at %v, want 1ms", in.Now)
	}
	_, err = hog.Wait(sim.Never)
	if err == nil || !strings.Contains(err.Error(), "held virtual time at 0s") || !strings.Contains(err.Error(), "hold limit is 200ms") {
		t.Errorf("the hog's Wait: %v", err)
	}
	if !strings.Contains(log.String(), "detached: node a held virtual time") {
		t.Errorf("log: %q", log.String())
	}
	if st := d.Stats(); st.HeldTooLong != 1 {
		t.Errorf("stats %+v", st)
	}
}

// TestTimeOrder: in-process clients on three nodes (a switch) see time
// move only when all wait, and are woken at their own deadlines.
func TestTimeOrder(t *testing.T) {
	ctx := bound(t, 30*time.Second)
	d, _ := testDaemon(t, ctx, Config{Nodes: []string{"a", "b", "c"}})
	var ports []*Port
	for _, n := range []string{"a", "b", "c"} {
		p, err := AttachDir(d.cfg.Dir, d.cfg.Name, n)
		if err != nil {
			t.Fatal(err)
		}
		defer p.Close()
		ports = append(ports, p)
	}
	// Each waits on its own goroutine: c until 3us, b until 2us, a for input.
	type woke struct {
		who int
		now sim.Time
		err error
	}
	ch := make(chan woke, 3)
	wait := func(i int, deadline sim.Time) {
		go func() {
			in, err := ports[i].Wait(deadline)
			w := woke{who: i, err: err}
			if in != nil {
				w.now = in.Now
			}
			ch <- w
		}()
	}
	wait(2, sim.Time(3*sim.Microsecond))
	wait(1, sim.Time(2*sim.Microsecond))
	select {
	case w := <-ch:
		t.Fatalf("node %d woke at %v while a still runs", w.who, w.now)
	case <-time.After(50 * time.Millisecond):
	}
	wait(0, sim.Never)
	w := <-ch
	if w.err != nil || w.who != 1 || w.now != sim.Time(2*sim.Microsecond) {
		t.Fatalf("first wake-up %+v, want b at 2us", w)
	}
	select {
	case w := <-ch:
		t.Fatalf("node %d woke at %v while b runs", w.who, w.now)
	case <-time.After(50 * time.Millisecond):
	}
	wait(1, sim.Never)
	if w := <-ch; w.err != nil || w.who != 2 || w.now != sim.Time(3*sim.Microsecond) {
		t.Fatalf("second wake-up %+v, want c at 3us", w)
	}
}

// TestInterrupt: Interrupt ends a Wait blocked in another goroutine at
// the current instant, and, called while the process runs, makes its next
// Wait return at once.
func TestInterrupt(t *testing.T) {
	ctx := bound(t, 30*time.Second)
	d, _ := testDaemon(t, ctx, Config{})
	a, b := attachAB(t, d)
	go b.Wait(sim.Never)
	// Both wait for input that never comes: nothing would wake a.
	got := make(chan sim.Time, 1)
	go func() {
		in, err := a.Wait(sim.Never)
		if err != nil {
			t.Error(err)
			got <- -1
			return
		}
		got <- in.Now
	}()
	untilWaiting(a)
	if err := a.Interrupt(); err != nil {
		t.Fatal(err)
	}
	select {
	case now := <-got:
		if now != 0 {
			t.Errorf("interrupted at %v, want 0s", now)
		}
	case <-ctx.Done():
		t.Fatal("Interrupt did not end the Wait")
	}
	// While running: the next Wait returns at once.
	a.Interrupt()
	if in, err := a.Wait(sim.Never); err != nil || in.Now != 0 {
		t.Fatalf("Wait after Interrupt: %v %v", in, err)
	}
}

// TestCountNodes: with Config.Count the processes name the nodes; no
// attach is answered before all have come, and the nodes are numbered in
// the names' order whoever came first.
func TestCountNodes(t *testing.T) {
	ctx := bound(t, 30*time.Second)
	for _, order := range [][]string{{"zeta", "alpha"}, {"alpha", "zeta"}} {
		d, _ := testDaemon(t, ctx, Config{Count: 2})
		type res struct {
			p   *Port
			err error
		}
		first := make(chan res, 1)
		go func() { p, err := AttachDir(d.cfg.Dir, d.cfg.Name, order[0]); first <- res{p, err} }()
		select {
		case r := <-first:
			t.Fatalf("attach answered before the second node came: %v %v", r.p, r.err)
		case <-time.After(50 * time.Millisecond):
		}
		second, err := AttachDir(d.cfg.Dir, d.cfg.Name, order[1])
		if err != nil {
			t.Fatal(err)
		}
		r := <-first
		if r.err != nil {
			t.Fatal(r.err)
		}
		for _, p := range []*Port{r.p, second} {
			want := map[string]int{"alpha": 1, "zeta": 2}[p.Self().Name]
			if p.Index() != want || p.Self().IPv4.As4()[3] != byte(want) || len(p.Nodes()) != 2 {
				t.Errorf("order %v: %s is node %d (%v), want %d", order, p.Self().Name, p.Index(), p.Self().IPv4, want)
			}
			// IPv6 is the MAC's link-local address (fe80::ff:fe00:i),
			// rxe's GID 0, so that the drop-in library's -g 0 works.
			if self := p.Self(); self.IPv6 != self.MAC.LinkLocal() || self.IPv6.String() != fmt.Sprintf("fe80::ff:fe00:%d", want) {
				t.Errorf("%s: IPv6 %v, want the link-local address of %v", self.Name, self.IPv6, self.MAC)
			}
			p.Close()
		}
	}
}

// TestDeadline: Config.Deadline ends a run whose processes would go on
// forever (a QP retrying under rxe's infinite retry_cnt 7): each is sent
// away with a message saying so.
func TestDeadline(t *testing.T) {
	ctx := bound(t, 30*time.Second)
	d, done := testDaemon(t, ctx, Config{Deadline: sim.Time(sim.Second)})
	var ports []*Port
	for _, n := range []string{"a", "b"} {
		p, err := AttachDir(d.cfg.Dir, d.cfg.Name, n)
		if err != nil {
			t.Fatal(err)
		}
		defer p.Close()
		ports = append(ports, p)
	}
	errs := make(chan error, 1)
	go func() {
		// b wakes every 67ms of virtual time, as a retrying QP would.
		for {
			in, err := ports[1].Wait(ports[1].Now() + sim.Time(67*sim.Millisecond))
			if err != nil {
				errs <- err
				return
			}
			_ = in
		}
	}()
	_, err := ports[0].Wait(sim.Never)
	for _, e := range []error{err, <-errs} {
		if !errors.Is(e, ErrDetached) || !strings.Contains(e.Error(), "ended at its deadline, virtual time 1s") {
			t.Errorf("Wait: %v", e)
		}
	}
	select {
	case <-done:
	case <-ctx.Done():
		t.Fatal("Serve did not return at the deadline")
	}
	if got := d.sched.Now(); got > sim.Time(sim.Second) {
		t.Errorf("the clock went to %v, past the deadline", got)
	}
}

// TestDeadlineStuck: a run with a deadline that is stuck before it
// (every process waits, nothing is left to happen) ends at the deadline
// once the quiet report has said so, rather than waiting for ever.
func TestDeadlineStuck(t *testing.T) {
	ctx := bound(t, 30*time.Second)
	var log syncBuffer
	d, done := testDaemon(t, ctx, Config{Deadline: sim.Time(5 * sim.Second), QuietReport: 100 * time.Millisecond, Log: &log})
	a, b := attachAB(t, d)
	errs := make(chan error, 2)
	for _, p := range []*Port{a, b} {
		go func() {
			_, err := p.Wait(sim.Never)
			errs <- err
		}()
	}
	for range 2 {
		if e := <-errs; !errors.Is(e, ErrDetached) || !strings.Contains(e.Error(), "ended at its deadline, virtual time 5s") {
			t.Errorf("Wait: %v", e)
		}
	}
	select {
	case <-done:
	case <-ctx.Done():
		t.Fatal("Serve did not return")
	}
	if got := d.sched.Now(); got != sim.Time(5*sim.Second) {
		t.Errorf("the clock stands at %v, want the deadline", got)
	}
	if out := log.String(); !strings.Contains(out, "nothing has happened for") || !strings.Contains(out, "bounded by its deadline") {
		t.Errorf("the log does not say why the run ended:\n%s", out)
	}
}

// TestHoldNotWhileNobodyWaits: processes that run while nobody waits on
// them (a server in accept() before its client came, both trading QP
// numbers over TCP) are not detached, however long that takes; the hold
// limit counts from the moment another process waits.
func TestHoldNotWhileNobodyWaits(t *testing.T) {
	ctx := bound(t, 30*time.Second)
	d, _ := testDaemon(t, ctx, Config{HoldLimit: 50 * time.Millisecond})
	a, err := AttachDir(d.cfg.Dir, d.cfg.Name, "a")
	if err != nil {
		t.Fatal(err)
	}
	defer a.Close()
	time.Sleep(300 * time.Millisecond) // a alone: the clock has not started
	b, err := AttachDir(d.cfg.Dir, d.cfg.Name, "b")
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	time.Sleep(300 * time.Millisecond) // both run: nobody waits
	if st := d.Stats(); st.HeldTooLong != 0 {
		t.Fatalf("a process was detached while nobody waited on it: %+v", st)
	}
	// Now b waits on a, which still runs: a is sent away, and b's
	// deadline comes.
	if in, err := b.Wait(sim.Time(sim.Millisecond)); err != nil || in.Now != sim.Time(sim.Millisecond) {
		t.Fatalf("b's Wait: %v %v", in, err)
	}
	if st := d.Stats(); st.HeldTooLong != 1 {
		t.Errorf("stats %+v, want a detached by the hold limit", st)
	}
}

// TestManyNodes: a fabric of 1,000 nodes, more than one byte numbers and
// than one attach reply lists (issue 20): a process attached to the last
// gets every node, each with addresses of its own (node i carries i in
// three bytes, as the simulated world's hosts do).
func TestManyNodes(t *testing.T) {
	ctx := bound(t, 30*time.Second)
	names := make([]string, 1000)
	for i := range names {
		names[i] = fmt.Sprintf("n%d", i+1)
	}
	d, _ := testDaemon(t, ctx, Config{Nodes: names})
	p, err := AttachDir(d.cfg.Dir, d.cfg.Name, "n1000")
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close()
	if p.Index() != 1000 || len(p.Nodes()) != 1000 {
		t.Fatalf("attached as node %d of %d, want 1000 of 1000", p.Index(), len(p.Nodes()))
	}
	if self := p.Self(); self.Name != "n1000" || self.IPv4.String() != "10.0.3.232" || self.MAC.String() != "02:00:00:00:03:e8" {
		t.Errorf("node 1000 is %s %v %v, want n1000 10.0.3.232 02:00:00:00:03:e8", self.Name, self.IPv4, self.MAC)
	}
	macs := map[string]bool{}
	for i, n := range p.Nodes() {
		if n.Name != names[i] || macs[n.MAC.String()] || n.IPv6 != n.MAC.LinkLocal() {
			t.Fatalf("node %d: %+v (a name out of order, a MAC seen before, or IPv6 not the MAC's link-local address)", i+1, n)
		}
		macs[n.MAC.String()] = true
	}
}

// TestSendWhileWaiting: frames a goroutine sends while another waits in
// the port (a program thread posting while the progress thread sleeps)
// stay in the process until it runs and waits again, however many there
// are: more than the 64 KiB the port otherwise writes out in one go must
// not reach the daemon while it holds the process waiting, which it
// answers by detaching the process (a 200-packet WRITE posted that way
// did so).
func TestSendWhileWaiting(t *testing.T) {
	ctx := bound(t, 30*time.Second)
	d, _ := testDaemon(t, ctx, Config{})
	a, b := attachAB(t, d)
	const frames = 80 // 80 kB
	got := receiveFrames(t, b, frames)
	woke := make(chan error, 1)
	go func() {
		_, err := a.Wait(sim.Never)
		woke <- err
	}()
	untilWaiting(a)
	frame := frameTo(a, b)
	for range frames {
		if err := a.Send(frame, []byte("sent while the port waits")); err != nil {
			t.Fatalf("Send while waiting: %v", err)
		}
	}
	if err := a.Interrupt(); err != nil {
		t.Fatal(err)
	}
	select {
	case err := <-woke:
		if err != nil {
			t.Fatalf("the waiting process was sent away: %v", err)
		}
	case <-ctx.Done():
		t.Fatal("Interrupt did not end the Wait")
	}
	// The frames go with the next wait; a keeps waiting, as a process's
	// progress thread does (its port reports each frame gone).
	go func() {
		for {
			if _, err := a.Wait(sim.Never); err != nil {
				return
			}
		}
	}()
	select {
	case n := <-got:
		if n != frames {
			t.Errorf("b received %d frames, want %d", n, frames)
		}
	case <-ctx.Done():
		t.Fatal("b did not receive the frames")
	}
	if st := d.Stats(); st.Refused != 0 || st.HeldTooLong != 0 {
		t.Errorf("the daemon sent %d processes away (%d held too long)", st.Refused+st.HeldTooLong, st.HeldTooLong)
	}
}

// attachAB attaches nodes a and b of d's fabric, closed when the test ends.
func attachAB(t *testing.T, d *Daemon) (a, b *Port) {
	t.Helper()
	var ports [2]*Port
	for i, name := range []string{"a", "b"} {
		p, err := AttachDir(d.cfg.Dir, d.cfg.Name, name)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { p.Close() })
		ports[i] = p
	}
	return ports[0], ports[1]
}

// waitOn keeps p's process waiting for input, as one that only answers
// does, until its port fails or closes.
func waitOn(p *Port) {
	for {
		if _, err := p.Wait(sim.Never); err != nil {
			return
		}
	}
}

// interruptAndSend ends the Wait from blocks in (ended says when it has
// returned), sends a frame to to's node, and keeps from waiting, through
// its frame's tx-done, until its port closes.
func interruptAndSend(t *testing.T, from, to *Port, ended <-chan error) {
	t.Helper()
	if err := from.Interrupt(); err != nil {
		t.Fatal(err)
	}
	if err := <-ended; err != nil {
		t.Fatal(err)
	}
	if err := from.Send(frameTo(from, to), nil); err != nil {
		t.Fatal(err)
	}
	go waitOn(from)
}

// plainWaiting runs p.Wait until sim.Never in a goroutine and returns,
// once it blocks, the channel its error comes on when it ends.
func plainWaiting(p *Port) <-chan error {
	ended := make(chan error, 1)
	go func() { _, err := p.Wait(sim.Never); ended <- err }()
	untilWaiting(p)
	return ended
}

// waitingIn runs wait (p.Wait or p.PollWait) until sim.Never in a
// goroutine and returns, once it blocks, the channel it sends its
// result on.
func waitingIn(t *testing.T, p *Port, wait func(sim.Time) (*Inputs, error)) <-chan *Inputs {
	got := make(chan *Inputs, 1)
	go func() {
		in, err := wait(sim.Never)
		if err != nil {
			t.Error(err)
		}
		got <- in
	}()
	untilWaiting(p)
	return got
}

// untilWaiting returns once p's owner blocks in Wait.
func untilWaiting(p *Port) {
	for {
		p.mu.Lock()
		w := p.waiting
		p.mu.Unlock()
		if w {
			return
		}
		time.Sleep(time.Millisecond)
	}
}

// receiveFrames has b wait for input until n frames have arrived, then
// sends how many did (fewer if b failed) on the channel it returns.
func receiveFrames(t *testing.T, b *Port, n int) <-chan int {
	got := make(chan int, 1)
	go func() {
		k := 0
		for k < n {
			in, err := b.Wait(sim.Never)
			if err != nil {
				t.Error("b:", err)
				break
			}
			for _, e := range in.Events {
				if e.Frame != nil {
					k++
				}
			}
		}
		got <- k
	}()
	return got
}

// roceFrame is a RoCE v2 frame over IPv4 from from's node to to's, with
// BTH bth and n bytes of payload, and a valid ICRC.
func roceFrame(t *testing.T, from, to *Port, bth wire.BTHFields, n int) []byte {
	t.Helper()
	f := wire.Frame{DstMAC: to.Self().MAC, SrcMAC: from.Self().MAC, Src: from.Self().IPv4, Dst: to.Self().IPv4, TTL: 64,
		BTH: bth, Payload: make([]byte, n)}
	buf := make([]byte, 2048)
	k, err := wire.Encode(buf, &f)
	if err != nil {
		t.Fatal(err)
	}
	return buf[:k]
}

// frameTo is a 1000-byte frame from a's node to b's.
func frameTo(a, b *Port) []byte {
	frame := make([]byte, 1000)
	dst, src := b.Self().MAC, a.Self().MAC
	copy(frame, dst[:])
	copy(frame[6:], src[:])
	return frame
}

// TestPlanNames: with named nodes a fault rule naming a link or node the
// fabric lacks is refused at Listen (it could never match); when the
// processes name the nodes, the daemon logs it once the fabric is built.
func TestPlanNames(t *testing.T) {
	ctx := bound(t, 30*time.Second)
	for _, c := range []struct {
		nodes []string
		plan  string
		err   string
	}{
		{[]string{"a", "b"}, "drop link=a-b src=b", ""},
		{[]string{"a", "b"}, "drop link=a-sw", "procfabric: fault plan: rule 1: link=a-sw: no such link (links: a-b)"},
		{[]string{"a", "b", "c"}, "drop link=a-sw dir=sw->c", ""},
		{[]string{"a", "b", "c"}, "drop psn=1\ndrop dst=d", `procfabric: fault plan: rule 2: dst=: no node "d" (nodes: a, b, c, sw)`},
	} {
		plan, err := faults.Parse(c.plan)
		if err != nil {
			t.Fatal(err)
		}
		d, err := Listen(Config{Name: "names", Dir: shortDir(t), Nodes: c.nodes, Plan: plan})
		got := ""
		if err != nil {
			got = err.Error()
		} else {
			d.Close()
		}
		if got != c.err {
			t.Errorf("nodes %v, plan %q: error %q, want %q", c.nodes, c.plan, got, c.err)
		}
	}
	plan, _ := faults.Parse("drop src=server")
	var log syncBuffer
	d, _ := testDaemon(t, ctx, Config{Count: 2, Plan: plan, Log: &log})
	attached := make(chan error, 1)
	go func() {
		p, err := AttachDir(d.cfg.Dir, d.cfg.Name, "x")
		if err == nil {
			p.Close()
		}
		attached <- err
	}()
	p, err := AttachDir(d.cfg.Dir, d.cfg.Name, "y")
	if err != nil {
		t.Fatal(err)
	}
	p.Close()
	if err := <-attached; err != nil {
		t.Fatal(err)
	}
	if want := `warning: fault plan: rule 1: src=: no node "server" (nodes: x, y): the rule will never match`; !strings.Contains(log.String(), want) {
		t.Errorf("log %q lacks %q", log.String(), want)
	}
}

// TestPollWaitQuiet: when every process waits and nothing is left to
// happen, a process waiting in a poll (PollWait) is woken at that
// instant with no input, once: a poll on a quiet NIC returns 0, and its
// program may be what the others wait for outside the verbs (perftest's
// UD server). A plain Wait stays asleep, and so does a second PollWait
// at the same instant, until something happens: here b's frame, which
// a then gets at the instant it arrives.
func TestPollWaitQuiet(t *testing.T) {
	ctx := bound(t, 30*time.Second)
	d, _ := testDaemon(t, ctx, Config{})
	a, b := attachAB(t, d)
	// b waits in a plain Wait: it is never woken for lack of anything.
	bGot := plainWaiting(b)
	in, err := a.PollWait(sim.Never)
	if err != nil || in.Now != 0 || len(in.Events) != 0 {
		t.Fatalf("PollWait with nothing to happen: %+v %v, want woken at 0s with no input", in, err)
	}
	select {
	case err := <-bGot:
		t.Fatalf("b's Wait ended (%v): only a poll is woken for lack of anything to happen", err)
	default:
	}
	// Polling again at the same instant: asleep until something comes.
	got := waitingIn(t, a, a.PollWait)
	time.Sleep(50 * time.Millisecond)
	select {
	case in := <-got:
		t.Fatalf("a second PollWait at the same instant returned %+v: it must sleep", in)
	case err := <-bGot:
		t.Fatalf("b's Wait ended (%v): only a poll is woken for lack of anything to happen", err)
	default:
	}
	interruptAndSend(t, b, a, bGot)
	select {
	case in := <-got:
		if in == nil || len(in.Events) == 0 || in.Events[0].Frame == nil || in.Now == 0 {
			t.Fatalf("a woke with %+v, want b's frame after 0s", in)
		}
	case <-ctx.Done():
		t.Fatal("a never got b's frame")
	}
}

// TestPollWaitQuietReattach: a program that attaches to a node whose
// last program was woken for lack of anything to happen, at that same
// instant, gets its own quiet wake: the mark is the program's, not the
// node's.
func TestPollWaitQuietReattach(t *testing.T) {
	ctx := bound(t, 30*time.Second)
	d, _ := testDaemon(t, ctx, Config{})
	a, b := attachAB(t, d)
	go waitOn(b)
	untilWaiting(b)
	if in, err := a.PollWait(sim.Never); err != nil || in.Now != 0 {
		t.Fatalf("first program's PollWait: %+v %v", in, err)
	}
	a.Close()
	// The detach goes on the socket; the node is free once the daemon
	// has taken it.
	for d.Stats().Detaches == 0 && ctx.Err() == nil {
		time.Sleep(time.Millisecond)
	}
	again, err := AttachDir(d.cfg.Dir, d.cfg.Name, "a")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { again.Close() })
	got := make(chan error, 1)
	go func() { _, err := again.PollWait(sim.Never); got <- err }()
	select {
	case err := <-got:
		if err != nil {
			t.Fatal(err)
		}
	case <-ctx.Done():
		t.Fatal("the second program's PollWait was never woken")
	}
}

// TestTxSlack: a wait's tx slack (SetTxSlack) is how many of the port's
// tx-dones the daemon holds rather than wake the process for: it wakes
// it at the next one, or at its deadline, with those held before it, in
// order and at their instants; a slack of 0 wakes it at the first, as a
// wait always did.
func TestTxSlack(t *testing.T) {
	ctx := bound(t, 30*time.Second)
	d, _ := testDaemon(t, ctx, Config{})
	a, b := attachAB(t, d)
	go waitOn(b)
	frame := frameTo(a, b)
	ser := fabric.DefaultLinkConfig().SerializationDelay(len(frame))
	send := func(n int) sim.Time {
		for range n {
			if err := a.Send(frame, nil); err != nil {
				t.Fatal(err)
			}
		}
		return a.Now()
	}
	txDones := func(in *Inputs) (at []sim.Time) {
		for _, e := range in.Events {
			if e.Frame != nil {
				t.Fatalf("a got a frame: %+v", e)
			}
			at = append(at, e.At)
		}
		return at
	}

	t0 := send(3)
	a.SetTxSlack(2)
	in, err := a.Wait(sim.Never)
	if err != nil {
		t.Fatal(err)
	}
	// A frame leaves the port as its serialization starts: the first at
	// once, the next when the first is on the wire.
	want := []sim.Time{t0, t0.Add(ser), t0.Add(2 * ser)}
	if at := txDones(in); !slices.Equal(at, want) || in.Now != want[2] {
		t.Fatalf("slack 2: woken at %v with tx-dones at %v, want at %v with %v", in.Now, at, want[2], want)
	}
	idle := func() { // until the port has finished the last frame
		if _, err := a.Wait(a.Now().Add(10 * sim.Microsecond)); err != nil {
			t.Fatal(err)
		}
	}
	idle()

	t0 = send(3)
	in, err = a.Wait(sim.Never) // no SetTxSlack: 0
	if err != nil {
		t.Fatal(err)
	}
	if at := txDones(in); !slices.Equal(at, []sim.Time{t0}) || in.Now != t0 {
		t.Fatalf("slack 0: woken at %v with tx-dones at %v, want at %v with one then", in.Now, at, t0)
	}
	// The other two, one wake each.
	for range 2 {
		if _, err := a.Wait(sim.Never); err != nil {
			t.Fatal(err)
		}
	}
	idle()

	t0 = send(1)
	a.SetTxSlack(5)
	deadline := t0.Add(100 * sim.Microsecond)
	in, err = a.Wait(deadline)
	if err != nil {
		t.Fatal(err)
	}
	if at := txDones(in); !slices.Equal(at, []sim.Time{t0}) || in.Now != deadline {
		t.Fatalf("slack past the tx-dones: woken at %v with tx-dones at %v, want at the deadline %v with one at %v", in.Now, at, deadline, t0)
	}
}

// TestRxSlack: a wait's rx slack (SetRxSlack) lists frames the daemon
// holds rather than wake the process for: the next PSNs of a QP, of one
// opcode and payload length, without AckReq, up to a count. The first
// frame that is not one of them wakes the process, with those before it
// in order; and one that breaks the pattern in any way wakes it at once.
func TestRxSlack(t *testing.T) {
	ctx := bound(t, 30*time.Second)
	d, _ := testDaemon(t, ctx, Config{})
	a, b := attachAB(t, d)
	mk := func(qpn uint32, op wire.Opcode, psn wire.PSN, ackReq bool, n int) []byte {
		return roceFrame(t, b, a, wire.BTHFields{Opcode: op, DestQP: qpn, PSN: psn, AckReq: ackReq, PKey: wire.DefaultPKey}, n)
	}
	const qpn, mtu = 0x11, 1024
	mid := func(psn wire.PSN) []byte { return mk(qpn, wire.OpRCWriteMiddle, psn, false, mtu) }
	badICRC := func(f []byte) []byte { // a corrupt rule's work: the NIC drops it
		f = slices.Clone(f)
		f[len(f)-1] ^= 1
		return f
	}
	otherPKey := func(psn wire.PSN) []byte { // partition 0x1234: the NIC drops it
		return roceFrame(t, b, a, wire.BTHFields{Opcode: wire.OpRCWriteMiddle, DestQP: qpn, PSN: psn, PKey: 0x9234}, mtu)
	}
	slack := []wire.PacketRun{{QPN: qpn, PSN: 100, Opcode: wire.OpRCWriteMiddle, Len: mtu, Count: 3}}
	cases := []struct {
		name   string
		slack  []wire.PacketRun
		frames [][]byte
		want   int // frames a is woken with: the last wakes it
	}{
		{"the middles held, the last wakes", slack, [][]byte{mid(100), mid(101), mk(qpn, wire.OpRCWriteLast, 102, true, 10)}, 3},
		{"past the count", slack, [][]byte{mid(100), mid(101), mid(102), mid(103)}, 4},
		{"AckReq", slack, [][]byte{mk(qpn, wire.OpRCWriteMiddle, 100, true, mtu)}, 1},
		{"a gap", slack, [][]byte{mid(101)}, 1},
		{"another QP", slack, [][]byte{mk(qpn+1, wire.OpRCWriteMiddle, 100, false, mtu)}, 1},
		{"another opcode", slack, [][]byte{mk(qpn, wire.OpRCSendMiddle, 100, false, mtu)}, 1},
		{"short", slack, [][]byte{mk(qpn, wire.OpRCWriteMiddle, 100, false, mtu-4)}, 1},
		// Frames the NIC would drop leave its expected PSN behind: the
		// next packet, held, would be answered with a NAK.
		{"a bad ICRC", slack, [][]byte{badICRC(mid(100))}, 1},
		{"another partition", slack, [][]byte{otherPKey(100)}, 1},
		{"no slack", nil, [][]byte{mid(100)}, 1},
		// Last, as b then waits for ever: with nothing left to happen,
		// held frames are not held for ever.
		{"nothing after", slack, [][]byte{mid(100), mid(101)}, 2},
	}
	var bWoke chan struct{}
	for _, c := range cases {
		type woke struct {
			in  *Inputs
			err error
		}
		aWoke := make(chan woke, 1)
		go func() {
			a.SetRxSlack(c.slack)
			in, err := a.Wait(sim.Never)
			aWoke <- woke{in, err}
		}()
		if bWoke != nil {
			<-bWoke // b runs again once a waits
		}
		for _, f := range c.frames {
			if err := b.Send(f, nil); err != nil {
				t.Fatal(err)
			}
		}
		b.SetTxSlack(len(c.frames))
		bWoke = make(chan struct{})
		deadline := b.Now().Add(50 * sim.Microsecond)
		if c.name == "nothing after" {
			deadline = sim.Never
		}
		go func(ch chan struct{}) {
			b.Wait(deadline)
			close(ch)
		}(bWoke)
		w := <-aWoke
		if w.err != nil {
			t.Fatalf("%s: %v", c.name, w.err)
		}
		if n := len(w.in.Events); n != c.want || w.in.Now != w.in.Events[n-1].At {
			t.Fatalf("%s: woken at %v with %d frames (%+v), want %d and woken at the last", c.name, w.in.Now, n, w.in.Events, c.want)
		}
	}
}

// TestRxSlackBounded: the frames a daemon holds as a process's rx slack
// are bounded in bytes (maxSlackBytes), however many the slack allows:
// the process is woken at the frame past the bound, with those before.
func TestRxSlackBounded(t *testing.T) {
	ctx := bound(t, 30*time.Second)
	d, _ := testDaemon(t, ctx, Config{})
	a, b := attachAB(t, d)
	bth := wire.BTHFields{Opcode: wire.OpRCWriteMiddle, DestQP: 0x11, PKey: wire.DefaultPKey}
	const sent = 400
	type woke struct {
		in  *Inputs
		err error
	}
	aWoke := make(chan woke, 1)
	go func() {
		a.SetRxSlack([]wire.PacketRun{{QPN: 0x11, PSN: 0, Opcode: wire.OpRCWriteMiddle, Len: 1024, Count: 1 << 20}})
		in, err := a.Wait(sim.Never)
		aWoke <- woke{in, err}
	}()
	for i := range sent {
		bth.PSN = wire.PSN(i)
		if err := b.Send(roceFrame(t, b, a, bth, 1024), nil); err != nil {
			t.Fatal(err)
		}
	}
	b.SetTxSlack(sent)
	go waitOn(b)
	w := <-aWoke
	if w.err != nil {
		t.Fatal(w.err)
	}
	want := maxSlackBytes/len(appendDeliver(nil, 0, roceFrame(t, b, a, bth, 1024))) + 1
	if got := len(w.in.Events); got != want || want >= sent || w.in.Now != w.in.Events[got-1].At {
		t.Fatalf("woken at %v with %d frames, want %d (of %d sent), woken at the last", w.in.Now, got, want, sent)
	}
}
