package scenario

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"math"
	"slices"
	"strconv"
	"strings"
	"unicode/utf8"

	"github.com/rocesim/rocesim/faults"
	"github.com/rocesim/rocesim/internal/lineformat"
	"github.com/rocesim/rocesim/nic"
)

// expectKind is what an expect line claims.
type expectKind uint8

const (
	expectWR          expectKind = iota // node.qp wr=N STATUS ...: exactly one such completion, matching
	expectCompletions                   // node.qp completions ...: the QP's whole list, in polled order
	expectState                         // node.qp state S
	expectEvent                         // event node[.qp] TYPE [count=N]
	expectEvents                        // events node ...: the node's whole list
	expectCounter                       // counter node.name OP N
	expectMem                           // mem node.mr+off u64=N | len=N equals=node.mr+off
	expectRereg                         // rereg node.mr ok|ERRNO ...: the answers of the region's rereg steps
	expectFrames                        // frames KEYS count=N | none: how many recorded frames match
	expectCMEvents                      // cm node.qp EVENT[:STATUS] ... | none: the QP's CM events, in order
)

// wrStatus is one item of a completions list.
type wrStatus struct {
	wr     uint64
	status nic.WCStatus
}

// expectation is one "expect" line.
type expectation struct {
	line int
	text string // as written after "expect"
	kind expectKind

	qpRef ref
	qp    *qpDecl
	node  *nodeDecl

	wr         uint64
	status     nic.WCStatus
	opcode     *nic.WCOpcode
	byteLen    *uint32
	imm        *uint32
	flags      *nic.WCFlags
	list       []wrStatus
	state      nic.QPState
	event      nic.AsyncEventType
	count      int // expectEvent: -1 means at least once
	events     []nic.AsyncEventType
	answers    []string // expectRereg: "ok" or an errno name, in step order
	counter    string
	cmp        string
	value      uint64
	mem        memRef
	u64        *uint64
	length     uint64
	equals     memRef
	nodeName   string // for event(s) lines, resolved in resolve
	nodeCol    int
	hasQPInRef bool
	match      faults.Match // expectFrames: the filter
	frameIdx   int          // expectFrames: index into runState.frameCounts
	cmEvents   []string     // expectCMEvents: as written, EVENT or EVENT:STATUS
	// profile, if set (profile=rxe or profile=spec at the end of the
	// line), limits the claim to runs under that behaviour profile: where
	// rxe and the IBTA differ, a scenario states both.
	profile string
}

func (p *parser) expectLine() error {
	if len(p.toks) < 3 {
		return p.errorf(p.toks[0].Col, "expect needs a claim, e.g. expect a.q wr=2 IBV_WC_SUCCESS")
	}
	e := &expectation{line: p.line, text: strings.TrimSpace(p.raw[p.toks[1].Off:]), count: -1}
	if i := strings.IndexByte(e.text, '#'); i >= 0 {
		e.text = strings.TrimSpace(e.text[:i])
	}
	if last := p.toks[len(p.toks)-1]; strings.HasPrefix(last.Text, "profile=") {
		switch v := strings.TrimPrefix(last.Text, "profile="); v {
		case nic.ProfileRXE.String(), nic.ProfileSpec.String():
			e.profile = v
		default:
			return p.errorf(last.Col+len("profile="), "bad profile %q: want rxe or spec", v)
		}
		p.toks = p.toks[:len(p.toks)-1]
		if len(p.toks) < 3 {
			return p.errorf(p.toks[0].Col, "expect needs a claim before profile=")
		}
	}
	var err error
	switch t := p.toks[1]; t.Text {
	case "event":
		err = p.expectEvent(e)
	case "events":
		err = p.expectEvents(e)
	case "counter":
		err = p.expectCounter(e)
	case "mem":
		err = p.expectMem(e)
	case "rereg":
		err = p.expectRereg(e)
	case "frames":
		err = p.expectFrames(e)
	case "cm":
		err = p.expectCM(e)
	default:
		if !strings.Contains(t.Text, ".") {
			return p.errorf(t.Col, "expected node.qp, event, events, counter, mem or rereg after expect, got %q", t.Text)
		}
		if e.qpRef, err = p.ref(t.Text, t.Col, "a QP"); err != nil {
			return err
		}
		err = p.expectQP(e)
	}
	if err != nil {
		return err
	}
	p.s.expects = append(p.s.expects, e)
	return nil
}

// expectFrames reads "frames KEYS... count=N" or "frames KEYS... none":
// the keys are a fault rule's match keys (faults.ParseMatch), checked
// against the topology as a fault line's are.
func (p *parser) expectFrames(e *expectation) error {
	e.kind = expectFrames
	toks := p.toks[2:]
	last := toks[len(toks)-1]
	switch {
	case last.Text == "none":
		e.value = 0
	case strings.HasPrefix(last.Text, "count="):
		v, err := p.num(strings.TrimPrefix(last.Text, "count="), last.Col+len("count="), "count", math.MaxInt32)
		if err != nil {
			return err
		}
		e.value = v
	default:
		return p.errorf(last.Col, "expect frames ends with count=N or none, e.g. expect frames class=nak src=b count=1")
	}
	keys := toks[:len(toks)-1]
	text := ""
	if len(keys) > 0 {
		text = strings.TrimSpace(p.raw[keys[0].Off:last.Off])
	}
	m, err := faults.ParseMatch(text)
	if err != nil {
		if pe, ok := err.(*faults.ParseError); ok && len(keys) > 0 {
			return p.errorf(pe.Col+utf8.RuneCountInString(p.raw[:keys[0].Off]), "%s", pe.Msg)
		}
		return p.errorf(p.toks[1].Col, "%v", err)
	}
	if err := p.checkFault(faultDecl{line: p.line, rule: faults.Rule{Match: m}, toks: keys}); err != nil {
		return err
	}
	e.match = m
	e.frameIdx = len(p.s.frameClaims)
	p.s.frameClaims = append(p.s.frameClaims, e)
	return nil
}

// status reads a completion status: IBV_WC_SUCCESS or SUCCESS.
func (p *parser) status(s string, col int) (nic.WCStatus, error) {
	st, ok := lookupUpper(wcStatusByName, s)
	if !ok {
		return 0, p.errorf(col, "expected a completion status like IBV_WC_SUCCESS or IBV_WC_RETRY_EXC_ERR, got %q", s)
	}
	return st, nil
}

func (p *parser) expectQP(e *expectation) error {
	toks := p.toks[2:]
	switch t := toks[0]; {
	case t.Text == "completions":
		e.kind = expectCompletions
		if len(toks) < 2 {
			return p.errorf(t.Col, "completions needs a list of wr:STATUS, or none")
		}
		if toks[1].Text == "none" {
			if len(toks) > 2 {
				return p.errorf(toks[2].Col, "unexpected %q after none", toks[2].Text)
			}
			e.list = []wrStatus{}
			return nil
		}
		for _, it := range toks[1:] {
			i := strings.IndexByte(it.Text, ':')
			if i < 0 {
				return p.errorf(it.Col, "expected wr:STATUS like 2:IBV_WC_SUCCESS, got %q", it.Text)
			}
			wr, err := p.num(it.Text[:i], it.Col, "wr", math.MaxUint64)
			if err != nil {
				return err
			}
			st, err := p.status(it.Text[i+1:], it.Col+i+1)
			if err != nil {
				return err
			}
			e.list = append(e.list, wrStatus{wr, st})
		}
		return nil
	case t.Text == "state":
		e.kind = expectState
		if len(toks) != 2 {
			return p.errorf(t.Col, "state needs one QP state, e.g. expect a.q state ERR")
		}
		s, ok := lookupUpper(qpStateByName, toks[1].Text)
		if !ok {
			return p.errorf(toks[1].Col, "bad state %q: want RESET, INIT, RTR, RTS, SQD, SQE or ERR", toks[1].Text)
		}
		e.state = s
		return nil
	case strings.HasPrefix(t.Text, "wr="):
		e.kind = expectWR
		hasStatus := false
		seen := map[string]bool{}
		for _, it := range toks {
			key, val, vc, ok := it.KeyValue()
			if ok && seen[key] {
				return p.errorf(it.Col, "duplicate key %q", key)
			}
			seen[key] = true
			if !ok {
				if hasStatus {
					return p.errorf(it.Col, "unexpected %q: one status per expectation", it.Text)
				}
				st, err := p.status(it.Text, it.Col)
				if err != nil {
					return err
				}
				e.status, hasStatus = st, true
				continue
			}
			if val == "" {
				return p.errorf(it.Col, "missing value for %s=", key)
			}
			switch key {
			case "wr":
				n, err := p.num(val, vc, "wr", math.MaxUint64)
				if err != nil {
					return err
				}
				e.wr = n
			case "opcode":
				o, ok := lookupUpper(wcOpcodeByName, val)
				if !ok {
					return p.errorf(vc, "expected a completion opcode like IBV_WC_RECV or IBV_WC_RDMA_READ, got %q", val)
				}
				e.opcode = &o
			case "byte_len", "imm":
				n, err := p.num(val, vc, key, math.MaxUint32)
				if err != nil {
					return err
				}
				v := uint32(n)
				if key == "imm" {
					e.imm = &v
				} else {
					e.byteLen = &v
				}
			case "flags":
				f, off, ok := parseWCFlags(val)
				if !ok {
					bad, _, _ := strings.Cut(val[off:], "|")
					return p.errorf(vc+utf8.RuneCountInString(val[:off]), "bad flags %q: want 0 or completion flags joined by |, e.g. flags=IBV_WC_GRH|IBV_WC_WITH_IMM (verbs.h: %s)",
						bad, wcFlagList())
				}
				e.flags = &f
			default:
				return p.errorf(it.Col, "unknown key %q (want wr=, opcode=, byte_len=, imm=, flags= and a status)", key)
			}
		}
		if !hasStatus {
			return p.errorf(toks[len(toks)-1].Col+len([]rune(toks[len(toks)-1].Text)), "expected a completion status like IBV_WC_SUCCESS")
		}
		return nil
	default:
		return p.errorf(t.Col, "expected wr=N STATUS, completions or state after %s, got %q", e.qpRef, t.Text)
	}
}

// nodeOrQP reads node or node.qp.
func (p *parser) nodeOrQP(e *expectation, t lineformat.Token) error {
	if strings.Contains(t.Text, ".") {
		r, err := p.ref(t.Text, t.Col, "a QP")
		e.qpRef, e.hasQPInRef = r, true
		return err
	}
	if err := p.checkName(t.Text, t.Col, "node name"); err != nil {
		return err
	}
	e.nodeName, e.nodeCol = t.Text, t.Col
	return nil
}

// eventType reads an asynchronous event type: IBV_EVENT_CQ_ERR or CQ_ERR.
func (p *parser) eventType(s string, col int) (nic.AsyncEventType, error) {
	ev, ok := lookupUpper(eventByName, s)
	if !ok {
		return 0, p.errorf(col, "expected an async event like IBV_EVENT_CQ_ERR or QP_ACCESS_ERR, got %q", s)
	}
	return ev, nil
}

func (p *parser) expectEvent(e *expectation) error {
	e.kind = expectEvent
	toks := p.toks[2:]
	if len(toks) < 2 {
		return p.errorf(p.toks[1].Col, "event needs a node (or node.qp) and an event type, e.g. expect event b CQ_ERR")
	}
	if err := p.nodeOrQP(e, toks[0]); err != nil {
		return err
	}
	ev, err := p.eventType(toks[1].Text, toks[1].Col)
	if err != nil {
		return err
	}
	e.event = ev
	return p.opts("expect event", toks[2:], map[string]func(string, int) error{
		"count": func(v string, c int) error {
			n, err := p.num(v, c, "count", 1<<20)
			e.count = int(n)
			return err
		},
	}, nil)
}

// expectRereg reads "rereg node.mr ANSWER { ANSWER }": what the rereg
// steps of the region returned, in order, each "ok" or an errno name.
func (p *parser) expectRereg(e *expectation) error {
	e.kind = expectRereg
	toks := p.toks[2:]
	if len(toks) < 2 {
		return p.errorf(p.toks[1].Col, "rereg needs a memory region and the answers of its rereg steps in order, e.g. expect rereg b.buf EOPNOTSUPP")
	}
	r, err := p.ref(toks[0].Text, toks[0].Col, "a memory region")
	if err != nil {
		return err
	}
	e.mem.ref = r
	for _, t := range toks[1:] {
		if t.Text != "ok" && !slices.ContainsFunc(errnoNames, func(n errnoEntry) bool { return n.name == t.Text }) {
			return p.errorf(t.Col, "bad rereg answer %q: want ok or an errno (EOPNOTSUPP, EINVAL, ENOMEM, EACCES, EPERM, EFAULT, EBUSY, ENOSYS)", t.Text)
		}
		e.answers = append(e.answers, t.Text)
	}
	return nil
}

// noneList reports whether a claimed list (toks, not empty) is "none",
// which must then stand alone.
func (p *parser) noneList(toks []lineformat.Token) (bool, error) {
	if toks[0].Text != "none" {
		return false, nil
	}
	if len(toks) > 1 {
		return true, p.errorf(toks[1].Col, "unexpected %q after none", toks[1].Text)
	}
	return true, nil
}

func (p *parser) expectEvents(e *expectation) error {
	e.kind = expectEvents
	toks := p.toks[2:]
	if len(toks) < 2 {
		return p.errorf(p.toks[1].Col, "events needs a node and its events in order, or none, e.g. expect events a PORT_ERR")
	}
	if err := p.nodeOrQP(e, toks[0]); err != nil {
		return err
	}
	if e.hasQPInRef {
		return p.errorf(toks[0].Col, "events lists a node's events: name the node, not a QP")
	}
	e.events = []nic.AsyncEventType{}
	if none, err := p.noneList(toks[1:]); none || err != nil {
		return err
	}
	for _, t := range toks[1:] {
		ev, err := p.eventType(t.Text, t.Col)
		if err != nil {
			return err
		}
		e.events = append(e.events, ev)
	}
	return nil
}

func (p *parser) expectCounter(e *expectation) error {
	e.kind = expectCounter
	if len(p.toks) != 3 {
		return p.errorf(p.toks[1].Col, "counter needs node.name=N (or >=, <=, >, <, !=) written without spaces, e.g. expect counter a.rcvd_seq_err=1")
	}
	t := p.toks[2]
	i := strings.IndexAny(t.Text, "=<>!")
	if i < 0 {
		return p.errorf(t.Col, "expected node.counter=N, e.g. a.rcvd_seq_err=1, got %q", t.Text)
	}
	r, err := p.ref(t.Text[:i], t.Col, "a counter")
	if err != nil {
		return err
	}
	if !counterNames[r.name] {
		var c nic.Counters
		return p.errorf(t.Col+len(r.node)+1, "unknown counter %q (rxe's: %s)", r.name, strings.Join(c.Names(), ", "))
	}
	rest := t.Text[i:]
	for _, op := range []string{">=", "<=", "!=", "=", ">", "<"} {
		if v, ok := strings.CutPrefix(rest, op); ok {
			n, err := p.num(v, t.Col+i+len(op), "counter value", math.MaxUint64)
			if err != nil {
				return err
			}
			e.counter, e.cmp, e.value = r.name, op, n
			e.nodeName, e.nodeCol = r.node, t.Col
			return nil
		}
	}
	return p.errorf(t.Col+i, "expected =, >=, <=, >, < or != after the counter name")
}

func (p *parser) expectMem(e *expectation) error {
	e.kind = expectMem
	toks := p.toks[2:]
	var err error
	if e.mem, err = p.memRef(toks[0].Text, toks[0].Col); err != nil {
		return err
	}
	hasLen, hasEq := false, false
	err = p.opts("expect mem", toks[1:], map[string]func(string, int) error{
		"u64": func(v string, c int) error {
			n, err := p.num(v, c, "u64", math.MaxUint64)
			e.u64 = &n
			return err
		},
		"len": func(v string, c int) error {
			var err error
			e.length, err = p.size(v, c, 1<<30)
			hasLen = true
			return err
		},
		"equals": func(v string, c int) error {
			var err error
			e.equals, err = p.memRef(v, c)
			hasEq = true
			return err
		},
	}, nil)
	if err != nil {
		return err
	}
	switch {
	case e.u64 != nil && (hasLen || hasEq):
		return p.errorf(toks[0].Col, "expect mem takes u64= or len= with equals=, not both")
	case e.u64 == nil && !(hasLen && hasEq):
		return p.errorf(p.toks[1].Col, "expect mem needs u64=N, or len=N and equals=node.mr+off")
	}
	return nil
}

// check evaluates the expectation against a finished run and returns ""
// or what went wrong.
func (e *expectation) check(r *runState, res *Result) string {
	switch e.kind {
	case expectCMEvents:
		return e.checkCM(res)
	case expectFrames:
		if got := r.frameCounts[e.frameIdx]; uint64(got) != e.value {
			return fmt.Sprintf("expected %d matching frames, got %d", e.value, got)
		}
		return ""
	case expectWR, expectCompletions:
		return e.checkCompletions(r.qpCompletions(res, e.qp))
	case expectState:
		if s := r.qps[e.qp.idx].State(); s != e.state {
			return "got " + s.String()
		}
	case expectEvent:
		n := 0
		for _, ev := range res.AsyncEvents {
			if ev.Node == e.node.name && ev.Type == eventName(e.event) && (e.qp == nil || ev.QPN == r.qps[e.qp.idx].QPNum) {
				n++
			}
		}
		if (e.count < 0 && n == 0) || (e.count >= 0 && n != e.count) {
			return fmt.Sprintf("got %d such events; %s had %s", n, e.node.name, orNone(r.nodeEvents(res, e.node)))
		}
	case expectEvents:
		got := r.nodeEvents(res, e.node)
		var want []string
		for _, ev := range e.events {
			want = append(want, eventName(ev))
		}
		if strings.Join(got, " ") != strings.Join(want, " ") {
			return "got " + orNone(got)
		}
	case expectCounter:
		v := res.Counters[e.node.name][e.counter]
		ok := false
		switch e.cmp {
		case "=":
			ok = v == e.value
		case "!=":
			ok = v != e.value
		case ">=":
			ok = v >= e.value
		case "<=":
			ok = v <= e.value
		case ">":
			ok = v > e.value
		case "<":
			ok = v < e.value
		}
		if !ok {
			return "got " + strconv.FormatUint(v, 10)
		}
	case expectRereg:
		var got []string
		for _, a := range res.Rereg {
			if a.MR == e.mem.ref.String() {
				got = append(got, a.Errno)
			}
		}
		if strings.Join(got, " ") != strings.Join(e.answers, " ") {
			return "got " + orNone(got)
		}
	case expectMem:
		buf := r.bufs[e.mem.mr.idx]
		if e.u64 != nil {
			if e.mem.off+8 > uint64(len(buf)) {
				return fmt.Sprintf("%s is %d bytes: no 8 bytes at offset %d", e.mem.ref, len(buf), e.mem.off)
			}
			if v := binary.LittleEndian.Uint64(buf[e.mem.off:]); v != *e.u64 {
				return fmt.Sprintf("got %d (%#x)", v, v)
			}
			return ""
		}
		other := r.bufs[e.equals.mr.idx]
		if e.mem.off+e.length > uint64(len(buf)) || e.equals.off+e.length > uint64(len(other)) {
			return fmt.Sprintf("the ranges do not fit in %s (%d bytes) and %s (%d bytes)", e.mem.ref, len(buf), e.equals.ref, len(other))
		}
		a, b := buf[e.mem.off:e.mem.off+e.length], other[e.equals.off:e.equals.off+e.length]
		if !bytes.Equal(a, b) {
			i := 0
			for a[i] == b[i] {
				i++
			}
			diff := 0
			for j := range a {
				if a[j] != b[j] {
					diff++
				}
			}
			return fmt.Sprintf("%d bytes differ, the first at offset %d: %#02x, not %#02x", diff, i, a[i], b[i])
		}
	}
	return ""
}

// CheckCompletions evaluates the scenario's claims on completions (the
// expect lines "node.qp wr=N STATUS ..." and "node.qp completions ...")
// that hold under profile against completions polled elsewhere: the same
// Program replayed on real rxe, say, whose completions have no QPN the
// scenario knows. wcs holds each QP's completions by name ("node.qp"), in
// poll order; a QP it lacks had none. It returns how many claims it
// checked and those not met, worded as Result.Failed words them.
func (s *Scenario) CheckCompletions(profile nic.Profile, wcs map[string][]Completion) (checked int, failed []string) {
	for _, e := range s.expects {
		if (e.kind != expectWR && e.kind != expectCompletions) || (e.profile != "" && e.profile != profile.String()) {
			continue
		}
		checked++
		if msg := e.checkCompletions(wcs[e.qp.String()]); msg != "" {
			failed = append(failed, e.failure(msg))
		}
	}
	return checked, failed
}

// failure words a claim not met for Result.Failed: "line N: expect ...:
// got ...".
func (e *expectation) failure(msg string) string {
	return fmt.Sprintf("line %d: expect %s: %s", e.line, e.text, msg)
}

// checkCompletions evaluates a claim on a QP's completions (expectWR,
// expectCompletions) against qp's completions, in poll order, and returns
// "" or what went wrong.
func (e *expectation) checkCompletions(qp []Completion) string {
	if e.kind == expectCompletions {
		var got, want []string
		for _, c := range qp {
			got = append(got, strconv.FormatUint(c.WRID, 10)+":"+c.Status)
		}
		for _, w := range e.list {
			want = append(want, strconv.FormatUint(w.wr, 10)+":"+w.status.Name())
		}
		if strings.Join(got, " ") != strings.Join(want, " ") {
			return "got " + orNone(got)
		}
		return ""
	}
	var got []Completion
	for _, c := range qp {
		if c.WRID == e.wr {
			got = append(got, c)
		}
	}
	if len(got) != 1 {
		return fmt.Sprintf("expected one completion of wr %d on %s, got %d", e.wr, e.qpRef, len(got))
	}
	c := got[0]
	var diffs []string
	if c.Status != e.status.Name() {
		diffs = append(diffs, "status "+c.Status)
	}
	if e.opcode != nil && c.Opcode != e.opcode.String() {
		diffs = append(diffs, "opcode "+c.Opcode)
	}
	if e.byteLen != nil && c.ByteLen != *e.byteLen {
		diffs = append(diffs, "byte_len "+strconv.FormatUint(uint64(c.ByteLen), 10))
	}
	if e.imm != nil && c.Imm != *e.imm {
		diffs = append(diffs, "imm 0x"+strconv.FormatUint(uint64(c.Imm), 16))
	}
	if e.flags != nil && c.WCFlags != WCFlagsName(*e.flags) {
		diffs = append(diffs, "flags "+c.WCFlags)
	}
	if len(diffs) > 0 {
		return "got " + strings.Join(diffs, ", ")
	}
	return ""
}

func orNone(s []string) string {
	if len(s) == 0 {
		return "none"
	}
	return strings.Join(s, " ")
}
