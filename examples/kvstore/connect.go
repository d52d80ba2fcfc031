package kvstore

import (
	"fmt"

	"github.com/rocesim/rocesim/verbs"
)

// gidIndex is the GID table index both sides use: rxe's index 1, the
// IPv4 address mapped into IPv6 (a RoCE v2 GID).
const gidIndex = 1

// initialPSN is the first PSN a QP sends: a fixed function of its QPN
// (Knuth's multiplicative hash, cut to 24 bits), so that runs are
// reproducible while two QPs seldom start at the same PSN. A real
// program draws it at random (ibv_rc_pingpong uses lrand48).
func initialPSN(qpn uint32) uint32 { return qpn * 2654435761 & 0xFFFFFF }

// localEndpoint describes qp for the peer.
func localEndpoint(ctx *verbs.Context, qp *verbs.QP) (Endpoint, error) {
	gid, err := ctx.QueryGID(1, gidIndex)
	if err != nil {
		return Endpoint{}, fmt.Errorf("kvstore: query GID: %w", err)
	}
	return Endpoint{QPN: qp.QPNum, PSN: initialPSN(qp.QPNum), GID: gid}, nil
}

// bringUp takes qp from RESET through INIT and RTR to RTS toward peer,
// with the attribute masks ibv_rc_pingpong uses. access is what the peer
// may do to this side's memory: the client lets the server WRITE values
// into it; the server grants nothing.
func bringUp(qp *verbs.QP, cfg *Config, access verbs.AccessFlags, psn uint32, peer Endpoint) error {
	toInit := verbs.QPAttr{QPState: verbs.QPStateInit, PKeyIndex: 0, PortNum: 1, QPAccessFlags: access}
	if err := qp.Modify(&toInit, verbs.QPAttrState|verbs.QPAttrPKeyIndex|verbs.QPAttrPort|verbs.QPAttrAccessFlags); err != nil {
		return fmt.Errorf("kvstore: modify QP %#x to INIT: %w", qp.QPNum, err)
	}
	rtr := verbs.QPAttr{QPState: verbs.QPStateRTR, PathMTU: cfg.PathMTU, DestQPNum: peer.QPN,
		RQPSN: peer.PSN, MaxDestRdAtomic: 1, MinRNRTimer: cfg.MinRNRTimer,
		AHAttr: verbs.AHAttr{IsGlobal: true, PortNum: 1,
			GRH: verbs.GRH{DGID: peer.GID, HopLimit: 1, SGIDIndex: gidIndex}}}
	if err := qp.Modify(&rtr, verbs.QPAttrState|verbs.QPAttrAV|verbs.QPAttrPathMTU|verbs.QPAttrDestQPN|
		verbs.QPAttrRQPSN|verbs.QPAttrMaxDestRdAtomic|verbs.QPAttrMinRNRTimer); err != nil {
		return fmt.Errorf("kvstore: modify QP %#x to RTR: %w", qp.QPNum, err)
	}
	rts := verbs.QPAttr{QPState: verbs.QPStateRTS, Timeout: cfg.Timeout, RetryCnt: cfg.RetryCnt,
		RNRRetry: cfg.RNRRetry, SQPSN: psn, MaxRdAtomic: 1}
	if err := qp.Modify(&rts, verbs.QPAttrState|verbs.QPAttrTimeout|verbs.QPAttrRetryCnt|
		verbs.QPAttrRNRRetry|verbs.QPAttrSQPSN|verbs.QPAttrMaxQPRdAtomic); err != nil {
		return fmt.Errorf("kvstore: modify QP %#x to RTS: %w", qp.QPNum, err)
	}
	return nil
}

// postRecvs posts receive buffers first..last-1 of mr, each size bytes,
// with its index as the WR ID.
func postRecvs(qp *verbs.QP, mr *verbs.MR, size int, first, last int) error {
	for i := first; i < last; i++ {
		wr := [1]verbs.RecvWR{{WRID: uint64(i), SGList: []verbs.SGE{mr.SGE(uint64(i*size), uint64(size))}}}
		if _, err := qp.PostRecv(wr[:]); err != nil {
			return fmt.Errorf("kvstore: post receive %d on QP %#x: %w", i, qp.QPNum, err)
		}
	}
	return nil
}
