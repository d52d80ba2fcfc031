package conformance

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/rocesim/rocesim/internal/tooltest"
)

// TestInteropRping: unmodified rping on the host, on the drop-in
// librdmacm.so.1 and libibverbs.so.1 over the real-network transport
// (rocesim exec --transport udp, 10.0.0.2 in udpRig's namespace),
// against rping on real rxe in a guest at 10.0.0.1, in both directions:
// the host's client against the guest's server, then the guest's client
// against the host's server; five pings each, both ends pass. The CM
// exchange crosses between the model's rdmacm and the guest kernel's
// ib_cm and rdma_cm. Root only, as TestInteropUDP.
func TestInteropRping(t *testing.T) {
	logs := needNetns(t)
	ctx, cancel := context.WithTimeout(t.Context(), 15*time.Minute)
	defer cancel()
	// rocesim exec builds both drop-in libraries into its cache (a
	// throwaway one here) and runs the program on them.
	bin := rocesimBinary(ctx, t)
	env := dropinEnv(ctx, t, bin)
	// host runs rping on the drop-in at 10.0.0.2 in the namespace.
	host := func(ns string, args ...string) *exec.Cmd {
		c := exec.CommandContext(ctx, "ip", append([]string{"netns", "exec", ns, bin, "exec", "--transport", "udp",
			"--addr", "10.0.0.2", "--routable", "--", "rping"}, args...)...)
		c.Env = env
		return c
	}

	// -q: both ends make their QPs with ibv_create_qp and move them with
	// rdma_init_qp_attr, the client answering CONNECT_RESPONSE with
	// rdma_establish (UCX's way): the guest's kernel rdma_cm runs that
	// path for its rping, the model's for the host's.
	for _, q := range []struct{ name, opt string }{{"", ""}, {"-selfqp", "-q"}} {
		interopRping(ctx, t, logs, host, q.name, q.opt)
	}
}

// interopRping is TestInteropRping's two directions, with opt (if not
// empty) given to rping on both ends.
func interopRping(ctx context.Context, t *testing.T, logs string, host func(ns string, args ...string) *exec.Cmd, name, opt string) {
	with := func(args ...string) []string {
		if opt != "" {
			args = append(args, opt)
		}
		return args
	}
	sh := ""
	if opt != "" {
		sh = " " + opt
	}
	t.Run("host-client"+name, func(t *testing.T) {
		ns, ports, a, _, sw := udpRig(t, "r", filepath.Join(logs, "interop-rping-host-client"+name+".pcapng"))
		vm, err := Boot(ctx, VMConfig{Name: "rxe", IP: "10.0.0.1", Peer: "10.0.0.2", LocalPort: ports[0],
			RemotePort: int(a.LocalAddr().Port()), Cmd: "rping -s -a 10.0.0.1 -C 5 -v" + sh,
			Timeout: 5 * time.Minute, LogPath: filepath.Join(logs, "rxe-rping-server"+name+".log")})
		if err != nil {
			t.Fatal(err)
		}
		defer vm.Stop()
		// A REQ sent before the guest's rxe is up goes unanswered for a
		// REQ timeout (6 s): wait for the guest's device first.
		if _, _, err := vm.waitLine(ctx, 0, func(l string) bool { return strings.Contains(l, markerReady) }); err != nil {
			t.Fatal(err)
		}
		// Until the guest's rping listens, its kernel rejects the REQ
		// (reason 8): try again, each try bounded by ctx.
		var out []byte
		for ctx.Err() == nil {
			out, err = host(ns.Name, with("-c", "-a", "10.0.0.1", "-C", "5", "-v")...).CombinedOutput()
			if err == nil || !strings.Contains(string(out), "RDMA_CM_EVENT_REJECTED") {
				break
			}
			time.Sleep(500 * time.Millisecond)
		}
		var exit *exec.ExitError
		if errors.As(err, &exit) && tooltest.RpingExitRace(string(out), exit.ExitCode()) {
			t.Logf("host client: rping's own exit race (its CM thread came back for an event after the main thread destroyed the channel), all pings done: %v", err)
			err = nil
		}
		if err != nil || !strings.Contains(string(out), "ping data: rdma-ping-4: ") {
			t.Fatalf("host client: %v\n%s\nswitch %+v", err, out, sw.Stats())
		}
		r, err := vm.Wait()
		if err == nil && tooltest.RpingExitRace(r.Output, r.ExitCode) {
			// The same race in rping on real rxe: the guest's libibverbs
			// and librdmacm are Debian's, not the model's.
			t.Logf("guest server: rping's own exit race, all pings done: exit %d", r.ExitCode)
			r.ExitCode = 0
		}
		if err != nil || r.ExitCode != 0 || !strings.Contains(r.Output, "server ping data: rdma-ping-4: ") {
			t.Errorf("guest server: exit %d, %v; console:\n%s", r.ExitCode, err, r.Output)
		}
		t.Logf("host client:\n%s", out)
	})

	t.Run("guest-client"+name, func(t *testing.T) {
		ns, ports, a, _, sw := udpRig(t, "s", filepath.Join(logs, "interop-rping-guest-client"+name+".pcapng"))
		srv := host(ns.Name, with("-s", "-a", "10.0.0.2", "-C", "5", "-v")...)
		var sout strings.Builder
		srv.Stdout, srv.Stderr = &sout, &sout
		if err := srv.Start(); err != nil {
			t.Fatal(err)
		}
		done := make(chan error, 1)
		go func() { done <- srv.Wait() }()
		exited := false
		defer func() {
			if !exited {
				srv.Process.Kill() // by its PID
				<-done
			}
		}()
		vm, err := Boot(ctx, VMConfig{Name: "rxe", IP: "10.0.0.1", Peer: "10.0.0.2", LocalPort: ports[0],
			RemotePort: int(a.LocalAddr().Port()),
			// Until the host's server listens its REQ is rejected: try
			// again, but not after a run that pinged five times and
			// then lost rping's exit race (its status is the run's).
			Cmd: "n=0; while :; do out=$(rping -c -a 10.0.0.2 -C 5 -v" + sh + " 2>&1); rc=$?; echo \"$out\"; " +
				"[ $rc -eq 0 ] && exit 0; case \"$out\" in *'rdma-ping-4: '*) exit $rc;; esac; " +
				"n=$((n+1)); [ $n -ge 30 ] && exit 97; sleep 1; done",
			Timeout: 5 * time.Minute, LogPath: filepath.Join(logs, "rxe-rping-client"+name+".log")})
		if err != nil {
			t.Fatal(err)
		}
		defer vm.Stop()
		r, err := vm.Wait()
		if err == nil && tooltest.RpingExitRace(r.Output, r.ExitCode) {
			t.Logf("guest client: rping's own exit race, all pings done: exit %d", r.ExitCode)
			r.ExitCode = 0
		}
		if err != nil || r.ExitCode != 0 || !strings.Contains(r.Output, "ping data: rdma-ping-4: ") {
			t.Fatalf("guest client: exit %d, %v; console:\n%s\nswitch %+v", r.ExitCode, err, r.Output, sw.Stats())
		}
		select {
		case err = <-done:
			exited = true
		case <-time.After(30 * time.Second):
			t.Fatalf("the host's rping server did not exit after the guest's client left:\n%s", sout.String())
		}
		if err != nil && tooltest.RpingExitRace(sout.String(), srv.ProcessState.ExitCode()) {
			t.Logf("host server: rping's own exit race, all pings done: %v", err)
			err = nil
		}
		if err != nil || !strings.Contains(sout.String(), "server ping data: rdma-ping-4: ") {
			t.Errorf("host server: %v\n%s", err, sout.String())
		}
	})
}

// rocesimBinary builds cmd/rocesim into the test's temporary directory.
func rocesimBinary(ctx context.Context, t *testing.T) string {
	t.Helper()
	bin := filepath.Join(t.TempDir(), "rocesim")
	build := exec.CommandContext(ctx, "go", "build", "-o", bin, "../cmd/rocesim")
	build.Env = append(os.Environ(), "CGO_ENABLED=0")
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("go build rocesim: %v\n%s", err, out)
	}
	return bin
}

// dropinEnv has rocesim exec (bin) build both drop-in libraries into a
// cache of the test's own and returns the environment that finds them
// there; dropinDir(env) is their directory.
func dropinEnv(ctx context.Context, t *testing.T, bin string) []string {
	t.Helper()
	wd, _ := os.Getwd()
	env := append(os.Environ(), "XDG_CACHE_HOME="+filepath.Join(t.TempDir(), "cache"), "ROCESIM_SRC="+filepath.Dir(wd))
	prep := exec.CommandContext(ctx, bin, "exec", "--transport", "udp", "--addr", "127.0.0.23", "--", "true")
	prep.Env = env
	if out, err := prep.CombinedOutput(); err != nil {
		t.Fatalf("building the drop-in libraries: %v\n%s", err, out)
	}
	return env
}

// modelAndRxe builds the C program src (linked with libs against
// rdma-core's sonames) and runs it twice: on the drop-in libraries, with
// env added and args, and on real rxe in a guest, with guestArgs. It
// returns what each printed (the guest's between two markers on its
// console). The model's run is bounded by ctx, the guest's by its boot's
// timeout.
func modelAndRxe(ctx context.Context, t *testing.T, src string, libs, env []string, args []string, guestArgs string) (model, rxe string) {
	t.Helper()
	return modelAndRxeAfter(ctx, t, "", src, libs, env, args, guestArgs)
}

// modelAndRxeAfter is modelAndRxe with prep, shell commands the guest
// runs before the program (its own setting up: an address, say).
func modelAndRxeAfter(ctx context.Context, t *testing.T, prep, src string, libs, env []string, args []string, guestArgs string) (model, rxe string) {
	t.Helper()
	denv := dropinEnv(ctx, t, rocesimBinary(ctx, t))
	bin, prog := buildProgram(t, src, libs...)
	run := exec.CommandContext(ctx, bin, args...)
	run.Env = append(append(os.Environ(), "LD_LIBRARY_PATH="+dropinDir(t, denv)), env...)
	out, err := run.CombinedOutput()
	name := filepath.Base(bin)
	if err != nil {
		t.Fatalf("%s on the model: %v\n%s", name, err, out)
	}
	ports, err := FreeUDPPorts(2)
	if err != nil {
		t.Fatal(err)
	}
	vm, err := Boot(ctx, VMConfig{Name: "rxe", IP: "10.0.0.1", LocalPort: ports[0], RemotePort: ports[1],
		Cmd:   fmt.Sprintf("%s\necho PROGRAM-BEGIN; /%s %s; echo PROGRAM-END $?", prep, name, guestArgs),
		Files: map[string][]byte{"/" + name: prog}, Timeout: 5 * time.Minute,
		LogPath: filepath.Join(logDir(t), "rxe-"+name+".log")})
	if err != nil {
		t.Fatal(err)
	}
	defer vm.Stop()
	r, err := vm.Wait()
	if err != nil {
		t.Fatalf("guest: %v\n%s", err, r.Output)
	}
	_, rest, _ := strings.Cut(r.Output, "PROGRAM-BEGIN\n")
	rxe, _, ok := strings.Cut(rest, "PROGRAM-END")
	if !ok {
		t.Fatalf("no %s output on the guest's console:\n%s", name, r.Output)
	}
	return string(out), rxe
}

// TestRdmacmMisuseRxe: the misuses of cmd/rocesim's cm_misuse.c give the
// same lines on real rxe, in a guest with rdma-core's librdmacm (--real:
// each misuse in a child process), as on the drop-in librdmacm.so.1 (one
// process, two devices): return values and errnos, the event,
// rdma_destroy_id waiting for another thread's ack; where rdma-core's
// librdmacm crashes (a NULL ID, ...), the drop-in's EINVAL.
func TestRdmacmMisuseRxe(t *testing.T) {
	needHarness(t)
	ctx, cancel := context.WithTimeout(t.Context(), 10*time.Minute)
	defer cancel()
	// Two devices for the model; on the guest, --real: each misuse that
	// crashes rdma-core's librdmacm in a child process.
	mout, rxe := modelAndRxe(ctx, t, "../cmd/rocesim/testdata/cm_misuse.c", []string{"-lrdmacm", "-libverbs", "-lpthread"},
		[]string{"ROCESIM_DEVICES=2"}, nil, "--real")
	// Call by call: the same answer, or, where rdma-core's librdmacm
	// crashed, EINVAL on the model. The model answers every call; real
	// rxe's run leaves out create_id_null_out (rdma-core writes *id
	// unchecked).
	answers := map[string]string{}
	for _, l := range strings.Split(strings.TrimSpace(mout), "\n") {
		name, rest, _ := strings.Cut(l, " ")
		answers[name] = rest
	}
	crashed, seen := 0, map[string]bool{"create_id_null_out": true}
	for _, l := range strings.Split(strings.TrimSpace(strings.ReplaceAll(rxe, "\r", "")), "\n") {
		name, r, _ := strings.Cut(strings.TrimSpace(l), " ")
		if strings.HasPrefix(name, "[") {
			continue // a kernel message on the console
		}
		seen[name] = true
		m, ok := answers[name]
		switch {
		case !ok:
			t.Errorf("%s: real rxe %q, the model has no answer", name, r)
		case r == "crash":
			crashed++
			if m != "-1 EINVAL" {
				t.Errorf("%s: rdma-core crashed, the model says %q, want -1 EINVAL", name, m)
			}
		case r != m:
			t.Errorf("%s: real rxe %q, model %q", name, r, m)
		}
	}
	for name, m := range answers {
		if !seen[name] {
			t.Errorf("%s: the model answers %q, real rxe's run did not get there", name, m)
		}
	}
	t.Logf("cm_misuse on real rxe (%d calls crash rdma-core's librdmacm):\n%s\non the model:\n%s", crashed, rxe, mout)
}
