package nic

import (
	"testing"

	"github.com/stretchr/testify/assert"
)

func TestWCStatusStrings(t *testing.T) {
	// ibv_wc_status_str() in rdma-core libibverbs/enum_strs.c and the enum
	// in <infiniband/verbs.h>, copied by hand with their numeric values.
	tests := []struct {
		s    WCStatus
		num  int
		str  string
		name string
	}{
		{WCSuccess, 0, "success", "IBV_WC_SUCCESS"},
		{WCLocLenErr, 1, "local length error", "IBV_WC_LOC_LEN_ERR"},
		{WCLocQPOpErr, 2, "local QP operation error", "IBV_WC_LOC_QP_OP_ERR"},
		{WCLocEECOpErr, 3, "local EE context operation error", "IBV_WC_LOC_EEC_OP_ERR"},
		{WCLocProtErr, 4, "local protection error", "IBV_WC_LOC_PROT_ERR"},
		{WCWRFlushErr, 5, "Work Request Flushed Error", "IBV_WC_WR_FLUSH_ERR"},
		{WCMWBindErr, 6, "memory management operation error", "IBV_WC_MW_BIND_ERR"},
		{WCBadRespErr, 7, "bad response error", "IBV_WC_BAD_RESP_ERR"},
		{WCLocAccessErr, 8, "local access error", "IBV_WC_LOC_ACCESS_ERR"},
		{WCRemInvReqErr, 9, "remote invalid request error", "IBV_WC_REM_INV_REQ_ERR"},
		{WCRemAccessErr, 10, "remote access error", "IBV_WC_REM_ACCESS_ERR"},
		{WCRemOpErr, 11, "remote operation error", "IBV_WC_REM_OP_ERR"},
		{WCRetryExcErr, 12, "transport retry counter exceeded", "IBV_WC_RETRY_EXC_ERR"},
		{WCRNRRetryExcErr, 13, "RNR retry counter exceeded", "IBV_WC_RNR_RETRY_EXC_ERR"},
		{WCLocRDDViolErr, 14, "local RDD violation error", "IBV_WC_LOC_RDD_VIOL_ERR"},
		{WCRemInvRDReqErr, 15, "remote invalid RD request", "IBV_WC_REM_INV_RD_REQ_ERR"},
		{WCRemAbortErr, 16, "aborted error", "IBV_WC_REM_ABORT_ERR"},
		{WCInvEECNErr, 17, "invalid EE context number", "IBV_WC_INV_EECN_ERR"},
		{WCInvEECStateErr, 18, "invalid EE context state", "IBV_WC_INV_EEC_STATE_ERR"},
		{WCFatalErr, 19, "fatal error", "IBV_WC_FATAL_ERR"},
		{WCRespTimeoutErr, 20, "response timeout error", "IBV_WC_RESP_TIMEOUT_ERR"},
		{WCGeneralErr, 21, "general error", "IBV_WC_GENERAL_ERR"},
		{WCTMErr, 22, "TM error", "IBV_WC_TM_ERR"},
		{WCTMRndvIncomplete, 23, "TM software rendezvous", "IBV_WC_TM_RNDV_INCOMPLETE"},
	}
	for _, tc := range tests {
		assert.Equal(t, tc.num, int(tc.s), tc.name)
		assert.Equal(t, tc.str, tc.s.String(), tc.name)
		assert.Equal(t, tc.name, tc.s.Name())
	}
	assert.Len(t, wcStatusStrs, len(tests), "every status has a string")
	assert.Len(t, wcStatusNames, len(tests), "every status has a name")

	// libibverbs answers "unknown" past the last status.
	assert.Equal(t, "unknown", WCStatus(24).String())
	assert.Equal(t, "unknown", WCStatus(255).String())
	assert.Equal(t, "WCStatus(24)", WCStatus(24).Name())
}

func TestWCOpcodeStrings(t *testing.T) {
	tests := []struct {
		o    WCOpcode
		num  int
		name string
	}{
		{WCSend, 0, "IBV_WC_SEND"},
		{WCRDMAWrite, 1, "IBV_WC_RDMA_WRITE"},
		{WCRDMARead, 2, "IBV_WC_RDMA_READ"},
		{WCCompSwap, 3, "IBV_WC_COMP_SWAP"},
		{WCFetchAdd, 4, "IBV_WC_FETCH_ADD"},
		{WCBindMW, 5, "IBV_WC_BIND_MW"},
		{WCLocalInv, 6, "IBV_WC_LOCAL_INV"},
		{WCRecv, 128, "IBV_WC_RECV"},
		{WCRecvRDMAWithImm, 129, "IBV_WC_RECV_RDMA_WITH_IMM"},
	}
	for _, tc := range tests {
		assert.Equal(t, tc.num, int(tc.o), tc.name)
		assert.Equal(t, tc.name, tc.o.String())
	}
	assert.Equal(t, "WCOpcode(7)", WCOpcode(7).String())
	assert.Equal(t, "WCOpcode(130)", WCOpcode(130).String())
}
