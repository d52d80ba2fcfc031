package verbs

import "github.com/rocesim/rocesim/nic"

// The libibverbs vocabulary
//
// The types below are aliases of package nic's, so that the NIC model and
// the user's API speak one language and a value passes between them
// without conversion; the constants have the numeric values of
// <infiniband/verbs.h> (vocab_test.go checks every enum of the header the
// model uses, name by name, and lists the ones it leaves out and why).
// Each alias's comment lists its fields, since go doc shows an alias's
// comment and not the fields of the type it names: `go doc
// github.com/rocesim/rocesim/nic WC` shows the definition.

// QPType is a QP's transport service (enum ibv_qp_type): QPTypeRC,
// QPTypeUC or QPTypeUD.
type QPType = nic.QPType

// QPState is a QP state (enum ibv_qp_state, IBTA vol. 1 §10.3.1):
// QPStateReset through QPStateErr. QP.State returns it; String gives
// "RTS".
type QPState = nic.QPState

// MTU is an encoded path MTU (enum ibv_mtu), MTU256 to MTU4096;
// MTU.Bytes gives the size in bytes.
type MTU = nic.MTU

// AccessFlags are the access rights of an MR, MW or QP (enum
// ibv_access_flags): AccessLocalWrite, AccessRemoteWrite,
// AccessRemoteRead, AccessRemoteAtomic, AccessMWBind, AccessZeroBased.
type AccessFlags = nic.AccessFlags

// QPAttrMask says which QPAttr fields QP.Modify sets (enum
// ibv_qp_attr_mask): QPAttrState, QPAttrAccessFlags, QPAttrAV, ….
type QPAttrMask = nic.QPAttrMask

// QPAttr are the attributes QP.Modify sets and QP.Query reports (struct
// ibv_qp_attr). Fields, with their libibverbs names: QPState (qp_state),
// CurQPState (cur_qp_state), PathMTU (path_mtu), PathMigState, QKey
// (qkey), RQPSN (rq_psn), SQPSN (sq_psn), DestQPNum (dest_qp_num),
// QPAccessFlags (qp_access_flags), Cap (QPCap), AHAttr (ah_attr: the
// peer's GID in AHAttr.GRH.DGID), AltAHAttr, PKeyIndex, AltPKeyIndex,
// EnSQDAsyncNotify, SQDraining, MaxRdAtomic (max_rd_atomic),
// MaxDestRdAtomic (max_dest_rd_atomic), MinRNRTimer (min_rnr_timer, a
// code), PortNum (port_num), Timeout (timeout, the exponent of 4.096 µs),
// RetryCnt (retry_cnt), RNRRetry (rnr_retry), AltPortNum, AltTimeout,
// RateLimit.
type QPAttr = nic.QPAttr

// QPCap are a QP's queue sizes (struct ibv_qp_cap): MaxSendWR,
// MaxRecvWR, MaxSendSGE, MaxRecvSGE, MaxInlineData.
type QPCap = nic.QPCap

// AHAttr is an address vector (struct ibv_ah_attr): GRH (the global
// route; RoCE always has one), IsGlobal (must be true on RoCE), DLID,
// SL, SrcPathBits, StaticRate, PortNum.
type AHAttr = nic.AHAttr

// GRH is the global route of an address vector (struct ibv_global_route):
// DGID (the peer's IP address, IPv4-mapped for IPv4, as a netip.Addr),
// FlowLabel (0: the UDP source port is derived from the QPNs, as rxe
// does), SGIDIndex (1 is the IPv4 GID), HopLimit, TrafficClass.
type GRH = nic.GRH

// WROpcode is a send work request's operation (enum ibv_wr_opcode):
// WRSend, WRRDMAWrite, WRRDMARead, the atomics, ….
type WROpcode = nic.WROpcode

// SendFlags modify a send work request (enum ibv_send_flags):
// SendSignaled, SendFence, SendSolicited, SendInline.
type SendFlags = nic.SendFlags

// SGE is a scatter/gather element (struct ibv_sge): Addr, Length and
// LKey (the MR's local key). MR.SGE makes one. A Length of 0 means 2^31
// bytes, as the IBTA and rxe read it.
type SGE = nic.SGE

// RecvWR is a receive work request (struct ibv_recv_wr without the list
// link): WRID and SGList.
type RecvWR = nic.RecvWR

// WC is a work completion (struct ibv_wc), what CQ.Poll fills in.
// Fields, with their libibverbs names: WRID (wr_id), Status (status, a
// WCStatus: Name gives "IBV_WC_SUCCESS", String the text of
// ibv_wc_status_str), Opcode (opcode; valid only for a successful
// completion, as in libibverbs), VendorErr (vendor_err), ByteLen
// (byte_len), ImmData (imm_data, or the invalidated R_Key when
// Invalidated reports true), QPNum (qp_num), SrcQP (src_qp), WCFlags (wc_flags),
// PKeyIndex (pkey_index), SLID (slid), SL (sl), DLIDPathBits
// (dlid_path_bits).
type WC = nic.WC

// WCStatus is a work completion's status (enum ibv_wc_status):
// WCSuccess, then the errors, WCLocLenErr to WCTMRndvIncomplete. Name
// returns the C name ("IBV_WC_RETRY_EXC_ERR"), String the text
// ibv_wc_status_str gives.
type WCStatus = nic.WCStatus

// WCOpcode is what a completion completed (enum ibv_wc_opcode): WCSend,
// WCRDMAWrite, WCRDMARead, WCCompSwap, WCFetchAdd, WCBindMW, WCLocalInv,
// and for receives WCRecv and WCRecvRDMAWithImm (both with bit 7 set, so
// opcode&WCRecv tells a receive, as in C).
type WCOpcode = nic.WCOpcode

// WCFlags describe a completion (enum ibv_wc_flags): WCFlagGRH,
// WCFlagWithImm, WCFlagIPCSumOK, WCFlagWithInv. A receive that
// invalidated an R_Key carries WCFlagIPCSumOK under the rxe profile, as
// on rxe, and WCFlagWithInv under the spec profile (see the nic package
// doc); WC.Invalidated tells it under either.
type WCFlags = nic.WCFlags

// AsyncEventType is the type of an asynchronous event (enum
// ibv_event_type): EventCQErr to EventGIDChange.
type AsyncEventType = nic.AsyncEventType

// AsyncEvent is an asynchronous event (struct ibv_async_event), as
// Context.GetAsyncEvent returns it: Type, and the element it concerns, QP
// (a *nic.QP: compare with QP.Is), CQ, SRQ or Port, and Time, the
// virtual time it was raised.
type AsyncEvent = nic.AsyncEvent

// DeviceAttr are the device's limits (struct ibv_device_attr), rxe's
// values: FWVer, NodeGUID, MaxMRSize, MaxQP, MaxQPWR, MaxSGE, MaxCQ,
// MaxCQE, MaxMR, MaxPD, MaxQPRdAtom, MaxQPInitRdAtom, MaxSRQ, MaxSRQWR,
// MaxSRQSGE, MaxAH, MaxMW, MaxInlineData, PhysPortCnt, AtomicCap.
type DeviceAttr = nic.DeviceAttr

// PortAttr describe the port (struct ibv_port_attr): State
// (PortStateActive or PortStateDown, as a string), MaxMTU, ActiveMTU,
// GIDTblLen, PKeyTblLen, LinkLayer ("Ethernet").
type PortAttr = nic.PortAttr

// SRQAttr are a shared receive queue's attributes (struct ibv_srq_attr),
// for CreateSRQ, SRQ.Modify and SRQ.Query: MaxWR, MaxSGE, SRQLimit (the
// low-water mark that raises EventSRQLimitReached once armed).
type SRQAttr = nic.SRQInitAttr

// SRQAttrMask says what SRQ.Modify changes (enum ibv_srq_attr_mask):
// SRQAttrMaxWR, SRQAttrLimit.
type SRQAttrMask = nic.SRQAttrMask

// Profile chooses the NIC's behaviour where rxe and the IBTA spec differ:
// ProfileRXE (the default) or ProfileSpec.
type Profile = nic.Profile

// MWType is a memory window's type (enum ibv_mw_type): MWType1, MWType2.
type MWType = nic.MWType

// Counters are the port's counters, with rxe's hw_counters names
// (Context.Counters): Get("rcvd_rnr_err"), Names, Snapshot.
type Counters = nic.Counters

// QP types (enum ibv_qp_type).
const (
	QPTypeRC = nic.QPTypeRC // IBV_QPT_RC
	QPTypeUC = nic.QPTypeUC // IBV_QPT_UC
	QPTypeUD = nic.QPTypeUD // IBV_QPT_UD
)

// QP states (enum ibv_qp_state).
const (
	QPStateReset = nic.QPStateReset // IBV_QPS_RESET
	QPStateInit  = nic.QPStateInit  // IBV_QPS_INIT
	QPStateRTR   = nic.QPStateRTR   // IBV_QPS_RTR
	QPStateRTS   = nic.QPStateRTS   // IBV_QPS_RTS
	QPStateSQD   = nic.QPStateSQD   // IBV_QPS_SQD
	QPStateSQE   = nic.QPStateSQE   // IBV_QPS_SQE
	QPStateErr   = nic.QPStateErr   // IBV_QPS_ERR
)

// Path MTUs (enum ibv_mtu).
const (
	MTU256  = nic.MTU256  // IBV_MTU_256
	MTU512  = nic.MTU512  // IBV_MTU_512
	MTU1024 = nic.MTU1024 // IBV_MTU_1024
	MTU2048 = nic.MTU2048 // IBV_MTU_2048
	MTU4096 = nic.MTU4096 // IBV_MTU_4096
)

// Port states, as PortAttr.State spells them (enum ibv_port_state's
// IBV_PORT_DOWN and IBV_PORT_ACTIVE: an rxe port is active while its
// netdev has carrier, down otherwise, and never in the InfiniBand
// subnet manager's INIT or ARMED).
const (
	PortStateDown   = "DOWN"
	PortStateActive = "ACTIVE"
)

// Access flags (enum ibv_access_flags).
const (
	AccessLocalWrite   = nic.AccessLocalWrite   // IBV_ACCESS_LOCAL_WRITE
	AccessRemoteWrite  = nic.AccessRemoteWrite  // IBV_ACCESS_REMOTE_WRITE
	AccessRemoteRead   = nic.AccessRemoteRead   // IBV_ACCESS_REMOTE_READ
	AccessRemoteAtomic = nic.AccessRemoteAtomic // IBV_ACCESS_REMOTE_ATOMIC
	AccessMWBind       = nic.AccessMWBind       // IBV_ACCESS_MW_BIND
	AccessZeroBased    = nic.AccessZeroBased    // IBV_ACCESS_ZERO_BASED (refused: not modelled)
)

// Memory window types (enum ibv_mw_type).
const (
	MWType1 = nic.MWType1 // IBV_MW_TYPE_1
	MWType2 = nic.MWType2 // IBV_MW_TYPE_2
)

// QP attribute mask bits (enum ibv_qp_attr_mask).
const (
	QPAttrState            = nic.QPAttrState            // IBV_QP_STATE
	QPAttrCurState         = nic.QPAttrCurState         // IBV_QP_CUR_STATE
	QPAttrEnSQDAsyncNotify = nic.QPAttrEnSQDAsyncNotify // IBV_QP_EN_SQD_ASYNC_NOTIFY
	QPAttrAccessFlags      = nic.QPAttrAccessFlags      // IBV_QP_ACCESS_FLAGS
	QPAttrPKeyIndex        = nic.QPAttrPKeyIndex        // IBV_QP_PKEY_INDEX
	QPAttrPort             = nic.QPAttrPort             // IBV_QP_PORT
	QPAttrQKey             = nic.QPAttrQKey             // IBV_QP_QKEY
	QPAttrAV               = nic.QPAttrAV               // IBV_QP_AV
	QPAttrPathMTU          = nic.QPAttrPathMTU          // IBV_QP_PATH_MTU
	QPAttrTimeout          = nic.QPAttrTimeout          // IBV_QP_TIMEOUT
	QPAttrRetryCnt         = nic.QPAttrRetryCnt         // IBV_QP_RETRY_CNT
	QPAttrRNRRetry         = nic.QPAttrRNRRetry         // IBV_QP_RNR_RETRY
	QPAttrRQPSN            = nic.QPAttrRQPSN            // IBV_QP_RQ_PSN
	QPAttrMaxQPRdAtomic    = nic.QPAttrMaxQPRdAtomic    // IBV_QP_MAX_QP_RD_ATOMIC
	QPAttrAltPath          = nic.QPAttrAltPath          // IBV_QP_ALT_PATH
	QPAttrMinRNRTimer      = nic.QPAttrMinRNRTimer      // IBV_QP_MIN_RNR_TIMER
	QPAttrSQPSN            = nic.QPAttrSQPSN            // IBV_QP_SQ_PSN
	QPAttrMaxDestRdAtomic  = nic.QPAttrMaxDestRdAtomic  // IBV_QP_MAX_DEST_RD_ATOMIC
	QPAttrPathMigState     = nic.QPAttrPathMigState     // IBV_QP_PATH_MIG_STATE
	QPAttrCap              = nic.QPAttrCap              // IBV_QP_CAP
	QPAttrDestQPN          = nic.QPAttrDestQPN          // IBV_QP_DEST_QPN
	QPAttrRateLimit        = nic.QPAttrRateLimit        // IBV_QP_RATE_LIMIT
)

// Send work request opcodes (enum ibv_wr_opcode).
const (
	WRRDMAWrite         = nic.WRRDMAWrite         // IBV_WR_RDMA_WRITE
	WRRDMAWriteWithImm  = nic.WRRDMAWriteWithImm  // IBV_WR_RDMA_WRITE_WITH_IMM
	WRSend              = nic.WRSend              // IBV_WR_SEND
	WRSendWithImm       = nic.WRSendWithImm       // IBV_WR_SEND_WITH_IMM
	WRRDMARead          = nic.WRRDMARead          // IBV_WR_RDMA_READ
	WRAtomicCmpAndSwp   = nic.WRAtomicCmpAndSwp   // IBV_WR_ATOMIC_CMP_AND_SWP
	WRAtomicFetchAndAdd = nic.WRAtomicFetchAndAdd // IBV_WR_ATOMIC_FETCH_AND_ADD
	WRLocalInv          = nic.WRLocalInv          // IBV_WR_LOCAL_INV
	WRBindMW            = nic.WRBindMW            // IBV_WR_BIND_MW
	WRSendWithInv       = nic.WRSendWithInv       // IBV_WR_SEND_WITH_INV
)

// Send flags (enum ibv_send_flags).
const (
	SendFence     = nic.SendFence     // IBV_SEND_FENCE
	SendSignaled  = nic.SendSignaled  // IBV_SEND_SIGNALED
	SendSolicited = nic.SendSolicited // IBV_SEND_SOLICITED
	SendInline    = nic.SendInline    // IBV_SEND_INLINE
)

// Completion statuses (enum ibv_wc_status). rxe produces some of them
// only: the others (the EEC and RDD ones, which belong to the reliable
// datagram service, the tag-matching ones) are here so that code ported
// from C compiles and a switch over statuses can name them.
const (
	WCSuccess          = nic.WCSuccess          // IBV_WC_SUCCESS
	WCLocLenErr        = nic.WCLocLenErr        // IBV_WC_LOC_LEN_ERR
	WCLocQPOpErr       = nic.WCLocQPOpErr       // IBV_WC_LOC_QP_OP_ERR
	WCLocEECOpErr      = nic.WCLocEECOpErr      // IBV_WC_LOC_EEC_OP_ERR
	WCLocProtErr       = nic.WCLocProtErr       // IBV_WC_LOC_PROT_ERR
	WCWRFlushErr       = nic.WCWRFlushErr       // IBV_WC_WR_FLUSH_ERR
	WCMWBindErr        = nic.WCMWBindErr        // IBV_WC_MW_BIND_ERR
	WCBadRespErr       = nic.WCBadRespErr       // IBV_WC_BAD_RESP_ERR
	WCLocAccessErr     = nic.WCLocAccessErr     // IBV_WC_LOC_ACCESS_ERR
	WCRemInvReqErr     = nic.WCRemInvReqErr     // IBV_WC_REM_INV_REQ_ERR
	WCRemAccessErr     = nic.WCRemAccessErr     // IBV_WC_REM_ACCESS_ERR
	WCRemOpErr         = nic.WCRemOpErr         // IBV_WC_REM_OP_ERR
	WCRetryExcErr      = nic.WCRetryExcErr      // IBV_WC_RETRY_EXC_ERR
	WCRNRRetryExcErr   = nic.WCRNRRetryExcErr   // IBV_WC_RNR_RETRY_EXC_ERR
	WCLocRDDViolErr    = nic.WCLocRDDViolErr    // IBV_WC_LOC_RDD_VIOL_ERR
	WCRemInvRDReqErr   = nic.WCRemInvRDReqErr   // IBV_WC_REM_INV_RD_REQ_ERR
	WCRemAbortErr      = nic.WCRemAbortErr      // IBV_WC_REM_ABORT_ERR
	WCInvEECNErr       = nic.WCInvEECNErr       // IBV_WC_INV_EECN_ERR
	WCInvEECStateErr   = nic.WCInvEECStateErr   // IBV_WC_INV_EEC_STATE_ERR
	WCFatalErr         = nic.WCFatalErr         // IBV_WC_FATAL_ERR
	WCRespTimeoutErr   = nic.WCRespTimeoutErr   // IBV_WC_RESP_TIMEOUT_ERR
	WCGeneralErr       = nic.WCGeneralErr       // IBV_WC_GENERAL_ERR
	WCTMErr            = nic.WCTMErr            // IBV_WC_TM_ERR
	WCTMRndvIncomplete = nic.WCTMRndvIncomplete // IBV_WC_TM_RNDV_INCOMPLETE
)

// Completion opcodes (enum ibv_wc_opcode).
const (
	WCSend            = nic.WCSend            // IBV_WC_SEND
	WCRDMAWrite       = nic.WCRDMAWrite       // IBV_WC_RDMA_WRITE
	WCRDMARead        = nic.WCRDMARead        // IBV_WC_RDMA_READ
	WCCompSwap        = nic.WCCompSwap        // IBV_WC_COMP_SWAP
	WCFetchAdd        = nic.WCFetchAdd        // IBV_WC_FETCH_ADD
	WCBindMW          = nic.WCBindMW          // IBV_WC_BIND_MW
	WCLocalInv        = nic.WCLocalInv        // IBV_WC_LOCAL_INV
	WCRecv            = nic.WCRecv            // IBV_WC_RECV
	WCRecvRDMAWithImm = nic.WCRecvRDMAWithImm // IBV_WC_RECV_RDMA_WITH_IMM
)

// Completion flags (enum ibv_wc_flags).
const (
	WCFlagGRH      = nic.WCFlagGRH      // IBV_WC_GRH
	WCFlagWithImm  = nic.WCFlagWithImm  // IBV_WC_WITH_IMM
	WCFlagIPCSumOK = nic.WCFlagIPCSumOK // IBV_WC_IP_CSUM_OK
	WCFlagWithInv  = nic.WCFlagWithInv  // IBV_WC_WITH_INV
)

// Asynchronous event types (enum ibv_event_type).
const (
	EventCQErr            = nic.EventCQErr            // IBV_EVENT_CQ_ERR
	EventQPFatal          = nic.EventQPFatal          // IBV_EVENT_QP_FATAL
	EventQPReqErr         = nic.EventQPReqErr         // IBV_EVENT_QP_REQ_ERR
	EventQPAccessErr      = nic.EventQPAccessErr      // IBV_EVENT_QP_ACCESS_ERR
	EventCommEst          = nic.EventCommEst          // IBV_EVENT_COMM_EST
	EventSQDrained        = nic.EventSQDrained        // IBV_EVENT_SQ_DRAINED
	EventPathMig          = nic.EventPathMig          // IBV_EVENT_PATH_MIG
	EventPathMigErr       = nic.EventPathMigErr       // IBV_EVENT_PATH_MIG_ERR
	EventDeviceFatal      = nic.EventDeviceFatal      // IBV_EVENT_DEVICE_FATAL
	EventPortActive       = nic.EventPortActive       // IBV_EVENT_PORT_ACTIVE
	EventPortErr          = nic.EventPortErr          // IBV_EVENT_PORT_ERR
	EventLIDChange        = nic.EventLIDChange        // IBV_EVENT_LID_CHANGE
	EventPKeyChange       = nic.EventPKeyChange       // IBV_EVENT_PKEY_CHANGE
	EventSMChange         = nic.EventSMChange         // IBV_EVENT_SM_CHANGE
	EventSRQErr           = nic.EventSRQErr           // IBV_EVENT_SRQ_ERR
	EventSRQLimitReached  = nic.EventSRQLimitReached  // IBV_EVENT_SRQ_LIMIT_REACHED
	EventQPLastWQEReached = nic.EventQPLastWQEReached // IBV_EVENT_QP_LAST_WQE_REACHED
	EventClientReregister = nic.EventClientReregister // IBV_EVENT_CLIENT_REREGISTER
	EventGIDChange        = nic.EventGIDChange        // IBV_EVENT_GID_CHANGE
)

// SRQ attribute mask bits (enum ibv_srq_attr_mask).
const (
	SRQAttrMaxWR = nic.SRQAttrMaxWR // IBV_SRQ_MAX_WR
	SRQAttrLimit = nic.SRQAttrLimit // IBV_SRQ_LIMIT
)

// Behaviour profiles (see Profile).
const (
	ProfileRXE  = nic.ProfileRXE  // what Linux rxe 6.1 does (the default)
	ProfileSpec = nic.ProfileSpec // what the IBTA specification says
)
