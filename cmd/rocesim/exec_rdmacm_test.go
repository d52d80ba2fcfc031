package main

// Unmodified rdma_cm programs (Debian's rdmacm-utils) on the drop-in
// librdmacm.so.1 (dropin/rdmacm), two processes through rocesim exec.

import (
	"bytes"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/rocesim/rocesim/internal/tooltest"
	"github.com/rocesim/rocesim/wire"
)

// programOf returns the PID of the program rocesim exec p runs (its
// child), waiting for it to start. rocesim exec has other children, all
// rocesim itself: the fabric daemon the first one starts (`rocesim
// fabric`, in a session of its own), usually the first in /proc's order,
// and the Go runtime's probe for CLONE_PIDFD (os/exec's first start
// clones a child that exits at once), as well as the program before its
// execve. They are skipped, and so is a child that has exited (the
// probe until it is reaped). Taken for the program, the daemon's main
// thread, which may idle in epoll_wait, or the probe, gone at once, kept
// awaitMainBlocked waiting until the server was killed (TestExecRping
// and TestExecPerftestRdmacm ending at their 60 s bound under load), or
// let the client start before the server listened.
func programOf(t *testing.T, p *execProc) int {
	t.Helper()
	parent := strconv.Itoa(p.cmd.Process.Pid)
	end := time.Now().Add(execLimit)
	for time.Now().Before(end) {
		stats, _ := filepath.Glob("/proc/[0-9]*/stat")
		for _, s := range stats {
			b, err := os.ReadFile(s)
			if err != nil {
				continue
			}
			// pid (comm) state ppid ...: comm may hold spaces, so split
			// after its closing parenthesis.
			i := bytes.LastIndexByte(b, ')')
			if f := strings.Fields(string(b[i+1:])); i > 0 && len(f) > 1 && f[1] == parent && isProgram(filepath.Dir(s)) {
				pid, _ := strconv.Atoi(filepath.Base(filepath.Dir(s)))
				return pid
			}
		}
		select {
		case <-p.done:
			t.Fatalf("%v exited (%d) before its program started\nstderr:\n%s", p.cmd.Args, p.code, p.stderr.String())
		case <-time.After(10 * time.Millisecond):
		}
	}
	t.Fatalf("%v: no program started within %v", p.cmd.Args, execLimit)
	return 0
}

// isProgram reports whether the process of /proc directory dir runs a
// program other than rocesim (a zombie's command line is empty).
func isProgram(dir string) bool {
	b, _ := os.ReadFile(filepath.Join(dir, "cmdline"))
	argv0, _, _ := strings.Cut(string(b), "\x00")
	return argv0 != "" && filepath.Base(argv0) != filepath.Base(execBin)
}

// awaitMainBlocked waits until the main thread of p's program has been
// blocked in futex(2) for a while: rping's main thread does that once it
// listens (rping_run_server: rdma_listen, then sem_wait for the
// CONNECT_REQUEST), perftest's and rdma_server's in rdma_get_cm_event. A
// client started earlier could meet a node with no listener yet, as on a
// real network: REJ, reason 8. Before it listens, the main thread may
// wait too, in the drop-in library (its Go runtime; attaching to the
// fabric, slow under load), so a wait there must last 500 ms, and one
// elsewhere (glibc's sem_wait) 100 ms. A thread blocked in the drop-in's
// rdma_get_cm_event wakes every 50 ms (cmWaitSlice), to let a
// cancellation through, and calls again: a few samples that catch it
// awake are forgiven within a wait in the drop-in (under load, 30 s of
// samples once never saw 25 in a row asleep: CI, mckey), each alone
// between two asleep there: a slice's wake is over within a sample's
// 20 ms, and two samples awake in a row are two waits, not one.
func awaitMainBlocked(t *testing.T, p *execProc) {
	t.Helper()
	pid := programOf(t, p)
	path := fmt.Sprintf("/proc/%d/task/%d/syscall", pid, pid)
	const futex = "202" // x86-64
	// Half the program's bound: past it the test says what the thread
	// was doing, before the program is killed.
	end := time.Now().Add(execLimit / 2)
	for n, awake, need, was := 0, 0, 5, false; n < need; {
		b, _ := os.ReadFile(path)
		// "nr args... sp pc" (proc_pid_syscall(5)).
		if f := strings.Fields(string(b)); len(f) > 1 && f[0] == futex {
			if n == 0 {
				need, awake = 5, 0
			}
			if pc, err := strconv.ParseUint(strings.TrimPrefix(f[len(f)-1], "0x"), 16, 64); err != nil || inDropin(pid, pc) {
				need = 25
			}
			n++
			was = false
		} else if n > 0 && need == 25 && awake < 4 && !was {
			awake++ // a slice's wake (see above)
			was = true
		} else {
			n, was = 0, false
		}
		if time.Now().After(end) {
			t.Fatalf("%v: the main thread of its program (PID %d) did not block within %v (last in syscall %q)", p.cmd.Args, pid, execLimit/2, b)
		}
		select {
		case <-p.done:
			t.Fatalf("%v exited (%d) before listening\nstdout:\n%s\nstderr:\n%s", p.cmd.Args, p.code, p.stdout.String(), p.stderr.String())
		case <-time.After(20 * time.Millisecond):
		}
	}
}

// inDropin reports whether address pc of process pid lies in the drop-in
// libibverbs.so.1 (the Go runtime's futex waits are there).
func inDropin(pid int, pc uint64) bool {
	b, _ := os.ReadFile(fmt.Sprintf("/proc/%d/maps", pid))
	for _, line := range strings.Split(string(b), "\n") {
		// "lo-hi perms offset dev inode path"
		f := strings.Fields(line)
		if len(f) < 6 || filepath.Base(f[5]) != "libibverbs.so.1" {
			continue
		}
		lo, hi, _ := strings.Cut(f[0], "-")
		l, err1 := strconv.ParseUint(lo, 16, 64)
		h, err2 := strconv.ParseUint(hi, 16, 64)
		if err1 == nil && err2 == nil && l <= pc && pc < h {
			return true
		}
	}
	return false
}

// cmMessages lists the CM messages of a capture in order, each as
// "10.0.0.2>REQ", with its comment.
func cmMessages(t *testing.T, path string) (msgs, comments []string) {
	t.Helper()
	var p wire.Packet
	for _, f := range readFrames(t, path) {
		if p.Decode(f.data) != nil || p.BTH.DestQP() != wire.GSIQPN {
			continue
		}
		attr := wire.CMAttr(wire.MAD(p.Payload).Header().AttributeID)
		msgs = append(msgs, p.Src().Unmap().String()+">"+attr.String())
		comments = append(comments, strings.Join(f.comments, "; "))
	}
	return msgs, comments
}

// TestExecRping: unmodified rping, server (-s) and client (-c -a
// 10.0.0.1 -C 10 -v), in two processes through rocesim exec on a
// fabric: ten pings with RDMA READ and WRITE, both exit 0, and the
// fabric's capture has the CM exchange on QP1 that real rxe's hosts have
// for rping (wire/testdata/cm/rxe_cm_rping.pcapng): REQ, REP, RTU, DREQ,
// DREP, each sent once, each frame commented.
func TestExecRping(t *testing.T) { execRping(t) }

// TestExecRpingIPv6: the same over IPv6, rping -a fe80::ff:fe00:1%1 (the
// server node's IPv6 address on a fabric: the link-local address its MAC
// gives, GID 0, as on rxe; a link-local address needs a scope, as on
// Linux, and the model takes any): the same ten pings, and the CM
// exchange from and to the IPv6 addresses (cmMessages names senders by
// address).
func TestExecRpingIPv6(t *testing.T) { execRpingAt(t, "fe80::ff:fe00:1%1", "fe80::ff:fe00:2") }

// TestExecRpingSelfQP: rping -q, both sides making their QPs with
// ibv_create_qp and moving them with rdma_init_qp_attr (the server all
// the way to RTS before rdma_accept, the client after
// RDMA_CM_EVENT_CONNECT_RESPONSE, then rdma_establish), as UCX does: the
// same ten pings and the same CM exchange, each message once.
func TestExecRpingSelfQP(t *testing.T) { execRping(t, "-q") }

// TestExecRpingTimedFault: a fault plan timed for after the run does not
// touch it. rping's threads hand each other the work (its CM thread
// takes an event and posts a semaphore, its main thread connects or
// posts): a thread back in rdma_get_cm_event while the main thread was
// about to act let the fabric move the clock through the plan's link
// changes, so the REQ left at 6 s, after a link cut from 5 s to 6 s
// that no frame of the run should meet (dropin/ibverbs/threads.go). Now
// the whole exchange, twenty pings, runs in its first microseconds, as
// on a host, the rule never matches, and two runs are the same.
func TestExecRpingTimedFault(t *testing.T) {
	needTools(t, "rping")
	var runs [2][]string
	for i := range runs {
		runs[i] = rpingTimedFault(t)
	}
	// The same run each time, frame for frame, through the DREQ (the
	// programs' exits race their peer's last frames, as on hosts; the
	// bytes hold the programs' own addresses, which ASLR moves).
	if a, b := strings.Join(runs[0], "\n"), strings.Join(runs[1], "\n"); a != b {
		t.Errorf("two runs differ:\n%s\n\nand\n%s", a, b)
	}
}

// rpingTimedFault runs the rping pair of TestExecRpingTimedFault and
// returns its frames through the DREQ, each as its time, opcode and PSN.
func rpingTimedFault(t *testing.T) []string {
	f := newFabricEnv(t)
	pcap := filepath.Join(t.TempDir(), "rping.pcapng")
	srv, cli, _ := rdmacmPair(t, f, []string{"--pcap", pcap, "--faults", "down link=server-client from=5s to=6s"},
		[]string{"rping", "-s", "-v", "-C", "20"}, []string{"rping", "-c", "-a", "10.0.0.1", "-C", "20", "-v"})
	for _, p := range []*execProc{srv, cli} {
		out := p.stdout.String()
		if !strings.Contains(out, "rdma-ping-19: ") || (p.code != 0 && !tooltest.RpingExitRace(out+p.stderr.String(), p.code)) {
			t.Fatalf("%v: exit %d\nstdout:\n%s\nstderr:\n%s", p.cmd.Args, p.code, out, p.stderr.String())
		}
	}
	fabricTimes(t, f)
	frames := readFrames(t, pcap)
	if len(frames) < 20*4 {
		t.Fatalf("%d frames in the capture, want the CM exchange and twenty pings", len(frames))
	}
	var p wire.Packet
	var seen []string
	for i, fr := range frames {
		if at := time.Duration(fr.ns); at >= 5*time.Second {
			t.Fatalf("frame %d of %d (%s) left at %v, after the link went down at 5s: the clock ran while rping's threads were about to act\n%s",
				i, len(frames), strings.Join(fr.comments, "; "), at, f.log())
		}
		if err := p.Decode(fr.data); err != nil {
			t.Fatalf("frame %d: %v", i, err)
		}
		cm := p.BTH.DestQP() == wire.GSIQPN
		if i == 0 && !cm {
			t.Errorf("the first frame is not the CM's REQ: %s", strings.Join(fr.comments, "; "))
		}
		what := fmt.Sprintf("%v %v psn=%d", time.Duration(fr.ns), p.BTH.Opcode(), p.BTH.PSN())
		if cm {
			what += " " + wire.CMAttr(wire.MAD(p.Payload).Header().AttributeID).String()
		}
		if seen = append(seen, what); strings.HasSuffix(what, " DREQ") {
			break
		}
	}
	if log := f.log(); !strings.Contains(log, "fault rule 1 never matched") {
		t.Errorf("the link rule matched a frame:\n%s", log)
	}
	return seen
}

// execRping runs rping's server and client, with the options opts added
// to both, through rocesim exec on one fabric, and checks ten pings on
// each side and the CM exchange in the capture.
func execRping(t *testing.T, opts ...string) { execRpingAt(t, "10.0.0.1", "10.0.0.2", opts...) }

// execRpingAt is execRping with the server at address server (the
// client's address is client), given to both sides with -a.
func execRpingAt(t *testing.T, server, client string, opts ...string) {
	needTools(t, "rping")
	f := newFabricEnv(t)
	pcap := filepath.Join(t.TempDir(), "rping.pcapng")
	srvArgs := []string{"rping", "-s", "-v", "-C", "10"}
	if strings.Contains(server, ":") {
		srvArgs = append(srvArgs, "-a", server) // rping's server binds 0.0.0.0 unless told
	}
	srv, cli, retries := rdmacmPair(t, f, []string{"--pcap", pcap}, append(srvArgs, opts...),
		append([]string{"rping", "-c", "-a", server, "-C", "10", "-v"}, opts...))
	for _, c := range []struct {
		p      *execProc
		prefix string
	}{{srv, "server ping data: rdma-ping-"}, {cli, "ping data: rdma-ping-"}} {
		out := c.p.stdout.String()
		for i := range 10 {
			if !strings.Contains(out, c.prefix+strconv.Itoa(i)+": ") {
				t.Errorf("%v: no ping %d", c.p.cmd.Args, i)
			}
		}
		code := c.p.code
		if code != 0 && !t.Failed() && tooltest.RpingExitRace(out+c.p.stderr.String(), code) {
			t.Logf("%v: rping's own exit race (its CM thread came back for an event after the main thread destroyed the channel), every ping done: exit %d",
				c.p.cmd.Args, code)
			code = 0
		}
		if code != 0 || t.Failed() {
			t.Fatalf("%v: exit %d\nstdout:\n%s\nstderr:\n%s", c.p.cmd.Args, c.p.code, out, c.p.stderr.String())
		}
	}
	fabricTimes(t, f) // the fabric has exited: the capture is complete
	msgs, comments := cmMessages(t, pcap)
	// Each retried client left its REQ and the REJ that answered it.
	for range retries {
		if len(msgs) < 2 || msgs[0] != client+">REQ" || !strings.HasPrefix(server, strings.TrimSuffix(msgs[1], ">REJ")) {
			t.Fatalf("CM messages %v: %d retried clients, but no REQ and REJ first", msgs, retries)
		}
		msgs, comments = msgs[2:], comments[2:]
	}
	server, _, _ = strings.Cut(server, "%") // the scope is not on the wire
	want := []string{client + ">REQ", server + ">REP", client + ">RTU", client + ">DREQ", server + ">DREP"}
	if strings.Join(msgs, " ") != strings.Join(want, " ") {
		t.Errorf("CM messages:\n got %v\nwant %v", msgs, want)
	}
	for i, c := range comments {
		kind := msgs[i][strings.IndexByte(msgs[i], '>')+1:]
		if !strings.Contains(c, "CM "+kind+" (") {
			t.Errorf("CM message %d (%s): comment %q does not name it", i, msgs[i], c)
		}
	}
	t.Logf("CM exchange: %v; comments %q", msgs, comments)
}

// TestRdmacmMisuse: the common misuses of librdmacm get its answer from
// the drop-in librdmacm.so.1, -1 and the errno (or what the call
// returns), never a crash: testdata/cm_misuse.c, built against
// <rdma/rdma_cma.h> and the drop-in libraries, run in one process with
// two devices. The answers are real rxe's for the same program
// (conformance TestRdmacmMisuseRxe compares them); where rdma-core's
// librdmacm crashes (a NULL ID, an ID with no device), EINVAL.
func TestRdmacmMisuse(t *testing.T) {
	execSetup(t)
	needTools(t, cc())
	if _, err := os.Stat("/usr/include/rdma/rdma_cma.h"); err != nil {
		if os.Getenv("CI") == "true" {
			t.Fatal("<rdma/rdma_cma.h> is missing: install librdmacm-dev (make deps)")
		}
		t.Skip("<rdma/rdma_cma.h> is missing: install librdmacm-dev (make deps)")
	}
	lib, err := cachedLibrary()
	if err != nil {
		t.Fatal(err)
	}
	bin := filepath.Join(t.TempDir(), "cm_misuse")
	if out, err := exec.Command(cc(), "-Wall", "-Werror", "-o", bin, filepath.Join("testdata", "cm_misuse.c"),
		"-L"+lib, "-l:librdmacm.so.1", "-l:libibverbs.so.1", "-lpthread").CombinedOutput(); err != nil {
		t.Fatalf("building cm_misuse: %v\n%s", err, out)
	}
	cmd := exec.Command(bin)
	cmd.Env = append(os.Environ(), "LD_LIBRARY_PATH="+lib, "ROCESIM_DEVICES=2")
	timer := time.AfterFunc(execLimit, func() { cmd.Process.Kill() })
	defer timer.Stop()
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("cm_misuse: %v\n%s", err, out)
	}
	got := map[string]string{}
	for _, line := range strings.Split(strings.TrimSpace(string(out)), "\n") {
		name, rest, _ := strings.Cut(line, " ")
		got[name] = rest
	}
	for _, c := range []struct{ name, want string }{
		{"create_id_null_out", "-1 EINVAL"},
		{"create_id_bad_ps", "-1 EINVAL"}, // ucma_get_qp_type: an unknown port space
		{"destroy_id_null", "-1 EINVAL"},
		{"get_event_null_channel", "-1 EINVAL"},
		{"get_event_null_out", "-1 EINVAL"},
		{"ack_event_null", "-1 EINVAL"},
		{"bind_null_id", "-1 EINVAL"},
		{"connect_null_id", "-1 EINVAL"},
		{"accept_null_id", "-1 EINVAL"},
		{"init_qp_attr_unbound", "-1 EINVAL"}, // ucma_init_qp_attr: no device
		{"establish_unbound", "-1 EINVAL"},    // rdma_accept: not CONNECT
		{"bind_null_addr", "-1 EINVAL"},
		{"bind_foreign_addr", "-1 EADDRNOTAVAIL"},                                              // rdma_translate_ip: no device has 10.9.9.9
		{"connect_before_resolve", "-1 EINVAL"},                                                // rdma_connect: not ROUTE_RESOLVED
		{"accept_unconnected", "-1 EINVAL"},                                                    // rdma_accept: not CONNECT
		{"reject_unconnected", "-1 EINVAL"},                                                    // rdma_reject: no ib_cm ID
		{"disconnect_unconnected", "-1 EINVAL"},                                                // rdma_disconnect: no ib_cm ID
		{"resolve_route_before_addr", "-1 EINVAL"},                                             // not ADDR_RESOLVED
		{"create_qp_unbound", "-1 EINVAL"},                                                     // no device, no PD
		{"resolve_addr_null_dst", "-1 EINVAL"},                                                 // no destination
		{"set_option_unknown", "-1 ENOSYS"},                                                    // ucma_set_option_level
		{"get_event_nonblock_empty", "-1 EAGAIN"},                                              // read(2) of a non-blocking fd
		{"event_str_unknown", "UNKNOWN EVENT"},                                                 // rdma_event_str
		{"resolve_addr", "0 0"},                                                                //
		{"event", "RDMA_CM_EVENT_ADDR_RESOLVED"},                                               //
		{"connect_before_route", "-1 EINVAL"},                                                  // ADDR_RESOLVED, not ROUTE_RESOLVED
		{"init_qp_attr_before_connect", "0 0"},                                                 // cma_ib_init_qp_attr: no ib_cm ID yet ...
		{"init_qp_attr_before_connect_attr", "mask=0x39 state=2 access=0 port=1 pkey_index=0"}, // ... INIT's fields for RTR
		{"establish_before_connect", "-1 EINVAL"},                                              //
		{"destroy_id_unacked", "0 0"},                                                          // waits for the other thread's ack ...
		{"destroy_returned_after_ack", "1"},                                                    // ... and returns after it
		{"bind_any_again", "-1 EADDRNOTAVAIL"},                                                 // cma_check_port: another ID's port
		{"listen_same_port", "0 0"},                                                            // not bound: rdma_listen binds it
		{"listen_twice", "-1 EINVAL"},                                                          // not IDLE
		{"connect_own_qpn", "0 0"},                                                             // a QP number of the program's own
		{"request_event", "RDMA_CM_EVENT_CONNECT_REQUEST qp_num=0x4242"},
		{"destroy_unanswered_request", "0 0"},                // cm_destroy_id in REQ_RCVD: a REJ ...
		{"answer_event", "RDMA_CM_EVENT_REJECTED status=28"}, // ... consumer reject, at once
		// rdma_destroy_id in each state of a connection (cm_destroy_id).
		{"connecting_request", "RDMA_CM_EVENT_CONNECT_REQUEST status=0"},
		{"destroy_connecting", "0 0"},                                          // REQ_SENT: a REJ, reason timeout ...
		{"accepted_request", "RDMA_CM_EVENT_CONNECT_REQUEST status=0"},         // ... which gives the listener no event ...
		{"reject_after_client_destroyed", "-1 EINVAL"},                         // ... but voids its request
		{"accepted_response", "RDMA_CM_EVENT_CONNECT_RESPONSE status=0"},       //
		{"destroy_accepted", "0 0"},                                            // REP_SENT: a consumer REJ ...
		{"accepted_destroyed_event", "RDMA_CM_EVENT_REJECTED status=28"},       // ... to the client owing its RTU
		{"disconnect_listener", "-1 EINVAL"},                                   // rdma_disconnect: no ib_cm ID of its own
		{"disconnect_connecting", "0 0"},                                       // REQ_SENT: nothing to end, 0 all the same
		{"disconnect_unaccepted", "0 0"},                                       // REQ_RCVD: the same
		{"accept_after_disconnect", "0 0"},                                     //
		{"disconnect_accepted", "0 0"},                                         // REP_SENT: the same
		{"disconnect_response", "0 0"},                                         // REP_RCVD: the same
		{"create_qp_null_pd", "0 0"},                                           // rdma_create_qp(id, NULL, ...) ...
		{"qp_pd", "id_pd=1 same=1"},                                            // ... on the device's PD, the ID's
		{"create_qp_ex_send_ops", "0 0"},                                       // rdma_create_qp_ex with send opcodes ...
		{"qp_ex", "ex=1 send=1 write=1 read=0 pd=1 cqs=1"},                     // ... their builders, the ID's PD and CQs
		{"create_qp_ex_tso", "-1 EOPNOTSUPP"},                                  // an opcode rxe lacks ...
		{"create_qp_ex_tso_left", "qp=0 send_cq=0"},                            // ... leaves no QP, no CQs
		{"established_event", "RDMA_CM_EVENT_ESTABLISHED status=0"},            //
		{"destroy_established", "0 0"},                                         // ESTABLISHED: a DREQ ...
		{"established_destroyed_event", "RDMA_CM_EVENT_DISCONNECTED status=0"}, // ... and the peer is DISCONNECTED
		{"disconnect_destroyed_peer", "0 0"},                                   //
		{"bind_udp", "0 0"},                                                    // TCP's port 7174 is not UDP's
		{"sidr_request", "RDMA_CM_EVENT_CONNECT_REQUEST status=0"},             //
		{"destroy_unanswered_sidr", "0 0"},                                     // SIDR_REQ_RCVD: SIDR_REP, IB_SIDR_REJECT ...
		{"sidr_answer_event", "RDMA_CM_EVENT_UNREACHABLE status=2"},            // ... the client UNREACHABLE 2
		{"set_option_tos", "0 0"},                                              // rdma_set_option: the kernel's sizes ...
		{"set_option_tos_int", "-1 EINVAL"},                                    // ... a u8
		{"set_option_reuseaddr", "0 0"},                                        //
		{"set_option_reuseaddr_byte", "-1 EINVAL"},                             // ... an int
		{"set_option_afonly", "0 0"},                                           //
		{"set_option_ack_timeout", "0 0"},                                      //
		{"set_option_ack_timeout_int", "-1 EINVAL"},                            // ... a u8
		{"set_option_ack_timeout_udp", "-1 EINVAL"},                            // ... on an RC ID only
		{"set_option_bad_level", "-1 ENOSYS"},                                  //
		{"set_option_reuseaddr_off_idle", "0 0"},                               // rdma_set_reuseaddr: off before a bind ...
		{"bind_for_options", "0 0"},                                            //
		{"set_option_reuseaddr_off_bound", "-1 EINVAL"},                        // ... not after
		{"set_option_reuseaddr_on_bound", "0 0"},                               // on: anywhere ...
		{"set_option_afonly_bound", "0 0"},                                     // rdma_set_afonly: IDLE, bound or not
		{"listen_for_options", "0 0"},                                          //
		{"set_option_reuseaddr_on_listener", "-1 EINVAL"},                      // ... but on a listener
		{"set_option_reuseaddr_off_listener", "-1 EINVAL"},                     //
		{"set_option_afonly_listener", "-1 EINVAL"},                            //
		{"set_option_tos_listener", "0 0"},                                     // the type of service: any state
		{"reuse_bind_first", "0 0"},                                            // cma_check_port: ...
		{"reuse_bind_both", "0 0"},                                             // ... both reusable: the port is shared
		{"reuse_bind_one_not_same_addr", "-1 EADDRINUSE"},                      // one not: the same address ...
		{"reuse_bind_one_not_any", "-1 EADDRNOTAVAIL"},                         // ... or the any address
		{"reuse_listen_shared", "-1 EADDRINUSE"},                               // rdma_listen: the port must be its own ...
		{"reuse_listen_alone", "0 0"},                                          //
		{"reuse_bind_by_listener", "-1 EADDRINUSE"},                            // ... and a listener is not reusable
		{"reuse_bind_after_listener", "0 0"},                                   //
		{"resolved_port_ephemeral", "1"},                                       // rdma_resolve_addr's port: ...
		{"bind_resolved_port_any", "-1 EADDRNOTAVAIL"},                         // ... the ID's own
		{"bind_resolved_port_same", "-1 EADDRINUSE"},                           //
		{"bind_resolved_port_freed", "0 0"},                                    // ... until it is destroyed
		{"bind_port0", "0 0"},                                                  // cma_get_port: port 0 ...
		{"bind_port0_ephemeral", "1"},                                          // ... an ephemeral port at once ...
		{"bind_port0_second", "0 0"},                                           //
		{"bind_port0_distinct", "1"},                                           // ... each ID its own ...
		{"bind_port0_listen", "0 0"},                                           //
		{"bind_port0_listen_keeps", "1"},                                       // ... kept by rdma_listen
		{"listen_unbound", "0 0"},                                              // rdma_listen binds an unbound ID ...
		{"listen_unbound_ephemeral", "1"},                                      // ... and librdmacm shows the port
		{"done", ""},
	} {
		if g, ok := got[c.name]; !ok || g != c.want {
			t.Errorf("%s: got %q, want %q", c.name, g, c.want)
		}
	}
	if t.Failed() {
		t.Logf("cm_misuse's output:\n%s", out)
	}
}

// cachedLibrary is the directory of the drop-in libraries execSetup
// built into the test's cache.
func cachedLibrary() (string, error) {
	old, had := os.LookupEnv("XDG_CACHE_HOME")
	os.Setenv("XDG_CACHE_HOME", execCache)
	defer func() {
		if had {
			os.Setenv("XDG_CACHE_HOME", old)
		} else {
			os.Unsetenv("XDG_CACHE_HOME")
		}
	}()
	return dropinLibrary(io.Discard)
}

// rdmacmPair runs an rdma_cm program as server (serverArgs) and client
// (clientArgs) through rocesim exec on fabric f, the client once the
// server's main thread waits (for its first CM event), and waits for
// both. A client rejected before it connected, while the server still
// runs, is started again (see runRdmacmPair); retries says how often,
// each retry having left a REQ and a REJ in the fabric's capture.
func rdmacmPair(t *testing.T, f fabricEnv, fabric, serverArgs, clientArgs []string) (srv, cli *execProc, retries int) {
	t.Helper()
	srv, cli, retries, err := runRdmacmPair(t, f, fabric, serverArgs, func(int) []string { return clientArgs })
	if err != nil {
		t.Fatal(err)
	}
	return srv, cli, retries
}

// Client retries of runRdmacmPair: at most rdmacmRetries, rdmacmPause
// apart (a server past awaitMainBlocked listens within a few hundred
// milliseconds even under load).
const (
	rdmacmRetries = 5
	rdmacmPause   = 300 * time.Millisecond
	rdmacmGrace   = 5 * time.Second // a server's wait after its client failed
)

// rdmacmRejected holds what each client says when its REQ is rejected
// (RDMA_CM_EVENT_REJECTED before ESTABLISHED), which is how a client
// that met a server not yet listening ends (the fabric answers a REQ for
// a service ID nobody listens on with REJ reason 8, invalid service ID,
// as rdmacm's agent does after real rxe's host, rxe_cm_rej.pcapng).
// The fabric's record of the exchange (its trace, its capture) is
// written only when it exits, after the server, so the client's own
// words decide.
var rdmacmRejected = []string{
	// rping's cma_event_handler: the event and its status, the REJ's
	// reason.
	"cma event RDMA_CM_EVENT_REJECTED, error 8\n",
	// perftest's rdma_client_connect (perftest_communication.c): the
	// event number, 8 being RDMA_CM_EVENT_REJECTED; its status is not
	// printed.
	"Unexpected CM event bl blka 8\n",
	// rdma_client (rdmacm-utils): rdma_connect on a synchronous ID fails
	// with ECONNREFUSED on REJECTED (librdmacm's ucma_complete).
	"rdma_connect: Connection refused\n",
}

// rejectedBeforeConnect reports whether client p ended because its REQ
// was rejected: it exited with a failure of its own (not killed by a
// signal: a crash is never retried) and said so on stderr.
func rejectedBeforeConnect(p *execProc) bool {
	if p.timedOut || p.code == 0 || p.code > 128 && p.code < 128+65 {
		return false
	}
	// What rping -v and perftest print once connected.
	for _, s := range []string{"ping data: ", " #bytes "} {
		if strings.Contains(p.stdout.String(), s) {
			return false
		}
	}
	for _, s := range rdmacmRejected {
		if strings.Contains(p.stderr.String(), s) {
			return true
		}
	}
	return false
}

// ended reports whether p has exited.
func (p *execProc) ended() bool {
	select {
	case <-p.done:
		return true
	default:
		return false
	}
}

// runRdmacmPair is rdmacmPair with the client's arguments of each try
// (0 first) and the failure as an error. The server can still meet its
// first REQ before it listens: the main thread of a loaded machine may
// wait in the drop-in's Go runtime for longer than awaitMainBlocked
// allows before rdma_listen. A harness on real rxe has the same race and
// retries the client; so does this, when the client was rejected before
// it connected (rejectedBeforeConnect) and the server still runs, up to
// rdmacmRetries times, logging each rejected client's output. Anything
// else ends both and is judged by the caller; each process stays bounded
// by startExec's execLimit and killed by PID at the test's end.
func runRdmacmPair(t *testing.T, f fabricEnv, fabric, serverArgs []string, clientArgs func(try int) []string) (srv, cli *execProc, retries int, err error) {
	t.Helper()
	nodes := append([]string{"--nodes", "server,client"}, fabric...)
	srv = startExec(t, f, append(append(append([]string{"--node", "server"}, nodes...), "--"), serverArgs...)...)
	awaitMainBlocked(t, srv)
	for try := 0; ; try++ {
		cli = startExec(t, f, append(append(append([]string{"--node", "client"}, nodes...), "--"), clientArgs(try)...)...)
		<-cli.done
		if try == rdmacmRetries || !rejectedBeforeConnect(cli) || srv.ended() {
			break
		}
		t.Logf("try %d: %v rejected before it connected (exit %d): retrying in %v\nstdout:\n%s\nstderr:\n%s",
			try+1, cli.cmd.Args, cli.code, rdmacmPause, cli.stdout.String(), cli.stderr.String())
		retries++
		time.Sleep(rdmacmPause)
	}
	// Both ended before either is judged: a server that waits for ever
	// is often told by what its client said. One whose client failed
	// will not finish: it is killed after rdmacmGrace, not at the bound.
	if cli.code != 0 {
		select {
		case <-srv.done:
		case <-time.After(rdmacmGrace):
			syscall.Kill(-srv.cmd.Process.Pid, syscall.SIGKILL)
			<-srv.done
			return srv, cli, retries, fmt.Errorf("%v failed (exit %d); the server still ran %v later: killed\nserver stdout:\n%s\nstderr:\n%s\nclient stdout:\n%s\nstderr:\n%s",
				cli.cmd.Args, cli.code, rdmacmGrace, srv.stdout.String(), srv.stderr.String(), cli.stdout.String(), cli.stderr.String())
		}
	}
	<-srv.done
	if srv.timedOut || cli.timedOut {
		return srv, cli, retries, fmt.Errorf("killed at the bound of %v: server %v, client %v\nserver (exit %d) stdout:\n%s\nstderr:\n%s\nclient (exit %d) stdout:\n%s\nstderr:\n%s",
			execLimit, srv.timedOut, cli.timedOut, srv.code, srv.stdout.String(), srv.stderr.String(), cli.code, cli.stdout.String(), cli.stderr.String())
	}
	return srv, cli, retries, nil
}

// perftestIdleWake is the environment of a fabric a perftest -R pair
// runs on. perftest's client connects its data QP as soon as the
// handshake over its first connection ends, while the server still has
// rdma_listen to call for it: if the server's process makes no call for
// ROCESIM_IDLE_WAKE of wall time (1 ms on a fabric: a loaded machine's
// scheduler), the fabric takes it as waiting, the REQ comes first and is
// rejected (reason 8), and perftest's retry of the connection uses the
// IDs it destroyed and crashes (seen in CI: exit 139, in
// TestExecPerftestRdmacm and in TestRdmacmPairRetry). A longer wake
// keeps the fabric's clock until the server has listened.
const perftestIdleWake = "ROCESIM_IDLE_WAKE=250ms"

// TestRdmacmPairRetry: runRdmacmPair starts again a client rejected
// before it connected, and only that one. Each program's first client
// asks for a port nobody listens on (REJ, reason 8, as when it comes
// before the server's rdma_listen), the second for the server's: the
// pair passes after exactly one retry, and for rping the capture holds
// the rejected REQ and its REJ before the exchange. A client that
// crashed after saying it was rejected, one that said so after it
// connected, and one that failed otherwise (no such address) are not
// retried.
func TestRdmacmPairRetry(t *testing.T) {
	needTools(t, "rping", "ib_send_bw", "rdma_server", "rdma_client")
	for _, c := range []struct {
		name                string
		server, first, then []string
	}{
		{"rping", []string{"rping", "-s", "-C", "1"}, []string{"rping", "-c", "-a", "10.0.0.1", "-p", "9999", "-C", "1"}, []string{"rping", "-c", "-a", "10.0.0.1", "-C", "1"}},
		{"ib_send_bw", []string{"ib_send_bw", "-R", "-n", "10"}, []string{"ib_send_bw", "-R", "-n", "10", "-p", "9999", "10.0.0.1"}, []string{"ib_send_bw", "-R", "-n", "10", "10.0.0.1"}},
		{"rdma_client", []string{"rdma_server"}, []string{"rdma_client", "-s", "10.0.0.1", "-p", "9999"}, []string{"rdma_client", "-s", "10.0.0.1"}},
	} {
		t.Run(c.name, func(t *testing.T) {
			f := newFabricEnv(t)
			f.env = []string{perftestIdleWake}
			pcap := filepath.Join(t.TempDir(), "retry.pcapng")
			srv, cli, retries, err := runRdmacmPair(t, f, []string{"--pcap", pcap}, c.server, func(try int) []string {
				if try == 0 {
					return c.first
				}
				return c.then
			})
			if err != nil {
				t.Fatal(err)
			}
			if retries != 1 || srv.code != 0 || cli.code != 0 {
				t.Fatalf("retries %d (want 1), server exit %d, client exit %d\nserver:\n%s%s\nclient:\n%s%s",
					retries, srv.code, cli.code, srv.stdout.String(), srv.stderr.String(), cli.stdout.String(), cli.stderr.String())
			}
			fabricTimes(t, f)
			msgs, _ := cmMessages(t, pcap)
			if len(msgs) < 3 || strings.Join(msgs[:3], " ") != "10.0.0.2>REQ 10.0.0.1>REJ 10.0.0.2>REQ" {
				t.Errorf("CM messages %v: want a REQ, its REJ, a REQ first", msgs)
			}
		})
	}
	rejected := "echo 'cma event RDMA_CM_EVENT_REJECTED, error 8' >&2; "
	for _, c := range []struct {
		name   string
		client []string
	}{
		{"crash", []string{"sh", "-c", rejected + "kill -SEGV $$"}},
		{"connected", []string{"sh", "-c", "echo 'ping data: rdma-ping-0: ABC'; " + rejected + "exit 255"}},
		{"no-address", []string{"rping", "-c", "-a", "10.0.0.9", "-C", "1"}},
	} {
		t.Run(c.name, func(t *testing.T) {
			f := newFabricEnv(t)
			// Retried, the second client would connect, and the pair pass.
			srv, cli, retries, err := runRdmacmPair(t, f, nil, []string{"rping", "-s", "-C", "1"}, func(try int) []string {
				if try == 0 {
					return c.client
				}
				return []string{"rping", "-c", "-a", "10.0.0.1", "-C", "1"}
			})
			if err == nil || retries != 0 || cli.code == 0 {
				t.Fatalf("retries %d (want 0), error %v, client exit %d, server exit %d", retries, err, cli.code, srv.code)
			}
			t.Logf("not retried: %v", err)
		})
	}
}

// TestExecPerftestRdmacm: perftest's ib_send_bw, ib_write_bw and
// ib_read_bw with -R (QPs connected by rdma_cm, data exchanged over
// it), server and client in two processes through rocesim exec: both
// pass, with their reports in the test log.
func TestExecPerftestRdmacm(t *testing.T) {
	tests := []string{"ib_send_bw", "ib_write_bw", "ib_read_bw"}
	needTools(t, tests...)
	for _, prog := range tests {
		t.Run(prog, func(t *testing.T) {
			f := newFabricEnv(t)
			f.env = []string{perftestIdleWake}
			srv, cli, _ := rdmacmPair(t, f, nil, []string{prog, "-R", "-n", "100"}, []string{prog, "-R", "-n", "100", "10.0.0.1"})
			for _, p := range []*execProc{srv, cli} {
				out := p.stdout.String()
				if p.code != 0 || !strings.Contains(out, "Data ex. method : rdma_cm") || !strings.Contains(out, " 65536      100 ") {
					t.Errorf("%v: exit %d\nstdout:\n%s\nstderr:\n%s", p.cmd.Args, p.code, out, p.stderr.String())
				}
			}
			t.Logf("%s -R client:\n%s", prog, cli.stdout.String())
		})
	}
}

// TestExecRdmaServerClient: rdma_server and rdma_client (rdmacm-utils),
// written with rdma_verbs.h's helpers over synchronous IDs
// (rdma_getaddrinfo, rdma_create_ep, rdma_get_request, rdma_reg_msgs,
// rdma_post_send, rdma_get_send_comp ...): both end 0.
func TestExecRdmaServerClient(t *testing.T) {
	needTools(t, "rdma_server", "rdma_client")
	f := newFabricEnv(t)
	srv, cli, _ := rdmacmPair(t, f, nil, []string{"rdma_server"}, []string{"rdma_client", "-s", "10.0.0.1"})
	for _, c := range []struct {
		p    *execProc
		name string
	}{{srv, "rdma_server"}, {cli, "rdma_client"}} {
		if c.p.code != 0 || !strings.Contains(c.p.stdout.String(), c.name+": end 0") {
			t.Errorf("%v: exit %d\nstdout:\n%s\nstderr:\n%s", c.p.cmd.Args, c.p.code, c.p.stdout.String(), c.p.stderr.String())
		}
	}
}

// TestExecRpingUDP: rping over the real-network transport (rocesim exec
// --transport udp), server at 127.0.0.21 and client at 127.0.0.22, each
// a RoCE v2 endpoint on real UDP in real time: five pings, and both
// exit 0 (rping ends its CM thread with pthread_cancel while it blocks
// in rdma_get_cm_event: the drop-in's wait must be cancellable there).
func TestExecRpingUDP(t *testing.T) {
	needTools(t, "rping")
	run := func(addr string, args ...string) *execProc {
		return startExec(t, fabricEnv{}, append([]string{"--transport", "udp", "--addr", addr, "--", "rping"}, args...)...)
	}
	srv := run("127.0.0.21", "-s", "-a", "127.0.0.21", "-C", "5", "-v")
	awaitMainBlocked(t, srv)
	cli := run("127.0.0.22", "-c", "-a", "127.0.0.21", "-C", "5", "-v").wait(t)
	srv.wait(t)
	for _, c := range []struct {
		p      *execProc
		prefix string
	}{{srv, "server ping data: rdma-ping-4: "}, {cli, "ping data: rdma-ping-4: "}} {
		if c.p.code != 0 || !strings.Contains(c.p.stdout.String(), c.prefix) {
			t.Errorf("%v: exit %d\nstdout:\n%s\nstderr:\n%s", c.p.cmd.Args, c.p.code, c.p.stdout.String(), c.p.stderr.String())
		}
	}
}

// TestDropinLibraryStaleRdmacm: the cache key follows librdmacm.so.1's
// sources too (its C, its map, and package rdmacm, which runs in
// libibverbs.so.1), so a change there rebuilds both libraries.
func TestDropinLibraryStaleRdmacm(t *testing.T) {
	root := t.TempDir()
	write := func(rel, text string) { writeFile(t, filepath.Join(root, rel), text) }
	write("go.mod", "module "+modulePath+"\n")
	write("dropin/ibverbs/libibverbs.map", "{};")
	for _, rel := range []string{"dropin/rdmacm/shim/rdmacm.c", "dropin/rdmacm/shim/librdmacm.map", "dropin/rdmacm/shim/rocesim_cm.h", "rdmacm/id.go"} {
		write(rel, "/* one */\n")
		h0, err := sourceHash(root)
		if err != nil {
			t.Fatal(err)
		}
		write(rel, "/* two */\n")
		if h, _ := sourceHash(root); h == h0 {
			t.Errorf("a changed %s kept the key %s", rel, h)
		}
	}
}

// TestExecExitConnected: testdata/exitconn.c's client returns from main
// with its connection up, without rdma_disconnect or rdma_destroy_id.
// As the kernel does when it closes the process's rdma_cm file, the
// drop-in destroys the IDs the program left at exit, and the server,
// another process on the fabric, gets DISCONNECTED at once (the
// client's DREQ on the fabric as it detaches), not silence until its
// QP timed out. A client killed by SIGKILL once connected runs no exit
// code at all, yet the kernel would still close its files: the fabric
// sends the DREQ the drop-in left it as the process's will, its comment
// saying so.
func TestExecExitConnected(t *testing.T) {
	bin := buildExitconn(t)
	for _, c := range []struct {
		name, flag string
		code       int    // the client's exit status (128+signal)
		comment    string // in the DREQ's capture comment
	}{
		{"exit", "-c", 0, "DREQ"},
		{"killed", "-k", 128 + int(syscall.SIGKILL), "process ended without detaching"},
	} {
		t.Run(c.name, func(t *testing.T) {
			f := newFabricEnv(t)
			pcap := filepath.Join(t.TempDir(), "exitconn.pcapng")
			srv, cli, _ := rdmacmPair(t, f, []string{"--pcap", pcap}, []string{bin, "-s", "7480"}, []string{bin, c.flag, "10.0.0.1", "7480"})
			want := "RDMA_CM_EVENT_CONNECT_REQUEST\nRDMA_CM_EVENT_ESTABLISHED\nRDMA_CM_EVENT_DISCONNECTED\n"
			if srv.code != 0 || srv.stdout.String() != want || cli.code != c.code || cli.stdout.String() != "established\n" {
				t.Fatalf("server exit %d, stdout %q (want %q), stderr:\n%s\nclient exit %d (want %d), stdout %q, stderr:\n%s",
					srv.code, srv.stdout.String(), want, srv.stderr.String(), cli.code, c.code, cli.stdout.String(), cli.stderr.String())
			}
			fabricTimes(t, f) // the fabric has exited: the capture is complete
			msgs, comments := cmMessages(t, pcap)
			i := slices.Index(msgs, "10.0.0.2>DREQ")
			if i < 0 {
				t.Fatalf("CM messages %v: no DREQ from the client", msgs)
			}
			if !strings.Contains(comments[i], c.comment) {
				t.Errorf("the DREQ's comment %q lacks %q", comments[i], c.comment)
			}
			if n := strings.Count(strings.Join(msgs, " "), "10.0.0.2>RTU"); n != 1 {
				t.Errorf("CM messages %v: %d RTUs from the client, want 1", msgs, n)
			}
		})
	}
}

// TestExecKilledUDP: on the real-network transport no daemon keeps a
// will, so rocesim exec does: testdata/exitconn.c's client, killed by
// SIGKILL once connected over UDP (127.0.0.32), leaves exec the DREQ its
// ID would send, which exec sends from the client's address once the
// program is gone, as the client's kernel would have; the server
// (127.0.0.31, another rocesim exec) gets DISCONNECTED at once. A client
// that returns from main sends its own DREQ and exec sends nothing.
func TestExecKilledUDP(t *testing.T) {
	bin := buildExitconn(t)
	run := func(addr string, args ...string) *execProc {
		return startExec(t, fabricEnv{}, append([]string{"--transport", "udp", "--addr", addr, "--", bin}, args...)...)
	}
	for _, c := range []struct {
		flag, port string
		code       int    // the client's exit status
		said       string // in the client's exec's stderr; "" for no will sent
	}{
		{"-k", "7483", 128 + int(syscall.SIGKILL), "ended without closing its device: sent 1 of its rdma_cm farewells (1 frames) from 127.0.0.32:4791"},
		{"-c", "7484", 0, ""},
	} {
		t.Run(c.flag, func(t *testing.T) {
			srv := run("127.0.0.31", "-s", c.port)
			var cli *execProc
			for try := 0; ; try++ {
				// Until the server listens: its first REQs may meet a
				// REJ (no listener yet), which exitconn says as rping.
				cli = run("127.0.0.32", c.flag, "127.0.0.31", c.port).wait(t)
				if try == rdmacmRetries || !rejectedBeforeConnect(cli) {
					break
				}
				time.Sleep(rdmacmPause)
			}
			srv.wait(t)
			want := "RDMA_CM_EVENT_CONNECT_REQUEST\nRDMA_CM_EVENT_ESTABLISHED\nRDMA_CM_EVENT_DISCONNECTED\n"
			if srv.code != 0 || srv.stdout.String() != want || cli.code != c.code || cli.stdout.String() != "established\n" {
				t.Fatalf("server exit %d, stdout %q (want %q), stderr:\n%s\nclient exit %d (want %d), stdout %q, stderr:\n%s",
					srv.code, srv.stdout.String(), want, srv.stderr.String(), cli.code, c.code, cli.stdout.String(), cli.stderr.String())
			}
			if sent := strings.Contains(cli.stderr.String(), "rdma_cm farewells"); sent != (c.said != "") || !strings.Contains(cli.stderr.String(), c.said) {
				t.Errorf("the client's exec said:\n%s\nwant %q", cli.stderr.String(), c.said)
			}
		})
	}
}

// buildExitconn builds testdata/exitconn.c against the drop-in libraries.
func buildExitconn(t *testing.T) string {
	t.Helper()
	execSetup(t)
	needTools(t, cc())
	lib, err := cachedLibrary()
	if err != nil {
		t.Fatal(err)
	}
	bin := filepath.Join(t.TempDir(), "exitconn")
	if out, err := exec.Command(cc(), "-Wall", "-Werror", "-o", bin, filepath.Join("testdata", "exitconn.c"),
		"-L"+lib, "-l:librdmacm.so.1", "-l:libibverbs.so.1").CombinedOutput(); err != nil {
		t.Fatalf("building exitconn: %v\n%s", err, out)
	}
	return bin
}

// TestExecProgramGone: a node whose program has left still has its
// kernel, which answers CM messages for it (procfabric's kernel.go): an
// rping client dialling a node whose program (ibv_devinfo) opened the
// device and exited gets REJECTED at once with reason 8, invalid service
// ID, as a Linux host with no listener on the port sends, rather than
// sending its REQ 16 times and giving up UNREACHABLE; the fabric's
// summary counts the answer.
func TestExecProgramGone(t *testing.T) {
	needTools(t, "rping", "ibv_devinfo")
	f := newFabricEnv(t)
	nodes := []string{"--nodes", "server,client"}
	gone := startExec(t, f, append(append([]string{"--node", "server"}, nodes...), "--", "ibv_devinfo")...).wait(t)
	if gone.code != 0 {
		t.Fatalf("ibv_devinfo: exit %d\n%s", gone.code, gone.stderr.String())
	}
	cli := startExec(t, f, append(append([]string{"--node", "client"}, nodes...), "--", "rping", "-c", "-a", "10.0.0.1", "-C", "1", "-v")...).wait(t)
	if cli.code == 0 || !strings.Contains(cli.stderr.String()+cli.stdout.String(), "RDMA_CM_EVENT_REJECTED, error 8") {
		t.Errorf("rping to a node with no program: exit %d\nstdout:\n%s\nstderr:\n%s", cli.code, cli.stdout.String(), cli.stderr.String())
	}
	// The fabric writes its summary as it exits, once both have left.
	end := time.Now().Add(10 * time.Second)
	for !strings.Contains(f.log(), "fabric "+f.name+": virtual time") && time.Now().Before(end) {
		time.Sleep(20 * time.Millisecond)
	}
	if log := f.log(); !strings.Contains(log, "CM messages answered by its kernel)") || strings.Contains(log, "(0 CM messages") {
		t.Errorf("the fabric's summary does not count the kernel's REJ:\n%s", log)
	}
}
