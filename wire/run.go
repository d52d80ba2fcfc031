package wire

// PacketRun describes a run of packets: Count of them to QP QPN, with
// PSNs from PSN on, all of opcode Opcode with Len bytes of payload and
// no AckReq. A NIC describes so the middle packets of a message it is
// receiving, which it would take in silence (nic.Device.RxSlack), and a
// driver holds back the packets that fit (procfabric).
type PacketRun struct {
	QPN    uint32
	PSN    PSN
	Opcode Opcode
	Len    int
	Count  int
}

// Take reports whether the packet of BTH b and payloadLen bytes of
// payload is the run's next; if it is, the run moves past it.
func (r *PacketRun) Take(b BTH, payloadLen int) bool {
	if r.Count <= 0 || b.DestQP() != r.QPN || b.PSN() != r.PSN || b.Opcode() != r.Opcode || b.AckReq() || payloadLen != r.Len {
		return false
	}
	r.PSN, r.Count = r.PSN.Next(), r.Count-1
	return true
}
