package conformance

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"
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
	dir := t.TempDir()
	bin := filepath.Join(dir, "rocesim")
	build := exec.CommandContext(ctx, "go", "build", "-o", bin, "../cmd/rocesim")
	build.Env = append(os.Environ(), "CGO_ENABLED=0")
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("go build rocesim: %v\n%s", err, out)
	}
	wd, _ := os.Getwd()
	env := append(os.Environ(), "XDG_CACHE_HOME="+filepath.Join(dir, "cache"), "ROCESIM_SRC="+filepath.Dir(wd))
	prep := exec.CommandContext(ctx, bin, "exec", "--transport", "udp", "--addr", "127.0.0.23", "--", "true")
	prep.Env = env
	if out, err := prep.CombinedOutput(); err != nil {
		t.Fatalf("building the drop-in libraries: %v\n%s", err, out)
	}
	// host runs rping on the drop-in at 10.0.0.2 in the namespace.
	host := func(ns string, args ...string) *exec.Cmd {
		c := exec.CommandContext(ctx, "ip", append([]string{"netns", "exec", ns, bin, "exec", "--transport", "udp",
			"--addr", "10.0.0.2", "--routable", "--", "rping"}, args...)...)
		c.Env = env
		return c
	}

	t.Run("host-client", func(t *testing.T) {
		ns, ports, a, _, sw := udpRig(t, "r", filepath.Join(logs, "interop-rping-host-client.pcapng"))
		vm, err := Boot(ctx, VMConfig{Name: "rxe", IP: "10.0.0.1", Peer: "10.0.0.2", LocalPort: ports[0],
			RemotePort: int(a.LocalAddr().Port()), Cmd: "rping -s -a 10.0.0.1 -C 5 -v",
			Timeout: 5 * time.Minute, LogPath: filepath.Join(logs, "rxe-rping-server.log")})
		if err != nil {
			t.Fatal(err)
		}
		defer vm.Stop()
		// Until the guest's rping listens, its kernel rejects the REQ
		// (reason 8): try again, each try bounded by ctx.
		var out []byte
		for ctx.Err() == nil {
			out, err = host(ns.Name, "-c", "-a", "10.0.0.1", "-C", "5", "-v").CombinedOutput()
			if err == nil || !strings.Contains(string(out), "RDMA_CM_EVENT_REJECTED") {
				break
			}
			time.Sleep(500 * time.Millisecond)
		}
		if err != nil || !strings.Contains(string(out), "ping data: rdma-ping-4: ") {
			t.Fatalf("host client: %v\n%s\nswitch %+v", err, out, sw.Stats())
		}
		r, err := vm.Wait()
		if err != nil || r.ExitCode != 0 || !strings.Contains(r.Output, "server ping data: rdma-ping-4: ") {
			t.Errorf("guest server: exit %d, %v; console:\n%s", r.ExitCode, err, r.Output)
		}
		t.Logf("host client:\n%s", out)
	})

	t.Run("guest-client", func(t *testing.T) {
		ns, ports, a, _, sw := udpRig(t, "s", filepath.Join(logs, "interop-rping-guest-client.pcapng"))
		srv := host(ns.Name, "-s", "-a", "10.0.0.2", "-C", "5", "-v")
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
			Cmd:        "n=0; until rping -c -a 10.0.0.2 -C 5 -v; do n=$((n+1)); [ $n -ge 30 ] && exit 97; sleep 1; done",
			Timeout:    5 * time.Minute, LogPath: filepath.Join(logs, "rxe-rping-client.log")})
		if err != nil {
			t.Fatal(err)
		}
		defer vm.Stop()
		r, err := vm.Wait()
		if err != nil || r.ExitCode != 0 || !strings.Contains(r.Output, "ping data: rdma-ping-4: ") {
			t.Fatalf("guest client: exit %d, %v; console:\n%s\nswitch %+v", r.ExitCode, err, r.Output, sw.Stats())
		}
		select {
		case err = <-done:
			exited = true
		case <-time.After(30 * time.Second):
			t.Fatalf("the host's rping server did not exit after the guest's client left:\n%s", sout.String())
		}
		if err != nil || !strings.Contains(sout.String(), "server ping data: rdma-ping-4: ") {
			t.Errorf("host server: %v\n%s", err, sout.String())
		}
	})
}
