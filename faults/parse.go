package faults

import (
	"math"
	"strconv"
	"strings"

	"github.com/rocesim/rocesim/internal/lineformat"
	"github.com/rocesim/rocesim/sim"
	"github.com/rocesim/rocesim/wire"
)

// Parsing, line by line:
//
//  1. Cut the line at '#' (a comment runs to the end of the line) and split
//     the rest at white space into tokens; a line with no tokens is skipped.
//  2. The first token is the verb (an action or a link event).
//  3. Every other token is key=value, or a bare word where the verb takes
//     one (delay's duration, partition's groups). Each key is checked in
//     turn: known at all, taken by this verb, not given twice, has a value,
//     value well formed and in range.
//  4. Then what needs the whole line: required arguments present,
//     truncate's len=/cut= exclusive, the time window not empty.
//
// The first problem found stops the parse; its position is the 1-based
// line and the 1-based column (in characters) of the offending token, or
// of the verb when something is missing.

// ParseError is a syntax or value error in a plan's text. Error() formats
// it as "line:col: message", both 1-based; Col counts characters and
// points at the offending token: for a bad value, at the value itself
// (the x of "psn=x"), not at its key.
type ParseError struct {
	Line, Col int
	Msg       string
}

// Error returns the message.
func (e *ParseError) Error() string {
	return lineformat.ErrorText(e.Line, e.Col, e.Msg)
}

// Parse reads a plan from its text form (see the package documentation
// for the grammar). Errors are *ParseError.
func Parse(text string) (*Plan, error) {
	p := &Plan{}
	for i, line := range strings.Split(text, "\n") {
		toks := lineformat.Tokenize(line)
		if len(toks) == 0 {
			continue
		}
		r, err := parseRule(i+1, toks)
		if err != nil {
			return nil, err
		}
		// Parse checks everything check does, with positions; this is the
		// guarantee that Parse never returns a plan Validate rejects.
		if msg := r.check(); msg != "" {
			return nil, &ParseError{Line: i + 1, Col: toks[0].Col, Msg: msg}
		}
		p.Rules = append(p.Rules, r)
	}
	return p, nil
}

// ParseInline reads a plan given on one line, as a command-line flag
// (rocesim --faults) or an environment variable (ROCESIM_FAULTS) gives
// it: rules are separated by ';' as well as by newlines. An error's line
// is the rule's place in that list, from 1.
func ParseInline(text string) (*Plan, error) {
	return Parse(strings.ReplaceAll(text, ";", "\n"))
}

// ParseMatch reads match keys alone, the words a rule has after its
// verb ("class=nak src=b psn=2"), for tools that select frames rather
// than act on them. The stateful keys (nth= prob= first=) are refused:
// selecting recorded frames has no counters. An empty text matches every
// frame on its first hop. Errors are *ParseError, with columns counted in
// text ("qp=2 psn=x" fails at column 10, the x).
func ParseMatch(text string) (Match, error) {
	if strings.ContainsAny(text, "\n#") {
		return Match{}, &ParseError{Line: 1, Col: 1, Msg: "a match is one line of keys, without comments"}
	}
	const verb = "drop "
	toks := lineformat.Tokenize(verb + text)
	for i := range toks {
		toks[i].Col -= len(verb)
	}
	r, err := parseRule(1, toks)
	if err == nil {
		if msg := r.check(); msg != "" {
			err = &ParseError{Line: 1, Col: 1, Msg: msg}
		}
	}
	if err != nil {
		if pe, ok := err.(*ParseError); ok && pe.Col < 1 {
			pe.Col = 1 // the error points at the verb this function added
		}
		return Match{}, err
	}
	if m := r.Match; m.Nth != 0 || m.Prob != 0 || m.First != 0 {
		return Match{}, &ParseError{Line: 1, Col: 1, Msg: "nth=, prob= and first= count frames as a plan acts on them; a match for recorded frames cannot use them"}
	}
	return r.Match, nil
}

// verbs maps the first word of a line to what it makes.
var verbs = map[string]Rule{
	"drop":      {Action: Drop},
	"dup":       {Action: Duplicate, Copies: 1},
	"delay":     {Action: Delay},
	"reorder":   {Action: Reorder},
	"corrupt":   {Action: Corrupt},
	"truncate":  {Action: Truncate},
	"rewrite":   {Action: Rewrite},
	"down":      {Event: EventDown},
	"partition": {Event: EventPartition},
}

// matchKeys are the keys every frame rule takes.
var matchKeys = []string{"link", "dir", "src", "dst", "qp", "op", "class", "cm", "psn", "tx", "from", "to", "nth", "prob", "first"}

// argKeys are the keys of each verb's own arguments.
var argKeys = []struct {
	verb string
	keys []string
}{
	{"dup", []string{"n"}},
	{"reorder", []string{"n"}},
	{"corrupt", []string{"byte", "bit"}},
	{"truncate", []string{"len", "cut", "fix"}},
	{"rewrite", []string{"set-psn", "set-syndrome", "set-msn", "set-opcode", "set-qp", "set-rkey", "set-va", "set-dmalen", "set-qkey", "set-imm", "set-pad", "set-ecn", "fix"}},
}

// takesKey reports whether verb accepts key, and whether any verb does.
func takesKey(verb, key string) (takes, known bool) {
	switch verb {
	case "down":
		takes = key == "link" || key == "from" || key == "to" || key == "after"
	case "partition":
		takes = key == "from" || key == "to"
	default:
		takes = indexOf(matchKeys, key) >= 0
	}
	known = takes || indexOf(matchKeys, key) >= 0 || key == "after"
	for _, a := range argKeys {
		if indexOf(a.keys, key) >= 0 {
			known = true
			takes = takes || a.verb == verb
		}
	}
	return takes, known
}

func parseRule(line int, toks []lineformat.Token) (Rule, error) {
	fail := func(t lineformat.Token, msg string) (Rule, error) {
		return Rule{}, &ParseError{Line: line, Col: t.Col, Msg: msg}
	}
	vt := toks[0]
	verb := vt.Text
	r, ok := verbs[verb]
	if !ok {
		return fail(vt, "unknown action "+strconv.Quote(verb)+" (want drop, dup, delay, reorder, corrupt, truncate, rewrite, down or partition)")
	}
	seen := map[string]lineformat.Token{}
	var positional *lineformat.Token
	for i := 1; i < len(toks); i++ {
		t := toks[i]
		key, val, isKV := strings.Cut(t.Text, "=")
		if !isKV {
			if (verb == "delay" || verb == "partition") && positional == nil {
				positional = &toks[i]
				continue
			}
			return fail(t, "unexpected word "+strconv.Quote(t.Text)+" (want key=value)")
		}
		if key == "" {
			return fail(t, "missing key before \"=\" in "+strconv.Quote(t.Text))
		}
		takes, known := takesKey(verb, key)
		if !known {
			return fail(t, "unknown key "+strconv.Quote(key))
		}
		if !takes {
			return fail(t, "key "+strconv.Quote(key)+" does not apply to "+verb)
		}
		if _, dup := seen[key]; dup {
			return fail(t, "duplicate key "+strconv.Quote(key))
		}
		seen[key] = t
		if val == "" {
			return fail(t, "missing value for "+key+"=")
		}
		if msg := setKey(&r, key, val); msg != "" {
			// Point at the value, not its key: in "psn=x" the x is
			// what the user must change (keys are ASCII, so the value
			// starts len(key)+1 characters after the word).
			vt := t
			vt.Col += len(key) + 1
			vt.Off += len(key) + 1
			vt.Text = val
			return fail(vt, "bad "+key+" "+strconv.Quote(val)+": "+msg)
		}
	}

	switch verb {
	case "delay":
		if positional == nil {
			return fail(vt, "delay needs a duration, e.g. \"delay 50us\"")
		}
		d, msg := parseDuration(positional.Text)
		if msg == "" && d == 0 {
			msg = "want a duration > 0"
		}
		if msg != "" {
			return fail(*positional, "bad delay "+strconv.Quote(positional.Text)+": "+msg)
		}
		r.Delay = d
	case "partition":
		if positional == nil {
			return fail(vt, "partition needs node groups, e.g. \"partition a,b|c,d\"")
		}
		groups, msg := parseGroups(positional.Text)
		if msg != "" {
			return fail(*positional, "bad partition groups "+strconv.Quote(positional.Text)+": "+msg)
		}
		r.Groups = groups
	case "reorder":
		if _, ok := seen["n"]; !ok {
			return fail(vt, "reorder needs n=N")
		}
	case "truncate":
		l, hasLen := seen["len"]
		c, hasCut := seen["cut"]
		switch {
		case hasLen && hasCut:
			return fail(later(l, c), "truncate takes len= or cut=, not both")
		case !hasLen && !hasCut:
			return fail(vt, "truncate needs len=N or cut=N")
		}
	case "rewrite":
		if r.SetPSN.Mode == AssignNone && r.SetSyndrome.Mode == AssignNone && r.SetMSN.Mode == AssignNone && r.SetOpcode.Mode == AssignNone && !r.hasExtra() {
			return fail(vt, rewriteRule)
		}
	case "down":
		if r.Match.Link == "" {
			return fail(vt, "down needs link=")
		}
		if a, ok := seen["after"]; ok {
			if t, ok := seen["to"]; ok {
				return fail(later(a, t), "down after= takes no to= (a cut link stays down)")
			}
		}
	}
	if t, ok := seen["to"]; ok && r.Match.To <= r.Match.From {
		return fail(t, windowRule)
	}
	return r, nil
}

func later(a, b lineformat.Token) lineformat.Token {
	if a.Col > b.Col {
		return a
	}
	return b
}

// setKey parses val into the field key names; it returns why val is bad,
// or "".
func setKey(r *Rule, key, val string) string {
	m := &r.Match
	var msg string
	switch key {
	case "link":
		m.Link, msg = parseName(val)
	case "src":
		m.Src, msg = parseName(val)
	case "dst":
		m.Dst, msg = parseName(val)
	case "dir":
		from, to, ok := strings.Cut(val, "->")
		if !ok || !validName(from) || !validName(to) {
			return "want A->B with node names of letters, digits and _ . : / -"
		}
		m.Dir = Direction{from, to}
	case "qp":
		var v uint64
		if v, msg = parseUint(val, wire.PSNMask); msg == "" {
			m.HasQP, m.QP = true, uint32(v)
		}
	case "op":
		m.Op, msg = parseOpcode(val)
		m.HasOp = msg == ""
	case "class":
		m.Class, msg = parseClass(val)
	case "cm":
		m.CM, msg = parseCM(val)
	case "psn":
		var pr PSNRange
		if pr, msg = parsePSNRange(val); msg == "" {
			m.PSN = &pr
		}
	case "tx":
		m.Tx, msg = parseCount(val)
	case "nth":
		m.Nth, msg = parseCount(val)
	case "first":
		m.First, msg = parseCount(val)
	case "prob":
		p, err := strconv.ParseFloat(val, 64)
		if err != nil || !(p > 0 && p <= 1) {
			return probRule
		}
		m.Prob = p
	case "from", "to":
		var d sim.Duration
		d, msg = parseDuration(val)
		if key == "from" {
			m.From = sim.Time(d)
		} else {
			m.To = sim.Time(d)
		}
	case "n":
		var n int
		if n, msg = parseCount(val); r.Action == Duplicate {
			r.Copies = n
		} else {
			r.Hold = n
		}
	case "after":
		r.After, msg = parseCount(val)
	case "len":
		r.Len, msg = parseCount(val)
	case "cut":
		r.Cut, msg = parseCount(val)
	case "byte":
		var v uint64
		v, msg = parseUint(val, math.MaxInt32)
		r.HasByte, r.Byte = msg == "", int(v)
	case "bit":
		var v uint64
		if v, msg = parseUint(val, 7); msg != "" {
			msg = bitRule
		}
		r.Bit = int(v)
	case "set-psn":
		r.SetPSN, msg = parseAssign24(val)
	case "set-msn":
		r.SetMSN, msg = parseAssign24(val)
	case "set-syndrome":
		var s wire.Syndrome
		if s, msg = parseSyndrome(val); msg == "" {
			r.SetSyndrome = Assign{Mode: AssignSet, Value: int64(s)}
		}
	case "set-opcode":
		var op wire.Opcode
		if op, msg = parseAnyOpcode(val); msg == "" {
			r.SetOpcode = Assign{Mode: AssignSet, Value: int64(op)}
		}
	case "fix":
		switch val {
		case "all":
			r.Fix = FixAll
		case "none":
			r.Fix = FixNone
		default:
			msg = "want all (recompute lengths, checksums and ICRC) or none (leave them stale)"
		}
	default:
		for i := range extraFields {
			if f := &extraFields[i]; f.key == key {
				*f.get(r), msg = parseExtra(f, val)
				return msg
			}
		}
		panic("faults: setKey: key " + key + " accepted but not handled")
	}
	return msg
}

func parseName(s string) (string, string) {
	if !validName(s) {
		return "", nameRule
	}
	return s, ""
}

// parseUint reads a decimal or 0x-hex number no larger than max.
func parseUint(s string, max uint64) (uint64, string) {
	base, digits := 10, s
	if len(s) > 2 && s[0] == '0' && (s[1] == 'x' || s[1] == 'X') {
		base, digits = 16, s[2:]
	}
	if digits == "" || digits[0] == '+' {
		return 0, "want a number (decimal or 0x hex)"
	}
	v, err := strconv.ParseUint(digits, base, 64)
	if err != nil {
		return 0, "want a number (decimal or 0x hex)"
	}
	if v > max {
		return 0, "want at most " + strconv.FormatUint(max, 10)
	}
	return v, ""
}

func parseCount(s string) (int, string) {
	v, msg := parseUint(s, math.MaxInt32)
	if msg == "" && v == 0 {
		msg = countRule
	}
	if msg != "" {
		return 0, msg
	}
	return int(v), ""
}

func parseDuration(s string) (sim.Duration, string) {
	d, err := sim.ParseDuration(s)
	if err != nil {
		return 0, "want a duration such as 50us or 1.5ms (units ns, us, ms, s)"
	}
	if d < 0 {
		return 0, timeRule
	}
	return d, ""
}

// opcodeByName holds every valid opcode under its wire name.
var opcodeByName = func() map[string]wire.Opcode {
	m := map[string]wire.Opcode{}
	for _, op := range wire.AllOpcodes() {
		m[op.String()] = op
	}
	return m
}()

func parseOpcode(s string) (wire.Opcode, string) {
	op, msg := parseAnyOpcode(s)
	if msg == "" && !op.Valid() {
		msg = "not an opcode rocesim knows"
	}
	return op, msg
}

// parseAnyOpcode reads an opcode name or any number 0..255, reserved
// ones too (set-opcode= writes what it is given).
func parseAnyOpcode(s string) (wire.Opcode, string) {
	if op, ok := opcodeByName[strings.ToUpper(s)]; ok {
		return op, ""
	}
	if s[0] >= '0' && s[0] <= '9' {
		v, msg := parseUint(s, 0xFF)
		return wire.Opcode(v), msg
	}
	return 0, "want an opcode name such as RC_SEND_ONLY, or its number"
}

func parseClass(s string) (Class, string) {
	for c := ClassAny + 1; c < numClasses; c++ {
		if classNames[c] == s {
			return c, ""
		}
	}
	return 0, "want one of request, response, ack, nak, rnr, read-response, atomic, ud, cnp"
}

// cmAttrs are the CM messages cm= names, in the IBTA's order (§12.6),
// then Service ID Resolution's (§12.11: rdma_cm's UD connections).
var cmAttrs = [...]wire.CMAttr{wire.CMAttrREQ, wire.CMAttrMRA, wire.CMAttrREJ, wire.CMAttrREP, wire.CMAttrRTU,
	wire.CMAttrDREQ, wire.CMAttrDREP, wire.CMAttrLAP, wire.CMAttrAPR, wire.CMAttrSIDRREQ, wire.CMAttrSIDRREP}

// cmIndex returns attr's index in cmAttrs, or -1.
func cmIndex(attr wire.CMAttr) int {
	for i, a := range cmAttrs {
		if a == attr {
			return i
		}
	}
	return -1
}

func parseCM(s string) (wire.CMAttr, string) {
	for _, a := range cmAttrs {
		if strings.EqualFold(a.String(), s) {
			return a, ""
		}
	}
	return 0, "want a CM message: REQ, MRA, REJ, REP, RTU, DREQ, DREP, LAP, APR, SIDR_REQ or SIDR_REP"
}

func parsePSNRange(s string) (PSNRange, string) {
	a, b, isRange := strings.Cut(s, "-")
	first, msg := parseUint(a, wire.PSNMask)
	if msg != "" {
		return PSNRange{}, msg
	}
	last := first
	if isRange {
		if last, msg = parseUint(b, wire.PSNMask); msg != "" {
			return PSNRange{}, msg
		}
	}
	r := PSNRange{wire.PSN(first), wire.PSN(last)}
	if r.Last.Diff(r.First) < 0 {
		return PSNRange{}, psnRangeRule
	}
	return r, ""
}

// parseAssign24 reads N, +N or -N for a 24-bit field.
func parseAssign24(s string) (Assign, string) { return parseDelta(s, true, wire.PSNMask) }

// parseDelta reads N (at most max) and, if add, +N or -N.
func parseDelta(s string, add bool, max uint64) (Assign, string) {
	mode, sign, digits := AssignSet, int64(1), s
	if add {
		switch s[0] {
		case '+':
			mode, digits = AssignAdd, s[1:]
		case '-':
			mode, sign, digits = AssignAdd, -1, s[1:]
		}
	}
	if digits == "" {
		return Assign{}, "want N, +N or -N"
	}
	if mode == AssignAdd && max > math.MaxInt64 {
		max = math.MaxInt64
	}
	v, msg := parseUint(digits, max)
	if msg != "" {
		return Assign{}, msg
	}
	return Assign{Mode: mode, Value: sign * int64(v)}, ""
}

// parseSyndrome reads a syndrome name (ack, nak-seq, nak-invalid,
// nak-access, nak-op, nak-rd, rnr-N) or a number 0..255.
func parseSyndrome(s string) (wire.Syndrome, string) {
	for _, n := range syndromeNames {
		if n.name == s {
			return n.s, ""
		}
	}
	if code, ok := strings.CutPrefix(s, "rnr-"); ok {
		v, msg := parseUint(code, 31)
		if msg != "" {
			return 0, "want an RNR timer code 0..31"
		}
		return wire.RNRNAKSyndrome(uint8(v)), ""
	}
	v, msg := parseUint(s, 0xFF)
	if msg != "" {
		return 0, "want ack, nak-seq, nak-invalid, nak-access, nak-op, nak-rd, rnr-N or a number 0..255"
	}
	return wire.Syndrome(v), ""
}

// parseGroups reads "a,b|c,d|...".
func parseGroups(s string) ([][]string, string) {
	parts := strings.Split(s, "|")
	if len(parts) < 2 {
		return nil, "want two or more groups of nodes separated by |"
	}
	groups := make([][]string, len(parts))
	for i, p := range parts {
		if p == "" {
			return nil, "group " + strconv.Itoa(i+1) + " is empty"
		}
		groups[i] = strings.Split(p, ",")
	}
	if msg := checkGroups(groups); msg != "" {
		return nil, msg
	}
	return groups, ""
}
