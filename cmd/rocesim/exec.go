package main

// rocesim exec: run an unmodified libibverbs program on a node of a
// fabric daemon.
//
//  1. find the drop-in libibverbs.so.1 and librdmacm.so.1: --lib, else
//     build/dropin if make dropin made it from the current sources
//     (madeLibrary), else the cache ($XDG_CACHE_HOME/rocesim/dropin/<hash
//     of the libraries' sources>), building both there with the Go
//     toolchain and a C compiler when they are missing or their sources
//     changed
//     (exec_rdmacm.go: librdmacm.so.1 is plain C over libibverbs.so.1);
//  2. start the fabric if none of that name answers (procfabric.Start:
//     this executable's `fabric --exit-when-idle`, with --nodes, --faults,
//     --pcap, --trace, --deadline), so a user needs no other step;
//  3. run the program with LD_LIBRARY_PATH naming the library and
//     ROCESIM_FABRIC, ROCESIM_NODE, ROCESIM_PROFILE set: its device is the
//     node's (dropin/ibverbs fabric.go);
//  4. pass its exit status through and say where the capture, the trace
//     and the ladder are.
//
// With --transport udp, step 2 is skipped and step 3 sets
// ROCESIM_TRANSPORT=udp and ROCESIM_ADDR instead (dropin/ibverbs udp.go).

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"flag"
	"fmt"
	"io"
	"io/fs"
	"net"
	"net/netip"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/rocesim/rocesim/internal/dropinbuild"
	"github.com/rocesim/rocesim/internal/will"
	"github.com/rocesim/rocesim/procfabric"
	"github.com/rocesim/rocesim/realnet"
	"github.com/rocesim/rocesim/sim"
)

const execUsage = `Usage: rocesim exec [flags] -- PROGRAM [ARGS...]

Runs PROGRAM, an unmodified libibverbs program (ibv_rc_pingpong,
perftest's ib_write_bw, your own), on rocesim's drop-in libibverbs.so.1:
its device rocesim0 (ROCESIM_DEVICE_PREFIX=rxe names it rxe0, for
scripts written for rxe) is node --node of the fabric --name, where it meets
the other programs run the same way, in one virtual time. The fabric is
started if none of that name runs (rocesim fabric --exit-when-idle: it
exits once every node has come and every program has gone); --nodes,
--faults, --pcap, --trace, --ladder and --deadline are handed to it, and
are ignored, with a warning, when it already runs. At exit rocesim exec
says where the capture, the trace and the ladder are: the fabric writes
them when it exits, the ladder and its summary into its log beside its
socket.

The library is found with --lib, else in the source tree's build/dropin
if make dropin built it there from the current sources, else in the cache
($XDG_CACHE_HOME/rocesim/dropin/<hash of its sources>, default
~/.cache), and built there when it is missing or stale: that needs the
rocesim source tree (the current directory's module, $ROCESIM_SRC, or
where this executable was built), the Go toolchain and a C compiler
(cgo, go build -buildmode=c-shared). Without them, build it elsewhere
with make dropin and give --lib.

Time: the program's verbs run in the fabric's virtual time; the clock
moves when every attached program waits in a verb (a poll that finds
nothing, a blocking ibv_get_cq_event). A program that computes or sleeps
outside the verbs holds the clock for the others; the fabric detaches it
after --hold-limit of wall time while another waits (10s by default).

Flags:
  --name NAME          the fabric (default "default")
  --node NAME          this program's node (default PROGRAM-PID); nodes are
                       numbered in their names' order: MAC 02:00:00:00:00:i,
                       GID 0 fe80::ff:fe00:i, GID 1 ::ffff:10.0.0.i
  --nodes A,B|N        the fabric's nodes, if this starts it (default 2)
  --faults PLAN        the fabric's fault plan, if this starts it (';'
                       separates rules; rocesim help faults)
  --pcap FILE          the fabric's capture, if this starts it
  --trace FILE         the fabric's trace as text, if this starts it (default
                       NAME.trace beside the fabric's socket)
  --ladder FILE        the fabric's ladder, if this starts it (SVG if the
                       name ends in .svg, else text; it is also in the
                       fabric's log)
  --deadline D         end the fabric's run at virtual time D, if this
                       starts it (an rxe QP that retries forever ends there;
                       a run stuck before D, every program waiting for
                       what will not come, ends at D after 10s of wall time)
  --profile rxe|spec   the NIC model's profile (default rxe)
  --seed N             the model's seed (default 1)
  --lib DIR            use DIR/libibverbs.so.1 (and DIR/librdmacm.so.1) as they are
  --transport T        fabric (default: the above) or udp: the device is a
                       RoCE v2 endpoint on a UDP socket at --addr port 4791,
                       in real time, with no fabric (ROCESIM_TRANSPORT=udp);
                       --name, --node, --nodes, --faults, --pcap, --trace,
                       --ladder and --deadline do not apply; if the program dies
                       without closing its device (kill -9), exec sends
                       the DREQs and REJs its rdma_cm IDs owed, as the
                       program's kernel would (on a fabric the daemon does)
  --addr IP            with --transport udp: the device's address, its GID 1
                       ::ffff:IP (default 127.0.0.1)
  --routable           with --transport udp: allow an --addr that is not
                       loopback (anyone who reaches UDP 4791 and guesses a
                       QPN and R_Key can read and write registered memory)

Exit status: the program's (128+N if it died of signal N); 2 for a usage
error or a library or fabric that could not be had.

Example:
  rocesim exec --node server --nodes server,client -- ibv_rc_pingpong -g 0 &
  rocesim exec --node client --nodes server,client -- ibv_rc_pingpong -g 0 localhost

  rocesim exec --transport udp --addr 127.0.0.5 -- ibv_rc_pingpong -g 1 &
  rocesim exec --transport udp --addr 127.0.0.6 -- ibv_rc_pingpong -g 1 localhost
`

// runExec parses exec's command line, prepares the library and the
// fabric, and runs the program.
func runExec(args []string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("exec", flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	name := fs.String("name", "default", "fabric name")
	node := fs.String("node", "", "node name")
	nodes := fs.String("nodes", "2", "the fabric's nodes")
	plan := fs.String("faults", "", "fault plan")
	pcap := fs.String("pcap", "", "capture")
	ladderFile := fs.String("ladder", "", "ladder file")
	traceFile := fs.String("trace", "", "trace")
	deadline := fs.String("deadline", "", "virtual time at which the run ends")
	profile := fs.String("profile", "rxe", "profile")
	seed := fs.Uint64("seed", 1, "seed")
	lib := fs.String("lib", "", "library directory")
	transport := fs.String("transport", "fabric", "fabric or udp")
	addr := fs.String("addr", "127.0.0.1", "the device's address over udp")
	routable := fs.Bool("routable", false, "allow a non-loopback --addr")
	err := fs.Parse(args)
	if errors.Is(err, flag.ErrHelp) {
		fmt.Fprint(stdout, execUsage)
		return exitOK
	}
	prog := fs.Args()
	if err == nil && len(prog) == 0 {
		err = errors.New("no program: rocesim exec [flags] -- PROGRAM [ARGS...]")
	}
	if err == nil && *profile != "rxe" && *profile != "spec" {
		err = fmt.Errorf("--profile %q: want rxe or spec", *profile)
	}
	udp := *transport == "udp"
	if err == nil {
		err = checkExecTransport(fs, *transport, *addr, *routable)
	}
	if err == nil && !udp && *plan != "" {
		// The fabric this exec may start reads the plan too; a plan it
		// cannot read is said here, before any fabric starts: a fabric
		// that failed on it would leave the peer's exec to start one
		// without it.
		if _, perr := parsePlanFlag(*plan); perr != nil {
			err = fmt.Errorf("--faults: %w", perr)
		}
	}
	if err == nil && !udp && *deadline != "" {
		if d, derr := sim.ParseDuration(*deadline); derr != nil || d <= 0 {
			err = fmt.Errorf("--deadline %q: want a positive duration such as 10ms or 2s", *deadline)
		}
	}
	if err == nil && !udp && oneNode(*nodes) {
		err = fmt.Errorf("--nodes %s: a fabric joins two programs or more; one program on its own needs no fabric: "+
			"run it with LD_LIBRARY_PATH naming the drop-in library (make dropin builds it into build/dropin), "+
			"and ROCESIM_FAULTS, ROCESIM_PCAP or ROCESIM_LADDER for a fault plan, a capture or a ladder", *nodes)
	}
	if err != nil {
		fmt.Fprintf(stderr, "rocesim exec: %v\n\n%s", err, execUsage)
		return exitUsage
	}
	if udp {
		libDir, err := execLibrary(*lib, stderr)
		if err != nil {
			fmt.Fprintf(stderr, "rocesim exec: %v\n", err)
			return exitUsage
		}
		env := []string{"ROCESIM_TRANSPORT=udp", "ROCESIM_ADDR=" + *addr, "ROCESIM_PROFILE=" + *profile, fmt.Sprintf("ROCESIM_SEED=%d", *seed)}
		if *routable {
			env = append(env, "ROCESIM_ROUTABLE=1")
		}
		keeper, err := newWillKeeper()
		if err != nil {
			fmt.Fprintf(stderr, "rocesim exec: %v\n", err)
			return exitUsage
		}
		env = append(env, fmt.Sprintf("%s=%d", will.EnvFD, 3)) // ExtraFiles[0]
		code := runProgram(prog, libDir, env, stdout, stderr, keeper.w)
		fmt.Fprintf(stderr, "rocesim exec: %s exited with status %d on UDP %s:4791\n", filepath.Base(prog[0]), code, *addr)
		keeper.settle(filepath.Base(prog[0]), *addr, stderr)
		return code
	}
	if *node == "" {
		*node = fmt.Sprintf("%s-%d", filepath.Base(prog[0]), os.Getpid())
	}
	libDir, err := execLibrary(*lib, stderr)
	if err != nil {
		fmt.Fprintf(stderr, "rocesim exec: %v\n", err)
		return exitUsage
	}
	self, err := os.Executable()
	if err != nil {
		fmt.Fprintf(stderr, "rocesim exec: %v\n", err)
		return exitUsage
	}
	// The fabric runs in the socket directory's place, not here: its
	// files are named absolutely. The trace is always written (as
	// verbstest keeps a failing test's), by default beside the log.
	traceSet := *traceFile != ""
	if !traceSet {
		*traceFile = filepath.Join(procfabric.SocketDir(), *name+".trace")
	}
	for _, f := range []struct {
		flag string
		v    *string
	}{{"--pcap", pcap}, {"--trace", traceFile}, {"--ladder", ladderFile}} {
		if *f.v == "" {
			continue
		}
		if *f.v, err = filepath.Abs(*f.v); err != nil {
			fmt.Fprintf(stderr, "rocesim exec: %s: %v\n", f.flag, err)
			return exitUsage
		}
	}
	argv := []string{self, "fabric", "--name", *name, "--nodes", *nodes, "--exit-when-idle"}
	for _, f := range []struct{ flag, v string }{{"--faults", *plan}, {"--pcap", *pcap}, {"--trace", *traceFile}, {"--ladder", *ladderFile}, {"--deadline", *deadline}} {
		if f.v != "" {
			argv = append(argv, f.flag, f.v)
		}
	}
	log := filepath.Join(procfabric.SocketDir(), *name+".log")
	logFrom := fileSize(log) // the daemon appends to an earlier run's log
	started, err := startFabric(*name, argv)
	if err != nil {
		fmt.Fprintf(stderr, "rocesim exec: fabric %s: %v\n", *name, err)
		return exitUsage
	}
	if !started && (*plan != "" || *pcap != "" || traceSet || *ladderFile != "" || *deadline != "") {
		fmt.Fprintf(stderr, "rocesim exec: fabric %s already runs: its own --faults, --pcap, --trace, --ladder and --deadline apply, not these\n", *name)
	}
	stopEcho, progErr := func() {}, stderr
	if started {
		echoTo := stderr
		if _, ok := stderr.(*os.File); !ok {
			// The program's stderr is then copied by exec.Cmd's
			// goroutine while the echo writes: one lock between them.
			// (A file is handed to the program as it is, still its
			// terminal, and takes concurrent writes.)
			lw := &lockedWriter{w: stderr}
			echoTo, progErr = lw, lw
		}
		stopEcho = echoFabricLog(log, logFrom, *name, echoTo)
	}
	code := runProgram(prog, libDir, []string{"ROCESIM_FABRIC=" + *name, "ROCESIM_NODE=" + *node,
		"ROCESIM_PROFILE=" + *profile, fmt.Sprintf("ROCESIM_SEED=%d", *seed)}, stdout, progErr, nil)
	stopEcho()
	if started {
		where := "trace: " + *traceFile + "; the ladder and the fabric's summary: " + log + " (written once every node has left)"
		if *ladderFile != "" {
			where = "ladder: " + *ladderFile + "; " + where
		}
		if *pcap != "" {
			where = "capture: " + *pcap + "; " + where
		}
		fmt.Fprintf(stderr, "rocesim exec: %s exited with status %d on node %s of fabric %s; %s\n", filepath.Base(prog[0]), code, *node, *name, where)
	} else {
		fmt.Fprintf(stderr, "rocesim exec: %s exited with status %d on node %s of fabric %s; the capture and the ladder are the fabric's (started elsewhere; if by rocesim exec: %s)\n",
			filepath.Base(prog[0]), code, *node, *name, log)
	}
	return code
}

// oneNode reports whether --nodes names a fabric of one node: the count
// 1, or one name.
func oneNode(nodes string) bool {
	if n, err := strconv.Atoi(nodes); err == nil {
		return n == 1
	}
	return !strings.Contains(nodes, ",")
}

// lockedWriter serializes writes to w from several goroutines.
type lockedWriter struct {
	mu sync.Mutex
	w  io.Writer
}

func (l *lockedWriter) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.w.Write(p)
}

// fileSize returns the size of the file at path, 0 if there is none.
func fileSize(path string) int64 {
	if fi, err := os.Stat(path); err == nil {
		return fi.Size()
	}
	return 0
}

// logEchoEvery is how often echoFabricLog looks at the fabric's log.
const logEchoEvery = 250 * time.Millisecond

// echoFabricLog copies to stderr, while the program runs, what the
// fabric this command started logs from offset from of its log at path:
// that it waits for a node with no process, that the run is stuck,
// that it sent a process away. The log is a file (the fabric outlives
// this command when the other program's does), where a user at a
// terminal would not look while the run seems to hang. The fabric's
// opening lines are left out. The returned function stops the echo,
// after copying what was logged until then.
func echoFabricLog(path string, from int64, name string, stderr io.Writer) (stop func()) {
	prefix := "rocesim fabric " + name + ": "
	quit, done := make(chan struct{}), make(chan struct{})
	var partial []byte
	look := func() {
		f, err := os.Open(path)
		if err != nil {
			return
		}
		defer f.Close()
		buf, err := io.ReadAll(io.NewSectionReader(f, from, 1<<30))
		if err != nil || len(buf) == 0 {
			return
		}
		from += int64(len(buf))
		buf = append(partial, buf...)
		for {
			i := bytes.IndexByte(buf, '\n')
			if i < 0 {
				break
			}
			line := string(buf[:i])
			buf = buf[i+1:]
			rest, ok := strings.CutPrefix(line, prefix)
			if !ok || strings.HasPrefix(rest, "serving ") || strings.HasPrefix(rest, "nodes ") {
				continue
			}
			fmt.Fprintln(stderr, line)
		}
		partial = append(partial[:0], buf...)
	}
	go func() {
		defer close(done)
		t := time.NewTicker(logEchoEvery)
		defer t.Stop()
		for {
			select {
			case <-t.C:
				look()
			case <-quit:
				look()
				return
			}
		}
	}()
	return func() {
		close(quit)
		<-done
	}
}

// runProgram runs prog with LD_LIBRARY_PATH naming libDir and env added,
// and extra, if not nil, as its file descriptor 3; hands it the signals
// meant for it, and returns its exit status (128+N if it died of signal
// N; exitUsage if it could not start).
func runProgram(prog []string, libDir string, env []string, stdout, stderr io.Writer, extra *os.File) int {
	cmd := exec.Command(prog[0], prog[1:]...)
	cmd.Stdin, cmd.Stdout, cmd.Stderr = os.Stdin, stdout, stderr
	if extra != nil {
		cmd.ExtraFiles = []*os.File{extra}
	}
	ld := libDir
	if old := os.Getenv("LD_LIBRARY_PATH"); old != "" {
		ld += ":" + old
	}
	cmd.Env = append(append(os.Environ(), "LD_LIBRARY_PATH="+ld), env...)
	if err := cmd.Start(); err != nil {
		fmt.Fprintf(stderr, "rocesim exec: %v\n", err)
		return exitUsage
	}
	// The program gets the signals meant for it; this process waits.
	sig := make(chan os.Signal, 4)
	signal.Notify(sig, syscall.SIGINT, syscall.SIGTERM, syscall.SIGHUP)
	defer signal.Stop(sig)
	go func() {
		for s := range sig {
			cmd.Process.Signal(s)
		}
	}()
	err := cmd.Wait()
	code := 0
	var ee *exec.ExitError
	switch {
	case errors.As(err, &ee):
		code = ee.ExitCode()
		if ws, ok := ee.Sys().(syscall.WaitStatus); ok && ws.Signaled() {
			code = 128 + int(ws.Signal())
		}
	case err != nil:
		fmt.Fprintf(stderr, "rocesim exec: %v\n", err)
		code = exitUsage
	}
	return code
}

// willKeeper keeps, over a pipe, the will of a program on the UDP
// transport (internal/will): what its rdma_cm IDs would send if it died.
// The program is this process's child; if it ends without closing its
// device (killed by a signal, crashed, _exit), the kernel of a real host
// would still destroy its IDs as its files closed, and its peers would
// get their DREQs: settle sends them from the program's address.
type willKeeper struct {
	r, w *os.File
	k    will.Keeper
	done chan error
}

func newWillKeeper() (*willKeeper, error) {
	r, w, err := os.Pipe()
	if err != nil {
		return nil, err
	}
	k := &willKeeper{r: r, w: w, done: make(chan error, 1)}
	go func() { k.done <- k.k.Read(r) }()
	return k, nil
}

// willDrain bounds the wait for the pipe's end after the program exits:
// a child of its own that inherited the pipe (forked, not exec'd) holds
// it open.
const willDrain = 2 * time.Second

// settle, once the program has exited, sends its will if it left one.
func (k *willKeeper) settle(prog, addr string, stderr io.Writer) {
	k.w.Close()
	select {
	case err := <-k.done:
		if err != nil {
			fmt.Fprintf(stderr, "rocesim exec: %s's will: %v\n", prog, err)
		}
	case <-time.After(willDrain):
		fmt.Fprintf(stderr, "rocesim exec: %s's will: its pipe is still open (a child of the program holds it): the will as read so far\n", prog)
	}
	frames := k.k.Frames()
	if k.k.Void() || len(frames) == 0 {
		return
	}
	a := netip.MustParseAddr(addr)
	tr, err := realnet.NewUDP(realnet.UDPConfig{Addr: netip.AddrPortFrom(a, 0), MAC: realnet.StandInMAC(a)})
	if err != nil {
		fmt.Fprintf(stderr, "rocesim exec: %s ended without closing its device; its rdma_cm farewells (%d frames) could not be sent: %v\n", prog, len(frames), err)
		return
	}
	defer tr.Close()
	n, err := tr.Send(frames)
	fmt.Fprintf(stderr, "rocesim exec: %s ended without closing its device: sent %d of its rdma_cm farewells (%d frames) from %s:4791, as its kernel would have", prog, n, len(frames), addr)
	if err != nil {
		fmt.Fprintf(stderr, " (%v)", err)
	}
	fmt.Fprintln(stderr)
}

// execLibrary is --lib's directory, checked, or the cached library's.
func execLibrary(lib string, stderr io.Writer) (string, error) {
	if lib == "" {
		return dropinLibrary(stderr)
	}
	if _, err := os.Stat(filepath.Join(lib, "libibverbs.so.1")); err != nil {
		return "", fmt.Errorf("--lib: %w", err)
	}
	// Without the drop-in librdmacm beside it, an rdma_cm program would
	// load the system's, which talks to the kernel's rdma_cm device, not
	// to the model: say so rather than let it fail obscurely (a verbs-only
	// program does not need it).
	if _, err := os.Stat(filepath.Join(lib, "librdmacm.so.1")); err != nil {
		fmt.Fprintf(stderr, "rocesim exec: warning: --lib %s has no librdmacm.so.1: an rdma_cm program would load the system's librdmacm, which does not reach the model (make dropin builds both)\n", lib)
	}
	return lib, nil
}

// checkExecTransport checks --transport and the flags that go with it:
// --addr a specific address, loopback unless --routable (as rocesim
// node's), and no fabric flag with udp.
func checkExecTransport(fs *flag.FlagSet, transport, addr string, routable bool) error {
	set := map[string]bool{}
	fs.Visit(func(f *flag.Flag) { set[f.Name] = true })
	switch transport {
	case "fabric":
		for _, f := range []string{"addr", "routable"} {
			if set[f] {
				return fmt.Errorf("--%s applies to --transport udp only", f)
			}
		}
		return nil
	case "udp":
	default:
		return fmt.Errorf("--transport %q: want fabric or udp", transport)
	}
	for _, f := range []string{"name", "node", "nodes", "faults", "pcap", "trace", "ladder", "deadline"} {
		if set[f] {
			return fmt.Errorf("--%s applies to the fabric, not to --transport udp", f)
		}
	}
	a, err := netip.ParseAddr(addr)
	if err != nil || a.Zone() != "" || a.Is4In6() || a.IsUnspecified() {
		return fmt.Errorf("--addr %q is not a specific IPv4 or IPv6 address", addr)
	}
	if !a.IsLoopback() && !routable {
		return fmt.Errorf("--addr %s is not a loopback address: add --routable to expose a RoCE endpoint there", a)
	}
	return nil
}

// startFabric starts the fabric called name with argv unless one
// answers; it reports whether it started it.
func startFabric(name string, argv []string) (bool, error) {
	if c, err := net.Dial("unix", procfabric.SocketPath("", name)); err == nil {
		c.Close()
		return false, nil
	}
	// Two programs started at once may both get here: Start's loser
	// finds the winner's socket, or its daemon exits (ErrRunning).
	return procfabric.StartOwn("", name, argv, 10*time.Second)
}

// ---- the library ----

// dropinLibrary returns the directory of a libibverbs.so.1 built from
// the current sources, building it into the cache if need be.
func dropinLibrary(stderr io.Writer) (string, error) {
	src, err := sourceRoot()
	if err != nil {
		return "", err
	}
	if dir, ok := madeLibrary(src); ok {
		return dir, nil
	}
	sum, err := sourceHash(src)
	if err != nil {
		return "", fmt.Errorf("the drop-in library's sources in %s: %w", src, err)
	}
	cache, err := os.UserCacheDir()
	if err != nil {
		return "", fmt.Errorf("no cache directory for the drop-in library (%v): give --lib", err)
	}
	dir := filepath.Join(cache, "rocesim", "dropin", sum)
	if _, err := os.Stat(filepath.Join(dir, "librdmacm.so.1")); err == nil {
		return dir, nil // both libraries: librdmacm.so.1 is built last
	}
	for _, tool := range []string{"go", cc()} {
		if _, err := exec.LookPath(tool); err != nil {
			return "", fmt.Errorf("the drop-in library is not built for these sources and building it needs %s (the Go toolchain and a C compiler: cgo): %v; install them, or build it elsewhere with `make dropin` and give --lib DIR", tool, err)
		}
	}
	fmt.Fprintf(stderr, "rocesim exec: building the drop-in libibverbs.so.1 into %s\n", dir)
	if err := os.MkdirAll(filepath.Dir(dir), 0o755); err != nil {
		return "", err
	}
	tmp, err := os.MkdirTemp(filepath.Dir(dir), sum+".tmp-")
	if err != nil {
		return "", err
	}
	defer os.RemoveAll(tmp)
	cmd := dropinbuild.Command(context.Background(), src, filepath.Join(tmp, "libibverbs.so.1"))
	if out, err := cmd.CombinedOutput(); err != nil {
		return "", fmt.Errorf("building the drop-in library: go build -buildmode=c-shared ./dropin/ibverbs in %s: %v\n%s", src, err, out)
	}
	os.Remove(filepath.Join(tmp, "libibverbs.so.h"))
	if err := buildRdmacm(src, tmp); err != nil {
		return "", err
	}
	// Another exec may have built it meanwhile: either copy is good.
	if err := os.Rename(tmp, dir); err != nil {
		if _, serr := os.Stat(filepath.Join(dir, "librdmacm.so.1")); serr != nil {
			return "", err
		}
	}
	return dir, nil
}

// cc is the C compiler cgo uses.
func cc() string {
	if c := strings.Fields(os.Getenv("CC")); len(c) > 0 {
		return c[0]
	}
	return "gcc"
}

// modulePath is the module the library is built from.
const modulePath = "github.com/rocesim/rocesim"

// sourceRoot finds the rocesim source tree: $ROCESIM_SRC, the module
// around the current directory, or the one this executable was built in.
func sourceRoot() (string, error) {
	var tries []string
	if s := os.Getenv("ROCESIM_SRC"); s != "" {
		tries = append(tries, s)
	}
	if wd, err := os.Getwd(); err == nil {
		for d := wd; ; d = filepath.Dir(d) {
			tries = append(tries, d)
			if filepath.Dir(d) == d {
				break
			}
		}
	}
	if _, file, _, ok := runtime.Caller(0); ok && filepath.IsAbs(file) {
		tries = append(tries, filepath.Dir(filepath.Dir(filepath.Dir(file))))
	}
	for _, d := range tries {
		mod, err := os.ReadFile(filepath.Join(d, "go.mod"))
		if err == nil && strings.HasPrefix(string(mod), "module "+modulePath+"\n") {
			if _, err := os.Stat(filepath.Join(d, "dropin", "ibverbs", "libibverbs.map")); err == nil {
				return d, nil
			}
		}
	}
	return "", errors.New("the drop-in library is not built and its sources are not found (set ROCESIM_SRC to a rocesim checkout, run from inside one, or give --lib DIR with a libibverbs.so.1 built by `make dropin`)")
}

// hashSkipsDir names the directories sourceHash does not descend into.
var hashSkipsDir = map[string]bool{".git": true, "build": true, "testdata": true, "conformance": true, "cmd": true, "examples": true, "tools": true}

// sourceHash hashes what the library is built from: go.mod, go.sum and
// every non-test Go, C and header file and linker map of the module's
// packages, in the walk's (lexical) order; directories no package of the
// library lives in are skipped. The skip list names only directories the
// library cannot import (commands, tools, tests, examples): a package it
// imports (realnet, for the udp transport) must be hashed, or a change
// there would leave a stale library in the cache (TestSourceHashCoversTheLibrary).
func sourceHash(root string) (string, error) {
	h := sha256.New()
	err := walkSources(root, func(rel, path string) error {
		b, err := os.ReadFile(path)
		if err != nil {
			return err
		}
		fmt.Fprintf(h, "%s\x00%d\x00", rel, len(b))
		h.Write(b)
		return nil
	})
	if err != nil {
		return "", err
	}
	fmt.Fprintf(h, "%s/%s", runtime.GOOS, runtime.GOARCH)
	return hex.EncodeToString(h.Sum(nil))[:16], nil
}

// walkSources calls fn, in lexical order, for every file the library is
// built from (see sourceHash), with its path relative to root.
func walkSources(root string, fn func(rel, path string) error) error {
	return filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(root, path)
		if d.IsDir() {
			if rel != "." && hashSkipsDir[d.Name()] {
				return filepath.SkipDir
			}
			return nil
		}
		ext := filepath.Ext(path)
		if strings.HasSuffix(path, "_test.go") || (ext != ".go" && ext != ".c" && ext != ".h" && ext != ".map" && rel != "go.mod" && rel != "go.sum") {
			return nil
		}
		return fn(rel, path)
	})
}

// madeLibrary returns root's build/dropin, where `make dropin` puts the
// library, if both libraries are there and newer than every file they are
// built from (as make itself would judge them): exec then runs the
// library the user built rather than building its own copy into the
// cache. A source changed since, or a library missing, is a no.
func madeLibrary(root string) (string, bool) {
	dir := filepath.Join(root, "build", "dropin")
	var built time.Time
	for _, lib := range []string{"libibverbs.so.1", "librdmacm.so.1"} {
		fi, err := os.Stat(filepath.Join(dir, lib))
		if err != nil {
			return "", false
		}
		if built.IsZero() || fi.ModTime().Before(built) {
			built = fi.ModTime()
		}
	}
	errStale := errors.New("stale")
	err := walkSources(root, func(_, path string) error {
		if fi, err := os.Stat(path); err != nil || !fi.ModTime().Before(built) {
			return errStale
		}
		return nil
	})
	return dir, err == nil
}
