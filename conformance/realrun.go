package conformance

// The real side of a differential run. A Rig is two rxe guests, each with
// the interactive agent on its console, joined through a fault switch; it
// boots once and runs scenario after scenario:
//
//  1. Restart both agents (fresh PD, CQs, QP, MRs) and clear the switch
//     (no plan, no capture) while the resources are made.
//  2. On each guest, in the Program's order: open, pd, the CQs, the MRs
//     (filled as the scenario says: a fill the agent knows, then pokes),
//     the QP with its initial PSN; then connect each QP to the other
//     (RTR, RTS) with the scenario's attributes.
//  3. Give the switch the scenario's plan, seeded as the simulation seeds
//     it, and a fresh capture: the plan's clock starts here, as the
//     simulation's does at time 0. Start measuring how long the QEMUs and
//     the switch wait for a CPU (cpuwait.go).
//  4. Do each step at its time on the plan's clock: a node's steps of one
//     instant as one console line, its sends as one work request list;
//     then drain its automatically polled CQs. The plan's clock stands
//     still while a line is being done (Switch.Hold).
//  5. Wait until the link has been quiet for Rig.Quiet, stop measuring,
//     then drain every CQ, read the asynchronous events and dump every MR.
//  6. Close the capture and normalise it with the Program.

import (
	"context"
	"encoding/hex"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/rocesim/rocesim/faults"
	"github.com/rocesim/rocesim/nic"
	"github.com/rocesim/rocesim/rswitch"
	"github.com/rocesim/rocesim/scenario"
	"github.com/rocesim/rocesim/sim"
)

// Rig is two rxe guests ("a" at 10.0.0.1, "b" at 10.0.0.2, the addresses
// node 0 and node 1 have in a simulated run) with interactive agents,
// linked through a Switch.
type Rig struct {
	VMs    [2]*VM
	Agents [2]*Agent
	Switch *Switch
	// Quiet is how long the link must be silent before a run is taken to
	// be over (default 1.5 s: longer than any timer the conformance
	// scenarios arm).
	Quiet time.Duration

	gid      [2]string // the RoCE v2 IPv4 GID index of each guest
	runs     int
	lastWait CPUWait
}

// LastWait returns the longest wait for a CPU of the guests' QEMUs and
// of the switch during the last Run, from the plan's start until the
// link went quiet (see cpuwait.go).
func (r *Rig) LastWait() CPUWait { return r.lastWait }

// rigIPs are the guests' addresses: 10.0.0.(i+1), as in a simulated run.
var rigIPs = [2]string{"10.0.0.1", "10.0.0.2"}

// StartRig boots the two guests and waits for their agents. logDir, if
// not empty, receives each guest's console as a.log and b.log.
func StartRig(ctx context.Context, logDir string) (*Rig, error) {
	ports, err := FreeUDPPorts(2)
	if err != nil {
		return nil, err
	}
	sw, err := NewSwitch([2]int{ports[0], ports[1]}, rswitch.Config{})
	if err != nil {
		return nil, err
	}
	r := &Rig{Switch: sw, Quiet: 1500 * time.Millisecond}
	names := [2]string{"a", "b"}
	swPorts := [2]int{switchPort(sw, 0), switchPort(sw, 1)}
	for i := range 2 {
		cfg := VMConfig{Name: names[i], IP: rigIPs[i], Peer: rigIPs[1-i], LocalPort: ports[i], RemotePort: swPorts[i],
			Cmd: AgentLoop, Interactive: true, Timeout: 30 * time.Minute}
		if logDir != "" {
			cfg.LogPath = filepath.Join(logDir, names[i]+".log")
		}
		if r.VMs[i], err = Boot(ctx, cfg); err != nil {
			r.Close()
			return nil, err
		}
	}
	for i, vm := range r.VMs {
		if r.Agents[i], err = StartAgent(ctx, vm); err != nil {
			r.Close()
			return nil, fmt.Errorf("%w\nconsole:\n%s", err, vm.Console())
		}
		m := readyGID.FindStringSubmatch(vm.Console())
		if m == nil || m[1] == "" {
			r.Close()
			return nil, fmt.Errorf("conformance: VM %s: no RoCE v2 GID index on the console:\n%s", names[i], vm.Console())
		}
		r.gid[i] = m[1]
	}
	return r, nil
}

// Close stops the guests and the switch.
func (r *Rig) Close() {
	for _, vm := range r.VMs {
		if vm != nil {
			vm.Stop()
		}
	}
	if r.Switch != nil {
		r.Switch.Close()
	}
}

// rigNode is one side of a run: its agent and what it made.
type rigNode struct {
	a      *Agent
	dev    string // the device the agent opens; "" for its default (rxe0)
	node   *scenario.ProgramNode
	qpn    uint32
	addrs  []uint64 // per MR
	rkeys  []uint32
	mwKeys []uint32 // per MW: its R_Key as the program holds it (a bind moves it to the next)
	wcs    []OutcomeWC
	async  []string
	// reregs are the node's rereg answers; reregMRs the regions of the
	// rereg commands sent whose answers have not come yet, in order.
	reregs   []OutcomeRereg
	reregMRs []string
}

// Run runs the scenario on the guests and returns its normalised outcome.
// capturePath, if not empty, keeps the switch's capture of the run (with
// the plan's verdicts as comments).
func (r *Rig) Run(ctx context.Context, s *scenario.Scenario, capturePath string) (*Outcome, error) {
	prog, err := s.Program()
	if err != nil {
		return nil, err
	}
	if prog.Nodes[0].Name != "a" || prog.Nodes[1].Name != "b" {
		return nil, fmt.Errorf("conformance: %s: the rig's nodes are a and b, not %s and %s", prog.Name, prog.Nodes[0].Name, prog.Nodes[1].Name)
	}
	var plan *faults.Plan
	if prog.Faults != "" {
		if plan, err = faults.Parse(prog.Faults); err != nil {
			return nil, fmt.Errorf("conformance: %s: plan: %w", prog.Name, err)
		}
	}
	if r.runs > 0 {
		for _, a := range r.Agents {
			if err := a.Restart(ctx); err != nil {
				return nil, err
			}
		}
	}
	r.runs++
	if err := r.Switch.Reset(nil, nil, ""); err != nil {
		return nil, err
	}
	nodes, err := prepareNodes(ctx, prog, r.Agents, r.gid, "")
	if err != nil {
		return nil, err
	}

	capPath := capturePath
	if capPath == "" {
		f, err := os.CreateTemp("", "rocesim-rig-*.pcapng")
		if err != nil {
			return nil, err
		}
		f.Close()
		capPath = f.Name()
		defer os.Remove(capPath)
	}
	if err := r.Switch.Reset(plan, sim.NewSeeds(s.Seed()).Stream("faults"), capPath); err != nil {
		return nil, err
	}
	// Every thread of the QEMUs, but only the switch's own threads of
	// this process: the Go runtime's other threads (GC workers, idle
	// spinning) are runnable on a busy host without delaying a frame.
	meter := startCPUWaitMeter(meteredProc{pid: r.VMs[0].Pid(), who: "VM a"}, meteredProc{pid: r.VMs[1].Pid(), who: "VM b"},
		meteredProc{pid: os.Getpid(), tids: r.Switch.Threads(), who: "the switch"})
	r.lastWait = CPUWait{}
	defer func() {
		if meter != nil {
			meter.Stop()
		}
	}()
	for i := 0; i < len(prog.Steps); {
		st := &prog.Steps[i]
		// Steps are due on the plan's clock, which stands still while a
		// step is being done (Switch.Hold): a console that is slow on a
		// busy host delays the rest of the run, not the plan's faults
		// relative to the steps.
		for {
			d := time.Duration(sim.Time(st.At).Sub(r.Switch.PlanTime()))
			if d <= 0 {
				break
			}
			select {
			case <-time.After(d):
			case <-ctx.Done():
				return nil, ctx.Err()
			}
		}
		n, cmds, next, err := stepLine(prog, nodes, i)
		if err != nil {
			return nil, err
		}
		i = next
		r.Switch.Hold(sim.Time(st.At))
		err = n.run(ctx, cmds)
		r.Switch.Release()
		if err != nil {
			return nil, fmt.Errorf("conformance: %s: line %d: %w", prog.Name, st.Line, err)
		}
	}
	if err := r.waitQuiet(ctx, time.Now(), prog); err != nil {
		return nil, err
	}
	r.lastWait = meter.Stop()
	meter = nil
	out, err := collectOutcome(ctx, nodes)
	if err != nil {
		return nil, err
	}
	if err := r.Switch.Reset(nil, nil, ""); err != nil {
		return nil, fmt.Errorf("conformance: %s: capture: %w", prog.Name, err)
	}
	f, err := os.Open(capPath)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	if out.Wire, err = NormaliseCapture(f, prog); err != nil {
		return nil, fmt.Errorf("conformance: %s: %w", prog.Name, err)
	}
	return out, nil
}

// prepareNodes makes each node's objects with its agent (open, on device
// dev unless it is "", pd, CQs, MRs, MWs, the QP) and connects each QP
// to the other over GID index gid[i], the peer at rigIPs.
func prepareNodes(ctx context.Context, prog *scenario.Program, agents [2]*Agent, gid [2]string, dev string) ([2]*rigNode, error) {
	var nodes [2]*rigNode
	for i := range 2 {
		nodes[i] = &rigNode{a: agents[i], node: &prog.Nodes[i], dev: dev}
		if err := nodes[i].setup(ctx); err != nil {
			return nodes, fmt.Errorf("conformance: %s: node %s: %w", prog.Name, prog.Nodes[i].Name, err)
		}
	}
	for i, n := range nodes {
		if err := n.connect(ctx, gid[i], nodes[1-i], rigIPs[1-i]); err != nil {
			return nodes, fmt.Errorf("conformance: %s: node %s: %w", prog.Name, n.node.Name, err)
		}
	}
	return nodes, nil
}

// stepLine returns the agent commands of the steps from index i on that
// one node does at one instant, that node, and the index after them. The
// steps go as one console line, and the sends as one list (one
// ibv_post_send, one doorbell), so the device gets its work requests
// together, as in the simulation; then that node's auto CQs are drained.
func stepLine(prog *scenario.Program, nodes [2]*rigNode, i int) (*rigNode, []string, int, error) {
	st := &prog.Steps[i]
	n := nodes[st.Node]
	var cmds []string
	sends := false
	for ; i < len(prog.Steps) && prog.Steps[i].At == st.At && prog.Steps[i].Node == st.Node; i++ {
		c, err := n.stepCommands(&prog.Steps[i], nodes[1-st.Node])
		if err != nil {
			return nil, nil, i, fmt.Errorf("conformance: %s: line %d: %w", prog.Name, prog.Steps[i].Line, err)
		}
		if prog.Steps[i].Kind == scenario.StepSend && prog.Steps[i].Op != "bind" {
			c[0] += " defer=1"
			sends = true
		}
		cmds = append(cmds, c...)
	}
	if sends {
		cmds = append(cmds, "post_flush")
	}
	return n, append(cmds, n.drainCommands(true)...), i, nil
}

// collectOutcome drains every CQ of both nodes, reads their asynchronous
// events and dumps their MRs: the run's Outcome but for the wire.
func collectOutcome(ctx context.Context, nodes [2]*rigNode) (*Outcome, error) {
	out := &Outcome{}
	for _, n := range nodes {
		if err := n.run(ctx, append(n.drainCommands(false), "async")); err != nil {
			return nil, err
		}
	}
	for _, n := range nodes {
		out.Completions = append(out.Completions, n.wcs...)
		out.Rereg = append(out.Rereg, n.reregs...)
		for _, typ := range n.async {
			if ComparedAsync(typ) {
				out.Async = append(out.Async, OutcomeAsync{Node: n.node.Name, Type: typ})
			}
		}
	}
	for _, n := range nodes {
		for j, mr := range n.node.MRs {
			b, err := n.dump(ctx, j, len(mr.Init))
			if err != nil {
				return nil, err
			}
			out.Memory = append(out.Memory, scenario.MemoryRegion{Name: n.node.Name + "." + mr.Name, Bytes: b})
		}
	}
	return out, nil
}

// waitQuiet waits until the link has been silent for r.Quiet since end
// (when the last step was done) or since its last frame.
func (r *Rig) waitQuiet(ctx context.Context, end time.Time, prog *scenario.Program) error {
	limit := time.Now().Add(2 * time.Minute)
	for {
		now := time.Now()
		last := r.Switch.LastFrame()
		if last.Before(end) {
			last = end
		}
		if now.Sub(last) >= r.Quiet {
			return nil
		}
		if now.After(limit) {
			return fmt.Errorf("conformance: %s: the link never went quiet", prog.Name)
		}
		select {
		case <-time.After(min(r.Quiet-now.Sub(last), 100*time.Millisecond)):
		case <-ctx.Done():
			return ctx.Err()
		}
	}
}

// accessList is an agent access= value.
func accessList(f nic.AccessFlags) string {
	var s []string
	for _, a := range []struct {
		f nic.AccessFlags
		n string
	}{{nic.AccessLocalWrite, "lw"}, {nic.AccessRemoteWrite, "rw"}, {nic.AccessRemoteRead, "rr"}, {nic.AccessRemoteAtomic, "ra"},
		{nic.AccessMWBind, "mb"}} {
		if f&a.f != 0 {
			s = append(s, a.n)
		}
	}
	if len(s) == 0 {
		return "none"
	}
	return strings.Join(s, ",")
}

// pokeChunk is how many bytes one poke command carries (two hex digits
// each, inside the console's line limit).
const pokeChunk = 1024

func (n *rigNode) setup(ctx context.Context) error {
	open := "open"
	if n.dev != "" {
		open += " dev=" + n.dev
	}
	if _, err := n.a.Script(ctx, open, "pd"); err != nil {
		return err
	}
	for j, cq := range n.node.CQs {
		if _, err := n.a.Do(ctx, fmt.Sprintf("cq name=cq%d depth=%d", j, cq.Size)); err != nil {
			return err
		}
	}
	for j, mr := range n.node.MRs {
		fill := "zero"
		switch {
		case isSeq(mr.Init):
			fill = "seq"
		case isZero(mr.Init):
		}
		evs, err := n.a.Do(ctx, fmt.Sprintf("mr name=m%d len=%d fill=%s access=%s", j, len(mr.Init), fill, accessList(mr.Access)))
		if err != nil {
			return err
		}
		ev := lastEvent(evs, "mr")
		if ev == nil {
			return fmt.Errorf("mr %s: no mr event", mr.Name)
		}
		n.addrs = append(n.addrs, ev.Addr)
		n.rkeys = append(n.rkeys, ev.RKey)
		if fill == "zero" && !isZero(mr.Init) {
			for off := 0; off < len(mr.Init); off += pokeChunk {
				chunk := mr.Init[off:min(off+pokeChunk, len(mr.Init))]
				if isZero(chunk) {
					continue
				}
				if _, err := n.a.Do(ctx, fmt.Sprintf("poke mr=m%d off=%d hex=%s", j, off, hex.EncodeToString(chunk))); err != nil {
					return err
				}
			}
		}
	}
	for j, w := range n.node.MWs {
		evs, err := n.a.Do(ctx, fmt.Sprintf("mw name=w%d type=%d", j, w.Type))
		if err != nil {
			return err
		}
		ev := lastEvent(evs, "mw")
		if ev == nil {
			return fmt.Errorf("mw %s: no mw event", w.Name)
		}
		n.mwKeys = append(n.mwKeys, ev.RKey)
	}
	q := &n.node.QP
	sig := 0
	if q.SigAll {
		sig = 1
	}
	typ := "rc"
	if q.Type == nic.QPTypeUC {
		typ = "uc"
	}
	evs, err := n.a.Do(ctx, fmt.Sprintf("qp type=%s send=%d recv=%d sge=%d inline=%d psn=%d send_cq=cq%d recv_cq=cq%d access=%s sig_all=%d",
		typ, q.MaxSendWR, q.MaxRecvWR, max(q.MaxSGE, 1), q.MaxInline, q.PSN, q.SendCQ, q.RecvCQ, accessList(q.Access), sig))
	if err != nil {
		return err
	}
	ev := lastEvent(evs, "qp")
	if ev == nil {
		return fmt.Errorf("qp: no qp event")
	}
	n.qpn = ev.QPN
	return nil
}

func (n *rigNode) connect(ctx context.Context, gid string, peer *rigNode, peerIP string) error {
	q := &n.node.QP
	mtu := q.PathMTU
	if mtu == 0 {
		mtu = 1024 // a 1500-byte Ethernet link
	}
	_, err := n.a.Do(ctx, fmt.Sprintf("connect gid=%s qpn=%d psn=%d dgid=%s timeout=%d retry=%d rnr_retry=%d min_rnr=%d mtu=%d max_rd_atomic=%d max_dest_rd_atomic=%d",
		gid, peer.qpn, peer.node.QP.PSN, peerIP, q.Timeout, q.RetryCnt, q.RNRRetry, q.MinRNRTimer, mtu, q.MaxRdAtomic, q.MaxDestRdAtomic))
	return err
}

// badRKey is the rkey an "rkey=invalid" step uses on real rxe: index
// 0xffffff names no MR.
const badRKey = 0xffffff00

// stepCommands returns the agent commands of one step.
func (n *rigNode) stepCommands(st *scenario.ProgramStep, peer *rigNode) ([]string, error) {
	switch st.Kind {
	case scenario.StepRecv:
		return []string{fmt.Sprintf("post_recv wr_id=%d%s off=%d len=%d", st.WRID, mrArg(st.LocalMR), st.LocalOff, st.Len)}, nil
	case scenario.StepPoll:
		cqs := st.PollCQs
		if cqs == nil {
			for j := range n.node.CQs {
				cqs = append(cqs, j)
			}
		}
		var cmds []string
		for _, j := range cqs {
			cmds = append(cmds, fmt.Sprintf("drain cq=cq%d", j))
		}
		return cmds, nil
	case scenario.StepRereg:
		// The agent's rereg reports ibv_rereg_mr's answer and does not
		// stop on an error, as Run does.
		newPD := 0
		if st.OtherPD {
			newPD = 1
		}
		n.reregMRs = append(n.reregMRs, n.node.Name+"."+n.node.MRs[st.LocalMR].Name)
		return []string{fmt.Sprintf("rereg mr=m%d flags=%d access=%s newpd=%d off=%d len=%d", st.LocalMR, st.Rereg,
			accessList(st.Access), newPD, st.LocalOff, st.Len)}, nil
	case scenario.StepSend:
	default:
		return nil, fmt.Errorf("step kind %q", st.Kind)
	}
	if st.Op == "bind" {
		// The agent binds at once (type 1: ibv_bind_mw; type 2: a
		// BIND_MW work request) and moves the window to the next R_Key,
		// as the simulation does.
		c := fmt.Sprintf("bind mw=w%d wr_id=%d%s off=%d len=%d access=%s signaled=%d", st.MW, st.WRID, mrArg(st.LocalMR),
			st.LocalOff, st.Len, accessList(st.Access), min(1, int(st.Flags&nic.SendSignaled)))
		n.mwKeys[st.MW] = nic.IncRKey(n.mwKeys[st.MW])
		return []string{c}, nil
	}
	var b strings.Builder
	fmt.Fprintf(&b, "post_send wr_id=%d op=%s%s off=%d len=%d", st.WRID, st.Op, mrArg(st.LocalMR), st.LocalOff, st.Len)
	switch st.Op {
	case "send_imm", "write_imm":
		fmt.Fprintf(&b, " imm=%d", st.Imm)
	case "local_inv":
		fmt.Fprintf(&b, " inv=%d", n.mwKeys[st.MW])
	case "send_inv":
		fmt.Fprintf(&b, " inv=%d", peer.mwKeys[st.MW])
	}
	switch st.Op {
	case "write", "write_imm", "read", "cas", "faa":
		rkey := uint64(peer.rkeys[st.RemoteMR])
		if st.MW >= 0 {
			rkey = uint64(peer.mwKeys[st.MW]) // through the peer's window
		}
		if st.BadRKey {
			rkey = badRKey
		}
		fmt.Fprintf(&b, " raddr=%d rkey=%d", peer.addrs[st.RemoteMR]+st.RemoteOff, rkey)
	}
	switch st.Op {
	case "cas":
		fmt.Fprintf(&b, " compare=%d swap=%d", st.Compare, st.SwapAdd)
	case "faa":
		fmt.Fprintf(&b, " add=%d", st.SwapAdd)
	}
	flag := func(f nic.SendFlags) int {
		if st.Flags&f != 0 {
			return 1
		}
		return 0
	}
	fmt.Fprintf(&b, " signaled=%d fence=%d solicited=%d inline=%d", flag(nic.SendSignaled), flag(nic.SendFence), flag(nic.SendSolicited), flag(nic.SendInline))
	return []string{b.String()}, nil
}

// mrArg names the agent's MR j (" mr=mJ"), or none when j < 0 (a
// zero-length message touches no MR).
func mrArg(j int) string {
	if j < 0 {
		return ""
	}
	return " mr=m" + strconv.Itoa(j)
}

// drainCommands drains the node's CQs, only the automatically polled ones
// if auto.
func (n *rigNode) drainCommands(auto bool) []string {
	var cmds []string
	for j, cq := range n.node.CQs {
		if !auto || !cq.Manual {
			cmds = append(cmds, fmt.Sprintf("drain cq=cq%d", j))
		}
	}
	return cmds
}

// run sends the commands to the agent, as few console lines as they fit
// in, and keeps the completions and asynchronous events they print.
func (n *rigNode) run(ctx context.Context, cmds []string) error {
	for len(cmds) > 0 {
		line := cmds[0]
		k := 1
		for ; k < len(cmds) && len(line)+1+len(cmds[k]) <= maxConsoleLine; k++ {
			line += ";" + cmds[k]
		}
		cmds = cmds[k:]
		evs, err := n.a.Do(ctx, line)
		for _, ev := range evs {
			switch ev.Event {
			case "wc":
				n.wcs = append(n.wcs, OutcomeWC{Node: n.node.Name, WRID: ev.WRID, Status: ev.Status, Opcode: ev.Opcode, ByteLen: ev.ByteLen, Imm: ev.Imm,
					WCFlags: scenario.WCFlagsName(nic.WCFlags(ev.WCFlags))})
			case "async":
				n.async = append(n.async, ev.Type)
			case "rereg":
				if len(n.reregMRs) == 0 {
					return fmt.Errorf("conformance: an answer to no rereg command")
				}
				answer := "ok"
				if ev.Ret != 0 {
					answer = scenario.ErrnoName(syscall.Errno(ev.Errno))
				}
				n.reregs = append(n.reregs, OutcomeRereg{MR: n.reregMRs[0], Answer: answer})
				n.reregMRs = n.reregMRs[1:]
			}
		}
		if err != nil {
			return err
		}
	}
	return nil
}

// dumpChunk is how many bytes one dump command returns.
const dumpChunk = 16384

func (n *rigNode) dump(ctx context.Context, j, size int) ([]byte, error) {
	out := make([]byte, 0, size)
	for off := 0; off < size; off += dumpChunk {
		l := min(dumpChunk, size-off)
		evs, err := n.a.Do(ctx, "dump mr=m"+strconv.Itoa(j)+" off="+strconv.Itoa(off)+" len="+strconv.Itoa(l))
		if err != nil {
			return nil, err
		}
		ev := lastEvent(evs, "dump")
		if ev == nil {
			return nil, fmt.Errorf("dump: no dump event")
		}
		b, err := hex.DecodeString(ev.Hex)
		if err != nil || len(b) != l {
			return nil, fmt.Errorf("dump mr=m%d off=%d: bad hex (%d bytes, %v)", j, off, len(b), err)
		}
		out = append(out, b...)
	}
	return out, nil
}
