//go:build linux

package main

import (
	"bytes"
	"context"
	"net"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/rocesim/rocesim/rswitch"
)

// TestSwitchNodes runs rocesim switch between two rocesim node commands
// in this process over real UDP on loopback, on addresses no other
// package's tests use (127.0.0.9 and 127.0.0.10, each reaching the other
// at a stand-in of the switch, 127.0.0.12 and 127.0.0.11): a SEND
// workload whose first SEND_ONLY is lost once and whose data the server
// checks, with the switch's capture (each frame's ICRC verified by
// inspect, the drop commented), its ladder and its summary. Each command
// is bounded by --timeout, the switch by the test's context.
func TestSwitchNodes(t *testing.T) {
	l, err := net.Listen("tcp4", "127.0.0.10:0")
	if err != nil {
		t.Fatal(err)
	}
	port := strconv.Itoa(l.Addr().(*net.TCPAddr).Port)
	l.Close()
	pcap := filepath.Join(t.TempDir(), "switch.pcapng")
	ctx, cancel := context.WithCancel(context.Background())
	up := make(chan *rswitch.Switch, 1)
	var swOut, swErr bytes.Buffer
	swDone := make(chan int, 1)
	go func() {
		swDone <- switchMain(ctx, []string{"--a", "udp:127.0.0.9,127.0.0.12", "--b", "udp:127.0.0.10,127.0.0.11",
			"--faults", "drop op=RC_SEND_ONLY tx=1 first=1", "--pcap", pcap}, &swOut, &swErr, func(s *rswitch.Switch) { up <- s })
	}()
	select {
	case <-up:
	case code := <-swDone:
		cancel()
		t.Fatalf("switch: exit %d\n%s%s", code, swOut.String(), swErr.String())
	}
	type outcome struct {
		code     int
		out, err string
	}
	srv := make(chan outcome, 1)
	go func() {
		code, out, errOut := runCmd("node", "--addr", "127.0.0.10", "--peer-addr", "127.0.0.11", "--port", port, "--timeout", "20s")
		srv <- outcome{code, out, errOut}
	}()
	code, out, errOut := runCmd("node", "--addr", "127.0.0.9", "--peer-addr", "127.0.0.12", "--connect", "127.0.0.10",
		"--port", port, "--op", "send", "--size", "1000", "--iters", "20", "--timeout", "20s")
	s := <-srv
	cancel()
	swCode := <-swDone
	if code != exitOK || !strings.Contains(out, "20 x send of 1000 bytes") {
		t.Fatalf("client: exit %d\n%s%s", code, out, errOut)
	}
	if s.code != exitOK || !strings.Contains(s.out, "served 20 x send of 1000 bytes, data checked") {
		t.Fatalf("server: exit %d\n%s%s", s.code, s.out, s.err)
	}
	if swCode != exitOK || !strings.Contains(swOut.String(), "1 dropped") || !strings.Contains(swOut.String(), "✗ rule 1") {
		t.Fatalf("switch: exit %d\n%s%s", swCode, swOut.String(), swErr.String())
	}
	code, out, errOut = runCmd("inspect", pcap)
	if code != exitOK || !strings.Contains(out, "(0 bad)") || !strings.Contains(out, "dropped by rule 1") {
		t.Fatalf("inspect: exit %d\n%s%s", code, out, errOut)
	}
}

func TestSwitchUsage(t *testing.T) {
	for _, c := range []struct {
		args []string
		code int
		out  string
	}{
		{[]string{"help", "switch"}, exitOK, "Usage: rocesim switch"},
		{[]string{"switch", "--help"}, exitOK, "Usage: rocesim switch"},
		{[]string{"switch", "extra"}, exitUsage, `takes no arguments, got ["extra"]`},
		{[]string{"switch", "--a", "packet:lo"}, exitUsage, "needs both endpoints"},
		{[]string{"switch", "--a", "packet:lo", "--b", "udp:127.0.0.1,127.0.0.2"}, exitUsage, "--a is packet, --b is udp: udp endpoints are joined to udp endpoints only"},
		{[]string{"switch", "--a", "udp:192.0.2.1,127.0.0.2", "--b", "udp:127.0.0.3,127.0.0.4"}, exitUsage, "192.0.2.1 is not a loopback address: add --routable"},
		{[]string{"switch", "--a", "dgram:127.0.0.1:0,127.0.0.1:0", "--b", "packet:lo"}, exitUsage, "the VM's address needs its port"},
		{[]string{"switch", "--a", "udp:127.0.0.1", "--b", "udp:127.0.0.3,127.0.0.4"}, exitUsage, "want udp:HOST,STANDIN"},
		{[]string{"switch", "--a", "tcp:x", "--b", "packet:lo"}, exitUsage, "KIND one of dgram, packet and udp"},
		{[]string{"switch", "--a", "packet:lo", "--b", "packet:lo", "--names", "a,a"}, exitUsage, "want two different names"},
		{[]string{"switch", "--a", "packet:lo", "--b", "packet:lo", "--faults", "lose psn=2"}, exitUsage, `unknown action "lose"`},
	} {
		code, out, errOut := runCmd(c.args...)
		if code != c.code || !strings.Contains(out+errOut, c.out) {
			t.Errorf("%q: exit %d, output %q; want exit %d and %q", c.args, code, out+errOut, c.code, c.out)
		}
	}
}
