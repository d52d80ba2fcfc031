package conformance

// The C-ABI leg of the differential scenarios: the verbs agent
// (agent/agent.c, unmodified, compiled against the host's libibverbs
// headers) runs on rocesim's drop-in libibverbs.so.1 (dropin/ibverbs) in
// two local processes, nodes a and b of a fabric daemon (procfabric) that
// applies the scenario's fault plan, seeded as the simulation seeds it,
// and captures the link. So the same scenario runs three ways: in the
// simulation through the Go verbs (ModelOutcome), as the agent on real
// rxe (Rig), and as the same agent on the model through the C ABI (CABI).
//
// The agent is driven as on the rig (prepareNodes, stepLine,
// collectOutcome), over its stdin and stdout instead of a serial console
// (localAgent). Where the rig holds its switch's plan clock while a
// console line is done, CABI holds the fabric's virtual clock
// (procfabric.Daemon.Hold): it lets the clock run to a step's instant and
// no further, sends the step's line, and lets it go on only once the
// agent is idle again. The agent processes run with ROCESIM_POLL_WAIT=off
// (its drain's last, empty poll_cq must not wait for the next event: the
// clock is the driver's) and the fabric's idle wake (1 ms of wall time
// without a verb call, the agent waiting for its next line), by which a
// process waits on the daemon between lines. After the last step the
// clock runs until nothing is left to happen (or the scenario's
// deadline), as ModelOutcome's run does, then every CQ is drained and
// every MR dumped at that instant.

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/rocesim/rocesim/faults"
	"github.com/rocesim/rocesim/internal/dropinbuild"
	"github.com/rocesim/rocesim/procfabric"
	"github.com/rocesim/rocesim/scenario"
	"github.com/rocesim/rocesim/sim"
	"github.com/rocesim/rocesim/wire/capture"
)

// CABI runs the differential scenarios as the verbs agent on the
// drop-in library (see above). Build one with BuildCABI.
type CABI struct {
	// Lib is the directory of the drop-in libibverbs.so.1.
	Lib string
	// Agent is the agent binary, linked against libibverbs.so.1.
	Agent string
	// Limit bounds one scenario's wall time, agents and fabric included
	// (default 2 minutes); its processes are killed at the bound.
	Limit time.Duration
}

// cabiAddressLimitKB bounds an agent process's address space (a Go
// c-shared library reserves a few hundred MB of it).
const cabiAddressLimitKB = 4 << 20

// BuildCABI builds the drop-in library (go build -buildmode=c-shared with
// the Makefile's flags) and the agent into dir.
func BuildCABI(ctx context.Context, dir string) (*CABI, error) {
	gomod, err := exec.CommandContext(ctx, "go", "env", "GOMOD").Output()
	if err != nil {
		return nil, fmt.Errorf("conformance: go env GOMOD: %v", err)
	}
	root := filepath.Dir(strings.TrimSpace(string(gomod)))
	c := &CABI{Lib: filepath.Join(dir, "lib"), Agent: filepath.Join(dir, "rocesim-agent")}
	cmd := dropinbuild.Command(ctx, root, filepath.Join(c.Lib, "libibverbs.so.1"))
	if out, err := cmd.CombinedOutput(); err != nil {
		return nil, fmt.Errorf("conformance: building the drop-in library: %v\n%s", err, out)
	}
	if err := buildAgent(c.Agent, agentSource, "-libverbs"); err != nil {
		return nil, err
	}
	return c, nil
}

// cabiGID is the GID index the agents connect over: the drop-in device's
// IPv4-mapped RoCE v2 GID (index 1, as on rxe).
const cabiGID = "1"

// Run runs s and returns its normalised outcome. capturePath, if not
// empty, keeps the fabric's capture (the plan's verdicts as comments).
func (c *CABI) Run(ctx context.Context, s *scenario.Scenario, capturePath string) (*Outcome, error) {
	prog, err := s.Program()
	if err != nil {
		return nil, err
	}
	var plan *faults.Plan
	if prog.Faults != "" {
		if plan, err = faults.Parse(prog.Faults); err != nil {
			return nil, fmt.Errorf("conformance: %s: plan: %w", prog.Name, err)
		}
	}
	limit := c.Limit
	if limit == 0 {
		limit = 2 * time.Minute
	}
	ctx, cancel := context.WithTimeout(ctx, limit)
	defer cancel()
	// A short directory of its own (0700, as procfabric wants): a Unix
	// socket's path is limited to 108 bytes.
	dir, err := os.MkdirTemp("", "rocesim-cabi-")
	if err != nil {
		return nil, err
	}
	defer os.RemoveAll(dir)
	if capturePath == "" {
		capturePath = filepath.Join(dir, "run.pcapng")
	}
	w, err := capture.Create(capturePath, capture.PcapngOptions{Comment: "rocesim C-ABI run of scenario " + s.Name +
		" (the agent on the drop-in libibverbs, rxe profile, two processes on a fabric), plan:\n" + planOrNone(prog.Faults)})
	if err != nil {
		return nil, err
	}
	names := [2]string{prog.Nodes[0].Name, prog.Nodes[1].Name}
	var log bytes.Buffer // the daemon's loop writes it; read once Serve returned (stop)
	d, err := procfabric.Listen(procfabric.Config{Name: "cabi", Dir: dir, Nodes: names[:], Plan: plan, Seed: prog.Seed,
		Tap: w, HoldLimit: limit, Log: &log, Held: true})
	if err != nil {
		w.Close()
		return nil, err
	}
	served := make(chan struct{})
	go func() { d.Serve(); close(served) }()
	var las [2]*localAgent
	stop := func() {
		for _, la := range las {
			if la != nil {
				la.Stop()
			}
		}
		d.Close()
		<-served
	}
	fail := func(err error) (*Outcome, error) {
		stop()
		w.Close()
		var b strings.Builder
		for _, la := range las {
			if la != nil {
				fmt.Fprintf(&b, "\nagent %s's stderr:\n%s", la.name, la.Stderr())
			}
		}
		return nil, fmt.Errorf("conformance: %s (C ABI): %w%s\nfabric log:\n%s", prog.Name, err, b.String(), log.String())
	}
	env := []string{"LD_LIBRARY_PATH=" + c.Lib, "ROCESIM_FABRIC=cabi", "ROCESIM_FABRIC_DIR=" + dir,
		"ROCESIM_POLL_WAIT=off", "ROCESIM_PROFILE=rxe", "ROCESIM_SEED=" + strconv.FormatUint(prog.Seed, 10)}
	var agents [2]*Agent
	for i, name := range names {
		if las[i], err = startLocalAgent(ctx, name, c.Agent, append(env, "ROCESIM_NODE="+name)); err != nil {
			return fail(err)
		}
		if agents[i], err = startAgent(ctx, las[i]); err != nil {
			return fail(err)
		}
	}
	nodes, err := prepareNodes(ctx, prog, agents, [2]string{cabiGID, cabiGID}, "rocesim0")
	if err != nil {
		return fail(err)
	}
	for i := 0; i < len(prog.Steps); {
		st := &prog.Steps[i]
		if _, err := d.Hold(ctx, sim.Time(st.At)); err != nil {
			return fail(fmt.Errorf("holding the clock at %v: %w", sim.Time(st.At), err))
		}
		n, cmds, next, err := stepLine(prog, nodes, i)
		if err != nil {
			return fail(err)
		}
		i = next
		if err := n.run(ctx, cmds); err != nil {
			return fail(fmt.Errorf("line %d: %w", st.Line, err))
		}
	}
	end := sim.Never
	if prog.Deadline != 0 {
		end = sim.Time(prog.Deadline)
	}
	if _, err := d.Hold(ctx, end); err != nil {
		return fail(fmt.Errorf("running to the end: %w", err))
	}
	out, err := collectOutcome(ctx, nodes)
	if err != nil {
		return fail(err)
	}
	stop()
	if err := w.Close(); err != nil {
		return nil, err
	}
	f, err := os.Open(capturePath)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	if out.Wire, err = NormaliseCapture(f, prog); err != nil {
		return nil, fmt.Errorf("conformance: %s (C ABI): %w", prog.Name, err)
	}
	return out, nil
}

// localAgent is the interactive agent in a process on this host: its
// stdin and stdout are the console (see console in session.go). The
// process is bounded by the context it was started with (killed at its
// end) and by cabiAddressLimitKB, and Stop kills it by its PID.
type localAgent struct {
	name  string
	cmd   *exec.Cmd
	stdin io.WriteCloser

	mu      sync.Mutex
	lines   []string
	changed chan struct{} // closed and replaced when a line comes
	done    chan struct{} // closed when stdout ends
	// stderr is read once the process has been waited for (Stop).
	stderr bytes.Buffer
}

// startLocalAgent starts bin (the interactive agent: no argument) with
// env added to an environment cleared of the ROCESIM_ variables and
// LD_LIBRARY_PATH.
func startLocalAgent(ctx context.Context, name, bin string, env []string) (*localAgent, error) {
	// The shell sets the limit and execs the agent, which keeps its PID.
	cmd := exec.CommandContext(ctx, "sh", "-c", `ulimit -v `+strconv.Itoa(cabiAddressLimitKB)+` && exec "$0"`, bin)
	for _, kv := range os.Environ() {
		if !strings.HasPrefix(kv, "ROCESIM_") && !strings.HasPrefix(kv, "LD_LIBRARY_PATH=") {
			cmd.Env = append(cmd.Env, kv)
		}
	}
	cmd.Env = append(cmd.Env, env...)
	la := &localAgent{name: name, cmd: cmd, changed: make(chan struct{}), done: make(chan struct{})}
	var err error
	if la.stdin, err = cmd.StdinPipe(); err != nil {
		return nil, err
	}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		return nil, err
	}
	cmd.Stderr = &la.stderr
	if err := cmd.Start(); err != nil {
		return nil, fmt.Errorf("conformance: agent %s: %w", name, err)
	}
	go la.read(stdout)
	return la, nil
}

// read collects the agent's output lines until its stdout ends.
func (la *localAgent) read(r io.Reader) {
	defer close(la.done)
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 64<<10), 1<<20) // a dump's hex line is 32 KB
	for sc.Scan() {
		la.mu.Lock()
		la.lines = append(la.lines, sc.Text())
		close(la.changed)
		la.changed = make(chan struct{})
		la.mu.Unlock()
	}
}

func (la *localAgent) consoleName() string { return "agent " + la.name }

// Send writes one command line to the agent's stdin.
func (la *localAgent) Send(line string) error {
	if strings.ContainsAny(line, "\n\r") {
		return fmt.Errorf("conformance: agent %s: a command line must be one line", la.name)
	}
	_, err := io.WriteString(la.stdin, line+"\n")
	return err
}

func (la *localAgent) waitLine(ctx context.Context, from int, match func(string) bool) (string, int, error) {
	l, i, err := waitLineIn(ctx, &la.mu, &la.lines, &la.changed, la.done, from, match)
	if err != nil {
		return "", i, fmt.Errorf("conformance: agent %s: %w", la.name, err)
	}
	return l, i, nil
}

// Stderr returns what the agent process wrote on stderr; call it after
// Stop.
func (la *localAgent) Stderr() string { return la.stderr.String() }

// Stop kills the agent process by its PID and waits for it.
func (la *localAgent) Stop() {
	la.stdin.Close()
	if la.cmd.Process != nil {
		la.cmd.Process.Signal(syscall.SIGKILL)
	}
	la.cmd.Wait()
}
