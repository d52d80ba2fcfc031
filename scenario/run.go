package scenario

import (
	"errors"
	"fmt"
	"net/netip"
	"slices"
	"strconv"
	"syscall"

	"github.com/rocesim/rocesim/faults"
	"github.com/rocesim/rocesim/nic"
	"github.com/rocesim/rocesim/rdmacm"
	"github.com/rocesim/rocesim/sim"
	"github.com/rocesim/rocesim/sim/fabric"
	"github.com/rocesim/rocesim/verbs"
)

// A run, in order:
//
//  1. Build the world: one host per node (in declaration order, so node i
//     gets MAC 02:00:00:00:00:0i and IP 10.0.0.i), the links and
//     switches, the fault plan, the trace and the capture.
//  2. On every node: open the device, allocate a PD, register the memory
//     regions (filled as declared), create the CQs, create the QPs; then
//     take each QP, in declaration order, from RESET to its starting
//     state (RTS unless state= says otherwise) with the attributes of its
//     qp line and its peer's QPN and PSN.
//  3. For each step, in file order: run the world up to the step's time,
//     poll the auto CQs, do the step (recorded in the trace as a "step"
//     event), poll the auto CQs again.
//  4. Run the world to quiescence (or to the deadline), poll every CQ,
//     manual ones too; read the counters and the link statistics.
//  5. Check the expectations.
//
// Asynchronous events are read from every device whenever CQs are polled.
// The world is driven from this goroutine alone; nothing here reads the
// wall clock or iterates a map on the way to the Result.

// DefaultMaxEvents bounds the events a run may fire when Options.MaxEvents
// is 0: a scenario that has not settled by then is taken to be a livelock.
const DefaultMaxEvents = 200_000

// Options are the knobs of one run.
type Options struct {
	// Seed is the master seed; 0 means the scenario's own (its seed line,
	// or 1).
	Seed uint64
	// Profile is the NIC behaviour profile: verbs.ProfileRXE (the zero
	// value) or verbs.ProfileSpec.
	Profile nic.Profile
	// Capture receives every frame (a wire/capture writer); nil for none.
	Capture fabric.Tap
	// Trace collects the run's events; nil makes a new one. Either way it
	// is Result.Trace.
	Trace *sim.Trace
	// MaxEvents bounds the simulation events of the run; 0 means
	// DefaultMaxEvents. A run that spends them fails with a
	// *verbs.RunawayError saying what kept it going, its QPs named as
	// the scenario names them ("a.q").
	MaxEvents uint64
	// Deadline, if not 0, ends the run at this virtual time, as a
	// deadline line does (it replaces the scenario's own).
	Deadline sim.Duration
	// Progress, if set, is called every 65536 events (verbs.WorldConfig.Progress).
	Progress func(verbs.Progress)
	// TestHooks plants deliberate bugs in every device (nic.TestHooks),
	// for tests that replay a shrunk swarm case; nil in every real use.
	TestHooks *nic.TestHooks
	// TxLimit, if not 0, lowers the flows the fault plan's transmission
	// counting remembers (fabric.Fabric.LimitTx), so that a test can see
	// what a run reports once it forgets some (Result.TxEvictions).
	TxLimit int
}

// Result is what a run produced: the completions in the order polled, the
// asynchronous events, the counters, and the expectations not met. The
// same scenario, seed and profile give an identical Result and trace.
type Result struct {
	Scenario    string                       `json:"scenario"`
	Seed        uint64                       `json:"seed"`
	Profile     string                       `json:"profile"` // "rxe" or "spec"
	Completions []Completion                 `json:"completions"`
	AsyncEvents []AsyncEvent                 `json:"async_events"`
	Counters    map[string]map[string]uint64 `json:"counters"` // node -> rxe counter name -> value, non-zero ones only
	// Frames counts the frames the fabric put on a link or dropped, per
	// hop (a frame through a switch counts twice): the frames a capture
	// of the whole fabric holds.
	Frames int `json:"frames"`
	// VirtualTime is the simulated time when the run ended.
	VirtualTime sim.Duration `json:"virtual_time_ns"`
	// Trace is the run's event log (Options.Trace, or a new one).
	Trace *sim.Trace `json:"-"`
	// Checked is how many expect lines were checked (those of the other
	// profile are not): 0 means the scenario claimed nothing.
	Checked int `json:"-"`
	// SwitchDrops lists, in declaration order, the switches that dropped
	// frames on arrival, and why; nil when none did.
	SwitchDrops []SwitchDrops `json:"switch_drops,omitempty"`
	// TxEvictions is how many flows the fault plan's transmission
	// counting forgot to bound its memory (fabric.Fabric.TxEvictions):
	// when not 0, a tx= rule may have misjudged a retransmission as a
	// first transmission, and Warnings says so. 0 in any ordinary run.
	TxEvictions uint64 `json:"tx_evictions,omitempty"`
	// Warnings are things a scenario author should know that are not
	// failures: a fault rule that never acted, each as
	// "line N: fault rule K never matched a frame: TEXT", and the
	// evictions above (faults.TxEvictionWarning).
	Warnings []string `json:"warnings,omitempty"`
	// Failed lists the expectations not met, each as
	// "line N: expect ...: got ..."; empty when the scenario passed.
	Failed []string `json:"failed,omitempty"`
	// Rereg is what each rereg step's ibv_rereg_mr returned, in step
	// order.
	Rereg []Rereg `json:"rereg,omitempty"`
	// CM is every rdma_cm event the program took, in the order taken:
	// by instant, then node (only when some QP has cm=).
	CM []CMEvent `json:"cm_events,omitempty"`
	// Memory holds every memory region's bytes at the end of the run (a
	// copy), in declaration order, so callers can compare memory.
	Memory []MemoryRegion `json:"-"`
}

// SwitchDrops counts the frames one switch dropped on arrival.
type SwitchDrops struct {
	Switch string `json:"switch"`
	// NoRoute counts frames for a MAC no port leads to
	// (fabric.Switch.UnknownDrops).
	NoRoute uint64 `json:"no_route"`
	// Runts counts frames cut below their Ethernet header by a truncate
	// rule (fabric.Switch.RuntDrops).
	Runts uint64 `json:"runts"`
}

// Rereg is the answer to one rereg step.
type Rereg struct {
	Line  int    `json:"line"`  // the step's line
	MR    string `json:"mr"`    // "node.mr"
	Errno string `json:"errno"` // "ok", or the errno's name: EOPNOTSUPP, EINVAL, ...
}

// MemoryRegion is a memory region's contents.
type MemoryRegion struct {
	Name  string // "node.mr"
	Bytes []byte
}

// Passed reports whether every expectation was met.
func (r *Result) Passed() bool { return len(r.Failed) == 0 }

// Completion is one polled work completion.
type Completion struct {
	Node    string `json:"node"`
	QPN     uint32 `json:"qpn"`
	WRID    uint64 `json:"wr_id"`
	Status  string `json:"status"`   // IBV_WC_SUCCESS, IBV_WC_RETRY_EXC_ERR, ...
	Opcode  string `json:"opcode"`   // IBV_WC_SEND, IBV_WC_RECV, ... (as the NIC filled it, also for errors)
	ByteLen uint32 `json:"byte_len"` // as the NIC filled it; at the requester the message length under the rxe profile, under spec 0 for a SEND or WRITE; 0 for any error
	Imm     uint32 `json:"imm"`      // the immediate data, when the completion carries one; else 0
	// WCFlags are the completion's wc_flags as the NIC set them, spelled
	// as flags= takes them (WCFlagsName): "IBV_WC_GRH|IBV_WC_WITH_IMM",
	// "0" for none. Names, not the number, so that a reader needs no bit
	// table and can paste the value into an expect line.
	WCFlags string `json:"wc_flags"`
}

// AsyncEvent is one asynchronous event a device raised.
type AsyncEvent struct {
	Node string `json:"node"`
	Type string `json:"type"` // IBV_EVENT_CQ_ERR, IBV_EVENT_QP_ACCESS_ERR, IBV_EVENT_PORT_ERR, ...
	QPN  uint32 `json:"qpn"`  // the QP it concerns, or 0
}

// runState is one run's world and the handles of every declared object,
// indexed as the declarations are.
type runState struct {
	s     *Scenario
	w     *verbs.World
	hosts []*verbs.Host
	ctxs  []*verbs.Context
	pds   []*verbs.PD
	mrs   []*verbs.MR
	bufs  [][]byte    // each region's buffer as registered (a rereg's translation is a part of it)
	pd2s  []*verbs.PD // per node: the second PD of rereg pd=other, made on first use
	mws   []*verbs.MW
	cqs   []*verbs.CQ
	qps   []*verbs.QP
	ahs   map[ahKey]*verbs.AH // a node's AH toward a GID (ah); lookups only
	sws   []*fabric.Switch
	res   *Result
	wcs   []verbs.WC
	rand  sim.Seeds
	nodes []*nodeDecl

	fired   []int       // per on line: how many times it has fired
	reacted int         // completions before this index have been offered to the on lines
	later   []laterStep // on lines' steps fired with after=, in the order they are due

	cm      *rdmacm.CM             // the world's CM, when some QP has cm=
	cmChans []*rdmacm.EventChannel // per node: its event channel, or nil
	cmIDs   []*rdmacm.CMID         // per QP: the CM ID of its connection, once there is one

	frameCounts []int               // per expect frames line: the frames that matched
	dec         faults.FrameDecoder // decoding buffer of observe
}

// observe counts a recorded frame (one per hop it starts onto, or where
// it was dropped: what a capture of the whole fabric holds) against every
// expect frames line. Its keys are evaluated as a fault rule's are, at
// the time of the record: without link= on the frame's first hop only.
func (r *runState) observe(rec *fabric.FrameRecord) {
	roce := r.dec.Decode(rec.Frame)
	hop := faults.Hop{Link: rec.Link, From: rec.From, To: rec.To, First: rec.First, Tx: rec.Tx}
	for i, e := range r.s.frameClaims {
		if e.match.Matches(rec.Time, &hop, roce) {
			r.frameCounts[i]++
		}
	}
}

// laterStep is an on line's step to be done at a later time.
type laterStep struct {
	at sim.Time
	st *step
}

// Run runs the scenario once. It returns an error when the scenario
// cannot run as written (a verb refused: the message names the line) or
// does not settle within Options.MaxEvents; then the Result, if not nil,
// holds what happened up to that point. Unmet expectations are not an
// error: they are Result.Failed.
func (s *Scenario) Run(opt Options) (*Result, error) {
	seed := opt.Seed
	if seed == 0 {
		seed = s.seed
	}
	tr := opt.Trace
	if tr == nil {
		tr = &sim.Trace{}
	}
	var plan *faults.Plan
	if s.planText != "" {
		var err error
		if plan, err = faults.Parse(s.planText); err != nil {
			return nil, fmt.Errorf("scenario %s: fault plan: %w", s.Name, err) // checked line by line in Parse
		}
	}
	// The world's link configuration only sets the hosts' largest path
	// MTU (the links are made below, each with its own): take the
	// smallest MTU of the scenario's links.
	wl := fabric.DefaultLinkConfig()
	for i, l := range s.links {
		if i == 0 || l.config.MTU < wl.MTU {
			wl.MTU = l.config.MTU
		}
	}
	r := &runState{s: s, rand: sim.NewSeeds(seed), ahs: map[ahKey]*verbs.AH{}, nodes: s.nodes,
		wcs: make([]verbs.WC, 16)}
	limit := opt.MaxEvents
	if limit == 0 {
		limit = DefaultMaxEvents
	}
	wc := verbs.WorldConfig{Seed: seed, Plan: plan, Trace: tr, Capture: opt.Capture, Profile: opt.Profile,
		Link: wl, TestHooks: opt.TestHooks, MaxEvents: limit, Progress: opt.Progress, QPName: r.qpName}
	if len(s.frameClaims) > 0 {
		// expect frames counts frames as they are recorded; tx= needs
		// the transmissions counted even without a fault plan.
		r.frameCounts = make([]int, len(s.frameClaims))
		wc.Observe, wc.CountTx = r.observe, true
	}
	r.w = verbs.NewWorld(wc)
	r.w.Fabric().LimitTx(opt.TxLimit, 0)
	r.res = &Result{Scenario: s.Name, Seed: seed, Profile: opt.Profile.String(), Completions: []Completion{},
		AsyncEvents: []AsyncEvent{}, Counters: map[string]map[string]uint64{}, Trace: tr}

	if err := r.build(); err != nil {
		return nil, fmt.Errorf("scenario %s: %w", s.Name, err)
	}
	for _, st := range s.steps {
		if opt.Deadline != 0 && st.at > opt.Deadline {
			break // the run ends before this step
		}
		if err := r.runTo(sim.Time(st.at)); err != nil {
			return r.finish(), fmt.Errorf("scenario %s: before the step of line %d: %w", s.Name, st.line, err)
		}
		if err := r.pollReact(); err != nil {
			return r.finish(), fmt.Errorf("scenario %s: %w", s.Name, err)
		}
		for range st.times {
			if err := r.do(st); err != nil {
				return r.finish(), fmt.Errorf("scenario %s: line %d: %s: %w", s.Name, st.line, st.text, err)
			}
		}
		if err := r.pollReact(); err != nil {
			return r.finish(), fmt.Errorf("scenario %s: %w", s.Name, err)
		}
	}
	end := sim.Never
	switch {
	case opt.Deadline != 0:
		end = sim.Time(opt.Deadline)
	case s.hasDeadline:
		end = sim.Time(s.deadline)
	}
	err := r.runTo(end)
	res := r.finish()
	r.warn(res)
	if err != nil {
		return res, fmt.Errorf("scenario %s: %w", s.Name, err)
	}
	for _, e := range s.expects {
		if e.profile != "" && e.profile != res.Profile {
			continue // a claim about the other profile
		}
		res.Checked++
		if msg := e.check(r, res); msg != "" {
			res.Failed = append(res.Failed, e.failure(msg))
		}
	}
	return res, nil
}

// warn adds a warning for every fault rule that never acted: a rule that
// matched nothing usually means a misspelt key value (psn=, tx=, qp=)
// and a scenario that does not test what it claims to.
func (r *runState) warn(res *Result) {
	fab := r.w.Fabric()
	for i, line := range r.s.faultLines {
		if fab.RuleHits(i+1) == 0 {
			res.Warnings = append(res.Warnings, fmt.Sprintf("line %d: fault rule %d never matched a frame: %s", line, i+1, r.s.faultText(i)))
		}
	}
	if res.TxEvictions = fab.TxEvictions(); res.TxEvictions > 0 {
		res.Warnings = append(res.Warnings, faults.TxEvictionWarning(res.TxEvictions))
	}
}

// runTo runs the world to t (sim.Never: until nothing is left to
// happen). Without on lines or cm= QPs it is World.RunTo. With them it
// stops after every instant at which something happened (all the events
// due at that virtual time), answers the CM events (cm.go), polls the
// auto CQs and does the on lines' steps that the new completions
// trigger, before it goes on to the next instant.
func (r *runState) runTo(t sim.Time) error {
	if len(r.s.ons) == 0 && !r.s.hasCM {
		return r.w.RunTo(t)
	}
	sched := r.w.Scheduler()
	for {
		next := sim.Never
		if sched.Pending() > 0 {
			next = sched.NextAt()
		}
		if len(r.later) > 0 && r.later[0].at < next {
			next = r.later[0].at
		}
		if next == sim.Never || next > t {
			break
		}
		if err := r.w.RunTo(next); err != nil {
			return err
		}
		if err := r.pollReact(); err != nil {
			return err
		}
		for len(r.later) > 0 && r.later[0].at <= next {
			st := r.later[0].st
			r.later = r.later[1:]
			if err := r.do(st); err != nil {
				return fmt.Errorf("line %d: on %s after=%v: %s: %w", st.line, st.on.qpRef, st.on.after, st.text, err)
			}
			if err := r.pollReact(); err != nil {
				return err
			}
		}
	}
	if t == sim.Never {
		return nil
	}
	return r.w.RunTo(t)
}

// pollReact answers the waiting CM events and polls the auto CQs (as
// after every step), then offers every completion polled so far and not
// yet offered to the on lines, in the order polled. For each completion the on lines are tried in file
// order; each one whose trigger matches and that has fired fewer than
// times= times fires: its step is done at once, after which the auto CQs
// are polled again (the completions that brings are offered in their
// turn), or, with after=D, queued to be done D later.
func (r *runState) pollReact() error {
	if err := r.cmReact(); err != nil {
		return err
	}
	r.poll(false, nil)
	if len(r.s.ons) == 0 {
		return nil
	}
	if r.fired == nil {
		r.fired = make([]int, len(r.s.ons))
	}
	for r.reacted < len(r.res.Completions) {
		c := r.res.Completions[r.reacted]
		r.reacted++
		for i, st := range r.s.ons {
			if r.fired[i] >= st.times || !r.triggers(st.on, &c) {
				continue
			}
			r.fired[i]++
			if st.on.after > 0 {
				r.postpone(st)
				continue
			}
			if err := r.do(st); err != nil {
				return fmt.Errorf("line %d: on %s (completion of wr %d): %s: %w", st.line, st.on.qpRef, c.WRID, st.text, err)
			}
			r.poll(false, nil)
		}
	}
	return nil
}

// postpone queues an on line's step after=D from now, behind the steps
// already queued for the same time or earlier.
func (r *runState) postpone(st *step) {
	at := r.w.Now().Add(st.on.after)
	i := len(r.later)
	for i > 0 && r.later[i-1].at > at {
		i--
	}
	r.later = slices.Insert(r.later, i, laterStep{at: at, st: st})
}

// triggers reports whether completion c is one trigger t waits for.
func (r *runState) triggers(t *trigger, c *Completion) bool {
	return c.Node == t.qp.node.name && c.QPN == r.qps[t.qp.idx].QPNum &&
		(!t.hasWR || c.WRID == t.wrID) && (!t.hasStatus || c.Status == t.status.Name())
}

// qpName names QP qpn of host as the scenario does ("a.q"), or "" if
// the scenario did not declare it.
func (r *runState) qpName(host string, qpn uint32) string {
	for _, q := range r.s.qps {
		if q.node.name == host && q.idx < len(r.qps) && r.qps[q.idx] != nil && r.qps[q.idx].QPNum == qpn {
			return host + "." + q.name
		}
	}
	return ""
}

// build makes the hosts, links, resources and connections.
func (r *runState) build() error {
	s := r.s
	for _, n := range s.nodes {
		r.hosts = append(r.hosts, r.w.AddHost(n.name))
	}
	fab := r.w.Fabric()
	fnodes := fab.Nodes()
	for _, l := range s.links {
		if l.sw == "" {
			a, b := l.nodes[0], l.nodes[1]
			if _, err := fab.Connect(a.name+"-"+b.name, fnodes[a.idx].Port(0), fnodes[b.idx].Port(0), l.config); err != nil {
				return fmt.Errorf("line %d: %w", l.line, err)
			}
			continue
		}
		sw := fab.AddSwitch(l.sw, len(l.nodes))
		r.sws = append(r.sws, sw)
		for i, n := range l.nodes {
			if _, err := fab.Connect(n.name+"-"+l.sw, fnodes[n.idx].Port(0), sw.Port(i), l.config); err != nil {
				return fmt.Errorf("line %d: %w", l.line, err)
			}
		}
	}
	r.mrs = make([]*verbs.MR, len(s.mrs))
	r.bufs = make([][]byte, len(s.mrs))
	r.pd2s = make([]*verbs.PD, len(s.nodes))
	r.mws = make([]*verbs.MW, len(s.mws))
	r.cqs = make([]*verbs.CQ, len(s.cqs))
	r.qps = make([]*verbs.QP, len(s.qps))
	return r.resources()
}

// resources opens every device and creates the declared objects, node by
// node, then brings every QP to its starting state.
func (r *runState) resources() error {
	s := r.s
	for i, n := range s.nodes {
		ctx, err := r.hosts[i].GetDeviceList()[0].Open()
		if err != nil {
			return fmt.Errorf("line %d: open %s: %w", n.line, n.name, err)
		}
		pd, err := ctx.AllocPD()
		if err != nil {
			return fmt.Errorf("line %d: alloc_pd on %s: %w", n.line, n.name, err)
		}
		r.ctxs, r.pds = append(r.ctxs, ctx), append(r.pds, pd)
		for _, m := range n.mrs {
			buf := m.initial(r.rand)
			mr, err := pd.RegMR(buf, m.access)
			if err != nil {
				return fmt.Errorf("line %d: reg_mr %s.%s: %w", m.line, n.name, m.name, err)
			}
			r.mrs[m.idx], r.bufs[m.idx] = mr, buf
		}
		for _, m := range n.mws {
			mw, err := pd.AllocMW(m.typ)
			if err != nil {
				return fmt.Errorf("line %d: alloc_mw %s.%s: %w", m.line, n.name, m.name, err)
			}
			r.mws[m.idx] = mw
		}
		for _, c := range n.cqs {
			cq, err := ctx.CreateCQ(c.size, nil, 0)
			if err != nil {
				return fmt.Errorf("line %d: create_cq %s.%s: %w", c.line, n.name, c.name, err)
			}
			r.cqs[c.idx] = cq
		}
		for _, q := range n.qps {
			ia := verbs.QPInitAttr{SendCQ: r.cqs[q.sendCQ.idx], RecvCQ: r.cqs[q.recvCQ.idx], Type: q.typ, SQSigAll: q.sigAll,
				Cap: nic.QPCap{MaxSendWR: q.maxSendWR, MaxRecvWR: q.maxRecvWR, MaxSendSGE: q.maxSGE, MaxRecvSGE: q.maxSGE,
					MaxInlineData: q.maxInline}}
			qp, err := pd.CreateQP(ia)
			if err != nil {
				return fmt.Errorf("line %d: create_qp %s: %w", q.line, q, err)
			}
			r.qps[q.idx] = qp
			if q.group.IsValid() {
				// What rdma_join_multicast does: the host joins the
				// group (its IGMP join), and the QP is attached.
				if err := r.hosts[i].JoinGroup(q.group); err != nil {
					return fmt.Errorf("line %d: join %s to %v: %w", q.line, q, q.group, err)
				}
				if err := qp.AttachMcast(netip.AddrFrom16(q.group.As16()), 0); err != nil {
					return fmt.Errorf("line %d: attach_mcast %s to %v: %w", q.line, q, q.group, err)
				}
			}
		}
	}
	for _, q := range s.qps {
		if q.cm != cmNone {
			continue // setupCM moves it to INIT, as rdma_create_qp does
		}
		for st := nic.QPStateInit; st <= q.state; st++ {
			attr, mask, err := r.transition(q, st)
			if err != nil {
				return fmt.Errorf("line %d: %w", q.line, err)
			}
			if err := r.qps[q.idx].Modify(&attr, mask); err != nil {
				return fmt.Errorf("line %d: modify_qp %s to %v: %w", q.line, q, st, err)
			}
		}
	}
	return r.setupCM()
}

// transition returns the attributes and mask that take q from the state
// before st to st (INIT, RTR or RTS), from its qp line and its peer: the
// attributes the kernel requires for that transition, as
// ibv_rc_pingpong sets them.
func (r *runState) transition(q *qpDecl, st nic.QPState) (nic.QPAttr, nic.QPAttrMask, error) {
	a := nic.QPAttr{QPState: st}
	mask := nic.QPAttrState
	switch st {
	case nic.QPStateInit:
		a.PKeyIndex, a.PortNum = 0, 1
		mask |= nic.QPAttrPKeyIndex | nic.QPAttrPort
		if q.typ == nic.QPTypeUD {
			a.QKey = q.qkey
			mask |= nic.QPAttrQKey
		} else {
			a.QPAccessFlags = q.access
			mask |= nic.QPAttrAccessFlags
		}
	case nic.QPStateRTR:
		if q.typ == nic.QPTypeUD {
			break
		}
		peer := q.peer
		gid, err := r.ctxs[peer.node.idx].QueryGID(1, 1)
		if err != nil {
			return a, 0, err
		}
		mtu := q.mtu
		if mtu == 0 {
			port, err := r.ctxs[q.node.idx].QueryPort(1)
			if err != nil {
				return a, 0, err
			}
			mtu = port.ActiveMTU
		}
		a.PathMTU, a.DestQPNum, a.RQPSN = mtu, r.qps[peer.idx].QPNum, peer.psn
		a.AHAttr = nic.AHAttr{IsGlobal: true, PortNum: 1, GRH: nic.GRH{DGID: gid, HopLimit: 64, SGIDIndex: 1}}
		mask |= nic.QPAttrAV | nic.QPAttrPathMTU | nic.QPAttrDestQPN | nic.QPAttrRQPSN
		if q.typ == nic.QPTypeRC {
			a.MaxDestRdAtomic, a.MinRNRTimer = q.maxDestRdAt, q.minRNRTimer
			mask |= nic.QPAttrMaxDestRdAtomic | nic.QPAttrMinRNRTimer
		}
	case nic.QPStateRTS:
		a.SQPSN = q.psn
		mask |= nic.QPAttrSQPSN
		if q.typ == nic.QPTypeRC {
			a.Timeout, a.RetryCnt, a.RNRRetry, a.MaxRdAtomic = q.timeout, q.retryCnt, q.rnrRetry, q.maxRdAtomic
			mask |= nic.QPAttrTimeout | nic.QPAttrRetryCnt | nic.QPAttrRNRRetry | nic.QPAttrMaxQPRdAtomic
		}
	}
	return a, mask, nil
}

// do performs one step.
func (r *runState) do(st *step) error {
	tr := r.res.Trace
	if tr.Enabled() {
		e := sim.Event{Time: r.w.Now(), Kind: "step", Fields: []sim.Field{
			{Key: "line", Value: strconv.Itoa(st.line)}, {Key: "step", Value: st.text}}}
		if st.qp != nil {
			e.Node, e.QPN, e.HasQPN = st.qp.node.name, r.qps[st.qp.idx].QPNum, true
		}
		if st.kind == stepRereg {
			e.Node = st.local.mr.node.name
		}
		tr.Add(e)
	}
	switch st.kind {
	case stepPoll:
		r.poll(true, st.pollCQs)
		return nil
	case stepConnect, stepDisconnect:
		return r.cmDo(st)
	case stepModify:
		return r.modify(st)
	case stepRereg:
		return r.rereg(st)
	case stepRecv:
		wr := verbs.RecvWR{WRID: st.wrID}
		if st.length > 0 {
			wr.SGList = []verbs.SGE{r.mrs[st.local.mr.idx].SGE(st.local.off, st.length)}
		}
		_, err := r.qps[st.qp.idx].PostRecv([]verbs.RecvWR{wr})
		return err
	}
	if st.op == nic.WRBindMW {
		return r.bind(st)
	}
	wr := verbs.SendWR{WRID: st.wrID, Opcode: st.op, Flags: st.flags, ImmData: st.imm}
	if st.length > 0 {
		wr.SGList = []verbs.SGE{r.mrs[st.local.mr.idx].SGE(st.local.off, st.length)}
	}
	if st.remote.mr != nil {
		mr := r.mrs[st.remote.mr.idx]
		wr.RemoteAddr, wr.RKey = mr.Addr+st.remote.off, mr.RKey
	}
	switch {
	case st.badRKey:
		// The same MR index with another generation byte: a key that
		// names no registered region (rxe keys are index<<8 | key byte).
		wr.RKey ^= 0x80
	case st.hasRKey:
		wr.RKey = st.rkey
	}
	if st.mw != nil {
		// Through a window, or invalidating one: its R_Key as the
		// program holds it now.
		wr.RKey, wr.InvalidateRKey = r.mws[st.mw.idx].RKey, r.mws[st.mw.idx].RKey
	}
	switch st.op {
	case nic.WRAtomicCmpAndSwp:
		wr.CompareAdd, wr.Swap = st.compare, st.swapAdd
	case nic.WRAtomicFetchAndAdd:
		wr.CompareAdd = st.swapAdd
	}
	if st.dest != nil || st.group.IsValid() {
		// UD: to a QP of another node (its GID, its QPN and Q_Key), or
		// to a group (the group mapped into IPv6, as
		// rdma_join_multicast's event gives it; the multicast QPN; the
		// sender's own Q_Key).
		var dgid netip.Addr
		if st.dest != nil {
			gid, err := r.ctxs[st.dest.node.idx].QueryGID(1, 1)
			if err != nil {
				return err
			}
			dgid, wr.RemoteQPN, wr.RemoteQKey = gid, r.qps[st.dest.idx].QPNum, st.dest.qkey
		} else {
			dgid, wr.RemoteQPN, wr.RemoteQKey = netip.AddrFrom16(st.group.As16()), verbs.MulticastQPN, st.qp.qkey
		}
		if st.hasQKey {
			wr.RemoteQKey = st.qkey
		}
		var err error
		if wr.AH, err = r.ah(st.qp.node, dgid); err != nil {
			return err
		}
	}
	_, err := r.qps[st.qp.idx].PostSend([]verbs.SendWR{wr})
	return err
}

// rereg calls ibv_rereg_mr on the step's region and records what it
// returned in Result.Rereg. A refusal does not end the run, unlike any
// other step the verbs refuse: rxe 6.1 refuses every rereg
// (EOPNOTSUPP, IBV_REREG_MR_ERR_CMD), and what a scenario checks is
// what the region does next; "expect rereg" states the answer.
func (r *runState) rereg(st *step) error {
	m := st.local.mr
	var pd *verbs.PD
	if st.rereg&nic.ReregChangePD != 0 {
		pd = r.pds[m.node.idx]
		if st.otherPD {
			if r.pd2s[m.node.idx] == nil {
				p2, err := r.ctxs[m.node.idx].AllocPD()
				if err != nil {
					return fmt.Errorf("alloc_pd for rereg pd=other: %w", err)
				}
				r.pd2s[m.node.idx] = p2
			}
			pd = r.pd2s[m.node.idx]
		}
	}
	var buf []byte
	if st.hasLen {
		buf = r.bufs[m.idx][st.reregOff : st.reregOff+st.length]
	}
	err := r.mrs[m.idx].Rereg(st.rereg, pd, buf, st.access)
	res := Rereg{Line: st.line, MR: m.node.name + "." + m.name, Errno: "ok"}
	if err != nil {
		var en syscall.Errno
		if !errors.As(err, &en) {
			return err
		}
		res.Errno = ErrnoName(en)
	}
	if tr := r.res.Trace; tr.Enabled() {
		tr.Add(sim.Event{Time: r.w.Now(), Kind: "rereg", Node: m.node.name, Fields: []sim.Field{
			{Key: "mr", Value: res.MR}, {Key: "result", Value: res.Errno}}})
	}
	r.res.Rereg = append(r.res.Rereg, res)
	return nil
}

// bind binds a window over the step's local buffer: a type 1 window with
// ibv_bind_mw, a type 2 one with an IBV_WR_BIND_MW work request. Either
// way the window takes the next R_Key at once (ibv_bind_mw does so
// itself; for type 2 the program does what a C program does after a
// successful bind), so later steps name it by that key even if the bind
// then fails.
func (r *runState) bind(st *step) error {
	mw, qp := r.mws[st.mw.idx], r.qps[st.qp.idx]
	info := verbs.BindInfo{Access: st.access, Length: st.length}
	if st.length > 0 {
		mr := r.mrs[st.local.mr.idx]
		info.MR, info.Addr = mr, mr.Addr+st.local.off
	}
	if mw.Type == verbs.MWType1 {
		return qp.BindMW(mw, verbs.MWBind{WRID: st.wrID, SendFlags: st.flags, BindInfo: info})
	}
	rkey := verbs.IncRKey(mw.RKey)
	_, err := qp.PostSend([]verbs.SendWR{{WRID: st.wrID, Opcode: nic.WRBindMW, Flags: st.flags,
		BindMW: verbs.BindMWWR{MW: mw, RKey: rkey, BindInfo: info}}})
	if err == nil {
		mw.RKey = rkey
	}
	return err
}

// ah returns node from's address handle toward dgid (another node's GID,
// or a multicast group's), made on first use.
func (r *runState) ah(from *nodeDecl, dgid netip.Addr) (*verbs.AH, error) {
	k := ahKey{from.idx, dgid}
	if ah, ok := r.ahs[k]; ok {
		return ah, nil
	}
	ah, err := r.pds[from.idx].CreateAH(nic.AHAttr{IsGlobal: true, PortNum: 1, GRH: nic.GRH{DGID: dgid, HopLimit: 64, SGIDIndex: 1}})
	if err != nil {
		return nil, err
	}
	r.ahs[k] = ah
	return ah, nil
}

// ahKey names a node's address handle toward a GID.
type ahKey struct {
	node int
	dgid netip.Addr
}

// modify performs a modify step. A move from RESET to INIT, INIT to RTR
// or RTR to RTS also sets the attributes the kernel requires for it, from
// the qp line, unless the step gives them itself.
func (r *runState) modify(st *step) error {
	q := st.qp
	qp := r.qps[q.idx]
	attr, mask := st.attr, st.mask
	if mask&nic.QPAttrState != 0 && attr.QPState == qp.State()+1 && attr.QPState <= nic.QPStateRTS {
		def, dmask, err := r.transition(q, attr.QPState)
		if err != nil {
			return err
		}
		merge(&def, &attr, mask)
		attr, mask = def, dmask|mask
	}
	return qp.Modify(&attr, mask)
}

// merge copies into dst the attributes of src that mask selects (those a
// modify step can give).
func merge(dst, src *nic.QPAttr, mask nic.QPAttrMask) {
	set := func(bit nic.QPAttrMask, f func()) {
		if mask&bit != 0 {
			f()
		}
	}
	set(nic.QPAttrState, func() { dst.QPState = src.QPState })
	set(nic.QPAttrPathMTU, func() { dst.PathMTU = src.PathMTU })
	set(nic.QPAttrSQPSN, func() { dst.SQPSN = src.SQPSN })
	set(nic.QPAttrRQPSN, func() { dst.RQPSN = src.RQPSN })
	set(nic.QPAttrQKey, func() { dst.QKey = src.QKey })
	set(nic.QPAttrTimeout, func() { dst.Timeout = src.Timeout })
	set(nic.QPAttrRetryCnt, func() { dst.RetryCnt = src.RetryCnt })
	set(nic.QPAttrRNRRetry, func() { dst.RNRRetry = src.RNRRetry })
	set(nic.QPAttrMinRNRTimer, func() { dst.MinRNRTimer = src.MinRNRTimer })
	set(nic.QPAttrMaxQPRdAtomic, func() { dst.MaxRdAtomic = src.MaxRdAtomic })
	set(nic.QPAttrMaxDestRdAtomic, func() { dst.MaxDestRdAtomic = src.MaxDestRdAtomic })
	set(nic.QPAttrAccessFlags, func() { dst.QPAccessFlags = src.QPAccessFlags })
}

// poll drains CQs into the Result: those given, or (when cqs is nil) every
// CQ, node by node in creation order, skipping manual ones unless all is
// set. Then it reads every device's asynchronous events.
func (r *runState) poll(all bool, cqs []*cqDecl) {
	drain := func(c *cqDecl) {
		cq := r.cqs[c.idx]
		for {
			n := cq.Poll(r.wcs)
			for _, wc := range r.wcs[:n] {
				comp := Completion{Node: c.node.name, QPN: wc.QPNum, WRID: wc.WRID, Status: wc.Status.Name(),
					Opcode: wc.Opcode.String(), ByteLen: wc.ByteLen, WCFlags: WCFlagsName(wc.WCFlags)}
				if wc.WCFlags&nic.WCFlagWithImm != 0 {
					comp.Imm = wc.ImmData
				}
				r.res.Completions = append(r.res.Completions, comp)
			}
			if n < len(r.wcs) {
				return
			}
		}
	}
	if cqs != nil {
		for _, c := range cqs {
			drain(c)
		}
	} else {
		for _, c := range r.s.cqs {
			if all || !c.manual {
				drain(c)
			}
		}
	}
	for i, n := range r.nodes {
		for {
			ev, ok := r.ctxs[i].GetAsyncEvent()
			if !ok {
				break
			}
			a := AsyncEvent{Node: n.name, Type: eventName(ev.Type)}
			if ev.QP != nil {
				a.QPN = ev.QP.Num()
			}
			r.res.AsyncEvents = append(r.res.AsyncEvents, a)
		}
	}
}

// finish polls every CQ and fills in the counters, frames and time.
func (r *runState) finish() *Result {
	res := r.res
	r.poll(true, nil)
	for i, n := range r.nodes {
		m := map[string]uint64{}
		for _, c := range r.ctxs[i].Counters().Snapshot() {
			if c.Value != 0 {
				m[c.Name] = c.Value
			}
		}
		res.Counters[n.name] = m
	}
	frames := uint64(0)
	for _, l := range r.w.Fabric().Links() {
		for dir := range 2 {
			st := l.Stats(dir)
			frames += st.TxFrames + st.QueueDrops + st.FaultDrops + st.MTUDrops
		}
	}
	res.SwitchDrops = res.SwitchDrops[:0]
	for _, sw := range r.sws {
		frames += sw.UnknownDrops() + sw.RuntDrops()
		if sw.UnknownDrops()+sw.RuntDrops() > 0 {
			res.SwitchDrops = append(res.SwitchDrops, SwitchDrops{Switch: sw.Name(), NoRoute: sw.UnknownDrops(), Runts: sw.RuntDrops()})
		}
	}
	res.Frames = int(frames)
	res.VirtualTime = sim.Duration(r.w.Now())
	res.Memory = make([]MemoryRegion, 0, len(r.s.mrs))
	for _, m := range r.s.mrs {
		var b []byte
		if r.mrs[m.idx] != nil {
			b = append([]byte{}, r.bufs[m.idx]...)
		}
		res.Memory = append(res.Memory, MemoryRegion{Name: m.node.name + "." + m.name, Bytes: b})
	}
	return res
}

// qpCompletions returns the completions of q (send and receive), in the
// order polled.
func (r *runState) qpCompletions(res *Result, q *qpDecl) []Completion {
	var out []Completion
	qpn := r.qps[q.idx].QPNum
	for _, c := range res.Completions {
		if c.Node == q.node.name && c.QPN == qpn {
			out = append(out, c)
		}
	}
	return out
}

// nodeEvents returns the types of the asynchronous events of node n, in
// order.
func (r *runState) nodeEvents(res *Result, n *nodeDecl) []string {
	var out []string
	for _, e := range res.AsyncEvents {
		if e.Node == n.name {
			out = append(out, e.Type)
		}
	}
	return out
}
