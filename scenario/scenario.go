package scenario

import (
	"embed"
	"fmt"
	"maps"
	"net/netip"
	"slices"
	"sort"
	"strings"
	"sync"

	"github.com/rocesim/rocesim/nic"
	"github.com/rocesim/rocesim/sim"
	"github.com/rocesim/rocesim/sim/fabric"
)

// Scenario is a parsed scenario file: a topology, queue pairs, memory, a
// timed workload, a fault plan and the outcome it claims. It is immutable
// once parsed; Run may be called any number of times, concurrently too,
// each call building its own world.
type Scenario struct {
	// Name is the scenario's name: its "scenario" line, or else the base
	// name of the file it was parsed from, without ".scenario".
	Name string
	// Description is its one-line "description", or "".
	Description string
	// File is the name it was parsed under (the first argument of Parse).
	File string
	// Text is the source text.
	Text string

	seed        uint64
	deadline    sim.Duration
	hasDeadline bool
	hasCM       bool // some QP has cm=

	nodes       []*nodeDecl
	links       []*linkDecl
	mrs         []*mrDecl // in declaration order; mrDecl.idx indexes this
	mws         []*mwDecl // in declaration order; mwDecl.idx indexes this
	cqs         []*cqDecl // in creation order: node by node, declared ones, then the QPs' own
	qps         []*qpDecl // in declaration order
	planText    string    // the fault rules, one a line, in file order
	faultLines  []int     // the line of each fault rule, in plan order
	steps       []*step   // at lines, in time order
	ons         []*step   // on lines, in file order
	expects     []*expectation
	frameClaims []*expectation // the expect frames lines, counted during a run
}

// Seed returns the seed the scenario runs with when Options.Seed is 0:
// its "seed" line, or 1.
func (s *Scenario) Seed() uint64 { return s.seed }

// Nodes returns the node names in declaration order.
func (s *Scenario) Nodes() []string {
	out := make([]string, len(s.nodes))
	for i, n := range s.nodes {
		out[i] = n.name
	}
	return out
}

// Faults returns the scenario's fault plan in the faults text format, one
// rule a line in file order ("" for none): the plan the fabric applies,
// whose N-th line is rule N in traces and capture comments.
func (s *Scenario) Faults() string { return s.planText }

// faultText returns fault rule i (0-based) as written.
func (s *Scenario) faultText(i int) string {
	return strings.Split(s.planText, "\n")[i]
}

// Expectations returns how many expect lines the scenario has.
func (s *Scenario) Expectations() int { return len(s.expects) }

// nodeDecl is a "node" name: a host with one RDMA device and one port.
type nodeDecl struct {
	name     string
	line     int
	idx      int
	attached *linkDecl // the link or switch its one port is on
	mrs      []*mrDecl
	mws      []*mwDecl
	cqs      []*cqDecl
	qps      []*qpDecl
	names    map[string]int // mr, cq and qp names of the node -> line (lookups only)
}

// linkDecl is a "link a b" or a "switch sw a b ...": the nodes it joins
// and the configuration of each of its links.
type linkDecl struct {
	line   int
	sw     string // switch name, or "" for a point-to-point link
	nodes  []*nodeDecl
	config fabric.LinkConfig
}

// fillKind says how a memory region's bytes start.
type fillKind uint8

const (
	fillZero   fillKind = iota // all zero
	fillSeq                    // byte i is i mod 256
	fillByte                   // every byte the same value
	fillRandom                 // from the seeded stream "scenario mr NODE.NAME"
)

// mrDecl is an "mr node.name": a buffer registered as a memory region.
type mrDecl struct {
	node   *nodeDecl
	name   string
	line   int
	idx    int
	size   uint64
	access nic.AccessFlags
	fill   fillKind
	fillB  byte
	u64    *uint64 // u64=: the first 8 bytes, little-endian, after the fill
}

// mwDecl is an "mw node.name type=N": a memory window allocated in the
// node's PD.
type mwDecl struct {
	node *nodeDecl
	name string
	line int
	idx  int
	typ  nic.MWType
}

// cqDecl is a completion queue: declared by "cq node.name", or made for
// a QP that names none.
type cqDecl struct {
	node     *nodeDecl
	name     string
	line     int
	idx      int
	size     int
	manual   bool // polled only by poll steps and at the end
	implicit bool
}

// qpDecl is a "qp node.name type".
type qpDecl struct {
	node *nodeDecl
	name string
	line int
	idx  int
	typ  nic.QPType

	peerRef ref // as written, resolved into peer
	peer    *qpDecl

	mtu         nic.MTU // 0: the port's active MTU
	psn         uint32
	timeout     uint8
	retryCnt    uint8
	rnrRetry    uint8
	minRNRTimer uint8
	maxRdAtomic uint8
	maxDestRdAt uint8
	access      nic.AccessFlags
	qkey        uint32
	state       nic.QPState
	sendCQRef   ref
	recvCQRef   ref
	sendCQ      *cqDecl
	recvCQ      *cqDecl
	cqSize      int
	maxSendWR   uint32
	maxRecvWR   uint32
	maxSGE      uint32
	maxInline   uint32
	sigAll      bool
	group       netip.Addr // group=: the multicast group a UD QP joins (ibv_attach_mcast), unset if none

	cm     cmRole // cm=: connected through CM, and how (cm.go)
	cmCol  int    // the column of cm=, for errors
	cmPort uint16 // a passive cm= QP's port (listening or not)
}

// String returns the QP's name as written, node.name.
func (q *qpDecl) String() string { return q.node.name + "." + q.name }

// ref is a node.name reference as written, with its position, resolved
// after the whole file is read (so QPs may name peers declared later).
type ref struct {
	node, name string
	line, col  int
	set        bool
}

func (r ref) String() string { return r.node + "." + r.name }

// memRef is a place in a memory region: node.mr+offset.
type memRef struct {
	ref
	off uint64
	mr  *mrDecl
}

// The built-in catalogue: the files in builtin/, parsed once, in the
// order of catalogueOrder (files not listed there follow, by name).

//go:embed builtin/*.scenario
var builtinFS embed.FS

// catalogueOrder is the order in which Builtin lists the catalogue: the
// RC reliability story first (loss, timeout, give up), then receivers not
// ready, errors, READ and atomics, duplicates and ACK loss, PSN wrap,
// selective signalling, UC, a cluster, multicast, closed loops, and connection
// management (rdma_cm) with its faults.
var catalogueOrder = []string{
	"go-back-n", "ack-timeout", "retry-exceeded", "rnr", "rnr-exceeded", "cq-overflow",
	"remote-access-error", "read-atomic", "duplicate", "ack-loss", "psn-wrap", "unsignaled",
	"uc-loss", "alltoall", "multicast", "pingpong", "bandwidth", "rnr-repost",
	"cm-lost-req", "cm-lost-rep", "cm-lost-rtu", "cm-reject", "cm-no-listener", "cm-disconnect-flush",
}

var (
	builtinOnce sync.Once
	builtins    []*Scenario
)

// BuiltinFiles returns the catalogue's files as embedded: base name
// ("go-back-n.scenario") to contents. The same files are in the
// repository's examples/ directory.
func BuiltinFiles() map[string]string {
	ents, err := builtinFS.ReadDir("builtin")
	if err != nil {
		panic("scenario: reading the embedded catalogue: " + err.Error())
	}
	out := make(map[string]string, len(ents))
	for _, e := range ents {
		b, err := builtinFS.ReadFile("builtin/" + e.Name())
		if err != nil {
			panic("scenario: reading the embedded catalogue: " + err.Error())
		}
		out[e.Name()] = string(b)
	}
	return out
}

// Builtin returns the built-in catalogue, parsed from the embedded files,
// in catalogue order. The scenarios are shared: do not modify them.
func Builtin() []*Scenario {
	builtinOnce.Do(func() {
		files := BuiltinFiles()
		names := slices.Sorted(maps.Keys(files))
		rank := map[string]int{}
		for i, n := range catalogueOrder {
			rank[n+".scenario"] = i + 1
		}
		sort.SliceStable(names, func(i, j int) bool {
			ri, rj := rank[names[i]], rank[names[j]]
			if ri == 0 || rj == 0 {
				return ri != 0 && rj == 0
			}
			return ri < rj
		})
		for _, n := range names {
			s, err := Parse(n, files[n])
			if err != nil {
				panic(fmt.Sprintf("scenario: built-in %s: %v", n, err))
			}
			builtins = append(builtins, s)
		}
	})
	return append([]*Scenario(nil), builtins...)
}

// Lookup returns the built-in scenario called name ("go-back-n"; a
// trailing ".scenario" is ignored).
func Lookup(name string) (*Scenario, bool) {
	name = strings.TrimSuffix(name, ".scenario")
	for _, s := range Builtin() {
		if s.Name == name {
			return s, true
		}
	}
	return nil, false
}
