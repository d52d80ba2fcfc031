package nic

import (
	"net/netip"
	"strconv"
)

// The vocabulary of libibverbs, with the numeric values of
// <infiniband/verbs.h> so that traces and tests line up with C programs.
// Package verbs re-exports these names.

// QPType is the transport service of a queue pair.
type QPType uint8

// QP types (ibv_qp_type values).
const (
	QPTypeRC QPType = 2
	QPTypeUC QPType = 3
	QPTypeUD QPType = 4
)

// String returns the name of the QPType, for traces and messages.
func (t QPType) String() string {
	switch t {
	case QPTypeRC:
		return "RC"
	case QPTypeUC:
		return "UC"
	case QPTypeUD:
		return "UD"
	}
	return "QPType(" + itoa(int(t)) + ")"
}

// QPState is a queue pair state (IBTA vol. 1 §10.3.1, ibv_qp_state).
type QPState uint8

// QP states.
const (
	QPStateReset QPState = iota
	QPStateInit
	QPStateRTR
	QPStateRTS
	QPStateSQD
	QPStateSQE
	QPStateErr
)

var qpStateNames = [...]string{"RESET", "INIT", "RTR", "RTS", "SQD", "SQE", "ERR"}

// String returns the name of the QPState, for traces and messages.
func (s QPState) String() string {
	if int(s) < len(qpStateNames) {
		return qpStateNames[s]
	}
	return "QPState(" + itoa(int(s)) + ")"
}

// MTU is an encoded path MTU (ibv_mtu).
type MTU uint8

// Path MTUs.
const (
	MTU256  MTU = 1
	MTU512  MTU = 2
	MTU1024 MTU = 3
	MTU2048 MTU = 4
	MTU4096 MTU = 5
)

// Bytes returns the MTU in bytes, or 0 for an invalid code.
func (m MTU) Bytes() int {
	if m < MTU256 || m > MTU4096 {
		return 0
	}
	return 128 << m
}

// AccessFlags are memory region and QP access rights (ibv_access_flags).
type AccessFlags uint32

// Access flags.
const (
	AccessLocalWrite   AccessFlags = 1 << 0
	AccessRemoteWrite  AccessFlags = 1 << 1
	AccessRemoteRead   AccessFlags = 1 << 2
	AccessRemoteAtomic AccessFlags = 1 << 3
	// AccessMWBind lets memory windows be bound to the region.
	AccessMWBind AccessFlags = 1 << 4
	// AccessZeroBased asks for a zero-based window (not modelled: refused).
	AccessZeroBased AccessFlags = 1 << 5
)

// QPAttrMask says which QPAttr fields a Modify call sets (ibv_qp_attr_mask).
type QPAttrMask uint32

// Attribute mask bits.
const (
	QPAttrState            QPAttrMask = 1 << 0
	QPAttrCurState         QPAttrMask = 1 << 1
	QPAttrEnSQDAsyncNotify QPAttrMask = 1 << 2
	QPAttrAccessFlags      QPAttrMask = 1 << 3
	QPAttrPKeyIndex        QPAttrMask = 1 << 4
	QPAttrPort             QPAttrMask = 1 << 5
	QPAttrQKey             QPAttrMask = 1 << 6
	QPAttrAV               QPAttrMask = 1 << 7
	QPAttrPathMTU          QPAttrMask = 1 << 8
	QPAttrTimeout          QPAttrMask = 1 << 9
	QPAttrRetryCnt         QPAttrMask = 1 << 10
	QPAttrRNRRetry         QPAttrMask = 1 << 11
	QPAttrRQPSN            QPAttrMask = 1 << 12
	QPAttrMaxQPRdAtomic    QPAttrMask = 1 << 13
	QPAttrAltPath          QPAttrMask = 1 << 14
	QPAttrMinRNRTimer      QPAttrMask = 1 << 15
	QPAttrSQPSN            QPAttrMask = 1 << 16
	QPAttrMaxDestRdAtomic  QPAttrMask = 1 << 17
	QPAttrPathMigState     QPAttrMask = 1 << 18
	QPAttrCap              QPAttrMask = 1 << 19
	QPAttrDestQPN          QPAttrMask = 1 << 20
	QPAttrRateLimit        QPAttrMask = 1 << 25
)

// GRH is the global route of an address vector; RoCE v2 always has one:
// the destination GID is the peer's IP address (IPv4-mapped for IPv4).
type GRH struct {
	DGID         netip.Addr
	FlowLabel    uint32 // 0: derive the UDP source port from the QPNs, as rxe does
	SGIDIndex    uint8
	HopLimit     uint8
	TrafficClass uint8
}

// AHAttr is an address vector (ibv_ah_attr).
type AHAttr struct {
	GRH         GRH
	IsGlobal    bool // must be true on RoCE
	DLID        uint16
	SL          uint8
	SrcPathBits uint8
	StaticRate  uint8
	PortNum     uint8
}

// QPCap are a queue pair's queue sizes (ibv_qp_cap).
type QPCap struct {
	MaxSendWR     uint32
	MaxRecvWR     uint32
	MaxSendSGE    uint32
	MaxRecvSGE    uint32
	MaxInlineData uint32
}

// QPAttr are the attributes Modify sets and Query reports (ibv_qp_attr).
type QPAttr struct {
	QPState          QPState
	CurQPState       QPState
	PathMTU          MTU
	PathMigState     uint8
	QKey             uint32
	RQPSN            uint32
	SQPSN            uint32
	DestQPNum        uint32
	QPAccessFlags    AccessFlags
	Cap              QPCap
	AHAttr           AHAttr
	AltAHAttr        AHAttr
	PKeyIndex        uint16
	AltPKeyIndex     uint16
	EnSQDAsyncNotify bool
	SQDraining       bool
	MaxRdAtomic      uint8
	MaxDestRdAtomic  uint8
	MinRNRTimer      uint8
	PortNum          uint8
	Timeout          uint8
	RetryCnt         uint8
	RNRRetry         uint8
	AltPortNum       uint8
	AltTimeout       uint8
	RateLimit        uint32
}

// WROpcode is a send work request's operation (ibv_wr_opcode).
type WROpcode uint8

// Send work request opcodes.
const (
	WRRDMAWrite         WROpcode = 0
	WRRDMAWriteWithImm  WROpcode = 1
	WRSend              WROpcode = 2
	WRSendWithImm       WROpcode = 3
	WRRDMARead          WROpcode = 4
	WRAtomicCmpAndSwp   WROpcode = 5
	WRAtomicFetchAndAdd WROpcode = 6
	WRLocalInv          WROpcode = 7
	WRBindMW            WROpcode = 8
	WRSendWithInv       WROpcode = 9
)

var wrOpcodeNames = [...]string{"RDMA_WRITE", "RDMA_WRITE_WITH_IMM", "SEND", "SEND_WITH_IMM", "RDMA_READ",
	"ATOMIC_CMP_AND_SWP", "ATOMIC_FETCH_AND_ADD", "LOCAL_INV", "BIND_MW", "SEND_WITH_INV"}

// String returns the name of the WROpcode, for traces and messages.
func (o WROpcode) String() string {
	if int(o) < len(wrOpcodeNames) {
		return "IBV_WR_" + wrOpcodeNames[o]
	}
	return "WROpcode(" + itoa(int(o)) + ")"
}

// SendFlags modify a send work request (ibv_send_flags).
type SendFlags uint32

// Send flags.
const (
	SendFence     SendFlags = 1 << 0
	SendSignaled  SendFlags = 1 << 1
	SendSolicited SendFlags = 1 << 2
	SendInline    SendFlags = 1 << 3
)

// SGE is a scatter/gather element: Length bytes at Addr in the memory
// region whose local key is LKey. A Length of 0 means 2^31 bytes, as the
// IBTA and rxe read it.
type SGE struct {
	Addr   uint64
	Length uint32
	LKey   uint32
}

// SendWR is a send work request (ibv_send_wr without the list link: a
// post takes a slice).
type SendWR struct {
	WRID    uint64
	SGList  []SGE
	Opcode  WROpcode
	Flags   SendFlags
	ImmData uint32 // network order on the wire, as imm_data

	// RDMA READ/WRITE.
	RemoteAddr uint64
	RKey       uint32
	// Atomics: the target address and key are RemoteAddr and RKey.
	CompareAdd uint64
	Swap       uint64
	// UD.
	AH         *AH
	RemoteQPN  uint32
	RemoteQKey uint32
	// SEND_WITH_INV and LOCAL_INV: the R_Key to invalidate.
	InvalidateRKey uint32
	// BIND_MW.
	BindMW BindMW
}

// RecvWR is a receive work request.
type RecvWR struct {
	WRID   uint64
	SGList []SGE
}

// WCStatus is a work completion's status (ibv_wc_status).
type WCStatus uint8

// Completion statuses.
const (
	WCSuccess WCStatus = iota
	WCLocLenErr
	WCLocQPOpErr
	WCLocEECOpErr
	WCLocProtErr
	WCWRFlushErr
	WCMWBindErr
	WCBadRespErr
	WCLocAccessErr
	WCRemInvReqErr
	WCRemAccessErr
	WCRemOpErr
	WCRetryExcErr
	WCRNRRetryExcErr
	WCLocRDDViolErr
	WCRemInvRDReqErr
	WCRemAbortErr
	WCInvEECNErr
	WCInvEECStateErr
	WCFatalErr
	WCRespTimeoutErr
	WCGeneralErr
	WCTMErr
	WCTMRndvIncomplete
)

// WCOpcode is what a completion completed (ibv_wc_opcode).
type WCOpcode uint8

// Completion opcodes.
const (
	WCSend            WCOpcode = 0
	WCRDMAWrite       WCOpcode = 1
	WCRDMARead        WCOpcode = 2
	WCCompSwap        WCOpcode = 3
	WCFetchAdd        WCOpcode = 4
	WCBindMW          WCOpcode = 5
	WCLocalInv        WCOpcode = 6
	WCRecv            WCOpcode = 128
	WCRecvRDMAWithImm WCOpcode = 129
)

// WCFlags describe a completion (ibv_wc_flags).
type WCFlags uint32

// Completion flags, libibverbs' values (enum ibv_wc_flags).
const (
	WCFlagGRH     WCFlags = 1 << 0 // IBV_WC_GRH
	WCFlagWithImm WCFlags = 1 << 1 // IBV_WC_WITH_IMM
	// WCFlagIPCSumOK is IBV_WC_IP_CSUM_OK. The model checks no IP
	// checksums; it sets this bit only under ProfileRXE, on a receive that
	// invalidated an R_Key, because that is where rxe's flag lands (see
	// WC.Invalidated).
	WCFlagIPCSumOK WCFlags = 1 << 2
	WCFlagWithInv  WCFlags = 1 << 3 // IBV_WC_WITH_INV
)

// invalidatedFlag is the wc_flags bit a receive that invalidated an R_Key
// carries under p. rxe_resp.c do_complete sets the kernel's
// IB_WC_WITH_INVALIDATE (include/rdma/ib_verbs.h, 1<<2) in the
// struct ib_uverbs_wc it hands to user space, and libibverbs reads that
// bit as IBV_WC_IP_CSUM_OK: a program on rxe never sees IBV_WC_WITH_INV
// (1<<3). ProfileSpec sets IBV_WC_WITH_INV, which is what libibverbs
// means (measured on rxe 6.1 by conformance's TestInteropUDP).
func invalidatedFlag(p Profile) WCFlags {
	if p == ProfileRXE {
		return WCFlagIPCSumOK
	}
	return WCFlagWithInv
}

// recvFlags are the wc_flags every successful receive completion carries
// under p. rxe_resp.c do_complete starts a user CQE's flags at
// IB_WC_GRH whatever the QP type (libibverbs says the flag means
// something only for UD), so under ProfileRXE an RC or UC receive has
// WCFlagGRH too; ProfileSpec sets it on UD receives only.
func recvFlags(p Profile) WCFlags {
	if p == ProfileRXE {
		return WCFlagGRH
	}
	return 0
}

// sendFlags are the wc_flags of a successful send-side completion of op
// under p. rxe_comp.c make_send_cqe sets IB_WC_WITH_IMM on the completion
// of a SEND or WRITE with immediate (imm_data left zero), measured on rxe
// 6.1 by TestInteropUDP; ProfileSpec sets none, libibverbs giving the
// flag a meaning on receives only.
func sendFlags(p Profile, op WROpcode) WCFlags {
	if p == ProfileRXE && (op == WRSendWithImm || op == WRRDMAWriteWithImm) {
		return WCFlagWithImm
	}
	return 0
}

// Invalidated reports whether wc is a receive whose SEND WITH INVALIDATE
// invalidated an R_Key, the one in ImmData (ibv_wc's invalidated_rkey),
// under either profile: WCFlagWithInv, or under ProfileRXE
// WCFlagIPCSumOK, which the model sets on nothing else.
func (wc *WC) Invalidated() bool {
	return wc.Opcode == WCRecv && wc.WCFlags&(WCFlagWithInv|WCFlagIPCSumOK) != 0
}

// WC is a work completion (ibv_wc).
type WC struct {
	WRID         uint64
	Status       WCStatus
	Opcode       WCOpcode
	VendorErr    uint32
	ByteLen      uint32 // send side: depends on the Profile (see the package doc)
	ImmData      uint32 // or the invalidated R_Key when Invalidated()
	QPNum        uint32
	SrcQP        uint32
	WCFlags      WCFlags
	PKeyIndex    uint16
	SLID         uint16
	SL           uint8
	DLIDPathBits uint8
}

// AsyncEventType is an affiliated or unaffiliated asynchronous event
// (ibv_event_type).
type AsyncEventType uint8

// Asynchronous events.
const (
	EventCQErr            AsyncEventType = 0
	EventQPFatal          AsyncEventType = 1
	EventQPReqErr         AsyncEventType = 2
	EventQPAccessErr      AsyncEventType = 3
	EventCommEst          AsyncEventType = 4
	EventSQDrained        AsyncEventType = 5
	EventPathMig          AsyncEventType = 6
	EventPathMigErr       AsyncEventType = 7
	EventDeviceFatal      AsyncEventType = 8
	EventPortActive       AsyncEventType = 9
	EventPortErr          AsyncEventType = 10
	EventLIDChange        AsyncEventType = 11
	EventPKeyChange       AsyncEventType = 12
	EventSMChange         AsyncEventType = 13
	EventSRQErr           AsyncEventType = 14
	EventSRQLimitReached  AsyncEventType = 15
	EventQPLastWQEReached AsyncEventType = 16
	EventClientReregister AsyncEventType = 17
	EventGIDChange        AsyncEventType = 18
)

var eventNames = [...]string{"CQ_ERR", "QP_FATAL", "QP_REQ_ERR", "QP_ACCESS_ERR", "COMM_EST", "SQ_DRAINED",
	"PATH_MIG", "PATH_MIG_ERR", "DEVICE_FATAL", "PORT_ACTIVE", "PORT_ERR", "LID_CHANGE", "PKEY_CHANGE",
	"SM_CHANGE", "SRQ_ERR", "SRQ_LIMIT_REACHED", "QP_LAST_WQE_REACHED", "CLIENT_REREGISTER", "GID_CHANGE"}

// String returns the libibverbs name without its prefix, e.g. "CQ_ERR".
func (e AsyncEventType) String() string {
	if int(e) < len(eventNames) {
		return eventNames[e]
	}
	return "AsyncEventType(" + itoa(int(e)) + ")"
}

func itoa(n int) string { return strconv.Itoa(n) }

// AH is an address handle (ibv_ah): an address vector created in a
// protection domain, named by UD send work requests.
type AH struct {
	Attr AHAttr
	pd   *PD
	dead bool
}

// PD is a protection domain (ibv_pd).
type PD struct {
	dev  *Device
	refs int // MRs, QPs, SRQs and AHs created in it
	dead bool
}
