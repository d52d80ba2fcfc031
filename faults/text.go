package faults

import (
	"strconv"
	"strings"

	"github.com/rocesim/rocesim/sim"
	"github.com/rocesim/rocesim/wire"
)

// Printing, in canonical order (Parse accepts keys in any order):
//
//  1. the verb;
//  2. the verb's own arguments: dup n=, the delay, reorder n=, corrupt
//     byte= bit=, truncate len= or cut=, rewrite set-psn= set-syndrome=
//     set-msn=, partition groups;
//  3. the match keys: link dir src dst qp op class cm psn tx from to, then
//     the stateful ones in the order they are evaluated: nth prob first.
//
// Defaults are left out (dup n=1, corrupt bit=0). Numbers are decimal
// except qp (0x hex) and syndromes without a name (0x hex); opcodes print
// by name, durations in the largest unit that is at most the value
// ("1.5ms", "50us", "0").

// String returns the plan's canonical text: one rule per line, each line
// ending in a newline; "" for an empty plan. Parse(p.String()) returns a
// plan equal to p (reflect.DeepEqual, except that an empty Rules comes
// back nil), and for a text in canonical form String returns that text.
func (p *Plan) String() string {
	if p == nil {
		return ""
	}
	var b []byte
	for i := range p.Rules {
		b = p.Rules[i].appendText(b)
		b = append(b, '\n')
	}
	return string(b)
}

// String returns the rule's canonical text (one line, no newline), the
// form Verdict.Text and LinkChange.Text carry.
func (r Rule) String() string { return string(r.appendText(nil)) }

func (r *Rule) appendText(b []byte) []byte {
	switch r.Event {
	case EventDown:
		b = append(b, "down"...)
	case EventPartition:
		b = append(b, "partition "...)
		for i, g := range r.Groups {
			if i > 0 {
				b = append(b, '|')
			}
			b = append(b, strings.Join(g, ",")...)
		}
	default:
		b = append(b, r.Action.String()...)
		b = r.appendArgs(b)
	}
	b = r.Match.appendText(b)
	if r.After != 0 {
		b = appendInt(b, " after=", r.After)
	}
	return b
}

func (r *Rule) appendArgs(b []byte) []byte {
	switch r.Action {
	case Duplicate:
		if r.Copies != 1 {
			b = appendInt(b, " n=", r.Copies)
		}
	case Delay:
		b = append(b, ' ')
		b = appendDuration(b, r.Delay)
	case Reorder:
		b = appendInt(b, " n=", r.Hold)
	case Corrupt:
		if r.HasByte {
			b = appendInt(b, " byte=", r.Byte)
		}
		if r.Bit != 0 {
			b = appendInt(b, " bit=", r.Bit)
		}
	case Rewrite:
		b = appendAssign(b, " set-psn=", r.SetPSN)
		if r.SetSyndrome.Mode != AssignNone {
			b = append(b, " set-syndrome="...)
			b = appendSyndrome(b, wire.Syndrome(r.SetSyndrome.Value))
		}
		b = appendAssign(b, " set-msn=", r.SetMSN)
		if r.SetOpcode.Mode != AssignNone {
			b = append(b, " set-opcode="...)
			b = append(b, opName(wire.Opcode(r.SetOpcode.Value))...)
		}
		b = r.appendExtra(b)
	case Truncate:
		if r.Len != 0 {
			b = appendInt(b, " len=", r.Len)
		} else {
			b = appendInt(b, " cut=", r.Cut)
		}
		if r.Fix == FixNone {
			b = append(b, " fix=none"...)
		}
	}
	return b
}

func (m *Match) appendText(b []byte) []byte {
	b = appendName(b, " link=", m.Link)
	if m.Dir.From != "" || m.Dir.To != "" {
		b = append(b, " dir="...)
		b = append(b, m.Dir.From...)
		b = append(b, "->"...)
		b = append(b, m.Dir.To...)
	}
	b = appendName(b, " src=", m.Src)
	b = appendName(b, " dst=", m.Dst)
	if m.HasQP {
		b = append(b, " qp=0x"...)
		b = strconv.AppendUint(b, uint64(m.QP), 16)
	}
	if m.HasOp {
		b = append(b, " op="...)
		b = append(b, opName(m.Op)...)
	}
	if m.Class != ClassAny {
		b = append(b, " class="...)
		b = append(b, m.Class.String()...)
	}
	if m.CM != 0 {
		b = append(b, " cm="...)
		b = append(b, m.CM.String()...)
	}
	if m.PSN != nil {
		b = append(b, " psn="...)
		b = strconv.AppendUint(b, uint64(m.PSN.First), 10)
		if m.PSN.Last != m.PSN.First {
			b = append(b, '-')
			b = strconv.AppendUint(b, uint64(m.PSN.Last), 10)
		}
	}
	if m.Tx != 0 {
		b = appendInt(b, " tx=", m.Tx)
	}
	if m.From != 0 {
		b = append(b, " from="...)
		b = appendDuration(b, sim.Duration(m.From))
	}
	if m.To != 0 {
		b = append(b, " to="...)
		b = appendDuration(b, sim.Duration(m.To))
	}
	if m.Nth != 0 {
		b = appendInt(b, " nth=", m.Nth)
	}
	if m.Prob != 0 {
		b = append(b, " prob="...)
		b = append(b, formatProb(m.Prob)...)
	}
	if m.First != 0 {
		b = appendInt(b, " first=", m.First)
	}
	return b
}

func appendName(b []byte, key, v string) []byte {
	if v == "" {
		return b
	}
	return append(append(b, key...), v...)
}

func appendInt(b []byte, key string, v int) []byte {
	return strconv.AppendInt(append(b, key...), int64(v), 10)
}

func appendAssign(b []byte, key string, a Assign) []byte {
	switch a.Mode {
	case AssignSet:
		b = strconv.AppendInt(append(b, key...), int64(a.Value), 10)
	case AssignAdd:
		b = append(b, key...)
		if a.Value >= 0 {
			b = append(b, '+')
		}
		b = strconv.AppendInt(b, int64(a.Value), 10)
	}
	return b
}

// opName returns the opcode's wire name, or 0x hex for one outside the
// table (only in an invalid plan).
func opName(op wire.Opcode) string {
	if op.Valid() {
		return op.String()
	}
	return "0x" + strconv.FormatUint(uint64(op), 16)
}

func formatProb(p float64) string { return strconv.FormatFloat(p, 'g', -1, 64) }

// Syndrome names for set-syndrome= (IBTA §9.7.5.2.1, table 43): the
// values rxe sends and the NAK codes.
var syndromeNames = []struct {
	name string
	s    wire.Syndrome
}{
	{"ack", wire.ACKSyndrome(wire.CreditsUnlimited)},
	{"nak-seq", wire.NAKSyndrome(wire.NAKPSNSequenceError)},
	{"nak-invalid", wire.NAKSyndrome(wire.NAKInvalidRequest)},
	{"nak-access", wire.NAKSyndrome(wire.NAKRemoteAccess)},
	{"nak-op", wire.NAKSyndrome(wire.NAKRemoteOperation)},
	{"nak-rd", wire.NAKSyndrome(wire.NAKInvalidRDRequest)},
}

// appendSyndrome writes a syndrome by name (ack, rnr-N, nak-seq, ...) or
// as 0x hex.
func appendSyndrome(b []byte, s wire.Syndrome) []byte {
	for _, n := range syndromeNames {
		if n.s == s {
			return append(b, n.name...)
		}
	}
	if s&0x80 == 0 && s.IsRNRNAK() {
		return strconv.AppendUint(append(b, "rnr-"...), uint64(s.RNRTimerCode()), 10)
	}
	b = append(b, "0x"...)
	if s < 0x10 {
		b = append(b, '0')
	}
	return strconv.AppendUint(b, uint64(s), 16)
}

// formatDuration returns d as appendDuration writes it.
func formatDuration(d sim.Duration) string { return string(appendDuration(nil, d)) }

// appendDuration writes d in the largest of s, ms, us, ns that is at most
// d, with as many decimals as it needs: "1.5ms", "50us", "3600s", "0".
// sim.ParseDuration reads every such form back exactly. (sim.Duration's
// own String writes "µs" and switches to hours, which plans do not use.)
func appendDuration(b []byte, d sim.Duration) []byte {
	if d == 0 {
		return append(b, '0')
	}
	u := uint64(d)
	if d < 0 {
		b = append(b, '-')
		u = -u
	}
	unit, name, digits := uint64(1), "ns", 0
	switch {
	case u >= uint64(sim.Second):
		unit, name, digits = uint64(sim.Second), "s", 9
	case u >= uint64(sim.Millisecond):
		unit, name, digits = uint64(sim.Millisecond), "ms", 6
	case u >= uint64(sim.Microsecond):
		unit, name, digits = uint64(sim.Microsecond), "us", 3
	}
	b = strconv.AppendUint(b, u/unit, 10)
	if frac := u % unit; frac != 0 {
		var f [9]byte
		for i := digits - 1; i >= 0; i-- {
			f[i] = byte('0' + frac%10)
			frac /= 10
		}
		n := digits
		for f[n-1] == '0' {
			n--
		}
		b = append(b, '.')
		b = append(b, f[:n]...)
	}
	return append(b, name...)
}
