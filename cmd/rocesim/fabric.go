package main

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"runtime"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/rocesim/rocesim/faults"
	"github.com/rocesim/rocesim/ladder"
	"github.com/rocesim/rocesim/procfabric"
	"github.com/rocesim/rocesim/sim"
	"github.com/rocesim/rocesim/wire/capture"
)

const fabricUsage = `Usage: rocesim fabric [flags]

Runs a fabric daemon: processes whose NICs run on the model (the drop-in
libibverbs, or Go programs through package procfabric) attach to its
nodes over a Unix socket and meet on one simulated fabric (a link for two
nodes, a switch for more), with the fault plan, one pcapng with a comment
per frame, and the ladder printed at exit. Virtual time advances only
when every attached process waits in a verbs call, so the same
deterministic programs give the same capture bytes on every run.

The socket is NAME.sock in $XDG_RUNTIME_DIR/rocesim (else
/tmp/rocesim-UID), a directory only this user can open; processes of
other users are refused. A socket left by a daemon that died is replaced.

Flags:
  --name NAME         the fabric's name (default "default"); fabrics of
                      different names run side by side
  --nodes A,B,...|N   the nodes processes attach to, node i with MAC
                      02:00:00:00:00:i, 10.0.0.i and fe80::ff:fe00:i; a number N
                      (default 2) lets the first N processes name them:
                      no attach is answered before all N have come, and
                      the nodes are numbered in the names' order
  --faults PLAN       a fault plan in the scenario files' format; ';'
                      separates rules; @FILE reads it from FILE
  --seed N            seed of the plan's random draws (default 1)
  --pcap FILE         write every frame to FILE (pcapng, a comment on each)
  --trace FILE        write the fabric's trace to FILE as text
  --ladder FILE       write the ladder to FILE at exit (SVG if the name
                      ends in .svg, else text)
  --quiet             do not print the ladder at exit
  --hold-limit D      wall time a process may run without waiting before
                      it is detached (default 10s; 0: no bound)
  --deadline D        end the run at virtual time D (a QP that retries
                      forever, as rxe's retry_cnt 7 does, never ends it;
                      a run stuck before D, every process waiting with
                      nothing left to happen, ends at D once the quiet
                      report has said so)
  --exit-when-idle    exit once every node has attached and every
                      process has left, or when no process has come for
                      30s (how a client that starts the daemon runs it)

It runs until interrupted (SIGINT, SIGTERM), --exit-when-idle or
--deadline, then prints the ladder and a summary.

Exit status: 0 success; 2 usage or I/O error (a fabric of that name
already runs, an unsafe socket directory).

Example:
  rocesim fabric --name t1 --faults 'drop op=RC_RDMA_WRITE_MIDDLE tx=1' --pcap t1.pcapng
`

// runFabric parses fabric's command line and runs the daemon.
func runFabric(args []string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("fabric", flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	name := fs.String("name", "default", "fabric name")
	nodes := fs.String("nodes", "2", "node names, or how many")
	plan := fs.String("faults", "", "fault plan")
	seed := fs.Uint64("seed", 1, "seed")
	pcap := fs.String("pcap", "", "pcapng output")
	traceFile := fs.String("trace", "", "trace output")
	ladderFile := fs.String("ladder", "", "ladder output")
	quiet := fs.Bool("quiet", false, "no ladder")
	hold := fs.Duration("hold-limit", procfabric.DefaultHoldLimit, "hold limit")
	deadline := fs.String("deadline", "", "virtual time at which the run ends")
	idle := fs.Bool("exit-when-idle", false, "exit when every process has left")
	pos, err := parseInterspersed(fs, args)
	if errors.Is(err, flag.ErrHelp) {
		fmt.Fprint(stdout, fabricUsage)
		return exitOK
	}
	if err == nil && len(pos) > 0 {
		err = fmt.Errorf("takes no arguments, got %q", pos)
	}
	if err != nil {
		fmt.Fprintf(stderr, "rocesim fabric: %v\n\n%s", err, fabricUsage)
		return exitUsage
	}
	cfg := procfabric.Config{Name: *name, Seed: *seed, Trace: &sim.Trace{}, HoldLimit: *hold, ExitWhenIdle: *idle, Log: stderr}
	if n, err := strconv.Atoi(*nodes); err == nil {
		cfg.Count = n
	} else {
		cfg.Nodes = strings.Split(*nodes, ",")
	}
	if *hold == 0 {
		cfg.HoldLimit = -1
	}
	if *deadline != "" {
		d, err := sim.ParseDuration(*deadline)
		if err != nil || d <= 0 {
			fmt.Fprintf(stderr, "rocesim fabric: --deadline %q: want a positive duration such as 10ms or 2s\n", *deadline)
			return exitUsage
		}
		cfg.Deadline = sim.Time(d)
	}
	if *plan != "" {
		if cfg.Plan, err = parsePlanFlag(*plan); err != nil {
			fmt.Fprintf(stderr, "rocesim fabric: --faults: %v\n", err)
			return exitUsage
		}
	}
	var tap capture.Writer
	if *pcap != "" {
		if tap, err = capture.Create(*pcap, capture.PcapngOptions{Comment: fmt.Sprintf("rocesim fabric --name %s --nodes %s --seed %d", *name, *nodes, *seed)}); err != nil {
			fmt.Fprintf(stderr, "rocesim fabric: %v\n", err)
			return exitUsage
		}
		cfg.Tap = tap
	}
	d, err := procfabric.Listen(cfg)
	if err != nil {
		if tap != nil {
			tap.Close()
			os.Remove(*pcap)
		}
		fmt.Fprintf(stderr, "rocesim fabric: %v\n", err)
		return exitUsage
	}
	sig := make(chan os.Signal, 1)
	signal.Notify(sig, syscall.SIGINT, syscall.SIGTERM)
	defer signal.Stop(sig)
	go func() {
		if _, ok := <-sig; ok {
			d.Close()
		}
	}()
	if os.Getenv("GOMAXPROCS") == "" {
		// The daemon is one loop, fed by a goroutine per socket: with a
		// second P, every message handed to the loop starts another
		// thread to run it, a futex wake-up on the path of every round
		// trip between processes. On one P the loop runs where the
		// message was read (ib_write_bw -n 500 on two processes: 4.8 s
		// -> 3.6-4.2 s on the 2-core development machine).
		defer runtime.GOMAXPROCS(runtime.GOMAXPROCS(1))
	}
	start := time.Now()
	end := d.Serve()
	wall := time.Since(start)
	code := exitOK
	if tap != nil {
		if err := tap.Close(); err != nil {
			fmt.Fprintf(stderr, "rocesim fabric: --pcap: %v\n", err)
			code = exitUsage
		}
	}
	if *traceFile != "" {
		if err := os.WriteFile(*traceFile, []byte(cfg.Trace.Text()), 0o644); err != nil {
			fmt.Fprintf(stderr, "rocesim fabric: --trace: %v\n", err)
			code = exitUsage
		}
	}
	// The ladders' columns are the fabric's nodes in their order, drawn
	// even if the plan dropped every frame they sent.
	if !*quiet {
		opts := textOptions(stdout, os.Getenv)
		opts.Nodes = d.NodeNames()
		if err := ladder.Text(stdout, cfg.Trace, opts); err != nil {
			fmt.Fprintf(stderr, "rocesim fabric: %v\n", err)
			code = exitUsage
		}
	}
	if *ladderFile != "" {
		if err := writeLadderFile(*ladderFile, cfg.Trace, d.NodeNames(), "rocesim fabric "+*name); err != nil {
			fmt.Fprintf(stderr, "rocesim fabric: --ladder: %v\n", err)
			code = exitUsage
		}
	}
	st := d.Stats()
	fmt.Fprintf(stdout, "fabric %s: virtual time %v, wall time %v; %d attaches, %d refused (%d of another user), %d held too long, %d frames to a node no process held (%d CM messages answered by its kernel); %d frames delivered in %d wake-ups\n",
		*name, end, wall.Round(time.Millisecond), st.Attaches, st.Refused, st.RefusedUID, st.HeldTooLong, st.Undelivered, st.KernelAnswers, st.Delivered, st.Wakes)
	if fab := d.Fabric(); fab != nil {
		printPlanReport(stdout, cfg.Plan, fab.RuleHits)
		if fab.TxEvictions() > 0 {
			fmt.Fprintf(stdout, "warning: %s\n", faults.TxEvictionWarning(fab.TxEvictions()))
		}
	}
	for _, f := range []struct{ flag, file string }{{"capture", *pcap}, {"trace", *traceFile}, {"ladder", *ladderFile}} {
		if f.file != "" {
			fmt.Fprintf(stdout, "%s: %s\n", f.flag, f.file)
		}
	}
	return code
}
