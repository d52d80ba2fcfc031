package nic_test

import (
	"errors"
	"fmt"
	"net/netip"
	"strings"
	"syscall"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/rocesim/rocesim/nic"
)

// The expected data below is written out by hand from qp_state_table in
// Linux drivers/infiniband/core/verbs.c (the RC, UC and UD columns), in a
// different shape from the implementation's table, and never computed by
// calling the code under test.

// kernelRow is one legal transition for one QP type: the attributes the
// kernel requires (req_param) and permits besides STATE (opt_param).
type kernelRow struct{ typ, from, to, req, opt string }

var kernelTable = []kernelRow{
	{"RC", "RESET", "RESET", "", ""},
	{"UC", "RESET", "RESET", "", ""},
	{"UD", "RESET", "RESET", "", ""},
	{"RC", "RESET", "INIT", "ACCESS_FLAGS|PKEY_INDEX|PORT", ""},
	{"UC", "RESET", "INIT", "ACCESS_FLAGS|PKEY_INDEX|PORT", ""},
	{"UD", "RESET", "INIT", "PKEY_INDEX|PORT|QKEY", ""},

	{"RC", "INIT", "RESET", "", ""},
	{"UC", "INIT", "RESET", "", ""},
	{"UD", "INIT", "RESET", "", ""},
	{"RC", "INIT", "ERR", "", ""},
	{"UC", "INIT", "ERR", "", ""},
	{"UD", "INIT", "ERR", "", ""},
	{"RC", "INIT", "INIT", "", "ACCESS_FLAGS|PKEY_INDEX|PORT"},
	{"UC", "INIT", "INIT", "", "ACCESS_FLAGS|PKEY_INDEX|PORT"},
	{"UD", "INIT", "INIT", "", "PKEY_INDEX|PORT|QKEY"},
	{"RC", "INIT", "RTR", "AV|PATH_MTU|RQ_PSN|MIN_RNR_TIMER|MAX_DEST_RD_ATOMIC|DEST_QPN", "ACCESS_FLAGS|PKEY_INDEX|ALT_PATH"},
	{"UC", "INIT", "RTR", "AV|PATH_MTU|RQ_PSN|DEST_QPN", "ACCESS_FLAGS|PKEY_INDEX|ALT_PATH"},
	{"UD", "INIT", "RTR", "", "PKEY_INDEX|QKEY"},

	{"RC", "RTR", "RESET", "", ""},
	{"UC", "RTR", "RESET", "", ""},
	{"UD", "RTR", "RESET", "", ""},
	{"RC", "RTR", "ERR", "", ""},
	{"UC", "RTR", "ERR", "", ""},
	{"UD", "RTR", "ERR", "", ""},
	{"RC", "RTR", "RTS", "TIMEOUT|RETRY_CNT|RNR_RETRY|MAX_QP_RD_ATOMIC|SQ_PSN", "CUR_STATE|ACCESS_FLAGS|ALT_PATH|MIN_RNR_TIMER|PATH_MIG_STATE"},
	{"UC", "RTR", "RTS", "SQ_PSN", "CUR_STATE|ACCESS_FLAGS|ALT_PATH|PATH_MIG_STATE"},
	{"UD", "RTR", "RTS", "SQ_PSN", "CUR_STATE|QKEY"},

	{"RC", "RTS", "RESET", "", ""},
	{"UC", "RTS", "RESET", "", ""},
	{"UD", "RTS", "RESET", "", ""},
	{"RC", "RTS", "ERR", "", ""},
	{"UC", "RTS", "ERR", "", ""},
	{"UD", "RTS", "ERR", "", ""},
	{"RC", "RTS", "RTS", "", "CUR_STATE|ACCESS_FLAGS|ALT_PATH|MIN_RNR_TIMER|PATH_MIG_STATE"},
	{"UC", "RTS", "RTS", "", "CUR_STATE|ACCESS_FLAGS|ALT_PATH|PATH_MIG_STATE"},
	{"UD", "RTS", "RTS", "", "CUR_STATE|QKEY"},
	{"RC", "RTS", "SQD", "", "EN_SQD_ASYNC_NOTIFY"},
	{"UC", "RTS", "SQD", "", "EN_SQD_ASYNC_NOTIFY"},
	{"UD", "RTS", "SQD", "", "EN_SQD_ASYNC_NOTIFY"},

	{"RC", "SQD", "RESET", "", ""},
	{"UC", "SQD", "RESET", "", ""},
	{"UD", "SQD", "RESET", "", ""},
	{"RC", "SQD", "ERR", "", ""},
	{"UC", "SQD", "ERR", "", ""},
	{"UD", "SQD", "ERR", "", ""},
	{"RC", "SQD", "RTS", "", "CUR_STATE|ACCESS_FLAGS|ALT_PATH|MIN_RNR_TIMER|PATH_MIG_STATE"},
	{"UC", "SQD", "RTS", "", "CUR_STATE|ACCESS_FLAGS|ALT_PATH|PATH_MIG_STATE"},
	{"UD", "SQD", "RTS", "", "CUR_STATE|QKEY"},
	{"RC", "SQD", "SQD", "", "ACCESS_FLAGS|PKEY_INDEX|PORT|AV|TIMEOUT|RETRY_CNT|RNR_RETRY|MAX_QP_RD_ATOMIC|ALT_PATH|MIN_RNR_TIMER|MAX_DEST_RD_ATOMIC|PATH_MIG_STATE"},
	{"UC", "SQD", "SQD", "", "ACCESS_FLAGS|PKEY_INDEX|AV|ALT_PATH|PATH_MIG_STATE"},
	{"UD", "SQD", "SQD", "", "PKEY_INDEX|QKEY"},

	{"RC", "SQE", "RESET", "", ""},
	{"UC", "SQE", "RESET", "", ""},
	{"UD", "SQE", "RESET", "", ""},
	{"RC", "SQE", "ERR", "", ""},
	{"UC", "SQE", "ERR", "", ""},
	{"UD", "SQE", "ERR", "", ""},
	{"RC", "SQE", "RTS", "", ""}, // valid for every type; the kernel lists no attribute for RC
	{"UC", "SQE", "RTS", "", "CUR_STATE|ACCESS_FLAGS"},
	{"UD", "SQE", "RTS", "", "CUR_STATE|QKEY"},

	{"RC", "ERR", "RESET", "", ""},
	{"UC", "ERR", "RESET", "", ""},
	{"UD", "ERR", "RESET", "", ""},
	{"RC", "ERR", "ERR", "", ""},
	{"UC", "ERR", "ERR", "", ""},
	{"UD", "ERR", "ERR", "", ""},
}

var (
	testTypes  = map[string]nic.QPType{"RC": nic.QPTypeRC, "UC": nic.QPTypeUC, "UD": nic.QPTypeUD}
	typeOrder  = []string{"RC", "UC", "UD"}
	stateOrder = []string{"RESET", "INIT", "RTR", "RTS", "SQD", "SQE", "ERR"}
	testStates = map[string]nic.QPState{
		"RESET": nic.QPStateReset, "INIT": nic.QPStateInit, "RTR": nic.QPStateRTR, "RTS": nic.QPStateRTS,
		"SQD": nic.QPStateSQD, "SQE": nic.QPStateSQE, "ERR": nic.QPStateErr,
	}
)

// attrBit lists every mask bit by its libibverbs name, in bit order, plus
// two bits libibverbs does not define.
var attrBit = []struct {
	name string
	bit  nic.QPAttrMask
}{
	{"STATE", nic.QPAttrState},
	{"CUR_STATE", nic.QPAttrCurState},
	{"EN_SQD_ASYNC_NOTIFY", nic.QPAttrEnSQDAsyncNotify},
	{"ACCESS_FLAGS", nic.QPAttrAccessFlags},
	{"PKEY_INDEX", nic.QPAttrPKeyIndex},
	{"PORT", nic.QPAttrPort},
	{"QKEY", nic.QPAttrQKey},
	{"AV", nic.QPAttrAV},
	{"PATH_MTU", nic.QPAttrPathMTU},
	{"TIMEOUT", nic.QPAttrTimeout},
	{"RETRY_CNT", nic.QPAttrRetryCnt},
	{"RNR_RETRY", nic.QPAttrRNRRetry},
	{"RQ_PSN", nic.QPAttrRQPSN},
	{"MAX_QP_RD_ATOMIC", nic.QPAttrMaxQPRdAtomic},
	{"ALT_PATH", nic.QPAttrAltPath},
	{"MIN_RNR_TIMER", nic.QPAttrMinRNRTimer},
	{"SQ_PSN", nic.QPAttrSQPSN},
	{"MAX_DEST_RD_ATOMIC", nic.QPAttrMaxDestRdAtomic},
	{"PATH_MIG_STATE", nic.QPAttrPathMigState},
	{"CAP", nic.QPAttrCap},
	{"DEST_QPN", nic.QPAttrDestQPN},
	{"BIT21", 1 << 21},
	{"RATE_LIMIT", nic.QPAttrRateLimit},
	{"BIT26", 1 << 26},
}

// names splits "A|B|C" into its names ("" is none).
func names(s string) []string {
	if s == "" {
		return nil
	}
	return strings.Split(s, "|")
}

// maskOf parses "A|B|C" with the attrBit list.
func maskOf(t *testing.T, s string) nic.QPAttrMask {
	t.Helper()
	var m nic.QPAttrMask
	for _, n := range names(s) {
		found := false
		for _, a := range attrBit {
			if a.name == n {
				m |= a.bit
				found = true
			}
		}
		require.True(t, found, "unknown attribute name %q in test table", n)
	}
	return m
}

var rxeLimits = nic.Limits{MaxQPRdAtom: 128, MaxQPInitRdAtom: 128, PortCount: 1, PKeyTableLen: 1}

// goodAttr returns attributes whose every field is legal, for a move from
// cur to next.
func goodAttr(cur, next nic.QPState) *nic.QPAttr {
	return &nic.QPAttr{
		QPState:       next,
		CurQPState:    cur,
		PathMTU:       nic.MTU1024,
		QKey:          0x11111111,
		RQPSN:         0x123456,
		SQPSN:         0x654321,
		DestQPNum:     0x12,
		QPAccessFlags: nic.AccessLocalWrite | nic.AccessRemoteWrite | nic.AccessRemoteRead,
		AHAttr: nic.AHAttr{
			GRH:      nic.GRH{DGID: netip.MustParseAddr("::ffff:10.0.0.2"), HopLimit: 64},
			IsGlobal: true,
			PortNum:  1,
		},
		PKeyIndex:        0,
		EnSQDAsyncNotify: true,
		MaxRdAtomic:      16,
		MaxDestRdAtomic:  16,
		MinRNRTimer:      12,
		PortNum:          1,
		Timeout:          14,
		RetryCnt:         7,
		RNRRetry:         7,
	}
}

// wantEINVAL checks that err is a *nic.Error wrapping EINVAL with message
// msg.
func wantEINVAL(t *testing.T, err error, msg string) {
	t.Helper()
	require.Error(t, err)
	assert.True(t, errors.Is(err, syscall.EINVAL), "errors.Is(%v, EINVAL)", err)
	var e *nic.Error
	require.True(t, errors.As(err, &e), "%T is not *nic.Error", err)
	assert.Equal(t, msg, e.Msg)
}

// lookup finds the row for (typ, from, to), if the transition is legal.
func lookup(typ, from, to string) (kernelRow, bool) {
	for _, r := range kernelTable {
		if r.typ == typ && r.from == from && r.to == to {
			return r, true
		}
	}
	return kernelRow{}, false
}

func TestKernelTableHasNoDuplicates(t *testing.T) {
	seen := map[string]bool{}
	for _, r := range kernelTable {
		k := r.typ + " " + r.from + "->" + r.to
		assert.False(t, seen[k], "duplicate row %s", k)
		seen[k] = true
	}
	// 22 legal cells (RESET 2, INIT 4, RTR 3, RTS 4, SQD 4, SQE 3, ERR 2)
	// for each of three types.
	assert.Len(t, kernelTable, 66)
}

// TestCheckModifyAllPairs covers every (type, from, to): the exact
// required mask, each required bit removed, each optional bit added, and
// each other bit added.
func TestCheckModifyAllPairs(t *testing.T) {
	for _, typ := range typeOrder {
		for _, from := range stateOrder {
			for _, to := range stateOrder {
				name := typ + "/" + from + "->" + to
				t.Run(name, func(t *testing.T) {
					qt, cur, next := testTypes[typ], testStates[from], testStates[to]
					prefix := fmt.Sprintf("modify_qp %s %s->%s: ", typ, from, to)
					row, legal := lookup(typ, from, to)
					if !legal {
						got, err := nic.CheckModify(qt, cur, goodAttr(cur, next), nic.QPAttrState, rxeLimits)
						wantEINVAL(t, err, prefix+"illegal transition")
						assert.Equal(t, cur, got, "state on failure")
						if from == to {
							// The same "transition" with no state in the mask.
							_, err := nic.CheckModify(qt, cur, goodAttr(cur, next), 0, rxeLimits)
							wantEINVAL(t, err, prefix+"illegal transition")
						}
						return
					}
					req, opt := maskOf(t, row.req), maskOf(t, row.opt)

					// (a) exactly the required attributes.
					got, err := nic.CheckModify(qt, cur, goodAttr(cur, next), nic.QPAttrState|req, rxeLimits)
					require.NoError(t, err)
					assert.Equal(t, next, got)
					if from == to {
						got, err := nic.CheckModify(qt, cur, goodAttr(cur, next), req, rxeLimits)
						require.NoError(t, err, "no STATE in the mask")
						assert.Equal(t, cur, got)
					}

					// (b) each required attribute left out.
					for _, n := range names(row.req) {
						mask := nic.QPAttrState | req&^maskOf(t, n)
						got, err := nic.CheckModify(qt, cur, goodAttr(cur, next), mask, rxeLimits)
						wantEINVAL(t, err, prefix+"missing required attribute "+n)
						assert.Equal(t, cur, got)
					}

					// (c) each optional attribute added; ALT_PATH is in the
					// table but refused on RoCE by _ib_modify_qp.
					all := nic.QPAttrState | req
					for _, n := range names(row.opt) {
						mask := nic.QPAttrState | req | maskOf(t, n)
						got, err := nic.CheckModify(qt, cur, goodAttr(cur, next), mask, rxeLimits)
						if n == "ALT_PATH" {
							wantEINVAL(t, err, prefix+"attribute ALT_PATH not supported on RoCE")
							continue
						}
						require.NoError(t, err, "optional %s", n)
						assert.Equal(t, next, got)
						all |= maskOf(t, n)
					}
					got, err = nic.CheckModify(qt, cur, goodAttr(cur, next), all, rxeLimits)
					require.NoError(t, err, "all optional attributes at once")
					assert.Equal(t, next, got)

					// (d) every other bit added.
					allowed := nic.QPAttrState | req | opt
					for _, a := range attrBit {
						if allowed&a.bit != 0 {
							continue
						}
						got, err := nic.CheckModify(qt, cur, goodAttr(cur, next), nic.QPAttrState|req|a.bit, rxeLimits)
						wantEINVAL(t, err, prefix+"attribute "+a.name+" not allowed")
						assert.Equal(t, cur, got)
					}
				})
			}
		}
	}
}

// TestCheckModifyValues checks each value range at both edges.
func TestCheckModifyValues(t *testing.T) {
	type tc struct {
		name     string
		typ      string
		from, to string
		mask     string // besides STATE
		lim      *nic.Limits
		set      func(a *nic.QPAttr)
		want     string // the message after the prefix; "" for success
	}
	rcRTR := "AV|PATH_MTU|RQ_PSN|MIN_RNR_TIMER|MAX_DEST_RD_ATOMIC|DEST_QPN"
	rcRTS := "TIMEOUT|RETRY_CNT|RNR_RETRY|MAX_QP_RD_ATOMIC|SQ_PSN"
	rcINIT := "ACCESS_FLAGS|PKEY_INDEX|PORT"
	twoPorts := nic.Limits{MaxQPRdAtom: 128, MaxQPInitRdAtom: 128, PortCount: 2, PKeyTableLen: 4}
	noPKeys := nic.Limits{MaxQPRdAtom: 128, MaxQPInitRdAtom: 128, PortCount: 1}
	noPorts := nic.Limits{MaxQPRdAtom: 128, MaxQPInitRdAtom: 128, PKeyTableLen: 1}
	noRd := nic.Limits{PortCount: 1, PKeyTableLen: 1}
	cases := []tc{
		// PATH_MTU: MTU256..MTU4096.
		{"mtu 0", "RC", "INIT", "RTR", rcRTR, nil, func(a *nic.QPAttr) { a.PathMTU = 0 }, "path_mtu 0 out of range 1..5"},
		{"mtu 256", "RC", "INIT", "RTR", rcRTR, nil, func(a *nic.QPAttr) { a.PathMTU = nic.MTU256 }, ""},
		{"mtu 4096", "UC", "INIT", "RTR", "AV|PATH_MTU|RQ_PSN|DEST_QPN", nil, func(a *nic.QPAttr) { a.PathMTU = nic.MTU4096 }, ""},
		{"mtu 6", "UC", "INIT", "RTR", "AV|PATH_MTU|RQ_PSN|DEST_QPN", nil, func(a *nic.QPAttr) { a.PathMTU = 6 }, "path_mtu 6 out of range 1..5"},
		// TIMEOUT <= 31.
		{"timeout 0", "RC", "RTR", "RTS", rcRTS, nil, func(a *nic.QPAttr) { a.Timeout = 0 }, ""},
		{"timeout 31", "RC", "RTR", "RTS", rcRTS, nil, func(a *nic.QPAttr) { a.Timeout = 31 }, ""},
		{"timeout 32", "RC", "RTR", "RTS", rcRTS, nil, func(a *nic.QPAttr) { a.Timeout = 32 }, "timeout 32 out of range 0..31"},
		{"timeout in SQD", "RC", "SQD", "SQD", "TIMEOUT", nil, func(a *nic.QPAttr) { a.Timeout = 255 }, "timeout 255 out of range 0..31"},
		// RETRY_CNT <= 7.
		{"retry 7", "RC", "RTR", "RTS", rcRTS, nil, func(a *nic.QPAttr) { a.RetryCnt = 7 }, ""},
		{"retry 8", "RC", "RTR", "RTS", rcRTS, nil, func(a *nic.QPAttr) { a.RetryCnt = 8 }, "retry_cnt 8 out of range 0..7"},
		{"retry 9", "RC", "RTR", "RTS", rcRTS, nil, func(a *nic.QPAttr) { a.RetryCnt = 9 }, "retry_cnt 9 out of range 0..7"},
		// RNR_RETRY <= 7.
		{"rnr retry 0", "RC", "RTR", "RTS", rcRTS, nil, func(a *nic.QPAttr) { a.RNRRetry = 0 }, ""},
		{"rnr retry 8", "RC", "RTR", "RTS", rcRTS, nil, func(a *nic.QPAttr) { a.RNRRetry = 8 }, "rnr_retry 8 out of range 0..7"},
		// MIN_RNR_TIMER <= 31.
		{"rnr timer 31", "RC", "INIT", "RTR", rcRTR, nil, func(a *nic.QPAttr) { a.MinRNRTimer = 31 }, ""},
		{"rnr timer 32", "RC", "INIT", "RTR", rcRTR, nil, func(a *nic.QPAttr) { a.MinRNRTimer = 32 }, "min_rnr_timer 32 out of range 0..31"},
		{"rnr timer in RTS", "RC", "RTS", "RTS", "MIN_RNR_TIMER", nil, func(a *nic.QPAttr) { a.MinRNRTimer = 40 }, "min_rnr_timer 40 out of range 0..31"},
		// PORT in 1..PortCount.
		{"port 0", "RC", "RESET", "INIT", rcINIT, nil, func(a *nic.QPAttr) { a.PortNum = 0 }, "port_num 0 out of range 1..1"},
		{"port 1", "RC", "RESET", "INIT", rcINIT, nil, func(a *nic.QPAttr) { a.PortNum = 1 }, ""},
		{"port 2", "UD", "RESET", "INIT", "PKEY_INDEX|PORT|QKEY", nil, func(a *nic.QPAttr) { a.PortNum = 2 }, "port_num 2 out of range 1..1"},
		{"port 2 of 2", "RC", "RESET", "INIT", rcINIT, &twoPorts, func(a *nic.QPAttr) { a.PortNum = 2 }, ""},
		{"port 3 of 2", "UC", "INIT", "INIT", "PORT", &twoPorts, func(a *nic.QPAttr) { a.PortNum = 3 }, "port_num 3 out of range 1..2"},
		{"no ports", "RC", "RESET", "INIT", rcINIT, &noPorts, func(a *nic.QPAttr) { a.PortNum = 1 }, "port_num 1: the device has no ports"},
		// PKEY_INDEX < PKeyTableLen.
		{"pkey 0", "RC", "RESET", "INIT", rcINIT, nil, func(a *nic.QPAttr) { a.PKeyIndex = 0 }, ""},
		{"pkey 1", "RC", "RESET", "INIT", rcINIT, nil, func(a *nic.QPAttr) { a.PKeyIndex = 1 }, "pkey_index 1 out of range 0..0"},
		{"pkey 3 of 4", "UD", "SQD", "SQD", "PKEY_INDEX", &twoPorts, func(a *nic.QPAttr) { a.PKeyIndex = 3 }, ""},
		{"pkey 4 of 4", "UD", "SQD", "SQD", "PKEY_INDEX", &twoPorts, func(a *nic.QPAttr) { a.PKeyIndex = 4 }, "pkey_index 4 out of range 0..3"},
		{"no pkeys", "RC", "RESET", "INIT", rcINIT, &noPKeys, func(a *nic.QPAttr) { a.PKeyIndex = 0 }, "pkey_index 0: the P_Key table is empty"},
		// MAX_QP_RD_ATOMIC <= MaxQPRdAtom.
		{"rd atomic 128", "RC", "RTR", "RTS", rcRTS, nil, func(a *nic.QPAttr) { a.MaxRdAtomic = 128 }, ""},
		{"rd atomic 129", "RC", "RTR", "RTS", rcRTS, nil, func(a *nic.QPAttr) { a.MaxRdAtomic = 129 }, "max_rd_atomic 129 out of range 0..128"},
		{"rd atomic 0 of 0", "RC", "RTR", "RTS", rcRTS, &noRd, func(a *nic.QPAttr) { a.MaxRdAtomic = 0 }, ""},
		{"rd atomic 1 of 0", "RC", "RTR", "RTS", rcRTS, &noRd, func(a *nic.QPAttr) { a.MaxRdAtomic = 1 }, "max_rd_atomic 1 out of range 0..0"},
		// MAX_DEST_RD_ATOMIC <= MaxQPInitRdAtom.
		{"dest rd atomic 128", "RC", "INIT", "RTR", rcRTR, nil, func(a *nic.QPAttr) { a.MaxDestRdAtomic = 128 }, ""},
		{"dest rd atomic 129", "RC", "INIT", "RTR", rcRTR, nil, func(a *nic.QPAttr) { a.MaxDestRdAtomic = 129 }, "max_dest_rd_atomic 129 out of range 0..128"},
		{"dest rd atomic 1 of 0", "RC", "SQD", "SQD", "MAX_DEST_RD_ATOMIC", &noRd, func(a *nic.QPAttr) { a.MaxDestRdAtomic = 1 }, "max_dest_rd_atomic 1 out of range 0..0"},
		// DEST_QPN, RQ_PSN, SQ_PSN <= 0xFFFFFF.
		{"dest qpn max", "RC", "INIT", "RTR", rcRTR, nil, func(a *nic.QPAttr) { a.DestQPNum = 0xFFFFFF }, ""},
		{"dest qpn 2^24", "RC", "INIT", "RTR", rcRTR, nil, func(a *nic.QPAttr) { a.DestQPNum = 1 << 24 }, "dest_qp_num 0x1000000 out of range 0..0xffffff"},
		{"rq psn max", "UC", "INIT", "RTR", "AV|PATH_MTU|RQ_PSN|DEST_QPN", nil, func(a *nic.QPAttr) { a.RQPSN = 0xFFFFFF }, ""},
		{"rq psn 2^24", "UC", "INIT", "RTR", "AV|PATH_MTU|RQ_PSN|DEST_QPN", nil, func(a *nic.QPAttr) { a.RQPSN = 1 << 24 }, "rq_psn 0x1000000 out of range 0..0xffffff"},
		{"sq psn max", "UD", "RTR", "RTS", "SQ_PSN", nil, func(a *nic.QPAttr) { a.SQPSN = 0xFFFFFF }, ""},
		{"sq psn 2^32-1", "UD", "RTR", "RTS", "SQ_PSN", nil, func(a *nic.QPAttr) { a.SQPSN = 0xFFFFFFFF }, "sq_psn 0xffffffff out of range 0..0xffffff"},
		// AV: a GRH with a DGID.
		{"av ipv6", "RC", "INIT", "RTR", rcRTR, nil, func(a *nic.QPAttr) { a.AHAttr.GRH.DGID = netip.MustParseAddr("fe80::1") }, ""},
		{"av not global", "RC", "INIT", "RTR", rcRTR, nil, func(a *nic.QPAttr) { a.AHAttr.IsGlobal = false }, "ah_attr.is_global is 0 (RoCE needs a GRH)"},
		{"av no dgid", "UC", "INIT", "RTR", "AV|PATH_MTU|RQ_PSN|DEST_QPN", nil, func(a *nic.QPAttr) { a.AHAttr.GRH.DGID = netip.Addr{} }, "ah_attr.grh.dgid is not set"},
		{"av in SQD", "UC", "SQD", "SQD", "AV", nil, func(a *nic.QPAttr) { a.AHAttr.IsGlobal = false }, "ah_attr.is_global is 0 (RoCE needs a GRH)"},
		// ACCESS_FLAGS: the four defined bits only.
		{"access none", "RC", "RESET", "INIT", rcINIT, nil, func(a *nic.QPAttr) { a.QPAccessFlags = 0 }, ""},
		{"access all", "RC", "RESET", "INIT", rcINIT, nil, func(a *nic.QPAttr) { a.QPAccessFlags = 0xF }, ""},
		{"access 0x1f", "UC", "RESET", "INIT", rcINIT, nil, func(a *nic.QPAttr) { a.QPAccessFlags = 0x1F }, "qp_access_flags 0x1f has undefined bits 0x10"},
		{"access in RTS", "RC", "RTS", "RTS", "ACCESS_FLAGS", nil, func(a *nic.QPAttr) { a.QPAccessFlags = 1 << 20 }, "qp_access_flags 0x100000 has undefined bits 0x100000"},
		// CUR_STATE must be the QP's state.
		{"cur state match", "UD", "RTR", "RTS", "SQ_PSN|CUR_STATE", nil, nil, ""},
		{"cur state mismatch", "RC", "RTS", "RTS", "CUR_STATE", nil, func(a *nic.QPAttr) { a.CurQPState = nic.QPStateRTR }, "cur_qp_state RTR does not match the QP's state RTS"},
		{"cur state bogus", "UC", "SQE", "RTS", "CUR_STATE", nil, func(a *nic.QPAttr) { a.CurQPState = 9 }, "cur_qp_state QPState(9) does not match the QP's state SQE"},
		// Values are checked only for attributes in the mask.
		{"unmasked junk", "RC", "RESET", "INIT", rcINIT, nil, func(a *nic.QPAttr) {
			a.Timeout, a.RetryCnt, a.PathMTU, a.SQPSN, a.AHAttr = 200, 200, 200, 1<<30, nic.AHAttr{}
		}, ""},
		// The lowest failing bit is reported first: TIMEOUT (9) before
		// RETRY_CNT (10) before SQ_PSN (16).
		{"two bad values", "RC", "RTR", "RTS", rcRTS, nil, func(a *nic.QPAttr) { a.SQPSN, a.RetryCnt, a.Timeout = 1<<24, 8, 32 }, "timeout 32 out of range 0..31"},
		// The examples of the API's documentation.
		{"doc: UD DEST_QPN", "UD", "INIT", "RTR", "DEST_QPN", nil, nil, "attribute DEST_QPN not allowed"},
		{"doc: RC PATH_MTU", "RC", "INIT", "RTR", "AV|RQ_PSN|MIN_RNR_TIMER|MAX_DEST_RD_ATOMIC|DEST_QPN", nil, nil, "missing required attribute PATH_MTU"},
		// Missing attributes are reported before surplus ones, the lowest
		// bit first, as ib_modify_qp_is_ok checks req_param first.
		{"missing and extra", "RC", "INIT", "RTR", "PORT|AV|RQ_PSN|MIN_RNR_TIMER|MAX_DEST_RD_ATOMIC|DEST_QPN", nil, nil, "missing required attribute PATH_MTU"},
		{"two missing", "RC", "RTR", "RTS", "RETRY_CNT|MAX_QP_RD_ATOMIC", nil, nil, "missing required attribute TIMEOUT"},
		{"two extra", "UD", "RTS", "RTS", "PORT|CAP", nil, nil, "attribute PORT not allowed"},
		{"missing before bad value", "RC", "RTR", "RTS", "TIMEOUT|RETRY_CNT|RNR_RETRY|MAX_QP_RD_ATOMIC", nil, func(a *nic.QPAttr) { a.Timeout = 99 }, "missing required attribute SQ_PSN"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			lim := rxeLimits
			if c.lim != nil {
				lim = *c.lim
			}
			cur, next := testStates[c.from], testStates[c.to]
			attr := goodAttr(cur, next)
			if c.set != nil {
				c.set(attr)
			}
			got, err := nic.CheckModify(testTypes[c.typ], cur, attr, nic.QPAttrState|maskOf(t, c.mask), lim)
			if c.want == "" {
				require.NoError(t, err)
				assert.Equal(t, next, got)
				return
			}
			wantEINVAL(t, err, fmt.Sprintf("modify_qp %s %s->%s: %s", c.typ, c.from, c.to, c.want))
			assert.Equal(t, cur, got)
		})
	}
}

// TestCheckModifyNoState covers modifies whose mask has no STATE: the
// "transition" is cur->cur.
func TestCheckModifyNoState(t *testing.T) {
	cases := []struct {
		typ, state, mask string
		want             string // "" for success
	}{
		{"RC", "RESET", "", ""},
		{"RC", "RESET", "PORT", "attribute PORT not allowed"},
		{"RC", "INIT", "", ""},
		{"RC", "INIT", "ACCESS_FLAGS|PKEY_INDEX|PORT", ""},
		{"UD", "INIT", "QKEY", ""},
		{"UD", "INIT", "ACCESS_FLAGS", "attribute ACCESS_FLAGS not allowed"},
		{"RC", "RTR", "", "illegal transition"},
		{"UC", "RTR", "ACCESS_FLAGS", "illegal transition"},
		{"RC", "RTS", "", ""},
		{"RC", "RTS", "MIN_RNR_TIMER|ACCESS_FLAGS|CUR_STATE", ""},
		{"UC", "RTS", "MIN_RNR_TIMER", "attribute MIN_RNR_TIMER not allowed"},
		{"UD", "RTS", "QKEY", ""},
		{"RC", "RTS", "TIMEOUT", "attribute TIMEOUT not allowed"},
		{"RC", "SQD", "TIMEOUT|RETRY_CNT|AV", ""},
		{"UD", "SQD", "PKEY_INDEX|QKEY", ""},
		{"UC", "SQE", "", "illegal transition"},
		{"UD", "ERR", "", ""},
		{"UD", "ERR", "QKEY", "attribute QKEY not allowed"},
	}
	for _, c := range cases {
		t.Run(c.typ+"/"+c.state+"/"+c.mask, func(t *testing.T) {
			cur := testStates[c.state]
			attr := goodAttr(cur, nic.QPStateErr) // QPState must be ignored
			got, err := nic.CheckModify(testTypes[c.typ], cur, attr, maskOf(t, c.mask), rxeLimits)
			if c.want == "" {
				require.NoError(t, err)
				assert.Equal(t, cur, got)
				return
			}
			wantEINVAL(t, err, fmt.Sprintf("modify_qp %s %s->%s: %s", c.typ, c.state, c.state, c.want))
			assert.Equal(t, cur, got)
		})
	}
}

func TestCheckModifyBadInputs(t *testing.T) {
	attr := goodAttr(nic.QPStateReset, nic.QPStateInit)
	mask := nic.QPAttrState | nic.QPAttrPKeyIndex | nic.QPAttrPort | nic.QPAttrAccessFlags

	_, err := nic.CheckModify(nic.QPType(1), nic.QPStateReset, attr, mask, rxeLimits)
	wantEINVAL(t, err, "modify_qp QPType(1) RESET->INIT: QP type 1 is not RC, UC or UD")

	_, err = nic.CheckModify(nic.QPTypeRC, nic.QPState(9), attr, mask, rxeLimits)
	wantEINVAL(t, err, "modify_qp RC QPState(9)->INIT: current state 9 is not a QP state")

	attr.QPState = 7
	_, err = nic.CheckModify(nic.QPTypeRC, nic.QPStateInit, attr, nic.QPAttrState, rxeLimits)
	wantEINVAL(t, err, "modify_qp RC INIT->QPState(7): qp_state 7 is not a QP state")
}

// TestCheckModifyPingpong walks the masks ibv_rc_pingpong and
// ibv_ud_pingpong use.
func TestCheckModifyPingpong(t *testing.T) {
	steps := []struct {
		typ, from, to, mask string
	}{
		{"RC", "RESET", "INIT", "STATE|PKEY_INDEX|PORT|ACCESS_FLAGS"},
		{"RC", "INIT", "RTR", "STATE|AV|PATH_MTU|DEST_QPN|RQ_PSN|MAX_DEST_RD_ATOMIC|MIN_RNR_TIMER"},
		{"RC", "RTR", "RTS", "STATE|TIMEOUT|RETRY_CNT|RNR_RETRY|SQ_PSN|MAX_QP_RD_ATOMIC"},
		{"RC", "RTS", "ERR", "STATE"},
		{"RC", "ERR", "RESET", "STATE"},
		{"UD", "RESET", "INIT", "STATE|PKEY_INDEX|PORT|QKEY"},
		{"UD", "INIT", "RTR", "STATE"},
		{"UD", "RTR", "RTS", "STATE|SQ_PSN"},
	}
	for _, s := range steps {
		cur, next := testStates[s.from], testStates[s.to]
		got, err := nic.CheckModify(testTypes[s.typ], cur, goodAttr(cur, next), maskOf(t, s.mask), rxeLimits)
		require.NoError(t, err, "%s %s->%s", s.typ, s.from, s.to)
		assert.Equal(t, next, got)
	}
}

func TestMaskNames(t *testing.T) {
	cases := []struct {
		m    nic.QPAttrMask
		want string
	}{
		{0, "0"},
		{nic.QPAttrState | nic.QPAttrPKeyIndex | nic.QPAttrPort, "STATE|PKEY_INDEX|PORT"},
		{nic.QPAttrPort | nic.QPAttrState | nic.QPAttrPKeyIndex, "STATE|PKEY_INDEX|PORT"},
		{nic.QPAttrDestQPN, "DEST_QPN"},
		{nic.QPAttrRateLimit | 1<<21 | 1<<31, "BIT21|RATE_LIMIT|BIT31"},
		{1<<21 - 1, "STATE|CUR_STATE|EN_SQD_ASYNC_NOTIFY|ACCESS_FLAGS|PKEY_INDEX|PORT|QKEY|AV|PATH_MTU|TIMEOUT|" +
			"RETRY_CNT|RNR_RETRY|RQ_PSN|MAX_QP_RD_ATOMIC|ALT_PATH|MIN_RNR_TIMER|SQ_PSN|MAX_DEST_RD_ATOMIC|" +
			"PATH_MIG_STATE|CAP|DEST_QPN"},
	}
	for _, c := range cases {
		assert.Equal(t, c.want, nic.MaskNames(c.m), "%#x", uint32(c.m))
	}
	for _, a := range attrBit {
		assert.Equal(t, a.name, nic.MaskNames(a.bit))
	}
}
