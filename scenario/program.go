package scenario

import (
	"encoding/binary"
	"fmt"

	"github.com/rocesim/rocesim/faults"
	"github.com/rocesim/rocesim/nic"
	"github.com/rocesim/rocesim/sim"
	"github.com/rocesim/rocesim/sim/fabric"
)

// A Program is made in three steps:
//
//  1. Check that the scenario is the shape another implementation can
//     replay: two nodes on one point-to-point link with the default MTU
//     and queue, one RC QP on each, the two QPs peers of each other and
//     starting in RTS, no modify steps, no numeric rkey=.
//  2. Copy the declarations into plain data, indexes in place of
//     pointers: memory regions with their initial bytes (the bytes Run
//     registers with the scenario's own seed), CQs in creation order, the
//     QP with every attribute Run would set.
//  3. Copy the steps in file order; a poll step that names CQs of both
//     nodes (or none, meaning every CQ) becomes one step per node, in the
//     order Run polls them.

// Program is a two-node RC scenario as plain data: what a replay on
// another implementation (two real rxe VMs driven by a verbs agent) needs
// to run the same workload under the same fault plan, with no pointers
// into the scenario and no knowledge of the scenario format. Run on the
// scenario and a faithful replay of its Program post the same work
// requests with the same attributes in the same order at the same
// (relative) times.
type Program struct {
	// Name is the scenario's name.
	Name string
	// Faults is the fault plan in canonical text (faults.Plan.String()),
	// "" for none. Its link names are Link; its node names are the
	// Nodes' names.
	Faults string
	// Link is the name the fault plan gives the one link: "x-y" for
	// "link x y" (a fault switch must use NameA x and NameB y).
	Link string
	// Seed is the scenario's seed: the fills of fill=random were drawn
	// from it, and a run draws the plan's prob= decisions from
	// sim.NewSeeds(Seed).Stream("faults").
	Seed uint64
	// Nodes are exactly 2, in declaration order; node i has IPv4
	// 10.0.0.(i+1) in a Run.
	Nodes []ProgramNode
	// Steps are the workload in file order.
	Steps []ProgramStep
	// Deadline is the deadline line, or 0 (run until nothing is left to
	// happen).
	Deadline sim.Duration
}

// ProgramNode is one host: its memory regions, CQs and its one QP.
type ProgramNode struct {
	Name string
	// MRs are the node's memory regions in declaration order.
	MRs []ProgramMR
	// MWs are the node's memory windows in declaration order.
	MWs []ProgramMW
	// CQs are the node's CQs, explicit and implicit ones, in creation
	// order (the declared ones, then the QP's own).
	CQs []ProgramCQ
	// QP is the node's one RC QP.
	QP ProgramQP
}

// ProgramMR is a memory region.
type ProgramMR struct {
	// Name is the region's name on its node ("buf" for mr a.buf).
	Name string
	// Init is the contents at registration: fill= and u64= applied
	// (fill=random: the exact bytes a Run with the scenario's own seed
	// uses). Its length is the region's size.
	Init []byte
	// Access is the region's access flags.
	Access nic.AccessFlags
}

// ProgramMW is a memory window, allocated after the node's MRs.
type ProgramMW struct {
	// Name is the window's name on its node ("win" for mw b.win).
	Name string
	// Type is 1 or 2.
	Type nic.MWType
}

// ProgramCQ is a completion queue.
type ProgramCQ struct {
	// Name is the CQ's name: its cq line's, or "QP/cq" for a QP's own.
	Name string
	// Size is the size as requested (before rxe's rounding up to 2^k-1).
	Size int
	// Manual is poll=manual: polled only by poll steps and at the end.
	Manual bool
}

// ProgramQP is a node's RC or UC QP with the attributes a Run gives it
// on the way from RESET to RTS.
type ProgramQP struct {
	// Name is the QP's name on its node ("q" for qp a.q).
	Name string
	// Type is RC or UC (a UC QP ignores the RC-only attributes below:
	// its modify_qp masks leave them out).
	Type nic.QPType
	// SendCQ and RecvCQ index the node's CQs.
	SendCQ, RecvCQ int
	// PSN is its initial send PSN (sq_psn), which is also the peer's
	// rq_psn.
	PSN uint32
	// PathMTU is the path MTU in bytes; 0 when the port's active MTU is
	// used (1024 on a link of the default IP MTU 1500).
	PathMTU int
	// Timeout, RetryCnt, RNRRetry, MinRNRTimer, MaxRdAtomic and
	// MaxDestRdAtomic are the ibv_qp_attr values a Run sets (defaults
	// applied).
	Timeout, RetryCnt, RNRRetry, MinRNRTimer, MaxRdAtomic, MaxDestRdAtomic uint8
	// Access is qp_access_flags.
	Access nic.AccessFlags
	// MaxSendWR, MaxRecvWR, MaxSGE (send and receive) and MaxInline are
	// the QP's capabilities as requested.
	MaxSendWR, MaxRecvWR, MaxSGE, MaxInline uint32
	// SigAll is sq_sig_all.
	SigAll bool
}

// Program step kinds (ProgramStep.Kind).
const (
	StepSend = "send"
	StepRecv = "recv"
	StepPoll = "poll"
	// StepRereg is ibv_rereg_mr of the node's region LocalMR with the
	// flags Rereg: CHANGE_ACCESS to Access, CHANGE_PD to the node's PD
	// or (OtherPD) a second PD of the node made on first use,
	// CHANGE_TRANSLATION to [LocalOff, LocalOff+Len) of the region's
	// own buffer. Its answer is compared, not the run stopped by it.
	StepRereg = "rereg"
)

// ProgramStep is one step of the workload.
type ProgramStep struct {
	// At is the step's time from the start of the workload.
	At sim.Duration
	// Line is the step's line in the scenario file.
	Line int
	// Node indexes Program.Nodes: the node whose QP posts, or whose CQs
	// are polled.
	Node int
	// Kind is StepSend, StepRecv, StepPoll or StepRereg.
	Kind string
	// WRID is the work request's wr_id (send, recv).
	WRID uint64
	// Op is the send's operation: "send", "send_imm", "write",
	// "write_imm", "read", "cas", "faa", "send_inv", "local_inv" or
	// "bind". A bind binds MW over [LocalOff, LocalOff+Len) of LocalMR
	// with Access (type 1 through ibv_bind_mw, type 2 with a BIND_MW
	// work request) and moves the window to its next R_Key at once.
	Op string
	// Len is the length of the one SGE (0: no SGE).
	Len uint64
	// LocalMR indexes the node's MRs: the SGE's region; -1 when Len is 0.
	LocalMR int
	// LocalOff is the SGE's offset in LocalMR.
	LocalOff uint64
	// RemoteMR indexes the PEER's MRs: the target of a WRITE, READ or
	// atomic (its address and R_Key); -1 for SENDs.
	RemoteMR int
	// RemoteOff is the offset in RemoteMR.
	RemoteOff uint64
	// BadRKey is rkey=invalid: RemoteMR's R_Key with another key byte
	// (a Run flips bit 7 of the key), which names no region.
	BadRKey bool
	// Imm is the immediate data of send_imm and write_imm.
	Imm uint32
	// Compare is a cas's compare value; SwapAdd its swap value, or a
	// faa's add value.
	Compare, SwapAdd uint64
	// Flags are the send flags (signaled unless unsignaled, fence,
	// solicited, inline).
	Flags nic.SendFlags
	// MW indexes the MWs of the node that owns the window named: the
	// posting node's for bind and local_inv, the peer's for send_inv
	// (the R_Key to invalidate) and for a WRITE, READ or atomic through
	// the window (its R_Key instead of RemoteMR's); -1 for none.
	MW int
	// Access is a bind's access flags for the window, or a rereg's new
	// access flags for the region.
	Access nic.AccessFlags
	// Rereg is a rereg's flags (IBV_REREG_MR_CHANGE_*).
	Rereg nic.ReregFlags
	// OtherPD is a rereg's pd=other: the node's second PD.
	OtherPD bool
	// PollCQs index the node's CQs to poll, in order; nil means all of
	// the node's CQs (manual ones too) in creation order.
	PollCQs []int
}

// Program returns the scenario as plain data for a replay on another
// implementation. It fails, naming the line and the feature, for a
// scenario a two-node replay cannot express: other than two nodes on one
// link, a switch, link mtu= or queue=, other than one RC or UC QP per node
// (UD, several QPs), QPs not each other's peers or not starting in RTS,
// modify steps, a numeric rkey=, on lines, times=.
func (s *Scenario) Program() (*Program, error) {
	fail := func(line int, format string, args ...any) (*Program, error) {
		return nil, fmt.Errorf("scenario %s: line %d: not a two-node program: %s", s.Name, line, fmt.Sprintf(format, args...))
	}
	if len(s.nodes) != 2 {
		line := 1
		if len(s.nodes) > 0 {
			line = s.nodes[len(s.nodes)-1].line
		}
		return fail(line, "%d nodes (a program has exactly 2)", len(s.nodes))
	}
	// Two nodes, each on exactly one link or switch: one of either.
	l := s.links[0]
	if l.sw != "" {
		return fail(l.line, "switch %s (a program has one point-to-point link)", l.sw)
	}
	def := fabric.DefaultLinkConfig()
	if l.config.MTU != def.MTU {
		return fail(l.line, "link mtu=%d (the replay's link has the default MTU %d)", l.config.MTU, def.MTU)
	}
	if l.config.QueueBytes != def.QueueBytes {
		return fail(l.line, "link queue=%d (the replay's link does not model the queue)", l.config.QueueBytes)
	}
	p := &Program{Name: s.Name, Faults: s.planText, Link: l.nodes[0].name + "-" + l.nodes[1].name, Seed: s.seed,
		Deadline: s.deadline}
	if s.planText != "" {
		// The canonical text, as faults.Plan.String() prints it.
		plan, err := faults.Parse(s.planText)
		if err != nil {
			return nil, fmt.Errorf("scenario %s: fault plan: %w", s.Name, err)
		}
		p.Faults = plan.String()
	}
	seeds := sim.NewSeeds(s.seed)
	for _, n := range s.nodes {
		if len(n.qps) != 1 {
			line := n.line
			if len(n.qps) > 1 {
				line = n.qps[1].line
			}
			return fail(line, "%d QPs on node %s (a program has one RC or UC QP per node)", len(n.qps), n.name)
		}
		q := n.qps[0]
		switch {
		case q.typ != nic.QPTypeRC && q.typ != nic.QPTypeUC:
			return fail(q.line, "%v QP %s (a program has RC or UC QPs only)", q.typ, q)
		case q.state != nic.QPStateRTS:
			return fail(q.line, "QP %s starting in %v (a program's QPs start in RTS)", q, q.state)
		case q.peer == nil || q.peer.node == n:
			return fail(q.line, "QP %s without a peer", q)
		}
		pn := ProgramNode{Name: n.name}
		for _, m := range n.mrs {
			pn.MRs = append(pn.MRs, ProgramMR{Name: m.name, Init: m.initial(seeds), Access: m.access})
		}
		for _, w := range n.mws {
			pn.MWs = append(pn.MWs, ProgramMW{Name: w.name, Type: w.typ})
		}
		for _, c := range n.cqs {
			pn.CQs = append(pn.CQs, ProgramCQ{Name: c.name, Size: c.size, Manual: c.manual})
		}
		pn.QP = ProgramQP{Name: q.name, Type: q.typ, SendCQ: indexOf(n.cqs, q.sendCQ), RecvCQ: indexOf(n.cqs, q.recvCQ),
			PSN: q.psn, PathMTU: q.mtu.Bytes(), Timeout: q.timeout, RetryCnt: q.retryCnt, RNRRetry: q.rnrRetry,
			MinRNRTimer: q.minRNRTimer, MaxRdAtomic: q.maxRdAtomic, MaxDestRdAtomic: q.maxDestRdAt,
			Access: q.access, MaxSendWR: q.maxSendWR, MaxRecvWR: q.maxRecvWR, MaxSGE: q.maxSGE,
			MaxInline: q.maxInline, SigAll: q.sigAll}
		p.Nodes = append(p.Nodes, pn)
	}
	if len(s.ons) > 0 {
		return fail(s.ons[0].line, "an on line (the replay has no completion-driven steps)")
	}
	for _, st := range s.steps {
		if st.times > 1 {
			return fail(st.line, "times=%d (the replay does each step once)", st.times)
		}
		steps, err := s.programSteps(st)
		if err != nil {
			return fail(st.line, "%s", err)
		}
		p.Steps = append(p.Steps, steps...)
	}
	return p, nil
}

// programSteps converts one step; a poll may become one step per node.
func (s *Scenario) programSteps(st *step) ([]ProgramStep, error) {
	ps := ProgramStep{At: st.at, Line: st.line, LocalMR: -1, RemoteMR: -1, MW: -1}
	switch st.kind {
	case stepModify:
		return nil, fmt.Errorf("a modify step (%s)", st.text)
	case stepPoll:
		ps.Kind = StepPoll
		if st.pollCQs == nil {
			// Every CQ of every node, node by node, as Run polls them.
			out := make([]ProgramStep, len(s.nodes))
			for i := range s.nodes {
				out[i] = ps
				out[i].Node = i
			}
			return out, nil
		}
		// Consecutive CQs of one node make one step.
		var out []ProgramStep
		for _, c := range st.pollCQs {
			if len(out) == 0 || out[len(out)-1].Node != c.node.idx {
				ps.Node = c.node.idx
				out = append(out, ps)
			}
			last := &out[len(out)-1]
			last.PollCQs = append(last.PollCQs, indexOf(c.node.cqs, c))
		}
		return out, nil
	case stepRereg:
		m := st.local.mr
		ps.Kind, ps.Node, ps.LocalMR, ps.Rereg, ps.OtherPD, ps.Access = StepRereg, m.node.idx, indexOf(m.node.mrs, m), st.rereg, st.otherPD, st.access
		if st.hasLen {
			ps.LocalOff, ps.Len = st.reregOff, st.length
		}
		return []ProgramStep{ps}, nil
	case stepRecv:
		ps.Kind = StepRecv
	case stepSend:
		ps.Kind = StepSend
		ps.Op = opName(st.op)
		if st.hasRKey && !st.badRKey {
			return nil, fmt.Errorf("an explicit rkey=%#x (keys differ between implementations; rkey=invalid can be replayed)", st.rkey)
		}
		ps.BadRKey = st.badRKey
		ps.Imm, ps.Compare, ps.SwapAdd, ps.Flags = st.imm, st.compare, st.swapAdd, st.flags
		if st.remote.mr != nil {
			ps.RemoteMR, ps.RemoteOff = indexOf(st.remote.mr.node.mrs, st.remote.mr), st.remote.off
		}
		if st.mw != nil {
			ps.MW, ps.Access = indexOf(st.mw.node.mws, st.mw), st.access
		}
	}
	q := st.qp
	ps.Node, ps.WRID, ps.Len = q.node.idx, st.wrID, st.length
	if st.length > 0 {
		ps.LocalMR, ps.LocalOff = indexOf(q.node.mrs, st.local.mr), st.local.off
	}
	return []ProgramStep{ps}, nil
}

// indexOf returns the index of x in xs, or -1.
func indexOf[T comparable](xs []T, x T) int {
	for i, y := range xs {
		if y == x {
			return i
		}
	}
	return -1
}

// initial returns the region's contents at registration: the fill, then
// u64=. fill=random draws from the stream "scenario mr NODE.NAME" of
// seeds.
func (m *mrDecl) initial(seeds sim.Seeds) []byte {
	buf := make([]byte, m.size)
	switch m.fill {
	case fillSeq:
		for i := range buf {
			buf[i] = byte(i)
		}
	case fillByte:
		for i := range buf {
			buf[i] = m.fillB
		}
	case fillRandom:
		rng := seeds.Stream("scenario mr " + m.node.name + "." + m.name)
		for i := range buf {
			buf[i] = byte(rng.Uint32())
		}
	}
	if m.u64 != nil {
		binary.LittleEndian.PutUint64(buf, *m.u64)
	}
	return buf
}
