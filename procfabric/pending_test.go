package procfabric

import (
	"context"
	"net"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/rocesim/rocesim/faults"
	"github.com/rocesim/rocesim/sim"
)

// TestSendWhileWaitingAtTheCap: frames a goroutine sends while the owner
// waits in the port (with no input coming: it waits for input only) are
// held only up to the port's cap; the Send that finds the cap reached
// wakes the wait itself (no Interrupt is called here) and blocks until it
// has ended, and the frames go with the owner's next wait. The buffer
// never holds more than the cap and one frame, or than the 64 KiB the
// port writes out at while running; every frame arrives and nobody is
// sent away. The cap is lowered to 16 KiB so that 200 frames wake the
// wait many times.
func TestSendWhileWaitingAtTheCap(t *testing.T) {
	ctx := bound(t, 60*time.Second)
	d, _ := testDaemon(t, ctx, Config{})
	a, b := attachAB(t, d)
	a.maxPending = 16 << 10
	const frames = 200 // 200 kB
	got := receiveFrames(t, b, frames)
	// a's progress loop: it waits for input only, as a progress thread
	// with nothing posted does, until the port closes.
	wakes := make(chan int, 1)
	go func() {
		n := 0
		for {
			if _, err := a.Wait(sim.Never); err != nil {
				wakes <- n
				return
			}
			n++
		}
	}()
	untilWaiting(a)
	frame := frameTo(a, b)
	peak := 0
	for range frames {
		if err := a.Send(frame, []byte("sent while the port waits")); err != nil {
			t.Fatalf("Send while waiting: %v", err)
		}
		a.mu.Lock()
		peak = max(peak, len(a.out))
		a.mu.Unlock()
	}
	if limit := max(a.maxPending, writeAt) + len(frame) + 64; peak > limit {
		t.Errorf("the port held %d bytes, more than %d", peak, limit)
	}
	// The frames held last go with a's next wait, which the cap's last
	// wake-up brought about, or with an Interrupt for the rest.
	if err := a.Interrupt(); err != nil {
		t.Fatal(err)
	}
	select {
	case n := <-got:
		if n != frames {
			t.Errorf("b received %d frames, want %d", n, frames)
		}
	case <-ctx.Done():
		t.Fatal("b did not receive the frames")
	}
	a.Close()
	if n := <-wakes; n < frames*len(frame)/a.maxPending/2 {
		t.Errorf("a's wait woke %d times: the cap did not wake it for every %d bytes held", n, a.maxPending)
	}
	if st := d.Stats(); st.Refused != 0 || st.HeldTooLong != 0 {
		t.Errorf("the daemon sent %d processes away (%d held too long)", st.Refused+st.HeldTooLong, st.HeldTooLong)
	}
}

// TestDeliverRunt: a frame a truncate rule cuts below its Ethernet header
// on a direct link reaches the node as it is, for its NIC to count as
// truncated (as in a simulated world); the port took such a delivery for
// a protocol error and failed (the C ABI agent died of it).
func TestDeliverRunt(t *testing.T) {
	ctx := bound(t, 30*time.Second)
	plan, err := faults.Parse("truncate len=5\n")
	if err != nil {
		t.Fatal(err)
	}
	d, _ := testDaemon(t, ctx, Config{Plan: plan})
	a, b := attachAB(t, d)
	type result struct {
		in  []Input
		err error
	}
	got := make(chan result, 1)
	go func() {
		in, err := b.Wait(sim.Never)
		if err != nil {
			got <- result{err: err}
			return
		}
		got <- result{in: append([]Input(nil), in.Events...)}
	}()
	go waitOn(a)
	untilWaiting(b)
	if err := a.Send(frameTo(a, b), nil); err != nil {
		t.Fatal(err)
	}
	if err := a.Interrupt(); err != nil {
		t.Fatal(err)
	}
	select {
	case r := <-got:
		if r.err != nil {
			t.Fatalf("b: %v", r.err)
		}
		if len(r.in) != 1 || len(r.in[0].Frame) != 5 {
			t.Fatalf("b got %+v, want one 5-byte frame", r.in)
		}
	case <-ctx.Done():
		t.Fatal("b got nothing")
	}
}

// TestCloseSendsWhatTheWaitHeld: frames sent while another goroutine
// waits in the port stay in the process (the daemon takes frames only
// from a process that runs); Close resumes that wait and sends them
// before it detaches, as a program's last frames at exit (its CM's
// DREQs, while its progress thread waits) must reach the peers.
func TestCloseSendsWhatTheWaitHeld(t *testing.T) {
	ctx := bound(t, 60*time.Second)
	d, _ := testDaemon(t, ctx, Config{})
	a, b := attachAB(t, d)
	const frames = 3
	got := receiveFrames(t, b, frames)
	ended := make(chan error, 1)
	go func() {
		for {
			if _, err := a.Wait(sim.Never); err != nil {
				ended <- err
				return
			}
		}
	}()
	untilWaiting(a)
	for range frames {
		if err := a.Send(frameTo(a, b), []byte("last words")); err != nil {
			t.Fatal(err)
		}
	}
	if err := a.Close(); err != nil {
		t.Fatal(err)
	}
	select {
	case n := <-got:
		if n != frames {
			t.Errorf("b received %d frames, want %d", n, frames)
		}
	case <-ctx.Done():
		t.Fatal("b did not receive the frames sent before Close")
	}
	select {
	case <-ended: // the closed connection ends a's wait
	case <-ctx.Done():
		t.Fatal("a's wait did not end after Close")
	}
}

// TestCloseBoundedWhenTheDaemonIsSilent: a daemon that took the attach
// and then stopped answering (stuck, not dead: its socket stays open)
// does not hold Close for ever while another goroutine's Wait holds
// frames: Close waits closeWait for the resume's answer, gives the
// frames up and closes, which ends that Wait too.
func TestCloseBoundedWhenTheDaemonIsSilent(t *testing.T) {
	ctx := bound(t, 30*time.Second)
	dir := shortDir(t)
	if err := os.Mkdir(dir, 0o700); err != nil {
		t.Fatal(err)
	}
	ln, err := net.ListenUnix("unix", &net.UnixAddr{Name: SocketPath(dir, "mute"), Net: "unix"})
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	go func() { // the attach answered, then silence
		c, err := ln.AcceptUnix()
		if err != nil {
			return
		}
		defer c.Close()
		r := reader{r: c}
		if _, _, err := r.next(); err != nil {
			return
		}
		c.Write(appendAttached(nil, 1, 0, []NodeInfo{nodeAddr("a", 1), nodeAddr("b", 2)}))
		for {
			if _, _, err := r.next(); err != nil {
				return
			}
		}
	}()
	a, err := AttachDir(dir, "mute", "a")
	if err != nil {
		t.Fatal(err)
	}
	a.closeWait = 100 * time.Millisecond
	ended := make(chan error, 1)
	go func() { _, err := a.Wait(sim.Never); ended <- err }()
	untilWaiting(a)
	if err := a.Send(make([]byte, 100), []byte("never taken")); err != nil {
		t.Fatal(err)
	}
	closed := make(chan error, 1)
	start := time.Now()
	go func() { closed <- a.Close() }()
	select {
	case <-closed:
		if d := time.Since(start); d < a.closeWait {
			t.Errorf("Close returned after %v: it gave up before closeWait (%v)", d, a.closeWait)
		}
	case <-ctx.Done():
		t.Fatal("Close waited for ever on a silent daemon")
	}
	select {
	case err := <-ended:
		if err == nil {
			t.Error("the Wait ended without an error: the port closed under it")
		}
	case <-ctx.Done():
		t.Fatal("the Wait did not end after Close")
	}
}

// TestReattachNotToldOfOldFrames: a process that attaches to a node
// whose port still holds frames of the process before it (which sent 40
// and left), or whose frames are still held to enter it, is not told of
// them as they leave: its device would count those tx-dones off frames
// of its own. Woken at its deadline, it has no input; and b gets every
// frame, even when the new process is refused for a message out of
// place before they went (the frames held are the old process's too).
func TestReattachNotToldOfOldFrames(t *testing.T) {
	for _, c := range []struct {
		name          string
		inPort, abuse bool
	}{{"in the port", true, false}, {"held", false, false}, {"held, the new process refused", false, true}} {
		t.Run(c.name, func(t *testing.T) {
			ctx := bound(t, 30*time.Second)
			d, _ := testDaemon(t, ctx, Config{})
			a, b := attachAB(t, d)
			const frames = 40
			for range frames {
				if err := a.Send(frameTo(a, b), nil); err != nil {
					t.Fatal(err)
				}
			}
			if err := a.Close(); err != nil {
				t.Fatal(err)
			}
			for d.Stats().Detaches == 0 && ctx.Err() == nil {
				time.Sleep(time.Millisecond)
			}
			left := frames
			if c.inPort {
				// a's frames enter the port; b is woken at the first
				// one's arrival, one link's delay later, with most of
				// them still in the port.
				in, err := b.Wait(sim.Never)
				if err != nil || len(in.Events) == 0 {
					t.Fatalf("b's first wait: %+v %v", in, err)
				}
				left -= len(in.Events)
			}
			if c.abuse {
				// Another process takes node a, sends a frame and is
				// refused (a second attach), before any round: its
				// frame is not sent, what the first one left held
				// still is.
				hostile(t, d, appendAttach(nil, "a"), appendFrame(nil, nil, frameTo(a, b)), appendAttach(nil, "b"))
			}
			again, err := AttachDir(d.cfg.Dir, d.cfg.Name, "a")
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { again.Close() })
			got := receiveFrames(t, b, left)
			woken := make(chan *Inputs, 1)
			go func() {
				in, err := again.Wait(again.Now().Add(100 * sim.Microsecond))
				if err != nil {
					t.Error(err)
				}
				woken <- in
			}()
			if n := <-got; n != left {
				t.Errorf("b received %d more frames, want %d", n, left)
			}
			go waitOn(b) // the clock moves on to the new process's deadline
			if in := <-woken; in != nil && len(in.Events) != 0 {
				t.Errorf("the new process was woken at %v with %d events (the old frames' tx-dones): %+v", in.Now, len(in.Events), in.Events)
			}
		})
	}
}

// TestQuietReport: when every process has waited Config.QuietReport with
// nothing left to happen, the log says so once, not at every tick, with
// how each node waits; while a process runs (here, one woken at a
// deadline again and again) nothing is quiet.
func TestQuietReport(t *testing.T) {
	ctx := bound(t, 30*time.Second)
	var log syncBuffer
	d, _ := testDaemon(t, ctx, Config{QuietReport: 100 * time.Millisecond, Log: &log})
	a, b := attachAB(t, d)
	const said = "nothing has happened for"
	go func() {
		for {
			if _, err := b.PollWait(sim.Never); err != nil {
				return
			}
		}
	}()
	// a waits a while with a deadline 1 µs ahead each time: virtual time
	// moves, nothing is quiet.
	for end := time.Now().Add(300 * time.Millisecond); time.Now().Before(end); {
		if _, err := a.Wait(a.Now().Add(sim.Microsecond)); err != nil {
			t.Fatal(err)
		}
		time.Sleep(time.Millisecond)
	}
	if strings.Contains(log.String(), said) {
		t.Fatalf("reported while a process ran:\n%s", log.String())
	}
	go waitOn(a)
	for !strings.Contains(log.String(), said) && ctx.Err() == nil {
		time.Sleep(10 * time.Millisecond)
	}
	time.Sleep(300 * time.Millisecond) // a second report would come now
	out := log.String()
	if n := strings.Count(out, said); n != 1 {
		t.Fatalf("%d reports, want 1:\n%s", n, out)
	}
	if !strings.Contains(out, "(node a in a blocking wait, node b waits in a poll)") {
		t.Errorf("the report does not say how each node waits:\n%s", out)
	}
}

// TestPoll: Port.Poll makes the plain Wait another goroutine is in a
// poll's: with nothing left to happen, the daemon wakes it at once, with
// no input, where the plain Wait slept; a Wait again at that instant,
// made a poll's again, sleeps until something happens (b's frame).
func TestPoll(t *testing.T) {
	ctx := bound(t, 30*time.Second)
	d, _ := testDaemon(t, ctx, Config{})
	a, b := attachAB(t, d)
	bGot := plainWaiting(b)
	got := waitingIn(t, a, a.Wait)
	time.Sleep(20 * time.Millisecond)
	select {
	case in := <-got:
		t.Fatalf("a plain Wait woken with nothing to happen: %+v", in)
	default:
	}
	// The wait went on the socket before untilWaiting saw it: the
	// daemon reads the poll after it.
	if err := a.Poll(); err != nil {
		t.Fatal(err)
	}
	if in := <-got; in == nil || len(in.Events) != 0 || in.Now != 0 {
		t.Fatalf("the poll's wake: %+v, want none at 0s", in)
	}
	got = waitingIn(t, a, a.Wait)
	if err := a.Poll(); err != nil {
		t.Fatal(err)
	}
	time.Sleep(50 * time.Millisecond)
	select {
	case in := <-got:
		t.Fatalf("a second poll at the same instant woken with %+v: it must sleep", in)
	default:
	}
	interruptAndSend(t, b, a, bGot)
	if in := <-got; in == nil || len(in.Events) != 1 || in.Events[0].Frame == nil {
		t.Fatalf("a woke with %+v, want b's frame", in)
	}
}

// TestQuietReportNotBetweenTicks: processes that run now and then,
// each time briefly and between two of the daemon's looks (here a
// resume every 5 ms, where the daemon looks every 12.5 ms), are no
// quiet: the report comes only once they stop.
func TestQuietReportNotBetweenTicks(t *testing.T) {
	ctx, log, _, a := bothWaiting(t)
	const said = "nothing has happened for"
	for end := time.Now().Add(400 * time.Millisecond); time.Now().Before(end); {
		if err := a.Interrupt(); err != nil {
			t.Fatal(err)
		}
		time.Sleep(5 * time.Millisecond)
	}
	if strings.Contains(log.String(), said) {
		t.Fatalf("reported while a process ran every 5 ms:\n%s", log.String())
	}
	for !strings.Contains(log.String(), said) && ctx.Err() == nil {
		time.Sleep(10 * time.Millisecond)
	}
	if ctx.Err() != nil {
		t.Fatal("no report once the processes stopped")
	}
}

// TestMissingReport: a process attached to a fabric whose other node has
// no process waits with virtual time at 0; after Config.QuietReport the
// log says once which node the clock waits for, and how to run one
// program on its own; in Count mode, how many nodes are missing.
func TestMissingReport(t *testing.T) {
	for _, count := range []bool{false, true} {
		ctx := bound(t, 30*time.Second)
		var log syncBuffer
		cfg := Config{QuietReport: 100 * time.Millisecond, Log: &log}
		want := "node b has none yet"
		if count {
			cfg.Count, want = 2, "1 of its 2 nodes has none yet"
		}
		d, _ := testDaemon(t, ctx, cfg)
		attached := make(chan *Port, 1)
		go func() {
			// In Count mode the attach is answered once both came.
			p, err := AttachDir(d.cfg.Dir, d.cfg.Name, "a")
			if err != nil {
				t.Error(err)
			}
			attached <- p
		}()
		const said = "virtual time has not started after"
		for !strings.Contains(log.String(), said) && ctx.Err() == nil {
			time.Sleep(10 * time.Millisecond)
		}
		time.Sleep(300 * time.Millisecond) // a second report would come now
		out := log.String()
		if n := strings.Count(out, said); n != 1 {
			t.Fatalf("count %v: %d reports, want 1:\n%s", count, n, out)
		}
		if !strings.Contains(out, want) || !strings.Contains(out, "LD_LIBRARY_PATH") {
			t.Errorf("count %v: the report does not say %q and how to run one program alone:\n%s", count, want, out)
		}
		b, err := AttachDir(d.cfg.Dir, d.cfg.Name, "b")
		if err != nil {
			t.Fatal(err)
		}
		if a := <-attached; a != nil {
			a.Close()
		}
		b.Close()
	}
}

// TestQuietReportTicks: a process woken every 5 ms by its library's
// housekeeping (Port.Tick: the drop-in's rdma_get_cm_event slice) and
// waiting again is no activity, unlike a resume (TestQuietReportNotBetweenTicks):
// the report still comes (a program hung in rdma_get_cm_event had none).
func TestQuietReportTicks(t *testing.T) {
	ctx, log, d, a := bothWaiting(t)
	const said = "nothing has happened for"
	stop := make(chan struct{})
	defer close(stop)
	go func() {
		for {
			select {
			case <-stop:
				return
			case <-time.After(5 * time.Millisecond):
				a.Tick()
			}
		}
	}()
	for !strings.Contains(log.String(), said) && ctx.Err() == nil {
		time.Sleep(10 * time.Millisecond)
	}
	if ctx.Err() != nil {
		t.Fatal("no report while only ticks woke the processes")
	}
	if d.Stats().Wakes < 5 {
		t.Errorf("%d wake-ups: the ticks did not wake the process", d.Stats().Wakes)
	}
}

// bothWaiting starts a daemon with a 100 ms QuietReport logging into
// log, and processes a and b that wait on it for ever.
func bothWaiting(t *testing.T) (ctx context.Context, log *syncBuffer, d *Daemon, a *Port) {
	ctx = bound(t, 30*time.Second)
	log = &syncBuffer{}
	d, _ = testDaemon(t, ctx, Config{QuietReport: 100 * time.Millisecond, Log: log})
	a, b := attachAB(t, d)
	go waitOn(a)
	go waitOn(b)
	untilWaiting(a)
	return ctx, log, d, a
}
