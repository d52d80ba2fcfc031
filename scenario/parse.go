package scenario

import (
	"fmt"
	"maps"
	"math"
	"net/netip"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"unicode/utf8"

	"github.com/rocesim/rocesim/faults"
	"github.com/rocesim/rocesim/internal/lineformat"
	"github.com/rocesim/rocesim/nic"
	"github.com/rocesim/rocesim/sim"
	"github.com/rocesim/rocesim/sim/fabric"
	"github.com/rocesim/rocesim/verbs"
)

// Parsing, in two passes:
//
//  1. Line by line: cut at '#' (except description and fault lines, which
//     take the rest of the line as it is), split at white space, and hand
//     the tokens to the statement named by the first. Each statement
//     checks its words as it reads them: known, not given twice, well
//     formed, in range. Nodes must be declared before a line uses them;
//     QPs, CQs and memory regions may be named before their declaration.
//  2. Resolve the node.name references (QP peers and CQs, memory places,
//     step and expectation targets), give every QP without CQs its own,
//     and check what needs the whole file: a node on exactly one link,
//     peers of the same type that agree, a send's remote buffer.
//
// The first problem stops the parse. Its position is the 1-based line and
// the 1-based column, in characters, of the offending word (of its value,
// for key=value), or of the statement when something is missing.

// ParseError is a syntax or value error in a scenario's text. Error()
// formats it as "line:col: message", both 1-based; Col counts characters.
// File is the name given to Parse, for callers that want to prefix it.
type ParseError struct {
	File      string
	Line, Col int
	Msg       string
}

// Error returns "line:col: message".
func (e *ParseError) Error() string {
	return lineformat.ErrorText(e.Line, e.Col, e.Msg)
}

// Defaults of a qp line (rxe's and ibv_rc_pingpong's usual values).
const (
	defaultPSN         = 1
	defaultTimeout     = 14 // 4.096 µs × 2^14 = 67.1 ms; 16 jiffies, 64 ms, under rxe
	defaultRetryCnt    = 7
	defaultRNRRetry    = 7
	defaultMinRNRTimer = 12 // 0.64 ms
	defaultMaxRdAtomic = 1
	defaultQueueDepth  = 64
	defaultQKey        = 0x11111111
	defaultCQSize      = 64 // a declared cq without size=
)

// Parse reads a scenario. name is where the text came from (a file name,
// or a built-in's); it names the scenario when the text has no scenario
// line. Errors are *ParseError.
func Parse(name, text string) (*Scenario, error) {
	p := &parser{s: &Scenario{File: name, Text: text, seed: 1}, nodes: map[string]*nodeDecl{}}
	lines := strings.Split(text, "\n")
	for i, l := range lines {
		p.line = i + 1
		p.raw = strings.TrimSuffix(l, "\r")
		p.toks = lineformat.Tokenize(p.raw)
		if len(p.toks) == 0 {
			continue
		}
		if err := p.statement(); err != nil {
			return nil, err
		}
	}
	if len(p.s.nodes) == 0 {
		// An empty file (or one of comments) would run nothing and claim
		// nothing; "expectations: all met" would be a lie of omission.
		return nil, &ParseError{File: name, Line: 1, Col: 1, Msg: "empty scenario: no node line (a scenario needs at least node a b, a link and a step)"}
	}
	if err := p.resolve(); err != nil {
		return nil, err
	}
	s := p.s
	if s.Name == "" {
		s.Name = strings.TrimSuffix(filepath.Base(name), ".scenario")
	}
	return s, nil
}

type parser struct {
	s      *Scenario
	line   int
	raw    string
	toks   []lineformat.Token
	nodes  map[string]*nodeDecl // lookups only
	seen   map[string]int       // once-only statements -> line
	faults []faultDecl          // checked against the topology in resolve
	last   sim.Duration         // time of the last step
}

// errorf returns a *ParseError at col of the current line.
func (p *parser) errorf(col int, format string, args ...any) error {
	return &ParseError{File: p.s.File, Line: p.line, Col: col, Msg: fmt.Sprintf(format, args...)}
}

// opts reads the key=value words of toks with the handlers of h, each
// key at most once; flags are the bare words allowed (nil: none).
func (p *parser) opts(stmt string, toks []lineformat.Token, h map[string]func(val string, col int) error, flags map[string]func() error) error {
	seen := map[string]bool{}
	for _, t := range toks {
		key, val, vc, ok := t.KeyValue()
		if !ok {
			if f, ok := flags[t.Text]; ok {
				if seen[t.Text] {
					return p.errorf(t.Col, "%s given twice", t.Text)
				}
				seen[t.Text] = true
				if err := f(); err != nil {
					return err
				}
				continue
			}
			if _, ok := h[t.Text]; ok {
				return p.errorf(t.Col, "missing value for %s=", t.Text)
			}
			return p.errorf(t.Col, "unexpected %q in %s (want %s)", t.Text, stmt, want(h, flags))
		}
		f, known := h[key]
		if !known {
			return p.errorf(t.Col, "unknown key %q in %s (want %s)", key, stmt, want(h, flags))
		}
		if seen[key] {
			return p.errorf(t.Col, "duplicate key %q", key)
		}
		seen[key] = true
		if val == "" {
			return p.errorf(t.Col, "missing value for %s=", key)
		}
		if err := f(val, vc); err != nil {
			return err
		}
	}
	return nil
}

// want lists the keys and flags a statement takes, sorted, for messages.
func want(h map[string]func(string, int) error, flags map[string]func() error) string {
	ks := slices.Collect(maps.Keys(flags))
	for _, k := range slices.Sorted(maps.Keys(h)) {
		ks = append(ks, k+"=")
	}
	slices.Sort(ks)
	return strings.Join(ks, ", ")
}

// statement dispatches on the first word.
func (p *parser) statement() error {
	t := p.toks[0]
	switch t.Text {
	case "scenario":
		return p.scenarioLine()
	case "description":
		return p.descriptionLine()
	case "seed":
		return p.seedLine()
	case "deadline":
		return p.deadlineLine()
	case "node":
		return p.nodeLine()
	case "link":
		return p.linkLine()
	case "switch":
		return p.switchLine()
	case "mr":
		return p.mrLine()
	case "mw":
		return p.mwLine()
	case "cq":
		return p.cqLine()
	case "qp":
		return p.qpLine()
	case "fault":
		return p.faultLine()
	case "at":
		return p.atLine()
	case "on":
		return p.onLine()
	case "expect":
		return p.expectLine()
	}
	return p.errorf(t.Col, "unknown statement %q (want scenario, description, seed, deadline, node, link, switch, mr, mw, cq, qp, fault, at, on or expect)", t.Text)
}

// once fails if the statement was given before.
func (p *parser) once() error {
	t := p.toks[0]
	if p.seen == nil {
		p.seen = map[string]int{}
	}
	if l, ok := p.seen[t.Text]; ok {
		return p.errorf(t.Col, "%s given twice (first on line %d)", t.Text, l)
	}
	p.seen[t.Text] = p.line
	return nil
}

// args checks the statement has exactly n words after its keyword.
func (p *parser) args(n int, what string) error {
	if len(p.toks)-1 < n {
		return p.errorf(p.toks[0].Col, "%s needs %s", p.toks[0].Text, what)
	}
	if len(p.toks)-1 > n {
		return p.errorf(p.toks[n+1].Col, "unexpected %q after %s", p.toks[n+1].Text, p.toks[0].Text+" "+what)
	}
	return nil
}

func (p *parser) scenarioLine() error {
	if err := p.once(); err != nil {
		return err
	}
	if err := p.args(1, "a name, e.g. scenario go-back-n"); err != nil {
		return err
	}
	t := p.toks[1]
	if err := p.checkName(t.Text, t.Col, "scenario name"); err != nil {
		return err
	}
	p.s.Name = t.Text
	return nil
}

func (p *parser) descriptionLine() error {
	if err := p.once(); err != nil {
		return err
	}
	rest := strings.TrimSpace(p.raw[p.toks[0].Off+len("description"):])
	if rest == "" {
		return p.errorf(p.toks[0].Col, "description needs a line of text")
	}
	p.s.Description = rest
	return nil
}

func (p *parser) seedLine() error {
	if err := p.once(); err != nil {
		return err
	}
	if err := p.args(1, "a number, e.g. seed 1"); err != nil {
		return err
	}
	v, err := p.num(p.toks[1].Text, p.toks[1].Col, "seed", math.MaxUint64)
	if err != nil {
		return err
	}
	p.s.seed = v
	return nil
}

func (p *parser) deadlineLine() error {
	if err := p.once(); err != nil {
		return err
	}
	if err := p.args(1, "a duration, e.g. deadline 10ms"); err != nil {
		return err
	}
	d, err := p.duration(p.toks[1].Text, p.toks[1].Col)
	if err != nil {
		return err
	}
	if d <= 0 {
		return p.errorf(p.toks[1].Col, "deadline must be after 0")
	}
	if len(p.s.steps) > 0 && p.last > d {
		return p.errorf(p.toks[1].Col, "deadline %v is before the step at %v", d, p.last)
	}
	p.s.deadline, p.s.hasDeadline = d, true
	return nil
}

// checkName accepts letters, digits, '_' and '-', starting with a letter
// or digit: names end up in link names ("a-b"), fault plans and traces.
func (p *parser) checkName(s string, col int, what string) error {
	if s == "" {
		return p.errorf(col, "expected a %s", what)
	}
	for i, c := range s {
		ok := c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || (i > 0 && (c == '_' || c == '-'))
		if !ok {
			return p.errorf(col, "bad %s %q: use letters, digits, '_' and '-', starting with a letter or digit", what, s)
		}
	}
	return nil
}

func (p *parser) nodeLine() error {
	if len(p.toks) < 2 {
		return p.errorf(p.toks[0].Col, "node needs a name, e.g. node a")
	}
	for _, t := range p.toks[1:] {
		if err := p.checkName(t.Text, t.Col, "node name"); err != nil {
			return err
		}
		if n, ok := p.nodes[t.Text]; ok {
			return p.errorf(t.Col, "node %q declared twice (first on line %d)", t.Text, n.line)
		}
		for _, l := range p.s.links {
			if l.sw == t.Text {
				return p.errorf(t.Col, "%q is the switch of line %d", t.Text, l.line)
			}
		}
		n := &nodeDecl{name: t.Text, line: p.line, idx: len(p.s.nodes), names: map[string]int{}}
		p.nodes[t.Text] = n
		p.s.nodes = append(p.s.nodes, n)
	}
	return nil
}

// node returns the declared node called by t.
func (p *parser) node(name string, col int) (*nodeDecl, error) {
	n, ok := p.nodes[name]
	if !ok {
		return nil, p.errorf(col, "unknown node %q (declare it first with node %s)", name, name)
	}
	return n, nil
}

// attach puts node n on link l, once.
func (p *parser) attach(n *nodeDecl, l *linkDecl, col int) error {
	if n.attached != nil {
		return p.errorf(col, "node %q is already attached (line %d): a node has one port", n.name, n.attached.line)
	}
	n.attached = l
	l.nodes = append(l.nodes, n)
	return nil
}

// linkOpts are the options of link and switch lines.
func (p *parser) linkOpts(stmt string, cfg *fabric.LinkConfig, toks []lineformat.Token) error {
	return p.opts(stmt, toks, map[string]func(string, int) error{
		"bandwidth": func(v string, c int) error {
			bw, err := p.rate(v, c)
			cfg.Bandwidth = bw
			return err
		},
		"delay": func(v string, c int) error {
			d, err := p.duration(v, c)
			cfg.Propagation = d
			return err
		},
		"mtu": func(v string, c int) error {
			n, err := p.num(v, c, "mtu", 9000)
			if err == nil && n < verbs.MinLinkMTU {
				err = p.errorf(c, "mtu %d too small: RoCE v2 needs at least %d for a 256-byte path MTU", n, verbs.MinLinkMTU)
			}
			cfg.MTU = int(n)
			return err
		},
		"queue": func(v string, c int) error {
			n, err := p.size(v, c, 1<<40)
			cfg.QueueBytes = int(n)
			return err
		},
		"overhead": func(v string, c int) error {
			n, err := p.num(v, c, "overhead", 1<<16)
			cfg.Overhead = int(n)
			return err
		},
	}, nil)
}

func (p *parser) linkLine() error {
	if len(p.toks) < 3 {
		return p.errorf(p.toks[0].Col, "link needs two nodes, e.g. link a b")
	}
	l := &linkDecl{line: p.line, config: fabric.DefaultLinkConfig()}
	for _, t := range p.toks[1:3] {
		n, err := p.node(t.Text, t.Col)
		if err != nil {
			return err
		}
		if len(l.nodes) == 1 && l.nodes[0] == n {
			return p.errorf(t.Col, "link joins a node to itself")
		}
		if err := p.attach(n, l, t.Col); err != nil {
			return err
		}
	}
	if err := p.linkOpts("link", &l.config, p.toks[3:]); err != nil {
		return err
	}
	p.s.links = append(p.s.links, l)
	return nil
}

func (p *parser) switchLine() error {
	if len(p.toks) < 2 {
		return p.errorf(p.toks[0].Col, "switch needs a name and its nodes, e.g. switch sw a b c")
	}
	t := p.toks[1]
	if err := p.checkName(t.Text, t.Col, "switch name"); err != nil {
		return err
	}
	if n, ok := p.nodes[t.Text]; ok {
		return p.errorf(t.Col, "%q is the node of line %d", t.Text, n.line)
	}
	for _, o := range p.s.links {
		if o.sw == t.Text {
			return p.errorf(t.Col, "switch %q declared twice (first on line %d)", t.Text, o.line)
		}
	}
	l := &linkDecl{line: p.line, sw: t.Text, config: fabric.DefaultLinkConfig()}
	i := 2
	for ; i < len(p.toks) && !strings.Contains(p.toks[i].Text, "="); i++ {
		n, err := p.node(p.toks[i].Text, p.toks[i].Col)
		if err != nil {
			return err
		}
		if err := p.attach(n, l, p.toks[i].Col); err != nil {
			return err
		}
	}
	if len(l.nodes) < 2 {
		return p.errorf(t.Col, "switch %s needs at least two nodes", t.Text)
	}
	if err := p.linkOpts("switch", &l.config, p.toks[i:]); err != nil {
		return err
	}
	p.s.links = append(p.s.links, l)
	return nil
}

// declName reads the node.name of an mr, cq or qp line and reserves the
// name on its node.
func (p *parser) declName(stmt, example string) (*nodeDecl, string, error) {
	if len(p.toks) < 2 {
		return nil, "", p.errorf(p.toks[0].Col, "%s needs node.name, e.g. %s", stmt, example)
	}
	t := p.toks[1]
	r, err := p.ref(t.Text, t.Col, stmt+" name")
	if err != nil {
		return nil, "", err
	}
	n, err := p.node(r.node, t.Col)
	if err != nil {
		return nil, "", err
	}
	if l, ok := n.names[r.name]; ok {
		return nil, "", p.errorf(t.Col, "%s is already declared on line %d (mr, mw, cq and qp names share one namespace per node)", r, l)
	}
	n.names[r.name] = p.line
	return n, r.name, nil
}

// ref reads node.name.
func (p *parser) ref(s string, col int, what string) (ref, error) {
	i := strings.IndexByte(s, '.')
	if i < 0 {
		return ref{}, p.errorf(col, "expected %s as node.name, got %q", what, s)
	}
	r := ref{node: s[:i], name: s[i+1:], line: p.line, col: col, set: true}
	if err := p.checkName(r.node, col, "node name"); err != nil {
		return ref{}, err
	}
	if err := p.checkName(r.name, col+i+1, "name"); err != nil {
		return ref{}, err
	}
	return r, nil
}

// memRef reads node.mr[+offset].
func (p *parser) memRef(s string, col int) (memRef, error) {
	var m memRef
	base := s
	if i := strings.IndexByte(s, '+'); i >= 0 {
		base = s[:i]
		off, err := p.size(s[i+1:], col+utf8.RuneCountInString(s[:i])+1, math.MaxInt64)
		if err != nil {
			return m, err
		}
		m.off = off
	}
	r, err := p.ref(base, col, "a memory place")
	if err != nil {
		return m, err
	}
	m.ref = r
	return m, nil
}

func (p *parser) mrLine() error {
	n, name, err := p.declName("mr", "mr a.buf size=4096")
	if err != nil {
		return err
	}
	m := &mrDecl{node: n, name: name, line: p.line, idx: len(p.s.mrs),
		access: nic.AccessLocalWrite | nic.AccessRemoteWrite | nic.AccessRemoteRead | nic.AccessRemoteAtomic}
	hasSize := false
	err = p.opts("mr", p.toks[2:], map[string]func(string, int) error{
		"size": func(v string, c int) error {
			hasSize = true
			n, err := p.size(v, c, 1<<30)
			if err == nil && n == 0 {
				err = p.errorf(c, "size must be at least 1")
			}
			m.size = n
			return err
		},
		"access": func(v string, c int) error {
			a, err := p.access(v, c)
			m.access = a
			return err
		},
		"u64": func(v string, c int) error {
			n, err := p.num(v, c, "u64", math.MaxUint64)
			m.u64 = &n
			return err
		},
		"fill": func(v string, c int) error {
			switch v {
			case "zero":
				m.fill = fillZero
			case "seq":
				m.fill = fillSeq
			case "random":
				m.fill = fillRandom
			default:
				b, err := p.num(v, c, "fill byte", 255)
				if err != nil {
					return p.errorf(c, "bad fill %q: want zero, seq, random or a byte value", v)
				}
				m.fill, m.fillB = fillByte, byte(b)
			}
			return nil
		},
	}, nil)
	if err != nil {
		return err
	}
	if !hasSize {
		return p.errorf(p.toks[0].Col, "mr needs size=, e.g. mr %s.%s size=4096", n.name, name)
	}
	if m.u64 != nil && m.size < 8 {
		return p.errorf(p.toks[0].Col, "u64= needs an mr of at least 8 bytes")
	}
	n.mrs = append(n.mrs, m)
	p.s.mrs = append(p.s.mrs, m)
	return nil
}

// mwLine reads "mw node.name type=1|2": a memory window (ibv_alloc_mw).
func (p *parser) mwLine() error {
	n, name, err := p.declName("mw", "mw b.win type=2")
	if err != nil {
		return err
	}
	w := &mwDecl{node: n, name: name, line: p.line, idx: len(p.s.mws)}
	err = p.opts("mw", p.toks[2:], map[string]func(string, int) error{
		"type": func(v string, c int) error {
			switch v {
			case "1":
				w.typ = nic.MWType1
			case "2":
				w.typ = nic.MWType2
			default:
				return p.errorf(c, "bad type %q: want 1 or 2", v)
			}
			return nil
		},
	}, nil)
	if err != nil {
		return err
	}
	if w.typ == 0 {
		return p.errorf(p.toks[0].Col, "mw needs type=1 or type=2, e.g. mw %s.%s type=2", n.name, name)
	}
	n.mws = append(n.mws, w)
	p.s.mws = append(p.s.mws, w)
	return nil
}

func (p *parser) cqLine() error {
	n, name, err := p.declName("cq", "cq b.rcq size=4 poll=manual")
	if err != nil {
		return err
	}
	c := &cqDecl{node: n, name: name, line: p.line, size: defaultCQSize}
	err = p.opts("cq", p.toks[2:], map[string]func(string, int) error{
		"size": func(v string, col int) error {
			s, err := p.num(v, col, "size", 1<<15-1)
			if err == nil && s == 0 {
				err = p.errorf(col, "size must be at least 1")
			}
			c.size = int(s)
			return err
		},
		"poll": func(v string, col int) error {
			switch v {
			case "auto":
				c.manual = false
			case "manual":
				c.manual = true
			default:
				return p.errorf(col, "bad poll %q: want auto (after every step) or manual (poll steps and the end)", v)
			}
			return nil
		},
	}, nil)
	if err != nil {
		return err
	}
	n.cqs = append(n.cqs, c)
	return nil
}

// qpAttrOpts are the options a qp line and a modify step share.
type qpAttrOpts struct {
	mtu                                  *nic.MTU
	psn, rqPSN, qkey                     *uint32
	timeout, retry, rnr, minRNR, rd, drd *uint8
	access                               *nic.AccessFlags
	state                                *nic.QPState
	mask                                 *nic.QPAttrMask // bits of the options given
}

// attrHandlers returns the handlers of the QP attribute options.
func (p *parser) attrHandlers(o qpAttrOpts) map[string]func(string, int) error {
	u8 := func(key string, dst *uint8, max uint64, bit nic.QPAttrMask) func(string, int) error {
		return func(v string, c int) error {
			n, err := p.num(v, c, key, max)
			*dst = uint8(n)
			*o.mask |= bit
			return err
		}
	}
	h := map[string]func(string, int) error{
		"mtu": func(v string, c int) error {
			m, err := p.pathMTU(v, c)
			*o.mtu = m
			*o.mask |= nic.QPAttrPathMTU
			return err
		},
		"psn": func(v string, c int) error {
			n, err := p.num(v, c, "psn", 1<<24-1)
			*o.psn = uint32(n)
			*o.mask |= nic.QPAttrSQPSN
			return err
		},
		"timeout":            u8("timeout", o.timeout, 31, nic.QPAttrTimeout),
		"retry_cnt":          u8("retry_cnt", o.retry, 7, nic.QPAttrRetryCnt),
		"rnr_retry":          u8("rnr_retry", o.rnr, 7, nic.QPAttrRNRRetry),
		"min_rnr_timer":      u8("min_rnr_timer", o.minRNR, 31, nic.QPAttrMinRNRTimer),
		"max_rd_atomic":      u8("max_rd_atomic", o.rd, 128, nic.QPAttrMaxQPRdAtomic),
		"max_dest_rd_atomic": u8("max_dest_rd_atomic", o.drd, 128, nic.QPAttrMaxDestRdAtomic),
		"access": func(v string, c int) error {
			a, err := p.access(v, c)
			*o.access = a
			*o.mask |= nic.QPAttrAccessFlags
			return err
		},
		"qkey": func(v string, c int) error {
			n, err := p.num(v, c, "qkey", math.MaxUint32)
			*o.qkey = uint32(n)
			*o.mask |= nic.QPAttrQKey
			return err
		},
		"state": func(v string, c int) error {
			s, ok := lookupUpper(qpStateByName, v)
			if !ok {
				return p.errorf(c, "bad state %q: want reset, init, rtr, rts, sqd, sqe or err", v)
			}
			*o.state = s
			*o.mask |= nic.QPAttrState
			return nil
		},
	}
	if o.rqPSN != nil {
		h["rq_psn"] = func(v string, c int) error {
			n, err := p.num(v, c, "rq_psn", 1<<24-1)
			*o.rqPSN = uint32(n)
			*o.mask |= nic.QPAttrRQPSN
			return err
		}
	}
	return h
}

func (p *parser) qpLine() error {
	n, name, err := p.declName("qp", "qp a.q rc peer=b.q")
	if err != nil {
		return err
	}
	if len(p.toks) < 3 {
		return p.errorf(p.toks[1].Col+utf8.RuneCountInString(p.toks[1].Text), "expected a QP type: rc, uc or ud")
	}
	q := &qpDecl{node: n, name: name, line: p.line, idx: len(p.s.qps), psn: defaultPSN, timeout: defaultTimeout,
		retryCnt: defaultRetryCnt, rnrRetry: defaultRNRRetry, minRNRTimer: defaultMinRNRTimer,
		maxRdAtomic: defaultMaxRdAtomic, maxDestRdAt: defaultMaxRdAtomic, qkey: defaultQKey, state: nic.QPStateRTS,
		maxSendWR: defaultQueueDepth, maxRecvWR: defaultQueueDepth, maxSGE: 1}
	switch t := p.toks[2]; t.Text {
	case "rc":
		q.typ = nic.QPTypeRC
		q.access = nic.AccessRemoteWrite | nic.AccessRemoteRead | nic.AccessRemoteAtomic
	case "uc":
		q.typ = nic.QPTypeUC
		q.access = nic.AccessRemoteWrite
	case "ud":
		q.typ = nic.QPTypeUD
	default:
		return p.errorf(t.Col, "bad QP type %q: want rc, uc or ud", t.Text)
	}
	var mask nic.QPAttrMask
	h := p.attrHandlers(qpAttrOpts{mtu: &q.mtu, psn: &q.psn, qkey: &q.qkey, timeout: &q.timeout, retry: &q.retryCnt,
		rnr: &q.rnrRetry, minRNR: &q.minRNRTimer, rd: &q.maxRdAtomic, drd: &q.maxDestRdAt, access: &q.access,
		state: &q.state, mask: &mask})
	u32 := func(key string, dst *uint32, min, max uint64) func(string, int) error {
		return func(v string, c int) error {
			n, err := p.num(v, c, key, max)
			if err == nil && n < min {
				err = p.errorf(c, "%s %d out of range %d..%d", key, n, min, max)
			}
			*dst = uint32(n)
			return err
		}
	}
	cqRef := func(dst *ref) func(string, int) error {
		return func(v string, c int) error {
			if strings.Contains(v, ".") {
				r, err := p.ref(v, c, "a CQ")
				if err == nil && r.node != n.name {
					err = p.errorf(c, "CQ %s is not on node %s", v, n.name)
				}
				*dst = r
				return err
			}
			if err := p.checkName(v, c, "CQ name"); err != nil {
				return err
			}
			*dst = ref{node: n.name, name: v, line: p.line, col: c, set: true}
			return nil
		}
	}
	var cqBoth ref
	h["peer"] = func(v string, c int) error {
		r, err := p.ref(v, c, "a peer QP")
		q.peerRef = r
		return err
	}
	h["cq"] = cqRef(&cqBoth)
	h["send_cq"] = cqRef(&q.sendCQRef)
	h["recv_cq"] = cqRef(&q.recvCQRef)
	h["cq_size"] = func(v string, c int) error {
		s, err := p.num(v, c, "cq_size", 1<<15-1)
		if err == nil && s == 0 {
			err = p.errorf(c, "cq_size must be at least 1")
		}
		q.cqSize = int(s)
		return err
	}
	lim := nic.RxeAttr() // the device's own bounds, so a file fails here and not at create_qp
	h["max_send_wr"] = u32("max_send_wr", &q.maxSendWR, 1, uint64(lim.MaxQPWR))
	h["max_recv_wr"] = u32("max_recv_wr", &q.maxRecvWR, 1, uint64(lim.MaxQPWR))
	h["max_sge"] = u32("max_sge", &q.maxSGE, 1, uint64(lim.MaxSGE))
	h["max_inline"] = u32("max_inline", &q.maxInline, 0, uint64(lim.MaxInlineData))
	h["cm"] = p.cmOption(q)
	groupCol := 0
	h["group"] = func(v string, c int) error {
		groupCol = c
		var err error
		q.group, err = p.group(v, c)
		return err
	}
	err = p.opts("qp", p.toks[3:], h, map[string]func() error{"sig_all": func() error { q.sigAll = true; return nil }})
	if err != nil {
		return err
	}
	if cqBoth.set {
		if q.sendCQRef.set || q.recvCQRef.set {
			return p.errorf(cqBoth.col, "cq= names both CQs: leave out send_cq= and recv_cq=")
		}
		q.sendCQRef, q.recvCQRef = cqBoth, cqBoth
	}
	if groupCol > 0 && q.typ != nic.QPTypeUD {
		return p.errorf(groupCol, "group= is for UD QPs: only a UD QP joins a multicast group")
	}
	if q.peerRef.set && q.typ == nic.QPTypeUD {
		return p.errorf(q.peerRef.col, "a UD QP has no peer: name the destination in each send (dest=)")
	}
	switch q.state {
	case nic.QPStateReset, nic.QPStateInit, nic.QPStateRTR, nic.QPStateRTS:
	default:
		return p.errorf(p.toks[0].Col, "a QP starts in reset, init, rtr or rts; move it on with a modify step")
	}
	if err := p.checkCMQP(q, mask); err != nil {
		return err
	}
	n.qps = append(n.qps, q)
	p.s.qps = append(p.s.qps, q)
	return nil
}

// group parses a multicast group's address: an IPv4 one (224.0.0.0/4),
// as rdma_cm joins on RoCE v2.
func (p *parser) group(v string, c int) (netip.Addr, error) {
	a, err := netip.ParseAddr(v)
	if err != nil || !a.Is4() || !a.IsMulticast() {
		return netip.Addr{}, p.errorf(c, "bad group %q: want an IPv4 multicast address (224.0.0.0 to 239.255.255.255)", v)
	}
	return a, nil
}

func (p *parser) faultLine() error {
	t := p.toks[0]
	restOff := t.Off + len("fault")
	rest := p.raw[restOff:]
	plan, err := faults.Parse(rest)
	if err != nil {
		if pe, ok := err.(*faults.ParseError); ok {
			return p.errorf(pe.Col+utf8.RuneCountInString(p.raw[:restOff]), "%s", pe.Msg)
		}
		return p.errorf(t.Col, "%v", err)
	}
	if len(plan.Rules) != 1 {
		return p.errorf(t.Col, "fault needs one rule of the faults text format, e.g. fault drop psn=2 tx=1")
	}
	p.faults = append(p.faults, faultDecl{line: p.line, rule: plan.Rules[0], toks: p.toks})
	p.s.faultLines = append(p.s.faultLines, p.line)
	if i := strings.IndexByte(rest, '#'); i >= 0 {
		rest = rest[:i]
	}
	p.s.planText += strings.TrimSpace(rest) + "\n"
	return nil
}

// num reads a decimal or 0x hex number up to max.
func (p *parser) num(s string, col int, what string, max uint64) (uint64, error) {
	var v uint64
	var err error
	if h, ok := strings.CutPrefix(s, "0x"); ok {
		v, err = strconv.ParseUint(h, 16, 64)
	} else {
		v, err = strconv.ParseUint(s, 10, 64)
	}
	if err != nil {
		return 0, p.errorf(col, "bad %s %q: expected a number (decimal or 0x hex)", what, s)
	}
	if v > max {
		return 0, p.errorf(col, "%s %d out of range 0..%d", what, v, max)
	}
	return v, nil
}

// duration reads a duration: 10us, 1.5ms, 0.
func (p *parser) duration(s string, col int) (sim.Duration, error) {
	d, err := sim.ParseDuration(s)
	if err != nil || d < 0 {
		return 0, p.errorf(col, "expected a duration like 10us, got %q", s)
	}
	return d, nil
}

// size reads a byte count: 4096, 64KiB, 1MiB.
func (p *parser) size(s string, col int, max uint64) (uint64, error) {
	mult := uint64(1)
	num := s
	for _, u := range []struct {
		suffix string
		mult   uint64
	}{{"KiB", 1 << 10}, {"MiB", 1 << 20}, {"GiB", 1 << 30}} {
		if n, ok := strings.CutSuffix(s, u.suffix); ok {
			num, mult = n, u.mult
			break
		}
	}
	v, err := strconv.ParseUint(num, 10, 64)
	if err != nil {
		if h, ok := strings.CutPrefix(num, "0x"); ok && mult == 1 {
			v, err = strconv.ParseUint(h, 16, 64)
		}
	}
	if err != nil {
		return 0, p.errorf(col, "expected a size like 4096 or 64KiB, got %q", s)
	}
	if v > max/mult {
		return 0, p.errorf(col, "size %s out of range 0..%d", s, max)
	}
	return v * mult, nil
}

// rate reads a bandwidth: 100Gbps, 2.5Gbps, 10Mbps.
func (p *parser) rate(s string, col int) (int64, error) {
	for _, u := range []struct {
		suffix string
		mult   float64
	}{{"Tbps", 1e12}, {"Gbps", 1e9}, {"Mbps", 1e6}, {"kbps", 1e3}, {"Kbps", 1e3}, {"bps", 1}} {
		if n, ok := strings.CutSuffix(s, u.suffix); ok {
			f, err := strconv.ParseFloat(n, 64)
			if err != nil || f <= 0 || math.IsInf(f, 0) || f*u.mult >= 1e15 || f*u.mult < 1 {
				break
			}
			return int64(math.Round(f * u.mult)), nil
		}
	}
	return 0, p.errorf(col, "expected a bandwidth like 100Gbps or 2.5Gbps, got %q", s)
}

// access reads a comma-separated list of access flags, or none.
func (p *parser) access(s string, col int) (nic.AccessFlags, error) {
	if s == "none" {
		return 0, nil
	}
	var a nic.AccessFlags
	c := col
	for _, w := range strings.Split(s, ",") {
		f, ok := accessByName[w]
		if !ok {
			return 0, p.errorf(c, "bad access %q: want local_write, remote_write, remote_read, remote_atomic, mw_bind (comma-separated) or none", w)
		}
		a |= f
		c += utf8.RuneCountInString(w) + 1
	}
	return a, nil
}

// pathMTU reads a path MTU in bytes.
func (p *parser) pathMTU(s string, col int) (nic.MTU, error) {
	for m := nic.MTU256; m <= nic.MTU4096; m++ {
		if strconv.Itoa(m.Bytes()) == s {
			return m, nil
		}
	}
	return 0, p.errorf(col, "bad path MTU %q: want 256, 512, 1024, 2048 or 4096", s)
}
