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
	FWVer:                 "0.0.0",
	MaxMRSize:             ^uint64(0),
	MaxQP:                 rxeMaxValue - rxeMinQPIndex, // RXE_MAX_QP: 1048560
	MaxQPWR:               rxeMaxValue,
	MaxSGE:                32, // RXE_MAX_SGE
	MaxCQ:                 rxeMaxValue,
	MaxCQE:                (1 << 15) - 1,     // RXE_MAX_CQE
	MaxMR:                 rxeMaxMRIndex - 1, // RXE_MAX_MR: 524287
	MaxPD:                 rxeMaxValue,
	MaxQPRdAtom:           128,                          // RXE_MAX_QP_RD_ATOM
	MaxQPInitRdAtom:       128,                          // RXE_MAX_QP_INIT_RD_ATOM
	MaxSRQ:                rxeMaxValue - rxeMinSRQIndex, // RXE_MAX_SRQ: indices 0x20001..1<<20
	MaxSRQWR:              rxeMaxValue,
	MaxSRQSGE:             27,                            // RXE_MAX_SRQ_SGE
	MaxAH:                 (1 << 15) - 1,                 // RXE_MAX_AH
	MaxMW:                 rxeMaxMWIndex - rxeMinMWIndex, // RXE_MAX_MW: 524287
	MaxMcastGrp:           rxeMaxMcastGrp,
	MaxMcastQPAttach:      rxeMaxMcastQPAttach,
	MaxTotalMcastQPAttach: rxeMaxTotMcastQPAtt,
	MaxInlineData:         512, // RXE_MAX_INLINE_DATA (not in ibv_device_attr; probed)
	PhysPortCnt:           1,
	AtomicCap:             "ATOMIC_HCA",
}

// rxe's object index ranges (rxe_param.h): QP indices (QPNs) run from
// RXE_MIN_QP_INDEX to DEFAULT_MAX_VALUE, MR indices from 1 to
// RXE_MAX_MR_INDEX, SRQ indices from RXE_MIN_SRQ_INDEX, and MW indices
// from RXE_MIN_MW_INDEX, the index after the last MR one, to
// RXE_MAX_MW_INDEX: every key whose index is at least rxeMinMWIndex
// names a window (rxe's rkey_is_mw).
const (
	rxeMinQPIndex  = 16
	rxeMaxQPIndex  = rxeMaxValue
	rxeMaxMRIndex  = rxeMaxValue >> 1
	rxeMinSRQIndex = 0x20001
	rxeMinMWIndex  = rxeMaxMRIndex + 1
	rxeMaxMWIndex  = rxeMaxValue
)

// maxPktPerAck is rxe's RXE_MAX_PKT_PER_ACK: a packet that is not the
// last of its message asks for an ACK when more than this many packets
// went out since the last one that asked (rxe_req.c init_req_packet:
// noack_pkts++ > RXE_MAX_PKT_PER_ACK), so the 66th does; the count
// carries over a go-back-N retry. Seen on rxe: conformance scenario
// unacked-window asks at PSN 65, then at the third packet resent.
const maxPktPerAck = 64

// maxUnackedPSNs is rxe's RXE_MAX_UNACKED_PSNS: an RC requester sends a
// packet only while its PSN is at most this far past the oldest PSN not
// acknowledged (comp.psn); past it, the requester waits (wait_psn) until
// a response moves comp.psn on (rxe_req.c rxe_requester, rxe_comp.c). So
// at most 129 PSNs are in flight: conformance scenario unacked-window,
// whose first ACK is lost, stops at PSN 128 and retries after the
// timeout, where without the window the last packet's ACK covers it.
const maxUnackedPSNs = 128

// Frames handed to the port and not yet gone from it, per QP: rxe stops a
// QP's requester while more than 64 of its packets sit in the network
// stack and resumes it below 16 (RXE_INFLIGHT_SKBS_PER_QP_HIGH/LOW). It
// keeps a retransmission from flooding the port's queue faster than the
// link drains it.
const (
	inflightHigh = 64
	inflightLow  = 16
)
