package rocelayers

import (
	"encoding/binary"

	"github.com/gopacket/gopacket"
	"github.com/gopacket/gopacket/layers"

	"github.com/rocesim/rocesim/wire"
)

// BTH decoding, in order (the same checks as wire.Packet, steps 4–5):
//
//  1. Room for a BTH and an ICRC (wire.ErrTruncated).
//  2. Opcode known (wire.ErrUnknownOpcode), TVer 0 (wire.ErrHeaderVersion).
//  3. Room for the extension headers the opcode calls for (wire.ErrTruncated).
//  4. The bytes between them and the ICRC are a multiple of 4 that holds
//     the pad (wire.ErrPad), and are empty if the opcode has no payload
//     (wire.ErrLength).
//  5. Fields, pad and ICRC recorded; Payload is the extension headers and
//     the payload, which the following layers take apart.

// BTH is the Base Transport Header layer (IBTA vol. 1 §9.2, 12 bytes). It
// decodes the whole UDP payload: the BTH is its Contents, the pad and the
// ICRC that end every transport packet are kept in Pad and ICRC, and its
// Payload is what lies between (extension headers, then payload).
//
// The fields are wire.BTHFields, embedded, so bth.Opcode, bth.PSN,
// bth.DestQP... read as in package wire.
type BTH struct {
	layers.BaseLayer
	wire.BTHFields
	// Pad holds the PadCount pad bytes as carried (zero from a conforming
	// sender). SerializeTo writes them back, zero-filled if Pad is short.
	Pad []byte
	// ICRC is the invariant CRC (Annex A17.8) as the CRC-32 value. The
	// wire carries it least-significant byte first, so this is the last
	// four bytes read little-endian, like wire.Packet.ICRCValue.
	// Wireshark's infiniband.invariant.crc reads those bytes big-endian and
	// so shows this value byte-swapped.
	ICRC uint32
}

// LayerType returns LayerTypeBTH.
func (b *BTH) LayerType() gopacket.LayerType { return LayerTypeBTH }

// CanDecode returns LayerTypeBTH.
func (b *BTH) CanDecode() gopacket.LayerClass { return LayerTypeBTH }

// NextLayerType returns the first extension header the opcode carries,
// else gopacket.LayerTypePayload, or gopacket.LayerTypeZero if there is no
// payload.
func (b *BTH) NextLayerType() gopacket.LayerType {
	return nextLayer(b.Opcode, 0, len(b.Payload))
}

// DecodeFromBytes decodes a transport packet (the UDP payload: BTH through
// ICRC) in place, without allocating. Errors are package wire's
// sentinels; compare them with errors.Is.
func (b *BTH) DecodeFromBytes(data []byte, df gopacket.DecodeFeedback) error {
	if len(data) < wire.BTHLen+wire.ICRCLen {
		df.SetTruncated()
		return wire.ErrTruncated
	}
	h := wire.BTH(data[:wire.BTHLen])
	info := h.Opcode().Info()
	if !info.Valid {
		return wire.ErrUnknownOpcode
	}
	if h.TVer() != 0 {
		return wire.ErrHeaderVersion
	}
	hdrEnd := wire.BTHLen + info.HdrLen
	icrcOff := len(data) - wire.ICRCLen
	if icrcOff < hdrEnd {
		df.SetTruncated()
		return wire.ErrTruncated
	}
	body := icrcOff - hdrEnd // payload and pad
	pad := int(h.PadCount())
	if body%4 != 0 || pad > body {
		return wire.ErrPad
	}
	if body > 0 && !info.Has(wire.HasPayload) {
		return wire.ErrLength
	}
	padOff := icrcOff - pad
	b.BaseLayer = layers.BaseLayer{Contents: data[:wire.BTHLen], Payload: data[wire.BTHLen:padOff]}
	b.BTHFields = h.Fields()
	b.Pad = data[padOff:icrcOff]
	b.ICRC = binary.LittleEndian.Uint32(data[icrcOff:])
	return nil
}

// SerializeTo prepends the BTH to the extension headers and payload
// already in b, and appends the pad and the ICRC field.
//
// With opts.FixLengths, PadCount is set from the bytes in b (the pad
// rounds the transport packet up to a multiple of 4). The ICRC covers the
// IP and UDP headers, which are not there yet, so SerializeTo writes the
// ICRC field as it stands (a decoded packet re-serializes byte for byte);
// call FixICRC on the finished frame to compute it. SerializeTo does not
// check that the layers after it are the ones the opcode calls for, so
// malformed packets can be built on purpose.
func (b *BTH) SerializeTo(buf gopacket.SerializeBuffer, opts gopacket.SerializeOptions) error {
	if opts.FixLengths {
		b.PadCount = uint8(-len(buf.Bytes()) & 3)
	} else if b.PadCount > 3 {
		return ErrPadCount
	}
	pad := int(b.PadCount)
	tail, err := buf.AppendBytes(pad + wire.ICRCLen)
	if err != nil {
		return err
	}
	clear(tail[:pad])
	copy(tail[:pad], b.Pad)
	binary.LittleEndian.PutUint32(tail[pad:], b.ICRC)
	hdr, err := buf.PrependBytes(wire.BTHLen)
	if err != nil {
		return err
	}
	wire.BTH(hdr).Encode(&b.BTHFields)
	return nil
}
