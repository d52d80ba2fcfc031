package nic

import (
	"syscall"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// mwTestBind binds w through qp over [off, off+n) of mr with the access
// given and the next key byte; it returns what bindMW refused, or "".
func mwTestBind(tab *memTable, qp *QP, w *MW, mr *MR, off, n uint64, access AccessFlags) string {
	b := BindMW{MW: w, RKey: IncRKey(w.RKey), BindInfo: BindInfo{MR: mr, Addr: mr.Addr + off, Length: n, Access: access}, mwKey: w.RKey}
	why := tab.bindMW(qp, &b)
	if why == "" {
		w.RKey = b.RKey
	}
	return why
}

// TestMWKeys: window keys carry an index of the MW range (from rxe 6.1's
// RXE_MIN_MW_INDEX, above every MR index), so a key names a window or a
// region by its index alone (rkey_is_mw); indices are handed out
// cyclically and a freed window's key is not handed out again at once.
func TestMWKeys(t *testing.T) {
	tab := newMemTable(memTestBase)
	pd := &PD{}
	mr := memTestReg(t, &tab, pd, 64, 0, AccessLocalWrite)
	assert.False(t, isMWKey(mr.RKey))
	w1, err := tab.allocMW(pd, MWType1)
	require.NoError(t, err)
	w2, err := tab.allocMW(pd, MWType2)
	require.NoError(t, err)
	assert.True(t, isMWKey(w1.RKey))
	assert.Equal(t, uint32(rxeMinMWIndex), w1.RKey>>8)
	assert.Equal(t, uint32(rxeMinMWIndex+1), w2.RKey>>8)
	assert.Equal(t, 3, pd.refs, "an MR and two windows hold the PD")
	require.NoError(t, tab.deallocMW(w1))
	w3, err := tab.allocMW(pd, MWType1)
	require.NoError(t, err)
	assert.Equal(t, uint32(rxeMinMWIndex+2), w3.RKey>>8, "cyclic: the freed index is not reused first")
	assert.Same(t, w2, tab.mwByIndex(w2.RKey))
	assert.Nil(t, tab.mwByIndex(w1.RKey))
	assert.Equal(t, uint32(0x1234_5601), IncRKey(0x1234_5600))
	assert.Equal(t, uint32(0x1234_5600), IncRKey(0x1234_56ff), "the key byte wraps, the index stays")
}

// TestMWBindAndLookup walks a type 2 window through rxe_mw.c's states:
// FREE → bound (VALID) → invalidated (FREE) → bound again, and checks
// which remote accesses lookupRemote lets through at each step.
func TestMWBindAndLookup(t *testing.T) {
	tab := newMemTable(memTestBase)
	pd, other := &PD{}, &PD{}
	qp, qp2 := &QP{pd: pd}, &QP{pd: pd}
	mr := memTestReg(t, &tab, pd, 4096, 0, AccessLocalWrite|AccessMWBind)
	w, err := tab.allocMW(pd, MWType2)
	require.NoError(t, err)

	_, ok, msg := tab.remote(qp, w.RKey, mr.Addr+1024, 8, AccessRemoteWrite)
	assert.False(t, ok)
	assert.Contains(t, msg, "MW not bound", "a type 2 window starts FREE")

	require.Empty(t, mwTestBind(&tab, qp, w, mr, 1024, 1024, AccessRemoteWrite|AccessRemoteRead))
	assert.Equal(t, 1, mr.mws)
	got, ok, msg := tab.remote(qp, w.RKey, mr.Addr+1024, 1024, AccessRemoteWrite)
	assert.True(t, ok, msg)
	assert.Same(t, mr, got, "the bytes are the region's")

	rows := []struct {
		name string
		qp   *QP
		key  uint32
		va   uint64
		n    uint64
		need AccessFlags
		msg  string
	}{
		{"another QP (type 2 is bound to its QP)", qp2, w.RKey, mr.Addr + 1024, 8, AccessRemoteWrite, "bound through another QP"},
		{"another PD", &QP{pd: other}, w.RKey, mr.Addr + 1024, 8, AccessRemoteWrite, "MW in another PD"},
		{"old key byte", qp, w.RKey - 1, mr.Addr + 1024, 8, AccessRemoteWrite, "names no MW"},
		{"right not granted", qp, w.RKey, mr.Addr + 1024, 8, AccessRemoteAtomic, "MW lacks REMOTE_ATOMIC"},
		{"past the window (spec: the window bounds it)", qp, w.RKey, mr.Addr + 2040, 16, AccessRemoteWrite, "va range outside MW"},
	}
	for _, r := range rows {
		_, ok, msg := tab.remote(r.qp, r.key, r.va, r.n, r.need)
		assert.False(t, ok, r.name)
		assert.Contains(t, msg, r.msg, r.name)
	}

	assert.Contains(t, mwTestBind(&tab, qp, w, mr, 0, 8, AccessRemoteRead), "bound; invalidate it first", "o10-37.2.30")
	assert.Contains(t, tab.invalidate(w.RKey^0x80), "names no MW")
	require.Empty(t, tab.invalidate(w.RKey))
	assert.Equal(t, 0, mr.mws)
	_, ok, _ = tab.remote(qp, w.RKey, mr.Addr+1024, 8, AccessRemoteWrite)
	assert.False(t, ok, "invalidated")
	assert.Contains(t, tab.invalidate(w.RKey), "is not bound", "a second invalidation is refused")
	require.Empty(t, mwTestBind(&tab, qp2, w, mr, 0, 8, AccessRemoteRead))
	_, ok, msg = tab.remote(qp2, w.RKey, mr.Addr, 8, AccessRemoteRead)
	assert.True(t, ok, msg)
}

// TestMWBindChecks is rxe_check_bind_mw's list, in its order.
func TestMWBindChecks(t *testing.T) {
	tab := newMemTable(memTestBase)
	pd, other := &PD{}, &PD{}
	qp := &QP{pd: pd}
	bindable := memTestReg(t, &tab, pd, 4096, 0, AccessLocalWrite|AccessMWBind)
	noBind := memTestReg(t, &tab, pd, 4096, 0, AccessLocalWrite)
	noLocal := memTestReg(t, &tab, pd, 4096, 0, AccessMWBind)
	rows := []struct {
		name   string
		typ    MWType
		pd     *PD
		mr     *MR
		off, n uint64
		access AccessFlags
		msg    string
	}{
		{"type 2 in another PD than the QP (C10-72)", MWType2, other, bindable, 0, 8, AccessRemoteRead, "another PD than the QP"},
		{"type 2 with length 0 (o10-37.2.40)", MWType2, pd, bindable, 0, 0, AccessRemoteRead, "cannot be bound with length 0"},
		{"MR without MW_BIND (C10-73)", MWType2, pd, noBind, 0, 8, AccessRemoteRead, "lacks MW_BIND"},
		{"remote write, MR without LOCAL_WRITE (C10-74)", MWType1, pd, noLocal, 0, 8, AccessRemoteWrite, "needs an MR with LOCAL_WRITE"},
		{"past the MR (C10-75)", MWType1, pd, bindable, 4090, 8, AccessRemoteRead, "outside MR"},
		{"zero based (not modelled)", MWType2, pd, bindable, 0, 8, AccessRemoteRead | AccessZeroBased, "unsupported bits 0x20"},
	}
	for _, r := range rows {
		w, err := tab.allocMW(r.pd, r.typ)
		require.NoError(t, err)
		assert.Contains(t, mwTestBind(&tab, qp, w, r.mr, r.off, r.n, r.access), r.msg, r.name)
		assert.Zero(t, r.mr.mws, r.name)
	}
	// A type 1 window is not bound to a QP: any QP of its PD reaches it,
	// and a zero-length bind empties it again.
	w1, err := tab.allocMW(pd, MWType1)
	require.NoError(t, err)
	require.Empty(t, mwTestBind(&tab, qp, w1, bindable, 0, 64, AccessRemoteRead))
	_, ok, msg := tab.remote(&QP{pd: pd}, w1.RKey, bindable.Addr, 64, AccessRemoteRead)
	assert.True(t, ok, msg)
	assert.Contains(t, tab.invalidate(w1.RKey), "type 1 MW", "o10-37.2.26")
	b := BindMW{MW: w1, RKey: IncRKey(w1.RKey), mwKey: w1.RKey}
	require.Empty(t, tab.bindMW(qp, &b))
	assert.Zero(t, bindable.mws)
	assert.Contains(t, tab.invalidate(bindable.RKey), "user MR, which cannot be invalidated")
}

// TestRereg: ibv_rereg_mr's checks in libibverbs' and the kernel's order,
// rxe 6.1's EOPNOTSUPP for everything that reaches the device, and what a
// supported rereg changes (the keys stay).
func TestRereg(t *testing.T) {
	pd, pd2 := &PD{}, &PD{}
	rows := []struct {
		name      string
		flags     ReregFlags
		pd        *PD
		buf       []byte
		access    AccessFlags
		supported bool
		errno     syscall.Errno
		msg       string
	}{
		{"unknown flag (libibverbs)", 8, nil, nil, 0, false, syscall.EINVAL, "IBV_REREG_MR_ERR_INPUT: flags has unknown bits 0x8"},
		{"translation without a buffer (libibverbs)", ReregChangeTranslation, nil, nil, 0, false, syscall.EINVAL, "CHANGE_TRANSLATION needs addr and length"},
		{"rxe 6.1: access", ReregChangeAccess, nil, nil, AccessLocalWrite, false, syscall.EOPNOTSUPP, "IBV_REREG_MR_ERR_CMD"},
		{"rxe 6.1: no flag", 0, nil, nil, 0, false, syscall.EOPNOTSUPP, "IBV_REREG_MR_ERR_CMD"},
		{"rxe 6.1: bad access still EOPNOTSUPP", ReregChangeAccess, nil, nil, AccessRemoteWrite, false, syscall.EOPNOTSUPP, "does not support rereg"},
		{"no flag", 0, nil, nil, 0, true, syscall.EINVAL, "flags is 0"},
		{"remote write without local write", ReregChangeAccess, nil, nil, AccessRemoteWrite, true, syscall.EINVAL, "REMOTE_WRITE requires LOCAL_WRITE"},
		{"dead PD", ReregChangePD, &PD{dead: true}, nil, 0, true, syscall.EINVAL, "pd is not a live PD"},
	}
	for _, r := range rows {
		tab := newMemTable(memTestBase)
		mr := memTestReg(t, &tab, pd, 64, 0, AccessLocalWrite)
		err := tab.rereg(mr, r.flags, r.pd, r.buf, r.access, r.supported)
		require.Error(t, err, r.name)
		assert.ErrorIs(t, err, r.errno, r.name)
		assert.Contains(t, err.Error(), r.msg, r.name)
		assert.Equal(t, AccessLocalWrite, mr.Access, "%s: nothing changes", r.name)
		assert.Same(t, pd, mr.pd, r.name)
	}

	tab := newMemTable(memTestBase)
	pd = &PD{}
	mr := memTestReg(t, &tab, pd, 64, 0, AccessLocalWrite)
	lkey, addr := mr.LKey, mr.Addr
	buf := make([]byte, 8192)
	require.NoError(t, tab.rereg(mr, ReregChangeTranslation|ReregChangePD|ReregChangeAccess, pd2, buf,
		AccessLocalWrite|AccessRemoteRead, true))
	assert.Equal(t, lkey, mr.LKey)
	assert.Equal(t, lkey, mr.RKey)
	assert.NotEqual(t, addr, mr.Addr, "a new buffer, a new simulated address")
	assert.Equal(t, uint64(8192), mr.Length)
	assert.Equal(t, AccessLocalWrite|AccessRemoteRead, mr.Access)
	assert.Equal(t, 0, pd.refs)
	assert.Equal(t, 1, pd2.refs)
	got, ok, msg := tab.remote(&QP{pd: pd2}, mr.RKey, mr.Addr+4096, 8, AccessRemoteRead)
	assert.True(t, ok, msg)
	assert.Same(t, mr, got)
}

// TestMWLimit: max_mw is enforced as reported, a freed window gives its
// place back, and Resources counts the windows.
func TestMWLimit(t *testing.T) {
	d, pd, _ := resDevice(t)
	d.attr.MaxMW = 2
	w1, err := d.AllocMW(pd, MWType1)
	require.NoError(t, err)
	_, err = d.AllocMW(pd, MWType2)
	require.NoError(t, err)
	_, err = d.AllocMW(pd, MWType2)
	assert.ErrorIs(t, err, syscall.EINVAL)
	assert.Contains(t, err.Error(), "alloc_mw: the device's max_mw (2) reached")
	assert.Equal(t, 2, d.Resources().MW)
	_, err = d.AllocMW(pd, 3)
	assert.ErrorIs(t, err, syscall.EINVAL, "a bad type at the limit is still the limit")
	require.NoError(t, d.DeallocMW(w1))
	assert.Equal(t, 1, d.Resources().MW)
	_, err = d.AllocMW(pd, 3)
	assert.ErrorIs(t, err, syscall.EINVAL)
	assert.Equal(t, 1, d.Resources().MW, "a refused allocation takes no place")
	_, err = d.AllocMW(pd, MWType1)
	require.NoError(t, err)
}
