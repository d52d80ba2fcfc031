package wire

import (
	"encoding/binary"
	"strconv"
	"time"
)

// AETH is a byte view of an ACK Extended Transport Header (IBTA §9.3.4,
// 4 bytes): an 8-bit syndrome and a 24-bit MSN. It rides on ACKs, atomic
// ACKs and the first, last and only RDMA READ responses.
type AETH []byte

// AETHFields holds an AETH's fields.
type AETHFields struct {
	Syndrome Syndrome
	MSN      uint32 // 24 bits
}

// Syndrome returns the syndrome byte.
func (a AETH) Syndrome() Syndrome { return Syndrome(a[0]) }

// MSN returns the 24-bit message sequence number.
func (a AETH) MSN() uint32 { return get24(a[1:]) }

// SetSyndrome rewrites the syndrome (the ICRC must be recomputed).
func (a AETH) SetSyndrome(s Syndrome) { a[0] = byte(s) }

// SetMSN rewrites the MSN (the ICRC must be recomputed).
func (a AETH) SetMSN(msn uint32) { put24(a[1:], msn) }

// Fields returns all fields.
func (a AETH) Fields() AETHFields { return AETHFields{a.Syndrome(), a.MSN()} }

// Encode writes f into a.
func (a AETH) Encode(f *AETHFields) {
	binary.BigEndian.PutUint32(a, f.MSN&0xFFFFFF)
	a[0] = byte(f.Syndrome)
}

// Syndrome is the AETH syndrome byte (IBTA §9.7.5.2.1, table 43): bit 7
// reserved, bits 6:5 the type, bits 4:0 a credit count, RNR timer code or
// NAK code.
type Syndrome uint8

// SyndromeType is bits 6:5 of a syndrome.
type SyndromeType uint8

// Syndrome types.
const (
	SyndromeACK      SyndromeType = 0
	SyndromeRNRNAK   SyndromeType = 1
	SyndromeReserved SyndromeType = 2
	SyndromeNAK      SyndromeType = 3
)

// NAKCode is the low five bits of a NAK syndrome.
type NAKCode uint8

// NAK codes (IBTA table 43).
const (
	NAKPSNSequenceError NAKCode = 0
	NAKInvalidRequest   NAKCode = 1
	NAKRemoteAccess     NAKCode = 2
	NAKRemoteOperation  NAKCode = 3
	NAKInvalidRDRequest NAKCode = 4
)

var nakNames = [...]string{"PSN sequence error", "invalid request", "remote access error", "remote operational error", "invalid RD request"}

// String returns the name of the NAKCode, for traces and messages.
func (c NAKCode) String() string {
	if int(c) < len(nakNames) {
		return nakNames[c]
	}
	return "reserved code " + strconv.Itoa(int(c))
}

// CreditsUnlimited is the ACK credit code meaning "no end-to-end flow
// control"; rxe always sends it.
const CreditsUnlimited = 0x1F

// ACKSyndrome returns the syndrome of a positive ACK with the given credit code.
func ACKSyndrome(credits uint8) Syndrome { return Syndrome(credits & 0x1F) }

// RNRNAKSyndrome returns the syndrome of an RNR NAK with the given timer code.
func RNRNAKSyndrome(timerCode uint8) Syndrome { return Syndrome(0x20 | timerCode&0x1F) }

// NAKSyndrome returns the syndrome of a NAK with the given code.
func NAKSyndrome(c NAKCode) Syndrome { return Syndrome(0x60 | uint8(c)&0x1F) }

// Type returns bits 6:5.
func (s Syndrome) Type() SyndromeType { return SyndromeType(s>>5) & 3 }

// Value returns the low five bits (credit count, RNR timer code or NAK code).
func (s Syndrome) Value() uint8 { return uint8(s) & 0x1F }

// IsACK reports a positive acknowledgement.
func (s Syndrome) IsACK() bool { return s.Type() == SyndromeACK }

// IsRNRNAK reports a receiver-not-ready NAK.
func (s Syndrome) IsRNRNAK() bool { return s.Type() == SyndromeRNRNAK }

// IsNAK reports a (non-RNR) NAK.
func (s Syndrome) IsNAK() bool { return s.Type() == SyndromeNAK }

// NAKCode returns the NAK code of a NAK syndrome.
func (s Syndrome) NAKCode() NAKCode { return NAKCode(s.Value()) }

// RNRTimerCode returns the encoded RNR timer of an RNR NAK syndrome.
func (s Syndrome) RNRTimerCode() uint8 { return s.Value() }

// String decodes the syndrome as inspect and traces show it: "ACK",
// "ACK(credits=5)", "RNR-NAK(timer=12: 0.64 ms)", "NAK(PSN sequence error)".
func (s Syndrome) String() string {
	switch s.Type() {
	case SyndromeACK:
		if s.Value() == CreditsUnlimited {
			return "ACK"
		}
		return "ACK(credits=" + strconv.Itoa(int(s.Value())) + ")"
	case SyndromeRNRNAK:
		d := RNRDelay(s.Value())
		return "RNR-NAK(timer=" + strconv.Itoa(int(s.Value())) + ": " +
			strconv.FormatFloat(float64(d)/float64(time.Millisecond), 'f', -1, 64) + " ms)"
	case SyndromeNAK:
		return "NAK(" + s.NAKCode().String() + ")"
	}
	return "RESERVED(0x" + strconv.FormatUint(uint64(s)|0x100, 16)[1:] + ")"
}

// rnrDelayMicros is IBTA table 45: the minimum RNR NAK delay for each
// 5-bit timer code, in microseconds. Code 0 is the longest.
var rnrDelayMicros = [32]uint32{
	655360, 10, 20, 30, 40, 60, 80, 120, 160, 240, 320, 480, 640, 960, 1280, 1920,
	2560, 3840, 5120, 7680, 10240, 15360, 20480, 30720, 40960, 61440, 81920, 122880,
	163840, 245760, 327680, 491520,
}

// RNRDelay decodes an RNR timer code (IBTA table 45). Only the low five
// bits of code are used.
func RNRDelay(code uint8) time.Duration {
	return time.Duration(rnrDelayMicros[code&0x1F]) * time.Microsecond
}
