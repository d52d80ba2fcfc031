package procfabric

import (
	"net/netip"
	"testing"

	"github.com/rocesim/rocesim/wire"
)

// cmFrame is a CM MAD of attribute attr, its data from encode, from node
// b (10.0.0.2, or fd00::2 over IPv6) to node a's QP1.
func cmFrame(t *testing.T, v6 bool, attr wire.CMAttr, tid uint64, encode func(d []byte)) []byte {
	t.Helper()
	var mad [wire.MADLen]byte
	m := wire.MAD(mad[:])
	m.SetHeader(&wire.MADHeader{BaseVersion: wire.MADBaseVersion, MgmtClass: wire.MADClassCM,
		ClassVersion: wire.MADClassVersion, Method: wire.MADMethodSend, TransactionID: tid, AttributeID: uint16(attr)})
	encode(m.Data())
	f := wire.Frame{DstMAC: wire.MAC{2, 0, 0, 0, 0, 1}, SrcMAC: wire.MAC{2, 0, 0, 0, 0, 2},
		Src: netip.MustParseAddr("10.0.0.2"), Dst: netip.MustParseAddr("10.0.0.1"), TTL: 64,
		SrcPort: wire.UDPSourcePortUD(1),
		BTH:     wire.BTHFields{Opcode: wire.OpUDSendOnly, AckReq: true, PKey: 0xFFFF, DestQP: wire.GSIQPN, PSN: 7},
		DETH:    wire.DETHFields{QKey: wire.GSIQKey, SrcQP: wire.GSIQPN}, Payload: mad[:]}
	if v6 {
		f.Src, f.Dst, f.ComputeUDPChecksum = netip.MustParseAddr("fd00::2"), netip.MustParseAddr("fd00::1"), true
	}
	n, err := f.Len()
	if err != nil {
		t.Fatal(err)
	}
	b := make([]byte, n)
	if _, err := wire.Encode(b, &f); err != nil {
		t.Fatal(err)
	}
	return b
}

// TestKernelAnswer: the kernel of a node whose process has left answers a
// DREQ with a DREP (the communication IDs swapped, the transaction ID
// kept), a REQ with a REJ of reason 8 naming the REQ's communication
// ID, and a SIDR_REQ with a SIDR_REP of status 1 naming its request, each
// from QP1 back to the sender's QP1 and addresses, over IPv4 and
// IPv6, with a valid ICRC; it sends nothing for anything else.
func TestKernelAnswer(t *testing.T) {
	for _, v6 := range []bool{false, true} {
		dreq := cmFrame(t, v6, wire.CMAttrDREQ, 0x2_1234_5678, func(d []byte) {
			q := wire.CMDREQ{LocalCommID: 0xaaaa0001, RemoteCommID: 0xbbbb0002, RemoteQPN: 0x11}
			q.Encode(d)
		})
		req := cmFrame(t, v6, wire.CMAttrREQ, 0x2_9abc_def0, func(d []byte) {
			r := wire.CMREQ{LocalCommID: 0xcccc0003, ServiceID: 0x0000000001060000 | 7174}
			r.Encode(d)
		})
		sidr := cmFrame(t, v6, wire.CMAttrSIDRREQ, 0x2_0000_0042, func(d []byte) {
			r := wire.SIDRREQ{RequestID: 0xdddd0004, PKey: 0xFFFF, ServiceID: 0x0000000001110000 | 7174}
			r.Encode(d)
		})
		rtu := cmFrame(t, v6, wire.CMAttrRTU, 1, func([]byte) {})
		p, m := answerMAD(t, "DREQ", dreq)
		var drep wire.CMDREP
		drep.Decode(m.Data())
		if wire.CMAttr(m.Header().AttributeID) != wire.CMAttrDREP || m.Header().TransactionID != 0x2_1234_5678 ||
			drep.LocalCommID != 0xbbbb0002 || drep.RemoteCommID != 0xaaaa0001 {
			t.Errorf("v6=%v DREP: attr %#x tid %#x local %#x remote %#x", v6, m.Header().AttributeID, m.Header().TransactionID,
				drep.LocalCommID, drep.RemoteCommID)
		}
		if p.Src() != netip.MustParseAddr(map[bool]string{false: "10.0.0.1", true: "fd00::1"}[v6]) ||
			p.Eth.Dst() != (wire.MAC{2, 0, 0, 0, 0, 2}) || p.BTH.DestQP() != wire.GSIQPN || p.DETH.SrcQP() != wire.GSIQPN ||
			p.DETH.QKey() != wire.GSIQKey {
			t.Errorf("v6=%v DREP from %v to MAC %v, QP %d from QP %d, Q_Key %#x", v6, p.Src(), p.Eth.Dst(), p.BTH.DestQP(),
				p.DETH.SrcQP(), p.DETH.QKey())
		}
		_, m = answerMAD(t, "REQ", req)
		var rej wire.CMREJ
		rej.Decode(m.Data())
		if wire.CMAttr(m.Header().AttributeID) != wire.CMAttrREJ || m.Header().TransactionID != 0x2_9abc_def0 ||
			rej.RemoteCommID != 0xcccc0003 || rej.LocalCommID != 0 || rej.MsgRejected != 0 ||
			rej.Reason != wire.CMREJInvalidServiceID {
			t.Errorf("v6=%v REJ: %+v tid %#x", v6, rej, m.Header().TransactionID)
		}
		_, m = answerMAD(t, "SIDR_REQ", sidr)
		var rep wire.SIDRREP
		rep.Decode(m.Data())
		if wire.CMAttr(m.Header().AttributeID) != wire.CMAttrSIDRREP || m.Header().TransactionID != 0x2_0000_0042 ||
			rep.RequestID != 0xdddd0004 || rep.Status != wire.SIDRUnsupported || rep.ServiceID != 0x0000000001110000|7174 ||
			rep.QPN != 0 {
			t.Errorf("v6=%v SIDR_REP: %+v tid %#x", v6, rep, m.Header().TransactionID)
		}
		if out, _ := kernelAnswer(nil, rtu); out != nil {
			t.Errorf("v6=%v: an RTU got an answer", v6)
		}
		if out, _ := kernelAnswer(nil, dreq[:60]); out != nil {
			t.Errorf("v6=%v: a cut frame got an answer", v6)
		}
	}
}

// answerMAD is kernelAnswer's answer to frame, decoded, and its MAD.
func answerMAD(t *testing.T, what string, frame []byte) (*wire.Packet, wire.MAD) {
	t.Helper()
	out, _ := kernelAnswer(nil, frame)
	var p wire.Packet
	if out == nil || p.Decode(out) != nil {
		t.Fatalf("%s: no answer that decodes", what)
	}
	return &p, wire.MAD(p.Payload)
}
