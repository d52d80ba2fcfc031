package conformance

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"
)

// needHarness prepares the harness or decides the test cannot run. With
// ROCESIM_CONFORMANCE=1 or CI=true (where .ci/run has installed it) a
// host that is not prepared fails the test. Elsewhere the test runs when
// conformance/install.sh has prepared this host, and skips when not.
func needHarness(t *testing.T) Images {
	t.Helper()
	required := os.Getenv("ROCESIM_CONFORMANCE") == "1" || os.Getenv("CI") == "true"
	if testing.Short() && !required {
		t.Skip("boots real rdma_rxe VMs under QEMU")
	}
	t0 := time.Now()
	im, err := Prepare()
	if errors.Is(err, ErrNotInstalled) {
		if !required {
			t.Skipf("%v\nboots real rdma_rxe VMs under QEMU: run conformance/install.sh (as root) or `make conformance`", err)
		}
		t.Fatalf("%v\nrun conformance/install.sh (as root) first", err)
	}
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("kernel %s, images ready in %v: %s, %s", im.KernelVersion, time.Since(t0).Round(time.Millisecond), im.Kernel, im.Initramfs)
	return im
}

// TestTwoRxeVMsPingPong boots two VMs on one link and runs
// ibv_rc_pingpong (an RC SEND ping-pong) between their rxe0 devices over
// the RoCE v2 IPv4 GIDs.
func TestTwoRxeVMsPingPong(t *testing.T) {
	needHarness(t)
	ports, err := FreeUDPPorts(2)
	if err != nil {
		t.Fatal(err)
	}
	// The client waits for the peer's ARP/ping, then retries until the
	// server listens on its TCP port (it may still be booting).
	server := `ibv_rc_pingpong -d rxe0 -g $RXE_GID -n 5`
	client := `n=0; until ping -c1 -W1 $rxe_peer >/dev/null 2>&1; do n=$((n+1)); [ $n -ge 60 ] && exit 98; done
n=0; until ibv_rc_pingpong -d rxe0 -g $RXE_GID -n 5 $rxe_peer; do n=$((n+1)); [ $n -ge 30 ] && exit 99; sleep 1; done`
	logs := t.TempDir()
	cfgs := []VMConfig{
		{Name: "server", IP: "10.0.0.1", Peer: "10.0.0.2", LocalPort: ports[0], RemotePort: ports[1], Cmd: server, LogPath: filepath.Join(logs, "server.log"), Timeout: 5 * time.Minute},
		{Name: "client", IP: "10.0.0.2", Peer: "10.0.0.1", LocalPort: ports[1], RemotePort: ports[0], Cmd: client, LogPath: filepath.Join(logs, "client.log"), Timeout: 5 * time.Minute},
	}
	results, errs := runVMs(t, cfgs)
	for i, cfg := range cfgs {
		r := results[i]
		t.Logf("%s: READY after %v, exit %d", cfg.Name, r.Ready.Round(time.Millisecond), r.ExitCode)
		if errs[i] != nil || r.ExitCode != 0 {
			t.Errorf("%s: exit %d, err %v; console:\n%s", cfg.Name, r.ExitCode, errs[i], r.Output)
			continue
		}
		for _, line := range strings.Split(r.Output, "\n") {
			if strings.Contains(line, "ROCESIM-RXE") || strings.Contains(line, " in ") || strings.Contains(line, "GID ") {
				t.Logf("%s: %s", cfg.Name, line)
			}
		}
		// ibv_rc_pingpong prints e.g. "8192000 bytes in 0.01 seconds = ..."
		// and "5 iters in 0.01 seconds = ..." on both sides.
		for _, want := range []string{"bytes in", "5 iters in", "GID "} {
			if !strings.Contains(r.Output, want) {
				t.Errorf("%s: output lacks %q; console:\n%s", cfg.Name, want, r.Output)
			}
		}
	}
}

// runVMs boots the VMs together, waits for all of them, and returns each
// one's result and Wait error in the order of cfgs.
func runVMs(t *testing.T, cfgs []VMConfig) ([]Result, []error) {
	t.Helper()
	t0 := time.Now()
	results := make([]Result, len(cfgs))
	errs := make([]error, len(cfgs))
	var wg sync.WaitGroup
	for i, cfg := range cfgs {
		vm, err := Boot(t.Context(), cfg)
		if err != nil {
			t.Fatal(err) // the VMs already started stop when t.Context() ends
		}
		wg.Go(func() { results[i], errs[i] = vm.Wait() })
	}
	wg.Wait()
	t.Logf("%d VMs done after %v", len(cfgs), time.Since(t0).Round(time.Millisecond))
	return results, errs
}
