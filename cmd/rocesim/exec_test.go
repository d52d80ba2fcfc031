package main

// Acceptance of `rocesim exec` on Debian's unmodified binaries: a server
// and a client program, each in its own process through `rocesim exec`,
// meet on one fabric. The rocesim executable is built once per test
// binary (CGO_ENABLED=0, as a user's), the drop-in library once into a
// cache directory of the test binary's own (dropinLibrary, as exec
// builds it). Each program runs under a wall-time bound and an
// address-space limit, in a process group of its own that the test
// kills by its PID; the fabric daemon each test starts is found by its
// unique name and killed by its PID at the test's end. Without the
// tools the tests skip; under CI=true they fail.

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"maps"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/rocesim/rocesim/internal/tooltest"
	"github.com/rocesim/rocesim/procfabric"
)

// execLimit bounds one program's wall time; execMemKB its address space
// (the Go runtime in the library and in rocesim reserve some).
const (
	execLimit = 60 * time.Second
	execMemKB = 4 << 20
)

// needTools skips the test, or fails it under CI=true, when one of the
// tools is missing.
func needTools(t *testing.T, tools ...string) {
	t.Helper()
	tooltest.Need(t, append([]string{"go", "gcc"}, tools...), []string{"/usr/include/infiniband/verbs.h"},
		"run tools/install-deps.sh (ibverbs-utils, perftest, libibverbs-dev, gcc)")
}

var (
	execOnce  sync.Once
	execBin   string // the rocesim executable
	execCache string // XDG_CACHE_HOME holding the built library
	execErr   error
)

func TestMain(m *testing.M) {
	code := m.Run()
	if execBin != "" {
		os.RemoveAll(filepath.Dir(execBin))
	}
	os.Exit(code)
}

// execSetup builds rocesim and the drop-in library once.
func execSetup(t *testing.T) {
	t.Helper()
	execOnce.Do(func() {
		dir, err := os.MkdirTemp("", "rocesim-exec-")
		if err != nil {
			execErr = err
			return
		}
		execBin, execCache = filepath.Join(dir, "rocesim"), filepath.Join(dir, "cache")
		cmd := exec.Command("go", "build", "-o", execBin, ".")
		cmd.Env = append(os.Environ(), "CGO_ENABLED=0")
		if out, err := cmd.CombinedOutput(); err != nil {
			execErr = fmt.Errorf("go build rocesim: %v\n%s", err, out)
			return
		}
		old, had := os.LookupEnv("XDG_CACHE_HOME")
		os.Setenv("XDG_CACHE_HOME", execCache)
		_, execErr = dropinLibrary(io.Discard)
		if had {
			os.Setenv("XDG_CACHE_HOME", old)
		} else {
			os.Unsetenv("XDG_CACHE_HOME")
		}
	})
	if execErr != nil {
		t.Fatal(execErr)
	}
}

// fabricEnv is one test's fabric: its name and private socket directory.
type fabricEnv struct {
	name    string
	runtime string // XDG_RUNTIME_DIR
	env     []string
}

// newFabricEnv returns a fabric name no other test uses, in a runtime
// directory of its own, and kills its daemon at the test's end if it
// has not exited.
func newFabricEnv(t *testing.T) fabricEnv {
	t.Helper()
	rt, err := os.MkdirTemp("", "rsx") // short: a socket path has at most 108 bytes
	if err != nil {
		t.Fatal(err)
	}
	os.Chmod(rt, 0o700)
	f := fabricEnv{name: fmt.Sprintf("t%d", time.Now().UnixNano()%1e9), runtime: rt}
	t.Cleanup(func() {
		killDaemon(f)
		os.RemoveAll(rt)
	})
	return f
}

// killDaemon kills, by PID, the fabric daemon of f if it still runs (it
// exits by itself once every node has come and gone).
func killDaemon(f fabricEnv) {
	procs, _ := filepath.Glob("/proc/[0-9]*/cmdline")
	for _, p := range procs {
		b, err := os.ReadFile(p)
		if err != nil || !bytes.Contains(b, []byte("\x00fabric\x00--name\x00"+f.name+"\x00")) {
			continue
		}
		if pid, err := strconv.Atoi(filepath.Base(filepath.Dir(p))); err == nil {
			syscall.Kill(pid, syscall.SIGKILL)
		}
	}
}

// log returns the fabric daemon's log (its ladder and summary).
func (f fabricEnv) log() string {
	b, _ := os.ReadFile(filepath.Join(f.runtime, "rocesim", f.name+".log"))
	return string(b)
}

// execProc is one program run through rocesim exec.
type execProc struct {
	cmd            *exec.Cmd
	stdout, stderr bytes.Buffer
	done           chan struct{}
	code           int
	timedOut       bool
}

// startExec starts `rocesim exec --name f.name args...` (without --name
// for f.name "") in a process group of its own, bounded by execLimit and
// execMemKB.
func startExec(t *testing.T, f fabricEnv, args ...string) *execProc {
	t.Helper()
	execSetup(t)
	p := &execProc{done: make(chan struct{})}
	shArgs := []string{"-c", `ulimit -v ` + strconv.Itoa(execMemKB) + ` && exec "$0" "$@"`, execBin, "exec"}
	if f.name != "" {
		shArgs = append(shArgs, "--name", f.name)
	}
	shArgs = append(shArgs, args...)
	p.cmd = exec.Command("sh", shArgs...)
	p.cmd.Env = append(append(os.Environ(), "XDG_CACHE_HOME="+execCache, "XDG_RUNTIME_DIR="+f.runtime, "CI="), f.env...)
	p.cmd.Stdout, p.cmd.Stderr = &p.stdout, &p.stderr
	p.cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if err := p.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	timer := time.AfterFunc(execLimit, func() {
		p.timedOut = true
		syscall.Kill(-p.cmd.Process.Pid, syscall.SIGKILL) // the group: rocesim and the program
	})
	go func() {
		err := p.cmd.Wait()
		timer.Stop()
		var ee *exec.ExitError
		if errors.As(err, &ee) {
			p.code = ee.ExitCode()
		}
		close(p.done)
	}()
	t.Cleanup(func() {
		syscall.Kill(-p.cmd.Process.Pid, syscall.SIGKILL)
		<-p.done
	})
	return p
}

// wait waits for the program and fails the test if it outlived its bound.
func (p *execProc) wait(t *testing.T) *execProc {
	t.Helper()
	<-p.done
	if p.timedOut {
		t.Fatalf("%v: still running after %v: killed\nstdout:\n%s\nstderr:\n%s", p.cmd.Args, execLimit, p.stdout.String(), p.stderr.String())
	}
	return p
}

// freePort returns a TCP port nobody listens on now.
func freePort(t *testing.T) int {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port
}

// awaitListen waits until something listens on TCP port (read from
// /proc/net/tcp*, so that the server's one accept is not spent on a
// probe), or the server has exited.
func awaitListen(t *testing.T, port int, srv *execProc) {
	t.Helper()
	needle := fmt.Sprintf(":%04X 00000000000000000000000000000000:0000 0A", port)
	needle4 := fmt.Sprintf(":%04X 00000000:0000 0A", port)
	end := time.Now().Add(execLimit)
	for time.Now().Before(end) {
		for _, f := range []string{"/proc/net/tcp", "/proc/net/tcp6"} {
			b, _ := os.ReadFile(f)
			if bytes.Contains(b, []byte(needle)) || bytes.Contains(b, []byte(needle4)) {
				return
			}
		}
		select {
		case <-srv.done:
			t.Fatalf("the server exited (%d) before listening\nstdout:\n%s\nstderr:\n%s", srv.code, srv.stdout.String(), srv.stderr.String())
		case <-time.After(20 * time.Millisecond):
		}
	}
	t.Fatalf("nothing listens on port %d after %v", port, execLimit)
}

// pair runs prog as server and client and waits for both (see
// startPair).
func pair(t *testing.T, f fabricEnv, fabric []string, prog string, progArgs ...string) (srv, cli *execProc) {
	t.Helper()
	srv, cli = startPair(t, f, fabric, prog, progArgs...)
	return srv.wait(t), cli.wait(t)
}

// startPair starts prog as server and client (the client's last argument is
// "localhost"), server first, through rocesim exec on fabric f; fabric
// are exec's flags for the fabric (given to both), progArgs the
// program's.
func startPair(t *testing.T, f fabricEnv, fabric []string, prog string, progArgs ...string) (srv, cli *execProc) {
	t.Helper()
	port := strconv.Itoa(freePort(t))
	run := func(node string, extra ...string) *execProc {
		args := append([]string{"--node", node, "--nodes", "server,client"}, fabric...)
		args = append(append(append(args, "--", prog, "-p", port), progArgs...), extra...)
		return startExec(t, f, args...)
	}
	srv = run("server")
	p, _ := strconv.Atoi(port)
	awaitListen(t, p, srv)
	return srv, run("client", "localhost")
}

// TestExecPingpong: ibv_rc_pingpong, ibv_uc_pingpong, ibv_ud_pingpong
// and ibv_srq_pingpong, -g 0, 1000 iterations, server and client in two
// processes through rocesim exec: both pass, at sizes 1, one in between
// and the largest (UD's is the path MTU), and the fabric's summary
// shows the two attaches.
func TestExecPingpong(t *testing.T) {
	needTools(t, "ibv_rc_pingpong", "ibv_uc_pingpong", "ibv_ud_pingpong", "ibv_srq_pingpong")
	for _, c := range []struct {
		prog  string
		sizes []string
	}{
		{"ibv_rc_pingpong", []string{"1", "1500", "4096"}},
		{"ibv_uc_pingpong", []string{"1", "4096"}},
		{"ibv_ud_pingpong", []string{"1", "1024"}},
		{"ibv_srq_pingpong", []string{"1", "4096"}},
	} {
		for _, size := range c.sizes {
			t.Run(c.prog+"/"+size, func(t *testing.T) {
				f := newFabricEnv(t)
				srv, cli := pair(t, f, nil, c.prog, "-g", "0", "-n", "1000", "-s", size)
				for _, p := range []*execProc{srv, cli} {
					if p.code != 0 || !strings.Contains(p.stdout.String(), "1000 iters in") {
						t.Errorf("%v: exit %d\nstdout:\n%s\nstderr:\n%s", p.cmd.Args, p.code, p.stdout.String(), p.stderr.String())
					}
				}
				// GID 0 is the link-local address on both ends.
				if out := cli.stdout.String(); !strings.Contains(out, "GID fe80::ff:fe00:2") || !strings.Contains(out, "GID fe80::ff:fe00:1") {
					t.Errorf("the client's addresses:\n%s", out)
				}
				if !strings.Contains(srv.stderr.String(), "exited with status 0 on node server of fabric "+f.name) {
					t.Errorf("exec's last word:\n%s", srv.stderr.String())
				}
			})
		}
	}
}

// TestExecDevicePrefix: a script written for rxe, ibv_rc_pingpong -d rxe0
// on both nodes, runs unchanged with ROCESIM_DEVICE_PREFIX=rxe, where
// without it the program finds no device of that name and fails.
func TestExecDevicePrefix(t *testing.T) {
	needTools(t, "ibv_rc_pingpong")
	f := newFabricEnv(t)
	f.env = append(f.env, "ROCESIM_DEVICE_PREFIX=rxe")
	srv, cli := pair(t, f, nil, "ibv_rc_pingpong", "-d", "rxe0", "-g", "1", "-n", "10")
	for _, p := range []*execProc{srv, cli} {
		if p.code != 0 || !strings.Contains(p.stdout.String(), "10 iters in") {
			t.Errorf("%v: exit %d\nstdout:\n%s\nstderr:\n%s", p.cmd.Args, p.code, p.stdout.String(), p.stderr.String())
		}
	}
	g := newFabricEnv(t)
	lone := startExec(t, g, "--node", "a", "--nodes", "a", "--", "ibv_rc_pingpong", "-d", "rxe0", "-g", "1").wait(t)
	if lone.code == 0 || !strings.Contains(lone.stderr.String(), "rxe0") {
		t.Errorf("without the prefix: exit %d, want the failure naming rxe0\nstderr:\n%s", lone.code, lone.stderr.String())
	}
}

// TestExecUDP: ibv_rc_pingpong -g 1 through rocesim exec --transport udp,
// server at 127.0.0.5 and client at 127.0.0.6 (realnet's tests use .1
// and .2, rocesim node's .3 and .4), each a RoCE v2 endpoint on real UDP
// in real time with no fabric: both pass at sizes 1 and 4096 and show
// each other's GID 1.
func TestExecUDP(t *testing.T) {
	needTools(t, "ibv_rc_pingpong")
	for _, size := range []string{"1", "4096"} {
		t.Run(size, func(t *testing.T) {
			port := freePort(t)
			args := []string{"-g", "1", "-n", "100", "-s", size, "-p", strconv.Itoa(port)}
			run := func(addr string, extra ...string) *execProc {
				return startExec(t, fabricEnv{}, append(append([]string{"--transport", "udp", "--addr", addr, "--", "ibv_rc_pingpong"}, args...), extra...)...)
			}
			srv := run("127.0.0.5")
			awaitListen(t, port, srv)
			cli := run("127.0.0.6", "localhost").wait(t)
			srv.wait(t)
			for _, p := range []*execProc{srv, cli} {
				out := p.stdout.String()
				if p.code != 0 || !strings.Contains(out, "100 iters in") || !strings.Contains(out, "GID ::ffff:127.0.0.5") ||
					!strings.Contains(out, "GID ::ffff:127.0.0.6") || !strings.Contains(p.stderr.String(), "exited with status 0 on UDP 127.0.0.") {
					t.Errorf("%v: exit %d\nstdout:\n%s\nstderr:\n%s", p.cmd.Args, p.code, out, p.stderr.String())
				}
			}
		})
	}
}

// TestExecPingpongFaults: with a plan that drops a data packet and an
// ACK, ibv_rc_pingpong and ibv_srq_pingpong still pass, and the
// capture's comments show the drops and the retransmission.
func TestExecPingpongFaults(t *testing.T) {
	needTools(t, "ibv_rc_pingpong", "ibv_srq_pingpong")
	for _, prog := range []string{"ibv_rc_pingpong", "ibv_srq_pingpong"} {
		t.Run(prog, func(t *testing.T) {
			f := newFabricEnv(t)
			pcap := filepath.Join(t.TempDir(), "run.pcapng")
			plan := "drop class=request nth=50 first=1; drop class=ack nth=70 first=1"
			args := []string{"-g", "0", "-n", "200", "-s", "64"}
			if prog == "ibv_srq_pingpong" {
				// One QP: with its 16, the program reaches its count on
				// the others before a lost SEND's ACK timeout (67 ms)
				// comes round, and exits with the SEND never resent.
				args = append(args, "-q", "1")
			}
			// The trace: named for the rc run, by default (beside the
			// fabric's socket) for the srq one.
			trace := filepath.Join(f.runtime, "rocesim", f.name+".trace")
			fabric := []string{"--faults", plan, "--pcap", pcap}
			if prog == "ibv_rc_pingpong" {
				trace = filepath.Join(t.TempDir(), "run.trace")
				fabric = append(fabric, "--trace", trace)
			}
			srv, cli := pair(t, f, fabric, prog, args...)
			for _, p := range []*execProc{srv, cli} {
				if p.code != 0 || !strings.Contains(p.stdout.String(), "200 iters in") {
					t.Errorf("%v: exit %d\nstdout:\n%s\nstderr:\n%s", p.cmd.Args, p.code, p.stdout.String(), p.stderr.String())
				}
			}
			if !strings.Contains(srv.stderr.String(), "capture: "+pcap) {
				t.Errorf("exec does not say where the capture is:\n%s", srv.stderr.String())
			}
			if !strings.Contains(srv.stderr.String(), "trace: "+trace+";") {
				t.Errorf("exec does not say where the trace is (%s):\n%s", trace, srv.stderr.String())
			}
			comments := pcapComments(t, pcap, f)
			if b, err := os.ReadFile(trace); err != nil || !strings.Contains(string(b), "drop") {
				t.Errorf("the trace %s: %v, %d bytes, no drop in it", trace, err, len(b))
			}
			for _, want := range []string{"dropped by rule 1", "dropped by rule 2", "retransmi"} {
				if !strings.Contains(comments, want) {
					t.Errorf("no comment says %q", want)
				}
			}
		})
	}
}

// pcapComments waits for the fabric to write out its capture (it exits
// once both programs have left) and returns every frame's comment.
func pcapComments(t *testing.T, path string, f fabricEnv) string {
	t.Helper()
	end := time.Now().Add(10 * time.Second)
	for !strings.Contains(f.log(), "fabric "+f.name+": virtual time") && time.Now().Before(end) {
		time.Sleep(20 * time.Millisecond)
	}
	var b strings.Builder
	for _, fr := range readFrames(t, path) {
		b.WriteString(strings.Join(fr.comments, "; "))
		b.WriteByte('\n')
	}
	return b.String()
}

// TestExecPerftest: perftest's bandwidth and latency tests, server and
// client through rocesim exec, pass with small iteration counts; their
// reports go to the test log. The UD and UC bandwidth tests' servers
// poll once more after their last message and find nothing while the
// client waits for them on TCP, and nothing is left to happen on the
// fabric: they pass because such a poll now returns 0 (procfabric's
// pollwait), where it had slept for ever.
func TestExecPerftest(t *testing.T) {
	progs := []string{"ib_send_bw", "ib_write_bw", "ib_read_bw", "ib_atomic_bw", "ib_send_lat", "ib_write_lat", "ib_read_lat"}
	needTools(t, progs...)
	tests := map[string][]string{}
	for _, prog := range progs {
		tests[prog] = []string{prog, "-n", "100"}
	}
	tests["ib_send_bw UD"] = []string{"ib_send_bw", "-c", "UD", "-n", "100"}
	tests["ib_send_bw UC"] = []string{"ib_send_bw", "-c", "UC", "-n", "100"}
	tests["ib_write_bw UC"] = []string{"ib_write_bw", "-c", "UC", "-n", "100"}
	tests["ib_send_lat UD"] = []string{"ib_send_lat", "-c", "UD", "-n", "100"}
	for _, name := range slices.Sorted(maps.Keys(tests)) {
		args := tests[name]
		t.Run(strings.ReplaceAll(name, " ", "_"), func(t *testing.T) {
			f := newFabricEnv(t)
			prog := args[0]
			srv, cli := pair(t, f, nil, prog, args[1:]...)
			for _, p := range []*execProc{srv, cli} {
				if p.code != 0 {
					t.Errorf("%v: exit %d\nstdout:\n%s\nstderr:\n%s", p.cmd.Args, p.code, p.stdout.String(), p.stderr.String())
				}
			}
			t.Logf("%s client:\n%s", prog, cli.stdout.String())
			if name == "ib_write_bw" || name == "ib_send_bw" {
				// The slack (procfabric): a stream's sender is not woken
				// for each frame that leaves its port, nor its receiver
				// for each middle packet (6,400 frames of 64 KiB
				// messages: some 500 wake-ups, against 13,000).
				delivered, wakes := fabricWakes(t, f)
				t.Logf("%d frames delivered in %d wake-ups", delivered, wakes)
				if wakes*4 > delivered {
					t.Errorf("%d frames delivered in %d wake-ups: a stream should wake its processes far less than once a frame", delivered, wakes)
				}
			}
		})
	}
}

// TestExecLinkCut: with the link between the nodes cut, under the spec
// profile ibv_rc_pingpong's client fails its SEND after retry_cnt 7
// retries and exits as the program does (its server waits forever, as
// on a real network, and is killed); under the rxe profile, whose
// retry_cnt 7 retries forever, the fabric's --deadline ends both, with
// a message that says so.
func TestExecLinkCut(t *testing.T) {
	needTools(t, "ibv_rc_pingpong")
	cut := "down link=server-client"
	t.Run("spec", func(t *testing.T) {
		f := newFabricEnv(t)
		srv, cli := startPair(t, f, []string{"--profile", "spec", "--faults", cut}, "ibv_rc_pingpong", "-g", "0", "-n", "10")
		cli.wait(t)
		if cli.code != 1 || !strings.Contains(cli.stderr.String(), "Failed status transport retry counter exceeded (12) for wr_id 2") {
			t.Errorf("client: exit %d\nstdout:\n%s\nstderr:\n%s", cli.code, cli.stdout.String(), cli.stderr.String())
		}
		syscall.Kill(-srv.cmd.Process.Pid, syscall.SIGKILL)
		<-srv.done
	})
	t.Run("rxe", func(t *testing.T) {
		f := newFabricEnv(t)
		svg := filepath.Join(t.TempDir(), "cut.svg")
		srv, cli := pair(t, f, []string{"--faults", cut, "--deadline", "2s", "--ladder", svg}, "ibv_rc_pingpong", "-g", "0", "-n", "10")
		for _, p := range []*execProc{srv, cli} {
			if p.code != 3 || !strings.Contains(p.stderr.String(), "the fabric's run ended at its deadline, virtual time 2s") {
				t.Errorf("%v: exit %d\nstdout:\n%s\nstderr:\n%s", p.cmd.Args, p.code, p.stdout.String(), p.stderr.String())
			}
		}
		// The summary's clock is the deadline the run ended at (it
		// said the time of the last retransmission before it).
		if virtual, _ := fabricTimes(t, f); virtual != "2s" {
			t.Errorf("the fabric's summary says virtual time %s, want the deadline, 2s", virtual)
		}
		// Every frame was dropped, yet the ladder has its columns, in
		// --nodes order, and draws the drops (it was empty).
		log := f.log()
		head := regexp.MustCompile(`(?m)^\s+time\s+server\s+client\s*$`)
		if !head.MatchString(log) || !strings.Contains(log, "✗") || !strings.Contains(log, "link server-client down (rule 1)") {
			t.Errorf("the ladder does not show server, client and the drops:\n%s", log)
		}
		// --ladder: the same ladder as SVG, for a teacher's slides.
		b, err := os.ReadFile(svg)
		if err != nil || !bytes.Contains(b, []byte("<svg ")) || !bytes.Contains(b, []byte("server")) || !bytes.Contains(b, []byte("link server-client down")) {
			t.Errorf("--ladder %s: %v, %.200q", svg, err, b)
		}
	})
}

// TestExecUsage: exec refuses a command line without a program or with
// an unknown profile, and documents itself.
func TestExecUsage(t *testing.T) {
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"exec"}, "no program"},
		{[]string{"exec", "--profile", "mlx5", "--", "true"}, `--profile "mlx5": want rxe or spec`},
		{[]string{"exec", "--transport", "tcp", "--", "true"}, `--transport "tcp": want fabric or udp`},
		{[]string{"exec", "--transport", "udp", "--addr", "192.0.2.1", "--", "true"}, "not a loopback address: add --routable"},
		{[]string{"exec", "--transport", "udp", "--addr", "0.0.0.0", "--routable", "--", "true"}, "not a specific IPv4 or IPv6 address"},
		{[]string{"exec", "--transport", "udp", "--faults", "drop nth=1", "--", "true"}, "--faults applies to the fabric"},
		{[]string{"exec", "--addr", "127.0.0.5", "--", "true"}, "--addr applies to --transport udp only"},
		{[]string{"exec", "--nodes", "1", "--", "true"}, "one program on its own needs no fabric"},
		{[]string{"exec", "--nodes", "solo", "--", "true"}, "run it with LD_LIBRARY_PATH naming the drop-in library"},
		// Said before a fabric starts, not in the fabric's log.
		{[]string{"exec", "--faults", "drop psn=", "--", "true"}, "--faults: 1:6: missing value for psn="},
		{[]string{"exec", "--faults", "@/nonexistent/plan", "--", "true"}, "--faults: open /nonexistent/plan"},
		{[]string{"exec", "--deadline", "soon", "--", "true"}, `--deadline "soon": want a positive duration`},
	} {
		code, _, errOut := runCmd(c.args...)
		if code != exitUsage || !strings.Contains(errOut, c.want) {
			t.Errorf("%v: exit %d, stderr %q; want %d and %q", c.args, code, errOut, exitUsage, c.want)
		}
	}
	code, out, _ := runCmd("help", "exec")
	if code != exitOK || !strings.Contains(out, "Usage: rocesim exec") {
		t.Errorf("help exec: %d %q", code, out)
	}
}

// TestExecLoopback: a program whose two QPs of one device talk to each
// other (dropin/ibverbs/testdata/loopback.c: SEND, WRITE, READ, both
// atomics) runs under rocesim exec, on each node of a fabric of two (a
// direct link: each node turns its frames round itself, as
// rxe_loopback does, and none crosses the link) and of three (the
// switch sends them back). Its frames had gone to the other node, which
// dropped them, and the program retransmitted for ever.
func TestExecLoopback(t *testing.T) {
	needTools(t)
	bin := filepath.Join(t.TempDir(), "loopback")
	if out, err := exec.Command("gcc", "-Wall", "-pthread", "-o", bin, "../../dropin/ibverbs/testdata/loopback.c", "-libverbs").CombinedOutput(); err != nil {
		t.Fatalf("gcc loopback.c: %v\n%s", err, out)
	}
	for _, nodes := range []string{"a,b", "a,b,c"} {
		f := newFabricEnv(t)
		var ps []*execProc
		for _, n := range strings.Split(nodes, ",") {
			ps = append(ps, startExec(t, f, "--node", n, "--nodes", nodes, "--", bin))
		}
		for i, p := range ps {
			p.wait(t)
			if p.code != 0 || !strings.Contains(p.stdout.String(), "loopback ok") {
				t.Errorf("--nodes %s, node %d: exit %d\nstdout:\n%s\nstderr:\n%s", nodes, i, p.code, p.stdout.String(), p.stderr.String())
			}
		}
		virtual, _ := fabricTimes(t, f)
		if nodes == "a,b" && virtual != "0s" {
			t.Errorf("--nodes a,b: the run took %s of virtual time, want 0s: looped frames come back at once", virtual)
		}
	}
}

// TestExecAlone: one program on a fabric of two nodes waits for the
// other's process with its clock at 0; rocesim exec says so on its
// stderr within a few seconds, with what to run, rather than only in
// the fabric's log.
func TestExecAlone(t *testing.T) {
	needTools(t, "ibv_rc_pingpong")
	f := newFabricEnv(t)
	// A pingpong server: it waits for its client on TCP for ever.
	p := startExec(t, f, "--node", "a", "--nodes", "a,b", "--", "ibv_rc_pingpong", "-g", "0", "-p", strconv.Itoa(freePort(t)))
	time.AfterFunc(8*time.Second, func() { syscall.Kill(-p.cmd.Process.Pid, syscall.SIGKILL) })
	<-p.done
	if errOut := p.stderr.String(); !strings.Contains(errOut, "virtual time has not started") || !strings.Contains(errOut, "node b has none yet") {
		t.Errorf("after 8 s alone (exit %d), stderr does not say the clock waits for node b:\n%s", p.code, errOut)
	}
}

// TestDropinLibraryStale: the cache key follows the library's sources
// (a changed source is a new key: the library is rebuilt), not its
// tests; without the Go toolchain a missing library is an error that
// says what to do; a build/dropin that `make dropin` made from the
// current sources is used.
func TestDropinLibraryStale(t *testing.T) {
	root := t.TempDir()
	write := func(rel, text string) { writeFile(t, filepath.Join(root, rel), text) }
	write("go.mod", "module "+modulePath+"\n")
	write("dropin/ibverbs/libibverbs.map", "{};")
	write("dropin/ibverbs/model.go", "package main\n")
	write("nic/qp.go", "package nic\n")
	h0, err := sourceHash(root)
	if err != nil {
		t.Fatal(err)
	}
	write("nic/qp_test.go", "package nic\n")
	write("cmd/rocesim/x.go", "package main\n")
	if h, _ := sourceHash(root); h != h0 {
		t.Errorf("a test or the command changed the key: %s, was %s", h, h0)
	}
	write("nic/qp.go", "package nic // changed\n")
	if h, _ := sourceHash(root); h == h0 {
		t.Errorf("a changed source kept the key %s", h)
	}
	t.Setenv("ROCESIM_SRC", root)
	t.Setenv("XDG_CACHE_HOME", t.TempDir())
	t.Setenv("PATH", t.TempDir()) // no go, no gcc
	_, err = dropinLibrary(io.Discard)
	if err == nil || !strings.Contains(err.Error(), "needs go (the Go toolchain and a C compiler: cgo)") || !strings.Contains(err.Error(), "--lib DIR") {
		t.Errorf("without go: %v", err)
	}

	// What `make dropin` built, newer than every source, is used as it
	// is; once a source changes, it is not.
	past := time.Now().Add(-time.Hour)
	walkSources(root, func(_, path string) error { return os.Chtimes(path, past, past) })
	write("build/dropin/libibverbs.so.1", "")
	write("build/dropin/librdmacm.so.1", "")
	if dir, err := dropinLibrary(io.Discard); err != nil || dir != filepath.Join(root, "build", "dropin") {
		t.Errorf("with build/dropin newer than the sources: %q, %v", dir, err)
	}
	write("nic/qp.go", "package nic // changed again\n")
	if dir, err := dropinLibrary(io.Discard); err == nil {
		t.Errorf("with a source newer than build/dropin: %q, want the cache's (no go to build it: an error)", dir)
	}
}

// fabricTimes waits for the fabric of f to exit and returns the virtual
// and wall time its summary line gives.
func fabricTimes(t *testing.T, f fabricEnv) (virtual, wall string) {
	t.Helper()
	end := time.Now().Add(10 * time.Second)
	re := regexp.MustCompile(`fabric ` + f.name + `: virtual time (\S+), wall time (\S+);`)
	for time.Now().Before(end) {
		if m := re.FindStringSubmatch(f.log()); m != nil {
			return m[1], m[2]
		}
		time.Sleep(20 * time.Millisecond)
	}
	t.Fatalf("the fabric did not exit; its log:\n%s", f.log())
	return "", ""
}

// fabricWakes waits for the fabric of f to exit and returns the frames
// it delivered to processes and the wake-ups that took (its summary).
func fabricWakes(t *testing.T, f fabricEnv) (delivered, wakes int) {
	t.Helper()
	fabricTimes(t, f)
	m := regexp.MustCompile(`(\d+) frames delivered in (\d+) wake-ups`).FindStringSubmatch(f.log())
	if m == nil {
		t.Fatalf("no count of wake-ups in the fabric's summary:\n%s", f.log())
	}
	delivered, _ = strconv.Atoi(m[1])
	wakes, _ = strconv.Atoi(m[2])
	return delivered, wakes
}

// TestDropinFigures prints the figures of issue 16 (make bench-dropin;
// skipped unless ROCESIM_DROPIN_FIGURES=1): ib_write_bw and ib_send_lat
// on the model, in virtual time (the fabric's) and wall time (perftest's
// own report), and the wall time ibv_rc_pingpong takes with a lost ACK
// against without.
func TestDropinFigures(t *testing.T) {
	if os.Getenv("ROCESIM_DROPIN_FIGURES") != "1" {
		t.Skip("figures: make bench-dropin")
	}
	needTools(t, "ib_write_bw", "ib_send_lat", "ibv_rc_pingpong")
	const n = 2000
	for _, c := range []struct {
		prog string
		args []string
	}{
		{"ib_write_bw", []string{"-n", strconv.Itoa(n), "-s", "4096"}},
		{"ib_write_bw", []string{"-n", strconv.Itoa(n), "-s", "64"}},
		{"ib_send_lat", []string{"-n", strconv.Itoa(n), "-s", "2"}},
	} {
		f := newFabricEnv(t)
		srv, cli := pair(t, f, nil, c.prog, c.args...)
		if srv.code != 0 || cli.code != 0 {
			t.Fatalf("%s: exit %d and %d\n%s\n%s", c.prog, srv.code, cli.code, cli.stdout.String(), cli.stderr.String())
		}
		virtual, wall := fabricTimes(t, f)
		v, err := time.ParseDuration(strings.ReplaceAll(virtual, "µ", "u"))
		if err != nil {
			t.Fatal(err)
		}
		t.Logf("%s %v: fabric virtual time %s (%.0f messages/s, %v a message), fabric wall time %s; perftest says (wall):\n%s",
			c.prog, c.args, virtual, float64(n)/v.Seconds(), v/n, wall, lastLines(cli.stdout.String(), 3))
	}
	for _, plan := range []string{"", "drop class=ack nth=500 first=1"} {
		f := newFabricEnv(t)
		var fabric []string
		if plan != "" {
			fabric = []string{"--faults", plan}
		}
		start := time.Now()
		srv, cli := pair(t, f, fabric, "ibv_rc_pingpong", "-g", "0", "-n", "1000", "-s", "64")
		took := time.Since(start)
		if srv.code != 0 || cli.code != 0 {
			t.Fatalf("ibv_rc_pingpong %q: exit %d and %d\n%s", plan, srv.code, cli.code, cli.stderr.String())
		}
		virtual, wall := fabricTimes(t, f)
		t.Logf("ibv_rc_pingpong -n 1000 -s 64, plan %q: both programs %v of wall time (fabric: virtual %s, wall %s); the client says %s",
			plan, took.Round(time.Millisecond), virtual, wall, strings.TrimSpace(lastLines(cli.stdout.String(), 1)))
	}
}

// lastLines returns the last n lines of s.
func lastLines(s string, n int) string {
	lines := strings.Split(strings.TrimRight(s, "\n"), "\n")
	return strings.Join(lines[max(0, len(lines)-n):], "\n")
}

// TestExecConformanceAgent: the conformance harness's C agent
// (conformance/agent/agent.c), compiled unmodified against the installed
// libibverbs, runs on the drop-in library in two processes through
// rocesim exec: it exchanges QPN, PSN, GID 0 and its MR over TCP, and a
// WRITE to the peer's MR address and a SEND complete, the SEND's bytes
// landing in the server's buffer.
func TestExecConformanceAgent(t *testing.T) {
	needTools(t)
	agent := filepath.Join(t.TempDir(), "agent")
	if out, err := exec.Command("gcc", "-O2", "-o", agent, "../../conformance/agent/agent.c", "-libverbs").CombinedOutput(); err != nil {
		t.Fatalf("gcc agent.c: %v\n%s", err, out)
	}
	port := freePort(t)
	script := func(role string, seed int, body string) string {
		p := filepath.Join(t.TempDir(), role+".txt")
		text := fmt.Sprintf("open dev=rocesim0\npd\ncq depth=16\nmr len=8192 seed=%d\nqp send=16 recv=16 sge=1 inline=0\ninfo gid=0\n"+
			"exchange peer=127.0.0.1 port=%d role=%s\nconnect gid=0\n%squit\n", seed, port, role, body)
		if err := os.WriteFile(p, []byte(text), 0o644); err != nil {
			t.Fatal(err)
		}
		return p
	}
	srvScript := script("server", 3, "post_recv wr_id=1 off=0 len=4096\nbarrier\npoll n=1 timeout_ms=5000\nbarrier\ndump off=0 len=8\ndump off=200 len=8\n")
	cliScript := script("client", 5, "barrier\npost_send wr_id=2 op=write off=0 len=100 roff=200\npost_send wr_id=3 op=send off=0 len=64\npoll n=2 timeout_ms=5000\nbarrier\n")
	f := newFabricEnv(t)
	srv := startExec(t, f, "--node", "server", "--nodes", "server,client", "--", agent, srvScript)
	awaitListen(t, port, srv)
	cli := startExec(t, f, "--node", "client", "--nodes", "server,client", "--", agent, cliScript).wait(t)
	srv.wait(t)
	for _, c := range []struct {
		p    *execProc
		want []string
	}{
		{cli, []string{`"wr_id":2,"status":"IBV_WC_SUCCESS","opcode":"IBV_WC_RDMA_WRITE","byte_len":100`,
			`"wr_id":3,"status":"IBV_WC_SUCCESS","opcode":"IBV_WC_SEND","byte_len":64`}},
		// Seed 5: byte i is 5 + 7i.
		{srv, []string{`"wr_id":1,"status":"IBV_WC_SUCCESS","opcode":"IBV_WC_RECV","byte_len":64`,
			`{"event":"dump","off":0,"len":8,"hex":"050c131a21282f36"}`, `{"event":"dump","off":200,"len":8,"hex":"050c131a21282f36"}`}},
	} {
		for _, w := range c.want {
			if c.p.code != 0 || !strings.Contains(c.p.stdout.String(), w) {
				t.Errorf("%v: exit %d, no %s\nstdout:\n%s\nstderr:\n%s", c.p.cmd.Args, c.p.code, w, c.p.stdout.String(), c.p.stderr.String())
			}
		}
	}
}

// TestEchoFabricLog: what the fabric logs after the offset it is given
// comes on stderr line by line, a line written in two pieces whole, the
// fabric's opening lines and other fabrics' lines left out, and what is
// logged up to the stop included; its writes share a lock with the
// program's stderr when that is no file (runExec's lockedWriter).
func TestEchoFabricLog(t *testing.T) {
	log := filepath.Join(t.TempDir(), "f.log")
	writeFile(t, log, "rocesim fabric f: an earlier run's line\n")
	from := fileSize(log)
	var out bytes.Buffer
	lw := &lockedWriter{w: &out}
	stop := echoFabricLog(log, from, "f", lw)
	lf, err := os.OpenFile(log, os.O_WRONLY|os.O_APPEND, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer lf.Close()
	lf.WriteString("rocesim fabric f: serving nodes a, b on f.sock\nrocesim fabric f: half")
	time.Sleep(2 * logEchoEvery)
	lf.WriteString(" and half\nrocesim fabric g: another fabric's\nrocesim fabric f: nodes a, b attached: the fabric is built\nrocesim fabric f: the last\n")
	// The program writes too, through the same lock.
	done := make(chan struct{})
	go func() {
		for range 50 {
			lw.Write([]byte("prog\n"))
		}
		close(done)
	}()
	<-done
	stop()
	var got []string
	for _, l := range strings.Split(out.String(), "\n") {
		if strings.HasPrefix(l, "rocesim fabric") {
			got = append(got, l)
		}
	}
	want := []string{"rocesim fabric f: half and half", "rocesim fabric f: the last"}
	if !slices.Equal(got, want) {
		t.Errorf("echoed %q, want %q", got, want)
	}
}

// TestStartOwn: two clients that start one fabric at once each start a
// daemon; one wins the fabric's lock, and only that client is told the
// daemon that answers is its own (both had said so, and both rocesim
// exec echoed the fabric's log and named its files); a third finds it
// running.
func TestStartOwn(t *testing.T) {
	execSetup(t)
	f := newFabricEnv(t)
	t.Setenv("XDG_RUNTIME_DIR", f.runtime)
	argv := []string{execBin, "fabric", "--name", f.name, "--exit-when-idle", "--nodes", "a,b"}
	type answer struct {
		own bool
		err error
	}
	got := make(chan answer, 2)
	for range 2 {
		go func() {
			own, err := procfabric.StartOwn("", f.name, argv, 10*time.Second)
			got <- answer{own, err}
		}()
	}
	owners := 0
	for range 2 {
		a := <-got
		if a.err != nil {
			t.Fatal(a.err)
		}
		if a.own {
			owners++
		}
	}
	if owners != 1 {
		t.Errorf("%d clients were told the daemon is theirs, want 1", owners)
	}
	if own, err := procfabric.StartOwn("", f.name, argv, 10*time.Second); err != nil || own {
		t.Errorf("a third start: own %v, %v; want false, nil", own, err)
	}
}
