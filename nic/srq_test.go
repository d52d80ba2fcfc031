package nic_test

import (
	"errors"
	"syscall"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/rocesim/rocesim/nic"
)

// TestSRQVerbs: the SRQ verbs refuse what libibverbs refuses, with its
// errno and a message naming the field (ibv_create_srq, ibv_modify_srq,
// ibv_post_srq_recv, ibv_destroy_srq; rxe's rxe_srq_chk_init and
// rxe_srq_chk_attr), and an SRQ outlives no QP that uses it: destroying
// it while a QP is attached fails with EBUSY, and succeeds once the QP is
// gone. A QP on an SRQ has no receive queue of its own to post to.
func TestSRQVerbs(t *testing.T) {
	h := newPair(t, args{"type": "rc", "srq": ""})
	b := h.b
	max := b.dev.QueryDevice()
	sge := func(n int) []nic.SGE {
		s := make([]nic.SGE, n)
		for i := range s {
			s[i] = nic.SGE{Addr: b.mr.Addr, Length: 8, LKey: b.mr.LKey}
		}
		return s
	}
	rows := []struct {
		name  string
		errno syscall.Errno
		msg   string
		call  func() error
	}{
		{"create_srq without a PD", syscall.EINVAL, "create_srq: not a live PD", func() error {
			_, err := b.dev.CreateSRQ(nil, nic.SRQInitAttr{MaxWR: 1})
			return err
		}},
		{"create_srq max_wr 0", syscall.EINVAL, "create_srq: attr.max_wr 0 out of range", func() error {
			_, err := b.dev.CreateSRQ(b.pd, nic.SRQInitAttr{})
			return err
		}},
		{"create_srq max_wr over the device's", syscall.EINVAL, "create_srq: attr.max_wr", func() error {
			_, err := b.dev.CreateSRQ(b.pd, nic.SRQInitAttr{MaxWR: uint32(max.MaxSRQWR) + 1})
			return err
		}},
		{"create_srq max_sge over the device's", syscall.EINVAL, "create_srq: attr.max_sge", func() error {
			_, err := b.dev.CreateSRQ(b.pd, nic.SRQInitAttr{MaxWR: 4, MaxSGE: uint32(max.MaxSRQSGE) + 1})
			return err
		}},
		{"create_srq limit over max_wr", syscall.EINVAL, "create_srq: attr.srq_limit 5 over max_wr 4", func() error {
			_, err := b.dev.CreateSRQ(b.pd, nic.SRQInitAttr{MaxWR: 4, SRQLimit: 5})
			return err
		}},
		{"modify_srq without an SRQ", syscall.EINVAL, "modify_srq: not a live SRQ", func() error {
			return b.dev.ModifySRQ(nil, nic.SRQInitAttr{}, nic.SRQAttrLimit)
		}},
		{"modify_srq unknown mask", syscall.EINVAL, "modify_srq: unknown attribute mask bits 0x4", func() error {
			return b.dev.ModifySRQ(b.srq, nic.SRQInitAttr{}, 4)
		}},
		{"modify_srq max_wr below the WRs queued", syscall.EINVAL, "modify_srq: max_wr 1 below the 2 WRs queued", func() error {
			if _, err := b.dev.PostSRQRecv(b.srq, []nic.RecvWR{{WRID: 1, SGList: sge(1)}, {WRID: 2, SGList: sge(1)}}); err != nil {
				return err
			}
			return b.dev.ModifySRQ(b.srq, nic.SRQInitAttr{MaxWR: 1}, nic.SRQAttrMaxWR)
		}},
		// max_wr 64 holds 127 under the rxe profile; the limit may be
		// anything up to that (rxe_srq_chk_attr: the queue's index mask).
		{"modify_srq limit over max_wr", syscall.EINVAL, "modify_srq: srq_limit 128 over max_wr 127", func() error {
			return b.dev.ModifySRQ(b.srq, nic.SRQInitAttr{SRQLimit: 128}, nic.SRQAttrLimit)
		}},
		{"post_srq_recv without an SRQ", syscall.EINVAL, "post_srq_recv: not a live SRQ", func() error {
			_, err := b.dev.PostSRQRecv(nil, nil)
			return err
		}},
		{"post_srq_recv too many SGEs", syscall.EINVAL, "post_srq_recv: num_sge 2 over the SRQ's max_sge 1", func() error {
			_, err := b.dev.PostSRQRecv(b.srq, []nic.RecvWR{{SGList: sge(2)}})
			return err
		}},
		{"post_recv to a QP on an SRQ", syscall.EINVAL, "receives from an SRQ; post to the SRQ", func() error {
			_, err := b.dev.PostRecv(h.now, b.qp, []nic.RecvWR{{SGList: sge(1)}})
			return err
		}},
		{"destroy_srq a QP uses", syscall.EBUSY, "destroy_srq: 1 QPs still use the SRQ", func() error {
			return b.dev.DestroySRQ(b.srq)
		}},
	}
	for _, r := range rows {
		err := r.call()
		if !assert.Error(t, err, r.name) {
			continue
		}
		assert.True(t, errors.Is(err, r.errno), "%s: %v, want %v", r.name, err, r.errno)
		assert.Contains(t, err.Error(), r.msg, r.name)
	}

	// The QP gone, the SRQ can go, and then it is no SRQ any more.
	require.NoError(t, b.dev.DestroyQP(b.qp))
	require.NoError(t, b.dev.DestroySRQ(b.srq))
	err := b.dev.DestroySRQ(b.srq)
	assert.True(t, errors.Is(err, syscall.EINVAL), "destroy_srq twice: %v", err)
	// Its PD is free again once the SRQ, the QP, the MR are gone.
	require.NoError(t, b.dev.DeregMR(b.mr))
	assert.NoError(t, b.dev.DeallocPD(b.pd))
}

// TestSRQHoldsWhatRxeHolds: under the rxe profile an SRQ asked for 16
// WRs holds 31 (ibv_query_srq says so on rxe), and a resize is measured
// by what the resized queue holds: 20 WRs queued, a resize to 16 is
// taken (31 slots), one to 8 (15) is not.
func TestSRQHoldsWhatRxeHolds(t *testing.T) {
	h := newPair(t, args{"type": "rc"})
	b := h.b
	s, err := b.dev.CreateSRQ(b.pd, nic.SRQInitAttr{MaxWR: 16, MaxSGE: 1})
	require.NoError(t, err)
	assert.Equal(t, uint32(31), s.Query().MaxWR)
	wrs := make([]nic.RecvWR, 20)
	for i := range wrs {
		wrs[i] = nic.RecvWR{WRID: uint64(i), SGList: []nic.SGE{{Addr: b.mr.Addr, Length: 8, LKey: b.mr.LKey}}}
	}
	n, err := b.dev.PostSRQRecv(s, wrs)
	require.NoError(t, err)
	require.Equal(t, 20, n)
	require.NoError(t, b.dev.ModifySRQ(s, nic.SRQInitAttr{MaxWR: 16}, nic.SRQAttrMaxWR), "16 asked holds 31: the 20 queued fit")
	err = b.dev.ModifySRQ(s, nic.SRQInitAttr{MaxWR: 8}, nic.SRQAttrMaxWR)
	assert.True(t, errors.Is(err, syscall.EINVAL), "8 asked holds 15, below the 20 queued: %v", err)
	assert.Equal(t, uint32(31), s.Query().MaxWR)
}
