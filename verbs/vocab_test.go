package verbs_test

import (
	"go/ast"
	"go/parser"
	"go/token"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/rocesim/rocesim/verbs"
)

// header is every enum of <infiniband/verbs.h> (rdma-core's
// libibverbs/verbs.h, with the FLUSH and ATOMIC_WRITE verbs of recent
// releases) that the model's API uses, each value as the header gives it,
// in the header's order.
var header = map[string][]struct {
	c string
	v int64
}{
	"ibv_qp_type": {{"IBV_QPT_RC", 2}, {"IBV_QPT_UC", 3}, {"IBV_QPT_UD", 4}, {"IBV_QPT_RAW_PACKET", 8},
		{"IBV_QPT_XRC_SEND", 9}, {"IBV_QPT_XRC_RECV", 10}, {"IBV_QPT_DRIVER", 0xff}},
	"ibv_qp_state": {{"IBV_QPS_RESET", 0}, {"IBV_QPS_INIT", 1}, {"IBV_QPS_RTR", 2}, {"IBV_QPS_RTS", 3},
		{"IBV_QPS_SQD", 4}, {"IBV_QPS_SQE", 5}, {"IBV_QPS_ERR", 6}, {"IBV_QPS_UNKNOWN", 7}},
	"ibv_mtu": {{"IBV_MTU_256", 1}, {"IBV_MTU_512", 2}, {"IBV_MTU_1024", 3}, {"IBV_MTU_2048", 4}, {"IBV_MTU_4096", 5}},
	"ibv_port_state": {{"IBV_PORT_NOP", 0}, {"IBV_PORT_DOWN", 1}, {"IBV_PORT_INIT", 2}, {"IBV_PORT_ARMED", 3},
		{"IBV_PORT_ACTIVE", 4}, {"IBV_PORT_ACTIVE_DEFER", 5}},
	"ibv_access_flags": {{"IBV_ACCESS_LOCAL_WRITE", 1}, {"IBV_ACCESS_REMOTE_WRITE", 1 << 1}, {"IBV_ACCESS_REMOTE_READ", 1 << 2},
		{"IBV_ACCESS_REMOTE_ATOMIC", 1 << 3}, {"IBV_ACCESS_MW_BIND", 1 << 4}, {"IBV_ACCESS_ZERO_BASED", 1 << 5},
		{"IBV_ACCESS_ON_DEMAND", 1 << 6}, {"IBV_ACCESS_HUGETLB", 1 << 7}, {"IBV_ACCESS_FLUSH_GLOBAL", 1 << 8},
		{"IBV_ACCESS_FLUSH_PERSISTENT", 1 << 9}, {"IBV_ACCESS_RELAXED_ORDERING", 1 << 20}},
	"ibv_mw_type": {{"IBV_MW_TYPE_1", 1}, {"IBV_MW_TYPE_2", 2}},
	"ibv_qp_attr_mask": {{"IBV_QP_STATE", 1 << 0}, {"IBV_QP_CUR_STATE", 1 << 1}, {"IBV_QP_EN_SQD_ASYNC_NOTIFY", 1 << 2},
		{"IBV_QP_ACCESS_FLAGS", 1 << 3}, {"IBV_QP_PKEY_INDEX", 1 << 4}, {"IBV_QP_PORT", 1 << 5}, {"IBV_QP_QKEY", 1 << 6},
		{"IBV_QP_AV", 1 << 7}, {"IBV_QP_PATH_MTU", 1 << 8}, {"IBV_QP_TIMEOUT", 1 << 9}, {"IBV_QP_RETRY_CNT", 1 << 10},
		{"IBV_QP_RNR_RETRY", 1 << 11}, {"IBV_QP_RQ_PSN", 1 << 12}, {"IBV_QP_MAX_QP_RD_ATOMIC", 1 << 13},
		{"IBV_QP_ALT_PATH", 1 << 14}, {"IBV_QP_MIN_RNR_TIMER", 1 << 15}, {"IBV_QP_SQ_PSN", 1 << 16},
		{"IBV_QP_MAX_DEST_RD_ATOMIC", 1 << 17}, {"IBV_QP_PATH_MIG_STATE", 1 << 18}, {"IBV_QP_CAP", 1 << 19},
		{"IBV_QP_DEST_QPN", 1 << 20}, {"IBV_QP_RATE_LIMIT", 1 << 25}},
	"ibv_wr_opcode": {{"IBV_WR_RDMA_WRITE", 0}, {"IBV_WR_RDMA_WRITE_WITH_IMM", 1}, {"IBV_WR_SEND", 2},
		{"IBV_WR_SEND_WITH_IMM", 3}, {"IBV_WR_RDMA_READ", 4}, {"IBV_WR_ATOMIC_CMP_AND_SWP", 5},
		{"IBV_WR_ATOMIC_FETCH_AND_ADD", 6}, {"IBV_WR_LOCAL_INV", 7}, {"IBV_WR_BIND_MW", 8}, {"IBV_WR_SEND_WITH_INV", 9},
		{"IBV_WR_TSO", 10}, {"IBV_WR_DRIVER1", 11}, {"IBV_WR_FLUSH", 14}, {"IBV_WR_ATOMIC_WRITE", 15}},
	"ibv_send_flags": {{"IBV_SEND_FENCE", 1 << 0}, {"IBV_SEND_SIGNALED", 1 << 1}, {"IBV_SEND_SOLICITED", 1 << 2},
		{"IBV_SEND_INLINE", 1 << 3}, {"IBV_SEND_IP_CSUM", 1 << 4}},
	"ibv_wc_status": {{"IBV_WC_SUCCESS", 0}, {"IBV_WC_LOC_LEN_ERR", 1}, {"IBV_WC_LOC_QP_OP_ERR", 2},
		{"IBV_WC_LOC_EEC_OP_ERR", 3}, {"IBV_WC_LOC_PROT_ERR", 4}, {"IBV_WC_WR_FLUSH_ERR", 5}, {"IBV_WC_MW_BIND_ERR", 6},
		{"IBV_WC_BAD_RESP_ERR", 7}, {"IBV_WC_LOC_ACCESS_ERR", 8}, {"IBV_WC_REM_INV_REQ_ERR", 9},
		{"IBV_WC_REM_ACCESS_ERR", 10}, {"IBV_WC_REM_OP_ERR", 11}, {"IBV_WC_RETRY_EXC_ERR", 12},
		{"IBV_WC_RNR_RETRY_EXC_ERR", 13}, {"IBV_WC_LOC_RDD_VIOL_ERR", 14}, {"IBV_WC_REM_INV_RD_REQ_ERR", 15},
		{"IBV_WC_REM_ABORT_ERR", 16}, {"IBV_WC_INV_EECN_ERR", 17}, {"IBV_WC_INV_EEC_STATE_ERR", 18},
		{"IBV_WC_FATAL_ERR", 19}, {"IBV_WC_RESP_TIMEOUT_ERR", 20}, {"IBV_WC_GENERAL_ERR", 21}, {"IBV_WC_TM_ERR", 22},
		{"IBV_WC_TM_RNDV_INCOMPLETE", 23}},
	"ibv_wc_opcode": {{"IBV_WC_SEND", 0}, {"IBV_WC_RDMA_WRITE", 1}, {"IBV_WC_RDMA_READ", 2}, {"IBV_WC_COMP_SWAP", 3},
		{"IBV_WC_FETCH_ADD", 4}, {"IBV_WC_BIND_MW", 5}, {"IBV_WC_LOCAL_INV", 6}, {"IBV_WC_TSO", 7},
		{"IBV_WC_FLUSH", 8}, {"IBV_WC_ATOMIC_WRITE", 9},
		{"IBV_WC_RECV", 1 << 7}, {"IBV_WC_RECV_RDMA_WITH_IMM", 129}, {"IBV_WC_TM_ADD", 130}, {"IBV_WC_TM_DEL", 131},
		{"IBV_WC_TM_SYNC", 132}, {"IBV_WC_TM_RECV", 133}, {"IBV_WC_TM_NO_TAG", 134}, {"IBV_WC_DRIVER1", 135},
		{"IBV_WC_DRIVER2", 136}, {"IBV_WC_DRIVER3", 137}},
	"ibv_wc_flags": {{"IBV_WC_GRH", 1 << 0}, {"IBV_WC_WITH_IMM", 1 << 1}, {"IBV_WC_IP_CSUM_OK", 1 << 2},
		{"IBV_WC_WITH_INV", 1 << 3}, {"IBV_WC_TM_SYNC_REQ", 1 << 4}, {"IBV_WC_TM_MATCH", 1 << 5},
		{"IBV_WC_TM_DATA_VALID", 1 << 6}},
	"ibv_event_type": {{"IBV_EVENT_CQ_ERR", 0}, {"IBV_EVENT_QP_FATAL", 1}, {"IBV_EVENT_QP_REQ_ERR", 2},
		{"IBV_EVENT_QP_ACCESS_ERR", 3}, {"IBV_EVENT_COMM_EST", 4}, {"IBV_EVENT_SQ_DRAINED", 5}, {"IBV_EVENT_PATH_MIG", 6},
		{"IBV_EVENT_PATH_MIG_ERR", 7}, {"IBV_EVENT_DEVICE_FATAL", 8}, {"IBV_EVENT_PORT_ACTIVE", 9},
		{"IBV_EVENT_PORT_ERR", 10}, {"IBV_EVENT_LID_CHANGE", 11}, {"IBV_EVENT_PKEY_CHANGE", 12},
		{"IBV_EVENT_SM_CHANGE", 13}, {"IBV_EVENT_SRQ_ERR", 14}, {"IBV_EVENT_SRQ_LIMIT_REACHED", 15},
		{"IBV_EVENT_QP_LAST_WQE_REACHED", 16}, {"IBV_EVENT_CLIENT_REREGISTER", 17}, {"IBV_EVENT_GID_CHANGE", 18},
		{"IBV_EVENT_WQ_FATAL", 19}},
	"ibv_srq_attr_mask": {{"IBV_SRQ_MAX_WR", 1 << 0}, {"IBV_SRQ_LIMIT", 1 << 1}},
	"ibv_rereg_mr_flags": {{"IBV_REREG_MR_CHANGE_TRANSLATION", 1 << 0}, {"IBV_REREG_MR_CHANGE_PD", 1 << 1},
		{"IBV_REREG_MR_CHANGE_ACCESS", 1 << 2}, {"IBV_REREG_MR_KEEP_VALID", 1 << 3}},
}

// goNames are package verbs' names for the header's constants.
var goNames = map[string]int64{
	"IBV_QPT_RC": int64(verbs.QPTypeRC), "IBV_QPT_UC": int64(verbs.QPTypeUC), "IBV_QPT_UD": int64(verbs.QPTypeUD),

	"IBV_QPS_RESET": int64(verbs.QPStateReset), "IBV_QPS_INIT": int64(verbs.QPStateInit), "IBV_QPS_RTR": int64(verbs.QPStateRTR),
	"IBV_QPS_RTS": int64(verbs.QPStateRTS), "IBV_QPS_SQD": int64(verbs.QPStateSQD), "IBV_QPS_SQE": int64(verbs.QPStateSQE),
	"IBV_QPS_ERR": int64(verbs.QPStateErr),

	"IBV_MTU_256": int64(verbs.MTU256), "IBV_MTU_512": int64(verbs.MTU512), "IBV_MTU_1024": int64(verbs.MTU1024),
	"IBV_MTU_2048": int64(verbs.MTU2048), "IBV_MTU_4096": int64(verbs.MTU4096),

	"IBV_ACCESS_LOCAL_WRITE": int64(verbs.AccessLocalWrite), "IBV_ACCESS_REMOTE_WRITE": int64(verbs.AccessRemoteWrite),
	"IBV_ACCESS_REMOTE_READ": int64(verbs.AccessRemoteRead), "IBV_ACCESS_REMOTE_ATOMIC": int64(verbs.AccessRemoteAtomic),
	"IBV_ACCESS_MW_BIND": int64(verbs.AccessMWBind), "IBV_ACCESS_ZERO_BASED": int64(verbs.AccessZeroBased),

	"IBV_MW_TYPE_1": int64(verbs.MWType1), "IBV_MW_TYPE_2": int64(verbs.MWType2),

	"IBV_QP_STATE": int64(verbs.QPAttrState), "IBV_QP_CUR_STATE": int64(verbs.QPAttrCurState),
	"IBV_QP_EN_SQD_ASYNC_NOTIFY": int64(verbs.QPAttrEnSQDAsyncNotify), "IBV_QP_ACCESS_FLAGS": int64(verbs.QPAttrAccessFlags),
	"IBV_QP_PKEY_INDEX": int64(verbs.QPAttrPKeyIndex), "IBV_QP_PORT": int64(verbs.QPAttrPort), "IBV_QP_QKEY": int64(verbs.QPAttrQKey),
	"IBV_QP_AV": int64(verbs.QPAttrAV), "IBV_QP_PATH_MTU": int64(verbs.QPAttrPathMTU), "IBV_QP_TIMEOUT": int64(verbs.QPAttrTimeout),
	"IBV_QP_RETRY_CNT": int64(verbs.QPAttrRetryCnt), "IBV_QP_RNR_RETRY": int64(verbs.QPAttrRNRRetry),
	"IBV_QP_RQ_PSN": int64(verbs.QPAttrRQPSN), "IBV_QP_MAX_QP_RD_ATOMIC": int64(verbs.QPAttrMaxQPRdAtomic),
	"IBV_QP_ALT_PATH": int64(verbs.QPAttrAltPath), "IBV_QP_MIN_RNR_TIMER": int64(verbs.QPAttrMinRNRTimer),
	"IBV_QP_SQ_PSN": int64(verbs.QPAttrSQPSN), "IBV_QP_MAX_DEST_RD_ATOMIC": int64(verbs.QPAttrMaxDestRdAtomic),
	"IBV_QP_PATH_MIG_STATE": int64(verbs.QPAttrPathMigState), "IBV_QP_CAP": int64(verbs.QPAttrCap),
	"IBV_QP_DEST_QPN": int64(verbs.QPAttrDestQPN), "IBV_QP_RATE_LIMIT": int64(verbs.QPAttrRateLimit),

	"IBV_WR_RDMA_WRITE": int64(verbs.WRRDMAWrite), "IBV_WR_RDMA_WRITE_WITH_IMM": int64(verbs.WRRDMAWriteWithImm),
	"IBV_WR_SEND": int64(verbs.WRSend), "IBV_WR_SEND_WITH_IMM": int64(verbs.WRSendWithImm), "IBV_WR_RDMA_READ": int64(verbs.WRRDMARead),
	"IBV_WR_ATOMIC_CMP_AND_SWP": int64(verbs.WRAtomicCmpAndSwp), "IBV_WR_ATOMIC_FETCH_AND_ADD": int64(verbs.WRAtomicFetchAndAdd),
	"IBV_WR_LOCAL_INV": int64(verbs.WRLocalInv), "IBV_WR_BIND_MW": int64(verbs.WRBindMW), "IBV_WR_SEND_WITH_INV": int64(verbs.WRSendWithInv),

	"IBV_SEND_FENCE": int64(verbs.SendFence), "IBV_SEND_SIGNALED": int64(verbs.SendSignaled),
	"IBV_SEND_SOLICITED": int64(verbs.SendSolicited), "IBV_SEND_INLINE": int64(verbs.SendInline),

	"IBV_WC_SUCCESS": int64(verbs.WCSuccess), "IBV_WC_LOC_LEN_ERR": int64(verbs.WCLocLenErr),
	"IBV_WC_LOC_QP_OP_ERR": int64(verbs.WCLocQPOpErr), "IBV_WC_LOC_EEC_OP_ERR": int64(verbs.WCLocEECOpErr),
	"IBV_WC_LOC_PROT_ERR": int64(verbs.WCLocProtErr), "IBV_WC_WR_FLUSH_ERR": int64(verbs.WCWRFlushErr),
	"IBV_WC_MW_BIND_ERR": int64(verbs.WCMWBindErr), "IBV_WC_BAD_RESP_ERR": int64(verbs.WCBadRespErr),
	"IBV_WC_LOC_ACCESS_ERR": int64(verbs.WCLocAccessErr), "IBV_WC_REM_INV_REQ_ERR": int64(verbs.WCRemInvReqErr),
	"IBV_WC_REM_ACCESS_ERR": int64(verbs.WCRemAccessErr), "IBV_WC_REM_OP_ERR": int64(verbs.WCRemOpErr),
	"IBV_WC_RETRY_EXC_ERR": int64(verbs.WCRetryExcErr), "IBV_WC_RNR_RETRY_EXC_ERR": int64(verbs.WCRNRRetryExcErr),
	"IBV_WC_LOC_RDD_VIOL_ERR": int64(verbs.WCLocRDDViolErr), "IBV_WC_REM_INV_RD_REQ_ERR": int64(verbs.WCRemInvRDReqErr),
	"IBV_WC_REM_ABORT_ERR": int64(verbs.WCRemAbortErr), "IBV_WC_INV_EECN_ERR": int64(verbs.WCInvEECNErr),
	"IBV_WC_INV_EEC_STATE_ERR": int64(verbs.WCInvEECStateErr), "IBV_WC_FATAL_ERR": int64(verbs.WCFatalErr),
	"IBV_WC_RESP_TIMEOUT_ERR": int64(verbs.WCRespTimeoutErr), "IBV_WC_GENERAL_ERR": int64(verbs.WCGeneralErr),
	"IBV_WC_TM_ERR": int64(verbs.WCTMErr), "IBV_WC_TM_RNDV_INCOMPLETE": int64(verbs.WCTMRndvIncomplete),

	"IBV_WC_SEND": int64(verbs.WCSend), "IBV_WC_RDMA_WRITE": int64(verbs.WCRDMAWrite), "IBV_WC_RDMA_READ": int64(verbs.WCRDMARead),
	"IBV_WC_COMP_SWAP": int64(verbs.WCCompSwap), "IBV_WC_FETCH_ADD": int64(verbs.WCFetchAdd), "IBV_WC_BIND_MW": int64(verbs.WCBindMW),
	"IBV_WC_LOCAL_INV": int64(verbs.WCLocalInv), "IBV_WC_RECV": int64(verbs.WCRecv),
	"IBV_WC_RECV_RDMA_WITH_IMM": int64(verbs.WCRecvRDMAWithImm),

	"IBV_WC_GRH": int64(verbs.WCFlagGRH), "IBV_WC_WITH_IMM": int64(verbs.WCFlagWithImm), "IBV_WC_IP_CSUM_OK": int64(verbs.WCFlagIPCSumOK),
	"IBV_WC_WITH_INV": int64(verbs.WCFlagWithInv),

	"IBV_EVENT_CQ_ERR": int64(verbs.EventCQErr), "IBV_EVENT_QP_FATAL": int64(verbs.EventQPFatal),
	"IBV_EVENT_QP_REQ_ERR": int64(verbs.EventQPReqErr), "IBV_EVENT_QP_ACCESS_ERR": int64(verbs.EventQPAccessErr),
	"IBV_EVENT_COMM_EST": int64(verbs.EventCommEst), "IBV_EVENT_SQ_DRAINED": int64(verbs.EventSQDrained),
	"IBV_EVENT_PATH_MIG": int64(verbs.EventPathMig), "IBV_EVENT_PATH_MIG_ERR": int64(verbs.EventPathMigErr),
	"IBV_EVENT_DEVICE_FATAL": int64(verbs.EventDeviceFatal), "IBV_EVENT_PORT_ACTIVE": int64(verbs.EventPortActive),
	"IBV_EVENT_PORT_ERR": int64(verbs.EventPortErr), "IBV_EVENT_LID_CHANGE": int64(verbs.EventLIDChange),
	"IBV_EVENT_PKEY_CHANGE": int64(verbs.EventPKeyChange), "IBV_EVENT_SM_CHANGE": int64(verbs.EventSMChange),
	"IBV_EVENT_SRQ_ERR": int64(verbs.EventSRQErr), "IBV_EVENT_SRQ_LIMIT_REACHED": int64(verbs.EventSRQLimitReached),
	"IBV_EVENT_QP_LAST_WQE_REACHED": int64(verbs.EventQPLastWQEReached),
	"IBV_EVENT_CLIENT_REREGISTER":   int64(verbs.EventClientReregister), "IBV_EVENT_GID_CHANGE": int64(verbs.EventGIDChange),

	"IBV_SRQ_MAX_WR": int64(verbs.SRQAttrMaxWR), "IBV_SRQ_LIMIT": int64(verbs.SRQAttrLimit),

	"IBV_REREG_MR_CHANGE_TRANSLATION": int64(verbs.ReregChangeTranslation), "IBV_REREG_MR_CHANGE_PD": int64(verbs.ReregChangePD),
	"IBV_REREG_MR_CHANGE_ACCESS": int64(verbs.ReregChangeAccess),
}

// leftOut are the header's constants package verbs does not name, and
// why: the model has no such object or service, so no verb could take or
// return them.
var leftOut = map[string]string{
	"IBV_QPT_RAW_PACKET": "no raw Ethernet QPs", "IBV_QPT_XRC_SEND": "no XRC", "IBV_QPT_XRC_RECV": "no XRC",
	"IBV_QPT_DRIVER":  "no driver-specific QPs",
	"IBV_QPS_UNKNOWN": "a QP's state is always known",
	"IBV_PORT_NOP":    "a port state rxe never reports", "IBV_PORT_INIT": "a port state rxe never reports",
	"IBV_PORT_ARMED": "a port state rxe never reports", "IBV_PORT_ACTIVE_DEFER": "a port state rxe never reports",
	"IBV_PORT_DOWN":        "PortAttr.State is a string here: PortStateDown",
	"IBV_PORT_ACTIVE":      "PortAttr.State is a string here: PortStateActive",
	"IBV_ACCESS_ON_DEMAND": "no on-demand paging", "IBV_ACCESS_HUGETLB": "no huge pages",
	"IBV_ACCESS_RELAXED_ORDERING": "no PCIe ordering to relax",
	"IBV_ACCESS_FLUSH_GLOBAL":     "no FLUSH in rxe 6.1", "IBV_ACCESS_FLUSH_PERSISTENT": "no FLUSH in rxe 6.1",
	"IBV_WR_TSO": "no TSO (raw packet QPs only)", "IBV_WR_DRIVER1": "no driver-specific WRs",
	"IBV_WR_FLUSH": "not in rxe 6.1", "IBV_WR_ATOMIC_WRITE": "not in rxe 6.1",
	"IBV_SEND_IP_CSUM": "no checksum offload (raw packet and UD on other devices)",
	"IBV_WC_TSO":       "no TSO",
	"IBV_WC_FLUSH":     "no FLUSH in rxe 6.1", "IBV_WC_ATOMIC_WRITE": "no ATOMIC_WRITE in rxe 6.1",
	"IBV_WC_DRIVER2": "no driver-specific completions", "IBV_WC_DRIVER3": "no driver-specific completions",
	"IBV_WC_TM_ADD": "no tag matching", "IBV_WC_TM_DEL": "no tag matching", "IBV_WC_TM_SYNC": "no tag matching",
	"IBV_WC_TM_RECV": "no tag matching", "IBV_WC_TM_NO_TAG": "no tag matching", "IBV_WC_DRIVER1": "no driver-specific completions",
	"IBV_WC_TM_SYNC_REQ": "no tag matching", "IBV_WC_TM_MATCH": "no tag matching", "IBV_WC_TM_DATA_VALID": "no tag matching",
	"IBV_EVENT_WQ_FATAL":      "no work queues (ibv_wq)",
	"IBV_REREG_MR_KEEP_VALID": "not in rxe 6.1, which refuses every rereg",
}

// TestVocabularyMatchesTheHeader: every constant of the header's enums
// is either named by package verbs, with the header's value, or left out
// for a reason; and verbs names nothing the header does not have.
func TestVocabularyMatchesTheHeader(t *testing.T) {
	inHeader := map[string]bool{}
	for enum, consts := range header {
		for _, c := range consts {
			inHeader[c.c] = true
			got, named := goNames[c.c]
			why, out := leftOut[c.c]
			switch {
			case named && out:
				t.Errorf("%s.%s is both named and left out (%s)", enum, c.c, why)
			case named:
				assert.Equal(t, c.v, got, "%s.%s", enum, c.c)
			case !out:
				t.Errorf("%s.%s: package verbs has no name for it and leftOut no reason", enum, c.c)
			}
		}
	}
	for c := range goNames {
		assert.True(t, inHeader[c], "%s is not in the header's enums", c)
	}
	for c := range leftOut {
		assert.True(t, inHeader[c], "%s (left out) is not in the header's enums", c)
	}
}

// TestVocabularyReexportsNic: every exported constant package nic
// declares with a type package verbs re-exports is re-exported, as
// "Name = nic.Name" (the same constant, so the same value), and verbs'
// vocabulary declares nothing else. The libibverbs names go through
// package verbs alone: a user never needs package nic or a numeric cast
// for one.
func TestVocabularyReexportsNic(t *testing.T) {
	reexported := map[string]string{} // verbs name -> the nic name it stands for
	var aliases []string              // the nic types verbs aliases
	f, err := parser.ParseFile(token.NewFileSet(), "vocab.go", nil, 0)
	require.NoError(t, err)
	rereg, err := parser.ParseFile(token.NewFileSet(), "resources.go", nil, 0)
	require.NoError(t, err)
	for _, file := range []*ast.File{f, rereg} {
		for _, d := range file.Decls {
			g, ok := d.(*ast.GenDecl)
			if !ok {
				continue
			}
			for _, spec := range g.Specs {
				switch s := spec.(type) {
				case *ast.TypeSpec:
					if sel, ok := s.Type.(*ast.SelectorExpr); ok && s.Assign.IsValid() {
						aliases = append(aliases, sel.Sel.Name)
					}
				case *ast.ValueSpec:
					for i, n := range s.Names {
						if sel, ok := s.Values[i].(*ast.SelectorExpr); ok {
							reexported[n.Name] = sel.Sel.Name
						}
					}
				}
			}
		}
	}
	for name, nicName := range reexported {
		assert.Equal(t, nicName, name, "verbs.%s stands for nic.%s: one name for one constant", name, nicName)
	}

	paths, err := filepath.Glob("../nic/*.go")
	require.NoError(t, err)
	n := 0
	for _, path := range paths {
		if strings.HasSuffix(path, "_test.go") {
			continue
		}
		src, err := os.ReadFile(path)
		require.NoError(t, err)
		nf, err := parser.ParseFile(token.NewFileSet(), path, src, 0)
		require.NoError(t, err)
		for _, d := range nf.Decls {
			g, ok := d.(*ast.GenDecl)
			if !ok || g.Tok != token.CONST {
				continue
			}
			var typ string // a spec without type or value continues the one before
			for _, spec := range g.Specs {
				s := spec.(*ast.ValueSpec)
				switch id, ok := s.Type.(*ast.Ident); {
				case ok:
					typ = id.Name
				case s.Type != nil || len(s.Values) > 0:
					typ = "" // another type, or an untyped value
				}
				if !contains(aliases, typ) {
					continue
				}
				for _, name := range s.Names {
					if !name.IsExported() {
						continue
					}
					n++
					_, ok := reexported[name.Name]
					assert.True(t, ok, "nic.%s (a %s) has no verbs.%s", name.Name, typ, name.Name)
				}
			}
		}
	}
	assert.Greater(t, n, 100, "the walk found nic's constants")
}

func contains(s []string, v string) bool {
	for _, x := range s {
		if x == v {
			return true
		}
	}
	return false
}

// TestPortStates: QueryPort's state is one of the names verbs gives.
func TestPortStates(t *testing.T) {
	w := verbs.NewWorld(verbs.WorldConfig{Seed: 1})
	a, b := w.AddHost("a"), w.AddHost("b")
	require.NoError(t, w.Connect(a, b))
	ctx, err := a.GetDeviceList()[0].Open()
	require.NoError(t, err)
	port, err := ctx.QueryPort(1)
	require.NoError(t, err)
	assert.Equal(t, verbs.PortStateActive, port.State)
}
