package verbs_test

// The model behind TestSwarm, in the order a seed is used:
//
//  1. invDraw draws the case from the seed: topology (2 to 16 nodes, one
//     link or a switch) and link speed, the RC connections (a random set
//     of node pairs, a pair possibly joined by several), QP attributes
//     and queue depths of both sides of each, whether a node's QPs share
//     their CQs, the workload (send WRs of both directions of every
//     connection, the receives they consume, spare receives, when each
//     is due) and the memory layout, every byte of which has a purpose.
//     A fifth of the seeds make some connections UC (SENDs and WRITEs
//     only, every receive big enough for any message) and some a pair of
//     UD QPs (SENDs of at most the path MTU, through address handles,
//     receives with room for the GRH), from their own stream, "swarm/uc".
//  2. invDrawPlan draws the fault plan text: a swarm-style random subset
//     of drop/dup/delay/reorder/corrupt lines (and now and then a link
//     down, a flapping link or a partition), all inside a safety window
//     that closes, so that a liveness phase without faults follows.
//     drawFinite makes a fifth of the seeds finite (their own stream,
//     "swarm/finite"): retry_cnt and rnr_retry below 7, a long link
//     outage, receivers that stop posting.
//  3. model computes, connection by connection, the initial memory
//     images (sentinel bytes everywhere, message data in the send
//     sources, read sources and atomic cells) and, by executing each
//     direction's WRs in posting order against them, the images the run
//     must end with and the values each atomic must fetch. Each side of
//     a connection has its own two MRs; only one side's WRs touch the
//     other's remote MR, so per-direction order is all that matters.
//
// Nothing here draws from anything but the seed's stream.

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"math/rand/v2"
	"slices"
	"sort"
	"strconv"
	"strings"

	"github.com/stretchr/testify/assert"

	"github.com/rocesim/rocesim/nic"
	"github.com/rocesim/rocesim/sim"
	"github.com/rocesim/rocesim/sim/fabric"
	"github.com/rocesim/rocesim/verbs"
)

// Workload bounds.
const (
	invMinWRs     = 20
	invMaxWRs     = 60
	invMaxLen     = 5000
	invMaxSGE     = 3
	invMaxInline  = 256
	invQueueDepth = 64 // max_send_wr and max_recv_wr when every WR of a side fits at once
	invMaxSpares  = 3  // receives posted beyond what the peer consumes
	invMaxNodes   = 16
	invMaxConns   = 8 // RC connections of a seed with more than two nodes
)

// invNodeName names node i: a, b, c, ...
func invNodeName(i int) string { return string(rune('a' + i)) }

// invSpan is a byte range of an MR, by offset.
type invSpan struct{ off, n int }

// invSend is one send WR of the workload and what it must do.
type invSend struct {
	id     uint64
	label  string // "a#7"
	op     verbs.WROpcode
	length int
	local  []invSpan // the requester's SGEs in its local MR: source, READ destination or atomic result
	remote int       // offset in the peer's remote MR: WRITE target, READ source, atomic cell
	imm    uint32
	add    uint64 // FETCH_ADD: the addend; CMP_AND_SWP: the compare value
	swap   uint64
	flags  verbs.SendFlags
	at     sim.Duration // when it is posted
	recv   *invRecv     // the peer's receive it consumes (SEND, SEND_WITH_IMM, WRITE_WITH_IMM)
	data   []byte       // what a SEND or WRITE carries
	orig   uint64       // atomics: the value the model says it fetches
	raw    *invSend     // READ: the earlier WRITE whose target it reads back, if any
}

func (s *invSend) signaled() bool { return s.flags&verbs.SendSignaled != 0 }

func (s *invSend) String() string {
	var b strings.Builder
	fmt.Fprintf(&b, "%s %v len=%d sge=%d", s.label, s.op, s.length, len(s.local))
	if s.at > 0 {
		fmt.Fprintf(&b, " at=%v", s.at)
	}
	if s.flags&verbs.SendInline != 0 {
		b.WriteString(" inline")
	}
	if s.flags&verbs.SendFence != 0 {
		b.WriteString(" fence")
	}
	if !s.signaled() {
		b.WriteString(" unsignaled")
	}
	if s.raw != nil {
		b.WriteString(" (reads back " + s.raw.label + ")")
	}
	if s.recv != nil {
		b.WriteString(" -> " + s.recv.label)
	}
	return b.String()
}

// invRecv is one receive WR.
type invRecv struct {
	id    uint64
	label string // "b.r3"
	sges  []invSpan
	size  int
	at    sim.Duration
	msg   *invSend // the message it must receive; nil for a spare
	never bool     // the receiver stopped posting before this one (finite seeds)
}

// invRegion is a labelled byte range of an MR, for saying where a
// difference lies.
type invRegion struct {
	off, n int
	what   string
}

// invLayout hands out 8-byte aligned regions of one MR with small gaps
// of sentinel bytes between them, so a stray write shows.
type invLayout struct {
	size    int
	regions []invRegion
}

func (l *invLayout) alloc(r *rand.Rand, n int, what string) int {
	off := (l.size + 8*r.IntN(4) + 7) &^ 7
	l.size = off + n
	l.regions = append(l.regions, invRegion{off, n, what})
	return off
}

// spans allocates n bytes as 1..3 separate regions (SGEs); none for n == 0.
func (l *invLayout) spans(r *rand.Rand, n int, what string) []invSpan {
	if n == 0 {
		return nil
	}
	k := min(1+r.IntN(invMaxSGE), n)
	var out []invSpan
	for i := range k {
		m := n
		if i < k-1 {
			m = 1 + r.IntN(n-(k-1-i))
		}
		n -= m
		w := what
		if k > 1 {
			w = fmt.Sprintf("%s sge[%d]", what, i)
		}
		out = append(out, invSpan{l.alloc(r, m, w), m})
	}
	return out
}

// describe names the region holding byte off.
func (l *invLayout) describe(off int) string {
	i := sort.Search(len(l.regions), func(i int) bool { return l.regions[i].off+l.regions[i].n > off })
	if i < len(l.regions) && l.regions[i].off <= off {
		g := l.regions[i]
		return fmt.Sprintf("%s [%#x,+%d) byte %d", g.what, g.off, g.n, off-g.off)
	}
	return "sentinel gap between regions"
}

// invHost is what one side of a connection (one QP) does.
type invHost struct {
	name                 string // "a.q0": node a, connection 0
	node                 int
	lastWrite            *invSend // the latest WRITE, for reading back
	psn                  uint32
	timeout, minRNR      uint8
	rd, destRd           uint8
	sqDepth, rqDepth     int          // max_send_wr, max_recv_wr
	retryCnt, rnrRetry   uint8        // 7 and 7 (never give up) but in finite seeds
	poll                 sim.Duration // how often the application looks while a queue is full
	sends                []*invSend
	recvs                []*invRecv
	local, remote        invLayout
	faaCell, casCell     int // offsets in the remote MR
	casInit              uint64
	localInit, localWant []byte
	remoteInit, remWant  []byte
}

// invCase is everything one seed decides.
type invCase struct {
	seed     uint64
	nodes    int  // named a, b, c, ...
	sw       bool // through a switch "sw"; otherwise one link a-b
	sharedCQ []bool
	link     fabric.LinkConfig // zero: the default 100 Gb/s link
	conns    []*invConn
	planText string
	// finite: the QPs give up (retry_cnt and rnr_retry below 7), under
	// harsher faults, so that some reach ERR (about a fifth of the seeds).
	finite bool
	// hooks, if set, makes the test hooks of a run (a planted bug; a
	// fresh set per run, for hooks that keep state).
	hooks func() *nic.TestHooks
}

// invConn is one RC connection: a QP on each of two nodes, peers of each
// other, with the path MTU both use.
type invConn struct {
	k     int
	seed  uint64
	mtu   verbs.MTU
	uc    bool // a UC connection: SEND, SEND_WITH_IMM, WRITE, WRITE_WITH_IMM only
	ud    bool // two UD QPs sending datagrams to each other: SEND, SEND_WITH_IMM of at most the path MTU
	hosts [2]*invHost
}

// ends calls f for every side of every connection.
func (c *invCase) ends(f func(k, side int, cn *invConn, h *invHost)) {
	for k, cn := range c.conns {
		for side, h := range cn.hosts {
			f(k, side, cn, h)
		}
	}
}

// invOpWeights are the opcodes of the workload and how often each is
// drawn; each seed also switches some of them off (swarm testing).
var invOpWeights = []struct {
	op verbs.WROpcode
	w  int
}{
	{verbs.WRSend, 20}, {verbs.WRSendWithImm, 10}, {verbs.WRRDMAWrite, 20}, {verbs.WRRDMAWriteWithImm, 10},
	{verbs.WRRDMARead, 20}, {verbs.WRAtomicFetchAndAdd, 10}, {verbs.WRAtomicCmpAndSwp, 6},
}

// invPattern fills b with bytes that depend on key alone (xorshift64).
func invPattern(key uint64, b []byte) {
	x := key*0x9E3779B97F4A7C15 | 1
	for i := range b {
		x ^= x << 13
		x ^= x >> 7
		x ^= x << 17
		b[i] = byte(x >> 32)
	}
}

func invKey(seed uint64, parts ...uint64) uint64 {
	k := seed
	for _, p := range parts {
		k = (k ^ p) * 0x100000001B3
		k ^= k >> 29
	}
	return k
}

// invDrawLen draws a message length: tiny, at a path-MTU edge, or anywhere.
func invDrawLen(r *rand.Rand, pmtu int) int {
	switch r.IntN(4) {
	case 0:
		return r.IntN(65)
	case 1:
		return min(max((1+r.IntN(5))*pmtu+r.IntN(3)-1, 0), invMaxLen)
	default:
		return r.IntN(invMaxLen + 1)
	}
}

// invDraw draws the case of one seed.
func invDraw(seed uint64) *invCase {
	r := sim.NewSeeds(seed).Stream("swarm/rc-invariants")
	c := &invCase{seed: seed, nodes: 2}
	if r.IntN(2) == 0 {
		c.nodes = 3 + r.IntN(invMaxNodes-2)
	}
	c.sw = c.nodes > 2 || r.IntN(2) == 0
	if r.IntN(4) == 0 {
		// A slower link, sometimes with a shallow queue that tail-drops
		// bursts: loss that never stops, not even in the liveness phase.
		c.link = fabric.DefaultLinkConfig()
		c.link.Bandwidth = []int64{10e9, 25e9}[r.IntN(2)]
		if r.IntN(2) == 0 {
			c.link.QueueBytes = 16<<10 + r.IntN(48<<10)
		}
	}
	// Connections: between the two nodes, one or a few; otherwise a
	// random set of pairs, so that some nodes hold several QPs (to one
	// peer or to several) and some none.
	nconn := 1
	if c.nodes == 2 && r.IntN(3) == 0 {
		nconn = 2 + r.IntN(2)
	} else if c.nodes > 2 {
		nconn = 1 + r.IntN(min(c.nodes, invMaxConns))
	}
	for k := range nconn {
		a := r.IntN(c.nodes)
		b := (a + 1 + r.IntN(c.nodes-1)) % c.nodes
		cn := &invConn{k: k, seed: seed, mtu: verbs.MTU256 + verbs.MTU(r.IntN(3))}
		for side, node := range []int{a, b} {
			h := cn.newHost(r, side, node)
			h.timeout, h.minRNR, h.destRd = uint8(1+r.IntN(10)), uint8(1+r.IntN(4)), uint8(1+r.IntN(4))
			h.psn = r.Uint32N(1 << 24)
			if r.IntN(4) == 0 {
				h.psn = 1<<24 - 1 - r.Uint32N(48) // wraps during the run
			}
		}
		for i, h := range cn.hosts {
			// A requester never has more READ/ATOMIC outstanding than the
			// responder has resources for (as the CM negotiates it).
			h.rd = uint8(1 + r.IntN(int(cn.hosts[1-i].destRd)))
			if c.link.Bandwidth != 0 {
				// On a slow link an ACK timeout shorter than a few messages'
				// serialization makes go-back-N resend the window faster than
				// the link drains it: congestion collapse, which rxe would
				// suffer too. 131 µs and up keeps clear of it.
				h.timeout = uint8(5 + r.IntN(6))
			}
		}
		c.conns = append(c.conns, cn)
	}

	// A fifth of the seeds make some of their connections UC and some a
	// pair of UD QPs. This draws from its own stream: the other seeds'
	// cases stay what they were.
	if ur := sim.NewSeeds(seed).Stream("swarm/uc"); ur.IntN(5) == 0 {
		for _, cn := range c.conns {
			k := ur.IntN(4)
			cn.uc, cn.ud = k < 2, k == 2
		}
	}

	// Swarm: each seed uses a random subset of the opcodes.
	var ops []verbs.WROpcode
	var weights []int
	total := 0
	for _, o := range invOpWeights {
		if r.IntN(4) != 0 {
			ops, weights = append(ops, o.op), append(weights, o.w)
			total += o.w
		}
	}
	if len(ops) == 0 {
		ops, weights, total = []verbs.WROpcode{verbs.WRSend}, []int{1}, 1
	}
	share := 0.1 + 0.8*r.Float64() // fraction of WRs the first side of a connection sends
	n := invMinWRs + r.IntN(invMaxWRs-invMinWRs+1)
	for range n {
		cn := c.conns[r.IntN(len(c.conns))]
		side := 1
		if r.Float64() < share {
			side = 0
		}
		k := r.IntN(total)
		op := ops[0]
		for j, w := range weights {
			if k < w {
				op = ops[j]
				break
			}
			k -= w
		}
		if cn.uc && (op == verbs.WRRDMARead || op == verbs.WRAtomicFetchAndAdd || op == verbs.WRAtomicCmpAndSwp) {
			op = verbs.WRRDMAWrite // UC has no READ or atomics
		}
		if cn.ud && op != verbs.WRSend && op != verbs.WRSendWithImm {
			op = verbs.WRSend // UD has SENDs only
		}
		var s *invSend
		if w := cn.hosts[side].lastWrite; op == verbs.WRRDMARead && w != nil && w.length > 0 && r.IntN(3) == 0 {
			o := r.IntN(w.length)
			s = cn.readBack(r, side, w, o, 1+r.IntN(w.length-o))
		} else {
			n := invDrawLen(r, cn.mtu.Bytes())
			if cn.ud {
				n = min(n, cn.mtu.Bytes()) // a datagram is one packet
			}
			s = cn.addSend(r, side, op, n)
		}
		if r.IntN(10) == 0 {
			s.flags &^= verbs.SendSignaled
		}
		if r.IntN(20) == 0 && !cn.ud {
			s.flags |= verbs.SendFence
		}
		if s.data != nil && s.length <= invMaxInline && r.IntN(6) == 0 {
			s.flags |= verbs.SendInline
		}
	}
	// Queues: deep enough for everything, or shallow, so that the
	// application waits for room and the rings wrap around.
	c.ends(func(_, _ int, _ *invConn, h *invHost) {
		if r.IntN(2) == 0 {
			h.sqDepth = 2 + r.IntN(15)
		}
		if r.IntN(2) == 0 {
			h.rqDepth = 1 + r.IntN(16)
		}
		h.poll = sim.Duration(500 + r.IntN(5000))
	})
	for _, cn := range c.conns {
		if cn.uc || cn.ud {
			// A lost UC message leaves its receive for the next one: the
			// receive queue holds them all.
			cn.hosts[0].rqDepth, cn.hosts[1].rqDepth = invQueueDepth, invQueueDepth
		}
	}
	// A node's QPs share one send CQ and one receive CQ, or each has its
	// own pair.
	c.sharedCQ = make([]bool, c.nodes)
	for i := range c.sharedCQ {
		c.sharedCQ[i] = r.IntN(3) == 0
	}
	// Spares are posted after every receive the peer consumes, so they
	// all fit once those are gone; no more, or the application would wait
	// for room forever.
	for _, cn := range c.conns {
		pmtu := cn.mtu.Bytes()
		cn.addRecvs(r, func(h *invHost) int { return min(r.IntN(invMaxSpares+1), h.rqDepth) }, func(v *invRecv) {
			if v.msg == nil {
				v.size = invDrawLen(r, pmtu)
			} else if v.msg.op != verbs.WRRDMAWriteWithImm && r.IntN(3) != 0 {
				v.size += r.IntN(200)
			}
			switch {
			case cn.uc:
				// A lost UC message leaves its receive to the next one:
				// every receive must hold any message.
				v.size = invMaxLen
			case cn.ud:
				v.size = invGRHLen + pmtu // the GRH area, then any datagram
			}
		})
	}

	// When things are posted. Sends: all at once, spread out, or in a few
	// batches. Receives: all before the first send, or some late (RNR: a
	// receiver that falls behind).
	c.ends(func(_, _ int, _ *invConn, h *invHost) {
		var t sim.Duration
		mode := r.IntN(3)
		for _, s := range h.sends {
			switch {
			case mode == 1 && r.IntN(2) == 0:
				t += sim.Duration(r.IntN(20_000))
			case mode == 2 && r.IntN(8) == 0:
				t += sim.Duration(50_000 + r.IntN(150_000))
			}
			s.at = t
		}
		if r.IntN(2) == 0 {
			return // all at time 0
		}
		early := r.IntN(len(h.recvs) + 1)
		t = sim.Duration(r.IntN(100_000))
		for _, v := range h.recvs[early:] {
			t += sim.Duration(r.IntN(40_000))
			v.at = t
		}
	})
	c.planText = invDrawPlan(r, c)
	c.drawFinite(seed)
	c.model()
	return c
}

// drawFinite makes about a fifth of the seeds finite: every QP draws
// retry_cnt and rnr_retry from 0..6, and the faults get harsh enough that
// some QPs run out of them: a long link outage, receivers that stop
// posting. It draws from its own stream, so that the other seeds' cases
// are what they were before finite seeds existed.
func (c *invCase) drawFinite(seed uint64) {
	c.ends(func(_, _ int, _ *invConn, h *invHost) { h.retryCnt, h.rnrRetry = 7, 7 })
	r := sim.NewSeeds(seed).Stream("swarm/finite")
	if r.IntN(5) != 0 {
		return
	}
	c.finite = true
	c.ends(func(_, _ int, _ *invConn, h *invHost) {
		h.retryCnt, h.rnrRetry = uint8(r.IntN(7)), uint8(r.IntN(7))
		if r.IntN(3) == 0 {
			for _, v := range h.recvs[r.IntN(len(h.recvs)+1):] {
				v.never = true
			}
		}
	})
	if r.IntN(2) == 0 {
		cn := c.conns[r.IntN(len(c.conns))]
		l := "a-b"
		if c.sw {
			l = invNodeName(cn.hosts[r.IntN(2)].node) + "-sw"
		}
		from := r.IntN(500)
		c.planText += fmt.Sprintf("down link=%s from=%dus to=%dus\n", l, from, from+200+r.IntN(1800))
	}
}

// newHost adds side i of the connection, on node node, with its two
// atomic cells at the start of its remote MR.
func (c *invConn) newHost(r *rand.Rand, i, node int) *invHost {
	h := &invHost{name: fmt.Sprintf("%s.q%d", invNodeName(node), c.k), node: node, timeout: 5, minRNR: 1, rd: 1, destRd: 1,
		sqDepth: invQueueDepth, rqDepth: invQueueDepth, poll: sim.Microsecond}
	h.faaCell = h.remote.alloc(r, 8, "FETCH_ADD counter")
	h.casCell = h.remote.alloc(r, 8, "CMP_AND_SWP cell")
	h.casInit = r.Uint64()
	c.hosts[i] = h
	return h
}

// addSend appends a signaled WR to side's send queue, with its buffers:
// local SGEs (1..3, none for 0 bytes) and, for WRITE and READ, a fresh
// region of the peer's remote MR.
func (c *invConn) addSend(r *rand.Rand, side int, op verbs.WROpcode, length int) *invSend {
	h, peer := c.hosts[side], c.hosts[1-side]
	s := &invSend{id: uint64(side+1)<<12 | uint64(len(h.sends)), op: op, imm: r.Uint32(), flags: verbs.SendSignaled, length: length}
	s.label = fmt.Sprintf("%s#%d", h.name, len(h.sends))
	switch op {
	case verbs.WRAtomicFetchAndAdd, verbs.WRAtomicCmpAndSwp:
		s.length = 8
		s.local = []invSpan{{h.local.alloc(r, 8, s.label+" "+op.String()+" result"), 8}}
		if op == verbs.WRAtomicFetchAndAdd {
			s.remote, s.add = peer.faaCell, 1+r.Uint64N(1<<32)
		} else {
			s.remote, s.swap = peer.casCell, r.Uint64() // the compare value is the model's choice
		}
	case verbs.WRRDMARead:
		s.remote = peer.remote.alloc(r, s.length, s.label+" READ source")
		s.local = h.local.spans(r, s.length, s.label+" READ destination")
	default:
		s.data = make([]byte, s.length)
		invPattern(invKey(c.seed, uint64(c.k), s.id, 1), s.data)
		s.local = h.local.spans(r, s.length, s.label+" "+op.String()+" source")
		if op == verbs.WRRDMAWrite || op == verbs.WRRDMAWriteWithImm {
			s.remote = peer.remote.alloc(r, s.length, s.label+" "+op.String()+" target")
			h.lastWrite = s
		}
	}
	h.sends = append(h.sends, s)
	return s
}

// readBack appends a READ of n bytes at offset off of what the earlier
// WRITE w put in the peer's memory: RC executes them in order, so the
// READ must see the WRITE.
func (c *invConn) readBack(r *rand.Rand, side int, w *invSend, off, n int) *invSend {
	h := c.hosts[side]
	s := &invSend{id: uint64(side+1)<<12 | uint64(len(h.sends)), op: verbs.WRRDMARead, flags: verbs.SendSignaled,
		length: n, remote: w.remote + off, raw: w}
	s.label = fmt.Sprintf("%s#%d", h.name, len(h.sends))
	s.local = h.local.spans(r, n, s.label+" READ destination")
	h.sends = append(h.sends, s)
	return s
}

// addRecvs gives each host one receive per message its peer sends that
// consumes one, in the same order and sized to the message, then
// spares(host) spare receives; adjust may resize each before its buffer
// is allocated.
func (c *invConn) addRecvs(r *rand.Rand, spares func(*invHost) int, adjust func(*invRecv)) {
	for side, h := range c.hosts {
		peer := c.hosts[1-side]
		add := func(msg *invSend) {
			v := &invRecv{id: uint64(2-side)<<12 | 0x800 | uint64(len(peer.recvs)), msg: msg}
			v.label = fmt.Sprintf("%s.r%d", peer.name, len(peer.recvs))
			if msg != nil {
				v.size = msg.length
				msg.recv = v
			}
			adjust(v)
			v.sges = peer.local.spans(r, v.size, v.label+" receive buffer")
			peer.recvs = append(peer.recvs, v)
		}
		for _, s := range h.sends {
			switch s.op {
			case verbs.WRSend, verbs.WRSendWithImm, verbs.WRRDMAWriteWithImm:
				add(s)
			}
		}
		for range spares(peer) {
			add(nil)
		}
	}
}

// invDrawPlan draws the fault plan: each candidate line with probability
// 0.3, in random order (the first matching rule acts), every line limited
// to the safety window. Lines that name nodes or links name those of a
// random connection.
func invDrawPlan(r *rand.Rand, c *invCase) string {
	if r.IntN(10) == 0 {
		return "" // a fault-free run now and then
	}
	endUS := []int{100, 300, 1000, 2000}[r.IntN(4)]
	window := fmt.Sprintf(" to=%dus", endUS)
	if r.IntN(4) == 0 {
		window = fmt.Sprintf(" from=%dus", r.IntN(endUS/2)) + window
	}
	prob := func(hi float64) string {
		return strconv.FormatFloat(0.01+r.Float64()*(hi-0.01), 'f', 3, 64)
	}
	pair := func() (string, string) {
		cn := c.conns[r.IntN(len(c.conns))]
		x, y := invNodeName(cn.hosts[0].node), invNodeName(cn.hosts[1].node)
		if r.IntN(2) == 0 {
			x, y = y, x
		}
		return x, y
	}
	link := func() string {
		if !c.sw {
			return "a-b"
		}
		x, _ := pair()
		return x + "-sw"
	}
	cands := []func() string{
		func() string { return "drop prob=" + prob(0.2) },
		func() string { return "drop class=request prob=" + prob(0.2) },
		func() string { return "drop class=ack prob=" + prob(0.3) },
		func() string { return "drop class=response prob=" + prob(0.2) },
		func() string { return "drop class=read-response prob=" + prob(0.3) },
		func() string { return "drop class=atomic prob=" + prob(0.3) },
		func() string { return "drop class=nak prob=" + prob(0.5) },
		func() string { return "drop class=rnr prob=" + prob(0.5) },
		func() string { x, y := pair(); return "drop dir=" + x + "->" + y + " prob=" + prob(0.2) },
		func() string { x, _ := pair(); return "drop src=" + x + " tx=1 prob=" + prob(0.3) },
		func() string { return fmt.Sprintf("dup n=%d prob=%s", 1+r.IntN(2), prob(0.2)) },
		func() string { return "dup class=response prob=" + prob(0.2) },
		func() string { return "dup class=request prob=" + prob(0.2) },
		func() string { return fmt.Sprintf("delay %dus prob=%s", 1+r.IntN(20), prob(0.2)) },
		func() string { return fmt.Sprintf("delay %dus class=ack prob=%s", 1+r.IntN(10), prob(0.3)) },
		func() string { return fmt.Sprintf("reorder n=%d prob=%s", 1+r.IntN(3), prob(0.1)) },
		func() string { return fmt.Sprintf("reorder n=%d class=request prob=%s", 1+r.IntN(3), prob(0.1)) },
		func() string { return "corrupt prob=" + prob(0.05) },
		func() string { return "truncate cut=4 fix=none prob=" + prob(0.05) },
		func() string { return "drop class=request tx=1 prob=" + prob(0.5) },
		func() string { return "drop class=read-response tx=1 prob=" + prob(0.5) },
		func() string { return fmt.Sprintf("dup n=%d class=request prob=%s", 2+r.IntN(3), prob(0.1)) },
		func() string { return fmt.Sprintf("delay %dus prob=%s", 20+r.IntN(300), prob(0.05)) },
		func() string { return fmt.Sprintf("reorder n=%d prob=%s", 4+r.IntN(8), prob(0.05)) },
	}
	if c.sw {
		cands = append(cands,
			func() string { return "drop link=" + link() + " prob=" + prob(0.2) },
			func() string { return "dup link=" + link() + " prob=" + prob(0.2) },
		)
	}
	var lines []string
	for _, f := range cands {
		if r.IntN(10) < 3 {
			lines = append(lines, f()+window)
		}
	}
	r.Shuffle(len(lines), func(i, j int) { lines[i], lines[j] = lines[j], lines[i] })
	if r.IntN(10) == 0 {
		from := r.IntN(endUS / 2)
		lines = append(lines, fmt.Sprintf("down link=%s from=%dus to=%dus", link(), from, from+1+r.IntN(endUS-from)))
	}
	if r.IntN(10) == 0 {
		// A flapping link: down and up a few times.
		l, t := link(), r.IntN(endUS/4)
		for range 2 + r.IntN(3) {
			d := 1 + r.IntN(max(1, endUS/10))
			if t+d > endUS {
				break
			}
			lines = append(lines, fmt.Sprintf("down link=%s from=%dus to=%dus", l, t, t+d))
			t += d + 1 + r.IntN(max(1, endUS/8))
		}
	}
	if r.IntN(10) == 0 {
		from := r.IntN(endUS / 2)
		x, y := pair()
		lines = append(lines, fmt.Sprintf("partition %s|%s from=%dus to=%dus", x, y, from, from+1+r.IntN(endUS-from)))
	}
	if len(lines) == 0 {
		return ""
	}
	return strings.Join(lines, "\n") + "\n"
}

// model fills in the initial and expected final memory images and what
// each atomic fetches, connection by connection.
func (c *invCase) model() {
	for _, cn := range c.conns {
		cn.model()
	}
}

func (c *invConn) model() {
	for i, h := range c.hosts {
		h.localInit = make([]byte, max(h.local.size, 8))
		h.remoteInit = make([]byte, max(h.remote.size, 8))
		invPattern(invKey(c.seed, uint64(c.k), uint64(i), 100), h.localInit)
		invPattern(invKey(c.seed, uint64(c.k), uint64(i), 200), h.remoteInit)
		binary.LittleEndian.PutUint64(h.remoteInit[h.faaCell:], 0)
		binary.LittleEndian.PutUint64(h.remoteInit[h.casCell:], h.casInit)
		for _, s := range h.sends {
			if s.data != nil {
				invScatter(h.localInit, s.local, s.data)
			}
		}
	}
	for _, h := range c.hosts {
		h.localWant = append([]byte(nil), h.localInit...)
		h.remWant = append([]byte(nil), h.remoteInit...)
	}
	r := sim.NewSeeds(c.seed).Stream("swarm/rc-invariants/compare/" + strconv.Itoa(c.k))
	for i, h := range c.hosts {
		peer := c.hosts[1-i]
		for _, s := range h.sends {
			switch s.op {
			case verbs.WRSend, verbs.WRSendWithImm:
				invScatter(peer.localWant, s.recv.sges, s.data)
			case verbs.WRRDMAWrite, verbs.WRRDMAWriteWithImm:
				copy(peer.remWant[s.remote:], s.data)
			case verbs.WRRDMARead:
				invScatter(h.localWant, s.local, peer.remWant[s.remote:s.remote+s.length])
			case verbs.WRAtomicFetchAndAdd:
				s.orig = binary.LittleEndian.Uint64(peer.remWant[s.remote:])
				binary.LittleEndian.PutUint64(peer.remWant[s.remote:], s.orig+s.add)
				binary.LittleEndian.PutUint64(h.localWant[s.local[0].off:], s.orig)
			case verbs.WRAtomicCmpAndSwp:
				s.orig = binary.LittleEndian.Uint64(peer.remWant[s.remote:])
				s.add = s.orig // compare: the value it will find, so it swaps
				if r.IntN(3) == 0 {
					s.add = r.Uint64() // a miss: nothing changes
				}
				if s.orig == s.add {
					binary.LittleEndian.PutUint64(peer.remWant[s.remote:], s.swap)
				}
				binary.LittleEndian.PutUint64(h.localWant[s.local[0].off:], s.orig)
			}
		}
	}
}

// invScatter copies data into the spans of img in order.
func invScatter(img []byte, spans []invSpan, data []byte) {
	for _, s := range spans {
		if len(data) == 0 {
			return
		}
		n := copy(img[s.off:s.off+s.n], data)
		data = data[n:]
	}
}

// invDiff reports, region by region, where got differs from want.
func invDiff(name string, got, want []byte, l *invLayout) []string {
	type acc struct {
		where      string
		first, cnt int
	}
	var out []acc
	for i := range want {
		if got[i] == want[i] {
			continue
		}
		where := l.describe(i)
		if k := strings.LastIndex(where, " byte "); k >= 0 {
			where = where[:k]
		}
		if len(out) > 0 && out[len(out)-1].where == where {
			out[len(out)-1].cnt++
			continue
		}
		out = append(out, acc{where, i, 1})
	}
	var s []string
	for k, a := range out {
		if k == 8 {
			s = append(s, fmt.Sprintf("%s: ... %d more regions differ", name, len(out)-k))
			break
		}
		end := min(a.first+8, len(want))
		s = append(s, fmt.Sprintf("%s: %d bytes differ in %s, first at offset %#x: got % x, want % x",
			name, a.cnt, a.where, a.first, got[a.first:end], want[a.first:end]))
	}
	return s
}

// sendWant lists the completions a host's send CQ must hold.
func (h *invHost) sendWant() []string {
	var out []string
	for _, s := range h.sends {
		if s.signaled() {
			out = append(out, invSendLine(s.id, verbs.WCSuccess, invWCOpcode(s.op), uint32(s.length)))
		}
	}
	return out
}

// recvWant lists the completions a host's receive CQ must hold: one per
// message received, in order; spares stay posted.
func (h *invHost) recvWant() []string {
	var out []string
	for _, v := range h.recvs {
		if s := v.msg; s != nil {
			wc := verbs.WC{WRID: v.id, Status: verbs.WCSuccess, Opcode: verbs.WCRecv, ByteLen: uint32(s.length)}
			if s.op != verbs.WRSend {
				wc.WCFlags, wc.ImmData = verbs.WCFlagWithImm, s.imm
			}
			if s.op == verbs.WRRDMAWriteWithImm {
				wc.Opcode = verbs.WCRecvRDMAWithImm
			}
			out = append(out, invRecvLine(wc))
		}
	}
	return out
}

func invWCOpcode(op verbs.WROpcode) verbs.WCOpcode {
	switch op {
	case verbs.WRRDMAWrite, verbs.WRRDMAWriteWithImm:
		return verbs.WCRDMAWrite
	case verbs.WRRDMARead:
		return verbs.WCRDMARead
	case verbs.WRAtomicFetchAndAdd:
		return verbs.WCFetchAdd
	case verbs.WRAtomicCmpAndSwp:
		return verbs.WCCompSwap
	}
	return verbs.WCSend
}

// invSendLine is a send completion as compared: byte_len only where
// ibv_poll_cq defines it (READ and atomics).
func invSendLine(id uint64, st verbs.WCStatus, op verbs.WCOpcode, n uint32) string {
	s := fmt.Sprintf("%#x %s %v", id, st.Name(), op)
	if op == verbs.WCRDMARead || op == verbs.WCFetchAdd || op == verbs.WCCompSwap {
		s += fmt.Sprintf(" byte_len=%d", n)
	}
	return s
}

func invRecvLine(wc verbs.WC) string {
	s := fmt.Sprintf("%#x %s %v byte_len=%d", wc.WRID, wc.Status.Name(), wc.Opcode, wc.ByteLen)
	if wc.WCFlags&verbs.WCFlagWithImm != 0 {
		s += fmt.Sprintf(" imm=%#x", wc.ImmData)
	}
	return s
}

// describe is the workload in text, for a failure report.
func (c *invCase) describe() string {
	var b strings.Builder
	topo := "one link a-b"
	if c.sw {
		topo = fmt.Sprintf("%d nodes on switch sw (links a-sw, ...)", c.nodes)
	}
	fmt.Fprintf(&b, "topology %s, %d RC connections", topo, len(c.conns))
	if c.link.Bandwidth != 0 {
		fmt.Fprintf(&b, ", links of %d Gb/s with %d-byte queues", c.link.Bandwidth/1e9, c.link.QueueBytes)
	}
	for i, sh := range c.sharedCQ {
		if sh {
			fmt.Fprintf(&b, ", %s's QPs share CQs", invNodeName(i))
		}
	}
	b.WriteByte('\n')
	c.ends(func(_, _ int, cn *invConn, h *invHost) {
		switch {
		case cn.uc:
			b.WriteString("(UC) ")
		case cn.ud:
			b.WriteString("(UD) ")
		}
		fmt.Fprintf(&b, "%s: path MTU %d sq_psn %#x timeout %d retry_cnt %d rnr_retry %d min_rnr_timer %d max_rd_atomic %d max_dest_rd_atomic %d max_send_wr %d max_recv_wr %d, %d sends, %d receives, polls every %v when full\n",
			h.name, cn.mtu.Bytes(), h.psn, h.timeout, h.retryCnt, h.rnrRetry, h.minRNR, h.rd, h.destRd, h.sqDepth, h.rqDepth, len(h.sends), len(h.recvs), h.poll)
	})
	c.ends(func(_, _ int, _ *invConn, h *invHost) {
		for _, s := range h.sends {
			fmt.Fprintf(&b, "  %v\n", s)
		}
		for _, v := range h.recvs {
			fmt.Fprintf(&b, "  %s receive size=%d sge=%d", v.label, v.size, len(v.sges))
			if v.at > 0 {
				fmt.Fprintf(&b, " at=%v", v.at)
			}
			if v.never {
				b.WriteString(" never posted")
			}
			if v.msg == nil {
				b.WriteString(" (spare)")
			}
			b.WriteByte('\n')
		}
	})
	return b.String()
}

// Shrinking: a failing case is cut down, ddmin style, to a smaller one
// that still fails: plan lines, send WRs (with the receives they consume)
// and spare receives are the units, tried in halves, then quarters, and
// so on, within a budget of runs so that the result never depends on the
// machine.

// invShrinkRuns bounds the runs one shrink may spend.
const invShrinkRuns = 200

// invUnit is one removable part of a case.
type invUnit struct {
	line  string   // a plan line
	send  *invSend // a send WR
	spare *invRecv // a spare receive
}

// units lists the removable parts of c.
func (c *invCase) units() []invUnit {
	var us []invUnit
	for _, l := range strings.Split(strings.TrimSuffix(c.planText, "\n"), "\n") {
		if l != "" {
			us = append(us, invUnit{line: l})
		}
	}
	c.ends(func(_, _ int, _ *invConn, h *invHost) {
		for _, s := range h.sends {
			us = append(us, invUnit{send: s})
		}
		for _, v := range h.recvs {
			if v.msg == nil {
				us = append(us, invUnit{spare: v})
			}
		}
	})
	return us
}

// with returns a copy of c that keeps only the units given (their order
// within c is kept), its model recomputed.
func (c *invCase) with(us []invUnit) *invCase {
	keepLine, keepSend, keepSpare := map[string]bool{}, map[*invSend]bool{}, map[*invRecv]bool{}
	for _, u := range us {
		switch {
		case u.send != nil:
			keepSend[u.send] = true
		case u.spare != nil:
			keepSpare[u.spare] = true
		default:
			keepLine[u.line] = true
		}
	}
	n := *c
	var lines []string
	for _, l := range strings.Split(strings.TrimSuffix(c.planText, "\n"), "\n") {
		if keepLine[l] {
			lines = append(lines, l)
		}
	}
	n.planText = ""
	if len(lines) > 0 {
		n.planText = strings.Join(lines, "\n") + "\n"
	}
	n.conns = nil
	for _, cn := range c.conns {
		ncn := *cn
		for i, h := range cn.hosts {
			nh := *h
			nh.sends, nh.recvs = nil, nil
			for _, s := range h.sends {
				if keepSend[s] {
					nh.sends = append(nh.sends, s)
				}
			}
			for _, v := range h.recvs {
				if v.msg != nil && keepSend[v.msg] || v.msg == nil && keepSpare[v] {
					nh.recvs = append(nh.recvs, v)
				}
			}
			ncn.hosts[i] = &nh
		}
		// A connection left without WRs goes, but for one.
		if len(ncn.hosts[0].sends)+len(ncn.hosts[0].recvs)+len(ncn.hosts[1].sends)+len(ncn.hosts[1].recvs) > 0 || len(n.conns) == 0 {
			n.conns = append(n.conns, &ncn)
		}
	}
	if len(n.conns) > 1 && n.conns[0].hosts[0].sends == nil && n.conns[0].hosts[0].recvs == nil &&
		n.conns[0].hosts[1].sends == nil && n.conns[0].hosts[1].recvs == nil {
		n.conns = n.conns[1:]
	}
	n.model()
	return &n
}

// shrink returns a smaller case that still fails (c itself if none is
// found) and how many runs it took.
func (c *invCase) shrink(budget int) (*invCase, int) {
	best, us := c, c.units()
	runs := 0
	for parts := 2; len(us) >= 1 && runs < budget; {
		size := (len(us) + parts - 1) / parts
		cut := false
		for start := 0; start < len(us) && runs < budget; start += size {
			rest := append(append([]invUnit(nil), us[:start]...), us[min(start+size, len(us)):]...)
			runs++
			if cand := c.with(rest); cand.fails() {
				best, us, cut = cand, rest, true
				parts = max(parts-1, 2)
				break
			}
		}
		if !cut {
			if size == 1 {
				break
			}
			parts = min(2*parts, len(us))
		}
	}
	best.model() // the trials shared its WRs and rewrote their fetch values
	return best, runs
}

// wrs counts the send and receive WRs of c.
func (c *invCase) wrs() int {
	n := 0
	c.ends(func(_, _ int, _ *invConn, h *invHost) { n += len(h.sends) + len(h.recvs) })
	return n
}

// fails reports whether a run of c breaks an invariant.
func (c *invCase) fails() bool { return len(c.failures()) > 0 }

// failures runs c and returns what its check found, one line each.
func (c *invCase) failures() (msgs []string) {
	rec := &invRecorder{}
	defer func() {
		if v := recover(); v != nil {
			if _, ok := v.(invFailNow); !ok {
				panic(v)
			}
			msgs = append(rec.msgs, "setup failed")
		}
	}()
	c.check(rec, c.run(rec, nil))
	return rec.msgs
}

// invRecorder collects assertion failures instead of failing a test
// (assert.TestingT and require.TestingT), for the shrinker's trial runs.
type invRecorder struct{ msgs []string }

type invFailNow struct{}

func (r *invRecorder) Errorf(format string, args ...any) {
	m := fmt.Sprintf(format, args...)
	// testify's message is a multi-line block; keep its Error and
	// Messages lines.
	var keep []string
	for _, l := range strings.Split(m, "\n") {
		l = strings.Join(strings.Fields(l), " ")
		for _, p := range []string{"Messages:", "Error:", "expected:", "actual :"} {
			if strings.HasPrefix(l, p) {
				if len(l) > 200 {
					l = l[:200] + "..."
				}
				keep = append(keep, l)
			}
		}
	}
	if len(keep) > 0 {
		m = strings.Join(keep, "\n  ")
	}
	r.msgs = append(r.msgs, m)
}

func (r *invRecorder) FailNow() { panic(invFailNow{}) }

// Error and flush paths. A finite seed's QP may give up; then which WRs
// took effect is no longer the model's to say in advance: a WRITE whose
// ACK was lost landed although its requester fails, a SEND cut off after
// its first packets left part of its data in the receive buffer. What
// the run did is derived from its completions and its memory, and
// checked against what the transport allows:
//
//   - the requester completed its first k WRs (all before the first error
//     completion), the error WR completed with RETRY_EXC_ERR or
//     RNR_RETRY_EXC_ERR (signaled or not), every later WR it was given
//     with WR_FLUSH_ERR;
//   - the responder executed the first j WRs, k <= j <= n, exactly once and
//     in order (RC executes in PSN order), and of WR j at most a prefix of
//     whole packets (a WRITE's target or a SEND's receive buffer); none
//     after it;
//   - the receives the responder completed are exactly those the first j
//     messages consumed, in order; if its QP is in ERR every other receive
//     posted to it completes with WR_FLUSH_ERR after them;
//   - READ data and atomic results landed for the first k WRs, and of the
//     error WR, if a READ, at most a prefix of whole packets.
//
// Without an error, k = j = n: the model's images exactly.

// invOutcome is what one direction of a connection did, as the run shows.
type invOutcome struct {
	K  int // WRs the requester completed successfully
	J  int // WRs the responder executed
	PJ int // bytes of WR j that landed at the responder (a prefix of whole packets)
	QK int // bytes of WR k's READ response that landed at the requester
	s  int // receives the responder completed successfully
}

func (o invOutcome) String() string {
	return fmt.Sprintf("{completed %d, executed %d, +%d bytes of the next, %d bytes of a failed READ}", o.K, o.J, o.PJ, o.QK)
}

// invPrefix returns how many bytes of after landed in got: after's first
// b bytes, b a multiple of mtu or all of it, the rest still before; -1 if
// got is no such mix.
func invPrefix(got, before, after []byte, mtu int) int {
	if bytes.Equal(got, after) {
		return len(got)
	}
	for b := 0; b < len(got); b += mtu {
		if bytes.Equal(got[:b], after[:b]) && bytes.Equal(got[b:], before[b:]) {
			return b
		}
	}
	return -1
}

// invStrictPrefix is invPrefix short of all of after: the largest b < n,
// a multiple of mtu, with got after's first b bytes and before's rest; -1
// if none (0 for an empty one). A message cut off after b bytes may leave
// memory that equals after in full when its last bytes happen to equal
// before's.
func invStrictPrefix(got, before, after []byte, mtu int) int {
	if len(got) == 0 {
		return 0
	}
	best := -1
	for b := 0; b < len(got); b += mtu {
		if bytes.Equal(got[:b], after[:b]) && bytes.Equal(got[b:], before[b:]) {
			best = b
		}
	}
	return best
}

// invGather reads n bytes of img through spans.
func invGather(img []byte, spans []invSpan, n int) []byte {
	var out []byte
	for _, s := range spans {
		out = append(out, img[s.off:s.off+s.n]...)
	}
	return out[:n]
}

// consumes reports whether s consumes a receive at the responder.
func (s *invSend) consumes() bool {
	return s.op == verbs.WRSend || s.op == verbs.WRSendWithImm || s.op == verbs.WRRDMAWriteWithImm
}

// apply writes into the images what direction side of the connection did
// by o: hl is the requester's local MR, pl and pr the responder's local
// and remote MRs, all holding their initial contents.
func (c *invConn) apply(side int, o invOutcome, hl, pl, pr []byte) {
	h, peer := c.hosts[side], c.hosts[1-side]
	rem := append([]byte(nil), peer.remoteInit...) // the responder's remote MR as the model runs
	for idx, s := range h.sends {
		if idx == o.J {
			copy(pr, rem)
			switch s.op {
			case verbs.WRRDMAWrite, verbs.WRRDMAWriteWithImm:
				copy(pr[s.remote:], s.data[:o.PJ])
			case verbs.WRSend, verbs.WRSendWithImm:
				invScatter(pl, s.recv.sges, s.data[:o.PJ])
			}
		}
		switch {
		case idx < o.K && s.op == verbs.WRRDMARead:
			invScatter(hl, s.local, rem[s.remote:s.remote+s.length])
		case idx == o.K && s.op == verbs.WRRDMARead:
			invScatter(hl, s.local, rem[s.remote:s.remote+o.QK])
		case idx < o.K && (s.op == verbs.WRAtomicFetchAndAdd || s.op == verbs.WRAtomicCmpAndSwp):
			binary.LittleEndian.PutUint64(hl[s.local[0].off:], s.orig)
		}
		switch s.op {
		case verbs.WRSend, verbs.WRSendWithImm:
			if idx < o.J {
				invScatter(pl, s.recv.sges, s.data)
			}
		case verbs.WRRDMAWrite, verbs.WRRDMAWriteWithImm:
			copy(rem[s.remote:], s.data)
		case verbs.WRAtomicFetchAndAdd:
			binary.LittleEndian.PutUint64(rem[s.remote:], s.orig+s.add)
		case verbs.WRAtomicCmpAndSwp:
			if s.orig == s.add {
				binary.LittleEndian.PutUint64(rem[s.remote:], s.swap)
			}
		}
	}
	if o.J == len(h.sends) {
		copy(pr, rem)
	}
}

// sendWantErr lists the completions a host's send CQ must hold when its
// first k WRs succeeded, WR k failed with st and posted WRs were posted.
func (h *invHost) sendWantErr(k int, st verbs.WCStatus, posted int) []string {
	var out []string
	for idx, s := range h.sends[:posted] {
		switch {
		case idx < k:
			if s.signaled() {
				out = append(out, invSendLine(s.id, verbs.WCSuccess, invWCOpcode(s.op), uint32(s.length)))
			}
		case idx == k:
			out = append(out, invSendLine(s.id, st, invWCOpcode(s.op), 0))
		default:
			out = append(out, invSendLine(s.id, verbs.WCWRFlushErr, invWCOpcode(s.op), 0))
		}
	}
	return out
}

// recvWantErr lists the completions a host's receive CQ must hold when
// its first s receives completed and, if the QP is in ERR, the other
// posted ones were flushed.
func (h *invHost) recvWantErr(s, posted int, flushed bool) []string {
	var out []string
	out = append(out, h.recvWant()[:s]...)
	if flushed {
		for _, v := range h.recvs[s:posted] {
			out = append(out, invRecvLine(verbs.WC{WRID: v.id, Status: verbs.WCWRFlushErr, Opcode: verbs.WCRecv}))
		}
	}
	return out
}

// unexplained says why an error completion of s on h's send queue is not
// one the case can cause ("" if it is): retry_cnt or rnr_retry that never
// gives up, a retry error with nothing on the path to cause it (no fault
// rule, no tail-dropping queue, the peer alive), an RNR error for a WR
// whose receive the peer posted at once.
func (c *invCase) unexplained(h, ph *invHost, pe *invEnd, s *invSend, st verbs.WCStatus) string {
	switch st {
	case verbs.WCRetryExcErr:
		switch {
		case h.retryCnt == 7:
			return "retry_cnt 7 never gives up"
		case c.planText == "" && c.link.QueueBytes == 0 && pe.qp.State() != verbs.QPStateErr:
			return "no fault rule, no tail-dropping queue and the peer not in ERR: nothing lost the packets"
		}
	case verbs.WCRNRRetryExcErr:
		switch {
		case h.rnrRetry == 7:
			return "rnr_retry 7 never gives up"
		case s.recv == nil:
			return "the WR consumes no receive"
		case s.recv.at == 0 && !s.recv.never && ph.rqDepth >= len(ph.recvs):
			return "its receive " + s.recv.label + " was posted at once"
		}
	default:
		return "not an error this workload can cause"
	}
	return ""
}

// outcomes checks every queue's completions against the shapes above and
// derives each direction's outcome (by connection and requester side).
func (c *invCase) outcomes(t assert.TestingT, res *invRun) [][2]invOutcome {
	outs := make([][2]invOutcome, len(c.conns))
	c.ends(func(k, i int, cn *invConn, h *invHost) {
		if cn.uc || cn.ud {
			return // checkUC, checkUD
		}
		e, pe, ph := res.ends[k][i], res.ends[k][1-i], cn.hosts[1-i]
		o := &outs[k][i]
		n := len(h.sends)
		o.K = n
		st := verbs.WCSuccess
		var got []string
		for _, wc := range e.swcs {
			got = append(got, invSendLine(wc.WRID, wc.Status, wc.Opcode, wc.ByteLen))
			if wc.Status != verbs.WCSuccess && st == verbs.WCSuccess {
				st = wc.Status
				o.K = slices.IndexFunc(h.sends, func(s *invSend) bool { return s.id == wc.WRID })
				if o.K < 0 {
					o.K = n
				}
			}
		}
		if o.K == n {
			assert.Equal(t, h.sendWant(), got, "%s's send queue: every signaled WR once, IBV_WC_SUCCESS, in posting order", h.name)
			assert.Equal(t, verbs.QPStateRTS, e.qp.State(), "%s's QP: no error completion, so still RTS", h.name)
		} else {
			assert.Equal(t, h.sendWantErr(o.K, st, e.drv.nextSend), got, "%s's send queue: the signaled WRs before the first error once, IBV_WC_SUCCESS, in posting order, then the failed one, then every later WR flushed", h.name)
			if why := c.unexplained(h, ph, pe, h.sends[o.K], st); why != "" {
				t.Errorf("%s: %s %s on %s is not explained: %s", h.name, h.sends[o.K].label, st.Name(), h.name, why)
			}
			assert.Equal(t, verbs.QPStateErr, e.qp.State(), "%s's QP after %s", h.name, st.Name())
		}

		// The receive queue: the messages of the peer it completed, in
		// order, then (in ERR) every other receive posted, flushed.
		got = nil
		msgs := len(h.recvWant())
		for _, wc := range e.rwcs {
			got = append(got, invRecvLine(wc))
		}
		s := 0
		for s < len(e.rwcs) && s < msgs && e.rwcs[s].Status == verbs.WCSuccess {
			s++
		}
		outs[k][1-i].s = s
		assert.Equal(t, h.recvWantErr(s, e.drv.nextRecv, e.qp.State() == verbs.QPStateErr), got,
			"%s's receive queue: one completion per message from %s it received, in order, right byte_len and immediate; then, in ERR, every other receive posted flushed; spares stay posted", h.name, ph.name)
	})
	// The responder's side of each direction: the largest j at least k
	// that accounts for its receive completions and its remote MR.
	c.ends(func(k, i int, cn *invConn, h *invHost) {
		if cn.uc || cn.ud {
			return
		}
		e, pe, ph := res.ends[k][i], res.ends[k][1-i], cn.hosts[1-i]
		o := &outs[k][i]
		pmtu := cn.mtu.Bytes()
		consumed := make([]int, len(h.sends)+1) // receives the first j WRs consume
		for idx, s := range h.sends {
			consumed[idx+1] = consumed[idx]
			if s.consumes() {
				consumed[idx+1]++
			}
		}
		pr := make([]byte, len(ph.remoteInit))
		scratch := append([]byte(nil), h.localInit...)
		pl := append([]byte(nil), ph.localInit...)
		found := false
		for j := len(h.sends); j >= o.K && !found; j-- {
			if consumed[j] != o.s {
				continue
			}
			pj := 0
			if j < len(h.sends) {
				s := h.sends[j]
				switch s.op {
				case verbs.WRRDMAWrite, verbs.WRRDMAWriteWithImm:
					pj = invStrictPrefix(pe.remote[s.remote:s.remote+s.length], ph.remoteInit[s.remote:s.remote+s.length], s.data, pmtu)
				case verbs.WRSend, verbs.WRSendWithImm:
					pj = invStrictPrefix(invGather(pe.local, s.recv.sges, s.length), invGather(ph.localInit, s.recv.sges, s.length), s.data, pmtu)
				}
				if pj < 0 {
					continue // not a strict prefix: WR j executed in full, or garbage
				}
			}
			cand := *o
			cand.J, cand.PJ = j, pj
			cn.apply(i, cand, scratch, pl, pr)
			if bytes.Equal(pr, pe.remote) {
				*o, found = cand, true
			}
		}
		if !found {
			t.Errorf("%s -> %s: no model-legal outcome: no j in [%d,%d] with %d receives consumed and %s's remote MR as executing %s's first j WRs (and a packet prefix of the next) leaves it",
				h.name, ph.name, o.K, len(h.sends), o.s, ph.name, h.name)
			o.J = o.K
			for o.J < len(h.sends) && consumed[o.J] < o.s {
				o.J++
			}
		}
		if o.K < len(h.sends) {
			if s := h.sends[o.K]; s.op == verbs.WRRDMARead {
				q := invStrictPrefix(invGather(e.local, s.local, s.length), invGather(h.localInit, s.local, s.length), invGather(h.localWant, s.local, s.length), pmtu)
				if q < 0 {
					t.Errorf("%s: the failed READ %s left neither its destination nor a packet prefix of its data there (prefix %d of %d)", h.name, s.label, q, s.length)
					q = 0
				}
				o.QK = q
			}
		}
	})
	return outs
}

// UC connections. The requester completes every WR as soon as it is sent
// (IBV_WC_SUCCESS, in order); the network may lose any packet and the
// responder then drops the rest of that message (rxe: drop_msg until the
// next FIRST or ONLY), and a lost message's receive is taken by the next
// one. So, derived from what a UC responder can do:
//
//   - each receive completion, in posting order of the receives, is
//     IBV_WC_SUCCESS and is one message of the peer, intact: its byte_len,
//     immediate and opcode, and its data in the receive buffer (a SEND) or
//     at the target (a WRITE_WITH_IMM);
//   - the messages delivered come in sending order, each at most once,
//     unless the fault plan duplicates (then a message may come again:
//     UC has no duplicate detection) or reorders or delays (then a later
//     one may overtake);
//   - every WRITE target holds a packet prefix of its data (all of it for
//     a WRITE_WITH_IMM delivered); every receive buffer byte past the
//     message it received is untouched or a byte of a message that
//     started to land there and was cut off; everything else untouched;
//   - both QPs stay in RTS.

// invPlanHas reports whether the plan has a rule with one of the actions.
func invPlanHas(plan string, actions ...string) bool {
	for _, l := range strings.Split(plan, "\n") {
		if f := strings.Fields(l); len(f) > 0 && slices.Contains(actions, f[0]) {
			return true
		}
	}
	return false
}

// checkUC asserts the invariants of UC connection k.
func (c *invCase) checkUC(t assert.TestingT, res *invRun, k int) {
	cn := c.conns[k]
	pmtu := cn.mtu.Bytes()
	ordered := !invPlanHas(c.planText, "dup", "reorder", "delay")
	dups := invPlanHas(c.planText, "dup")
	for i, h := range cn.hosts {
		e, ph := res.ends[k][i], cn.hosts[1-i]
		var got []string
		for _, wc := range e.swcs {
			got = append(got, invSendLine(wc.WRID, wc.Status, wc.Opcode, wc.ByteLen))
		}
		assert.Equal(t, h.sendWant(), got, "%s's send queue (UC): every signaled WR once, IBV_WC_SUCCESS, in posting order", h.name)
		assert.Equal(t, verbs.QPStateRTS, e.qp.State(), "%s's QP (UC)", h.name)

		var msgs []*invSend // the peer's messages that consume a receive, in sending order
		for _, s := range ph.sends {
			if s.consumes() {
				msgs = append(msgs, s)
			}
		}
		local := append([]byte(nil), h.localInit...)
		remote := append([]byte(nil), h.remoteInit...)
		delivered := map[*invSend]int{}
		next := 0
		for idx, wc := range e.rwcs {
			if idx >= len(h.recvs) || wc.WRID != h.recvs[idx].id || wc.Status != verbs.WCSuccess {
				t.Errorf("%s (UC): receive completion %d is %s: want IBV_WC_SUCCESS for the receives in posting order", h.name, idx, invRecvLine(wc))
				continue
			}
			v := h.recvs[idx]
			match := func(m *invSend) bool {
				if int(wc.ByteLen) != m.length || (wc.WCFlags&verbs.WCFlagWithImm != 0) != (m.op != verbs.WRSend) ||
					m.op != verbs.WRSend && wc.ImmData != m.imm || (wc.Opcode == verbs.WCRecvRDMAWithImm) != (m.op == verbs.WRRDMAWriteWithImm) {
					return false
				}
				if m.op == verbs.WRRDMAWriteWithImm {
					return bytes.Equal(e.remote[m.remote:m.remote+m.length], m.data)
				}
				return bytes.Equal(invGather(e.local, v.sges, m.length), m.data)
			}
			from := 0
			if ordered {
				from = next
			}
			// Messages alike (two empty SENDs) are told apart by taking
			// the first one not delivered yet.
			j := slices.IndexFunc(msgs[from:], func(m *invSend) bool { return delivered[m] == 0 && match(m) })
			if j < 0 {
				j = slices.IndexFunc(msgs[from:], match)
			}
			if j < 0 {
				t.Errorf("%s (UC): receive %s completed (%s) with no message of %s that matches it in order (byte_len, immediate, data)", h.name, v.label, invRecvLine(wc), ph.name)
				continue
			}
			m := msgs[from+j]
			next = max(next, from+j+1)
			if delivered[m]++; delivered[m] > 1 && !dups {
				t.Errorf("%s (UC): %s delivered %d times, and the plan duplicates nothing", h.name, m.label, delivered[m])
			}
			if m.op != verbs.WRRDMAWriteWithImm {
				invScatter(local, v.sges, m.data)
			}
		}
		// Receive buffers: past what they received, untouched or cut-off
		// message data, packet by packet.
		for _, v := range h.recvs {
			buf, exp := invGather(e.local, v.sges, v.size), invGather(local, v.sges, v.size)
			for off := 0; off < v.size; off += pmtu {
				end := min(off+pmtu, v.size)
				if bytes.Equal(buf[off:end], exp[off:end]) {
					continue
				}
				// One cut-off message wrote this packet's bytes from its
				// start (the message this receive completed may have
				// written over its first ones).
				for _, m := range msgs {
					if m.op == verbs.WRRDMAWriteWithImm || m.length <= off {
						continue
					}
					ok := true
					for b := off; b < end && ok; b++ {
						ok = buf[b] == exp[b] || b < m.length && buf[b] == m.data[b]
					}
					if ok {
						copy(exp[off:end], buf[off:end])
						break
					}
				}
			}
			invScatter(local, v.sges, exp)
		}
		// WRITE targets: a packet prefix each.
		for _, s := range ph.sends {
			if s.op != verbs.WRRDMAWrite && s.op != verbs.WRRDMAWriteWithImm {
				continue
			}
			p := invPrefix(e.remote[s.remote:s.remote+s.length], h.remoteInit[s.remote:s.remote+s.length], s.data, pmtu)
			switch {
			case p < 0:
				t.Errorf("%s (UC): the target of %s holds neither its data nor a packet prefix of it", h.name, s.label)
			case delivered[s] > 0 && p != s.length:
				t.Errorf("%s (UC): %s was delivered but only %d of its %d bytes landed", h.name, s.label, p, s.length)
			default:
				copy(remote[s.remote:], s.data[:p])
			}
		}
		diffs := invDiff(h.name+".local", e.local, local, &h.local)
		diffs = append(diffs, invDiff(h.name+".remote", e.remote, remote, &h.remote)...)
		assert.Empty(t, diffs, "%s's memory (UC): delivered messages intact, WRITE targets packet prefixes, cut-off data only in receive buffers, everything else untouched", h.name)
	}
}

// UD pairs. Each datagram is one packet; the requester completes it once
// sent; the network may lose, duplicate or reorder it and the responder
// checks nothing of order (no PSN check for UD). So:
//
//   - every signaled send completes IBV_WC_SUCCESS, in posting order;
//   - each receive completion, in posting order of the receives, is
//     IBV_WC_SUCCESS with the GRH flag, the sender's QPN as src_qp, and
//     one datagram of the peer, intact: byte_len 40 plus its length, its
//     immediate, and in the buffer the 40-byte GRH area (an IPv4 header in
//     its last 20 bytes: RoCE v2) followed by its data;
//   - each datagram is delivered at most once and in sending order,
//     unless the plan duplicates (at most once fails) or reorders or
//     delays (order fails);
//   - every other byte untouched; both QPs in RTS.

// invGRHLen is the GRH area at the start of a UD receive buffer.
const invGRHLen = 40

// invQKey is the Q_Key of the swarm's UD QPs (the scenario format's
// default).
const invQKey = 0x11111111

// checkUD asserts the invariants of UD pair k.
func (c *invCase) checkUD(t assert.TestingT, res *invRun, k int) {
	cn := c.conns[k]
	ordered := !invPlanHas(c.planText, "dup", "reorder", "delay")
	dups := invPlanHas(c.planText, "dup")
	for i, h := range cn.hosts {
		e, pe, ph := res.ends[k][i], res.ends[k][1-i], cn.hosts[1-i]
		var got []string
		for _, wc := range e.swcs {
			got = append(got, invSendLine(wc.WRID, wc.Status, wc.Opcode, wc.ByteLen))
		}
		assert.Equal(t, h.sendWant(), got, "%s's send queue (UD): every signaled WR once, IBV_WC_SUCCESS, in posting order", h.name)
		assert.Equal(t, verbs.QPStateRTS, e.qp.State(), "%s's QP (UD)", h.name)

		local := append([]byte(nil), h.localInit...)
		delivered := map[*invSend]int{}
		next := 0
		for idx, wc := range e.rwcs {
			if idx >= len(h.recvs) || wc.WRID != h.recvs[idx].id || wc.Status != verbs.WCSuccess ||
				wc.WCFlags&verbs.WCFlagGRH == 0 || wc.SrcQP != pe.qp.QPNum || wc.Opcode != verbs.WCRecv {
				t.Errorf("%s (UD): receive completion %d is %s flags %#x src_qp %#x: want IBV_WC_SUCCESS, IBV_WC_RECV, a GRH, from QP %#x, for the receives in posting order",
					h.name, idx, invRecvLine(wc), wc.WCFlags, wc.SrcQP, pe.qp.QPNum)
				continue
			}
			v := h.recvs[idx]
			buf := invGather(e.local, v.sges, v.size)
			if buf[20] != 0x45 {
				t.Errorf("%s (UD): receive %s: no IPv4 header in the GRH area (byte 20 is %#x)", h.name, v.label, buf[20])
			}
			from := 0
			if ordered {
				from = next
			}
			match := func(m *invSend) bool {
				return int(wc.ByteLen) == invGRHLen+m.length && (wc.WCFlags&verbs.WCFlagWithImm != 0) == (m.op == verbs.WRSendWithImm) &&
					(m.op == verbs.WRSend || wc.ImmData == m.imm) && bytes.Equal(buf[invGRHLen:invGRHLen+m.length], m.data)
			}
			// Datagrams alike are told apart by taking the first one not
			// delivered yet.
			j := slices.IndexFunc(ph.sends[from:], func(m *invSend) bool { return delivered[m] == 0 && match(m) })
			if j < 0 {
				j = slices.IndexFunc(ph.sends[from:], match)
			}
			if j < 0 {
				t.Errorf("%s (UD): receive %s completed (%s) with no datagram of %s that matches it in order (byte_len, immediate, data)", h.name, v.label, invRecvLine(wc), ph.name)
				continue
			}
			m := ph.sends[from+j]
			next = max(next, from+j+1)
			if delivered[m]++; delivered[m] > 1 && !dups {
				t.Errorf("%s (UD): %s delivered %d times, and the plan duplicates nothing", h.name, m.label, delivered[m])
			}
			invScatter(local, v.sges, append(append([]byte(nil), buf[:invGRHLen]...), m.data...))
		}
		diffs := invDiff(h.name+".local", e.local, local, &h.local)
		diffs = append(diffs, invDiff(h.name+".remote", e.remote, h.remoteInit, &h.remote)...)
		assert.Empty(t, diffs, "%s's memory (UD): GRH and datagram in the receive buffers that completed, everything else untouched", h.name)
	}
}
