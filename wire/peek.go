package wire

// Peeking, for an observer that sees every frame and needs three fields
// of it (verbs' stall watch: the opcode, the destination QP and PSN, an
// ACK's syndrome):
//
//  1. The same checks as DecodeHeaders, in its order, so Peek accepts a
//     frame exactly when DecodeHeaders returns nil (a frame a fault plan
//     corrupted, truncated or rewrote is refused by both alike;
//     TestPeekAgreesWithDecodeHeaders holds this).
//  2. No Packet is filled: the BTH and the AETH are found at their
//     offsets and returned as views; nothing else is kept.

// Peek reads a RoCE v2 frame's BTH, its opcode's description and its
// AETH (nil if the opcode carries none) without decoding the rest. ok is
// false, and the views nil, for any frame DecodeHeaders refuses.
func Peek(frame []byte) (bth BTH, info *OpInfo, aeth AETH, ok bool) {
	if len(frame) < EthernetLen {
		return nil, nil, nil, false
	}
	rest := frame[EthernetLen:]
	var l4 []byte // the IP payload
	switch Ethernet(frame).EtherType() {
	case EtherTypeIPv4:
		if len(rest) < IPv4MinLen {
			return nil, nil, nil, false
		}
		h := IPv4(rest)
		hl := h.HeaderLen()
		if rest[0]>>4 != 4 || hl < IPv4MinLen || len(rest) < hl || ipChecksum(rest[:hl]) != 0 ||
			h.FragmentOffset() != 0 || h.Flags()&ipv4FlagMF != 0 || h.Protocol() != ProtocolUDP {
			return nil, nil, nil, false
		}
		tl := int(h.TotalLength())
		if tl > len(rest) || tl < hl+UDPLen {
			return nil, nil, nil, false
		}
		l4 = rest[hl:tl]
	case EtherTypeIPv6:
		if len(rest) < IPv6Len || rest[0]>>4 != 6 || IPv6(rest).NextHeader() != ProtocolUDP {
			return nil, nil, nil, false
		}
		pl := int(IPv6(rest).PayloadLength())
		if IPv6Len+pl > len(rest) || pl < UDPLen {
			return nil, nil, nil, false
		}
		l4 = rest[IPv6Len : IPv6Len+pl]
	default:
		return nil, nil, nil, false
	}
	u := UDP(l4)
	if u.DstPort() != UDPPortRoCEv2 || int(u.Length()) != len(l4) {
		return nil, nil, nil, false
	}
	t := l4[UDPLen:] // BTH through ICRC
	if len(t) < BTHLen+ICRCLen {
		return nil, nil, nil, false
	}
	b := BTH(t[:BTHLen])
	info = b.Opcode().Info()
	if !info.Valid || b.TVer() != 0 || len(t) < BTHLen+info.HdrLen+ICRCLen {
		return nil, nil, nil, false
	}
	body := len(t) - ICRCLen - BTHLen - info.HdrLen // payload and pad
	if body%4 != 0 || int(b.PadCount()) > body || body > 0 && info.Headers&HasPayload == 0 {
		return nil, nil, nil, false
	}
	if info.Headers&HasAETH != 0 {
		// The AETH follows the DETH, RETH and AtomicETH of the opcodes
		// that carry them (IBTA §9.2: the order DecodeHeaders reads).
		off := BTHLen
		if info.Headers&HasDETH != 0 {
			off += DETHLen
		}
		if info.Headers&HasRETH != 0 {
			off += RETHLen
		}
		if info.Headers&HasAtomicETH != 0 {
			off += AtomicETHLen
		}
		aeth = AETH(t[off : off+AETHLen])
	}
	return b, info, aeth, true
}
