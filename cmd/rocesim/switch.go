package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"net/netip"
	"os"
	"os/signal"
	"strings"
	"syscall"
	"time"

	"github.com/rocesim/rocesim/faults"
	"github.com/rocesim/rocesim/ladder"
	"github.com/rocesim/rocesim/realnet"
	"github.com/rocesim/rocesim/rswitch"
	"github.com/rocesim/rocesim/sim"
)

const switchUsage = `Usage: rocesim switch --a ENDPOINT --b ENDPOINT [flags]

Forwards frames between two real endpoints and applies a fault plan to the
RoCE v2 frames with the decisions the simulated fabric makes (the same
rules, the same counting of transmissions: "drop psn=7 tx=1" loses PSN 7's
first transmission only); frames that are not RoCE v2 pass untouched. It
writes a pcapng with each frame's verdict as its comment and prints the
ladder at exit. It forwards only between the two endpoints it is given.

Endpoints (both udp, or both dgram or packet: a VM's link may be joined
to an interface, giving the VM a real segment with a namespace):
  dgram:LISTEN,PEER  a QEMU VM on a datagram link (-netdev dgram or
                     -netdev socket,udp=): the switch listens on LISTEN
                     (HOST:PORT, the VM's remote address; port 0 picks
                     one, printed at start) and delivers to PEER (the
                     VM's local address), taking frames from PEER only
  packet:IFACE       whole frames on a network interface (AF_PACKET;
                     needs CAP_NET_RAW), e.g. a veth into a namespace
  udp:HOST,STANDIN   a RoCE v2 host at HOST (a rocesim node, rxe, a NIC)
                     on UDP 4791; the switch binds STANDIN:4791, the
                     address this host uses for the other endpoint, and
                     sends it the other's frames from there. Addresses
                     are rewritten, the ICRC recomputed with any error a
                     frame carried kept

Addresses must be loopback addresses unless --routable.

Flags:
  --faults PLAN    a fault plan in the scenario files' format; ';'
                   separates rules; @FILE reads it from FILE
  --seed N         seed of the plan's random draws (default 1)
  --names A,B      the endpoints' names in the plan and the ladder
                   (default a,b)
  --pcap FILE      write every frame to FILE (pcapng, a comment on each)
  --ladder FILE    write the ladder to FILE (SVG if it ends in .svg)
  --quiet          do not print the ladder at exit
  --duration D     stop after D (default: run until SIGINT or SIGTERM)
  --routable       allow addresses that are not loopback

Examples:
  # two VMs: VM a sends to 127.0.0.1:10001 from :10000, VM b to :10003 from :10002
  rocesim switch --a dgram:127.0.0.1:10001,127.0.0.1:10000 \
                 --b dgram:127.0.0.1:10003,127.0.0.1:10002 \
                 --faults 'drop op=RC_SEND_MIDDLE tx=1' --pcap vms.pcapng
  # two model nodes: 127.0.0.1 reaches 127.0.0.2 at 127.0.0.4, and back at 127.0.0.3
  rocesim switch --a udp:127.0.0.1,127.0.0.4 --b udp:127.0.0.2,127.0.0.3 \
                 --faults 'corrupt op=RC_RDMA_WRITE_ONLY tx=1'
  rocesim node --addr 127.0.0.2 --peer-addr 127.0.0.3 &
  rocesim node --addr 127.0.0.1 --peer-addr 127.0.0.4 --connect 127.0.0.2 --op write
  # a VM's link and a veth into a namespace (root): one Ethernet segment
  rocesim switch --a dgram:127.0.0.1:10001,127.0.0.1:10000 --b packet:veth0

Exit status: 0 success; 1 the capture or a socket failed; 2 usage error.
`

// switchEndpoint is one parsed --a or --b.
type switchEndpoint struct {
	kind  string         // dgram, packet or udp
	local netip.AddrPort // dgram: LISTEN; udp: STANDIN:4791
	peer  netip.AddrPort // dgram: PEER; udp: HOST (port unused)
	iface string         // packet
}

// parseSwitchEndpoint reads ENDPOINT as switchUsage describes it.
func parseSwitchEndpoint(s string, routable bool) (switchEndpoint, error) {
	kind, rest, _ := strings.Cut(s, ":")
	e := switchEndpoint{kind: kind}
	first, second, two := strings.Cut(rest, ",")
	var addrs []netip.Addr
	switch kind {
	case "dgram":
		if !two {
			return e, fmt.Errorf("%q: want dgram:LISTEN,PEER", s)
		}
		var err error
		if e.local, err = netip.ParseAddrPort(first); err == nil {
			e.peer, err = netip.ParseAddrPort(second)
		}
		if err != nil {
			return e, fmt.Errorf("%q: %v", s, err)
		}
		if e.peer.Port() == 0 {
			return e, fmt.Errorf("%q: the VM's address needs its port", s)
		}
		addrs = []netip.Addr{e.local.Addr(), e.peer.Addr()}
	case "packet":
		if rest == "" || two {
			return e, fmt.Errorf("%q: want packet:IFACE", s)
		}
		e.iface = rest
	case "udp":
		if !two {
			return e, fmt.Errorf("%q: want udp:HOST,STANDIN", s)
		}
		host, err := netip.ParseAddr(first)
		var standIn netip.Addr
		if err == nil {
			standIn, err = netip.ParseAddr(second)
		}
		if err != nil {
			return e, fmt.Errorf("%q: %v", s, err)
		}
		if host == standIn {
			return e, fmt.Errorf("%q: the host and its peer's stand-in are one address", s)
		}
		e.peer, e.local = netip.AddrPortFrom(host, 0), netip.AddrPortFrom(standIn, 0)
		addrs = []netip.Addr{host, standIn}
	default:
		return e, fmt.Errorf("%q: want KIND:..., KIND one of dgram, packet and udp", s)
	}
	for _, a := range addrs {
		if !a.IsLoopback() && !routable {
			return e, fmt.Errorf("%q: %s is not a loopback address: add --routable to forward there", s, a)
		}
	}
	return e, nil
}

// open opens the endpoint's transport.
func (e switchEndpoint) open() (realnet.Transport, error) {
	switch e.kind {
	case "dgram":
		return realnet.NewDgram(realnet.DgramConfig{Local: e.local, Peer: e.peer})
	case "packet":
		return realnet.NewPacket(realnet.PacketConfig{Interface: e.iface, CompleteChecksums: true})
	default:
		// The other host's frames leave from here with this address as
		// their source; rxe's IPv4 IDs are found from the ICRC, so that
		// the error kept is the frame's own.
		a := e.local.Addr()
		return realnet.NewUDP(realnet.UDPConfig{Addr: e.local, MAC: realnet.StandInMAC(a),
			RecoverIPv4ID: true, KeepICRCError: true})
	}
}

// runSwitch parses switch's command line and runs it until a signal.
func runSwitch(args []string, stdout, stderr io.Writer) int {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	return switchMain(ctx, args, stdout, stderr, nil)
}

// switchMain runs the switch until ctx ends or --duration has passed;
// ready, if set, sees the switch once it forwards.
func switchMain(ctx context.Context, args []string, stdout, stderr io.Writer, ready func(*rswitch.Switch)) int {
	fs := flag.NewFlagSet("switch", flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	aSpec := fs.String("a", "", "")
	bSpec := fs.String("b", "", "")
	planText := fs.String("faults", "", "")
	seed := fs.Uint64("seed", 1, "")
	names := fs.String("names", "a,b", "")
	pcap := fs.String("pcap", "", "")
	ladderFile := fs.String("ladder", "", "")
	quiet := fs.Bool("quiet", false, "")
	duration := fs.Duration("duration", 0, "")
	routable := fs.Bool("routable", false, "")
	err := dashdash(fs.Parse(args))
	if errors.Is(err, flag.ErrHelp) {
		fmt.Fprint(stdout, switchUsage)
		return exitOK
	}
	usageErr := func(format string, a ...any) int {
		fmt.Fprintf(stderr, "rocesim switch: "+format+"\n\n%s", append(a, switchUsage)...)
		return exitUsage
	}
	if err != nil {
		return usageErr("%v", err)
	}
	if fs.NArg() > 0 {
		return usageErr("takes no arguments, got %q", fs.Args())
	}
	if *aSpec == "" || *bSpec == "" {
		return usageErr("needs both endpoints, --a and --b")
	}
	var eps [2]switchEndpoint
	for i, s := range []string{*aSpec, *bSpec} {
		if eps[i], err = parseSwitchEndpoint(s, *routable); err != nil {
			return usageErr("--%c %v", 'a'+i, err)
		}
	}
	if (eps[0].kind == "udp") != (eps[1].kind == "udp") {
		return usageErr("--a is %s, --b is %s: udp endpoints are joined to udp endpoints only (the others carry whole frames)", eps[0].kind, eps[1].kind)
	}
	na, nb, ok := strings.Cut(*names, ",")
	if !ok || na == "" || nb == "" || na == nb || strings.Contains(nb, ",") {
		return usageErr("--names %q: want two different names, A,B", *names)
	}
	cfg := rswitch.Config{NameA: na, NameB: nb, Rand: sim.NewSeeds(*seed).Stream("faults"), CapturePath: *pcap,
		Trace: &sim.Trace{}}
	if *planText != "" {
		if cfg.Plan, err = parsePlanFlag(*planText); err != nil {
			return usageErr("--faults: %v", err)
		}
	}
	if eps[0].kind == "udp" {
		cfg.Endpoints = &rswitch.Endpoints{A: eps[0].peer.Addr(), B: eps[1].peer.Addr()}
	}
	var tr [2]realnet.Transport
	for i, e := range eps {
		if tr[i], err = e.open(); err != nil {
			if i == 1 {
				tr[0].Close()
			}
			fmt.Fprintf(stderr, "rocesim switch: --%c: %v\n", 'a'+i, err)
			return exitUsage
		}
	}
	cfg.A, cfg.B = tr[0], tr[1]
	sw, err := rswitch.New(cfg)
	if err != nil {
		fmt.Fprintf(stderr, "rocesim switch: %v\n", err)
		return exitUsage
	}
	for i, e := range eps {
		fmt.Fprintf(stdout, "rocesim switch: %s: %s on %s\n", sw.Names()[i], e.kind, sw.PortName(i))
	}
	if ready != nil {
		ready(sw)
	}
	if *duration > 0 {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, *duration)
		defer cancel()
	}
	start := time.Now()
	<-ctx.Done()
	code := exitOK
	if err := sw.Close(); err != nil {
		fmt.Fprintf(stderr, "rocesim switch: %v\n", err)
		code = exitBad
	}
	if *ladderFile != "" {
		if err := writeLadderFile(*ladderFile, cfg.Trace, sw.Names(), "rocesim switch "+na+"-"+nb); err != nil {
			fmt.Fprintf(stderr, "rocesim switch: --ladder: %v\n", err)
			code = exitBad
		}
	}
	if !*quiet {
		if err := ladder.Text(stdout, cfg.Trace, withNodes(textOptions(stdout, os.Getenv), sw.Names())); err != nil {
			fmt.Fprintf(stderr, "rocesim switch: %v\n", err)
			code = exitBad
		}
	}
	st := sw.Stats()
	st.Foreign += tr[0].Stats().Foreign + tr[1].Stats().Foreign
	printSwitchStats(stdout, na+"-"+nb, time.Since(start), st)
	printPlanReport(stdout, cfg.Plan, sw.Hits)
	if *pcap != "" {
		fmt.Fprintf(stdout, "capture: %s\n", *pcap)
	}
	return code
}

// parsePlanFlag reads a --faults value: a plan with ';' between rules,
// or @FILE.
func parsePlanFlag(text string) (*faults.Plan, error) {
	if file, ok := strings.CutPrefix(text, "@"); ok {
		b, err := os.ReadFile(file)
		if err != nil {
			return nil, err
		}
		return faults.Parse(string(b))
	}
	return faults.ParseInline(text)
}

// writeLadderFile writes tr's ladder to path: SVG if the name ends in
// .svg, else text.
func writeLadderFile(path string, tr *sim.Trace, nodes []string, title string) error {
	f, err := os.Create(path)
	if err != nil {
		return err
	}
	if strings.HasSuffix(path, ".svg") {
		err = ladder.SVG(f, tr, ladder.Options{Nodes: nodes}, title)
	} else {
		err = ladder.Text(f, tr, ladder.Options{Nodes: nodes})
	}
	return errors.Join(err, f.Close())
}

// withNodes returns opt with its columns set to nodes.
func withNodes(opt ladder.Options, nodes []string) ladder.Options {
	opt.Nodes = nodes
	return opt
}

// printPlanReport writes what each rule of plan did, a line each, given
// its decisions (hits): a rule that never matched is a warning, as in
// rocesim run (a PSN no program reached, a misspelt key value).
func printPlanReport(w io.Writer, plan *faults.Plan, hits func(rule int) uint64) {
	for _, r := range plan.Report(hits) {
		fmt.Fprintln(w, r.Line("fault"))
	}
}

// printSwitchStats writes the summary line of a switch's run, and a
// warning when the plan's transmission counting forgot flows (its tx=
// rules may then have misjudged retransmissions).
func printSwitchStats(w io.Writer, name string, ran time.Duration, st rswitch.Stats) {
	fmt.Fprintf(w, "switch %s: %v; %d frames (%d RoCE v2), %d forwarded, %d dropped, %d copies, %d delayed, %d altered, %d runts, %d foreign, %d refused by a transport\n",
		name, ran.Round(time.Millisecond), st.Frames, st.RoCE, st.Forwarded, st.Dropped, st.Duplicated,
		st.Delayed, st.Altered, st.Runts, st.Foreign, st.SendErrors)
	if st.TxEvictions > 0 {
		fmt.Fprintf(w, "warning: %s\n", faults.TxEvictionWarning(st.TxEvictions))
	}
}
