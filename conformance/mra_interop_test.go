package conformance

import (
	"context"
	"crypto/sha256"
	"fmt"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"
)

// cmAgentHost is the rdma_cm agent Prepare built on the host
// (conformance/agent/cmagent.c, linked with -lrdmacm): under rocesim
// exec it runs on the drop-in librdmacm.so.1.
func cmAgentHost() string {
	csum := sha256.Sum256(cmAgentSource)
	return filepath.Join(CacheDir(), fmt.Sprintf("cmagent-%x", csum[:6]))
}

// TestInteropLateAccept: a server that accepts 15 s late (cmagent's
// later mode: longer than two REQ timeouts), the client cmagent's, one
// side the model on the drop-in libraries over the real-network
// transport (10.0.0.2), the other real rxe in a guest (10.0.0.1). In
// both directions the client's second REQ gets the server's MRA, and
// the client sends no third REQ before the late REP: real rxe's kernel
// honours the model's MRA, the model honours the kernel's. Root only,
// as TestInteropRping.
func TestInteropLateAccept(t *testing.T) {
	logs := needNetns(t)
	ctx, cancel := context.WithTimeout(t.Context(), 10*time.Minute)
	defer cancel()
	bin := rocesimBinary(ctx, t)
	env := dropinEnv(ctx, t, bin)
	host := func(ns string, args ...string) *exec.Cmd {
		c := exec.CommandContext(ctx, "ip", append([]string{"netns", "exec", ns, bin, "exec", "--transport", "udp",
			"--addr", "10.0.0.2", "--routable", "--", cmAgentHost()}, args...)...)
		c.Env = env
		return c
	}
	// check: after any refused connect, the active side sent its REQ
	// twice, the second answered by the MRA, then came the REP, once,
	// and the RTU. (The drop-in, accepting after its program slept
	// 15 s, used to send its REP three times at once: built at the
	// instant of the REQ's resend, its resend timer fired twice as its
	// clock caught up with the wall clock; dropin/ibverbs
	// TestLateAcceptUDP.)
	check := func(t *testing.T, capPath, active, passive string) {
		t.Helper()
		names := cmNames(cmExchange(t, capPath))
		t.Logf("CM messages: %s", strings.Join(names, " "))
		// Connects refused (REJ 8) before the server listened do not
		// count.
		for i, n := range names {
			if strings.HasSuffix(n, ">REJ") {
				names = names[i+1:]
			}
		}
		got := strings.Join(names, " ")
		want := []string{active + ">REQ", active + ">REQ", passive + ">MRA", passive + ">REP"}
		i := strings.Index(got, strings.Join(want, " "))
		if i < 0 || strings.Contains(got[:i], ">REQ") {
			t.Errorf("CM messages %s: want them to start %v (no third REQ: the MRA honoured)", got, want)
		}
		if n := strings.Count(got, passive+">REP"); n != 1 {
			t.Errorf("CM messages %s: %d REPs, want 1 (a kernel sends one at rdma_accept)", got, n)
		}
		if !strings.Contains(got, active+">RTU") {
			t.Errorf("CM messages %s: no RTU", got)
		}
	}

	t.Run("model-server", func(t *testing.T) {
		capPath := filepath.Join(logs, "interop-late-model-server.pcapng")
		ns, ports, a, _, sw := udpRig(t, "m", capPath)
		srv := host(ns.Name, "later", "10.0.0.2", "7473", "1", "64")
		var sout strings.Builder
		srv.Stdout, srv.Stderr = &sout, &sout
		// rocesim exec runs the agent as its child: both in a process
		// group of their own, which the test ends (the later server
		// loops forever).
		srv.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
		srv.Cancel = func() error { return syscall.Kill(-srv.Process.Pid, syscall.SIGKILL) }
		if err := srv.Start(); err != nil {
			t.Fatal(err)
		}
		done := make(chan error, 1)
		go func() { done <- srv.Wait() }()
		defer func() {
			syscall.Kill(-srv.Process.Pid, syscall.SIGKILL) // the group this test made, by its ID
			<-done
		}()
		vm, err := Boot(ctx, VMConfig{Name: "rxe", IP: "10.0.0.1", Peer: "10.0.0.2", LocalPort: ports[0],
			RemotePort: int(a.LocalAddr().Port()),
			Cmd: "n=0; until " + CMAgentPath + " client 10.0.0.2 7473 1 64 >/tmp/c 2>&1; grep -q 'completions 1' /tmp/c; do " +
				"cat /tmp/c; n=$((n+1)); [ $n -ge 30 ] && exit 97; sleep 1; done; cat /tmp/c",
			Timeout: 5 * time.Minute, LogPath: filepath.Join(logs, "rxe-late-client.log")})
		if err != nil {
			t.Fatal(err)
		}
		defer vm.Stop()
		r, err := vm.Wait()
		if err != nil || r.ExitCode != 0 || !strings.Contains(r.Output, "client completions 1 success 1") {
			t.Fatalf("guest client: exit %d, %v; console:\n%s\nswitch %+v", r.ExitCode, err, r.Output, sw.Stats())
		}
		time.Sleep(time.Second) // the last MADs reach the capture
		sw.Close()
		check(t, capPath, "a", "b")
	})

	t.Run("rxe-server", func(t *testing.T) {
		capPath := filepath.Join(logs, "interop-late-rxe-server.pcapng")
		ns, ports, a, _, sw := udpRig(t, "n", capPath)
		vm, err := Boot(ctx, VMConfig{Name: "rxe", IP: "10.0.0.1", Peer: "10.0.0.2", LocalPort: ports[0],
			RemotePort: int(a.LocalAddr().Port()), Cmd: "timeout 120 " + CMAgentPath + " later 10.0.0.1 7473 1 64",
			Timeout: 5 * time.Minute, LogPath: filepath.Join(logs, "rxe-late-server.log")})
		if err != nil {
			t.Fatal(err)
		}
		defer vm.Stop()
		// A REQ sent before the guest's rxe is up goes unanswered and
		// is sent again 6 s later, which the exchange checked below
		// does not expect (CI: REQ, REQ, REQ, then the MRA): wait for
		// the guest to say its device is ready.
		if _, _, err := vm.waitLine(ctx, 0, func(l string) bool { return strings.Contains(l, markerReady) }); err != nil {
			t.Fatal(err)
		}
		// Until the guest's agent listens, its kernel rejects the REQ
		// (reason 8): try again, each try bounded by ctx.
		var out []byte
		for ctx.Err() == nil {
			out, err = host(ns.Name, "client", "10.0.0.1", "7473", "1", "64").CombinedOutput()
			if !strings.Contains(string(out), "RDMA_CM_EVENT_REJECTED") {
				break
			}
			time.Sleep(500 * time.Millisecond)
		}
		if err != nil || !strings.Contains(string(out), "client completions 1 success 1") {
			t.Fatalf("host client: %v\n%s\nswitch %+v", err, out, sw.Stats())
		}
		time.Sleep(time.Second)
		sw.Close()
		check(t, capPath, "b", "a")
	})
}
