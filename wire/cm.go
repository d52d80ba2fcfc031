package wire

import (
	"encoding/binary"
	"net/netip"
)

// The CM messages (IBTA vol. 1 §12.6), each the 232-byte data of a CM
// MAD (mad.go). Each has a struct holding every field, reserved ones
// included, so that Decode then Encode gives back the bytes decoded
// (TestCMRoundTrip checks it on every CM frame captured from real rxe).
// Offsets below are from the start of the MAD data; multi-bit fields
// are packed most significant bit first, as the IBTA draws them.

// CMAttr is a CM MAD's attribute ID: which message it carries (IBTA
// vol. 1 Table 112).
type CMAttr uint16

// The CM attribute IDs. LAP and APR (path migration) are named for
// tracing; rxe's kernel rejects a LAP (cm_lap_handler: no alternate path
// on RoCE) and the model does the same.
const (
	CMAttrREQ  CMAttr = 0x0010
	CMAttrMRA  CMAttr = 0x0011
	CMAttrREJ  CMAttr = 0x0012
	CMAttrREP  CMAttr = 0x0013
	CMAttrRTU  CMAttr = 0x0014
	CMAttrDREQ CMAttr = 0x0015
	CMAttrDREP CMAttr = 0x0016
	CMAttrLAP  CMAttr = 0x0019
	CMAttrAPR  CMAttr = 0x001A
)

// String names the message as the IBTA does.
func (a CMAttr) String() string {
	switch a {
	case CMAttrREQ:
		return "REQ"
	case CMAttrMRA:
		return "MRA"
	case CMAttrREJ:
		return "REJ"
	case CMAttrREP:
		return "REP"
	case CMAttrRTU:
		return "RTU"
	case CMAttrDREQ:
		return "DREQ"
	case CMAttrDREP:
		return "DREP"
	case CMAttrLAP:
		return "LAP"
	case CMAttrAPR:
		return "APR"
	case CMAttrSIDRREQ:
		return "SIDR_REQ"
	case CMAttrSIDRREP:
		return "SIDR_REP"
	}
	return "CM(" + hex16(uint16(a)) + ")"
}

func hex16(v uint16) string {
	const digits = "0123456789abcdef"
	return "0x" + string([]byte{digits[v>>12], digits[v>>8&15], digits[v>>4&15], digits[v&15]})
}

// Private data sizes of the CM messages (IBTA §12.6).
const (
	CMREQPrivateLen  = 92
	CMREPPrivateLen  = 196
	CMRTUPrivateLen  = 224
	CMREJPrivateLen  = 148
	CMREJARILen      = 72
	CMDREQPrivateLen = 220
	CMDREPPrivateLen = 224
	CMMRAPrivateLen  = 222
)

// GID is a 128-bit port GID; on RoCE v2 the IPv4-mapped IPv6 address of
// the port (::ffff:a.b.c.d).
type GID [16]byte

// Addr returns the GID as an address (IPv4 for an IPv4-mapped GID).
func (g GID) Addr() netip.Addr { return netip.AddrFrom16(g).Unmap() }

// GIDFromAddr returns the RoCE v2 GID of an address.
func GIDFromAddr(a netip.Addr) GID { return GID(a.As16()) }

// CMPath is one path of a REQ (primary or alternate), 44 bytes.
type CMPath struct {
	LocalLID, RemoteLID uint16 // 0xFFFF on RoCE (permissive LID)
	LocalGID, RemoteGID GID
	FlowLabel           uint32 // 20 bits
	Resv6               uint8
	PacketRate          uint8 // 6 bits
	TrafficClass        uint8
	HopLimit            uint8
	SL                  uint8 // 4 bits
	SubnetLocal         bool
	Resv3a              uint8
	LocalACKTimeout     uint8 // 5 bits: the ACK timeout the CM puts in the QPs
	Resv3b              uint8
}

const cmPathLen = 44

func (p *CMPath) decode(b []byte) {
	_ = b[cmPathLen-1]
	p.LocalLID = binary.BigEndian.Uint16(b[0:])
	p.RemoteLID = binary.BigEndian.Uint16(b[2:])
	copy(p.LocalGID[:], b[4:20])
	copy(p.RemoteGID[:], b[20:36])
	w := binary.BigEndian.Uint32(b[36:])
	p.FlowLabel, p.Resv6, p.PacketRate = w>>12, uint8(w>>6&0x3F), uint8(w&0x3F)
	p.TrafficClass, p.HopLimit = b[40], b[41]
	p.SL, p.SubnetLocal, p.Resv3a = b[42]>>4, b[42]&0x08 != 0, b[42]&7
	p.LocalACKTimeout, p.Resv3b = b[43]>>3, b[43]&7
}

func (p *CMPath) encode(b []byte) {
	_ = b[cmPathLen-1]
	binary.BigEndian.PutUint16(b[0:], p.LocalLID)
	binary.BigEndian.PutUint16(b[2:], p.RemoteLID)
	copy(b[4:20], p.LocalGID[:])
	copy(b[20:36], p.RemoteGID[:])
	binary.BigEndian.PutUint32(b[36:], p.FlowLabel<<12|uint32(p.Resv6&0x3F)<<6|uint32(p.PacketRate&0x3F))
	b[40], b[41] = p.TrafficClass, p.HopLimit
	b[42] = p.SL<<4 | flag(p.SubnetLocal, 0x08) | p.Resv3a&7
	b[43] = p.LocalACKTimeout<<3 | p.Resv3b&7
}

// CMREQ is a Connection Request (IBTA §12.6.5), sent by the active side.
type CMREQ struct {
	LocalCommID             uint32
	Resv32a                 uint32
	ServiceID               uint64 // rdma_cm: 0x0000000001 | port space (0x06 TCP) | port
	LocalCAGUID             uint64
	Resv32b                 uint32
	LocalQKey               uint32 // 0 for RC
	LocalQPN                uint32 // 24 bits
	ResponderResources      uint8
	LocalEECN               uint32 // 24 bits
	InitiatorDepth          uint8
	RemoteEECN              uint32 // 24 bits
	RemoteCMResponseTimeout uint8  // 5 bits, 4.096 µs × 2^n
	TransportServiceType    uint8  // 2 bits: 0 RC, 1 UC
	EndToEndFlowControl     bool
	StartingPSN             PSN
	LocalCMResponseTimeout  uint8 // 5 bits
	RetryCount              uint8 // 3 bits
	PKey                    uint16
	PathMTU                 uint8 // 4 bits, IBV_MTU_* (3 = 1024)
	RDCExists               bool
	RNRRetryCount           uint8 // 3 bits
	MaxCMRetries            uint8 // 4 bits
	SRQ                     bool
	ExtendedTransport       uint8 // 3 bits
	Primary, Alternate      CMPath
	PrivateData             [CMREQPrivateLen]byte
}

// Decode reads a REQ from the MAD data d (232 bytes).
func (r *CMREQ) Decode(d []byte) {
	_ = d[MADDataLen-1]
	r.LocalCommID = binary.BigEndian.Uint32(d[0:])
	r.Resv32a = binary.BigEndian.Uint32(d[4:])
	r.ServiceID = binary.BigEndian.Uint64(d[8:])
	r.LocalCAGUID = binary.BigEndian.Uint64(d[16:])
	r.Resv32b = binary.BigEndian.Uint32(d[24:])
	r.LocalQKey = binary.BigEndian.Uint32(d[28:])
	r.LocalQPN, r.ResponderResources = get24(d[32:]), d[35]
	r.LocalEECN, r.InitiatorDepth = get24(d[36:]), d[39]
	r.RemoteEECN = get24(d[40:])
	r.RemoteCMResponseTimeout, r.TransportServiceType, r.EndToEndFlowControl = d[43]>>3, d[43]>>1&3, d[43]&1 != 0
	r.StartingPSN = PSN(get24(d[44:]))
	r.LocalCMResponseTimeout, r.RetryCount = d[47]>>3, d[47]&7
	r.PKey = binary.BigEndian.Uint16(d[48:])
	r.PathMTU, r.RDCExists, r.RNRRetryCount = d[50]>>4, d[50]&0x08 != 0, d[50]&7
	r.MaxCMRetries, r.SRQ, r.ExtendedTransport = d[51]>>4, d[51]&0x08 != 0, d[51]&7
	r.Primary.decode(d[52:])
	r.Alternate.decode(d[96:])
	copy(r.PrivateData[:], d[140:])
}

// Encode writes the REQ into the MAD data d (232 bytes).
func (r *CMREQ) Encode(d []byte) {
	_ = d[MADDataLen-1]
	binary.BigEndian.PutUint32(d[0:], r.LocalCommID)
	binary.BigEndian.PutUint32(d[4:], r.Resv32a)
	binary.BigEndian.PutUint64(d[8:], r.ServiceID)
	binary.BigEndian.PutUint64(d[16:], r.LocalCAGUID)
	binary.BigEndian.PutUint32(d[24:], r.Resv32b)
	binary.BigEndian.PutUint32(d[28:], r.LocalQKey)
	put24(d[32:], r.LocalQPN)
	d[35] = r.ResponderResources
	put24(d[36:], r.LocalEECN)
	d[39] = r.InitiatorDepth
	put24(d[40:], r.RemoteEECN)
	d[43] = r.RemoteCMResponseTimeout<<3 | (r.TransportServiceType&3)<<1 | flag(r.EndToEndFlowControl, 1)
	put24(d[44:], uint32(r.StartingPSN))
	d[47] = r.LocalCMResponseTimeout<<3 | r.RetryCount&7
	binary.BigEndian.PutUint16(d[48:], r.PKey)
	d[50] = r.PathMTU<<4 | flag(r.RDCExists, 0x08) | r.RNRRetryCount&7
	d[51] = r.MaxCMRetries<<4 | flag(r.SRQ, 0x08) | r.ExtendedTransport&7
	r.Primary.encode(d[52:])
	r.Alternate.encode(d[96:])
	copy(d[140:], r.PrivateData[:])
}

// CMREP is a Connection Reply (IBTA §12.6.8), the passive side's answer.
type CMREP struct {
	LocalCommID, RemoteCommID uint32
	LocalQKey                 uint32
	LocalQPN                  uint32 // 24 bits
	Resv8a                    uint8
	LocalEECN                 uint32 // 24 bits
	Resv8b                    uint8
	StartingPSN               PSN
	Resv8c                    uint8
	ResponderResources        uint8
	InitiatorDepth            uint8
	TargetACKDelay            uint8 // 5 bits
	FailoverAccepted          uint8 // 2 bits
	EndToEndFlowControl       bool
	RNRRetryCount             uint8 // 3 bits
	SRQ                       bool
	Resv4                     uint8
	LocalCAGUID               uint64
	PrivateData               [CMREPPrivateLen]byte
}

// Decode reads a REP from the MAD data d.
func (r *CMREP) Decode(d []byte) {
	_ = d[MADDataLen-1]
	r.LocalCommID = binary.BigEndian.Uint32(d[0:])
	r.RemoteCommID = binary.BigEndian.Uint32(d[4:])
	r.LocalQKey = binary.BigEndian.Uint32(d[8:])
	r.LocalQPN, r.Resv8a = get24(d[12:]), d[15]
	r.LocalEECN, r.Resv8b = get24(d[16:]), d[19]
	r.StartingPSN, r.Resv8c = PSN(get24(d[20:])), d[23]
	r.ResponderResources, r.InitiatorDepth = d[24], d[25]
	r.TargetACKDelay, r.FailoverAccepted, r.EndToEndFlowControl = d[26]>>3, d[26]>>1&3, d[26]&1 != 0
	r.RNRRetryCount, r.SRQ, r.Resv4 = d[27]>>5, d[27]&0x10 != 0, d[27]&0x0F
	r.LocalCAGUID = binary.BigEndian.Uint64(d[28:])
	copy(r.PrivateData[:], d[36:])
}

// Encode writes the REP into the MAD data d.
func (r *CMREP) Encode(d []byte) {
	_ = d[MADDataLen-1]
	binary.BigEndian.PutUint32(d[0:], r.LocalCommID)
	binary.BigEndian.PutUint32(d[4:], r.RemoteCommID)
	binary.BigEndian.PutUint32(d[8:], r.LocalQKey)
	put24(d[12:], r.LocalQPN)
	d[15] = r.Resv8a
	put24(d[16:], r.LocalEECN)
	d[19] = r.Resv8b
	put24(d[20:], uint32(r.StartingPSN))
	d[23] = r.Resv8c
	d[24], d[25] = r.ResponderResources, r.InitiatorDepth
	d[26] = r.TargetACKDelay<<3 | (r.FailoverAccepted&3)<<1 | flag(r.EndToEndFlowControl, 1)
	d[27] = r.RNRRetryCount<<5 | flag(r.SRQ, 0x10) | r.Resv4&0x0F
	binary.BigEndian.PutUint64(d[28:], r.LocalCAGUID)
	copy(d[36:], r.PrivateData[:])
}

// CMRTU is Ready To Use (IBTA §12.6.9), the active side's last word.
type CMRTU struct {
	LocalCommID, RemoteCommID uint32
	PrivateData               [CMRTUPrivateLen]byte
}

// Decode reads an RTU from the MAD data d.
func (r *CMRTU) Decode(d []byte) {
	_ = d[MADDataLen-1]
	r.LocalCommID = binary.BigEndian.Uint32(d[0:])
	r.RemoteCommID = binary.BigEndian.Uint32(d[4:])
	copy(r.PrivateData[:], d[8:])
}

// Encode writes the RTU into the MAD data d.
func (r *CMRTU) Encode(d []byte) {
	_ = d[MADDataLen-1]
	binary.BigEndian.PutUint32(d[0:], r.LocalCommID)
	binary.BigEndian.PutUint32(d[4:], r.RemoteCommID)
	copy(d[8:], r.PrivateData[:])
}

// CMREJReason is a REJ's reason code (IBTA vol. 1 Table 113).
type CMREJReason uint16

// The reasons this model sends or that rxe was seen to send.
const (
	CMREJNoQP              CMREJReason = 1  // no QP available
	CMREJTimeout           CMREJReason = 4  // a CM that gave up waiting (ARI: its GUID)
	CMREJInvalidCommID     CMREJReason = 6  // no connection with that communication ID (stale)
	CMREJInvalidServiceID  CMREJReason = 8  // no listener on the service ID: what rxe's host sent for rping to a closed port
	CMREJConsumerReject    CMREJReason = 28 // the application rejected (rdma_reject)
	CMREJInvalidClassVersn CMREJReason = 31
)

// CMREJ is a Reject (IBTA §12.6.7).
type CMREJ struct {
	LocalCommID, RemoteCommID uint32
	MsgRejected               uint8 // 2 bits: 0 REQ, 1 REP, 2 other
	Resv6                     uint8
	RejectInfoLength          uint8 // 7 bits
	Resv1                     uint8
	Reason                    CMREJReason
	ARI                       [CMREJARILen]byte
	PrivateData               [CMREJPrivateLen]byte
}

// Decode reads a REJ from the MAD data d.
func (r *CMREJ) Decode(d []byte) {
	_ = d[MADDataLen-1]
	r.LocalCommID = binary.BigEndian.Uint32(d[0:])
	r.RemoteCommID = binary.BigEndian.Uint32(d[4:])
	r.MsgRejected, r.Resv6 = d[8]>>6, d[8]&0x3F
	r.RejectInfoLength, r.Resv1 = d[9]>>1, d[9]&1
	r.Reason = CMREJReason(binary.BigEndian.Uint16(d[10:]))
	copy(r.ARI[:], d[12:84])
	copy(r.PrivateData[:], d[84:])
}

// Encode writes the REJ into the MAD data d.
func (r *CMREJ) Encode(d []byte) {
	_ = d[MADDataLen-1]
	binary.BigEndian.PutUint32(d[0:], r.LocalCommID)
	binary.BigEndian.PutUint32(d[4:], r.RemoteCommID)
	d[8] = r.MsgRejected<<6 | r.Resv6&0x3F
	d[9] = r.RejectInfoLength<<1 | r.Resv1&1
	binary.BigEndian.PutUint16(d[10:], uint16(r.Reason))
	copy(d[12:84], r.ARI[:])
	copy(d[84:], r.PrivateData[:])
}

// CMDREQ is a Disconnection Request (IBTA §12.6.10).
type CMDREQ struct {
	LocalCommID, RemoteCommID uint32
	RemoteQPN                 uint32 // 24 bits: the receiver's QPN
	Resv8                     uint8
	PrivateData               [CMDREQPrivateLen]byte
}

// Decode reads a DREQ from the MAD data d.
func (r *CMDREQ) Decode(d []byte) {
	_ = d[MADDataLen-1]
	r.LocalCommID = binary.BigEndian.Uint32(d[0:])
	r.RemoteCommID = binary.BigEndian.Uint32(d[4:])
	r.RemoteQPN, r.Resv8 = get24(d[8:]), d[11]
	copy(r.PrivateData[:], d[12:])
}

// Encode writes the DREQ into the MAD data d.
func (r *CMDREQ) Encode(d []byte) {
	_ = d[MADDataLen-1]
	binary.BigEndian.PutUint32(d[0:], r.LocalCommID)
	binary.BigEndian.PutUint32(d[4:], r.RemoteCommID)
	put24(d[8:], r.RemoteQPN)
	d[11] = r.Resv8
	copy(d[12:], r.PrivateData[:])
}

// CMDREP is a Disconnection Reply (IBTA §12.6.11).
type CMDREP struct {
	LocalCommID, RemoteCommID uint32
	PrivateData               [CMDREPPrivateLen]byte
}

// Decode reads a DREP from the MAD data d.
func (r *CMDREP) Decode(d []byte) {
	_ = d[MADDataLen-1]
	r.LocalCommID = binary.BigEndian.Uint32(d[0:])
	r.RemoteCommID = binary.BigEndian.Uint32(d[4:])
	copy(r.PrivateData[:], d[8:])
}

// Encode writes the DREP into the MAD data d.
func (r *CMDREP) Encode(d []byte) {
	_ = d[MADDataLen-1]
	binary.BigEndian.PutUint32(d[0:], r.LocalCommID)
	binary.BigEndian.PutUint32(d[4:], r.RemoteCommID)
	copy(d[8:], r.PrivateData[:])
}

// CMMRA is a Message Receipt Acknowledgement (IBTA §12.6.6): "I got your
// message, give me longer to answer".
type CMMRA struct {
	LocalCommID, RemoteCommID uint32
	MsgMRAed                  uint8 // 2 bits: 0 REQ, 1 REP, 2 LAP
	Resv6                     uint8
	ServiceTimeout            uint8 // 5 bits
	Resv3                     uint8
	PrivateData               [CMMRAPrivateLen]byte
}

// Decode reads an MRA from the MAD data d.
func (r *CMMRA) Decode(d []byte) {
	_ = d[MADDataLen-1]
	r.LocalCommID = binary.BigEndian.Uint32(d[0:])
	r.RemoteCommID = binary.BigEndian.Uint32(d[4:])
	r.MsgMRAed, r.Resv6 = d[8]>>6, d[8]&0x3F
	r.ServiceTimeout, r.Resv3 = d[9]>>3, d[9]&7
	copy(r.PrivateData[:], d[10:])
}

// Encode writes the MRA into the MAD data d.
func (r *CMMRA) Encode(d []byte) {
	_ = d[MADDataLen-1]
	binary.BigEndian.PutUint32(d[0:], r.LocalCommID)
	binary.BigEndian.PutUint32(d[4:], r.RemoteCommID)
	d[8] = r.MsgMRAed<<6 | r.Resv6&0x3F
	d[9] = r.ServiceTimeout<<3 | r.Resv3&7
	copy(d[10:], r.PrivateData[:])
}

// The IP-based CM private data (IBTA vol. 1 Annex A11, "RDMA IP CM
// Service"; rdma_cm's struct cma_hdr): the first 36 bytes of a REQ's
// private data when rdma_cm made it, the application's own after them.
const (
	CMIPHeaderLen = 36
	// CMServiceIDPrefix is the top of an rdma_cm service ID: 0x0000000001
	// then the port space (0x06 = RDMA_PS_TCP, rping's) and the port.
	CMServiceIDPrefix = 0x0000000001000000
	CMPortSpaceTCP    = 0x06
)

// CMServiceID returns rdma_cm's service ID for a TCP port-space port.
func CMServiceID(port uint16) uint64 {
	return CMServiceIDPrefix | CMPortSpaceTCP<<16 | uint64(port)
}

// CMIPHeader holds the IP CM header of a REQ's private data.
type CMIPHeader struct {
	Version   uint8 // major<<4 | minor: 0 from rdma_cm
	IPVersion uint8 // top 4 bits: 4 or 6
	SrcPort   uint16
	Src, Dst  netip.Addr
}

// DecodeCMIPHeader reads the IP CM header from a REQ's private data.
func DecodeCMIPHeader(p []byte) CMIPHeader {
	_ = p[CMIPHeaderLen-1]
	h := CMIPHeader{Version: p[0], IPVersion: p[1] >> 4, SrcPort: binary.BigEndian.Uint16(p[2:])}
	if h.IPVersion == 4 {
		// IPv4 addresses sit in the last 4 bytes of their 16 (cma_ip_addr).
		h.Src = netip.AddrFrom4([4]byte(p[16:20]))
		h.Dst = netip.AddrFrom4([4]byte(p[32:36]))
	} else {
		h.Src = netip.AddrFrom16([16]byte(p[4:20]))
		h.Dst = netip.AddrFrom16([16]byte(p[20:36]))
	}
	return h
}

// Encode writes the IP CM header into a REQ's private data p, leaving
// the bytes it does not own as they are.
func (h *CMIPHeader) Encode(p []byte) {
	_ = p[CMIPHeaderLen-1]
	p[0], p[1] = h.Version, h.IPVersion<<4
	binary.BigEndian.PutUint16(p[2:], h.SrcPort)
	clear(p[4:36])
	if h.Src.Is4() {
		s, d := h.Src.As4(), h.Dst.As4()
		copy(p[16:20], s[:])
		copy(p[32:36], d[:])
	} else {
		s, d := h.Src.As16(), h.Dst.As16()
		copy(p[4:20], s[:])
		copy(p[20:36], d[:])
	}
}
