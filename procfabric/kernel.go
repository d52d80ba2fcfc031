package procfabric

import (
	"encoding/binary"

	"github.com/rocesim/rocesim/wire"
)

// A node whose process has left is still a Linux host with its rxe
// device: its kernel's CM (ib_cm) answers three messages itself, whatever
// became of the program, and the daemon answers them for it so that a
// peer does not wait out its retries (15 resends, some 98 s of virtual
// time for a DREQ):
//
//   - a DREQ for a connection it has no ID for gets a DREP
//     (cm_dreq_handler → cm_issue_drep: the communication IDs swapped,
//     the DREQ's transaction ID);
//   - a REQ gets a REJ with reason 8, invalid service ID, as for a port
//     nobody listens on (cm_req_handler → cm_issue_rej; what rxe's host
//     sent in rxe_cm_rej.pcapng);
//   - a SIDR_REQ (rdma_cm's UD resolution) gets a SIDR_REP of status 1,
//     IB_SIDR_UNSUPPORTED, as for a service nobody listens on
//     (cm_sidr_req_handler).
//
// Anything else to such a node is dropped, as rxe drops a packet for a
// QP that does not exist. kernelAnswer decides from the frame alone.

// kernelAnswer returns the frame the kernel of the node that received
// frame sends back, in buf, and its note; nil if it sends nothing.
func kernelAnswer(buf, frame []byte) ([]byte, string) {
	var p wire.Packet
	if p.Decode(frame) != nil || p.BTH.DestQP() != wire.GSIQPN || p.BTH.Opcode() != wire.OpUDSendOnly ||
		len(p.Payload) != wire.MADLen {
		return nil, ""
	}
	in := wire.MAD(p.Payload)
	h := in.Header()
	if !in.IsCM() || h.Method != wire.MADMethodSend {
		return nil, ""
	}
	var mad [wire.MADLen]byte
	out := wire.MAD(mad[:])
	var attr wire.CMAttr
	var note string
	switch wire.CMAttr(h.AttributeID) {
	case wire.CMAttrDREQ:
		var q wire.CMDREQ
		q.Decode(in.Data())
		r := wire.CMDREP{LocalCommID: q.RemoteCommID, RemoteCommID: q.LocalCommID}
		r.Encode(out.Data())
		attr, note = wire.CMAttrDREP, "MAD on QP1: CM DREP from the node's kernel (its process has left: cm_issue_drep)"
	case wire.CMAttrREQ:
		r := wire.CMREJ{RemoteCommID: binary.BigEndian.Uint32(in.Data()), Reason: wire.CMREJInvalidServiceID}
		r.Encode(out.Data())
		attr, note = wire.CMAttrREJ, "MAD on QP1: CM REJ from the node's kernel (no listener: its process has left)"
	case wire.CMAttrSIDRREQ:
		var q wire.SIDRREQ
		q.Decode(in.Data())
		r := wire.SIDRREP{RequestID: q.RequestID, Status: wire.SIDRUnsupported, ServiceID: q.ServiceID}
		r.Encode(out.Data())
		attr, note = wire.CMAttrSIDRREP, "MAD on QP1: CM SIDR_REP from the node's kernel (no listener: its process has left)"
	default:
		return nil, ""
	}
	out.SetHeader(&wire.MADHeader{BaseVersion: wire.MADBaseVersion, MgmtClass: wire.MADClassCM,
		ClassVersion: wire.MADClassVersion, Method: wire.MADMethodSend, TransactionID: h.TransactionID,
		AttributeID: uint16(attr)})
	// The reply goes back the way the request came, from QP1 to the
	// sender's QP1, as the kernel's response MAD does
	// (cm_alloc_response_msg: the AH from the received work completion).
	f := wire.Frame{
		DstMAC: p.Eth.Src(), SrcMAC: p.Eth.Dst(),
		Src: p.Dst(), Dst: p.Src(),
		TTL: 64, IPFlags: wire.IPv4FlagDF,
		SrcPort: wire.UDPSourcePortUD(wire.GSIQPN),
		BTH:     wire.BTHFields{Opcode: wire.OpUDSendOnly, AckReq: true, PKey: p.BTH.PKey(), DestQP: p.DETH.SrcQP()},
		DETH:    wire.DETHFields{QKey: wire.GSIQKey, SrcQP: wire.GSIQPN},
		Payload: mad[:],
	}
	if f.Src.Is6() && !f.Src.Is4In6() {
		f.ComputeUDPChecksum = true
	}
	n, err := f.Len()
	if err != nil {
		return nil, ""
	}
	if cap(buf) < n {
		buf = make([]byte, n)
	}
	buf = buf[:n]
	if n, err = wire.Encode(buf, &f); err != nil {
		return nil, ""
	}
	return buf[:n], note
}
