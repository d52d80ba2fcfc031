package main

import (
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/rocesim/rocesim/ladder"
	"github.com/rocesim/rocesim/scenario"
	"github.com/rocesim/rocesim/sim"
	"github.com/rocesim/rocesim/verbs"
	"github.com/rocesim/rocesim/wire/capture"
)

const runUsage = `Usage: rocesim run NAME|FILE|- [flags]

Runs a built-in scenario (see rocesim scenarios) or a scenario file ("-"
reads it from standard input) and prints its ladder diagram and a summary.

Flags:
  --seed N            master seed (default: the scenario's seed line, else 1)
  --profile rxe|spec  NIC behaviour profile (default rxe)
  --set TARGET.KEY=V  change one attribute of the scenario without editing
                      it (repeatable), e.g. --set a.q.retry_cnt=7; TARGET.KEY
                      is one of ` + setUsage + `
  --fault RULE        add RULE to the scenario's fault plan, after its own
                      rules (repeatable; rocesim help faults has the keys), e.g.
                      --fault "drop psn=3 tx=1"
  --deadline D        end the run at virtual time D (e.g. 10ms, 2s); it
                      replaces the scenario's deadline line
  --pcap FILE         write every frame to FILE (pcapng, a comment on each)
  --svg FILE          write the ladder as a standalone SVG (with a legend)
  --nodes a,b         draw only these nodes' columns, in this order, and
                      the frames between them (both ladders): a readable
                      picture of one pair of a many-node scenario
  --json              print a machine-readable result instead
  --quiet             print only the summary
  --max-events N      give up after N simulation events (default 200000,
                      a few seconds of wall time)

Examples:
  rocesim run go-back-n
  rocesim run retry-exceeded --profile spec --json
  rocesim run examples/rnr.scenario --pcap rnr.pcapng --svg rnr.svg
  rocesim run go-back-n --set link.delay=10us --fault "drop class=request psn=4 tx=1"
  rocesim run retry-exceeded --set a.q.retry_cnt=7 --profile spec

The ladder is drawn to the terminal's width (COLUMNS, else the
terminal's own, else 80 columns), in colour on a terminal unless NO_COLOR
is set or TERM is dumb; the summary's lines wrap to the same width.

A scenario file's error is printed as FILE:LINE:COLUMN: message, the
position of the offending word, as compilers do, for editors to jump to.

A run that takes more than about two seconds prints a progress line to
standard error every two seconds. A run that spends --max-events without
settling (a QP that retries forever: rxe's retry_cnt 7 and rnr_retry 7
are infinite) stops with a message saying what kept it going.

Memory stays bounded however long the run: the trace (and so the ladder)
keeps its first 131072 events and counts the rest; --pcap streams every
frame to the file.

Exit status: 0 the scenario met its expectations; 1 it did not; 2 usage
or I/O error; 3 the run did not settle within --max-events.
`

const scenariosUsage = `Usage: rocesim scenarios [--json]

Lists the built-in scenarios, one line each: name and description.
rocesim run NAME runs one; examples/NAME.scenario is its text.

Flags:
  --json   print a JSON array instead: per scenario its name,
           description, nodes, fault plan (one rule a line) and the
           number of expect lines
`

// scenarioJSON is one scenario in the output of scenarios --json.
type scenarioJSON struct {
	Name         string   `json:"name"`
	Description  string   `json:"description"`
	Nodes        []string `json:"nodes"`
	Faults       []string `json:"faults"`
	Expectations int      `json:"expectations"`
}

// runScenarios lists the catalogue.
func runScenarios(args []string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("scenarios", flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	jsonOut := fs.Bool("json", false, "JSON array")
	pos, err := parseInterspersed(fs, args)
	if errors.Is(err, flag.ErrHelp) {
		fmt.Fprint(stdout, scenariosUsage)
		return exitOK
	}
	if err == nil && len(pos) > 0 {
		err = errors.New("takes no arguments")
	}
	if err != nil {
		fmt.Fprintf(stderr, "rocesim scenarios: %v\n\n%s", err, scenariosUsage)
		return exitUsage
	}
	if *jsonOut {
		out := []scenarioJSON{}
		for _, s := range scenario.Builtin() {
			f := strings.Split(strings.TrimSuffix(s.Faults(), "\n"), "\n")
			if s.Faults() == "" {
				f = []string{}
			}
			out = append(out, scenarioJSON{Name: s.Name, Description: s.Description, Nodes: s.Nodes(), Faults: f, Expectations: s.Expectations()})
		}
		enc := json.NewEncoder(stdout)
		enc.SetIndent("", "  ")
		enc.SetEscapeHTML(false)
		if err := enc.Encode(out); err != nil {
			fmt.Fprintf(stderr, "rocesim scenarios: %v\n", err)
			return exitUsage
		}
		return exitOK
	}
	for _, s := range scenario.Builtin() {
		fmt.Fprintf(stdout, "%-20s %s\n", s.Name, s.Description)
	}
	return exitOK
}

// runRun parses run's command line and runs the scenario.
func runRun(args []string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("run", flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	seed := fs.Uint64("seed", 0, "master seed (0: the scenario's own, 1 unless it says)")
	profile := fs.String("profile", "rxe", "rxe or spec")
	pcap := fs.String("pcap", "", "pcapng output")
	svg := fs.String("svg", "", "SVG output")
	jsonOut := fs.Bool("json", false, "JSON result")
	quiet := fs.Bool("quiet", false, "summary only")
	deadline := fs.String("deadline", "", "virtual time at which the run ends")
	maxEvents := fs.Uint64("max-events", 0, "event budget")
	nodes := fs.String("nodes", "", "the ladders' columns")
	var sets, faultRules listFlag
	fs.Var(&sets, "set", "TARGET.KEY=VALUE (repeatable)")
	fs.Var(&faultRules, "fault", "a fault rule added to the plan (repeatable)")
	pos, err := parseInterspersed(fs, args)
	if errors.Is(err, flag.ErrHelp) {
		fmt.Fprint(stdout, runUsage)
		return exitOK
	}
	if err != nil {
		fmt.Fprintf(stderr, "rocesim run: %v\n\n%s", err, runUsage)
		return exitUsage
	}
	if len(pos) != 1 {
		fmt.Fprintf(stderr, "rocesim run: want exactly one scenario NAME or FILE, got %d\n\n%s", len(pos), runUsage)
		return exitUsage
	}
	var prof verbs.Profile
	switch *profile {
	case "rxe":
		prof = verbs.ProfileRXE
	case "spec":
		prof = verbs.ProfileSpec
	default:
		fmt.Fprintf(stderr, "rocesim run: --profile %q: want rxe or spec\n", *profile)
		return exitUsage
	}
	if *pcap != "" && *svg != "" && samePath(*pcap, *svg) {
		fmt.Fprintf(stderr, "rocesim run: --pcap and --svg name the same file %s: one would overwrite the other\n", *svg)
		return exitUsage
	}
	for _, out := range []struct{ flag, path string }{{"--pcap", *pcap}, {"--svg", *svg}} {
		if st, err := os.Stat(pos[0]); err == nil && st.Mode().IsRegular() && out.path != "" && samePath(out.path, pos[0]) {
			fmt.Fprintf(stderr, "rocesim run: %s %s is the scenario file itself: writing it would destroy the scenario\n", out.flag, out.path)
			return exitUsage
		}
	}
	sc, err := loadScenario(pos[0], stdin)
	if err == nil {
		sc, err = applyOverrides(sc, sets, faultRules)
	}
	if err != nil {
		var pe *scenario.ParseError
		if errors.As(err, &pe) {
			// FILE:LINE:COL: first on the line, as compilers print it, so
			// that editors (vim's quickfix, VS Code's terminal) jump to it.
			fmt.Fprintf(stderr, "%s:%d:%d: %s\n", pe.File, pe.Line, pe.Col, pe.Msg)
			return exitUsage
		}
		fmt.Fprintf(stderr, "rocesim run: %v\n", err)
		return exitUsage
	}
	var columns []string
	if *nodes != "" {
		columns = strings.Split(*nodes, ",")
		for _, n := range columns {
			if !slices.Contains(sc.Nodes(), n) {
				fmt.Fprintf(stderr, "rocesim run: --nodes: no node %q in %s (it has %s)\n", n, sc.Name, strings.Join(sc.Nodes(), ", "))
				return exitUsage
			}
		}
	}
	opt := scenario.Options{Seed: *seed, Profile: prof, Trace: &sim.Trace{}, MaxEvents: *maxEvents}
	if *deadline != "" {
		d, err := sim.ParseDuration(*deadline)
		if err != nil || d <= 0 {
			fmt.Fprintf(stderr, "rocesim run: --deadline %q: want a positive duration such as 10ms or 2s\n", *deadline)
			return exitUsage
		}
		opt.Deadline = d
	}
	var tap capture.Writer
	if *pcap != "" {
		if tap, err = capture.Create(*pcap, capture.PcapngOptions{Comment: fmt.Sprintf("rocesim run %s --seed %d --profile %s%s", sc.Name, seedOf(sc, *seed), *profile, overrideArgs(sets, faultRules))}); err != nil {
			fmt.Fprintf(stderr, "rocesim run: %v\n", err)
			return exitUsage
		}
		opt.Capture = tap
	}
	start := time.Now()
	opt.Progress = progressPrinter(stderr, sc.Name, start, time.Now)
	res, err := sc.Run(opt)
	wall := time.Since(start)
	if tap != nil {
		if cerr := tap.Close(); cerr != nil && err == nil {
			err = cerr
		}
	}
	var runaway *verbs.RunawayError
	if errors.As(err, &runaway) && res != nil {
		res.Failed = []string{notChecked}
		if *jsonOut {
			enc := json.NewEncoder(stdout)
			enc.SetIndent("", "  ")
			_ = enc.Encode(res) // the exit status and stderr say what matters
		} else {
			printSummary(stdout, ladderWidth(stdout, os.Getenv), res, wall, runaway)
		}
		fmt.Fprintf(stderr, "rocesim run: %s: did not settle within %d events (virtual time %v, %s): %s\n"+
			"rocesim run: %s: end it with --deadline, or allow more with --max-events\n",
			sc.Name, runaway.Events, runaway.At, plural(res.Frames, "frame"), runaway.Why(), sc.Name)
		return exitRunaway
	}
	if err != nil {
		fmt.Fprintf(stderr, "rocesim run: %s: %v\n", sc.Name, err)
		return exitUsage
	}
	if *svg != "" {
		f, err := os.Create(*svg)
		if err == nil {
			title := fmt.Sprintf("%s (seed %d, %s)", sc.Name, res.Seed, *profile)
			if columns != nil {
				title += ", nodes " + strings.Join(columns, ", ")
			}
			err = ladder.SVG(f, res.Trace, ladder.Options{Nodes: columns}, title)
			if cerr := f.Close(); err == nil {
				err = cerr
			}
		}
		if err != nil {
			fmt.Fprintf(stderr, "rocesim run: --svg: %v\n", err)
			return exitUsage
		}
	}
	switch {
	case *jsonOut:
		enc := json.NewEncoder(stdout)
		enc.SetIndent("", "  ")
		if err := enc.Encode(res); err != nil {
			fmt.Fprintf(stderr, "rocesim run: %v\n", err)
			return exitUsage
		}
	default:
		if !*quiet {
			if err := ladder.Text(stdout, res.Trace, withNodes(textOptions(stdout, os.Getenv), columns)); err != nil {
				fmt.Fprintf(stderr, "rocesim run: %v\n", err)
				return exitUsage
			}
			if res.Trace.Full() {
				fmt.Fprintf(stdout, "(the ladder shows the first %d events: the trace keeps no more)\n", len(res.Trace.Events()))
			}
			fmt.Fprintln(stdout)
		}
		printSummary(stdout, ladderWidth(stdout, os.Getenv), res, wall, nil)
	}
	if len(res.Failed) > 0 {
		for _, f := range res.Failed {
			fmt.Fprintf(stderr, "rocesim run: %s: expectation failed: %s\n", sc.Name, f)
		}
		return exitBad
	}
	return exitOK
}

// progressPrinter returns a scenario progress callback that prints a
// line to w every two seconds of wall time once the run has taken two:
// the virtual time reached, the frames and the events per second. The
// wall clock (clock: time.Now) is read here, in the driver, never in the
// simulation.
func progressPrinter(w io.Writer, name string, start time.Time, clock func() time.Time) func(verbs.Progress) {
	next := start.Add(2 * time.Second)
	var lastEvents uint64
	last := start
	return func(p verbs.Progress) {
		now := clock()
		if now.Before(next) {
			return
		}
		rate := float64(p.Events-lastEvents) / now.Sub(last).Seconds()
		fmt.Fprintf(w, "rocesim run: %s: still running after %v: virtual time %v, %s, %d events (%.0f events/s)\n",
			name, now.Sub(start).Round(time.Second), p.Now, plural(int(p.Frames), "frame"), p.Events, rate)
		next, last, lastEvents = now.Add(2*time.Second), now, p.Events
	}
}

// stdin is where run - reads its scenario (a variable for the tests).
var stdin io.Reader = os.Stdin

// loadScenario finds a built-in scenario by name, or reads a file ("-":
// in, named "stdin" in errors).
func loadScenario(arg string, in io.Reader) (*scenario.Scenario, error) {
	if arg == "-" {
		text, err := io.ReadAll(in)
		if err != nil {
			return nil, fmt.Errorf("reading standard input: %w", err)
		}
		return scenario.Parse("stdin", string(text))
	}
	isPath := strings.Contains(arg, "/") || strings.HasSuffix(arg, ".scenario")
	if _, err := os.Stat(arg); err != nil || !isPath {
		if s, ok := scenario.Lookup(arg); ok {
			return s, nil
		}
	}
	text, err := os.ReadFile(arg)
	if err != nil {
		if os.IsNotExist(err) && !strings.ContainsAny(arg, "/.") {
			return nil, fmt.Errorf("no built-in scenario %q (rocesim scenarios lists them)", arg)
		}
		return nil, err
	}
	return scenario.Parse(arg, string(text))
}

// notChecked is what a run that did not settle reports as its one failed
// expectation: none of them was checked.
const notChecked = "not checked: the run did not settle"

// printSummary prints completions per status, the counters that changed,
// and the virtual and wall time, each line wrapped to width (the ladder's,
// ladderWidth) so that the summary fits where the ladder above it does.
func printSummary(w io.Writer, width int, res *scenario.Result, wall time.Duration, runaway *verbs.RunawayError) {
	byStatus := map[string]int{}
	for _, c := range res.Completions {
		byStatus[c.Status]++
	}
	var statuses []string
	for s := range byStatus {
		statuses = append(statuses, s)
	}
	sort.Strings(statuses)
	items := []string{plural(len(res.Completions), "completion")}
	for _, s := range statuses {
		items = append(items, fmt.Sprintf("%d %s", byStatus[s], s))
	}
	wrapWords(w, width, res.Scenario+": ", ", ", items)
	wrapWords(w, width, "", ", ", []string{fmt.Sprintf("frames %d", res.Frames),
		fmt.Sprintf("virtual time %v", res.VirtualTime), fmt.Sprintf("wall time %v", wall.Round(time.Microsecond))})
	var nodes []string
	for n := range res.Counters {
		nodes = append(nodes, n)
	}
	sort.Strings(nodes)
	for _, n := range nodes {
		var names []string
		for k := range res.Counters[n] {
			names = append(names, k)
		}
		sort.Strings(names)
		var parts []string
		for _, k := range names {
			parts = append(parts, fmt.Sprintf("%s=%d", k, res.Counters[n][k]))
		}
		wrapWords(w, width, "counters "+n+": ", " ", parts)
	}
	for _, d := range res.SwitchDrops {
		wrapWords(w, width, "switch "+d.Switch+" dropped: ", ", ", []string{plural(int(d.Runts), "runt"),
			fmt.Sprintf("%d with no route", d.NoRoute)})
	}
	for _, warn := range res.Warnings {
		wrapWords(w, width, "warning: ", " ", strings.Fields(warn))
	}
	var verdict string
	switch {
	case len(res.Failed) == 0 && res.Checked == 0 && runaway == nil:
		verdict = "none (the scenario claims nothing: add expect lines)"
	case len(res.Failed) == 0:
		verdict = "all met"
	case runaway != nil:
		verdict = notChecked
	default:
		return
	}
	wrapWords(w, width, "expectations: ", " ", strings.Fields(verdict))
}

// wrapWords writes prefix, then words joined by sep, as lines no wider
// than width characters where a break is possible: a line breaks after
// sep (its trailing spaces dropped) and goes on under the first word,
// indented as wide as prefix, so that a node's counters stay one block.
// A word too wide for the room left stands alone on its line.
func wrapWords(w io.Writer, width int, prefix, sep string, words []string) {
	col := utf8.RuneCountInString(prefix)
	indent := col
	if indent > width/2 {
		indent = 2 // a long prefix (a node's name) would leave no room
	}
	var b strings.Builder
	b.WriteString(prefix)
	brk := strings.TrimRight(sep, " ")
	for i, word := range words {
		n := utf8.RuneCountInString(word)
		if i > 0 {
			if col+utf8.RuneCountInString(sep)+n > width {
				b.WriteString(brk + "\n" + strings.Repeat(" ", indent))
				col = indent
			} else {
				b.WriteString(sep)
				col += utf8.RuneCountInString(sep)
			}
		}
		b.WriteString(word)
		col += n
	}
	b.WriteString("\n")
	fmt.Fprint(w, b.String())
}

// useColor says whether the ladder written to w is coloured: only when w
// is a terminal, NO_COLOR (https://no-color.org) is unset or empty, and
// TERM is not "dumb" (a terminal that says it has no escape sequences:
// Emacs' shell, some CI logs).
func useColor(w io.Writer, getenv func(string) string) bool {
	return getenv("NO_COLOR") == "" && getenv("TERM") != "dumb" && isTerminal(w)
}

// defaultLadderWidth is the width of a ladder written anywhere but a
// terminal that says its width (a file, a pipe, a pager) with COLUMNS
// unset: the classic terminal's 80 columns, so that what is saved to a
// file or pasted into an issue fits any terminal it is later shown in.
const defaultLadderWidth = 80

// ladderWidth is the width the terminal ladder is drawn to: COLUMNS
// when it is a positive number (the shell's own variable, also the way
// to ask for a width), else the width of the terminal w is, else
// defaultLadderWidth.
func ladderWidth(w io.Writer, getenv func(string) string) int {
	if n, err := strconv.Atoi(strings.TrimSpace(getenv("COLUMNS"))); err == nil && n > 0 {
		return n
	}
	if n := terminalWidth(w); n > 0 {
		return n
	}
	return defaultLadderWidth
}

// textOptions are the terminal ladder's options for output to w: its
// width and whether it has colour.
func textOptions(w io.Writer, getenv func(string) string) ladder.Options {
	return ladder.Options{Color: useColor(w, getenv), Width: ladderWidth(w, getenv)}
}

// samePath reports whether a and b name one file: the same path once
// cleaned, or (when both exist) the same file by device and inode.
func samePath(a, b string) bool {
	if filepath.Clean(a) == filepath.Clean(b) {
		return true
	}
	sa, errA := os.Stat(a)
	sb, errB := os.Stat(b)
	return errA == nil && errB == nil && os.SameFile(sa, sb)
}

// overrideArgs is the --set and --fault flags of a run as a command line
// would repeat them, for the capture's comment.
func overrideArgs(sets, faultRules []string) string {
	var b strings.Builder
	for _, s := range sets {
		fmt.Fprintf(&b, " --set %s", s)
	}
	for _, f := range faultRules {
		fmt.Fprintf(&b, " --fault %q", f)
	}
	return b.String()
}

// seedOf is the seed a run uses: the flag's, else the scenario's own.
func seedOf(sc *scenario.Scenario, flagSeed uint64) uint64 {
	if flagSeed != 0 {
		return flagSeed
	}
	return sc.Seed()
}
