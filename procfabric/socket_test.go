package procfabric

import (
	"bytes"
	"encoding/binary"
	"errors"
	"io"
	"net"
	"net/netip"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/rocesim/rocesim/sim"
	"github.com/rocesim/rocesim/wire"
)

// hostile sends raw bytes to the daemon as a fresh connection and
// returns what it answered before it closed the connection.
func hostile(t *testing.T, d *Daemon, msgs ...[]byte) string {
	t.Helper()
	c, err := net.Dial("unix", d.Path())
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	for _, m := range msgs {
		if _, err := c.Write(m); err != nil {
			break // the daemon may close before it has read everything
		}
	}
	if uc, ok := c.(*net.UnixConn); ok && len(msgs) > 0 {
		uc.CloseWrite() // a message cut short ends here
	}
	c.SetReadDeadline(time.Now().Add(10 * time.Second))
	got, err := io.ReadAll(c)
	if err != nil && !errors.Is(err, net.ErrClosed) && !strings.Contains(err.Error(), "reset") {
		t.Fatalf("reading the daemon's answer: %v", err)
	}
	return string(got)
}

func msg(version byte, typ msgType, body []byte) []byte {
	b := binary.BigEndian.AppendUint32(nil, uint32(2+len(body)))
	return append(append(b, version, byte(typ)), body...)
}

// TestHostileMessages: every malformed or out-of-place message is
// refused and counted, its connection closed, and the daemon serves the
// next process.
func TestHostileMessages(t *testing.T) {
	ctx := bound(t, 30*time.Second)
	var log syncBuffer
	d, _ := testDaemon(t, ctx, Config{Log: &log, maxHeld: 1000})
	frame := make([]byte, 60)
	flood := [][]byte{appendAttach(nil, "a")}
	for range 20 {
		flood = append(flood, appendFrame(nil, nil, frame))
	}
	// A will of 20 frames under 20 keys: past 1000 bytes. The same key
	// set again and again replaces its frame and stays within.
	var bigWill, sameKey []WillEntry
	for k := range 20 {
		bigWill = append(bigWill, WillEntry{Key: uint32(k), Frame: frame})
		sameKey = append(sameKey, WillEntry{Key: 7, Frame: frame})
	}
	cases := []struct {
		name string
		msgs [][]byte
		why  string
	}{
		{"length too large", [][]byte{{0xff, 0xff, 0xff, 0xff, 1, 1}}, "length 4294967295"},
		{"length too small", [][]byte{{0, 0, 0, 1, 1}}, "length 1"},
		{"bad version", [][]byte{msg(9, msgAttach, []byte("a"))}, "version 9"},
		{"unknown type", [][]byte{msg(Version, 77, nil)}, "unknown message type 77"},
		{"garbage", [][]byte{[]byte("GET / HTTP/1.1\r\nHost: x\r\n\r\n")}, "length"},
		{"cut short", [][]byte{{0, 0, 0, 40, 1, 3, 0}}, "stream ends inside"},
		{"frame before attach", [][]byte{appendFrame(nil, nil, frame)}, "not running"},
		{"daemon's message", [][]byte{appendTime(nil, msgNow, 5)}, "only the daemon sends"},
		{"no such node", [][]byte{appendAttach(nil, "zz")}, `no node "zz"`},
		{"bad node name", [][]byte{appendAttach(nil, "../x")}, "bad node name"},
		{"second attach", [][]byte{appendAttach(nil, "a"), appendAttach(nil, "b")}, "a second attach"},
		{"short wait", [][]byte{appendAttach(nil, "a"), msg(Version, msgWait, []byte{1, 2})}, "2 bytes, want 12 and at most 16 entries of 15"},
		{"negative wait", [][]byte{appendAttach(nil, "a"), appendWait(nil, msgWait, -5, 0, nil)}, "negative time"},
		{"wait with a PSN past 24 bits", [][]byte{appendAttach(nil, "a"), appendWait(nil, msgWait, 0, 0, []wire.PacketRun{{PSN: 1 << 24}})}, "PSN 0x1000000"},
		{"wait with too much rx slack", [][]byte{appendAttach(nil, "a"), appendWait(nil, msgWait, 0, 0, make([]wire.PacketRun, MaxRxSlack+1))}, "at most 16 entries"},
		{"wait with a torn rx slack", [][]byte{appendAttach(nil, "a"), msg(Version, msgWait, make([]byte, 12+rxSlackLen-1))}, "26 bytes"},
		{"runt frame", [][]byte{appendAttach(nil, "a"), appendFrame(nil, nil, frame[:3])}, "frame: 3 bytes"},
		{"note too long", [][]byte{appendAttach(nil, "a"), msg(Version, msgFrame, []byte{0xff, 0xff, 1})}, "note of 65535 bytes"},
		{"frames without waiting", flood, "more than 1000 bytes of frames"},
		{"frame while waiting", [][]byte{appendAttach(nil, "a"), appendWait(nil, msgWait, 0, 0, nil), appendFrame(nil, nil, frame)}, "not running"},
		{"poll before attach", [][]byte{appendEmpty(nil, msgPoll)}, "a poll unattached or with a body"},
		{"poll with a body", [][]byte{appendAttach(nil, "a"), msg(Version, msgPoll, []byte{1})}, "a poll unattached or with a body"},
		{"will before attach", [][]byte{appendWill(nil, []WillEntry{{Key: 1, Frame: frame}})}, "a will from a process not attached"},
		{"short will", [][]byte{appendAttach(nil, "a"), msg(Version, msgWill, []byte{1, 2})}, "will: 2 bytes"},
		{"runt will frame", [][]byte{appendAttach(nil, "a"), appendWill(nil, []WillEntry{{Key: 1, Frame: frame[:3]}})}, "frame: 3 bytes"},
		{"will too large", [][]byte{appendAttach(nil, "a"), appendWill(appendWill(nil, sameKey), bigWill)}, "a will of more than 1000 bytes"},
	}
	for i, c := range cases {
		hostile(t, d, c.msgs...)
		if got := d.Stats().Refused; got != uint64(i+1) {
			t.Errorf("%s: %d refused, want %d", c.name, got, i+1)
		}
		lines := strings.Split(strings.TrimSpace(log.String()), "\n")
		if last := lines[len(lines)-1]; !strings.Contains(last, c.why) {
			t.Errorf("%s: logged %q, want it to say %q", c.name, last, c.why)
		}
	}
	// Still serving.
	p, err := AttachDir(d.cfg.Dir, d.cfg.Name, "a")
	if err != nil {
		t.Fatalf("attach after the hostile messages: %v", err)
	}
	p.Close()
}

// TestSilentConnection: a connection that never attaches is refused
// after WriteTimeout, not kept for ever.
func TestSilentConnection(t *testing.T) {
	ctx := bound(t, 30*time.Second)
	var log syncBuffer
	d, _ := testDaemon(t, ctx, Config{WriteTimeout: 100 * time.Millisecond, Log: &log})
	hostile(t, d) // sends nothing; returns when the daemon closes it
	if st := d.Stats(); st.Refused != 1 || !strings.Contains(log.String(), "no attach within 100ms of connecting") {
		t.Errorf("stats %+v, log %q", st, log.String())
	}
}

// TestOtherUserRefused: a peer whose SO_PEERCRED UID is not the daemon's
// is refused before it can say anything.
func TestOtherUserRefused(t *testing.T) {
	ctx := bound(t, 30*time.Second)
	d, _ := testDaemon(t, ctx, Config{uid: os.Getuid() + 1})
	_, err := AttachDir(d.cfg.Dir, d.cfg.Name, "a")
	if err == nil {
		t.Fatal("a process of another uid attached")
	}
	if st := d.Stats(); st.RefusedUID != 1 || st.Attaches != 0 {
		t.Errorf("stats %+v, want one refusal by uid", st)
	}
}

// TestSocketDirPrivate: the socket directory is created 0700, and one
// that others may open, or that is not a directory, is refused.
func TestSocketDirPrivate(t *testing.T) {
	dir := shortDir(t)
	d, err := Listen(Config{Name: "x", Dir: dir, Nodes: []string{"a", "b"}})
	if err != nil {
		t.Fatal(err)
	}
	st, err := os.Stat(dir)
	if err != nil {
		t.Fatal(err)
	}
	if st.Mode().Perm() != 0o700 {
		t.Errorf("socket directory mode %v, want 0700", st.Mode().Perm())
	}
	d.Close()
	d.Serve() // returns at once: closed
	if err := os.Chmod(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	if _, err := Listen(Config{Name: "x", Dir: dir, Nodes: []string{"a", "b"}}); !errors.Is(err, ErrDirUnsafe) {
		t.Errorf("a 0755 directory: %v, want ErrDirUnsafe", err)
	}
	file := filepath.Join(filepath.Dir(dir), "file")
	os.WriteFile(file, nil, 0o600)
	if _, err := Listen(Config{Name: "x", Dir: file, Nodes: []string{"a", "b"}}); err == nil {
		t.Errorf("a file as the socket directory was taken")
	}
}

// TestStaleSocketReplaced: a socket file left by a daemon that died is
// replaced; a live daemon's is not.
func TestStaleSocketReplaced(t *testing.T) {
	ctx := bound(t, 30*time.Second)
	dir := shortDir(t)
	if err := privateDir(dir); err != nil {
		t.Fatal(err)
	}
	// A dead daemon's leftovers: a socket nobody accepts on (the
	// listener closed without removing it) and its lock file.
	ln, err := net.ListenUnix("unix", &net.UnixAddr{Name: SocketPath(dir, "s"), Net: "unix"})
	if err != nil {
		t.Fatal(err)
	}
	ln.SetUnlinkOnClose(false)
	ln.Close()
	os.WriteFile(filepath.Join(dir, "s.lock"), nil, 0o600)
	if _, err := AttachDir(dir, "s", "a"); !errors.Is(err, ErrNoFabric) {
		t.Fatalf("attach to the stale socket: %v, want ErrNoFabric", err)
	}
	d, _ := testDaemon(t, ctx, Config{Dir: dir, Name: "s"})
	p, err := AttachDir(dir, "s", "a")
	if err != nil {
		t.Fatalf("attach after the stale socket was replaced: %v", err)
	}
	p.Close()
	if _, err := Listen(Config{Name: "s", Dir: dir, Nodes: []string{"a", "b"}}); !errors.Is(err, ErrRunning) {
		t.Errorf("a second daemon of the same name: %v, want ErrRunning", err)
	}
	if _, err := os.Stat(d.Path()); err != nil {
		t.Errorf("the second daemon touched the first's socket: %v", err)
	}
}

// TestTwoFabrics: two fabrics of different names run side by side in
// one directory, each with its own clock.
func TestTwoFabrics(t *testing.T) {
	ctx := bound(t, 30*time.Second)
	dir := shortDir(t)
	d1, _ := testDaemon(t, ctx, Config{Dir: dir, Name: "one"})
	d2, _ := testDaemon(t, ctx, Config{Dir: dir, Name: "two"})
	for i, d := range []*Daemon{d1, d2} {
		a, err := AttachDir(dir, d.cfg.Name, "a")
		if err != nil {
			t.Fatal(err)
		}
		b, err := AttachDir(dir, d.cfg.Name, "b")
		if err != nil {
			t.Fatal(err)
		}
		deadline := sim.Time(i+1) * sim.Time(sim.Millisecond)
		go b.Wait(sim.Never)
		in, err := a.Wait(deadline)
		if err != nil || in.Now != deadline {
			t.Errorf("fabric %s: woke at %v (%v), want %v", d.cfg.Name, in, err, deadline)
		}
		a.Close()
		b.Close()
	}
}

// TestStart: Start runs a daemon when none answers and returns once it
// does; the started command here is the test binary as a daemon.
func TestStart(t *testing.T) {
	dir := shortDir(t)
	argv := []string{os.Args[0], "-test.run=^$"}
	t.Setenv("PROCFABRIC_TEST_ROLE", "daemon")
	t.Setenv("DIR", dir)
	t.Setenv("FABRIC", "st")
	// Two clients race to start it: one daemon wins the lock, the
	// other exits (or gives up when nobody comes), and both clients
	// attach to the winner.
	type res struct {
		p   *Port
		err error
	}
	got := make(chan res, 2)
	for _, node := range []string{"a", "b"} {
		go func() { p, err := AttachOrStart(dir, "st", node, argv, 20*time.Second); got <- res{p, err} }()
	}
	var ports []*Port
	for range 2 {
		r := <-got
		if r.err != nil {
			t.Fatal(r.err)
		}
		ports = append(ports, r.p)
	}
	// It exits when idle: both nodes came; now both leave.
	for _, p := range ports {
		p.Close()
	}
	// Its lock is released when it exits; a new daemon can then start.
	end := time.Now().Add(20 * time.Second)
	for {
		d, err := Listen(Config{Name: "st", Dir: dir, Nodes: []string{"a", "b"}})
		if err == nil {
			d.Close()
			d.Serve()
			break
		}
		if !errors.Is(err, ErrRunning) || time.Now().After(end) {
			logText, _ := os.ReadFile(filepath.Join(dir, "st.log"))
			t.Fatalf("the started daemon did not exit when idle: %v; its log: %s", err, logText)
		}
		time.Sleep(10 * time.Millisecond)
	}
	logText, _ := os.ReadFile(filepath.Join(dir, "st.log"))
	if !bytes.Contains(logText, []byte("serving")) {
		t.Errorf("the daemon's log: %q", logText)
	}
}

// FuzzReader: any byte stream gives messages or an error, never a panic,
// and the parsers refuse what they cannot read.
func FuzzReader(f *testing.F) {
	f.Add(appendAttach(nil, "a"))
	v4, v6 := netip.MustParseAddr("10.0.0.1"), netip.MustParseAddr("fd00::1")
	f.Add(appendAttached(nil, 1, 5, []NodeInfo{{Name: "a", IPv4: v4, IPv6: v6}, {Name: "b", IPv4: v4, IPv6: v6}}))
	f.Add(appendFrame(nil, []byte("note"), make([]byte, 60)))
	f.Add(appendDeliver(nil, 3, make([]byte, 60)))
	f.Add([]byte{0, 0, 0, 2, 1, 4})
	f.Fuzz(func(t *testing.T, b []byte) {
		r := reader{r: bytes.NewReader(b)}
		for {
			typ, body, err := r.next()
			if err != nil {
				return
			}
			parseFrame(body)
			parseTime(typ, body)
			parseAttached(body)
			parseNodes(body)
		}
	})
}

// TestIdleLimit: a daemon with ExitWhenIdle that nobody attaches to
// exits after IdleLimit, saying so.
func TestIdleLimit(t *testing.T) {
	ctx := bound(t, 30*time.Second)
	var log syncBuffer
	_, done := testDaemon(t, ctx, Config{ExitWhenIdle: true, IdleLimit: 100 * time.Millisecond, Log: &log})
	select {
	case <-done:
	case <-ctx.Done():
		t.Fatal("the daemon nobody came to did not exit")
	}
	if !strings.Contains(log.String(), "exiting: no process attached for 100ms") {
		t.Errorf("log %q", log.String())
	}
}
