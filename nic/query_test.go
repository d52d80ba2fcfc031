package nic_test

import (
	"errors"
	"net/netip"
	"syscall"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/rocesim/rocesim/nic"
	"github.com/rocesim/rocesim/wire"
)

// queryDevice is a device with both an IPv6 and an IPv4 address, so its
// GID table has the two entries rxe lists for such a netdev.
func queryDevice(p nic.Profile) *nic.Device {
	return nic.New(nic.Config{MAC: wire.MAC{2, 0, 0, 0, 0, 1}, Profile: p,
		IPv4: netip.MustParseAddr("10.0.0.1"), IPv6: netip.MustParseAddr("fd00::1")})
}

// rcFixture is a device of profile p with a PD, a CQ and the creation
// attributes of a small RC QP on them.
func rcFixture(t *testing.T, p nic.Profile) (*nic.Device, *nic.PD, nic.QPInitAttr) {
	t.Helper()
	d := queryDevice(p)
	pd, err := d.AllocPD()
	require.NoError(t, err)
	cq, err := d.CreateCQ(8, nil, 0)
	require.NoError(t, err)
	return d, pd, nic.QPInitAttr{SendCQ: cq, RecvCQ: cq, Type: nic.QPTypeRC,
		Cap: nic.QPCap{MaxSendWR: 4, MaxRecvWR: 4, MaxSendSGE: 1, MaxRecvSGE: 1}}
}

// assertEINVAL holds err to libibverbs' EINVAL with a message naming verb.
func assertEINVAL(t *testing.T, err error, verb string) {
	t.Helper()
	assert.True(t, errors.Is(err, syscall.EINVAL), "%s: %v", verb, err)
	assert.ErrorContains(t, err, verb)
}

// TestQueryPortGIDPKey: what ibv_query_port, ibv_query_gid and
// ibv_query_pkey answer on the one port of an rxe device, the port state
// following SetPortState, and EINVAL naming the verb for a port or index
// that does not exist.
func TestQueryPortGIDPKey(t *testing.T) {
	d := queryDevice(nic.ProfileRXE)
	pa, err := d.QueryPort(1)
	require.NoError(t, err)
	assert.Equal(t, "ACTIVE", pa.State)
	assert.Equal(t, "Ethernet", pa.LinkLayer)
	assert.Equal(t, 2, pa.GIDTblLen)
	assert.Equal(t, 1, pa.PKeyTblLen)
	assert.Equal(t, pa.MaxMTU, pa.ActiveMTU)

	d.SetPortState(0, false)
	pa, err = d.QueryPort(1)
	require.NoError(t, err)
	assert.Equal(t, "DOWN", pa.State)
	d.SetPortState(0, true)
	pa, _ = d.QueryPort(1)
	assert.Equal(t, "ACTIVE", pa.State)

	_, err = d.QueryPort(2)
	assertEINVAL(t, err, "query_port")

	g0, err := d.QueryGID(1, 0)
	require.NoError(t, err)
	assert.Equal(t, netip.MustParseAddr("fd00::1"), g0, "index 0: the IPv6 address")
	g1, err := d.QueryGID(1, 1)
	require.NoError(t, err)
	assert.Equal(t, netip.MustParseAddr("::ffff:10.0.0.1"), g1, "index 1: the IPv4 address mapped (RoCE v2)")
	for _, c := range [][2]int{{1, 2}, {1, -1}, {2, 0}} {
		_, err := d.QueryGID(c[0], c[1])
		assertEINVAL(t, err, "query_gid")
	}

	pk, err := d.QueryPKey(1, 0)
	require.NoError(t, err)
	assert.Equal(t, uint16(0xFFFF), pk)
	_, err = d.QueryPKey(1, 1)
	assertEINVAL(t, err, "query_pkey")
}

// TestQueryQPAndSRQ: ibv_query_qp reports the state the QP is in and the
// attributes a modify set, with its creation attributes; ibv_query_srq
// reports max_sge, at least the max_wr asked for, and the armed limit.
func TestQueryQPAndSRQ(t *testing.T) {
	d, pd, ia := rcFixture(t, nic.ProfileRXE)
	qp, err := d.CreateQP(pd, ia)
	require.NoError(t, err)

	a, gotIA := qp.Query()
	assert.Equal(t, nic.QPStateReset, a.QPState)
	assert.Equal(t, nic.QPTypeRC, gotIA.Type)
	assert.Equal(t, ia.SendCQ, gotIA.SendCQ)

	access := nic.AccessRemoteWrite | nic.AccessRemoteRead
	require.NoError(t, d.ModifyQP(0, qp, &nic.QPAttr{QPState: nic.QPStateInit, PortNum: 1, QPAccessFlags: access},
		nic.QPAttrState|nic.QPAttrPKeyIndex|nic.QPAttrPort|nic.QPAttrAccessFlags))
	a, _ = qp.Query()
	assert.Equal(t, nic.QPStateInit, a.QPState)
	assert.Equal(t, nic.QPStateInit, a.CurQPState)
	assert.Equal(t, access, a.QPAccessFlags)

	srq, err := d.CreateSRQ(pd, nic.SRQInitAttr{MaxWR: 5, MaxSGE: 2})
	require.NoError(t, err)
	sa := srq.Query()
	assert.GreaterOrEqual(t, sa.MaxWR, uint32(5))
	assert.Equal(t, uint32(2), sa.MaxSGE)
	assert.Equal(t, uint32(0), sa.SRQLimit, "no limit armed")
}

// TestReregMRPerProfile: ibv_rereg_mr at the NIC. Under the rxe profile
// every call that passes libibverbs' own checks fails with EOPNOTSUPP
// and the region is unchanged, as on rxe 6.1 (no rereg_user_mr; held
// against real rxe by conformance's TestReregMRMatchesRxe); under the
// spec profile a PD change and a translation take effect. A PD of
// another device is refused with EINVAL under both.
func TestReregMRPerProfile(t *testing.T) {
	for _, p := range []nic.Profile{nic.ProfileRXE, nic.ProfileSpec} {
		d := queryDevice(p)
		pd, err := d.AllocPD()
		require.NoError(t, err)
		pd2, err := d.AllocPD()
		require.NoError(t, err)
		buf := make([]byte, 64)
		mr, err := d.RegMR(pd, buf, nic.AccessLocalWrite)
		require.NoError(t, err)
		buf2 := make([]byte, 128)

		err = d.ReregMR(mr, nic.ReregChangePD|nic.ReregChangeTranslation, pd2, buf2, 0)
		if p == nic.ProfileRXE {
			assert.True(t, errors.Is(err, syscall.EOPNOTSUPP), "rxe: %v", err)
			assert.Equal(t, pd, mr.PD(), "rxe: the PD is unchanged")
			assert.Len(t, mr.Bytes(), 64, "rxe: the translation is unchanged")
		} else {
			require.NoError(t, err, "spec")
			assert.Equal(t, pd2, mr.PD(), "spec: the new PD")
			assert.Len(t, mr.Bytes(), 128, "spec: the new translation")
		}

		other := queryDevice(p)
		opd, err := other.AllocPD()
		require.NoError(t, err)
		assertEINVAL(t, d.ReregMR(mr, nic.ReregChangePD, opd, nil, 0), "rereg_mr")
	}
}

// TestEachQPInCreationOrder: EachQP, which the runaway diagnosis reads,
// visits the live QPs in creation order and skips a destroyed one, so
// what a report says does not depend on QP numbers or map order.
func TestEachQPInCreationOrder(t *testing.T) {
	d, pd, ia := rcFixture(t, nic.ProfileRXE)
	var made []*nic.QP
	for range 4 {
		qp, err := d.CreateQP(pd, ia)
		require.NoError(t, err)
		made = append(made, qp)
	}
	require.NoError(t, d.DestroyQP(made[1]))
	var seen []*nic.QP
	d.EachQP(func(qp *nic.QP) { seen = append(seen, qp) })
	assert.Equal(t, []*nic.QP{made[0], made[2], made[3]}, seen)
}

// TestCQChannelAndVectors: a CQ reports the channel it was created with
// (nil without one), and a comp_vector at or past num_comp_vectors is
// refused with EINVAL (ib_uverbs_create_cq).
func TestCQChannelAndVectors(t *testing.T) {
	d := queryDevice(nic.ProfileRXE)
	ch := d.CreateCompChannel()
	cq, err := d.CreateCQ(4, ch, 0)
	require.NoError(t, err)
	assert.Same(t, ch, cq.Channel())
	assert.Equal(t, 0, cq.EventsUnacked(), "no event yet")
	plain, err := d.CreateCQ(4, nil, 0)
	require.NoError(t, err)
	assert.Nil(t, plain.Channel())

	n := d.NumCompVectors()
	require.GreaterOrEqual(t, n, 1)
	_, err = d.CreateCQ(4, nil, n)
	assertEINVAL(t, err, "create_cq")
}
