package nic

import (
	"errors"
	"fmt"
	"net/netip"
	"syscall"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/rocesim/rocesim/wire"
)

// resDevice returns a device that knows a neighbour at 10.0.0.2, with a
// PD and a CQ, for the resource tests.
func resDevice(t *testing.T) (*Device, *PD, *CQ) {
	t.Helper()
	d := New(Config{MAC: wire.MAC{2, 0, 0, 0, 0, 1}, IPv4: netip.AddrFrom4([4]byte{10, 0, 0, 1})})
	d.AddNeighbour(netip.MustParseAddr("10.0.0.2"), wire.MAC{2, 0, 0, 0, 0, 2})
	pd, err := d.AllocPD()
	require.NoError(t, err)
	cq, err := d.CreateCQ(1, nil, 0)
	require.NoError(t, err)
	return d, pd, cq
}

func resQP(t *testing.T, d *Device, pd *PD, cq *CQ) *QP {
	t.Helper()
	qp, err := d.CreateQP(pd, QPInitAttr{SendCQ: cq, RecvCQ: cq, Type: QPTypeRC,
		Cap: QPCap{MaxSendWR: 1, MaxRecvWR: 1, MaxSendSGE: 1, MaxRecvSGE: 1}})
	require.NoError(t, err)
	return qp
}

// TestDeallocPDFreesItsPlace: allocating and freeing PDs one at a time
// never runs out. The PD count used never to fall, so AllocPD failed at
// the 32,764th allocation (the old max_pd) with no PD alive.
func TestDeallocPDFreesItsPlace(t *testing.T) {
	d, _, _ := resDevice(t)
	for i := range 40000 {
		pd, err := d.AllocPD()
		require.NoError(t, err, "allocation %d", i)
		require.NoError(t, d.DeallocPD(pd))
	}
	assert.Equal(t, kernelPDs+1, d.pds.live, "the kernel's PD and the fixture's")
}

// TestQPNumbersCyclic: with one QP alive, creating and destroying another
// never runs out, and QPNs are handed out as rxe's xa_alloc_cyclic does:
// the next number after the last one given, not the one just freed; at
// the top of the range (1<<20) the search wraps to the bottom, skipping
// the GSI QP's index 16 and the QPs alive. Destroyed QPs used to count
// forever (CreateQP failed at the 65,536th) and numbers were never reused.
func TestQPNumbersCyclic(t *testing.T) {
	d, pd, cq := resDevice(t)
	keep := resQP(t, d, pd, cq)
	assert.Equal(t, uint32(0x11), keep.Num(), "the first user QPN, as rxe")
	var last uint32
	for i := range 70000 {
		qp := resQP(t, d, pd, cq)
		if i == 0 {
			assert.Equal(t, uint32(0x12), qp.Num())
		} else {
			require.Equal(t, last+1, qp.Num(), "creation %d: the next QPN, not the freed %#x", i, last)
		}
		last = qp.Num()
		require.NoError(t, d.DestroyQP(qp))
	}
	assert.Equal(t, kernelQPs+1, d.qpCount.live)
	assert.Equal(t, []*QP{keep}, listedQPs(d))
	assert.LessOrEqual(t, len(d.qpList), 3, "holes are compacted")

	// Near the top: the last QPN is 1<<20, then the search wraps to 16
	// (the GSI QP's), 0x11 (keep's) and gives 0x12.
	d.nextQPN = rxeMaxQPIndex
	top := resQP(t, d, pd, cq)
	assert.Equal(t, uint32(rxeMaxQPIndex), top.Num())
	wrapped := resQP(t, d, pd, cq)
	assert.Equal(t, uint32(0x12), wrapped.Num())
	assert.Same(t, top, d.qpByNum(rxeMaxQPIndex))
	require.NoError(t, d.DestroyQP(top))
	assert.Nil(t, d.qpByNum(rxeMaxQPIndex), "a destroyed QP's number no longer reaches it")
	assert.Same(t, keep, d.qpByNum(0x11))
}

// TestLimitsEnforcedAsReported: for every counted object, the device
// refuses the one past the max_… it reports (less what the kernel holds
// on an rxe device: ib_mad's PD, CQ and GSI QP and the PD's DMA MR), with
// rxe's errno, and takes one again once one is freed. The limits are
// lowered so that the test is quick; reported and enforced come from the
// same field. Before, max_ah and max_srq were not enforced at all and
// max_mr was reported as 0x4000 while 0x40000 were allowed.
func TestLimitsEnforcedAsReported(t *testing.T) {
	ahAttr := AHAttr{IsGlobal: true, PortNum: 1, GRH: GRH{DGID: netip.MustParseAddr("10.0.0.2")}}
	for _, c := range []struct {
		name   string
		limit  func(a *DeviceAttr) *int
		kernel int
		errno  syscall.Errno
		create func(t *testing.T, d *Device, pd *PD, cq *CQ) (func() error, error)
	}{
		{"pd", func(a *DeviceAttr) *int { return &a.MaxPD }, kernelPDs, syscall.EINVAL,
			func(t *testing.T, d *Device, pd *PD, cq *CQ) (func() error, error) {
				p, err := d.AllocPD()
				return func() error { return d.DeallocPD(p) }, err
			}},
		{"cq", func(a *DeviceAttr) *int { return &a.MaxCQ }, kernelCQs, syscall.EINVAL,
			func(t *testing.T, d *Device, pd *PD, cq *CQ) (func() error, error) {
				c, err := d.CreateCQ(1, nil, 0)
				return func() error { return d.DestroyCQ(c) }, err
			}},
		{"qp", func(a *DeviceAttr) *int { return &a.MaxQP }, kernelQPs, syscall.EINVAL,
			func(t *testing.T, d *Device, pd *PD, cq *CQ) (func() error, error) {
				q, err := d.CreateQP(pd, QPInitAttr{SendCQ: cq, RecvCQ: cq, Type: QPTypeUD,
					Cap: QPCap{MaxSendWR: 1, MaxRecvWR: 1, MaxSendSGE: 1, MaxRecvSGE: 1}})
				return func() error { return d.DestroyQP(q) }, err
			}},
		{"srq", func(a *DeviceAttr) *int { return &a.MaxSRQ }, 0, syscall.EINVAL,
			func(t *testing.T, d *Device, pd *PD, cq *CQ) (func() error, error) {
				s, err := d.CreateSRQ(pd, SRQInitAttr{MaxWR: 1, MaxSGE: 1})
				return func() error { return d.DestroySRQ(s) }, err
			}},
		{"ah", func(a *DeviceAttr) *int { return &a.MaxAH }, 0, syscall.EINVAL,
			func(t *testing.T, d *Device, pd *PD, cq *CQ) (func() error, error) {
				a, err := d.CreateAH(pd, ahAttr)
				return func() error { return d.DestroyAH(a) }, err
			}},
		{"mr", func(a *DeviceAttr) *int { return &a.MaxMR }, kernelMRs, syscall.ENOMEM,
			func(t *testing.T, d *Device, pd *PD, cq *CQ) (func() error, error) {
				m, err := d.RegMR(pd, make([]byte, 1), AccessLocalWrite)
				return func() error { return d.DeregMR(m) }, err
			}},
	} {
		t.Run(c.name, func(t *testing.T) {
			d, pd, cq := resDevice(t)
			const max = 8
			*c.limit(&d.attr) = max
			d.mem.maxLive = d.attr.MaxMR - kernelMRs
			reported := d.QueryDevice()
			assert.Equal(t, max, *c.limit(&reported), "reported")
			var destroy []func() error
			// The fixture holds a PD and a CQ of its own.
			held := c.kernel
			if c.name == "pd" || c.name == "cq" {
				held++
			}
			for i := held; i < max; i++ {
				del, err := c.create(t, d, pd, cq)
				require.NoError(t, err, "object %d of %d", i+1, max)
				destroy = append(destroy, del)
			}
			_, err := c.create(t, d, pd, cq)
			require.Error(t, err, "one past max")
			var e *Error
			require.True(t, errors.As(err, &e))
			assert.Equal(t, c.errno, e.Errno, "%v", err)
			require.NoError(t, destroy[0]())
			_, err = c.create(t, d, pd, cq)
			assert.NoError(t, err, "a place freed is a place again")
		})
	}
}

// TestDeviceAttrIsRxe61: the attributes are those `ibv_devinfo -v` prints
// for rxe0 in the conformance guest (Debian's 6.1.0-56 kernel);
// conformance's TestDeviceAttrMatchesRxe compares them with the live
// guest; max_inline_data, not in ibv_device_attr, is what rxe accepts in
// create_qp there (512 is, 513 is not).
func TestDeviceAttrIsRxe61(t *testing.T) {
	d, _, _ := resDevice(t)
	a := d.QueryDevice()
	got := map[string]int{"max_qp": a.MaxQP, "max_qp_wr": a.MaxQPWR, "max_sge": a.MaxSGE, "max_cq": a.MaxCQ,
		"max_cqe": a.MaxCQE, "max_mr": a.MaxMR, "max_pd": a.MaxPD, "max_qp_rd_atom": a.MaxQPRdAtom,
		"max_qp_init_rd_atom": a.MaxQPInitRdAtom, "max_mw": a.MaxMW, "max_ah": a.MaxAH, "max_srq": a.MaxSRQ,
		"max_srq_wr": a.MaxSRQWR, "max_srq_sge": a.MaxSRQSGE, "phys_port_cnt": a.PhysPortCnt,
		"max_inline_data": a.MaxInlineData}
	assert.Equal(t, map[string]int{"max_qp": 1048560, "max_qp_wr": 1048576, "max_sge": 32, "max_cq": 1048576,
		"max_cqe": 32767, "max_mr": 524287, "max_pd": 1048576, "max_qp_rd_atom": 128,
		"max_qp_init_rd_atom": 128, "max_mw": 524287, "max_ah": 32767, "max_srq": 917503,
		"max_srq_wr": 1048576, "max_srq_sge": 27, "phys_port_cnt": 1, "max_inline_data": 512}, got)
	assert.Equal(t, ^uint64(0), a.MaxMRSize)
}

// listedQPs returns the live QPs of d.qpList, in its order.
func listedQPs(d *Device) []*QP {
	var l []*QP
	for _, q := range d.qpList {
		if q != nil {
			l = append(l, q)
		}
	}
	return l
}

// TestQPListKeepsCreationOrder: the timers' list of QPs stays in creation
// order whatever is destroyed, and its holes are compacted, so it stays
// within twice the live QPs (a destroy costs O(1) amortised).
func TestQPListKeepsCreationOrder(t *testing.T) {
	d, pd, cq := resDevice(t)
	var qps []*QP
	for range 100 {
		qps = append(qps, resQP(t, d, pd, cq))
	}
	var want []*QP
	for i, q := range qps {
		if i%3 == 0 {
			want = append(want, q)
			continue
		}
		require.NoError(t, d.DestroyQP(q))
		assert.LessOrEqual(t, len(d.qpList), 2*len(listedQPs(d))+1)
	}
	assert.Equal(t, want, listedQPs(d))
	for i, q := range d.qpList {
		if q != nil {
			assert.Equal(t, i, q.listed)
		}
	}
	for _, q := range want {
		require.NoError(t, d.DestroyQP(q))
	}
	assert.Empty(t, listedQPs(d))
}

// TestConfigMaxQP: a device asked for another max_qp (Config.MaxQP)
// reports and enforces it, and its QPNs run past rxe's top up to it
// (MaxQP+16), then wrap; 0 keeps rxe's; a MaxQP a QPN cannot hold is a
// configuration error.
func TestConfigMaxQP(t *testing.T) {
	cfg := Config{MAC: wire.MAC{2, 0, 0, 0, 0, 1}, IPv4: netip.AddrFrom4([4]byte{10, 0, 0, 1})}
	assert.Equal(t, rxeAttr.MaxQP, New(cfg).QueryDevice().MaxQP, "0: rxe's")

	// Fewer: the limit met sooner, as reported.
	cfg.MaxQP = kernelQPs + 2
	d := New(cfg)
	assert.Equal(t, kernelQPs+2, d.QueryDevice().MaxQP)
	pd, err := d.AllocPD()
	require.NoError(t, err)
	cq, err := d.CreateCQ(1, nil, 0)
	require.NoError(t, err)
	resQP(t, d, pd, cq)
	resQP(t, d, pd, cq)
	_, err = d.CreateQP(pd, QPInitAttr{SendCQ: cq, RecvCQ: cq, Type: QPTypeRC, Cap: QPCap{MaxSendWR: 1, MaxRecvWR: 1, MaxSendSGE: 1, MaxRecvSGE: 1}})
	var e *Error
	require.True(t, errors.As(err, &e), "the third QP: %v", err)
	assert.Equal(t, syscall.EINVAL, e.Errno)

	// More: 2,000,000 QPs, so QPNs up to 2,000,016, past rxe's 1<<20.
	cfg.MaxQP = 2_000_000
	d = New(cfg)
	assert.Equal(t, 2_000_000, d.QueryDevice().MaxQP)
	pd, err = d.AllocPD()
	require.NoError(t, err)
	cq, err = d.CreateCQ(1, nil, 0)
	require.NoError(t, err)
	d.nextQPN = rxeMaxQPIndex
	assert.Equal(t, uint32(rxeMaxQPIndex), resQP(t, d, pd, cq).Num())
	assert.Equal(t, uint32(rxeMaxQPIndex+1), resQP(t, d, pd, cq).Num(), "past rxe's top")
	d.nextQPN = 2_000_016
	top := resQP(t, d, pd, cq)
	assert.Equal(t, uint32(2_000_016), top.Num())
	assert.Same(t, top, d.qpByNum(2_000_016))
	assert.Equal(t, uint32(0x11), resQP(t, d, pd, cq).Num(), "wrapped")

	for _, bad := range []int{-1, MaxQPLimit + 1} {
		cfg.MaxQP = bad
		assert.PanicsWithValue(t, fmt.Sprintf("nic: Config.MaxQP %d: want 1 to %d (0: rxe's %d)", bad, MaxQPLimit, rxeAttr.MaxQP),
			func() { New(cfg) }, "MaxQP %d", bad)
	}
	cfg.MaxQP = MaxQPLimit
	assert.Equal(t, uint32(0xFFFFFE), New(cfg).maxQPIndex, "the top QPN: never the multicast QPN")
}
