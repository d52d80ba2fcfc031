package verbs

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestCloseContextDeallocsMWs: closing a context deallocates its windows,
// newest first, so before the region a window is bound to (which could
// not be deregistered while it is), as the kernel does when the device
// file closes: the device holds no window and no user MR afterwards.
func TestCloseContextDeallocsMWs(t *testing.T) {
	w := NewWorld(WorldConfig{Seed: 1})
	h := w.AddHost("a")
	require.NoError(t, w.Connect(h, w.AddHost("b")))
	ctx, err := h.GetDeviceList()[0].Open()
	require.NoError(t, err)
	pd, err := ctx.AllocPD()
	require.NoError(t, err)
	cq, err := ctx.CreateCQ(4, nil, 0)
	require.NoError(t, err)
	qp, err := pd.CreateQP(QPInitAttr{SendCQ: cq, RecvCQ: cq, Type: QPTypeRC, Cap: QPCap{MaxSendWR: 2, MaxRecvWR: 1, MaxSendSGE: 1, MaxRecvSGE: 1}})
	require.NoError(t, err)
	mr, err := pd.RegMR(make([]byte, 64), AccessLocalWrite|AccessMWBind)
	require.NoError(t, err)
	mw, err := pd.AllocMW(MWType1)
	require.NoError(t, err)
	_, err = pd.AllocMW(MWType2)
	require.NoError(t, err)
	// To RTS toward b (nothing is sent: a bind is local), then a bind
	// of the type 1 window to the MR.
	gid, err := ctx.QueryGID(1, 1)
	require.NoError(t, err)
	require.NoError(t, qp.Modify(&QPAttr{QPState: QPStateInit, PortNum: 1}, QPAttrState|QPAttrPKeyIndex|QPAttrPort|QPAttrAccessFlags))
	require.NoError(t, qp.Modify(&QPAttr{QPState: QPStateRTR, PathMTU: MTU1024, DestQPNum: qp.QPNum, RQPSN: 1, MaxDestRdAtomic: 1,
		MinRNRTimer: 12, AHAttr: AHAttr{IsGlobal: true, PortNum: 1, GRH: GRH{DGID: gid, HopLimit: 1, SGIDIndex: 1}}},
		QPAttrState|QPAttrAV|QPAttrPathMTU|QPAttrDestQPN|QPAttrRQPSN|QPAttrMaxDestRdAtomic|QPAttrMinRNRTimer))
	require.NoError(t, qp.Modify(&QPAttr{QPState: QPStateRTS, Timeout: 14, RetryCnt: 7, RNRRetry: 7, SQPSN: 1, MaxRdAtomic: 1},
		QPAttrState|QPAttrTimeout|QPAttrRetryCnt|QPAttrRNRRetry|QPAttrSQPSN|QPAttrMaxQPRdAtomic))
	require.NoError(t, qp.BindMW(mw, MWBind{WRID: 1, BindInfo: BindInfo{MR: mr, Addr: mr.Addr, Length: 64, Access: AccessRemoteRead}}))
	w.Run()
	require.Error(t, mr.Dereg(), "bound: the MR cannot go first")
	dev := ctx.dev()
	before := dev.Resources()
	assert.Equal(t, 2, before.MW)
	require.NoError(t, ctx.Close())
	after := dev.Resources()
	assert.Zero(t, after.MW)
	assert.Equal(t, before.MR-1, after.MR, "the user's MR is gone")
}
