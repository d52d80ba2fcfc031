package nic

import (
	"bytes"
	"errors"
	"math"
	"syscall"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

const memTestBase = 0x0000_5600_0000_0000

// memTestReg registers n bytes filled with a pattern starting at seed.
func memTestReg(t *testing.T, tab *memTable, pd *PD, n int, seed byte, access AccessFlags) *MR {
	t.Helper()
	buf := make([]byte, n)
	for i := range buf {
		buf[i] = seed + byte(i)
	}
	mr, err := tab.register(pd, buf, access)
	require.NoError(t, err)
	return mr
}

// memTestHuge returns an MR backed by real bytes that claims length
// bytes: resolve and remote read only Addr and Length, and gather and
// scatter touch only the bytes they copy, so a test can have a 2^31-byte
// MR without allocating it.
func memTestHuge(t *testing.T, tab *memTable, pd *PD, real int, length uint64) *MR {
	t.Helper()
	mr := memTestReg(t, tab, pd, real, 0, AccessLocalWrite)
	mr.Length = length
	tab.nextAddr += length // keep later MRs clear of the claimed range
	return mr
}

func TestRegisterErrors(t *testing.T) {
	live := &PD{}
	dead := &PD{dead: true}
	buf := make([]byte, 64)
	tests := []struct {
		name   string
		pd     *PD
		buf    []byte
		access AccessFlags
		msg    string
	}{
		{"remote write without local write", live, buf, AccessRemoteWrite, "reg_mr: access REMOTE_WRITE requires LOCAL_WRITE"},
		{"remote atomic without local write", live, buf, AccessRemoteAtomic | AccessRemoteRead, "reg_mr: access REMOTE_ATOMIC requires LOCAL_WRITE"},
		{"both without local write", live, buf, AccessRemoteWrite | AccessRemoteAtomic, "reg_mr: access REMOTE_WRITE|REMOTE_ATOMIC requires LOCAL_WRITE"},
		{"unknown access bit", live, buf, AccessLocalWrite | 1<<6, "reg_mr: access has unknown bits 0x40"},
		{"unknown high bit", live, buf, 1 << 31, "reg_mr: access has unknown bits 0x80000000"},
		{"nil pd", nil, buf, AccessLocalWrite, "reg_mr: pd is nil"},
		{"dead pd", dead, buf, AccessLocalWrite, "reg_mr: pd is deallocated"},
		{"nil buffer", live, nil, AccessLocalWrite, "reg_mr: length 0"},
		{"empty buffer", live, buf[:0], AccessLocalWrite, "reg_mr: length 0"},
		// The access check comes first, as in ib_uverbs_reg_mr.
		{"access before pd", nil, nil, AccessRemoteWrite, "reg_mr: access REMOTE_WRITE requires LOCAL_WRITE"},
		{"pd before length", dead, nil, 0, "reg_mr: pd is deallocated"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			tab := newMemTable(memTestBase)
			mr, err := tab.register(tc.pd, tc.buf, tc.access)
			require.Error(t, err)
			assert.Nil(t, mr)
			assert.True(t, errors.Is(err, syscall.EINVAL), "want EINVAL, got %v", err)
			assert.Contains(t, err.Error(), tc.msg)
			var ne *Error
			require.True(t, errors.As(err, &ne))
			assert.Equal(t, syscall.EINVAL, ne.Errno)
			assert.Equal(t, 0, live.refs, "a failed registration takes no PD reference")
			// A failed registration consumes neither an index nor addresses.
			ok, err := tab.register(live, buf, 0)
			require.NoError(t, err)
			assert.Equal(t, uint64(memTestBase), ok.Addr)
			assert.Equal(t, uint32(0x101), ok.LKey)
			require.NoError(t, tab.deregister(ok))
		})
	}
}

func TestRegisterValidAccess(t *testing.T) {
	for _, access := range []AccessFlags{
		0,
		AccessLocalWrite,
		AccessRemoteRead,
		AccessLocalWrite | AccessRemoteWrite,
		AccessLocalWrite | AccessRemoteAtomic,
		AccessLocalWrite | AccessRemoteWrite | AccessRemoteRead | AccessRemoteAtomic,
	} {
		tab := newMemTable(memTestBase)
		pd := &PD{}
		mr, err := tab.register(pd, make([]byte, 1), access)
		require.NoError(t, err, "access %s", accessString(access))
		assert.Equal(t, access, mr.Access)
		assert.Equal(t, 1, pd.refs)
	}
}

func TestRegisterAddressesAndKeys(t *testing.T) {
	// Written out by hand: each MR starts on a page, is followed by one
	// guard page, and takes the next index; keys are index<<8 | 1 on an
	// index's first use.
	lengths := []int{1, 4096, 4097, 100, 8192}
	want := []struct {
		addr uint64
		key  uint32
	}{
		{0x5600_0000_0000, 0x101},
		{0x5600_0000_2000, 0x201}, // 1 byte: one page + guard
		{0x5600_0000_4000, 0x301}, // 4096: one page + guard
		{0x5600_0000_7000, 0x401}, // 4097: two pages + guard
		{0x5600_0000_9000, 0x501}, // 100: one page + guard
	}
	run := func() []*MR {
		tab := newMemTable(memTestBase)
		pd := &PD{}
		var mrs []*MR
		for _, n := range lengths {
			mrs = append(mrs, memTestReg(t, &tab, pd, n, 0, AccessLocalWrite))
		}
		return mrs
	}
	a, b := run(), run()
	for i, mr := range a {
		assert.Equal(t, want[i].addr, mr.Addr, "MR %d address", i)
		assert.Zero(t, mr.Addr%mrPageSize, "MR %d page aligned", i)
		assert.Equal(t, want[i].key, mr.LKey, "MR %d lkey", i)
		assert.Equal(t, mr.LKey, mr.RKey, "rkey == lkey, as rxe")
		assert.Equal(t, uint64(lengths[i]), mr.Length)
		assert.Equal(t, b[i].Addr, mr.Addr, "same program, same addresses")
		assert.Equal(t, b[i].LKey, mr.LKey, "same program, same keys")
	}

	// The base is rounded up to a page; 0 picks the default.
	tab := newMemTable(0x1001)
	mr := memTestReg(t, &tab, &PD{}, 10, 0, 0)
	assert.Equal(t, uint64(0x2000), mr.Addr)
	tab = newMemTable(0)
	mr = memTestReg(t, &tab, &PD{}, 10, 0, 0)
	assert.Equal(t, uint64(DefaultAddrBase), mr.Addr)
}

func TestRegisterAliasesBuffer(t *testing.T) {
	tab := newMemTable(memTestBase)
	buf := make([]byte, 16, 64)
	mr, err := tab.register(&PD{}, buf, AccessLocalWrite)
	require.NoError(t, err)
	buf[3] = 0xAB
	assert.Equal(t, byte(0xAB), mr.Bytes()[3], "the MR is the user's memory, not a copy")
	assert.Equal(t, 16, cap(mr.Bytes()), "the MR does not reach past the registered length")
}

func TestRegisterAddressesNeverReused(t *testing.T) {
	tab := newMemTable(memTestBase)
	pd := &PD{}
	a := memTestReg(t, &tab, pd, 100, 0, 0)
	require.NoError(t, tab.deregister(a))
	b := memTestReg(t, &tab, pd, 100, 0, 0)
	assert.Equal(t, a.Addr+2*mrPageSize, b.Addr)
	assert.Equal(t, uint32(0x201), b.LKey, "the next index, not the freed one")
}

func TestKeyGenerationOnIndexReuse(t *testing.T) {
	tab := newMemTable(memTestBase)
	tab.max = 2
	pd := &PD{}
	a := memTestReg(t, &tab, pd, 1, 0, 0)
	b := memTestReg(t, &tab, pd, 1, 0, 0)
	assert.Equal(t, []uint32{0x101, 0x201}, []uint32{a.LKey, b.LKey})

	_, err := tab.register(pd, make([]byte, 1), 0)
	require.Error(t, err)
	assert.True(t, errors.Is(err, syscall.ENOMEM))
	assert.Contains(t, err.Error(), "reg_mr: 2 MRs registered, the device maximum")

	require.NoError(t, tab.deregister(a))
	c := memTestReg(t, &tab, pd, 1, 0, 0)
	assert.Equal(t, uint32(0x102), c.LKey, "index 1 again, next generation")
	assert.Nil(t, tab.byLKey(0x101), "the old key does not reach the new MR")
	assert.Same(t, c, tab.byLKey(0x102))

	require.NoError(t, tab.deregister(b))
	d := memTestReg(t, &tab, pd, 1, 0, 0)
	assert.Equal(t, uint32(0x202), d.LKey)
	assert.Equal(t, 2, pd.refs)
}

func TestDeregister(t *testing.T) {
	tab := newMemTable(memTestBase)
	other := newMemTable(memTestBase)
	pd := &PD{}
	mr := memTestReg(t, &tab, pd, 64, 0, AccessLocalWrite|AccessRemoteWrite)
	foreign := memTestReg(t, &other, pd, 64, 0, 0)
	foreign.LKey = 0x901 // an index this table never handed out
	assert.Equal(t, 2, pd.refs)
	assert.Same(t, mr, tab.byLKey(mr.LKey))
	assert.Same(t, mr, tab.byRKey(mr.RKey))

	require.NoError(t, tab.deregister(mr))
	assert.Equal(t, 1, pd.refs)
	assert.Nil(t, tab.byLKey(mr.LKey))
	assert.Nil(t, tab.byRKey(mr.RKey))

	tests := []struct {
		name string
		mr   *MR
		msg  string
	}{
		{"twice", mr, "dereg_mr: MR lkey 0x101 already deregistered"},
		{"nil", nil, "dereg_mr: mr is nil"},
		{"other table", foreign, "dereg_mr: MR lkey 0x901 is not registered on this device"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			err := tab.deregister(tc.mr)
			require.Error(t, err)
			assert.True(t, errors.Is(err, syscall.EINVAL))
			assert.Contains(t, err.Error(), tc.msg)
		})
	}
	assert.Equal(t, 1, pd.refs)
}

func TestLookupUnknownKeys(t *testing.T) {
	tab := newMemTable(memTestBase)
	mr := memTestReg(t, &tab, &PD{}, 8, 0, 0)
	for _, k := range []uint32{0, 0xFF, mr.LKey + 1, mr.LKey + 0x100, 0xFFFFFFFF} {
		assert.Nil(t, tab.byLKey(k), "lkey %#x", k)
		assert.Nil(t, tab.byRKey(k), "rkey %#x", k)
	}
}

func TestResolve(t *testing.T) {
	tab := newMemTable(memTestBase)
	pd, pdB := &PD{}, &PD{}
	w := memTestReg(t, &tab, pd, 8192, 0, AccessLocalWrite)  // writable
	r := memTestReg(t, &tab, pd, 4096, 0, AccessRemoteRead)  // not locally writable
	o := memTestReg(t, &tab, pdB, 4096, 0, AccessLocalWrite) // other PD
	gone := memTestReg(t, &tab, pd, 4096, 0, AccessLocalWrite)
	require.NoError(t, tab.deregister(gone))
	huge := memTestHuge(t, &tab, pd, 1, 3<<30)

	sge := func(mr *MR, off uint64, n uint32) SGE { return SGE{Addr: mr.Addr + off, Length: n, LKey: mr.LKey} }
	tests := []struct {
		name  string
		sges  []SGE
		flow  dataFlow
		total uint64
		st    WCStatus
		msg   string
	}{
		{"no SGEs", nil, fromMemory, 0, WCSuccess, ""},
		{"one SGE", []SGE{sge(w, 0, 100)}, fromMemory, 100, WCSuccess, ""},
		{"whole MR", []SGE{sge(w, 0, 8192)}, intoMemory, 8192, WCSuccess, ""},
		{"ends at MR end", []SGE{sge(w, 8000, 192)}, intoMemory, 192, WCSuccess, ""},
		{"several MRs", []SGE{sge(w, 10, 20), sge(r, 0, 30), sge(w, 100, 5)}, fromMemory, 55, WCSuccess, ""},
		{"read-only MR, no write needed", []SGE{sge(r, 0, 4096)}, fromMemory, 4096, WCSuccess, ""},
		{"unknown lkey", []SGE{sge(w, 0, 1), {Addr: w.Addr, Length: 1, LKey: 0x1234}}, fromMemory, 0, WCLocProtErr,
			"sge[1]: lkey 0x1234 unknown"},
		{"deregistered lkey", []SGE{sge(gone, 0, 1)}, fromMemory, 0, WCLocProtErr, "sge[0]: lkey 0x401 unknown"},
		{"other PD", []SGE{sge(o, 0, 1)}, fromMemory, 0, WCLocProtErr, "sge[0]: lkey 0x301: MR in another PD"},
		{"crosses MR end", []SGE{sge(w, 8000, 193)}, fromMemory, 0, WCLocProtErr,
			"sge[0]: range 0x560000001f40+193 outside MR 0x560000000000+8192 (lkey 0x101)"},
		{"starts before MR", []SGE{{Addr: r.Addr - 1, Length: 2, LKey: r.LKey}}, fromMemory, 0, WCLocProtErr,
			"sge[0]: range 0x560000002fff+2 outside MR 0x560000003000+4096"},
		{"address wraps", []SGE{{Addr: math.MaxUint64 - 1, Length: 4, LKey: w.LKey}}, fromMemory, 0, WCLocProtErr, "outside MR"},
		{"length 0 is 2^31, beyond a small MR", []SGE{sge(w, 0, 0)}, fromMemory, 0, WCLocProtErr,
			"sge[0]: range 0x560000000000+2147483648 outside MR 0x560000000000+8192"},
		{"missing LOCAL_WRITE", []SGE{sge(w, 0, 1), sge(r, 0, 1)}, intoMemory, 0, WCLocProtErr,
			"sge[1]: lkey 0x201: MR lacks LOCAL_WRITE"},
		{"length 0 is 2^31 inside a large MR", []SGE{sge(huge, 0, 0)}, intoMemory, 1 << 31, WCSuccess, ""},
		{"exactly 2^31 in two SGEs", []SGE{sge(huge, 0, 1<<30), sge(huge, 1<<30, 1<<30)}, fromMemory, 1 << 31, WCSuccess, ""},
		{"total over 2^31", []SGE{sge(huge, 0, 0), sge(w, 0, 1)}, fromMemory, 0, WCLocLenErr,
			"sge[1]: total length 2147483649 over 2^31"},
		{"first fault decides: protection before length", []SGE{sge(huge, 0, 0), sge(r, 0, 1)}, intoMemory, 0, WCLocProtErr,
			"sge[1]: lkey 0x201: MR lacks LOCAL_WRITE"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			total, st, msg := tab.resolve(pd, tc.sges, tc.flow)
			assert.Equal(t, tc.st, st, "status %s: %s", st.Name(), msg)
			assert.Equal(t, tc.total, total)
			if tc.msg == "" {
				assert.Empty(t, msg)
			} else {
				assert.Contains(t, msg, tc.msg)
			}
		})
	}
}

func TestGatherScatter(t *testing.T) {
	tab := newMemTable(memTestBase)
	pd := &PD{}
	a := memTestReg(t, &tab, pd, 64, 0x00, AccessLocalWrite)
	b := memTestReg(t, &tab, pd, 64, 0x80, AccessLocalWrite)
	sges := []SGE{
		{Addr: a.Addr + 10, Length: 5, LKey: a.LKey},
		{Addr: b.Addr, Length: 3, LKey: b.LKey},
		{Addr: a.Addr + 60, Length: 4, LKey: a.LKey},
	}
	total, st, msg := tab.resolve(pd, sges, intoMemory)
	require.Equal(t, WCSuccess, st, msg)
	require.Equal(t, uint64(12), total)
	want := []byte{10, 11, 12, 13, 14, 0x80, 0x81, 0x82, 60, 61, 62, 63}

	got := make([]byte, total)
	tab.gather(sges, got)
	assert.Equal(t, want, got)

	// Every window of the message, as packets of any size would take it.
	for off := 0; off <= len(want); off++ {
		for n := 0; off+n <= len(want); n++ {
			dst := make([]byte, n)
			tab.gatherAt(sges, uint64(off), dst)
			require.Equal(t, want[off:off+n], dst, "gatherAt(%d, %d)", off, n)
		}
	}

	// Scatter a message arriving in 5-byte pieces.
	msgBytes := []byte("ABCDEFGHIJKL")
	for off := 0; off < len(msgBytes); off += 5 {
		tab.scatter(sges, uint64(off), msgBytes[off:min(off+5, len(msgBytes))])
	}
	assert.Equal(t, []byte("ABCDE"), a.Bytes()[10:15])
	assert.Equal(t, []byte("FGH"), b.Bytes()[0:3])
	assert.Equal(t, []byte("IJKL"), a.Bytes()[60:64])
	assert.Equal(t, byte(9), a.Bytes()[9], "bytes around the SGEs untouched")
	assert.Equal(t, byte(15), a.Bytes()[15])
	assert.Equal(t, byte(0x83), b.Bytes()[3])
	tab.gather(sges, got)
	assert.Equal(t, msgBytes, got, "gather reads back what scatter wrote")
}

func TestGatherScatterZeroLengthSGE(t *testing.T) {
	// An SGE of length 0 covers 2^31 bytes, not none: gather and scatter
	// reach into it.
	tab := newMemTable(memTestBase)
	pd := &PD{}
	huge := memTestHuge(t, &tab, pd, 16, 1<<31)
	sges := []SGE{{Addr: huge.Addr, Length: 0, LKey: huge.LKey}}
	total, st, msg := tab.resolve(pd, sges, intoMemory)
	require.Equal(t, WCSuccess, st, msg)
	require.Equal(t, uint64(1<<31), total)

	dst := make([]byte, 4)
	tab.gatherAt(sges, 3, dst)
	assert.Equal(t, []byte{3, 4, 5, 6}, dst)
	tab.scatter(sges, 5, []byte("xy"))
	assert.Equal(t, []byte("xy"), huge.Bytes()[5:7])
}

func TestGatherScatterMisusePanics(t *testing.T) {
	tab := newMemTable(memTestBase)
	pd := &PD{}
	mr := memTestReg(t, &tab, pd, 8, 0, AccessLocalWrite)
	sges := []SGE{{Addr: mr.Addr, Length: 8, LKey: mr.LKey}}

	assert.PanicsWithValue(t, "nic: gather: 1 bytes beyond the end of the SGEs",
		func() { tab.gather(sges, make([]byte, 9)) })
	assert.PanicsWithValue(t, "nic: scatter: 2 bytes beyond the end of the SGEs",
		func() { tab.scatter(sges, 7, make([]byte, 3)) })

	// A WQE whose MR was deregistered after resolve: the caller must
	// resolve again (and complete with LOC_PROT_ERR) instead of copying.
	require.NoError(t, tab.deregister(mr))
	want := "nic: gather: sge[0] (lkey 0x101) does not resolve; call resolve just before copying"
	assert.PanicsWithValue(t, want, func() { tab.gather(sges, make([]byte, 8)) })
	want = "nic: scatter: sge[0] (lkey 0x101) does not resolve; call resolve just before copying"
	assert.PanicsWithValue(t, want, func() { tab.scatter(sges, 0, make([]byte, 8)) })
}

func TestRemote(t *testing.T) {
	tab := newMemTable(memTestBase)
	pd, pdB := &PD{}, &PD{}
	wr := memTestReg(t, &tab, pd, 4096, 0, AccessLocalWrite|AccessRemoteWrite)
	rd := memTestReg(t, &tab, pd, 100, 0, AccessRemoteRead)
	at := memTestReg(t, &tab, pd, 64, 0, AccessLocalWrite|AccessRemoteAtomic|AccessRemoteRead)
	other := memTestReg(t, &tab, pdB, 64, 0, AccessLocalWrite|AccessRemoteWrite)
	gone := memTestReg(t, &tab, pd, 64, 0, AccessLocalWrite|AccessRemoteWrite)
	require.NoError(t, tab.deregister(gone))

	tests := []struct {
		name   string
		rkey   uint32
		va     uint64
		length uint64
		need   AccessFlags
		mr     *MR
		msg    string
	}{
		{"write inside", wr.RKey, wr.Addr + 100, 200, AccessRemoteWrite, wr, ""},
		{"write whole MR", wr.RKey, wr.Addr, 4096, AccessRemoteWrite, wr, ""},
		{"read whole MR", rd.RKey, rd.Addr, 100, AccessRemoteRead, rd, ""},
		{"atomic", at.RKey, at.Addr + 8, 8, AccessRemoteAtomic, at, ""},
		{"unknown rkey", 0x1234, wr.Addr, 1, AccessRemoteWrite, nil, "rkey 0x1234 unknown"},
		{"deregistered rkey", gone.RKey, gone.Addr, 1, AccessRemoteWrite, nil, "rkey 0x501 unknown"},
		{"other PD", other.RKey, other.Addr, 1, AccessRemoteWrite, nil, "rkey 0x401: MR in another PD"},
		{"lacks REMOTE_WRITE", rd.RKey, rd.Addr, 1, AccessRemoteWrite, nil, "rkey 0x201: MR lacks REMOTE_WRITE"},
		{"lacks REMOTE_READ", wr.RKey, wr.Addr, 1, AccessRemoteRead, nil, "rkey 0x101: MR lacks REMOTE_READ"},
		{"lacks REMOTE_ATOMIC", wr.RKey, wr.Addr, 8, AccessRemoteAtomic, nil, "rkey 0x101: MR lacks REMOTE_ATOMIC"},
		{"local write is not remote write", at.RKey, at.Addr, 1, AccessRemoteWrite, nil, "MR lacks REMOTE_WRITE"},
		{"past the end", wr.RKey, wr.Addr + 4000, 97, AccessRemoteWrite, nil,
			"rkey 0x101: va range outside MR: 0x560000000fa0+97 not within 0x560000000000+4096"},
		{"before the start", rd.RKey, rd.Addr - 8, 8, AccessRemoteRead, nil, "va range outside MR"},
		{"address wraps", wr.RKey, math.MaxUint64 - 3, 8, AccessRemoteWrite, nil, "va range outside MR"},
		{"longer than the MR", rd.RKey, rd.Addr, 101, AccessRemoteRead, nil, "va range outside MR"},
		// IBTA C9-88: a zero-length READ or WRITE checks neither R_Key nor VA.
		{"zero length, bogus rkey", 0xDEAD, 0, 0, AccessRemoteWrite, nil, ""},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			mr, ok, msg := tab.remote(&QP{pd: pd}, tc.rkey, tc.va, tc.length, tc.need)
			assert.Same(t, tc.mr, mr)
			if tc.msg == "" {
				assert.True(t, ok, msg)
				assert.Empty(t, msg)
			} else {
				assert.False(t, ok)
				assert.Contains(t, msg, tc.msg)
			}
		})
	}
}

func TestAccessString(t *testing.T) {
	tests := []struct {
		a    AccessFlags
		want string
	}{
		{0, "0"},
		{AccessLocalWrite, "LOCAL_WRITE"},
		{AccessRemoteWrite | AccessRemoteAtomic, "REMOTE_WRITE|REMOTE_ATOMIC"},
		{AccessLocalWrite | AccessRemoteWrite | AccessRemoteRead | AccessRemoteAtomic, "LOCAL_WRITE|REMOTE_WRITE|REMOTE_READ|REMOTE_ATOMIC"},
		{AccessRemoteRead | 1<<5, "REMOTE_READ|0x20"},
	}
	for _, tc := range tests {
		assert.Equal(t, tc.want, accessString(tc.a))
	}
}

func TestMemoryHotPathAllocs(t *testing.T) {
	tab := newMemTable(memTestBase)
	pd := &PD{}
	a := memTestReg(t, &tab, pd, 4096, 0, AccessLocalWrite|AccessRemoteWrite)
	b := memTestReg(t, &tab, pd, 4096, 0, AccessLocalWrite)
	sges := []SGE{{Addr: a.Addr + 7, Length: 1500, LKey: a.LKey}, {Addr: b.Addr, Length: 2000, LKey: b.LKey}}
	buf := make([]byte, 3500)
	pkt := make([]byte, 1024)
	qp := &QP{pd: pd}
	bindable := memTestReg(t, &tab, pd, 4096, 0, AccessLocalWrite|AccessMWBind)
	w, err := tab.allocMW(pd, MWType2)
	require.NoError(t, err)
	require.Empty(t, mwTestBind(&tab, qp, w, bindable, 0, 64, AccessRemoteWrite))
	checks := []struct {
		name string
		f    func()
	}{
		{"resolve", func() { tab.resolve(pd, sges, intoMemory) }},
		{"gather", func() { tab.gather(sges, buf) }},
		{"gatherAt", func() { tab.gatherAt(sges, 1024, pkt) }},
		{"scatter", func() { tab.scatter(sges, 2048, pkt) }},
		{"remote", func() { tab.remote(qp, a.RKey, a.Addr, 4096, AccessRemoteWrite) }},
		{"remote through a window", func() { tab.remote(qp, w.RKey, bindable.Addr, 64, AccessRemoteWrite) }},
	}
	for _, c := range checks {
		assert.Zero(t, testing.AllocsPerRun(100, c.f), c.name)
	}
	tab.gather(sges, buf)
	assert.True(t, bytes.Equal(buf[2048:3072], pkt), "scatter wrote where gather reads")
}
