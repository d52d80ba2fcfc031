package wire

import "encoding/binary"

// Service ID Resolution (SIDR, IBTA vol. 1 §12.11): how rdma_cm connects
// a UD QP (RDMA_PS_UDP, udaddy's port space). The active side sends a
// SIDR_REQ naming the service ID, with rdma_cm's IP CM header in its
// private data as in a REQ (cma_resolve_ib_udp, cma_format_hdr); the
// passive side answers with a SIDR_REP carrying a status and, on
// success, its QPN and Q_Key. There is no RTU, no DREQ: a UD "connection"
// is the two numbers. Both are MADs of the CM class (mad.go) with the
// 232-byte layouts below, offsets from the start of the MAD data; sizes
// as the kernel's cm_msgs.h has them (IB_CM_SIDR_REQ_PRIVATE_DATA_SIZE
// 216, IB_CM_SIDR_REP_PRIVATE_DATA_SIZE 136, IB_CM_SIDR_REP_INFO_LENGTH
// 72).

// The SIDR attribute IDs (IBTA vol. 1 Table 112).
const (
	CMAttrSIDRREQ CMAttr = 0x0017
	CMAttrSIDRREP CMAttr = 0x0018
)

// SIDR private data and additional information sizes.
const (
	SIDRREQPrivateLen = 216
	SIDRREPPrivateLen = 136
	SIDRREPInfoLen    = 72
)

// CMPortSpaceUDP is RDMA_PS_UDP's byte in an rdma_cm service ID
// (RDMA_IB_IP_PS_UDP = 0x0000000001110000).
const CMPortSpaceUDP = 0x11

// UDPQKey is the Q_Key rdma_cm gives the UD QPs of RDMA_PS_UDP
// (RDMA_UDP_QKEY, cma_set_qkey) and puts in its SIDR_REP.
const UDPQKey = 0x01234567

// CMServiceIDPS returns rdma_cm's service ID for a port of port space ps
// (the low byte of enum rdma_port_space: 0x06 TCP, 0x11 UDP).
func CMServiceIDPS(ps uint8, port uint16) uint64 {
	return CMServiceIDPrefix | uint64(ps)<<16 | uint64(port)
}

// SIDRStatus is a SIDR_REP's status (IBTA vol. 1 §12.11.2, the kernel's
// enum ib_cm_sidr_status).
type SIDRStatus uint8

// The SIDR_REP statuses.
const (
	SIDRSuccess            SIDRStatus = 0
	SIDRUnsupported        SIDRStatus = 1 // no listener on the service ID (cm_sidr_req_handler)
	SIDRReject             SIDRStatus = 2 // the application rejected (rdma_reject on a UD ID)
	SIDRNoQP               SIDRStatus = 3
	SIDRRedirect           SIDRStatus = 4
	SIDRUnsupportedVersion SIDRStatus = 5
)

// SIDRREQ is a Service ID Resolution Request (IBTA vol. 1 §12.11.1).
type SIDRREQ struct {
	RequestID   uint32 // the sender's ib_cm local ID
	PKey        uint16
	Resv16      uint16
	ServiceID   uint64
	PrivateData [SIDRREQPrivateLen]byte
}

// Decode reads a SIDR_REQ from the MAD data d (232 bytes).
func (r *SIDRREQ) Decode(d []byte) {
	_ = d[MADDataLen-1]
	r.RequestID = binary.BigEndian.Uint32(d[0:])
	r.PKey = binary.BigEndian.Uint16(d[4:])
	r.Resv16 = binary.BigEndian.Uint16(d[6:])
	r.ServiceID = binary.BigEndian.Uint64(d[8:])
	copy(r.PrivateData[:], d[16:])
}

// Encode writes the SIDR_REQ into the MAD data d (232 bytes).
func (r *SIDRREQ) Encode(d []byte) {
	_ = d[MADDataLen-1]
	binary.BigEndian.PutUint32(d[0:], r.RequestID)
	binary.BigEndian.PutUint16(d[4:], r.PKey)
	binary.BigEndian.PutUint16(d[6:], r.Resv16)
	binary.BigEndian.PutUint64(d[8:], r.ServiceID)
	copy(d[16:], r.PrivateData[:])
}

// SIDRREP is a Service ID Resolution Response (IBTA vol. 1 §12.11.2).
type SIDRREP struct {
	RequestID      uint32 // the SIDR_REQ's, which matches the answer
	Status         SIDRStatus
	AddInfoLength  uint8
	Resv16         uint16
	QPN            uint32 // 24 bits
	Resv8          uint8
	ServiceID      uint64
	QKey           uint32
	AdditionalInfo [SIDRREPInfoLen]byte // ClassPortInfo for a redirect
	PrivateData    [SIDRREPPrivateLen]byte
}

// Decode reads a SIDR_REP from the MAD data d (232 bytes).
func (r *SIDRREP) Decode(d []byte) {
	_ = d[MADDataLen-1]
	r.RequestID = binary.BigEndian.Uint32(d[0:])
	r.Status, r.AddInfoLength = SIDRStatus(d[4]), d[5]
	r.Resv16 = binary.BigEndian.Uint16(d[6:])
	r.QPN, r.Resv8 = get24(d[8:]), d[11]
	r.ServiceID = binary.BigEndian.Uint64(d[12:])
	r.QKey = binary.BigEndian.Uint32(d[20:])
	copy(r.AdditionalInfo[:], d[24:96])
	copy(r.PrivateData[:], d[96:])
}

// Encode writes the SIDR_REP into the MAD data d (232 bytes).
func (r *SIDRREP) Encode(d []byte) {
	_ = d[MADDataLen-1]
	binary.BigEndian.PutUint32(d[0:], r.RequestID)
	d[4], d[5] = uint8(r.Status), r.AddInfoLength
	binary.BigEndian.PutUint16(d[6:], r.Resv16)
	put24(d[8:], r.QPN)
	d[11] = r.Resv8
	binary.BigEndian.PutUint64(d[12:], r.ServiceID)
	binary.BigEndian.PutUint32(d[20:], r.QKey)
	copy(d[24:96], r.AdditionalInfo[:])
	copy(d[96:], r.PrivateData[:])
}
