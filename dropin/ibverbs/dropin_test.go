package main

// These tests build the library as `make dropin` does, compile the C
// programs of testdata/ with gcc against the installed
// <infiniband/verbs.h>, and run them, and Debian's unmodified
// ibv_devices and ibv_devinfo, with LD_LIBRARY_PATH naming it. Each run
// has its own wall-time bound and address-space limit; a run that
// outlives its bound is killed by its PID. Without gcc, libibverbs-dev or
// ibverbs-utils they skip, and fail under CI=true
// (tools/install-deps.sh installs them).

import (
	"bytes"
	"context"
	"debug/elf"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/rocesim/rocesim/internal/dropinbuild"
	"github.com/rocesim/rocesim/internal/tooltest"
	"github.com/rocesim/rocesim/nic"
	"github.com/rocesim/rocesim/wire/capture"
)

// runLimit bounds one program's wall time; addressLimitKB its virtual
// memory (the Go runtime in the library reserves some, a runaway model
// would grow past it).
const (
	runLimit       = 60 * time.Second
	addressLimitKB = 4 << 20
)

// need skips the test, or fails it under CI=true, when a tool is missing.
func need(t *testing.T) {
	t.Helper()
	tooltest.Need(t, []string{"gcc", "ibv_devices", "ibv_devinfo"}, []string{"/usr/include/infiniband/verbs.h"},
		"run tools/install-deps.sh (gcc, libibverbs-dev, ibverbs-utils)")
}

var (
	libOnce sync.Once
	libDir  string
	libErr  error
)

// library builds libibverbs.so.1 once per test binary, with the flags
// of the Makefile's dropin target, and returns its directory.
func library(t *testing.T) string {
	t.Helper()
	need(t)
	libOnce.Do(func() {
		libDir, libErr = os.MkdirTemp("", "rocesim-dropin-")
		if libErr != nil {
			return
		}
		root, _ := filepath.Abs("../..")
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
		defer cancel()
		cmd := dropinbuild.Command(ctx, root, filepath.Join(libDir, "libibverbs.so.1"))
		if out, err := cmd.CombinedOutput(); err != nil {
			libErr = fmt.Errorf("go build -buildmode=c-shared: %v\n%s", err, out)
		}
	})
	if libErr != nil {
		t.Fatal(libErr)
	}
	return libDir
}

func TestMain(m *testing.M) {
	code := m.Run()
	if libDir != "" {
		os.RemoveAll(libDir)
	}
	os.Exit(code)
}

// compile builds testdata/name.c against the installed headers, linked
// with libs and libibverbs.
func compile(t *testing.T, name string, libs ...string) string {
	t.Helper()
	library(t)
	bin := filepath.Join(t.TempDir(), name)
	args := append([]string{"-Wall", "-Werror", "-pthread", "-o", bin, filepath.Join("testdata", name+".c")}, libs...)
	out, err := exec.Command("gcc", append(args, "-libverbs")...).CombinedOutput()
	if err != nil {
		t.Fatalf("gcc %s.c: %v\n%s", name, err, out)
	}
	return bin
}

// run runs prog on the drop-in library with env added to the
// environment, within runLimit and addressLimitKB, and returns its
// stdout, stderr and exit code.
func run(t *testing.T, env []string, prog string, args ...string) (string, string, int) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), runLimit)
	defer cancel()
	cmd := command(ctx, library(t), env, prog, args...)
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	err := cmd.Run()
	if ctx.Err() != nil {
		t.Fatalf("%s %v: still running after %v: killed\nstdout:\n%s\nstderr:\n%s", prog, args, runLimit, stdout.String(), stderr.String())
	}
	code := 0
	var ee *exec.ExitError
	if errors.As(err, &ee) {
		code = ee.ExitCode()
	} else if err != nil {
		t.Fatalf("%s: %v", prog, err)
	}
	return stdout.String(), stderr.String(), code
}

// command is prog on the drop-in library in dir, with env added to an
// environment cleared of the ROCESIM_ variables, under addressLimitKB; the
// context's end kills it.
func command(ctx context.Context, dir string, env []string, prog string, args ...string) *exec.Cmd {
	// The shell sets the limit and execs the program, which keeps its
	// PID: the context's kill reaches the program itself.
	cmd := exec.CommandContext(ctx, "sh", append([]string{"-c", `ulimit -v ` + strconv.Itoa(addressLimitKB) + ` && exec "$0" "$@"`, prog}, args...)...)
	cmd.Env = append(os.Environ(), "LD_LIBRARY_PATH="+dir)
	for _, k := range []string{"ROCESIM_DEVICES", "ROCESIM_SEED", "ROCESIM_PROFILE", "ROCESIM_FAULTS", "ROCESIM_PCAP", "ROCESIM_MAX_EVENTS",
		"ROCESIM_IDLE_WAKE", "ROCESIM_LADDER", "ROCESIM_FABRIC", "ROCESIM_NODE", "ROCESIM_TRANSPORT", "ROCESIM_ADDR", "ROCESIM_ROUTABLE"} {
		cmd.Env = append(cmd.Env, k+"=")
	}
	cmd.Env = append(cmd.Env, env...)
	return cmd
}

// TestSymbolVersions: the library is libibverbs.so.1 to the dynamic
// loader (its SONAME), and every libibverbs symbol an unmodified
// ibverbs-utils program imports is there under the version the program
// asks for (ibv_rc_pingpong's 24 symbols, 23 of them @IBVERBS_1.1), and
// so is every one librdmacm and pyverbs' modules import.
func TestSymbolVersions(t *testing.T) {
	dir := library(t)
	lib, err := elf.Open(filepath.Join(dir, "libibverbs.so.1"))
	if err != nil {
		t.Fatal(err)
	}
	defer lib.Close()
	if so, err := lib.DynString(elf.DT_SONAME); err != nil || len(so) != 1 || so[0] != "libibverbs.so.1" {
		t.Errorf("SONAME %v (%v), want libibverbs.so.1", so, err)
	}
	have := map[string]bool{}
	syms, err := lib.DynamicSymbols()
	if err != nil {
		t.Fatal(err)
	}
	for _, s := range syms {
		if s.Section != elf.SHN_UNDEF {
			have[s.Name+"@"+s.Version] = true
			// The library's wrap of pthread_create (ownthreads.c) is
			// its own: a program's calls must reach libc's.
			if strings.Contains(s.Name, "pthread_create") {
				t.Errorf("the library defines %s@%s: the program's pthread_create calls could reach it", s.Name, s.Version)
			}
		}
	}
	var paths []string
	for _, prog := range []string{"ibv_devices", "ibv_devinfo", "ibv_asyncwatch", "ibv_rc_pingpong", "ibv_uc_pingpong",
		"ibv_ud_pingpong", "ibv_srq_pingpong", "ibv_xsrq_pingpong"} {
		path, err := exec.LookPath(prog)
		if err != nil {
			t.Errorf("%s: %v", prog, err)
			continue
		}
		paths = append(paths, path)
	}
	// librdmacm links libibverbs' marshalling helpers; pyverbs' modules
	// load with RTLD_NOW, so every symbol they import must be there.
	more, _ := filepath.Glob("/usr/lib/python3/dist-packages/pyverbs/*.so")
	more = append(more, "/usr/lib/x86_64-linux-gnu/librdmacm.so.1")
	for _, p := range more {
		if _, err := os.Stat(p); err == nil {
			paths = append(paths, p)
		}
	}
	for _, path := range paths {
		prog := filepath.Base(path)
		f, err := elf.Open(path)
		if err != nil {
			t.Fatal(err)
		}
		imp, err := f.ImportedSymbols()
		f.Close()
		if err != nil {
			t.Fatal(err)
		}
		n := 0
		for _, s := range imp {
			if s.Library != "libibverbs.so.1" {
				continue
			}
			n++
			if !have[s.Name+"@"+s.Version] {
				t.Errorf("%s imports %s@%s: not in the library", prog, s.Name, s.Version)
			}
		}
		if n == 0 && strings.HasPrefix(prog, "ibv_") {
			t.Errorf("%s imports nothing from libibverbs.so.1", prog)
		}
	}
}

// TestDevices: the unmodified ibv_devices lists the model's devices,
// one by default and ROCESIM_DEVICES of them, with rxe's node GUID (the
// EUI-64 of the MAC), named after ROCESIM_DEVICE_PREFIX if it is set.
func TestDevices(t *testing.T) {
	for _, c := range []struct {
		env  []string
		want []string
	}{
		{nil, []string{"rocesim0 000000fffe000001"}},
		{[]string{"ROCESIM_DEVICES=3"}, []string{"rocesim0 000000fffe000001", "rocesim1 000000fffe000002", "rocesim2 000000fffe000003"}},
		{[]string{"ROCESIM_DEVICES=2", "ROCESIM_DEVICE_PREFIX=rxe"}, []string{"rxe0 000000fffe000001", "rxe1 000000fffe000002"}},
	} {
		out, stderr, code := run(t, c.env, "ibv_devices")
		if code != 0 {
			t.Fatalf("ibv_devices %v: exit %d\n%s%s", c.env, code, out, stderr)
		}
		var got []string
		for _, l := range strings.Split(out, "\n") {
			// Device lines: a name and a 16-digit hex GUID (not the
			// header, nor the dashes under it).
			if f := strings.Fields(l); len(f) == 2 && len(f[1]) == 16 && strings.Trim(f[1], "0123456789abcdef") == "" {
				got = append(got, f[0]+" "+f[1])
			}
		}
		if strings.Join(got, "\n") != strings.Join(c.want, "\n") {
			t.Errorf("ibv_devices %v lists\n%s\nwant\n%s", c.env, strings.Join(got, "\n"), strings.Join(c.want, "\n"))
		}
	}
	// A script written for rxe asks for rxe0 by name: found with the
	// prefix, not without (as on a machine with no such device).
	out, stderr, code := run(t, []string{"ROCESIM_DEVICE_PREFIX=rxe"}, "ibv_devinfo", "-d", "rxe0")
	if code != 0 || !strings.Contains(out, "hca_id:\trxe0") {
		t.Errorf("ibv_devinfo -d rxe0 with ROCESIM_DEVICE_PREFIX=rxe: exit %d\n%s%s", code, out, stderr)
	}
	if _, _, code := run(t, nil, "ibv_devinfo", "-d", "rxe0"); code == 0 {
		t.Errorf("ibv_devinfo -d rxe0 without the prefix: exit 0, want the failure of a missing device")
	}
}

// TestDevinfo: the unmodified `ibv_devinfo -v` describes rocesim0 as
// it describes rxe0 in the conformance guest (testdata/rxe0-devinfo.txt:
// its output there, Linux 6.1's rdma_rxe on a netdev with MAC
// 52:54:00:00:00:01 and MTU 1500), line for line, but for the name and
// what the MAC gives (the node GUID and GID 0: the model's host has MAC
// 02:00:00:00:00:01); and the limits it prints are the model's
// (nic.RxeAttr), which conformance's TestDeviceAttrMatchesRxe holds to
// rxe's.
func TestDevinfo(t *testing.T) {
	out, stderr, code := run(t, nil, "ibv_devinfo", "-v")
	if code != 0 {
		t.Fatalf("ibv_devinfo -v: exit %d\n%s%s", code, out, stderr)
	}
	golden, err := os.ReadFile("testdata/rxe0-devinfo.txt")
	if err != nil {
		t.Fatal(err)
	}
	want := strings.NewReplacer("hca_id:\trxe0", "hca_id:\trocesim0",
		"5054:00ff:fe00:0001", "0000:00ff:fe00:0001", "fe80::5054:ff:fe00:1", "fe80::ff:fe00:1").Replace(string(golden))
	if out != want {
		t.Errorf("ibv_devinfo -v differs from rxe0's (rxe0 first, then the model):\n%s", lineDiff(want, out))
	}
	got := map[string]string{}
	for _, m := range regexp.MustCompile(`(?m)^\s*(\w+):\s+(.+)$`).FindAllStringSubmatch(out, -1) {
		if _, seen := got[m[1]]; !seen {
			got[m[1]] = strings.TrimSpace(m[2])
		}
	}
	a := nic.RxeAttr()
	for _, c := range []struct {
		name string
		want string
	}{
		{"fw_ver", a.FWVer}, {"max_mr_size", fmt.Sprintf("%#x", a.MaxMRSize)}, {"max_qp", strconv.Itoa(a.MaxQP)},
		{"max_qp_wr", strconv.Itoa(a.MaxQPWR)}, {"max_sge", strconv.Itoa(a.MaxSGE)},
		{"max_cq", strconv.Itoa(a.MaxCQ)}, {"max_cqe", strconv.Itoa(a.MaxCQE)},
		{"max_mr", strconv.Itoa(a.MaxMR)}, {"max_pd", strconv.Itoa(a.MaxPD)},
		{"max_qp_rd_atom", strconv.Itoa(a.MaxQPRdAtom)}, {"max_qp_init_rd_atom", strconv.Itoa(a.MaxQPInitRdAtom)},
		{"max_mw", strconv.Itoa(a.MaxMW)}, {"max_ah", strconv.Itoa(a.MaxAH)},
		{"max_srq", strconv.Itoa(a.MaxSRQ)}, {"max_srq_wr", strconv.Itoa(a.MaxSRQWR)},
		{"max_srq_sge", strconv.Itoa(a.MaxSRQSGE)}, {"phys_port_cnt", strconv.Itoa(a.PhysPortCnt)},
		{"atomic_cap", a.AtomicCap + " (1)"},
	} {
		if got[c.name] != c.want {
			t.Errorf("%s: %q, the model's is %q", c.name, got[c.name], c.want)
		}
	}
}

// lineDiff lists the lines where a and b differ, by position.
func lineDiff(a, b string) string {
	al, bl := strings.Split(a, "\n"), strings.Split(b, "\n")
	line := func(l []string, i int) string {
		if i < len(l) {
			return l[i]
		}
		return "(none)"
	}
	var out strings.Builder
	for i := range max(len(al), len(bl)) {
		if x, y := line(al, i), line(bl, i); x != y {
			fmt.Fprintf(&out, "%d: %q\n%d: %q\n", i+1, x, i+1, y)
		}
	}
	return out.String()
}

// TestLoopbackProgram: two RC QPs of one device in one C program (SEND,
// WRITE, READ, FETCH_ADD, CMP_SWAP, an inline SEND waited for through a
// completion channel whose fd poll(2) watches), over GID 0 (IPv6
// link-local) and GID 1 (IPv4); and the same between two devices
// (ROCESIM_DEVICES=2), whose first MRs have the same R_Key: the library
// finds the peer's MR in the device the QP's address vector names; with
// a second thread that takes the receives through the completion
// channel while the first sends (the library's lock serialises them). A
// WRITE under a bad R_Key ends it: under the spec profile the responder's
// QP_ACCESS_ERR reaches the program through the async fd, naming its QP;
// under rxe's there is none, as on rxe 6.1.
func TestLoopbackProgram(t *testing.T) {
	bin := compile(t, "loopback")
	for _, profile := range []string{"rxe", "spec"} {
		for _, c := range []struct{ devices, gid string }{{"1", "0"}, {"1", "1"}, {"2", "0"}, {"2", "1"}} {
			out, stderr, code := run(t, []string{"ROCESIM_DEVICES=" + c.devices, "ROCESIM_PROFILE=" + profile, noIdle}, bin, c.gid, c.devices, "threads")
			if code != 0 || !strings.Contains(out, "loopback ok") {
				t.Errorf("loopback, %s profile, on %s device(s) over GID %s: exit %d\n%s%s", profile, c.devices, c.gid, code, out, stderr)
			}
		}
	}
}

// TestTransports: UD through an address handle (GRH first in the
// receive buffer, the sender's QPN in the completion) and the answer
// through ibv_create_ah_from_wc, over IPv6 and IPv4; UC SEND and
// WRITE, RC receives taken from an SRQ, and memory windows: a type 2
// window bound by IBV_WR_BIND_MW takes a WRITE under its R_Key, a type 1
// window bound by ibv_bind_mw serves a READ (testdata/transports.c).
func TestTransports(t *testing.T) {
	bin := compile(t, "transports")
	for _, gid := range []string{"0", "1"} { // the GRH of an IPv6 packet, and of an IPv4 one
		out, stderr, code := run(t, []string{noIdle}, bin, gid)
		if code != 0 || !strings.Contains(out, "transports ok") {
			t.Errorf("GID %s: exit %d\n%s%s", gid, code, out, stderr)
		}
	}
}

// TestNewPost: the extended verbs (testdata/newpost.c, which conformance
// TestNewPostRxe also runs on real rxe and compares line by line): RC
// SEND, SEND with immediate from inline data, WRITE of two SGEs, WRITE
// with immediate, READ and both atomics built with ibv_wr_* and polled
// with ibv_start_poll; batches refused whole (too many SGEs, too much
// inline data, more WRs than the queue holds) post nothing; an aborted
// batch posts nothing; a UD SEND through ibv_wr_set_ud_addr; inline
// data from a list of buffers and an SGE list of unequal lengths (which
// the rdma-core Debian 12 ships gets wrong on rxe).
func TestNewPost(t *testing.T) {
	bin := compile(t, "newpost")
	out, stderr, code := run(t, []string{"ROCESIM_DEVICES=1", noIdle}, bin, "1", "model")
	if code != 0 || !strings.HasSuffix(out, "newpost done\n") {
		t.Fatalf("exit %d\n%s%s", code, out, stderr)
	}
	for _, want := range []string{
		"create_cq_ex(completion timestamp) NULL EOPNOTSUPP",
		"create_qp_ex(RC, PD only) qp_ex NULL",
		"create_qp_ex(UD, RDMA WRITE) NULL EOPNOTSUPP",
		"rc: send bytes same",
		"rc: send_imm, b[0] wr_id=101 status=success opcode=128 byte_len=12 imm=0xabcd1234 qp=b",
		"rc: inline bytes same",
		"rc: write_imm, b[0] wr_id=102 status=success opcode=129 byte_len=0 imm=0x7 qp=b",
		"rc: write bytes same",
		"rc: read bytes same",
		"rc: fetch_add saw 40, cmp_swp saw 42, word now 9",
		"rc: after abort start_poll ENOENT",
		"rc: max_send_sge+1 SGEs ENOSPC",
		"rc: max_inline_data+1 bytes inline ENOSPC",
		"rc: max_send_wr+1 WRITEs ENOSPC",
		"rc: b after the refused batches start_poll ENOENT",
		"rc: max_send_wr WRITEs 0",
		"rc: two SENDs, a[1] wr_id=51 status=success",
		"ud: b[0] wr_id=200 status=success opcode=128 byte_len=49 imm=0x55 qp=b src_qp=a",
		"ud: bytes after the GRH same",
		"model: a[0] wr_id=70 status=success opcode=0 byte_len=12",
		"model: b[0] wr_id=300 status=success opcode=128 byte_len=12",
		"model: inline list bytes same",
		"model: unequal SGEs bytes same",
		"model: batch with an unaligned atomic EINVAL",
		"model: after the refused batch[0] wr_id=83 status=success",
		"model: WRITEs of the refused batch never landed",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("no %q in:\n%s", want, out)
		}
	}
	if strings.Contains(out, "differ") || strings.Contains(out, " completions\n") {
		t.Errorf("bytes differ or completions missing:\n%s", out)
	}
}

// TestLadder: ROCESIM_LADDER draws the run's ladder at exit, as text or
// (for a .svg name) as SVG: the frames between two devices and the
// completions.
func TestLadder(t *testing.T) {
	bin := compile(t, "loopback")
	dir := t.TempDir()
	for _, name := range []string{"run.txt", "run.svg"} {
		path := filepath.Join(dir, name)
		out, stderr, code := run(t, []string{"ROCESIM_DEVICES=2", "ROCESIM_LADDER=" + path, noIdle}, bin, "0", "2")
		if code != 0 || !strings.Contains(out, "loopback ok") {
			t.Fatalf("%s: exit %d\n%s%s", name, code, out, stderr)
		}
		b, err := os.ReadFile(path)
		if err != nil {
			t.Fatal(err)
		}
		for _, want := range []string{"WRITE_FIRST psn=101", "wr=3 RDMA_WRITE SUCCESS"} {
			if !strings.Contains(string(b), want) {
				t.Errorf("%s has no %q", name, want)
			}
		}
		if svg := strings.HasSuffix(name, ".svg"); svg != strings.Contains(string(b), "<svg") {
			t.Errorf("%s: SVG %v, want %v", name, !svg, svg)
		}
	}
}

// noIdle turns the idle wake off (idle.go): with it, a run that the
// machine's load stalls for long enough would see the world move without
// a verb, and the tests that hold a run to its exact course would flake.
const noIdle = "ROCESIM_IDLE_WAKE=off"

// TestSleepInPoll: a program that waits for a completion event in
// poll(2) on the channel's fd, not in a verb, gets it: the library runs
// the world once the program has been quiet for ROCESIM_IDLE_WAKE.
// Without the idle wake the fd never becomes readable and the program's
// 10 s poll fails.
func TestSleepInPoll(t *testing.T) {
	bin := compile(t, "loopback")
	out, stderr, code := run(t, []string{"ROCESIM_IDLE_WAKE=20ms"}, bin, "0", "1", "sleep")
	if code != 0 || !strings.Contains(out, "loopback ok") {
		t.Errorf("exit %d\n%s%s", code, out, stderr)
	}
}

// TestNoInterruptedSyscalls: the library's Go runtime sends no signal
// that interrupts the program's own system calls (internal/dropinbuild's
// GoDebug): 2,000 verbs each followed by a 1 ms poll(2), and no poll
// fails with EINTR. Built without that default, one of the 2,000 polls
// was interrupted in each of six runs (and in five of six with it
// overridden by GODEBUG=asyncpreemptoff=0 in the environment), and
// conformance TestCM6Rxe's program took an interrupted poll for a
// missing rdma_cm event.
func TestNoInterruptedSyscalls(t *testing.T) {
	bin := compile(t, "eintr")
	out, stderr, code := run(t, nil, bin, "2000")
	if code != 0 || !strings.Contains(out, "2000 polls, 0 interrupted") {
		t.Errorf("exit %d\n%s%s", code, out, stderr)
	}
}

// TestLoopbackUnderFaults: the same program with a data packet of the
// WRITE dropped once still passes; the capture holds the drop and the
// retransmission, each with its comment; two runs write the same bytes.
func TestLoopbackUnderFaults(t *testing.T) {
	bin := compile(t, "loopback")
	counts := faultedTwice(t, "loopback ok", []string{"dropped by rule 1: drop psn=102 tx=1", "retransmission #1 of PSN 102"}, bin, "0")
	if counts[0] == 0 || counts[1] == 0 {
		t.Errorf("capture: %d frames dropped by the rule, %d retransmissions of PSN 102; want both", counts[0], counts[1])
	}
}

// TestLoopbackThreadsSameTwice: with a second thread that takes the
// receives through the completion channel while the main thread sends,
// two runs still write the same bytes: a thread's wait moves virtual
// time only while the other is not about to act (threads.go). Before,
// each waiting thread moved time as the scheduler let it, and ten runs
// wrote ten different captures.
func TestLoopbackThreadsSameTwice(t *testing.T) {
	bin := compile(t, "loopback")
	counts := faultedTwice(t, "loopback ok", []string{"dropped by rule 1: drop psn=102 tx=1"}, bin, "0", "1", "threads")
	if counts[0] == 0 {
		t.Errorf("capture: no frame dropped by the rule")
	}
}

// TestLoopbackBusyThread: with a thread that computes all along, calling
// a verb after each millisecond or so of work, the main thread's waits
// still move time (each yields to it for a while, then steps), and the
// program ends: the hold and the second look before a step once caught
// each other, and the run never ended.
func TestLoopbackBusyThread(t *testing.T) {
	bin := compile(t, "loopback")
	out, stderr, code := run(t, []string{noIdle}, bin, "0", "1", "busy")
	if code != 0 || !strings.Contains(out, "loopback ok") {
		t.Errorf("exit %d\n%s%s", code, out, stderr)
	}
}

// TestFaultRuleNeverMatched: a rule that matched no frame by the time
// the program ended is a warning on stderr, naming the rule as the plan
// has it; the program's own outcome is untouched.
func TestFaultRuleNeverMatched(t *testing.T) {
	bin := compile(t, "loopback")
	out, stderr, code := run(t, []string{"ROCESIM_FAULTS=drop psn=102 tx=1; drop psn=999999 qp=0x42", noIdle}, bin, "0")
	if code != 0 || !strings.Contains(out, "loopback ok") {
		t.Fatalf("exit %d\n%s%s", code, out, stderr)
	}
	for _, want := range []string{
		"rocesim: ROCESIM_FAULTS rule 1 acted on 2 frames: drop psn=102 tx=1\n", // the WRITE's packet and the NAK of the gap, which carries PSN 102 too
		"rocesim: warning: ROCESIM_FAULTS rule 2 never matched a frame: drop qp=0x42 psn=999999\n",
	} {
		if !strings.Contains(stderr, want) {
			t.Errorf("stderr %q lacks %q", stderr, want)
		}
	}
}

// faultedTwice runs prog twice with a fault plan that drops PSN 102 once
// and a capture, checks that it prints ok both times and that the two
// captures are the same bytes, and returns how many frames of the first
// carry a comment containing each of comments.
func faultedTwice(t *testing.T, ok string, comments []string, prog string, args ...string) []int {
	t.Helper()
	dir := t.TempDir()
	var caps [2][]byte
	var stderrs [2]string
	for i := range caps {
		pcap := filepath.Join(dir, fmt.Sprintf("run%d.pcapng", i))
		out, stderr, code := run(t, []string{"ROCESIM_FAULTS=drop psn=102 tx=1", "ROCESIM_PCAP=" + pcap, noIdle}, prog, args...)
		if code != 0 || !strings.Contains(out, ok) {
			t.Fatalf("run %d: exit %d\n%s%s", i, code, out, stderr)
		}
		stderrs[i] = stderr
		b, err := os.ReadFile(pcap)
		if err != nil {
			t.Fatal(err)
		}
		caps[i] = b
	}
	if !bytes.Equal(caps[0], caps[1]) {
		t.Errorf("two runs wrote different captures (%d and %d bytes)", len(caps[0]), len(caps[1]))
	}
	rd, err := capture.NewReader(bytes.NewReader(caps[0]))
	if err != nil {
		t.Fatal(err)
	}
	counts := make([]int, len(comments))
	dropped := 0
	for rec, err := range rd.Records() {
		if err != nil {
			t.Fatalf("the capture: %v", err)
		}
		c := strings.Join(rec.Comments, " ")
		for k, want := range comments {
			if strings.Contains(c, want) {
				counts[k]++
			}
		}
		if strings.Contains(c, "dropped by rule 1:") {
			dropped++
		}
	}
	// At exit the library says what the plan did: as many frames as the
	// capture shows dropped (the data packet's first transmission, and
	// the NAK of the gap it left, whose PSN is 102 too).
	want := fmt.Sprintf("rocesim: ROCESIM_FAULTS rule 1 acted on %d frames: drop psn=102 tx=1\n", dropped)
	if dropped == 1 {
		want = "rocesim: ROCESIM_FAULTS rule 1 acted on 1 frame: drop psn=102 tx=1\n"
	}
	for i, e := range stderrs {
		if !strings.Contains(e, want) {
			t.Errorf("run %d: stderr %q lacks %q", i, e, want)
		}
	}
	return counts
}

// TestMisuse: NULL objects, bad attributes and verbs the model does not
// offer return what libibverbs returns, and nothing crashes
// (testdata/misuse.c prints one line per case).
func TestMisuse(t *testing.T) {
	bin := compile(t, "misuse")
	for _, profile := range []string{"rxe", "spec"} {
		out, stderr, code := run(t, []string{"ROCESIM_PROFILE=" + profile}, bin)
		cases := 0
		for _, l := range strings.Split(out, "\n") {
			if strings.HasPrefix(l, "CASE ") {
				cases++
				if !strings.HasSuffix(l, " ok") {
					t.Error(profile, l)
				}
			}
		}
		if code != 0 || cases < 90 {
			t.Errorf("misuse, %s profile: exit %d after %d cases\n%s%s", profile, code, cases, out, stderr)
		}
	}
}

// TestBadEnvironment: a plan that does not parse is said on stderr and
// leaves the process with no devices; a program then fails as on a
// machine without RDMA devices.
func TestBadEnvironment(t *testing.T) {
	for _, env := range []string{"ROCESIM_FAULTS=drop psn=", "ROCESIM_DEVICES=0", "ROCESIM_PROFILE=mlx5", "ROCESIM_TRANSPORT=udp", "ROCESIM_TRANSPORT=tcp",
		"ROCESIM_DEVICE_PREFIX=rxe/0"} {
		out, stderr, code := run(t, []string{env}, "ibv_devinfo")
		if code == 0 || !strings.Contains(stderr, "rocesim: ROCESIM_") || !strings.Contains(stderr, "No IB devices found") {
			t.Errorf("%s: exit %d\n%s%s", env, code, out, stderr)
		}
	}
}

// TestLinkCut: with every frame dropped, the spec profile's retry_cnt 7
// runs out and the program sees RETRY_EXC_ERR, as on a real NIC; under
// rxe's it retries forever, as rxe does, and ROCESIM_MAX_EVENTS ends the
// run with exit status 3 and a message that says what kept it going.
func TestLinkCut(t *testing.T) {
	bin := compile(t, "loopback")
	out, stderr, code := run(t, []string{"ROCESIM_FAULTS=drop", "ROCESIM_PROFILE=spec", noIdle}, bin)
	if code != 1 || !strings.Contains(stderr, "transport retry counter exceeded (12)") {
		t.Errorf("spec profile: exit %d\n%s%s", code, out, stderr)
	}
	out, stderr, code = run(t, []string{"ROCESIM_FAULTS=drop", "ROCESIM_MAX_EVENTS=20000", noIdle}, bin)
	if code != 3 || !strings.Contains(stderr, "did not settle within 20000 events") || !strings.Contains(stderr, "retries forever") {
		t.Errorf("rxe profile: exit %d\n%s%s", code, out, stderr)
	}
}

// pyverbs returns the Python that has Debian's pyverbs (python3-pyverbs),
// skipping the test (failing it under CI=true) if there is none.
func pyverbs(t *testing.T) string {
	t.Helper()
	library(t)
	const py = "/usr/bin/python3"
	if err := exec.Command(py, "-c", "import pyverbs.device").Run(); err != nil {
		msg := fmt.Sprintf("%s cannot import pyverbs (%v): run tools/install-deps.sh (python3-pyverbs)", py, err)
		if os.Getenv("CI") == "true" {
			t.Fatal(msg)
		}
		t.Skip(msg)
	}
	return py
}

// TestPyverbs: a pyverbs program (testdata/loopback.py) in one process:
// two RC QPs to RTS on one device and on two, SEND/RECV, WRITE, READ,
// both atomics and an RNR, then pyverbs' QPEx and CQEX (a WRITE with
// immediate and a SEND built with wr_*, read with start_poll and
// poll_next); under a fault plan that drops a data packet
// it passes too, its capture holds the RNR NAK and the retransmission,
// and two runs write the same bytes.
func TestPyverbs(t *testing.T) {
	py := pyverbs(t)
	for _, c := range []struct{ devices, gid string }{{"1", "0"}, {"1", "1"}, {"2", "0"}, {"2", "1"}} {
		out, stderr, code := run(t, []string{"ROCESIM_DEVICES=" + c.devices, noIdle}, py, "testdata/loopback.py", c.gid, c.devices)
		if code != 0 || !strings.Contains(out, "pyverbs ok") {
			t.Errorf("pyverbs on %s device(s) over GID %s: exit %d\n%s%s", c.devices, c.gid, code, out, stderr)
		}
	}
	counts := faultedTwice(t, "pyverbs ok", []string{"RNR NAK: no receive posted", "retransmission #1 of PSN 102"}, py, "testdata/loopback.py")
	if counts[0] == 0 || counts[1] == 0 {
		t.Errorf("capture: %d RNR NAKs, %d retransmissions of PSN 102; want both", counts[0], counts[1])
	}
}
