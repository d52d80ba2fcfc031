package main

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"regexp"
	"runtime/debug"
	"strconv"
	"strings"

	"github.com/rocesim/rocesim/faults"
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
  rocesim scenarios [--json]      list the built-in scenarios
  rocesim inspect [flags] FILE    list the frames of a pcap or pcapng capture (-Y, -c as tshark)
  rocesim demo [flags]            the same as: rocesim run go-back-n [flags]
  rocesim fabric [flags]          a fabric daemon: processes' NICs meet on one simulated fabric
  rocesim exec [flags] -- PROG    run an unmodified libibverbs program on a fabric node (drop-in libibverbs.so.1)
  rocesim node [flags]            a model node on UDP 4791 of a (loopback) address, running a workload with a peer node
  rocesim switch [flags]          a fault switch between two real RoCE endpoints (VMs, interfaces, UDP hosts)
  rocesim help [COMMAND]          show this help, or a command's (also: COMMAND --help)
  rocesim help faults             how a fault plan is written: its grammar, keys and actions
  rocesim --version               the module version and the commit it was built from

Exit status: 0 success; 1 a scenario's expectations failed (run) or a
RoCE frame is malformed or fails its ICRC (inspect); 2 usage or I/O error;
3 a run did not settle within its event budget (run --max-events).

Environment: NO_COLOR (any value) turns off the ladder's colours, as does
TERM=dumb; COLUMNS sets the width the ladder is drawn to and the summary
wraps to (default: the terminal's, else 80).

Examples:
  rocesim scenarios
  rocesim run go-back-n --pcap go-back-n.pcapng --svg go-back-n.svg
  rocesim run go-back-n --set link.delay=10us --fault "drop class=request psn=4 tx=1"
  rocesim inspect -Y 'class=nak' go-back-n.pcapng
`

const inspectUsage = `Usage: rocesim inspect [--json] [-Y FILTER] [-c N] FILE

Lists every frame of FILE, a pcap or pcapng file ("-" reads standard
input), one line per frame:

  index (from 1, as Wireshark numbers frames), seconds since the first
  frame, the pcapng interface name (if=...), source→destination, and for
  RoCE v2 the opcode, qp=, psn=, ack=1, the extension headers' fields,
  payload=, icrc=ok|BAD, then any pcapng comments after '#'.

Frames that are not RoCE v2 (ARP, TCP, other UDP ports) are listed as
non-RoCE. A line starting with '#' is a header or summary.

Flags:
  --json              one JSON object per frame (JSON lines) instead of text
  -Y, --filter KEYS   list only the frames KEYS select, as tshark -Y does;
                      KEYS are a fault rule's match keys (rocesim help faults):
                      op=RC_ACKNOWLEDGE, class=ack|nak|rnr|request|..., qp=,
                      psn=2 or psn=2-4, tx=2 (a retransmission), src=a,
                      dst=b, dir=a->b, link=a-b, from=/to= (time since the
                      first frame). src, dst, dir and link need a capture
                      rocesim wrote (its interfaces name the link ends).
                      Frames keep their numbers in the file.
  -c, --count N       stop after listing N frames, as tshark -c does

Examples:
  rocesim inspect run.pcapng
  rocesim inspect -Y 'class=nak' run.pcapng
  rocesim inspect -Y 'src=a tx=2' -c 5 run.pcapng

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
	case "version", "--version", "-version":
		fmt.Fprint(stdout, versionText())
		return exitOK
	case "demo":
		for _, a := range rest {
			if a == "--" {
				break
			}
			if a == "--help" || a == "-help" || a == "-h" {
				fmt.Fprint(stdout, demoUsage)
				return exitOK
			}
		}
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
does, with the same flags (rocesim help run lists them: --pcap, --svg,
--json, --set, --fault, ...): a 4-packet RC SEND whose PSN 2 is lost
once, NAKed, resent, and acknowledged by one cumulative ACK.

Examples:
  rocesim demo
  rocesim demo --pcap demo.pcapng --svg demo.svg
  rocesim demo --fault "drop class=request psn=4 tx=1"
`

// faultsHelp introduces rocesim help faults: the faults package's own
// documentation follows.
const faultsHelp = `Fault plans: what run --fault, a scenario file's fault lines, fabric,
exec and switch --faults, and ROCESIM_FAULTS take. On a command line or in
ROCESIM_FAULTS, ';' separates rules as newlines do. The text below is the
faults package's documentation (go doc github.com/rocesim/rocesim/faults).

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
	case len(args) == 1 && args[0] == "faults":
		fmt.Fprint(stdout, faultsHelp+faults.Reference())
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
	var filter string
	var count int
	fs.StringVar(&filter, "Y", "", "display filter: fault-plan match keys")
	fs.StringVar(&filter, "filter", "", "the same as -Y")
	fs.IntVar(&count, "c", 0, "stop after listing this many frames")
	fs.IntVar(&count, "count", 0, "the same as -c")
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
	if count < 0 {
		fmt.Fprintf(stderr, "rocesim inspect: -c %d: want a positive count of frames\n", count)
		return exitUsage
	}
	var sel *selector
	if filter != "" {
		if sel, err = newSelector(filter); err != nil {
			var pe *faults.ParseError
			if errors.As(err, &pe) {
				fmt.Fprintf(stderr, "rocesim inspect: -Y %q: column %d: %s\n", filter, pe.Col, pe.Msg)
			} else {
				fmt.Fprintf(stderr, "rocesim inspect: -Y %q: %v\n", filter, err)
			}
			return exitUsage
		}
	}
	return inspectPath(files[0], *jsonOut, sel, count, stdout, stderr)
}

// parseInterspersed parses flags anywhere on the command line ("inspect
// FILE --json" as well as "inspect --json FILE"), which the flag package
// alone does not: it stops at the first argument that is not a flag.
// After "--" everything is an argument.
func parseInterspersed(fs *flag.FlagSet, args []string) ([]string, error) {
	var pos []string
	for {
		if err := fs.Parse(args); err != nil {
			return nil, dashdash(err)
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

// dashdash rewrites the flag package's "-name" in an error as "--name",
// the way the usage texts and the README write every flag.
func dashdash(err error) error {
	if err == nil || errors.Is(err, flag.ErrHelp) {
		return err
	}
	return errors.New(singleDashFlag.ReplaceAllString(err.Error(), "${1}--$2"))
}

// singleDashFlag finds the flag name in the flag package's messages:
// "provided but not defined: -x", "for flag -x:", "needs an argument: -x".
var singleDashFlag = regexp.MustCompile(`(: |flag )-([A-Za-z][-A-Za-z0-9_]*)`)

// plural returns "1 frame", "2 frames": n and the noun, with an s unless
// n is 1.
func plural(n int, noun string) string {
	if n == 1 {
		return "1 " + noun
	}
	return strconv.Itoa(n) + " " + noun + "s"
}

// versionText is what rocesim --version prints: the module's version (a
// tagged release, or "(devel)" for a build from a checkout) and, when the
// go command recorded it, the VCS revision, its time and whether the tree
// had uncommitted changes.
func versionText() string {
	bi, ok := debug.ReadBuildInfo()
	if !ok {
		return "rocesim (no build information)\n"
	}
	v := bi.Main.Version
	if v == "" {
		v = "(devel)"
	}
	var rev, at, dirty string
	for _, s := range bi.Settings {
		switch s.Key {
		case "vcs.revision":
			rev = s.Value
		case "vcs.time":
			at = s.Value
		case "vcs.modified":
			if s.Value == "true" {
				dirty = ", with uncommitted changes"
			}
		}
	}
	out := "rocesim " + v
	if rev != "" {
		out += " (" + rev
		if at != "" {
			out += " of " + at
		}
		out += dirty + ")"
	}
	return out + ", " + bi.GoVersion + "\n"
}
