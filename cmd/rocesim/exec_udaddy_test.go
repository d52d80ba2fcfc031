package main

import (
	"path/filepath"
	"strings"
	"testing"
)

// TestExecUdaddy: unmodified udaddy (rdmacm-utils), server and client
// (-s 10.0.0.1) in two processes through rocesim exec on a fabric: UD
// QPs connected through rdma_cm's RDMA_PS_UDP, which is SIDR on the wire
// (rdmacm/sidr.go). The client gets the server's QPN, Q_Key and address
// with ESTABLISHED, sends its messages, the server answers each through
// an address handle made from the completion (ibv_create_ah_from_wc),
// and both report "test complete" and exit 0. The capture holds one
// SIDR_REQ and one SIDR_REP and no other CM message.
func TestExecUdaddy(t *testing.T) {
	needTools(t, "udaddy")
	f := newFabricEnv(t)
	pcap := filepath.Join(t.TempDir(), "udaddy.pcapng")
	srv, cli, _ := rdmacmPair(t, f, []string{"--pcap", pcap}, []string{"udaddy"}, []string{"udaddy", "-s", "10.0.0.1"})
	for _, p := range []*execProc{srv, cli} {
		out := p.stdout.String()
		if p.code != 0 || !strings.Contains(out, "data transfers complete") || !strings.Contains(out, "test complete") {
			t.Errorf("%v: exit %d\nstdout:\n%s\nstderr:\n%s", p.cmd.Args, p.code, out, p.stderr.String())
		}
	}
	if t.Failed() {
		return
	}
	fabricTimes(t, f) // the fabric has exited: the capture is complete
	msgs, _ := cmMessages(t, pcap)
	want := []string{"10.0.0.2>SIDR_REQ", "10.0.0.1>SIDR_REP"}
	if strings.Join(msgs, " ") != strings.Join(want, " ") {
		t.Errorf("CM messages:\n got %v\nwant %v", msgs, want)
	}
	t.Logf("client:\n%s", cli.stdout.String())
}
