package wire

import (
	"encoding/binary"
	"net/netip"
)

// Decoding, in order (each step returns its error and leaves the views of
// the earlier steps in place, so a caller can still trace what it got):
//
//  1. Ethernet: 14 bytes, EtherType IPv4 or IPv6, else ErrNotRoCE.
//  2. IP: version and header length (ErrIPHeader); IPv4 checksum
//     (ErrIPChecksum); not a fragment (ErrFragment); protocol UDP (ErrNotRoCE);
//     the datagram fits in the frame (ErrTruncated) and holds a UDP header
//     (ErrLength). Bytes after the datagram are the Trailer.
//  3. UDP: destination 4791 (ErrNotRoCE); length equal to the IP payload
//     length (ErrLength).
//  4. BTH: opcode known (ErrUnknownOpcode); TVer 0 (ErrHeaderVersion).
//  5. Extension headers as the opcode table says (ErrTruncated), then
//     payload, pad and ICRC: the transport length is a multiple of 4 and
//     the pad count fits (ErrPad); no payload on an opcode that has none
//     (ErrLength, but the view is complete, Payload included, and Decode
//     still checks the ICRC: see StrayPayload).
//  6. ICRC (ErrICRC), unless DecodeHeaders was called.

// Packet is a reusable, zero-copy view of a decoded RoCE v2 frame. Every
// slice points into the frame passed to Decode; a header the opcode does
// not carry is nil. Decode resets the view, so one Packet serves any number
// of frames without allocating.
type Packet struct {
	Raw  []byte // the whole frame
	Eth  Ethernet
	IPv4 IPv4 // nil for IPv6
	IPv6 IPv6 // nil for IPv4
	UDP  UDP

	BTH          BTH
	DETH         DETH
	RETH         RETH
	AtomicETH    AtomicETH
	AETH         AETH
	AtomicAckETH AtomicAckETH
	ImmDt        ImmDt
	IETH         IETH

	Payload []byte
	Pad     []byte
	ICRC    []byte // the 4 ICRC bytes as carried
	Trailer []byte // bytes after the IP datagram

	// Info describes the opcode; nil until the BTH has been decoded.
	Info *OpInfo

	icrcOff int // offset of the ICRC in Raw (IP header starts at EthernetLen)
}

// Decode parses frame and verifies its ICRC. On ErrICRC the view is
// complete, so a caller can still show the packet. So it is on ErrLength
// when StrayPayload reports true: the frame is whole, its ICRC verifies,
// and only its payload is one the opcode does not carry.
func (p *Packet) Decode(frame []byte) error {
	err := p.DecodeHeaders(frame)
	if err != nil && !p.StrayPayload() {
		return err
	}
	if !p.ICRCValid() {
		return ErrICRC
	}
	return err
}

// StrayPayload reports whether the last decode found everything in order
// but a payload on an opcode that carries none (a READ request or an
// atomic with data after its headers, an ACK with bytes after its AETH).
// The decoder calls that a length error (ErrLength), as the IBTA does
// (vol. 1 §9.9.3: "payload length not consistent with the opcode"); a
// receiver may still act on the packet, as rxe's responder does, which
// never looks at a READ request's length.
func (p *Packet) StrayPayload() bool {
	return p.Info != nil && p.ICRC != nil && p.Info.Headers&HasPayload == 0 && len(p.Payload)+len(p.Pad) > 0
}

// DecodeHeaders parses frame like Decode but does not check the ICRC
// (for taps and fault matching, which look at frames without receiving them).
func (p *Packet) DecodeHeaders(frame []byte) error {
	// Every field is written exactly once on the way to success; an error
	// clears the fields of the steps not reached (fail). That is cheaper
	// than zeroing the whole view up front, which costs about 5% of a
	// 4 KiB decode.
	p.Raw = frame
	if len(frame) < EthernetLen {
		return p.fail(stepNone, ErrTruncated)
	}
	p.Eth = Ethernet(frame[:EthernetLen])
	rest := frame[EthernetLen:]
	var l4 []byte // the IP payload
	switch p.Eth.EtherType() {
	case EtherTypeIPv4:
		p.IPv6 = nil
		if len(rest) < IPv4MinLen {
			return p.fail(stepEth, ErrTruncated)
		}
		h := IPv4(rest)
		hl := h.HeaderLen()
		if rest[0]>>4 != 4 || hl < IPv4MinLen {
			return p.fail(stepEth, ErrIPHeader)
		}
		if len(rest) < hl {
			return p.fail(stepEth, ErrTruncated)
		}
		p.IPv4 = h[:hl]
		if !p.IPv4.checksumOK() {
			return p.fail(stepIP, ErrIPChecksum)
		}
		if p.IPv4.FragmentOffset() != 0 || p.IPv4.Flags()&ipv4FlagMF != 0 {
			return p.fail(stepIP, ErrFragment)
		}
		if p.IPv4.Protocol() != ProtocolUDP {
			return p.fail(stepIP, ErrNotRoCE)
		}
		tl := int(h.TotalLength())
		if tl > len(rest) {
			return p.fail(stepIP, ErrTruncated)
		}
		if tl < hl+UDPLen {
			return p.fail(stepIP, ErrLength)
		}
		l4 = rest[hl:tl]
		p.Trailer = rest[tl:]
	case EtherTypeIPv6:
		p.IPv4 = nil
		if len(rest) < IPv6Len {
			return p.fail(stepEth, ErrTruncated)
		}
		if rest[0]>>4 != 6 {
			return p.fail(stepEth, ErrIPHeader)
		}
		p.IPv6 = IPv6(rest[:IPv6Len])
		if p.IPv6.NextHeader() != ProtocolUDP {
			return p.fail(stepIP, ErrNotRoCE)
		}
		pl := int(p.IPv6.PayloadLength())
		if IPv6Len+pl > len(rest) {
			return p.fail(stepIP, ErrTruncated)
		}
		if pl < UDPLen {
			return p.fail(stepIP, ErrLength)
		}
		l4 = rest[IPv6Len : IPv6Len+pl]
		p.Trailer = rest[IPv6Len+pl:]
	default:
		return p.fail(stepEth, ErrNotRoCE)
	}

	p.UDP = UDP(l4[:UDPLen])
	if p.UDP.DstPort() != UDPPortRoCEv2 {
		return p.fail(stepUDP, ErrNotRoCE)
	}
	if int(p.UDP.Length()) != len(l4) {
		return p.fail(stepUDP, ErrLength)
	}
	t := l4[UDPLen:] // BTH through ICRC
	if len(t) < BTHLen+ICRCLen {
		return p.fail(stepUDP, ErrTruncated)
	}
	p.BTH = BTH(t[:BTHLen])
	info := p.BTH.Opcode().Info()
	if !info.Valid {
		return p.fail(stepUDP, ErrUnknownOpcode)
	}
	p.Info = info
	if p.BTH.TVer() != 0 {
		return p.fail(stepBTH, ErrHeaderVersion)
	}
	if len(t) < BTHLen+info.HdrLen+ICRCLen {
		return p.fail(stepBTH, ErrTruncated)
	}
	off := BTHLen
	h := info.Headers
	p.DETH = ext(t, &off, DETHLen, h&HasDETH != 0)
	p.RETH = ext(t, &off, RETHLen, h&HasRETH != 0)
	p.AtomicETH = ext(t, &off, AtomicETHLen, h&HasAtomicETH != 0)
	p.AETH = ext(t, &off, AETHLen, h&HasAETH != 0)
	p.AtomicAckETH = ext(t, &off, AtomicAckETHLen, h&HasAtomicAckETH != 0)
	p.ImmDt = ext(t, &off, ImmDtLen, h&HasImmDt != 0)
	p.IETH = ext(t, &off, IETHLen, h&HasIETH != 0)
	icrcOff := len(t) - ICRCLen
	p.ICRC = t[icrcOff:]
	p.icrcOff = len(frame) - len(p.Trailer) - ICRCLen
	body := t[off:icrcOff] // payload and pad
	pad := int(p.BTH.PadCount())
	if len(body)%4 != 0 || pad > len(body) {
		return p.fail(stepExt, ErrPad)
	}
	p.Payload = body[:len(body)-pad]
	p.Pad = body[len(body)-pad:]
	if len(body) > 0 && h&HasPayload == 0 {
		return ErrLength // the view stays complete: see StrayPayload
	}
	return nil
}

// ext returns the n bytes of t at *off and advances *off past them if the
// opcode carries the header, else nil (the caller checked the length).
func ext(t []byte, off *int, n int, present bool) []byte {
	if !present {
		return nil
	}
	b := t[*off : *off+n]
	*off += n
	return b
}

// step is how far DecodeHeaders got; fail clears the views of later steps.
type step uint8

const (
	stepNone step = iota // nothing decoded
	stepEth              // Eth valid
	stepIP               // + IPv4 or IPv6, Trailer
	stepUDP              // + UDP
	stepBTH              // + BTH, Info
	stepExt              // + extension headers, ICRC (payload and pad not split)
)

// fail clears every view the decode did not reach and returns err.
func (p *Packet) fail(reached step, err *Error) error {
	if reached < stepEth {
		p.Eth = nil
	}
	if reached < stepIP {
		p.IPv4, p.IPv6, p.Trailer = nil, nil, nil
	}
	if reached < stepUDP {
		p.UDP = nil
	}
	if reached < stepBTH {
		p.BTH, p.Info = nil, nil
	}
	if reached < stepExt {
		p.DETH, p.RETH, p.AtomicETH, p.AETH = nil, nil, nil, nil
		p.AtomicAckETH, p.ImmDt, p.IETH, p.ICRC = nil, nil, nil, nil
		p.icrcOff = 0
	}
	p.Payload, p.Pad = nil, nil
	return err
}

// ipHeader returns the whole IP header.
func (p *Packet) ipHeader() ([]byte, bool) {
	if p.IPv6 != nil {
		return p.IPv6, true
	}
	return p.IPv4, false
}

// ComputeICRC returns the ICRC the packet should carry. The packet must
// have been decoded without a structural error.
func (p *Packet) ComputeICRC() uint32 {
	ip, v6 := p.ipHeader()
	return icrc(p.Raw[EthernetLen:p.icrcOff], len(ip), v6)
}

// ICRCValid reports whether the carried ICRC matches the computed one.
func (p *Packet) ICRCValid() bool { return getICRC(p.ICRC) == p.ComputeICRC() }

// ICRCValue returns the carried ICRC as the CRC-32 value (the wire carries
// it least-significant byte first; Wireshark's infiniband.invariant.crc
// reads the same bytes big-endian, so it shows this value byte-swapped).
func (p *Packet) ICRCValue() uint32 { return getICRC(p.ICRC) }

// UpdateICRC recomputes the ICRC and writes it into the frame, after a
// field has been rewritten in place (fault injection). A non-zero UDP
// checksum covers the ICRC too, so it is recomputed as well; a zero one
// (no checksum, as rxe sends over IPv4) stays zero.
func (p *Packet) UpdateICRC() { p.UpdateICRCWithError(0) }

// ICRCError returns the carried ICRC XOR the computed one: zero when the
// ICRC verifies. The CRC is linear, so this error stays the same
// whatever covered field is rewritten afterwards (UpdateICRCWithError).
func (p *Packet) ICRCError() uint32 { return p.ICRCValue() ^ p.ComputeICRC() }

// UpdateICRCWithError is UpdateICRC keeping an error the ICRC carried
// (ICRCError before the rewrite): a forwarder that rewrites addresses
// (rocesim switch between UDP endpoints) must not repair a frame whose
// ICRC was bad, nor break one whose ICRC was good.
func (p *Packet) UpdateICRCWithError(icrcErr uint32) {
	putICRC(p.ICRC, p.ComputeICRC()^icrcErr)
	if p.UDP.Checksum() != 0 {
		end := p.icrcOff + ICRCLen
		start := end - int(p.UDP.Length())
		p.UDP[6], p.UDP[7] = 0, 0
		binary.BigEndian.PutUint16(p.UDP[6:], udpChecksum(p.Src(), p.Dst(), p.Raw[start:end]))
	}
}

// UDPChecksumValid reports whether the UDP checksum verifies; a zero
// checksum means "none" and is valid (RoCE v2 receivers ignore the UDP
// checksum either way, Annex A17.4.1, so Decode does not check it).
func (p *Packet) UDPChecksumValid() bool {
	c := p.UDP.Checksum()
	if c == 0 {
		return true
	}
	end := p.icrcOff + ICRCLen
	start := end - int(p.UDP.Length())
	return ^fold(sum16(pseudoSum(p.Src(), p.Dst(), end-start), p.Raw[start:end])) == 0
}

// Src returns the IP source address.
func (p *Packet) Src() netip.Addr {
	if p.IPv6 != nil {
		return p.IPv6.Src()
	}
	return p.IPv4.Src()
}

// Dst returns the IP destination address.
func (p *Packet) Dst() netip.Addr {
	if p.IPv6 != nil {
		return p.IPv6.Dst()
	}
	return p.IPv4.Dst()
}

// Frame fills f with every field of the decoded packet, so that Encode(f)
// reproduces the frame byte for byte. Slices in f alias the packet's frame.
func (p *Packet) Frame(f *Frame) {
	*f = Frame{
		DstMAC:      p.Eth.Dst(),
		SrcMAC:      p.Eth.Src(),
		Src:         p.Src(),
		Dst:         p.Dst(),
		SrcPort:     p.UDP.SrcPort(),
		UDPChecksum: p.UDP.Checksum(),
		BTH:         p.BTH.Fields(),
		Payload:     p.Payload,
		Trailer:     p.Trailer,
	}
	if p.IPv6 != nil {
		f.TOS = p.IPv6.TrafficClass()
		f.FlowLabel = p.IPv6.FlowLabel()
		f.TTL = p.IPv6.HopLimit()
	} else {
		f.TOS = p.IPv4.TOS()
		f.TTL = p.IPv4.TTL()
		f.IPID = p.IPv4.ID()
		f.IPFlags = p.IPv4.Flags()
		f.IPOptions = p.IPv4.Options()
	}
	copy(f.PadBytes[:], p.Pad)
	if p.DETH != nil {
		f.DETH = p.DETH.Fields()
	}
	if p.RETH != nil {
		f.RETH = p.RETH.Fields()
	}
	if p.AtomicETH != nil {
		f.AtomicETH = p.AtomicETH.Fields()
	}
	if p.AETH != nil {
		f.AETH = p.AETH.Fields()
	}
	if p.AtomicAckETH != nil {
		f.AtomicAckETH = p.AtomicAckETH.OrigRemoteData()
	}
	if p.ImmDt != nil {
		f.ImmDt = p.ImmDt.Value()
	}
	if p.IETH != nil {
		f.IETH = binary.BigEndian.Uint32(p.IETH)
	}
}
