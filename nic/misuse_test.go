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

// TestDeviceMisuse: package nic's verbs, called directly (as the
// conformance rig and the scenario runner do), refuse nil objects and
// objects of another device with EINVAL instead of panicking or adopting
// them. verbs' TestVerbsMisuse is the full table; these rows are the
// checks only nic can make.
func TestDeviceMisuse(t *testing.T) {
	newDev := func(i byte) *nic.Device {
		return nic.New(nic.Config{MAC: wire.MAC{2, 0, 0, 0, 0, i},
			IPv4: netip.AddrFrom4([4]byte{10, 0, 0, i}), IPv6: netip.AddrFrom16([16]byte{0: 0xfd, 15: i})})
	}
	type fixture struct {
		d, o   *nic.Device // the device under test, another one
		pd, op *nic.PD     // a PD of each
		cq, oc *nic.CQ     // a CQ of each
	}
	mk := func(t *testing.T) *fixture {
		f := &fixture{d: newDev(1), o: newDev(2)}
		var err error
		f.pd, err = f.d.AllocPD()
		require.NoError(t, err)
		f.op, err = f.o.AllocPD()
		require.NoError(t, err)
		f.cq, err = f.d.CreateCQ(4, nil, 0)
		require.NoError(t, err)
		f.oc, err = f.o.CreateCQ(4, nil, 0)
		require.NoError(t, err)
		f.d.AddNeighbour(netip.MustParseAddr("10.0.0.2"), wire.MAC{2, 0, 0, 0, 0, 2})
		return f
	}
	ia := func(f *fixture, typ nic.QPType) nic.QPInitAttr {
		return nic.QPInitAttr{SendCQ: f.cq, RecvCQ: f.cq, Type: typ,
			Cap: nic.QPCap{MaxSendWR: 1, MaxRecvWR: 1, MaxSendSGE: 1, MaxRecvSGE: 1}}
	}
	ahAttr := nic.AHAttr{IsGlobal: true, PortNum: 1, GRH: nic.GRH{DGID: netip.MustParseAddr("10.0.0.2")}}
	rows := []struct {
		name string
		msg  string
		call func(t *testing.T, f *fixture) error
	}{
		{"destroy_cq nil", "destroy_cq: not a CQ of this device", func(t *testing.T, f *fixture) error {
			return f.d.DestroyCQ(nil)
		}},
		{"destroy_cq of another device", "destroy_cq: not a CQ of this device", func(t *testing.T, f *fixture) error {
			return f.d.DestroyCQ(f.oc)
		}},
		{"destroy_comp_channel nil", "destroy_comp_channel: channel is nil", func(t *testing.T, f *fixture) error {
			return f.d.DestroyCompChannel(nil)
		}},
		{"create_qp send_cq of another device", "create_qp: send_cq is not a live CQ of this device", func(t *testing.T, f *fixture) error {
			a := ia(f, nic.QPTypeRC)
			a.SendCQ = f.oc
			_, err := f.d.CreateQP(f.pd, a)
			return err
		}},
		{"create_qp destroyed recv_cq", "create_qp: recv_cq is not a live CQ of this device", func(t *testing.T, f *fixture) error {
			cq, err := f.d.CreateCQ(4, nil, 0)
			require.NoError(t, err)
			require.NoError(t, f.d.DestroyCQ(cq))
			a := ia(f, nic.QPTypeRC)
			a.RecvCQ = cq
			_, err = f.d.CreateQP(f.pd, a)
			return err
		}},
		{"create_qp SRQ of another device", "create_qp: srq is not a live SRQ of this device", func(t *testing.T, f *fixture) error {
			s, err := f.o.CreateSRQ(f.op, nic.SRQInitAttr{MaxWR: 1})
			require.NoError(t, err)
			a := ia(f, nic.QPTypeRC)
			a.SRQ = s
			_, err = f.d.CreateQP(f.pd, a)
			return err
		}},
		{"create_qp PD of another device", "create_qp: not a live PD of this device", func(t *testing.T, f *fixture) error {
			_, err := f.d.CreateQP(f.op, ia(f, nic.QPTypeRC))
			return err
		}},
		{"modify_qp nil attr", "modify_qp: attr is nil", func(t *testing.T, f *fixture) error {
			qp, err := f.d.CreateQP(f.pd, ia(f, nic.QPTypeRC))
			require.NoError(t, err)
			return f.d.ModifyQP(0, qp, nil, nic.QPAttrState)
		}},
		{"create_ah sgid_index past the table", "create_ah: ah_attr.grh.sgid_index 2 out of range 0..1", func(t *testing.T, f *fixture) error {
			a := ahAttr
			a.GRH.SGIDIndex = 2
			_, err := f.d.CreateAH(f.pd, a)
			return err
		}},
		{"post_send UD with an AH of another device", "post_send: wr.ah is not in the QP's PD", func(t *testing.T, f *fixture) error {
			qp, err := f.d.CreateQP(f.pd, ia(f, nic.QPTypeUD))
			require.NoError(t, err)
			require.NoError(t, f.d.ModifyQP(0, qp, &nic.QPAttr{QPState: nic.QPStateInit, PortNum: 1, QKey: 1},
				nic.QPAttrState|nic.QPAttrPKeyIndex|nic.QPAttrPort|nic.QPAttrQKey))
			require.NoError(t, f.d.ModifyQP(0, qp, &nic.QPAttr{QPState: nic.QPStateRTR}, nic.QPAttrState))
			require.NoError(t, f.d.ModifyQP(0, qp, &nic.QPAttr{QPState: nic.QPStateRTS}, nic.QPAttrState|nic.QPAttrSQPSN))
			f.o.AddNeighbour(netip.MustParseAddr("10.0.0.1"), wire.MAC{2, 0, 0, 0, 0, 1})
			ah, err := f.o.CreateAH(f.op, nic.AHAttr{IsGlobal: true, PortNum: 1, GRH: nic.GRH{DGID: netip.MustParseAddr("10.0.0.1")}})
			require.NoError(t, err)
			_, err = f.d.PostSend(0, qp, []nic.SendWR{{Opcode: nic.WRSend, AH: ah}})
			return err
		}},
	}
	for _, r := range rows {
		t.Run(r.name, func(t *testing.T) {
			f := mk(t)
			var err error
			func() {
				defer func() {
					if p := recover(); p != nil {
						t.Fatalf("%s: panicked: %v", r.name, p)
					}
				}()
				err = r.call(t, f)
			}()
			require.Error(t, err)
			assert.True(t, errors.Is(err, syscall.EINVAL), "%v", err)
			assert.Contains(t, err.Error(), r.msg)
		})
	}
}
