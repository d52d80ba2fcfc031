package nic

import (
	"net/netip"
	"syscall"

	"github.com/rocesim/rocesim/sim"
	"github.com/rocesim/rocesim/wire"
)

// QP1, the GSI QP (IBTA vol. 1 §13.5.1), as the connection manager above
// the device uses it. On rxe the kernel's ib_mad owns it (rxe_qp_init_misc
// gives it QPN 1); here the device keeps it apart from the user's QPs and
// moves whole MADs in and out:
//
//  1. SendMAD builds a UD SEND_ONLY to QP1 of the destination with the
//     GSI Q_Key, source QP 1 and the next PSN of QP1 (one per MAD sent,
//     never checked by the receiver), AckReq set, rxe's UD source port of
//     QPN 1 (55410): all as in wire/testdata/cm.
//  2. Receive hands a frame for QP1 to receiveMAD: a UD SEND_ONLY with the
//     GSI Q_Key and a 256-byte payload, else dropped and counted as a
//     frame for a user QP would be (qp-type, bad-qkey, bad-mad).
//  3. Ready carries the MADs received (Ready.MADs), in arrival order.
//
// MADs are counted in sent_pkts and rcvd_pkts like other traffic (rxe
// counts the GSI QP's packets in its port counters too).

// MADIn is one MAD received on QP1.
type MADIn struct {
	Src   netip.Addr // the sender's IP address (its GID, unmapped)
	SrcQP uint32     // the DETH's source QP (1 from a CM)
	PKey  uint16     // the BTH's P_Key
	MAD   [wire.MADLen]byte
}

// gsiNote labels a MAD frame in traces and captures: the CM message it
// carries when it is one (so that a capture of rping reads REQ, REP,
// RTU, DREQ, DREP in its comments), constant strings so that sending a
// MAD allocates nothing.
func gsiNote(mad []byte) string {
	m := wire.MAD(mad)
	if !m.IsCM() {
		return "MAD on QP1"
	}
	switch wire.CMAttr(m.Header().AttributeID) {
	case wire.CMAttrREQ:
		return "MAD on QP1: CM REQ (connect request)"
	case wire.CMAttrMRA:
		return "MAD on QP1: CM MRA (message receipt acknowledgement)"
	case wire.CMAttrREJ:
		return "MAD on QP1: CM REJ (reject)"
	case wire.CMAttrREP:
		return "MAD on QP1: CM REP (connect reply)"
	case wire.CMAttrRTU:
		return "MAD on QP1: CM RTU (ready to use)"
	case wire.CMAttrDREQ:
		return "MAD on QP1: CM DREQ (disconnect request)"
	case wire.CMAttrDREP:
		return "MAD on QP1: CM DREP (disconnect reply)"
	}
	return "MAD on QP1: CM"
}

// newGSI makes the device's QP1: a UD QP outside the user's table, so
// QueryQP, DestroyQP and the receive path for user QPs never see it.
func newGSI(d *Device) *QP {
	qp := &QP{dev: d, num: wire.GSIQPN, init: QPInitAttr{Type: QPTypeUD}, state: QPStateRTS, slot: noSlot,
		attr: QPAttr{QPState: QPStateRTS, QKey: wire.GSIQKey}}
	qp.tx = d.txSlotFor(qp)
	return qp
}

// SendMAD sends one 256-byte MAD from QP1 to QP1 of dst. It returns
// EINVAL when mad is not 256 bytes or dst is not a GID this device can
// reach (no neighbour entry).
func (d *Device) SendMAD(now sim.Time, dst netip.Addr, mad []byte) error {
	var f wire.Frame
	if err := d.madFrame(&f, dst, mad, "send_mad"); err != nil {
		return err
	}
	qp := d.gsi
	qp.req.psn = qp.req.psn.Add(1)
	d.emit(qp, &f, gsiNote(mad), frameMark{})
	return nil
}

// MADFrame appends to buf the frame SendMAD would send now for the same
// MAD, and returns it with its note, without sending it: QP1's PSN, the
// IPv4 identification and the counters stay as they are. A CM that
// wants the fabric to send its last MADs if its process dies
// (procfabric's will) builds them with it; such a frame keeps the PSN
// and IP ID of the instant it was built, which may repeat another's (a
// receiver checks neither on QP1; only a capture shows them).
func (d *Device) MADFrame(buf []byte, dst netip.Addr, mad []byte) ([]byte, string, error) {
	var f wire.Frame
	ipID := d.ipID
	err := d.madFrame(&f, dst, mad, "mad_frame")
	d.ipID = ipID
	if err != nil {
		return buf, "", err
	}
	at := len(buf)
	n, err := f.Len()
	if err == nil {
		buf = append(buf, make([]byte, n)...)
		n, err = wire.Encode(buf[at:], &f)
	}
	if err != nil {
		panic("nic: building a MAD frame: " + err.Error()) // built from checked state
	}
	return buf[:at+n], gsiNote(mad), nil
}

// madFrame builds in f the UD SEND_ONLY that carries mad from QP1 to QP1
// of dst, with QP1's current PSN (SendMAD advances it); verb names the
// caller in errors.
func (d *Device) madFrame(f *wire.Frame, dst netip.Addr, mad []byte, verb string) error {
	if len(mad) != wire.MADLen {
		return errno(syscall.EINVAL, "%s: mad is %d bytes, not 256", verb, len(mad))
	}
	dst = dst.Unmap()
	if _, ok := d.neighbour(dst); !ok {
		return errno(syscall.EINVAL, "%s: dst %v is not a known neighbour", verb, dst)
	}
	qp := d.gsi
	d.frameTo(f, qp, &AHAttr{GRH: GRH{DGID: dst}, IsGlobal: true}, wire.GSIQPN)
	f.BTH.Opcode = wire.OpUDSendOnly
	f.BTH.AckReq = true // what rxe sets on every UD SEND_ONLY (see the captures)
	f.BTH.PSN = qp.req.psn
	f.DETH = wire.DETHFields{QKey: wire.GSIQKey, SrcQP: wire.GSIQPN}
	f.Payload = mad
	return nil
}

// receiveMAD takes a decoded frame for QP1 (Receive has checked the
// address): a MAD for the CM above, or a drop.
func (d *Device) receiveMAD(now sim.Time, p *wire.Packet) {
	switch {
	case p.BTH.Opcode() != wire.OpUDSendOnly:
		d.dropRx(now, p, DropQPType)
	case !wire.PKeyMatch(p.BTH.PKey(), wire.DefaultPKey):
		d.dropRx(now, p, DropPKey)
	case p.DETH.QKey() != wire.GSIQKey:
		d.dropRx(now, p, DropQKey)
	case len(p.Payload) != wire.MADLen:
		d.dropRx(now, p, DropBadMAD)
	default:
		d.counters.Add(CounterRcvdPkts, 1)
		in := d.outbox.mad()
		in.Src, in.SrcQP, in.PKey = p.Src().Unmap(), p.DETH.SrcQP(), p.BTH.PKey()
		copy(in.MAD[:], p.Payload)
	}
}
