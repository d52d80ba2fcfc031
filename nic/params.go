package nic

// rxe's limits: the values of Linux 6.1's drivers/infiniband/sw/rxe/
// rxe_param.h (and the rxe constants beside them) that the model copies,
// in one place. They are rxe's choices, not the IBTA's: the IBTA's
// constants (field widths, the largest message) stay with the code that
// checks them (qpstate.go's attribute bounds, post.go's MaxMessage), and the
// model's own choices (DefaultAddrBase, maxHeld) with theirs.

// rxeMaxValue is rxe's DEFAULT_MAX_VALUE (1 << 20), the top of most of its
// object index ranges (rxe_param.h).
const rxeMaxValue = 1 << 20

// rxe's limits in Debian's 6.1 kernel (rxe_param.h, with the stable fix
// "RDMA/rxe: Fix inaccurate constants in rxe_type_info" that makes each
// pool's max_elem the value reported), as `ibv_devinfo -v` prints them in
// the conformance guest (TestDeviceAttrMatchesRxe holds them there).
var rxeAttr = DeviceAttr{
	FWVer:           "0.0.0",
	MaxMRSize:       ^uint64(0),
	MaxQP:           rxeMaxValue - rxeMinQPIndex, // RXE_MAX_QP: 1048560
	MaxQPWR:         rxeMaxValue,
	MaxSGE:          32,
	MaxCQ:           rxeMaxValue,
	MaxCQE:          (1 << 15) - 1,
	MaxMR:           rxeMaxMRIndex - 1, // RXE_MAX_MR: 524287
	MaxPD:           rxeMaxValue,
	MaxQPRdAtom:     128,
	MaxQPInitRdAtom: 128,
	MaxSRQ:          rxeMaxValue - 0x20001, // RXE_MAX_SRQ: indices 0x20001..1<<20
	MaxSRQWR:        rxeMaxValue,
	MaxSRQSGE:       27,
	MaxAH:           (1 << 15) - 1,
	MaxMW:           rxeMaxValue - (rxeMaxMRIndex + 1), // RXE_MAX_MW: 524287
	MaxInlineData:   512,                               // RXE_MAX_INLINE_DATA (not in ibv_device_attr; probed)
	PhysPortCnt:     1,
	AtomicCap:       "ATOMIC_HCA",
}

// rxe's QP and MR index ranges (rxe_param.h): QP indices (QPNs) run from
// RXE_MIN_QP_INDEX to DEFAULT_MAX_VALUE, MR indices from 1 to
// RXE_MAX_MR_INDEX.
const (
	rxeMinQPIndex = 16
	rxeMaxQPIndex = rxeMaxValue
	rxeMaxMRIndex = rxeMaxValue >> 1
)

// maxPktPerAck is how many packets rxe sends before it asks for an ACK
// even mid-message (RXE_MAX_PKT_PER_ACK).
const maxPktPerAck = 64

// Frames handed to the port and not yet gone from it, per QP: rxe stops a
// QP's requester while more than 64 of its packets sit in the network
// stack and resumes it below 16 (RXE_INFLIGHT_SKBS_PER_QP_HIGH/LOW). It
// keeps a retransmission from flooding the port's queue faster than the
// link drains it.
const (
	inflightHigh = 64
	inflightLow  = 16
)
