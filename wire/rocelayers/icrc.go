package rocelayers

import "github.com/rocesim/rocesim/wire"

// FixICRC computes the ICRC of frame, a complete serialized RoCE v2
// Ethernet frame, and writes it in place. A layer cannot do this while
// serializing: the ICRC covers the IP and UDP headers (Annex A17.8), which
// are prepended after the BTH.
//
// The UDP checksum covers the ICRC, so if the frame carries one (non-zero,
// as gopacket's UDP layer writes with opts.ComputeChecksums) it is
// recomputed afterwards; a zero checksum (rxe's choice over IPv4) stays
// zero (wire.Packet.UpdateICRC does both).
//
// The frame must decode as wire.Packet.DecodeHeaders sees it, IPv4 header
// checksum included (serialize with opts.ComputeChecksums); otherwise
// FixICRC returns that error and leaves frame unchanged.
func FixICRC(frame []byte) error {
	var p wire.Packet
	if err := p.DecodeHeaders(frame); err != nil {
		return err
	}
	p.UpdateICRC()
	return nil
}
