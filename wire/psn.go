package wire

import "strconv"

// PSN is a 24-bit packet sequence number (IBTA vol. 1 §9.7.1). PSNs wrap at
// 2^24; compare them only through these methods, never with < on the raw
// integer.
type PSN uint32

// PSNMask keeps the 24 significant bits of a PSN.
const PSNMask = 1<<24 - 1

// Add returns p advanced by n, modulo 2^24.
func (p PSN) Add(n uint32) PSN { return PSN((uint32(p) + n) & PSNMask) }

// Next returns p+1 modulo 2^24.
func (p PSN) Next() PSN { return p.Add(1) }

// Sub returns p moved back by n, modulo 2^24.
func (p PSN) Sub(n uint32) PSN { return PSN((uint32(p) - n) & PSNMask) }

// Diff returns the signed distance p - q in the 24-bit sequence space, in
// [-2^23, 2^23). A positive result means p is after q.
func (p PSN) Diff(q PSN) int32 { return int32((uint32(p)-uint32(q))<<8) >> 8 }

// Less reports whether p comes before q.
func (p PSN) Less(q PSN) bool { return p.Diff(q) < 0 }

// LessEq reports whether p comes before q or equals it.
func (p PSN) LessEq(q PSN) bool { return p.Diff(q) <= 0 }

// InRange reports whether p lies in the closed window [first, last], where
// last is at most 2^23-1 after first.
func (p PSN) InRange(first, last PSN) bool {
	d := p.Diff(first)
	return d >= 0 && d <= last.Diff(first)
}

// Valid reports whether p fits in 24 bits.
func (p PSN) Valid() bool { return p <= PSNMask }

// String formats the PSN in decimal, as Wireshark shows it.
func (p PSN) String() string { return strconv.FormatUint(uint64(p), 10) }
