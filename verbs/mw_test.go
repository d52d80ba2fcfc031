package verbs_test

import (
	"errors"
	"syscall"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/rocesim/rocesim/verbs"
)

// mwTarget gives b a region that windows may be bound to (MW_BIND) and a
// window of type t on it, bound over bytes [1024, 2048) with the rights
// given: type 2 through a BIND_MW work request on b's QP (the user then
// takes the new R_Key, as with libibverbs), type 1 through ibv_bind_mw.
// It returns the region and the window, both completions drained.
func mwTarget(t *testing.T, w *verbs.World, b *endpoint, typ verbs.MWType, access verbs.AccessFlags) (*verbs.MR, *verbs.MW) {
	t.Helper()
	mr, err := b.pd.RegMR(make([]byte, 4096), verbs.AccessLocalWrite|verbs.AccessMWBind)
	require.NoError(t, err)
	mw, err := b.pd.AllocMW(typ)
	require.NoError(t, err)
	info := verbs.BindInfo{MR: mr, Addr: mr.Addr + 1024, Length: 1024, Access: access}
	if typ == verbs.MWType1 {
		require.NoError(t, b.qp.BindMW(mw, verbs.MWBind{WRID: 90, SendFlags: verbs.SendSignaled, BindInfo: info}))
	} else {
		rkey := verbs.IncRKey(mw.RKey)
		_, err = b.qp.PostSend([]verbs.SendWR{{WRID: 90, Opcode: verbs.WRBindMW, Flags: verbs.SendSignaled,
			BindMW: verbs.BindMWWR{MW: mw, RKey: rkey, BindInfo: info}}})
		require.NoError(t, err)
		mw.RKey = rkey
	}
	w.Run()
	wcs := pollAll(b.cq)
	require.Len(t, wcs, 1)
	assert.Equal(t, verbs.WCSuccess, wcs[0].Status, wcs[0].Status.Name())
	assert.Equal(t, verbs.WCBindMW, wcs[0].Opcode)
	return mr, mw
}

// writeThrough has a WRITE n bytes of a's buffer (filled with 0xAB) at
// va through rkey and returns a's completions.
func writeThrough(t *testing.T, w *verbs.World, a *endpoint, va uint64, rkey uint32, n uint64) []string {
	t.Helper()
	for i := range a.buf[:n] {
		a.buf[i] = 0xAB
	}
	_, err := a.qp.PostSend([]verbs.SendWR{{WRID: 1, Opcode: verbs.WRRDMAWrite, Flags: verbs.SendSignaled,
		SGList: []verbs.SGE{a.mr.SGE(0, n)}, RemoteAddr: va, RKey: rkey}})
	require.NoError(t, err)
	w.Run()
	return summary(pollAll(a.cq))
}

// TestMWType2Write binds a type 2 window through a BIND_MW work request
// and WRITEs through its R_Key: the bytes land in the region behind it.
// The window's key names an index of the MW range (above every MR index,
// rxe's rkey_is_mw), not the region's.
func TestMWType2Write(t *testing.T) {
	w, a, b := pair(t, verbs.WorldConfig{Seed: 1})
	mr, mw := mwTarget(t, w, b, verbs.MWType2, verbs.AccessRemoteWrite)
	assert.NotEqual(t, mr.RKey>>8, mw.RKey>>8)
	assert.Equal(t, []string{"1:IBV_WC_SUCCESS"}, writeThrough(t, w, a, mr.Addr+1024, mw.RKey, 64))
	assert.Equal(t, byte(0xAB), mr.Bytes()[1024])
	assert.Equal(t, byte(0xAB), mr.Bytes()[1024+63])
	assert.Equal(t, byte(0), mr.Bytes()[1024+64])
	assert.Equal(t, verbs.QPStateRTS, b.qp.State())
}

// TestMWRemoteAccessErrors: what a window does not open is a remote
// access error (NAK, REM_ACCESS_ERR at the requester, both QPs to ERR),
// as rxe_lookup_mw and check_rkey refuse it.
func TestMWRemoteAccessErrors(t *testing.T) {
	rows := []struct {
		name    string
		profile verbs.Profile
		access  verbs.AccessFlags
		prep    func(t *testing.T, w *verbs.World, b *endpoint, mw *verbs.MW)
		off     uint64 // from the region's start; the window is [1024, 2048)
		rkey    func(mw *verbs.MW) uint32
		want    string
	}{
		{name: "window without REMOTE_WRITE", access: verbs.AccessRemoteRead, off: 1024, want: "1:IBV_WC_REM_ACCESS_ERR"},
		{name: "stale key byte", access: verbs.AccessRemoteWrite, off: 1024,
			rkey: func(mw *verbs.MW) uint32 { return mw.RKey ^ 1 }, want: "1:IBV_WC_REM_ACCESS_ERR"},
		{name: "after LOCAL_INV", access: verbs.AccessRemoteWrite, off: 1024, want: "1:IBV_WC_REM_ACCESS_ERR",
			prep: func(t *testing.T, w *verbs.World, b *endpoint, mw *verbs.MW) {
				_, err := b.qp.PostSend([]verbs.SendWR{{WRID: 91, Opcode: verbs.WRLocalInv, Flags: verbs.SendSignaled, InvalidateRKey: mw.RKey}})
				require.NoError(t, err)
				w.Run()
				assert.Equal(t, []string{"91:IBV_WC_SUCCESS"}, summary(pollAll(b.cq)))
			}},
		{name: "after dealloc_mw", access: verbs.AccessRemoteWrite, off: 1024, want: "1:IBV_WC_REM_ACCESS_ERR",
			prep: func(t *testing.T, _ *verbs.World, _ *endpoint, mw *verbs.MW) { require.NoError(t, mw.Dealloc()) }},
		// Past the window but inside the region: rxe's check_rkey checks
		// the range against the MR (mr_check_range), the IBTA against the
		// window.
		{name: "past the window, rxe", profile: verbs.ProfileRXE, access: verbs.AccessRemoteWrite, off: 2048, want: "1:IBV_WC_SUCCESS"},
		{name: "past the window, spec", profile: verbs.ProfileSpec, access: verbs.AccessRemoteWrite, off: 2048, want: "1:IBV_WC_REM_ACCESS_ERR"},
	}
	for _, row := range rows {
		t.Run(row.name, func(t *testing.T) {
			w, a, b := pair(t, verbs.WorldConfig{Seed: 1, Profile: row.profile})
			mr, mw := mwTarget(t, w, b, verbs.MWType2, row.access)
			if row.prep != nil {
				row.prep(t, w, b, mw)
			}
			rkey := mw.RKey
			if row.rkey != nil {
				rkey = row.rkey(mw)
			}
			got := writeThrough(t, w, a, mr.Addr+row.off, rkey, 64)
			assert.Equal(t, []string{row.want}, got)
			if row.want != "1:IBV_WC_SUCCESS" {
				assert.Equal(t, verbs.QPStateErr, a.qp.State())
				assert.Equal(t, verbs.QPStateErr, b.qp.State())
				assert.Equal(t, byte(0), mr.Bytes()[row.off], "nothing written")
			}
		})
	}
}

// TestMWSendWithInvalidate: a SEND WITH INVALIDATE naming the window's
// R_Key invalidates it at the responder, whose receive completion carries
// the R_Key and rxe's flags (IBV_WC_GRH, and IBV_WC_IP_CSUM_OK's bit for
// the invalidation, the default profile being rxe's); a WRITE through it
// then fails.
func TestMWSendWithInvalidate(t *testing.T) {
	w, a, b := pair(t, verbs.WorldConfig{Seed: 1})
	mr, mw := mwTarget(t, w, b, verbs.MWType2, verbs.AccessRemoteWrite)
	_, err := b.qp.PostRecv([]verbs.RecvWR{recvWR(20, b)})
	require.NoError(t, err)
	_, err = a.qp.PostSend([]verbs.SendWR{{WRID: 2, Opcode: verbs.WRSendWithInv, Flags: verbs.SendSignaled,
		SGList: []verbs.SGE{a.mr.SGE(0, 1500)}, InvalidateRKey: mw.RKey}})
	require.NoError(t, err)
	w.Run()
	assert.Equal(t, []string{"2:IBV_WC_SUCCESS"}, summary(pollAll(a.cq)))
	wcs := pollAll(b.cq)
	require.Len(t, wcs, 1)
	assert.Equal(t, verbs.WCSuccess, wcs[0].Status)
	assert.Equal(t, verbs.WCRecv, wcs[0].Opcode)
	assert.Equal(t, uint32(1500), wcs[0].ByteLen)
	assert.Equal(t, verbs.WCFlagGRH|verbs.WCFlagIPCSumOK, wcs[0].WCFlags, "wc_flags: rxe's IB_WC_GRH|IB_WC_WITH_INVALIDATE")
	assert.True(t, wcs[0].Invalidated())
	assert.Equal(t, mw.RKey, wcs[0].ImmData, "invalidated_rkey")
	assert.Equal(t, []string{"1:IBV_WC_REM_ACCESS_ERR"}, writeThrough(t, w, a, mr.Addr+1024, mw.RKey, 8))
}

// TestMWSendWithInvalidateBadKey: a SEND WITH INVALIDATE whose R_Key
// cannot be invalidated (a region's: rxe_invalidate_mr takes only
// fast-registration MRs) is rxe's RESPST_ERR_INVALIDATE_RKEY: the receive
// completes with REM_INV_REQ_ERR, the SEND is acknowledged, and the
// responder QP goes to ERR.
func TestMWSendWithInvalidateBadKey(t *testing.T) {
	w, a, b := pair(t, verbs.WorldConfig{Seed: 1})
	_, err := b.qp.PostRecv([]verbs.RecvWR{recvWR(20, b), recvWR(21, b)})
	require.NoError(t, err)
	_, err = a.qp.PostSend([]verbs.SendWR{{WRID: 2, Opcode: verbs.WRSendWithInv, Flags: verbs.SendSignaled,
		SGList: []verbs.SGE{a.mr.SGE(0, 8)}, InvalidateRKey: b.mr.RKey}})
	require.NoError(t, err)
	w.Run()
	assert.Equal(t, []string{"2:IBV_WC_SUCCESS"}, summary(pollAll(a.cq)))
	assert.Equal(t, []string{"20:IBV_WC_REM_INV_REQ_ERR", "21:IBV_WC_WR_FLUSH_ERR"}, summary(pollAll(b.cq)))
	assert.Equal(t, verbs.QPStateErr, b.qp.State())
}

// TestMWType1 binds a type 1 window with ibv_bind_mw (which posts a
// BIND_MW work request and moves the window to the next R_Key), reads
// through it, rebinds it elsewhere (the old R_Key stops working) and
// unbinds it with a zero-length bind.
func TestMWType1(t *testing.T) {
	w, a, b := pair(t, verbs.WorldConfig{Seed: 1})
	mr, err := b.pd.RegMR(make([]byte, 4096), verbs.AccessLocalWrite|verbs.AccessMWBind)
	require.NoError(t, err)
	copy(mr.Bytes()[100:], "window")
	mw, err := b.pd.AllocMW(verbs.MWType1)
	require.NoError(t, err)
	first := mw.RKey
	require.NoError(t, b.qp.BindMW(mw, verbs.MWBind{WRID: 5, SendFlags: verbs.SendSignaled,
		BindInfo: verbs.BindInfo{MR: mr, Addr: mr.Addr, Length: 512, Access: verbs.AccessRemoteRead}}))
	assert.Equal(t, verbs.IncRKey(first), mw.RKey)
	w.Run()
	assert.Equal(t, []string{"5:IBV_WC_SUCCESS"}, summary(pollAll(b.cq)))

	read := func(rkey uint32) []string {
		_, err := a.qp.PostSend([]verbs.SendWR{{WRID: 3, Opcode: verbs.WRRDMARead, Flags: verbs.SendSignaled,
			SGList: []verbs.SGE{a.mr.SGE(0, 6)}, RemoteAddr: mr.Addr + 100, RKey: rkey}})
		require.NoError(t, err)
		w.Run()
		return summary(pollAll(a.cq))
	}
	assert.Equal(t, []string{"3:IBV_WC_SUCCESS"}, read(mw.RKey))
	assert.Equal(t, "window", string(a.buf[:6]))

	// A type 1 window cannot be invalidated (o10-37.2.26): LOC_QP_OP_ERR.
	_, err = b.qp.PostSend([]verbs.SendWR{{WRID: 6, Opcode: verbs.WRLocalInv, Flags: verbs.SendSignaled, InvalidateRKey: mw.RKey}})
	require.NoError(t, err)
	w.Run()
	assert.Equal(t, []string{"6:IBV_WC_LOC_QP_OP_ERR"}, summary(pollAll(b.cq)))
	assert.Equal(t, verbs.QPStateErr, b.qp.State())

	// The region cannot be deregistered while a window is bound to it.
	err = mr.Dereg()
	assert.True(t, errors.Is(err, syscall.EINVAL), "%v", err)
	assert.Contains(t, err.Error(), "memory windows bound")
	require.NoError(t, mw.Dealloc())
	require.NoError(t, mr.Dereg())
}

// TestMWBindErrors: a bind the device refuses completes with
// IBV_WC_MW_BIND_ERR and moves the QP to ERR (rxe_do_local_ops); what
// libibverbs refuses before posting returns its errno.
func TestMWBindErrors(t *testing.T) {
	rows := []struct {
		name     string
		mrAccess verbs.AccessFlags
		info     func(mr *verbs.MR) verbs.BindInfo
		stale    bool // the WR names the window's old R_Key
	}{
		{name: "MR without MW_BIND", mrAccess: verbs.AccessLocalWrite,
			info: func(mr *verbs.MR) verbs.BindInfo {
				return verbs.BindInfo{MR: mr, Addr: mr.Addr, Length: 64, Access: verbs.AccessRemoteRead}
			}},
		{name: "remote write on an MR without LOCAL_WRITE", mrAccess: verbs.AccessMWBind,
			info: func(mr *verbs.MR) verbs.BindInfo {
				return verbs.BindInfo{MR: mr, Addr: mr.Addr, Length: 64, Access: verbs.AccessRemoteWrite}
			}},
		{name: "range past the MR", mrAccess: verbs.AccessLocalWrite | verbs.AccessMWBind,
			info: func(mr *verbs.MR) verbs.BindInfo {
				return verbs.BindInfo{MR: mr, Addr: mr.Addr + 4000, Length: 200, Access: verbs.AccessRemoteRead}
			}},
		{name: "type 2 with length 0", mrAccess: verbs.AccessLocalWrite | verbs.AccessMWBind,
			info: func(mr *verbs.MR) verbs.BindInfo { return verbs.BindInfo{MR: mr, Access: verbs.AccessRemoteRead} }},
		{name: "zero based", mrAccess: verbs.AccessLocalWrite | verbs.AccessMWBind,
			info: func(mr *verbs.MR) verbs.BindInfo {
				return verbs.BindInfo{MR: mr, Addr: 0, Length: 64, Access: verbs.AccessRemoteRead | verbs.AccessZeroBased}
			}},
		{name: "stale window R_Key", mrAccess: verbs.AccessLocalWrite | verbs.AccessMWBind, stale: true,
			info: func(mr *verbs.MR) verbs.BindInfo {
				return verbs.BindInfo{MR: mr, Addr: mr.Addr, Length: 64, Access: verbs.AccessRemoteRead}
			}},
	}
	for _, row := range rows {
		t.Run(row.name, func(t *testing.T) {
			w, _, b := pair(t, verbs.WorldConfig{Seed: 1})
			mr, err := b.pd.RegMR(make([]byte, 4096), row.mrAccess)
			require.NoError(t, err)
			mw, err := b.pd.AllocMW(verbs.MWType2)
			require.NoError(t, err)
			if row.stale {
				mw.RKey = verbs.IncRKey(mw.RKey) // as if a bind had been taken for done
			}
			_, err = b.qp.PostSend([]verbs.SendWR{{WRID: 7, Opcode: verbs.WRBindMW, Flags: verbs.SendSignaled,
				BindMW: verbs.BindMWWR{MW: mw, RKey: verbs.IncRKey(mw.RKey), BindInfo: row.info(mr)}}})
			require.NoError(t, err)
			w.Run()
			assert.Equal(t, []string{"7:IBV_WC_MW_BIND_ERR"}, summary(pollAll(b.cq)))
			assert.Equal(t, verbs.QPStateErr, b.qp.State())
		})
	}
}

// TestMWLocalOpsInOrder: a BIND_MW posted behind a SEND still waiting for
// its ACK runs at once (rxe_do_local_ops does not wait) but completes
// after the SEND, in posting order.
func TestMWLocalOpsInOrder(t *testing.T) {
	w, a, b := pair(t, verbs.WorldConfig{Seed: 1})
	_, err := b.qp.PostRecv([]verbs.RecvWR{recvWR(20, b)})
	require.NoError(t, err)
	mr, err := a.pd.RegMR(make([]byte, 4096), verbs.AccessLocalWrite|verbs.AccessMWBind)
	require.NoError(t, err)
	mw, err := a.pd.AllocMW(verbs.MWType2)
	require.NoError(t, err)
	_, err = a.qp.PostSend([]verbs.SendWR{sendWR(1, a, 8), {WRID: 2, Opcode: verbs.WRBindMW, Flags: verbs.SendSignaled,
		BindMW: verbs.BindMWWR{MW: mw, RKey: verbs.IncRKey(mw.RKey),
			BindInfo: verbs.BindInfo{MR: mr, Addr: mr.Addr, Length: 8, Access: verbs.AccessRemoteRead}}}})
	require.NoError(t, err)
	assert.Empty(t, pollAll(a.cq), "nothing completes before the SEND's ACK")
	w.Run()
	wcs := pollAll(a.cq)
	assert.Equal(t, []string{"1:IBV_WC_SUCCESS", "2:IBV_WC_SUCCESS"}, summary(wcs))
	assert.Equal(t, verbs.WCBindMW, wcs[1].Opcode)
}

// TestReregMR: under the spec profile ibv_rereg_mr changes the region in
// place, and the peer sees the new rights at once; under the rxe profile
// it fails with EOPNOTSUPP, as on real rxe 6.1 (conformance
// TestReregMRMatchesRxe), and the region keeps its rights.
func TestReregMR(t *testing.T) {
	for _, profile := range []verbs.Profile{verbs.ProfileSpec, verbs.ProfileRXE} {
		w, a, b := pair(t, verbs.WorldConfig{Seed: 1, Profile: profile})
		mr, err := b.pd.RegMR(make([]byte, 4096), verbs.AccessLocalWrite)
		require.NoError(t, err)
		err = mr.Rereg(verbs.ReregChangeAccess, nil, nil, verbs.AccessLocalWrite|verbs.AccessRemoteWrite)
		got := writeThrough(t, w, a, mr.Addr, mr.RKey, 8)
		if profile == verbs.ProfileRXE {
			assert.True(t, errors.Is(err, syscall.EOPNOTSUPP), "%v", err)
			assert.Contains(t, err.Error(), "IBV_REREG_MR_ERR_CMD")
			assert.Equal(t, []string{"1:IBV_WC_REM_ACCESS_ERR"}, got, "the region kept its rights")
			continue
		}
		require.NoError(t, err)
		assert.Equal(t, []string{"1:IBV_WC_SUCCESS"}, got)
		assert.Equal(t, byte(0xAB), mr.Bytes()[0])

		// A new buffer: new address and length, same keys; the old
		// address no longer resolves.
		old, rkey := mr.Addr, mr.RKey
		buf := make([]byte, 8192)
		require.NoError(t, mr.Rereg(verbs.ReregChangeTranslation, nil, buf, 0))
		assert.NotEqual(t, old, mr.Addr)
		assert.Equal(t, uint64(8192), mr.Length)
		assert.Equal(t, rkey, mr.RKey)
		_, err = b.qp.PostRecv([]verbs.RecvWR{{WRID: 31, SGList: []verbs.SGE{mr.SGE(8000, 16)}}})
		require.NoError(t, err)
		_, err = a.qp.PostSend([]verbs.SendWR{sendWR(2, a, 16)})
		require.NoError(t, err)
		w.Run()
		assert.Equal(t, []string{"31:IBV_WC_SUCCESS"}, summary(pollAll(b.cq)))
		assert.Equal(t, []string{"2:IBV_WC_SUCCESS"}, summary(pollAll(a.cq)))
		assert.Equal(t, byte(0xAB), buf[8000], "the receive landed in the new buffer")

		// Another PD: b's QP (in the first PD) can no longer reach it.
		pd2, err := b.ctx.AllocPD()
		require.NoError(t, err)
		require.NoError(t, mr.Rereg(verbs.ReregChangePD, pd2, nil, 0))
		assert.Equal(t, []string{"1:IBV_WC_REM_ACCESS_ERR"}, writeThrough(t, w, a, mr.Addr, mr.RKey, 8))
		assert.Error(t, pd2.Dealloc(), "the MR holds the new PD")
	}
}
