package nic

import (
	"unsafe"

	"github.com/rocesim/rocesim/wire"
)

// frameTo fills the outer headers of f for a packet from qp to the
// address vector av: MACs from the neighbour table, the source GID of the
// same family as the destination, the UDP source port rxe would choose.
func (d *Device) frameTo(f *wire.Frame, qp *QP, av *AHAttr, destQPN uint32) {
	dgid := av.GRH.DGID.Unmap()
	*f = wire.Frame{
		SrcMAC: d.cfg.MAC,
		Dst:    dgid,
		TTL:    64,
		TOS:    av.GRH.TrafficClass,
	}
	if av == &qp.attr.AHAttr {
		f.DstMAC = qp.dmac // resolved when the AV was set
	} else {
		f.DstMAC, _ = d.neighbour(dgid)
	}
	if av.GRH.HopLimit != 0 && av.GRH.HopLimit != 1 {
		// rxe keeps the default TTL unless the AV sets a real hop limit.
		f.TTL = av.GRH.HopLimit
	}
	if dgid.Is4() {
		f.Src = d.cfg.IPv4
		f.IPFlags = wire.IPv4FlagDF
		f.IPID = d.ipID
		d.ipID++
	} else {
		f.Src = d.cfg.IPv6
		f.FlowLabel = av.GRH.FlowLabel
		f.ComputeUDPChecksum = true
	}
	switch {
	case qp.init.Type == QPTypeUD:
		f.SrcPort = wire.UDPSourcePortUD(qp.num)
	case av.GRH.FlowLabel != 0:
		f.SrcPort = wire.UDPSourcePortFromFlowLabel(av.GRH.FlowLabel)
	default:
		f.SrcPort = wire.UDPSourcePort(qp.num, destQPN)
	}
	f.BTH.PKey = wire.DefaultPKey
	f.BTH.DestQP = destQPN
}

// note returns the note built in b, d.noteBuf's storage, as a string
// that shares b's bytes: no allocation per frame with notes on (issue 20,
// capture without allocation). The string is valid until the next note is
// built, which is enough: it goes straight to emit, and push copies it
// into the batch's note storage before anything else is built.
func (d *Device) note(b []byte) string {
	d.noteBuf = b
	return unsafe.String(unsafe.SliceData(b), len(b))
}

// emit encodes f into an outbox buffer and queues it with the marks m
// (emitIn); qp is the QP whose packet it is (counted until the port
// reports it gone, see TxDone).
func (d *Device) emit(qp *QP, f *wire.Frame, note string, m frameMark) {
	d.emitIn(d.outbox.buffer(), qp, f, note, m)
}

// emitIn is emit into buf, a buffer from d.outbox.buffer that may already
// hold f's payload where Encode puts it (sendPacket).
//
// m is the OutFrame's Round, ConnectedAt and RNRNAK: a resent request's
// (QP.resendMark) or an RNR NAK's, none for any other frame.
func (d *Device) emitIn(buf []byte, qp *QP, f *wire.Frame, note string, m frameMark) {
	n, err := wire.Encode(buf, f)
	if err != nil {
		// Frames are built from validated state; failing here is a bug.
		panic("nic: building a frame: " + err.Error())
	}
	d.outbox.push(buf, n, note, qp.peer, m)
	d.counters.Add(CounterSentPkts, 1)
	if d.inflight.full() {
		d.inflight.limit = max(64, 2*d.inflight.limit) // the ring's storage follows
	}
	*d.inflight.grow() = qp.tx
	d.tx[qp.tx].out++
	qp.txBuilt++
}
