package nic

// Names of completion statuses and opcodes as libibverbs prints them, so
// that rocesim's traces and errors read like a C program's output.

// wcStatusStrs are ibv_wc_status_str()'s strings (rdma-core
// libibverbs/enum_strs.c), indexed by status.
var wcStatusStrs = [...]string{
	WCSuccess:          "success",
	WCLocLenErr:        "local length error",
	WCLocQPOpErr:       "local QP operation error",
	WCLocEECOpErr:      "local EE context operation error",
	WCLocProtErr:       "local protection error",
	WCWRFlushErr:       "Work Request Flushed Error",
	WCMWBindErr:        "memory management operation error",
	WCBadRespErr:       "bad response error",
	WCLocAccessErr:     "local access error",
	WCRemInvReqErr:     "remote invalid request error",
	WCRemAccessErr:     "remote access error",
	WCRemOpErr:         "remote operation error",
	WCRetryExcErr:      "transport retry counter exceeded",
	WCRNRRetryExcErr:   "RNR retry counter exceeded",
	WCLocRDDViolErr:    "local RDD violation error",
	WCRemInvRDReqErr:   "remote invalid RD request",
	WCRemAbortErr:      "aborted error",
	WCInvEECNErr:       "invalid EE context number",
	WCInvEECStateErr:   "invalid EE context state",
	WCFatalErr:         "fatal error",
	WCRespTimeoutErr:   "response timeout error",
	WCGeneralErr:       "general error",
	WCTMErr:            "TM error",
	WCTMRndvIncomplete: "TM software rendezvous",
}

// wcStatusNames are the enum ibv_wc_status constant names.
var wcStatusNames = [...]string{
	WCSuccess:          "IBV_WC_SUCCESS",
	WCLocLenErr:        "IBV_WC_LOC_LEN_ERR",
	WCLocQPOpErr:       "IBV_WC_LOC_QP_OP_ERR",
	WCLocEECOpErr:      "IBV_WC_LOC_EEC_OP_ERR",
	WCLocProtErr:       "IBV_WC_LOC_PROT_ERR",
	WCWRFlushErr:       "IBV_WC_WR_FLUSH_ERR",
	WCMWBindErr:        "IBV_WC_MW_BIND_ERR",
	WCBadRespErr:       "IBV_WC_BAD_RESP_ERR",
	WCLocAccessErr:     "IBV_WC_LOC_ACCESS_ERR",
	WCRemInvReqErr:     "IBV_WC_REM_INV_REQ_ERR",
	WCRemAccessErr:     "IBV_WC_REM_ACCESS_ERR",
	WCRemOpErr:         "IBV_WC_REM_OP_ERR",
	WCRetryExcErr:      "IBV_WC_RETRY_EXC_ERR",
	WCRNRRetryExcErr:   "IBV_WC_RNR_RETRY_EXC_ERR",
	WCLocRDDViolErr:    "IBV_WC_LOC_RDD_VIOL_ERR",
	WCRemInvRDReqErr:   "IBV_WC_REM_INV_RD_REQ_ERR",
	WCRemAbortErr:      "IBV_WC_REM_ABORT_ERR",
	WCInvEECNErr:       "IBV_WC_INV_EECN_ERR",
	WCInvEECStateErr:   "IBV_WC_INV_EEC_STATE_ERR",
	WCFatalErr:         "IBV_WC_FATAL_ERR",
	WCRespTimeoutErr:   "IBV_WC_RESP_TIMEOUT_ERR",
	WCGeneralErr:       "IBV_WC_GENERAL_ERR",
	WCTMErr:            "IBV_WC_TM_ERR",
	WCTMRndvIncomplete: "IBV_WC_TM_RNDV_INCOMPLETE",
}

// String returns what ibv_wc_status_str() returns for s, e.g. "Work
// Request Flushed Error", and "unknown" for a value libibverbs does not
// define, as it does.
func (s WCStatus) String() string {
	if int(s) < len(wcStatusStrs) {
		return wcStatusStrs[s]
	}
	return "unknown"
}

// Name returns the constant's name in <infiniband/verbs.h>, e.g.
// "IBV_WC_WR_FLUSH_ERR", or "WCStatus(N)" for an undefined value.
func (s WCStatus) Name() string {
	if int(s) < len(wcStatusNames) {
		return wcStatusNames[s]
	}
	return "WCStatus(" + itoa(int(s)) + ")"
}

// String returns the constant's name in <infiniband/verbs.h>, e.g.
// "IBV_WC_RECV_RDMA_WITH_IMM", or "WCOpcode(N)" for a value rocesim does
// not produce.
func (o WCOpcode) String() string {
	switch o {
	case WCSend:
		return "IBV_WC_SEND"
	case WCRDMAWrite:
		return "IBV_WC_RDMA_WRITE"
	case WCRDMARead:
		return "IBV_WC_RDMA_READ"
	case WCCompSwap:
		return "IBV_WC_COMP_SWAP"
	case WCFetchAdd:
		return "IBV_WC_FETCH_ADD"
	case WCBindMW:
		return "IBV_WC_BIND_MW"
	case WCLocalInv:
		return "IBV_WC_LOCAL_INV"
	case WCRecv:
		return "IBV_WC_RECV"
	case WCRecvRDMAWithImm:
		return "IBV_WC_RECV_RDMA_WITH_IMM"
	}
	return "WCOpcode(" + itoa(int(o)) + ")"
}
