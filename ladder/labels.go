package ladder

import (
	"strconv"
	"strings"

	"github.com/rocesim/rocesim/sim"
)

// The words of the drawing: frame labels, notes, loss reasons. Each comes
// in variants from the fullest to the shortest, and a renderer takes the
// first that fits.

// opShort shortens a wire opcode name: RC_SEND_FIRST → SEND_FIRST,
// RC_RDMA_READ_RESPONSE_LAST → READ_RESP_LAST, RC_ACKNOWLEDGE → ACK. RC
// loses its prefix (it is the common case); UC and UD keep theirs.
func opShort(op string) string {
	s := strings.TrimPrefix(op, "RC_")
	for _, r := range [...][2]string{
		{"RDMA_READ_RESPONSE_", "READ_RESP_"},
		{"RDMA_READ_REQUEST", "READ_REQ"},
		{"RDMA_WRITE_", "WRITE_"},
		{"_WITH_IMMEDIATE", "_IMM"},
		{"_WITH_INVALIDATE", "_INV"},
		{"ATOMIC_ACKNOWLEDGE", "ATOMIC_ACK"},
		{"COMPARE_SWAP", "CMP_SWAP"},
		{"ACKNOWLEDGE", "ACK"},
	} {
		s = strings.Replace(s, r[0], r[1], 1)
	}
	return s
}

// synShort shortens an AETH syndrome as the trace gives it (wire's
// Syndrome.String): "NAK(PSN sequence error)" → "NAK(seq)",
// "RNR-NAK(timer=14: 1.28 ms)" → "RNR-NAK 1.28ms".
func synShort(s string) string {
	switch s {
	case "NAK(PSN sequence error)":
		return "NAK(seq)"
	case "NAK(invalid request)":
		return "NAK(inv-req)"
	case "NAK(remote access error)":
		return "NAK(access)"
	case "NAK(remote operational error)":
		return "NAK(rem-op)"
	case "NAK(invalid RD request)":
		return "NAK(inv-rd)"
	}
	if rest, ok := strings.CutPrefix(s, "RNR-NAK(timer="); ok {
		if _, ms, ok := strings.Cut(rest, ": "); ok {
			if d, err := sim.ParseDuration(strings.ReplaceAll(strings.TrimSuffix(ms, ")"), " ", "")); err == nil {
				return "RNR-NAK " + d.String()
			}
		}
	}
	if n, ok := strings.CutPrefix(s, "ACK(credits="); ok {
		return "ACK(cr=" + n
	}
	return s
}

// core is a frame's own label, full and compact: "SEND_LAST psn=103 A",
// "NAK(seq) psn=101 msn=0", "CM REP psn=1 A"; compact "SEND_LAST 103 A",
// "NAK(seq) 101", "CM REP".
func (k frameKey) core(length string) (full, compact string) {
	if k.op == "" {
		return "frame len=" + length, "frame"
	}
	if k.cm != "" {
		// A connection manager's MAD: its message is what a reader
		// follows, the UD SEND to QP1 that carries it is not ("CM REQ
		// psn=0 A", compact "CM REQ").
		full = "CM " + k.cm + " psn=" + k.psn
		if k.ackreq {
			full += " A"
		}
		return full, "CM " + k.cm
	}
	name := opShort(k.op)
	syn := synShort(k.aeth)
	if k.op == "RC_ACKNOWLEDGE" && k.aeth != "" {
		name = syn
	} else if k.aeth != "" && syn != "ACK" {
		name += " " + syn
	}
	full, compact = name+" psn="+k.psn, name+" "+k.psn
	if k.ackreq {
		full, compact = full+" A", compact+" A"
	}
	if k.aeth != "" {
		full += " msn=" + k.msn
	}
	return full, compact
}

// labels returns f's label variants, fullest first: with every mark in
// full (the sender's note only if f is odd), with the required marks
// short, the bare core, the compact core.
func (f *frame) labels() []string {
	full, compact := f.key.core(f.length)
	var all, req []string
	retx := false
	odd := f.odd()
	for _, m := range f.marks {
		if m.short == "" && !odd {
			continue // the sender's notes on routine frames are in the trace, not the ladder
		}
		all = append(all, m.text)
		if m.short != "" {
			req = append(req, m.short)
		}
		retx = retx || m.tone == toneRetx
	}
	if !retx && f.key.tx != "" && f.key.tx != "1" {
		all = append(all, "tx="+f.key.tx)
		req = append(req, "tx="+f.key.tx)
	}
	join := func(core string, ms []string) string {
		if len(ms) == 0 {
			return core
		}
		return core + " · " + strings.Join(ms, ", ")
	}
	return []string{join(full, all), join(full, req), full, compact}
}

// odd reports whether f is out of the ordinary: a NAK, a repeat, touched
// by the fault plan, lost. Only such frames show the sender's notes ("PSN
// 101 expected, PSN 102 received"); a routine frame's note ("packet 1
// of 4") would crowd the ladder.
func (f *frame) odd() bool {
	if f.lost || strings.HasPrefix(f.key.aeth, "NAK") || strings.HasPrefix(f.key.aeth, "RNR") ||
		f.key.tx != "" && f.key.tx != "1" {
		return true
	}
	for _, m := range f.marks {
		if m.tone == toneFault || m.tone == toneRetx || m.tone == toneErr {
			return true
		}
	}
	return false
}

// tone is the colour of f's arrow.
func (f *frame) tone() tone {
	marked := toneNone // the first fault or retransmission mark's
	for _, m := range f.marks {
		if m.tone == toneErr {
			return toneErr // dropped by its receiver, a NAK too
		}
		if marked == toneNone && (m.tone == toneFault || m.tone == toneRetx) {
			marked = m.tone
		}
	}
	switch {
	case f.lost:
		return toneErr
	case strings.HasPrefix(f.key.aeth, "NAK") || strings.HasPrefix(f.key.aeth, "RNR"):
		return toneWarn
	case marked != toneNone:
		return marked
	case f.key.op == "RC_ACKNOWLEDGE" || f.key.op == "RC_ATOMIC_ACKNOWLEDGE":
		return toneOK
	}
	return toneNone
}

// lossTexts returns what is written beside a lost frame's ✗, fullest
// first: "rule 1: drop psn=101 tx=1", "rule 1".
func (f *frame) lossTexts() []string {
	if !f.lost {
		return []string{"not delivered in the trace", "?"}
	}
	at := ""
	if f.lostHop > 0 {
		at = " at " + f.lostAt
	}
	if f.lostRule != "" {
		_, text, _ := strings.Cut(f.lostWhy, ": ")
		short := "rule " + f.lostRule + at
		if text == "" {
			return []string{short}
		}
		return []string{short + ": " + text, short}
	}
	why := strings.TrimPrefix(f.lostWhy, "dropped: ")
	short := "dropped"
	switch f.lostCause {
	case sim.DropQueueFull:
		short = "queue full"
	case sim.DropMTU:
		short = "MTU"
	case sim.DropNoRoute:
		short = "no route"
	case sim.DropRunt:
		short = "runt"
	case sim.DropLinkDown:
		short = "link down"
	}
	return []string{why + at, short + at}
}

// bySuffix is " by rule N", or nothing without a rule.
func bySuffix(rule string) string {
	if rule == "" {
		return ""
	}
	return " by rule " + rule
}

// ruleSuffix is " (rule N)", or nothing without a rule.
func ruleSuffix(rule string) string {
	if rule == "" {
		return ""
	}
	return " (rule " + rule + ")"
}

// faultMark turns a fault event's why ("delayed by rule 2: delay 3us
// psn=102") into a mark: "delayed 3µs by rule 2", with " at sw" when it
// happened beyond the sender.
func faultMark(kind sim.Kind, why, rule, at, origin string) (mark, bool) {
	if kind == "frame-release" {
		return mark{}, false
	}
	verb, rest, _ := strings.Cut(why, " ")
	if verb == "duplicated" {
		verb = "dup"
	}
	if verb == "delayed" {
		_, text, _ := strings.Cut(rest, ": ")
		if f := strings.Fields(text); len(f) > 1 && f[0] == "delay" {
			if d, err := sim.ParseDuration(f[1]); err == nil {
				verb += " " + d.String()
			}
		}
	}
	if at != origin {
		verb += " at " + at
	}
	return mark{text: verb + bySuffix(rule), short: verb + bySuffix(rule), tone: toneFault}, true
}

// noteMarks turns the sender's note on a frame into marks: "retransmission
// #1 of PSN 101 after NAK" gives "retx #1 after NAK", short "retx #1";
// "NAK: PSN 101 expected, PSN 102 received" gives the part after the
// colon, optional (the label says NAK already).
func noteMarks(note string) []mark {
	if rest, ok := strings.CutPrefix(note, "retransmission "); ok {
		num, tail, _ := strings.Cut(rest, " ")
		if strings.HasPrefix(tail, "of PSN ") {
			_, tail, _ = strings.Cut(tail[len("of PSN "):], " ")
		}
		m := mark{text: "retx " + num, short: "retx " + num, tone: toneRetx}
		if tail != "" {
			m.text += " " + tail
		}
		return []mark{m}
	}
	for _, p := range [...]string{"NAK: ", "RNR NAK: "} {
		note = strings.TrimPrefix(note, p)
	}
	return []mark{{text: note}}
}

// completionText is a completion's note: "✔ wr=1 RECV SUCCESS len=4096",
// "✘ wr=2 SEND RETRY_EXC_ERR".
func completionText(e *sim.Event) (string, tone) {
	wr, _ := e.Get("wr_id")
	status, _ := e.Get("status")
	op, _ := e.Get("opcode")
	status = strings.TrimPrefix(status, "IBV_WC_")
	op = strings.TrimPrefix(op, "IBV_WC_")
	s := "wr=" + wr
	if op != "" {
		s += " " + op
	}
	s += " " + status
	if status != "SUCCESS" {
		return "✘ " + s, toneErr
	}
	if n, ok := e.Get("byte_len"); ok && n != "0" {
		s += " len=" + n
	}
	if imm, ok := e.Get("imm"); ok {
		s += " imm=" + imm
	}
	return "✔ " + s, toneOK
}

// fmtTime is the time column's form of t.
func fmtTime(t sim.Time) string { return t.String() }

// itoa is strconv.Itoa, short.
func itoa(i int) string { return strconv.Itoa(i) }
