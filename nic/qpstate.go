package nic

import (
	"fmt"
	"math/bits"
	"strconv"
	"strings"
	"syscall"
)

// The validation half of ibv_modify_qp, as a pure function: which state
// transitions a QP may make, which attributes each transition requires and
// permits, and which values those attributes may take. The QP is not
// touched; the caller applies the attributes only when CheckModify says
// yes.
//
// CheckModify, step by step (the first failing step names the error):
//
//  1. The QP type is RC, UC or UD and the current state is a state.
//  2. The next state is attr.QPState when the mask has QPAttrState, else
//     the current state; it must be a state.
//  3. The transition cur->next is in the table (a modify without
//     QPAttrState is the transition cur->cur, so it too must be there).
//  4. Every required attribute is in the mask (the lowest missing bit is
//     reported).
//  5. No bit outside required|optional|QPAttrState is in the mask (the
//     lowest such bit is reported).
//  6. Each attribute in the mask has a legal value, checked in mask bit
//     order.
//
// Steps 3 to 5 are ib_modify_qp_is_ok() (drivers/infiniband/core/verbs.c),
// which rxe calls from rxe_qp_chk_attr(); they check the required before
// the surplus attributes, as it does. The transitions are the QP state
// diagram of IBTA vol. 1 §10.3 as the kernel's qp_state_table encodes it,
// and the attribute lists per transition are that table's req_param and
// opt_param. Step 6 gathers the checks the kernel core and rxe make on the
// values, and the field widths of the IBTA encodings.

// Limits are the device limits a modify is checked against.
type Limits struct {
	MaxQPRdAtom     uint8  // max_qp_rd_atom (outstanding READ/ATOMIC as requester), rxe: 128
	MaxQPInitRdAtom uint8  // max_qp_init_rd_atom (responder resources), rxe: 128
	PortCount       uint8  // 1
	PKeyTableLen    uint16 // 1 (only P_Key 0xFFFF at index 0)
}

// Value limits: the widths of the IBTA encodings of the attributes.
const (
	maxTimeout     = 31       // Local ACK Timeout: 5 bits, 4.096 µs * 2^timeout
	maxRetryCnt    = 7        // Retry Count: 3 bits
	maxRNRRetry    = 7        // RNR Retry Count: 3 bits, 7 means infinite
	maxMinRNRTimer = 31       // RNR NAK timer code: 5 bits, as in the AETH
	max24          = 0xFFFFFF // PSNs and QPNs are 24 bits (BTH)
)

// qpAccessDefined are the access flags a QP may carry: those AccessFlags
// defines. rxe is laxer: its RXE_ACCESS_SUPPORTED_QP is its MR set, which
// also admits MW_BIND, ON_DEMAND, the FLUSH bits and the optional range.
const qpAccessDefined = AccessLocalWrite | AccessRemoteWrite | AccessRemoteRead | AccessRemoteAtomic

// qpTransition is one cell of the state table: whether cur->next is legal
// and, per QP type (indexed by qpTypeIndex), the attributes it requires and
// the ones it permits besides QPAttrState, which every legal transition
// permits.
type qpTransition struct {
	legal bool
	req   [3]QPAttrMask // RC, UC, UD
	opt   [3]QPAttrMask
}

// qpTypeIndex maps a QP type to its column in qpTransition, or -1.
func qpTypeIndex(t QPType) int {
	switch t {
	case QPTypeRC:
		return 0
	case QPTypeUC:
		return 1
	case QPTypeUD:
		return 2
	}
	return -1
}

// Shorthands for the table below.
const (
	aCur     = QPAttrCurState
	aSQDNote = QPAttrEnSQDAsyncNotify
	aAccess  = QPAttrAccessFlags
	aPKey    = QPAttrPKeyIndex
	aPort    = QPAttrPort
	aQKey    = QPAttrQKey
	aAV      = QPAttrAV
	aMTU     = QPAttrPathMTU
	aTimeout = QPAttrTimeout
	aRetry   = QPAttrRetryCnt
	aRNR     = QPAttrRNRRetry
	aRQPSN   = QPAttrRQPSN
	aRdAtom  = QPAttrMaxQPRdAtomic
	aAlt     = QPAttrAltPath
	aRNRTmr  = QPAttrMinRNRTimer
	aSQPSN   = QPAttrSQPSN
	aDestRd  = QPAttrMaxDestRdAtomic
	aMig     = QPAttrPathMigState
	aDestQPN = QPAttrDestQPN
)

// qpTable is the kernel's qp_state_table restricted to RC, UC and UD,
// written out from its text (Linux drivers/infiniband/core/verbs.c). A
// cell that is not listed is an illegal transition. Legality does not
// depend on the QP type, exactly as in the kernel, where "valid" is one
// flag per cell: so SQE->RTS is legal for RC too (with no attribute but
// QPAttrState), although an RC QP never enters SQE (IBTA vol. 1 §10.3:
// an RC send error takes the QP to ERR).
var qpTable = [QPStateErr + 1][QPStateErr + 1]qpTransition{
	QPStateReset: {
		QPStateReset: {legal: true},
		// The kernel has no RESET->ERR cell: a QP in RESET can only
		// stay there or go to INIT.
		QPStateInit: {legal: true,
			req: [3]QPAttrMask{
				aPKey | aPort | aAccess, // RC
				aPKey | aPort | aAccess, // UC
				aPKey | aPort | aQKey,   // UD
			}},
	},
	QPStateInit: {
		QPStateReset: {legal: true},
		QPStateErr:   {legal: true},
		QPStateInit: {legal: true,
			opt: [3]QPAttrMask{
				aPKey | aPort | aAccess,
				aPKey | aPort | aAccess,
				aPKey | aPort | aQKey,
			}},
		QPStateRTR: {legal: true,
			req: [3]QPAttrMask{
				aAV | aMTU | aDestQPN | aRQPSN | aDestRd | aRNRTmr,
				aAV | aMTU | aDestQPN | aRQPSN,
				0,
			},
			opt: [3]QPAttrMask{
				aAlt | aAccess | aPKey,
				aAlt | aAccess | aPKey,
				aPKey | aQKey,
			}},
	},
	QPStateRTR: {
		QPStateReset: {legal: true},
		QPStateErr:   {legal: true},
		QPStateRTS: {legal: true,
			req: [3]QPAttrMask{
				aTimeout | aRetry | aRNR | aSQPSN | aRdAtom,
				aSQPSN,
				aSQPSN,
			},
			opt: [3]QPAttrMask{
				aCur | aAlt | aAccess | aRNRTmr | aMig,
				aCur | aAlt | aAccess | aMig,
				aCur | aQKey,
			}},
	},
	QPStateRTS: {
		QPStateReset: {legal: true},
		QPStateErr:   {legal: true},
		QPStateRTS: {legal: true,
			opt: [3]QPAttrMask{
				aCur | aAccess | aAlt | aMig | aRNRTmr,
				aCur | aAccess | aAlt | aMig,
				aCur | aQKey,
			}},
		QPStateSQD: {legal: true,
			opt: [3]QPAttrMask{aSQDNote, aSQDNote, aSQDNote}},
	},
	QPStateSQD: {
		QPStateReset: {legal: true},
		QPStateErr:   {legal: true},
		QPStateRTS: {legal: true,
			opt: [3]QPAttrMask{
				aCur | aAlt | aAccess | aRNRTmr | aMig,
				aCur | aAlt | aAccess | aMig,
				aCur | aQKey,
			}},
		// SQD -> SQD is where a drained QP's path and limits may be
		// changed (IBTA vol. 1 §10.3).
		QPStateSQD: {legal: true,
			opt: [3]QPAttrMask{
				aPort | aAV | aTimeout | aRetry | aRNR | aRdAtom | aDestRd | aAlt | aAccess | aPKey | aRNRTmr | aMig,
				aAV | aAlt | aAccess | aPKey | aMig,
				aPKey | aQKey,
			}},
	},
	QPStateSQE: {
		QPStateReset: {legal: true},
		QPStateErr:   {legal: true},
		QPStateRTS: {legal: true,
			opt: [3]QPAttrMask{
				0, // the kernel lists nothing for RC
				aCur | aAccess,
				aCur | aQKey,
			}},
	},
	QPStateErr: {
		QPStateReset: {legal: true},
		QPStateErr:   {legal: true},
	},
}

// CheckModify validates ibv_modify_qp(qp, attr, mask) for a QP of type t
// in state cur and returns the state the QP will be in (cur when mask has
// no QPAttrState). On any problem it returns an *Error wrapping
// syscall.EINVAL whose message names the problem, e.g.
// "modify_qp RC INIT->RTR: missing required attribute PATH_MTU". The QP
// itself is not touched: the caller applies the attributes only on
// success.
func CheckModify(t QPType, cur QPState, attr *QPAttr, mask QPAttrMask, lim Limits) (QPState, error) {
	next := cur
	if mask&QPAttrState != 0 {
		next = attr.QPState
	}
	fail := func(format string, args ...any) (QPState, error) {
		msg := fmt.Sprintf("modify_qp %v %v->%v: ", t, cur, next) + fmt.Sprintf(format, args...)
		return cur, &Error{Errno: syscall.EINVAL, Msg: msg}
	}

	ti := qpTypeIndex(t)
	if ti < 0 {
		return fail("QP type %d is not RC, UC or UD", uint8(t))
	}
	if cur > QPStateErr {
		return fail("current state %d is not a QP state", uint8(cur))
	}
	if next > QPStateErr {
		return fail("qp_state %d is not a QP state", uint8(next))
	}

	tr := &qpTable[cur][next]
	if !tr.legal {
		return fail("illegal transition")
	}
	req, opt := tr.req[ti], tr.opt[ti]
	if missing := req &^ mask; missing != 0 {
		return fail("missing required attribute %s", maskBitName(lowestBit(missing)))
	}
	if extra := mask &^ (req | opt | QPAttrState); extra != 0 {
		return fail("attribute %s not allowed", maskBitName(lowestBit(extra)))
	}
	// The kernel also refuses QPAttrCurState unless cur is RTR, RTS, SQD
	// or SQE; for RC, UC and UD the table above already permits it only
	// from those states.

	// Values, in mask bit order.
	if mask&QPAttrCurState != 0 && attr.CurQPState != cur {
		// The kernel drivers (rxe included) take cur_qp_state as the
		// current state when given; a simulator knows the state, so a
		// mismatch is the caller's mistake and is refused.
		return fail("cur_qp_state %v does not match the QP's state %v", attr.CurQPState, cur)
	}
	if mask&QPAttrAccessFlags != 0 && attr.QPAccessFlags&^qpAccessDefined != 0 {
		return fail("qp_access_flags %#x has undefined bits %#x",
			uint32(attr.QPAccessFlags), uint32(attr.QPAccessFlags&^qpAccessDefined))
	}
	if mask&QPAttrPKeyIndex != 0 && attr.PKeyIndex >= lim.PKeyTableLen {
		if lim.PKeyTableLen == 0 {
			return fail("pkey_index %d: the P_Key table is empty", attr.PKeyIndex)
		}
		return fail("pkey_index %d out of range 0..%d", attr.PKeyIndex, lim.PKeyTableLen-1)
	}
	if mask&QPAttrPort != 0 && (attr.PortNum < 1 || attr.PortNum > lim.PortCount) {
		// Ports are numbered from 1, as rdma_is_port_valid() checks.
		if lim.PortCount == 0 {
			return fail("port_num %d: the device has no ports", attr.PortNum)
		}
		return fail("port_num %d out of range 1..%d", attr.PortNum, lim.PortCount)
	}
	if mask&QPAttrAV != 0 {
		// RoCE carries the GRH in the IP header: every address vector is
		// global, and its DGID is the peer's IP address (Annex A17).
		if !attr.AHAttr.IsGlobal {
			return fail("ah_attr.is_global is 0 (RoCE needs a GRH)")
		}
		if !attr.AHAttr.GRH.DGID.IsValid() {
			return fail("ah_attr.grh.dgid is not set")
		}
	}
	if mask&QPAttrPathMTU != 0 && (attr.PathMTU < MTU256 || attr.PathMTU > MTU4096) {
		return fail("path_mtu %d out of range %d..%d", attr.PathMTU, MTU256, MTU4096)
	}
	if mask&QPAttrTimeout != 0 && attr.Timeout > maxTimeout {
		return fail("timeout %d out of range 0..%d", attr.Timeout, maxTimeout)
	}
	if mask&QPAttrRetryCnt != 0 && attr.RetryCnt > maxRetryCnt {
		return fail("retry_cnt %d out of range 0..%d", attr.RetryCnt, maxRetryCnt)
	}
	if mask&QPAttrRNRRetry != 0 && attr.RNRRetry > maxRNRRetry {
		return fail("rnr_retry %d out of range 0..%d", attr.RNRRetry, maxRNRRetry)
	}
	if mask&QPAttrRQPSN != 0 && attr.RQPSN > max24 {
		return fail("rq_psn %#x out of range 0..%#x", attr.RQPSN, max24)
	}
	if mask&QPAttrMaxQPRdAtomic != 0 && attr.MaxRdAtomic > lim.MaxQPRdAtom {
		return fail("max_rd_atomic %d out of range 0..%d", attr.MaxRdAtomic, lim.MaxQPRdAtom)
	}
	if mask&QPAttrAltPath != 0 {
		// The table permits an alternate path, but the kernel core
		// refuses one unless both ports are InfiniBand: "Today the core
		// code can only handle alternate paths and APM for IB. Ban them
		// in roce mode." (_ib_modify_qp in verbs.c).
		return fail("attribute ALT_PATH not supported on RoCE")
	}
	if mask&QPAttrMinRNRTimer != 0 && attr.MinRNRTimer > maxMinRNRTimer {
		return fail("min_rnr_timer %d out of range 0..%d", attr.MinRNRTimer, maxMinRNRTimer)
	}
	if mask&QPAttrSQPSN != 0 && attr.SQPSN > max24 {
		return fail("sq_psn %#x out of range 0..%#x", attr.SQPSN, max24)
	}
	if mask&QPAttrMaxDestRdAtomic != 0 && attr.MaxDestRdAtomic > lim.MaxQPInitRdAtom {
		return fail("max_dest_rd_atomic %d out of range 0..%d", attr.MaxDestRdAtomic, lim.MaxQPInitRdAtom)
	}
	if mask&QPAttrDestQPN != 0 && attr.DestQPNum > max24 {
		return fail("dest_qp_num %#x out of range 0..%#x", attr.DestQPNum, max24)
	}
	return next, nil
}

// qpAttrMaskNames are the libibverbs names of the mask bits without their
// IBV_QP_ prefix, by bit number; bits 21 to 24 have no name.
var qpAttrMaskNames = [...]string{
	0:  "STATE",
	1:  "CUR_STATE",
	2:  "EN_SQD_ASYNC_NOTIFY",
	3:  "ACCESS_FLAGS",
	4:  "PKEY_INDEX",
	5:  "PORT",
	6:  "QKEY",
	7:  "AV",
	8:  "PATH_MTU",
	9:  "TIMEOUT",
	10: "RETRY_CNT",
	11: "RNR_RETRY",
	12: "RQ_PSN",
	13: "MAX_QP_RD_ATOMIC",
	14: "ALT_PATH",
	15: "MIN_RNR_TIMER",
	16: "SQ_PSN",
	17: "MAX_DEST_RD_ATOMIC",
	18: "PATH_MIG_STATE",
	19: "CAP",
	20: "DEST_QPN",
	25: "RATE_LIMIT",
}

// lowestBit returns the lowest set bit of a non-zero mask.
func lowestBit(m QPAttrMask) QPAttrMask { return m & -m }

// maskBitName names one mask bit: its libibverbs name, or "BIT<n>" for a
// bit libibverbs does not define.
func maskBitName(b QPAttrMask) string {
	n := bits.TrailingZeros32(uint32(b))
	if n < len(qpAttrMaskNames) && qpAttrMaskNames[n] != "" {
		return qpAttrMaskNames[n]
	}
	return "BIT" + strconv.Itoa(n)
}

// MaskNames formats a mask as "STATE|PKEY_INDEX|PORT" (libibverbs names
// without IBV_QP_, lowest bit first), for messages and tests. A bit
// libibverbs does not define is written "BIT<n>"; the empty mask is "0".
func MaskNames(m QPAttrMask) string {
	if m == 0 {
		return "0"
	}
	var sb strings.Builder
	for m != 0 {
		b := lowestBit(m)
		m &^= b
		if sb.Len() > 0 {
			sb.WriteByte('|')
		}
		sb.WriteString(maskBitName(b))
	}
	return sb.String()
}
