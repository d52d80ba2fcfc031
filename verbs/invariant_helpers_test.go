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
//  2. invDrawPlan draws the fault plan text: a swarm-style random subset
//     of drop/dup/delay/reorder/corrupt lines (and now and then a link
//     down, a flapping link or a partition), all inside a safety window
//     that closes, so that a liveness phase without faults follows.
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
	"encoding/binary"
	"fmt"
	"math/rand/v2"
	"sort"
	"strconv"
	"strings"

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
		var s *invSend
		if w := cn.hosts[side].lastWrite; op == verbs.WRRDMARead && w != nil && w.length > 0 && r.IntN(3) == 0 {
			o := r.IntN(w.length)
			s = cn.readBack(r, side, w, o, 1+r.IntN(w.length-o))
		} else {
			s = cn.addSend(r, side, op, invDrawLen(r, cn.mtu.Bytes()))
		}
		if r.IntN(10) == 0 {
			s.flags &^= verbs.SendSignaled
		}
		if r.IntN(20) == 0 {
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
	c.model()
	return c
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
		func() string { return "truncate cut=4 prob=" + prob(0.05) },
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
		fmt.Fprintf(&b, "%s: path MTU %d sq_psn %#x timeout %d min_rnr_timer %d max_rd_atomic %d max_dest_rd_atomic %d max_send_wr %d max_recv_wr %d, %d sends, %d receives, polls every %v when full\n",
			h.name, cn.mtu.Bytes(), h.psn, h.timeout, h.minRNR, h.rd, h.destRd, h.sqDepth, h.rqDepth, len(h.sends), len(h.recvs), h.poll)
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
