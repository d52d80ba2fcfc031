package main

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"strings"
)

// Exit statuses.
const (
	exitOK    = 0 // success
	exitBad   = 1 // inspect: a RoCE frame is malformed or fails its ICRC
	exitUsage = 2 // bad command line, or a file that cannot be read
	// exitRunaway: run: the scenario did not settle within its event
	// budget (--max-events); the message says what kept it going.
	exitRunaway = 3
)

const usage = `rocesim: a pure-Go RoCE v2 soft-RDMA simulator

Usage:
  rocesim run NAME|FILE [flags]   run a scenario: ladder diagram, summary, --pcap, --svg, --json
  rocesim scenarios               list the built-in scenarios
  rocesim inspect [--json] FILE   list the frames of a pcap or pcapng capture
  rocesim demo [flags]            the same as: rocesim run go-back-n [flags]
  rocesim fabric [flags]          a fabric daemon: processes' NICs meet on one simulated fabric
  rocesim exec [flags] -- PROG    run an unmodified libibverbs program on a fabric node (drop-in libibverbs.so.1)
  rocesim node [flags]            a model node on UDP 4791 of a (loopback) address, running a workload with a peer node
  rocesim switch [flags]          a fault switch between two real RoCE endpoints (VMs, interfaces, UDP hosts)
  rocesim help [COMMAND]          show this help, or a command's

Exit status: 0 success; 1 a scenario's expectations failed (run) or a
RoCE frame is malformed or fails its ICRC (inspect); 2 usage or I/O error;
3 a run did not settle within its event budget (run --max-events).

Examples:
  rocesim scenarios
  rocesim run go-back-n --pcap go-back-n.pcapng --svg go-back-n.svg
  rocesim inspect go-back-n.pcapng
`

const inspectUsage = `Usage: rocesim inspect [--json] FILE

Lists every frame of FILE, a pcap or pcapng file ("-" reads standard
input), one line per frame:

  index (from 1, as Wireshark numbers frames), seconds since the first
  frame, the pcapng interface name (if=...), source→destination, and for
  RoCE v2 the opcode, qp=, psn=, ack=1, the extension headers' fields,
  payload=, icrc=ok|BAD, then any pcapng comments after '#'.

Frames that are not RoCE v2 (ARP, TCP, other UDP ports) are listed as
non-RoCE. A line starting with '#' is a header or summary.

Flags:
  --json   one JSON object per frame (JSON lines) instead of text

Exit status: 0 every RoCE frame is well formed with a good ICRC; 1 one is
not; 2 usage or I/O error.
`

// run executes the command line args (without the program name), writing
// output to stdout and diagnostics to stderr, and returns the exit status.
func run(args []string, stdout, stderr io.Writer) int {
	if len(args) == 0 {
		fmt.Fprint(stderr, usage)
		return exitUsage
	}
	switch cmd, rest := args[0], args[1:]; cmd {
	case "inspect":
		return runInspect(rest, stdout, stderr)
	case "run":
		return runRun(rest, stdout, stderr)
	case "scenarios":
		return runScenarios(rest, stdout, stderr)
	case "fabric":
		return runFabric(rest, stdout, stderr)
	case "exec":
		return runExec(rest, stdout, stderr)
	case "node":
		return runNode(rest, stdout, stderr)
	case "switch":
		return runSwitch(rest, stdout, stderr)
	case "demo":
		if len(rest) > 0 && !strings.HasPrefix(rest[0], "-") {
			fmt.Fprintf(stderr, "rocesim demo: takes no scenario (it is %s); flags as for run\n", demoScenario)
			return exitUsage
		}
		return runRun(append([]string{demoScenario}, rest...), stdout, stderr)
	case "help", "-h", "-help", "--help":
		return runHelp(rest, stdout, stderr)
	default:
		fmt.Fprintf(stderr, "rocesim: unknown command %q\n\n%s", cmd, usage)
		return exitUsage
	}
}

// demoScenario is the built-in scenario rocesim demo runs.
const demoScenario = "go-back-n"

const demoUsage = `Usage: rocesim demo [flags]

Runs the built-in go-back-n scenario, exactly as rocesim run go-back-n
does, with the same flags: a 4-packet RC SEND whose PSN 2 is lost once,
NAKed, resent, and acknowledged by one cumulative ACK.

Example:
  rocesim demo --pcap demo.pcapng --svg demo.svg
`

// runHelp prints the general usage, or that of one command.
func runHelp(args []string, stdout, stderr io.Writer) int {
	switch {
	case len(args) == 0:
		fmt.Fprint(stdout, usage)
	case len(args) == 1 && args[0] == "inspect":
		fmt.Fprint(stdout, inspectUsage)
	case len(args) == 1 && args[0] == "run":
		fmt.Fprint(stdout, runUsage)
	case len(args) == 1 && args[0] == "scenarios":
		fmt.Fprint(stdout, scenariosUsage)
	case len(args) == 1 && args[0] == "demo":
		fmt.Fprint(stdout, demoUsage)
	case len(args) == 1 && args[0] == "fabric":
		fmt.Fprint(stdout, fabricUsage)
	case len(args) == 1 && args[0] == "exec":
		fmt.Fprint(stdout, execUsage)
	case len(args) == 1 && args[0] == "node":
		fmt.Fprint(stdout, nodeUsage)
	case len(args) == 1 && args[0] == "switch":
		fmt.Fprint(stdout, switchUsage)
	case len(args) == 1 && args[0] == "help":
		fmt.Fprint(stdout, usage)
	default:
		fmt.Fprintf(stderr, "rocesim help: unknown command %q\n\n%s", args[0], usage)
		return exitUsage
	}
	return exitOK
}

// runInspect parses inspect's command line and runs it.
func runInspect(args []string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("inspect", flag.ContinueOnError)
	fs.SetOutput(io.Discard) // errors are reported below, with our usage
	jsonOut := fs.Bool("json", false, "one JSON object per frame")
	files, err := parseInterspersed(fs, args)
	if errors.Is(err, flag.ErrHelp) {
		fmt.Fprint(stdout, inspectUsage)
		return exitOK
	}
	if err != nil {
		fmt.Fprintf(stderr, "rocesim inspect: %v\n\n%s", err, inspectUsage)
		return exitUsage
	}
	if len(files) != 1 {
		fmt.Fprintf(stderr, "rocesim inspect: want exactly one FILE, got %d\n\n%s", len(files), inspectUsage)
		return exitUsage
	}
	return inspectPath(files[0], *jsonOut, stdout, stderr)
}

// parseInterspersed parses flags anywhere on the command line ("inspect
// FILE --json" as well as "inspect --json FILE"), which the flag package
// alone does not: it stops at the first argument that is not a flag.
// After "--" everything is an argument.
func parseInterspersed(fs *flag.FlagSet, args []string) ([]string, error) {
	var pos []string
	for {
		if err := fs.Parse(args); err != nil {
			return nil, err
		}
		rest := fs.Args()
		if len(rest) == 0 {
			return pos, nil
		}
		if used := len(args) - len(rest); used > 0 && args[used-1] == "--" {
			return append(pos, rest...), nil
		}
		pos = append(pos, rest[0])
		args = rest[1:]
	}
}
