package faults

import (
	"encoding/binary"
	"math"
	"strconv"

	"github.com/rocesim/rocesim/wire"
)

// The header fields a rewrite can assign beyond set-psn=, set-msn=,
// set-syndrome= and set-opcode=, and how a rule leaves a frame it
// changed (fix=). Offsets are the IBTA's (vol. 1 §9.3 for the BTH and
// its extended headers) and RFC 3168's for ECN.

// FixMode says whether a rewrite or truncate leaves the frame consistent.
type FixMode uint8

// Fix modes.
const (
	// FixAll (the default) recomputes what the change made stale: the
	// IPv4 header checksum, after a truncate the IP and UDP lengths, and
	// the ICRC (and a non-zero UDP checksum), so the frame is valid and
	// only the field changed is wrong.
	FixAll FixMode = iota
	// FixNone (fix=none) recomputes nothing: lengths, checksums and ICRC
	// stay as they were, so the frame fails the receiver's first check
	// that reads them.
	FixNone
)

// extraField is one of the assignable fields of the table below.
type extraField struct {
	key  string // "set-rkey"
	bits uint   // field width
	add  bool   // +N and -N allowed (modulo 2^bits)
	hex  bool   // printed in 0x hex (keys, QPNs, addresses), else decimal
	get  func(r *Rule) *Assign
}

// extraFields are assigned in this order and printed in it, after the
// four older set- keys.
var extraFields = [...]extraField{
	{"set-qp", 24, true, true, func(r *Rule) *Assign { return &r.SetQP }},
	{"set-rkey", 32, true, true, func(r *Rule) *Assign { return &r.SetRKey }},
	{"set-va", 64, true, true, func(r *Rule) *Assign { return &r.SetVA }},
	{"set-dmalen", 32, true, false, func(r *Rule) *Assign { return &r.SetDMALen }},
	{"set-qkey", 32, true, true, func(r *Rule) *Assign { return &r.SetQKey }},
	{"set-imm", 32, true, false, func(r *Rule) *Assign { return &r.SetImm }},
	{"set-pad", 2, false, false, func(r *Rule) *Assign { return &r.SetPad }},
	{"set-ecn", 2, false, false, func(r *Rule) *Assign { return &r.SetECN }},
}

// ecnNames are the ECN codepoints (RFC 3168 §5) by value.
var ecnNames = [4]string{"not-ect", "ect1", "ect0", "ce"}

// hasExtra reports whether any extra field is assigned.
func (r *Rule) hasExtra() bool {
	for _, f := range extraFields {
		if *f.get(r) != (Assign{}) {
			return true
		}
	}
	return false
}

// parseExtra reads the value of extra field f.
func parseExtra(f *extraField, s string) (Assign, string) {
	if f.key == "set-ecn" {
		for i, n := range ecnNames {
			if s == n {
				return Assign{Mode: AssignSet, Value: int64(i)}, ""
			}
		}
	}
	max := uint64(math.MaxUint64)
	if f.bits < 64 {
		max = 1<<f.bits - 1
	}
	a, msg := parseDelta(s, f.add, max)
	if msg != "" && f.key == "set-ecn" {
		msg = "want not-ect, ect1, ect0, ce or 0..3"
	}
	return a, msg
}

// checkExtra validates the extra fields of a rule built in Go.
func (r *Rule) checkExtra() string {
	for i := range extraFields {
		f := &extraFields[i]
		a := *f.get(r)
		switch a.Mode {
		case AssignNone:
			if a.Value != 0 {
				return "bad " + f.key + ": Value set with AssignNone"
			}
		case AssignSet:
			if f.bits < 64 && (a.Value < 0 || a.Value > 1<<f.bits-1) {
				return "bad " + f.key + " " + strconv.FormatInt(a.Value, 10) + ": want 0.." + strconv.FormatUint(1<<f.bits-1, 10)
			}
		case AssignAdd:
			if !f.add {
				return "bad " + f.key + ": only AssignSet"
			}
			if f.bits < 64 && (a.Value < -(1<<f.bits-1) || a.Value > 1<<f.bits-1) {
				return "bad " + f.key + " " + strconv.FormatInt(a.Value, 10) + ": want +N or -N with N below 2^" + strconv.Itoa(int(f.bits))
			}
		default:
			return "bad " + f.key + ": unknown mode " + strconv.Itoa(int(a.Mode))
		}
	}
	if r.Fix > FixNone {
		return "unknown fix mode " + strconv.Itoa(int(r.Fix))
	}
	return ""
}

// appendExtra prints the extra fields and fix=none.
func (r *Rule) appendExtra(b []byte) []byte {
	for i := range extraFields {
		f := &extraFields[i]
		a := *f.get(r)
		switch {
		case a.Mode == AssignNone:
		case f.key == "set-ecn":
			b = append(append(b, " set-ecn="...), ecnNames[a.Value&3]...)
		default:
			b = append(append(append(b, ' '), f.key...), '=')
			v := uint64(a.Value)
			if a.Mode == AssignAdd {
				b = append(b, '+')
				if a.Value < 0 {
					b[len(b)-1] = '-'
					v = uint64(-a.Value)
				}
			}
			if f.hex {
				b = strconv.AppendUint(append(b, "0x"...), v, 16)
			} else {
				b = strconv.AppendUint(b, v, 10)
			}
		}
	}
	if r.Fix == FixNone {
		b = append(b, " fix=none"...)
	}
	return b
}

// extraApplies reports whether the frame carries every extra field the
// rule assigns: set-rkey= and set-va= need a RETH or an AtomicETH,
// set-dmalen= a RETH, set-qkey= a DETH, set-imm= immediate data.
func (r *Rule) extraApplies(pkt *wire.Packet) bool {
	if (r.SetRKey.Mode != AssignNone || r.SetVA.Mode != AssignNone) && pkt.RETH == nil && pkt.AtomicETH == nil {
		return false
	}
	if r.SetDMALen.Mode != AssignNone && pkt.RETH == nil {
		return false
	}
	if r.SetQKey.Mode != AssignNone && pkt.DETH == nil {
		return false
	}
	return r.SetImm.Mode == AssignNone || pkt.ImmDt != nil
}

// assign32 applies a to the big-endian 32-bit field at b.
func assign32(b []byte, a Assign) {
	switch a.Mode {
	case AssignSet:
		binary.BigEndian.PutUint32(b, uint32(a.Value))
	case AssignAdd:
		binary.BigEndian.PutUint32(b, binary.BigEndian.Uint32(b)+uint32(a.Value))
	}
}

// rewriteExtra applies the extra fields to the frame in place.
func (r *Rule) rewriteExtra(pkt *wire.Packet) {
	bth := pkt.BTH
	switch r.SetQP.Mode {
	case AssignSet:
		bth.SetDestQP(uint32(r.SetQP.Value))
	case AssignAdd:
		bth.SetDestQP((bth.DestQP() + uint32(r.SetQP.Value)) & wire.PSNMask)
	}
	// RETH: VA bytes 0-7, R_Key 8-11, DMA length 12-15 (§9.3.3.3);
	// AtomicETH: VA 0-7, R_Key 8-11 (§9.3.3.4).
	va, rkey := []byte(pkt.RETH), []byte(pkt.RETH)
	if pkt.RETH == nil {
		va, rkey = pkt.AtomicETH, pkt.AtomicETH
	}
	if r.SetVA.Mode != AssignNone {
		v := uint64(r.SetVA.Value)
		if r.SetVA.Mode == AssignAdd {
			v += binary.BigEndian.Uint64(va)
		}
		binary.BigEndian.PutUint64(va, v)
	}
	if r.SetRKey.Mode != AssignNone {
		assign32(rkey[8:], r.SetRKey)
	}
	if r.SetDMALen.Mode != AssignNone {
		assign32(pkt.RETH[12:], r.SetDMALen)
	}
	if r.SetQKey.Mode != AssignNone {
		assign32(pkt.DETH[0:], r.SetQKey) // Q_Key: DETH bytes 0-3 (§9.3.2)
	}
	if r.SetImm.Mode != AssignNone {
		assign32(pkt.ImmDt, r.SetImm)
	}
	if r.SetPad.Mode == AssignSet {
		// PadCnt: BTH byte 1, bits 5-4 (§9.2: SE, M, PadCnt, TVer).
		bth[1] = bth[1]&^0x30 | byte(r.SetPad.Value)<<4
	}
	if r.SetECN.Mode == AssignSet {
		// ECN: the two low bits of the IPv4 TOS byte or of the IPv6
		// traffic class (RFC 3168 §5), which the ICRC masks (A17.3.3).
		if pkt.IPv4 != nil {
			pkt.IPv4[1] = pkt.IPv4[1]&^3 | byte(r.SetECN.Value)
		} else {
			pkt.IPv6[1] = pkt.IPv6[1]&^0x30 | byte(r.SetECN.Value)<<4
		}
	}
}

// fix recomputes, over frame (the frame as it now is, a truncated one
// too), the IP and UDP lengths, the IPv4 header checksum, the ICRC and a
// non-zero UDP checksum. pkt is the frame's decoding before the change;
// scratch decodes the result. A frame cut into its headers keeps what
// cannot be recomputed.
func fix(frame []byte, pkt, scratch *wire.Packet) {
	ipLen := len(frame) - wire.EthernetLen - len(pkt.Trailer)
	if ipLen <= 0 {
		return
	}
	var hdr int
	if pkt.IPv4 != nil {
		hdr = pkt.IPv4.HeaderLen()
		binary.BigEndian.PutUint16(pkt.IPv4[2:], uint16(ipLen))
		pkt.IPv4.SetChecksum()
	} else {
		hdr = len(pkt.IPv6)
		binary.BigEndian.PutUint16(pkt.IPv6[4:], uint16(ipLen-hdr))
	}
	if ipLen-hdr < wire.UDPLen {
		return
	}
	binary.BigEndian.PutUint16(pkt.UDP[4:], uint16(ipLen-hdr))
	if scratch.DecodeHeaders(frame) == nil || scratch.StrayPayload() {
		scratch.UpdateICRC()
	}
}
