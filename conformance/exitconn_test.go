package conformance

import (
	"context"
	"fmt"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// TestExitTellsThePeerRxe: what a connected rdma_cm client's end does to
// its server on real rxe, the facts cmd/rocesim's TestExecExitConnected
// holds the drop-in to. The client (testdata/exitconn.c) returns from
// main without rdma_disconnect or rdma_destroy_id (-c), or is killed by
// SIGKILL (-k); either way the kernel closes its rdma_cm file and
// destroys its IDs, and the server, another process on the same guest
// (rxe's loopback), gets CONNECT_REQUEST, ESTABLISHED, DISCONNECTED and
// exits 0. The drop-in does the first at exit and the second through its
// fabric will.
func TestExitTellsThePeerRxe(t *testing.T) {
	needHarness(t)
	logs := logDir(t)
	ctx, cancel := context.WithTimeout(t.Context(), 8*time.Minute)
	defer cancel()
	_, prog := buildProgram(t, "../cmd/rocesim/testdata/exitconn.c", "-lrdmacm", "-libverbs")
	ports, err := FreeUDPPorts(2)
	if err != nil {
		t.Fatal(err)
	}
	// Each case: a server bounded by 30 s (a DISCONNECTED that never
	// came would hold it), the client started once it listens (retried
	// while its REQ meets no listener), both exit statuses and the
	// server's events printed with the case's prefix.
	script := `for m in c k; do
  port=7480; [ $m = k ] && port=7481
  timeout 30 /exitconn -s $port >/tmp/s 2>&1 & s=$!
  n=0
  until /exitconn -$m 10.0.0.1 $port >/tmp/c 2>/tmp/ce; st=$?; [ $st != 1 ] || [ $n -ge 20 ]; do n=$((n+1)); sleep 0.2; done
  echo "EXIT-$m client $st $(cat /tmp/c | tr '\n' ' ')"
  wait $s; echo "EXIT-$m server $?"
  sed "s/^/EXIT-$m server: /" /tmp/s
done; echo EXIT-END`
	vm, err := Boot(ctx, VMConfig{Name: "rxe", IP: "10.0.0.1", LocalPort: ports[0], RemotePort: ports[1],
		Cmd: script, Files: map[string][]byte{"/exitconn": prog},
		Timeout: 5 * time.Minute, LogPath: filepath.Join(logs, "rxe-exitconn.log")})
	if err != nil {
		t.Fatal(err)
	}
	defer vm.Stop()
	r, err := vm.Wait()
	if err != nil {
		t.Fatalf("guest: %v\n%s", err, r.Output)
	}
	if !strings.Contains(r.Output, "EXIT-END") {
		t.Fatalf("the guest's script did not finish:\n%s", r.Output)
	}
	for _, c := range []struct {
		flag   string
		status int
	}{{"c", 0}, {"k", 137}} {
		var lines []string
		for _, l := range strings.Split(r.Output, "\n") {
			if rest, ok := strings.CutPrefix(strings.TrimRight(l, "\r"), "EXIT-"+c.flag+" "); ok {
				lines = append(lines, strings.TrimSpace(rest))
			}
		}
		want := []string{
			fmt.Sprintf("client %d established", c.status),
			"server 0",
			"server: RDMA_CM_EVENT_CONNECT_REQUEST",
			"server: RDMA_CM_EVENT_ESTABLISHED",
			"server: RDMA_CM_EVENT_DISCONNECTED",
		}
		if strings.Join(lines, "\n") != strings.Join(want, "\n") {
			t.Errorf("exitconn -%s on real rxe:\n got %q\nwant %q", c.flag, lines, want)
		}
	}
}
