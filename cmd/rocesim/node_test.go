package main

import (
	"net"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
)

// TestNode runs two rocesim node commands in this process, a server on
// 127.0.0.4 and a client on 127.0.0.3 (not realnet's tests' 127.0.0.1
// and 127.0.0.2: go test runs packages in parallel, and each address's
// port 4791 has room for one node), over real UDP on loopback: an RDMA
// WRITE workload whose data the server checks, a capture of what the
// client sent (every frame's ICRC verified by inspect), each bounded by
// --timeout.
func TestNode(t *testing.T) {
	l, err := net.Listen("tcp4", "127.0.0.4:0")
	if err != nil {
		t.Fatal(err)
	}
	port := strconv.Itoa(l.Addr().(*net.TCPAddr).Port)
	l.Close()
	type outcome struct {
		code     int
		out, err string
	}
	srv := make(chan outcome, 1)
	go func() {
		code, out, errOut := runCmd("node", "--addr", "127.0.0.4", "--port", port, "--timeout", "20s")
		srv <- outcome{code, out, errOut}
	}()
	pcap := filepath.Join(t.TempDir(), "client.pcapng")
	code, out, errOut := runCmd("node", "--addr", "127.0.0.3", "--connect", "127.0.0.4", "--port", port,
		"--op", "write", "--size", "10000", "--iters", "20", "--pcap", pcap, "--timeout", "20s")
	s := <-srv
	if code != exitOK || !strings.Contains(out, "20 x write of 10000 bytes") {
		t.Fatalf("client: exit %d\n%s%s", code, out, errOut)
	}
	if s.code != exitOK || !strings.Contains(s.out, "served 20 x write of 10000 bytes, data checked") {
		t.Fatalf("server: exit %d\n%s%s", s.code, s.out, s.err)
	}
	// 10000 bytes at path MTU 4096: 3 packets a WRITE.
	code, out, errOut = runCmd("inspect", pcap)
	if code != exitOK || !strings.Contains(out, "60 RoCE (0 bad)") {
		t.Fatalf("inspect: exit %d\n%s%s", code, out, errOut)
	}
}

func TestNodeUsage(t *testing.T) {
	for _, c := range []struct {
		args []string
		code int
		out  string
	}{
		{[]string{"help", "node"}, exitOK, "Usage: rocesim node"},
		{[]string{"node", "--help"}, exitOK, "Usage: rocesim node"},
		{[]string{"node", "extra"}, exitUsage, `takes no arguments, got ["extra"]`},
		{[]string{"node", "--addr", "192.0.2.1"}, exitUsage, "not a loopback address: add --routable"},
		{[]string{"node", "--addr", "::ffff:127.0.0.1"}, exitUsage, `--addr "::ffff:127.0.0.1" is not an IPv4 or IPv6 address`},
		{[]string{"node", "--addr", "2001:db8::1"}, exitUsage, "not a loopback address: add --routable"},
		{[]string{"node", "--op", "atomic"}, exitUsage, `op "atomic": want send, write or read`},
		{[]string{"node", "--size", "0"}, exitUsage, "size 0: want 1..1048576"},
		{[]string{"node", "--port", "70000"}, exitUsage, "--port 70000 is not a TCP port"},
	} {
		code, out, errOut := runCmd(c.args...)
		if code != c.code || !strings.Contains(out+errOut, c.out) {
			t.Errorf("%q: exit %d, output %q; want exit %d and %q", c.args, code, out+errOut, c.code, c.out)
		}
	}
}
