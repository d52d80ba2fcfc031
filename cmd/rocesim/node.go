package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"net"
	"net/netip"
	"os"
	"os/signal"
	"strconv"
	"syscall"
	"time"

	"github.com/rocesim/rocesim/realnet"
	"github.com/rocesim/rocesim/sim"
	"github.com/rocesim/rocesim/wire/capture"
)

const nodeUsage = `Usage: rocesim node [flags]

Runs one model node on the machine's network: rocesim's NIC model on UDP
port 4791 of --addr, in real time (package realnet), and a scripted
workload with one peer node, in the manner of ibv_rc_pingpong: the two
exchange their QP number, first PSN, memory address and R_Key over TCP,
connect an RC QP, and the client runs --iters operations of --size bytes
(16 outstanding); the server posts the receives a SEND needs. Both check
the data. The client prints what it measured.

Without --connect the node is the server: it waits for one client on TCP
--port of --addr, serves its workload (the client chooses --op, --size and
--iters), and exits. With --connect HOST it is the client (it dials until the server listens).

Flags:
  --addr A        the node's IPv4 or IPv6 address (default 127.0.0.1); a
                  loopback address unless --routable
  --routable      allow an --addr that is not loopback
  --connect HOST  be the client of the server node at HOST (its --addr)
  --peer-addr A   reach the peer node's QP at A, whatever address it
                  announces: its stand-in on a rocesim switch
  --port N        TCP port of the exchange (default 18515, ibv_rc_pingpong's)
  --op OP         send, write or read (default send; client only)
  --size N        bytes per operation (default 4096, at most 1048576)
  --iters N       operations (default 1000)
  --pcap FILE     write what this node sent to FILE (pcapng, a comment per
                  frame; outer headers as the kernel sends them)
  --timeout D     give up after D of wall time (default 30s)

Two nodes on one machine:
  rocesim node --addr 127.0.0.2 &
  rocesim node --addr 127.0.0.1 --connect 127.0.0.2 --op write --size 65536

An exposed node is a real RDMA endpoint: anyone who can reach its UDP port
4791 and guess a QP number and an R_Key can read or write its registered
memory, as with a real RDMA NIC. That is why a routable --addr needs
--routable.
`

// runNode parses node's command line and runs it.
func runNode(args []string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("node", flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	addr := fs.String("addr", "127.0.0.1", "")
	routable := fs.Bool("routable", false, "")
	connect := fs.String("connect", "", "")
	peerAddr := fs.String("peer-addr", "", "")
	port := fs.Int("port", 18515, "")
	op := fs.String("op", "send", "")
	size := fs.Int("size", 4096, "")
	iters := fs.Int("iters", 1000, "")
	pcap := fs.String("pcap", "", "")
	timeout := fs.Duration("timeout", 30*time.Second, "")
	err := dashdash(fs.Parse(args))
	if errors.Is(err, flag.ErrHelp) {
		fmt.Fprint(stdout, nodeUsage)
		return exitOK
	}
	usageErr := func(format string, a ...any) int {
		fmt.Fprintf(stderr, "rocesim node: "+format+"\n\n%s", append(a, nodeUsage)...)
		return exitUsage
	}
	if err != nil {
		return usageErr("%v", err)
	}
	if fs.NArg() > 0 {
		return usageErr("takes no arguments, got %q", fs.Args())
	}
	a, err := netip.ParseAddr(*addr)
	if err != nil || a.Zone() != "" || a.Is4In6() {
		return usageErr("--addr %q is not an IPv4 or IPv6 address", *addr)
	}
	if !a.IsLoopback() && !*routable {
		return usageErr("--addr %s is not a loopback address: add --routable to expose a RoCE endpoint there", a)
	}
	var peer netip.Addr
	if *peerAddr != "" {
		if peer, err = netip.ParseAddr(*peerAddr); err != nil || peer.Zone() != "" || peer.Is4In6() || peer.Is6() != a.Is6() {
			return usageErr("--peer-addr %q is not an address of --addr's IP version", *peerAddr)
		}
		if !peer.IsLoopback() && !*routable {
			return usageErr("--peer-addr %s is not a loopback address: add --routable", peer)
		}
	}
	if *port <= 0 || *port > 0xFFFF {
		return usageErr("--port %d is not a TCP port", *port)
	}
	w := realnet.Workload{Op: *op, Size: *size, Iters: *iters}
	if err := w.Validate(); err != nil {
		return usageErr("--%v", err)
	}

	ctx, cancel := context.WithTimeout(context.Background(), *timeout)
	defer cancel()
	ctx, stop := signal.NotifyContext(ctx, os.Interrupt, syscall.SIGTERM)
	defer stop()
	var capw capture.Writer
	var capErr error
	cfg := realnet.NodeConfig{Name: a.String(), Addr: a, PeerAddr: peer}
	if *pcap != "" {
		capw, err = capture.Create(*pcap, capture.PcapngOptions{Comment: fmt.Sprintf(
			"rocesim node %s:4791 over UDP: the frames it sent (UDP checksum shown as 0: the kernel's); "+
				"timestamps are nanoseconds since %s", a, time.Now().UTC().Format(time.RFC3339Nano))})
		if err == nil {
			_, err = capw.AddInterface(a.String()+"->net", "frames node "+a.String()+" sent")
		}
		if err != nil {
			fmt.Fprintf(stderr, "rocesim node: --pcap: %v\n", err)
			return exitUsage
		}
		cfg.Annotate = true
		cfg.Sent = func(now sim.Time, frame []byte, note string, err error) {
			if err != nil {
				note += "; refused: " + err.Error()
			}
			if werr := capw.WriteFrame(int64(now), 0, frame, note); werr != nil && capErr == nil {
				capErr = werr
			}
		}
	}
	n, err := realnet.NewNode(cfg)
	if err != nil {
		fmt.Fprintf(stderr, "rocesim node: %v\n", err)
		return exitUsage
	}
	code := nodeWorkload(ctx, n, a, *connect, *port, w, stdout, stderr)
	if err := n.Close(); err != nil && code == exitOK {
		fmt.Fprintf(stderr, "rocesim node: %v\n", err)
		code = exitBad
	}
	if capw != nil {
		if err := errors.Join(capErr, capw.Close()); err != nil {
			fmt.Fprintf(stderr, "rocesim node: --pcap: %v\n", err)
			code = exitUsage
		}
	}
	return code
}

// dialRetry is how long a client waits before dialling the server again.
const dialRetry = 100 * time.Millisecond

// nodeWorkload makes the exchange's TCP connection and runs the
// workload's client or server side.
func nodeWorkload(ctx context.Context, n *realnet.Node, a netip.Addr, connect string, port int,
	w realnet.Workload, stdout, stderr io.Writer) int {
	var conn net.Conn
	var err error
	hostPort := net.JoinHostPort(a.String(), strconv.Itoa(port))
	if connect == "" {
		var lc net.ListenConfig
		var l net.Listener
		if l, err = lc.Listen(ctx, "tcp", hostPort); err == nil {
			fmt.Fprintf(stdout, "rocesim node: %s:4791, waiting for a client on %s\n", a, hostPort)
			go func() { <-ctx.Done(); l.Close() }()
			conn, err = l.Accept()
			l.Close()
		}
	} else {
		// The server may not be listening yet: try again until --timeout.
		var d net.Dialer
		for {
			conn, err = d.DialContext(ctx, "tcp", net.JoinHostPort(connect, strconv.Itoa(port)))
			if err == nil || ctx.Err() != nil {
				break
			}
			select {
			case <-ctx.Done():
			case <-time.After(dialRetry):
			}
		}
	}
	if err != nil {
		fmt.Fprintf(stderr, "rocesim node: exchange: %v\n", err)
		return exitBad
	}
	defer conn.Close()
	go func() { <-ctx.Done(); conn.Close() }()
	if connect == "" {
		got, err := realnet.RunServer(ctx, n, conn)
		if err != nil {
			fmt.Fprintf(stderr, "rocesim node: %v\n", err)
			return exitBad
		}
		fmt.Fprintf(stdout, "rocesim node: served %d x %s of %d bytes, data checked\n", got.Iters, got.Op, got.Size)
		return exitOK
	}
	res, err := realnet.RunClient(ctx, n, conn, w)
	if err != nil {
		fmt.Fprintf(stderr, "rocesim node: %v\n", err)
		return exitBad
	}
	fmt.Fprintf(stdout, "rocesim node: %s, data checked\n", res)
	return exitOK
}
