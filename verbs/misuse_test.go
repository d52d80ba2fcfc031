package verbs_test

import (
	"errors"
	"fmt"
	"net/netip"
	"sort"
	"strings"
	"syscall"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/rocesim/rocesim/nic"
	"github.com/rocesim/rocesim/sim"
	"github.com/rocesim/rocesim/verbs"
)

// Verbs misuse (issue 8, item 5): every verb called with every kind of
// bad argument — nil, a destroyed object, an object of another context,
// PD or host, a value out of range, a wrong state — returns an error
// wrapping the errno libibverbs gives (rxe and the kernel's uverbs layer
// are the reference), with a message naming what was wrong, and never
// panics.
//
// Wrong states for posting (post_send in RESET, INIT or RTR; post_recv in
// RESET) are TestStateVerbTable's cells, and illegal modify transitions
// are nic's TestCheckModify* tables; this table has one row of each only,
// to show the verbs layer passes them through.

// misuseFixture is a world for one row: two connected hosts with an RC
// pair at RTS (a on host a, b on host b), a second context on host a and
// a second PD in a's context.
type misuseFixture struct {
	w    *verbs.World
	ha   *verbs.Host
	a, b *endpoint
	ctx2 *verbs.Context // another open of host a's device
	pd2  *verbs.PD      // another PD in a.ctx
	gid  netip.Addr     // b's IPv4 GID, a routable destination
	attr verbs.DeviceAttr
}

func newMisuseFixture(t *testing.T) *misuseFixture {
	t.Helper()
	w := verbs.NewWorld(verbs.WorldConfig{Seed: 1})
	ha, hb := w.AddHost("a"), w.AddHost("b")
	require.NoError(t, w.Connect(ha, hb))
	a, b := setup(ha, 100), setup(hb, 200)
	require.NoError(t, a.connect(b))
	require.NoError(t, b.connect(a))
	f := &misuseFixture{w: w, ha: ha, a: a, b: b}
	var err error
	f.ctx2, err = ha.GetDeviceList()[0].Open()
	require.NoError(t, err)
	f.pd2, err = a.ctx.AllocPD()
	require.NoError(t, err)
	f.gid, err = b.ctx.QueryGID(1, 1)
	require.NoError(t, err)
	f.attr = a.ctx.QueryDevice()
	return f
}

// qp creates a QP of type typ on a's PD and CQ with room for 16 WRs of
// one SGE each.
func (f *misuseFixture) qp(t *testing.T, typ verbs.QPType) *verbs.QP {
	t.Helper()
	qp, err := f.a.pd.CreateQP(verbs.QPInitAttr{SendCQ: f.a.cq, RecvCQ: f.a.cq, Type: typ,
		Cap: verbs.QPCap{MaxSendWR: 16, MaxRecvWR: 16, MaxSendSGE: 1, MaxRecvSGE: 1}})
	require.NoError(t, err)
	return qp
}

// rcIn returns a new RC QP of a, brought to state st toward b.
func (f *misuseFixture) rcIn(t *testing.T, st verbs.QPState) *verbs.QP {
	t.Helper()
	e := &endpoint{ctx: f.a.ctx, pd: f.a.pd, cq: f.a.cq, mr: f.a.mr, buf: f.a.buf, psn: 1, qp: f.qp(t, verbs.QPTypeRC)}
	bring(t, e, f.b, st)
	return e.qp
}

// ud returns a new UD QP of a at RTS.
func (f *misuseFixture) ud(t *testing.T) *verbs.QP {
	t.Helper()
	qp := f.qp(t, verbs.QPTypeUD)
	require.NoError(t, qp.Modify(&verbs.QPAttr{QPState: verbs.QPStateInit, PortNum: 1, QKey: 0x11},
		verbs.QPAttrState|verbs.QPAttrPKeyIndex|verbs.QPAttrPort|verbs.QPAttrQKey))
	require.NoError(t, qp.Modify(&verbs.QPAttr{QPState: verbs.QPStateRTR}, verbs.QPAttrState))
	require.NoError(t, qp.Modify(&verbs.QPAttr{QPState: verbs.QPStateRTS, SQPSN: 1}, verbs.QPAttrState|verbs.QPAttrSQPSN))
	return qp
}

// uc returns a new UC QP of a at RTS, connected to a new one of b.
func (f *misuseFixture) uc(t *testing.T) *verbs.QP {
	t.Helper()
	ea := &endpoint{ctx: f.a.ctx, pd: f.a.pd, cq: f.a.cq, mr: f.a.mr, buf: f.a.buf, psn: 1}
	eb := &endpoint{ctx: f.b.ctx, pd: f.b.pd, cq: f.b.cq, mr: f.b.mr, buf: f.b.buf, psn: 2}
	ucPair(t, ea, eb)
	return ea.qp
}

// ah returns an address handle to b in pd.
func (f *misuseFixture) ah(t *testing.T, pd *verbs.PD) *verbs.AH {
	t.Helper()
	ah, err := pd.CreateAH(verbs.AHAttr{IsGlobal: true, PortNum: 1, GRH: verbs.GRH{DGID: f.gid}})
	require.NoError(t, err)
	return ah
}

// srq returns an SRQ of a's PD with room for 4 WRs of one SGE.
func (f *misuseFixture) srq(t *testing.T) *verbs.SRQ {
	t.Helper()
	s, err := f.a.pd.CreateSRQ(verbs.SRQAttr{MaxWR: 4, MaxSGE: 1})
	require.NoError(t, err)
	return s
}

// closed returns a context of host a with one of every object opened
// through it, then closed.
func (f *misuseFixture) closed(t *testing.T) *closedSet {
	t.Helper()
	c := &closedSet{}
	var err error
	c.ctx, err = f.ha.GetDeviceList()[0].Open()
	require.NoError(t, err)
	c.ch = c.ctx.CreateCompChannel()
	c.pd, err = c.ctx.AllocPD()
	require.NoError(t, err)
	c.cq, err = c.ctx.CreateCQ(4, c.ch, 0)
	require.NoError(t, err)
	c.mr, err = c.pd.RegMR(make([]byte, 64), verbs.AccessLocalWrite)
	require.NoError(t, err)
	c.qp, err = c.pd.CreateQP(verbs.QPInitAttr{SendCQ: c.cq, RecvCQ: c.cq, Type: verbs.QPTypeRC,
		Cap: verbs.QPCap{MaxSendWR: 1, MaxRecvWR: 1, MaxSendSGE: 1, MaxRecvSGE: 1}})
	require.NoError(t, err)
	c.srq, err = c.pd.CreateSRQ(verbs.SRQAttr{MaxWR: 1, MaxSGE: 1})
	require.NoError(t, err)
	c.ah = f.ah(t, c.pd)
	require.NoError(t, c.ctx.Close())
	return c
}

type closedSet struct {
	ctx *verbs.Context
	ch  *verbs.CompChannel
	pd  *verbs.PD
	cq  *verbs.CQ
	mr  *verbs.MR
	qp  *verbs.QP
	srq *verbs.SRQ
	ah  *verbs.AH
}

// send is a signaled SEND of 8 bytes of a's MR.
func (f *misuseFixture) send(id uint64) verbs.SendWR { return sendWR(id, f.a, 8) }

// udSend is a signaled UD SEND of 8 bytes through ah.
func (f *misuseFixture) udSend(ah *verbs.AH) verbs.SendWR {
	return verbs.SendWR{WRID: 1, Opcode: verbs.WRSend, Flags: verbs.SendSignaled, AH: ah, RemoteQPN: f.b.qp.QPNum,
		RemoteQKey: 0x11, SGList: []verbs.SGE{f.a.mr.SGE(0, 8)}}
}

// rtrToRTS is the attributes of an RC RTR->RTS modify with every required
// attribute legal; a row changes one.
func rtrToRTS() (*verbs.QPAttr, verbs.QPAttrMask) {
	return &verbs.QPAttr{QPState: verbs.QPStateRTS, Timeout: 14, RetryCnt: 7, RNRRetry: 7, SQPSN: 1, MaxRdAtomic: 1},
		verbs.QPAttrState | verbs.QPAttrTimeout | verbs.QPAttrRetryCnt | verbs.QPAttrRNRRetry | verbs.QPAttrSQPSN | verbs.QPAttrMaxQPRdAtomic
}

// initToRTR is the attributes of an RC INIT->RTR modify toward b, every
// required attribute legal; a row changes one.
func (f *misuseFixture) initToRTR() (*verbs.QPAttr, verbs.QPAttrMask) {
	return &verbs.QPAttr{QPState: verbs.QPStateRTR, PathMTU: verbs.MTU1024, DestQPNum: f.b.qp.QPNum, RQPSN: 1,
			MaxDestRdAtomic: 1, MinRNRTimer: 12,
			AHAttr: verbs.AHAttr{IsGlobal: true, PortNum: 1, GRH: verbs.GRH{DGID: f.gid, SGIDIndex: 1}}},
		verbs.QPAttrState | verbs.QPAttrAV | verbs.QPAttrPathMTU | verbs.QPAttrDestQPN | verbs.QPAttrRQPSN |
			verbs.QPAttrMaxDestRdAtomic | verbs.QPAttrMinRNRTimer
}

// resetToInit is an RC RESET->INIT modify; a row changes one attribute.
func resetToInit() (*verbs.QPAttr, verbs.QPAttrMask) {
	return &verbs.QPAttr{QPState: verbs.QPStateInit, PortNum: 1, QPAccessFlags: verbs.AccessRemoteWrite},
		verbs.QPAttrState | verbs.QPAttrPKeyIndex | verbs.QPAttrPort | verbs.QPAttrAccessFlags
}

// misuseRow is one misuse: call makes it on a fresh fixture and returns
// the verb's error. errno is what errors.Is must find (0: the call is
// legal and must succeed, a row kept to pin a decision), msg a piece of
// the message that names the fault.
type misuseRow struct {
	verb  string
	name  string
	errno syscall.Errno
	msg   string
	call  func(t *testing.T, f *misuseFixture) error
}

// postErr returns a post's error, checking it refused WR want.
func postErr(t *testing.T, want int) func(int, error) error {
	return func(i int, err error) error {
		if err != nil {
			assert.Equal(t, want, i, "index of the refused WR")
		}
		return err
	}
}

// misuseRows lists the misuses, verb by verb.
func misuseRows() []misuseRow {
	var rows []misuseRow
	add := func(verb string, rs ...misuseRow) {
		for _, r := range rs {
			r.verb = verb
			rows = append(rows, r)
		}
	}
	const (
		inval  = syscall.EINVAL
		busy   = syscall.EBUSY
		nomem  = syscall.ENOMEM
		nodev  = syscall.ENODEV
		closed = "context is closed"
	)

	add("open_device",
		misuseRow{name: "nil device", errno: nodev, msg: "no device", call: func(t *testing.T, f *misuseFixture) error {
			var d *verbs.Device
			_, err := d.Open()
			return err
		}},
		misuseRow{name: "second open is a new context", call: func(t *testing.T, f *misuseFixture) error {
			_, err := f.ha.GetDeviceList()[0].Open()
			return err
		}},
	)
	add("close_device",
		misuseRow{name: "closed twice", errno: inval, msg: closed, call: func(t *testing.T, f *misuseFixture) error {
			require.NoError(t, f.ctx2.Close())
			return f.ctx2.Close()
		}},
		misuseRow{name: "nil context", errno: inval, msg: "context is nil", call: func(t *testing.T, f *misuseFixture) error {
			var c *verbs.Context
			return c.Close()
		}},
	)

	add("query_port",
		misuseRow{name: "port 0", errno: inval, msg: "port 0 does not exist", call: func(t *testing.T, f *misuseFixture) error {
			_, err := f.a.ctx.QueryPort(0)
			return err
		}},
		misuseRow{name: "port 2", errno: inval, msg: "port 2 does not exist", call: func(t *testing.T, f *misuseFixture) error {
			_, err := f.a.ctx.QueryPort(2)
			return err
		}},
		misuseRow{name: "closed context", errno: inval, msg: closed, call: func(t *testing.T, f *misuseFixture) error {
			_, err := f.closed(t).ctx.QueryPort(1)
			return err
		}},
		misuseRow{name: "nil context", errno: inval, msg: "context is nil", call: func(t *testing.T, f *misuseFixture) error {
			var c *verbs.Context
			_, err := c.QueryPort(1)
			return err
		}},
	)
	add("query_gid",
		misuseRow{name: "port 0", errno: inval, msg: "port 0 index 0 out of range", call: func(t *testing.T, f *misuseFixture) error {
			_, err := f.a.ctx.QueryGID(0, 0)
			return err
		}},
		misuseRow{name: "port 2", errno: inval, msg: "port 2 index 0 out of range", call: func(t *testing.T, f *misuseFixture) error {
			_, err := f.a.ctx.QueryGID(2, 0)
			return err
		}},
		misuseRow{name: "index -1", errno: inval, msg: "index -1 out of range", call: func(t *testing.T, f *misuseFixture) error {
			_, err := f.a.ctx.QueryGID(1, -1)
			return err
		}},
		misuseRow{name: "index past the table", errno: inval, msg: "index 2 out of range (port 1, 2 GIDs)", call: func(t *testing.T, f *misuseFixture) error {
			_, err := f.a.ctx.QueryGID(1, 2)
			return err
		}},
		misuseRow{name: "closed context", errno: inval, msg: closed, call: func(t *testing.T, f *misuseFixture) error {
			_, err := f.closed(t).ctx.QueryGID(1, 0)
			return err
		}},
	)
	add("query_pkey",
		misuseRow{name: "index 1", errno: inval, msg: "index 1 out of range", call: func(t *testing.T, f *misuseFixture) error {
			_, err := f.a.ctx.QueryPKey(1, 1)
			return err
		}},
		misuseRow{name: "index -1", errno: inval, msg: "index -1 out of range", call: func(t *testing.T, f *misuseFixture) error {
			_, err := f.a.ctx.QueryPKey(1, -1)
			return err
		}},
		misuseRow{name: "port 2", errno: inval, msg: "port 2 index 0 out of range", call: func(t *testing.T, f *misuseFixture) error {
			_, err := f.a.ctx.QueryPKey(2, 0)
			return err
		}},
		misuseRow{name: "closed context", errno: inval, msg: closed, call: func(t *testing.T, f *misuseFixture) error {
			_, err := f.closed(t).ctx.QueryPKey(1, 0)
			return err
		}},
	)

	add("alloc_pd",
		misuseRow{name: "closed context", errno: inval, msg: closed, call: func(t *testing.T, f *misuseFixture) error {
			_, err := f.closed(t).ctx.AllocPD()
			return err
		}},
		misuseRow{name: "nil context", errno: inval, msg: "context is nil", call: func(t *testing.T, f *misuseFixture) error {
			var c *verbs.Context
			_, err := c.AllocPD()
			return err
		}},
	)
	add("dealloc_pd",
		misuseRow{name: "nil PD", errno: inval, msg: "pd is nil", call: func(t *testing.T, f *misuseFixture) error {
			var p *verbs.PD
			return p.Dealloc()
		}},
		misuseRow{name: "deallocated twice", errno: inval, msg: "not a live PD", call: func(t *testing.T, f *misuseFixture) error {
			require.NoError(t, f.pd2.Dealloc())
			return f.pd2.Dealloc()
		}},
		misuseRow{name: "MR, QP in it", errno: busy, msg: "2 resources still use the PD", call: func(t *testing.T, f *misuseFixture) error {
			return f.a.pd.Dealloc()
		}},
		misuseRow{name: "AH in it", errno: busy, msg: "1 resources still use the PD", call: func(t *testing.T, f *misuseFixture) error {
			f.ah(t, f.pd2)
			return f.pd2.Dealloc()
		}},
		misuseRow{name: "SRQ in it", errno: busy, msg: "1 resources still use the PD", call: func(t *testing.T, f *misuseFixture) error {
			_, err := f.pd2.CreateSRQ(verbs.SRQAttr{MaxWR: 1})
			require.NoError(t, err)
			return f.pd2.Dealloc()
		}},
		misuseRow{name: "closed context", errno: inval, msg: closed, call: func(t *testing.T, f *misuseFixture) error {
			return f.closed(t).pd.Dealloc()
		}},
	)

	add("reg_mr",
		misuseRow{name: "nil PD", errno: inval, msg: "pd is nil", call: func(t *testing.T, f *misuseFixture) error {
			var p *verbs.PD
			_, err := p.RegMR(make([]byte, 8), verbs.AccessLocalWrite)
			return err
		}},
		misuseRow{name: "deallocated PD", errno: inval, msg: "not a live PD", call: func(t *testing.T, f *misuseFixture) error {
			require.NoError(t, f.pd2.Dealloc())
			_, err := f.pd2.RegMR(make([]byte, 8), verbs.AccessLocalWrite)
			return err
		}},
		misuseRow{name: "nil buffer", errno: inval, msg: "length 0", call: func(t *testing.T, f *misuseFixture) error {
			_, err := f.a.pd.RegMR(nil, verbs.AccessLocalWrite)
			return err
		}},
		misuseRow{name: "empty buffer", errno: inval, msg: "length 0", call: func(t *testing.T, f *misuseFixture) error {
			_, err := f.a.pd.RegMR([]byte{}, 0)
			return err
		}},
		misuseRow{name: "REMOTE_WRITE without LOCAL_WRITE", errno: inval, msg: "REMOTE_WRITE requires LOCAL_WRITE", call: func(t *testing.T, f *misuseFixture) error {
			_, err := f.a.pd.RegMR(make([]byte, 8), verbs.AccessRemoteWrite)
			return err
		}},
		misuseRow{name: "REMOTE_ATOMIC without LOCAL_WRITE", errno: inval, msg: "REMOTE_ATOMIC requires LOCAL_WRITE", call: func(t *testing.T, f *misuseFixture) error {
			_, err := f.a.pd.RegMR(make([]byte, 8), verbs.AccessRemoteRead|verbs.AccessRemoteAtomic)
			return err
		}},
		misuseRow{name: "unknown access bits", errno: inval, msg: "unknown bits 0x400", call: func(t *testing.T, f *misuseFixture) error {
			_, err := f.a.pd.RegMR(make([]byte, 8), verbs.AccessLocalWrite|1<<10)
			return err
		}},
		misuseRow{name: "closed context", errno: inval, msg: closed, call: func(t *testing.T, f *misuseFixture) error {
			_, err := f.closed(t).pd.RegMR(make([]byte, 8), 0)
			return err
		}},
	)
	add("dereg_mr",
		misuseRow{name: "nil MR", errno: inval, msg: "mr is nil", call: func(t *testing.T, f *misuseFixture) error {
			var m *verbs.MR
			return m.Dereg()
		}},
		misuseRow{name: "deregistered twice", errno: inval, msg: "already deregistered", call: func(t *testing.T, f *misuseFixture) error {
			require.NoError(t, f.a.mr.Dereg())
			return f.a.mr.Dereg()
		}},
		misuseRow{name: "closed context", errno: inval, msg: closed, call: func(t *testing.T, f *misuseFixture) error {
			return f.closed(t).mr.Dereg()
		}},
	)

	add("destroy_comp_channel",
		misuseRow{name: "nil channel", errno: inval, msg: "channel is nil", call: func(t *testing.T, f *misuseFixture) error {
			var ch *verbs.CompChannel
			return ch.Destroy()
		}},
		misuseRow{name: "destroyed twice", errno: inval, msg: "already destroyed", call: func(t *testing.T, f *misuseFixture) error {
			ch := f.a.ctx.CreateCompChannel()
			require.NoError(t, ch.Destroy())
			return ch.Destroy()
		}},
		misuseRow{name: "CQ on it", errno: busy, msg: "1 CQs use the channel", call: func(t *testing.T, f *misuseFixture) error {
			ch := f.a.ctx.CreateCompChannel()
			_, err := f.a.ctx.CreateCQ(4, ch, 0)
			require.NoError(t, err)
			return ch.Destroy()
		}},
		misuseRow{name: "closed context", errno: inval, msg: closed, call: func(t *testing.T, f *misuseFixture) error {
			return f.closed(t).ch.Destroy()
		}},
	)

	add("create_cq",
		misuseRow{name: "cqe 0", errno: inval, msg: "cqe 0 out of range 1..32767", call: func(t *testing.T, f *misuseFixture) error {
			_, err := f.a.ctx.CreateCQ(0, nil, 0)
			return err
		}},
		misuseRow{name: "cqe -1", errno: inval, msg: "cqe -1 out of range", call: func(t *testing.T, f *misuseFixture) error {
			_, err := f.a.ctx.CreateCQ(-1, nil, 0)
			return err
		}},
		misuseRow{name: "cqe over max_cqe", errno: inval, msg: "cqe 32768 out of range 1..32767", call: func(t *testing.T, f *misuseFixture) error {
			_, err := f.a.ctx.CreateCQ(f.attr.MaxCQE+1, nil, 0)
			return err
		}},
		misuseRow{name: "comp_vector -1", errno: inval, msg: "comp_vector -1 out of range", call: func(t *testing.T, f *misuseFixture) error {
			_, err := f.a.ctx.CreateCQ(4, nil, -1)
			return err
		}},
		misuseRow{name: "comp_vector past num_comp_vectors", errno: inval, msg: "comp_vector 1 out of range: the device has 1 completion vector(s), 0..0", call: func(t *testing.T, f *misuseFixture) error {
			_, err := f.a.ctx.CreateCQ(4, nil, f.a.ctx.NumCompVectors())
			return err
		}},
		misuseRow{name: "destroyed channel", errno: inval, msg: "channel is destroyed", call: func(t *testing.T, f *misuseFixture) error {
			ch := f.a.ctx.CreateCompChannel()
			require.NoError(t, ch.Destroy())
			_, err := f.a.ctx.CreateCQ(4, ch, 0)
			return err
		}},
		misuseRow{name: "channel of another context", errno: inval, msg: "channel belongs to another context", call: func(t *testing.T, f *misuseFixture) error {
			_, err := f.a.ctx.CreateCQ(4, f.ctx2.CreateCompChannel(), 0)
			return err
		}},
		misuseRow{name: "channel of another host", errno: inval, msg: "channel belongs to another context", call: func(t *testing.T, f *misuseFixture) error {
			_, err := f.a.ctx.CreateCQ(4, f.b.ctx.CreateCompChannel(), 0)
			return err
		}},
		misuseRow{name: "closed context", errno: inval, msg: closed, call: func(t *testing.T, f *misuseFixture) error {
			_, err := f.closed(t).ctx.CreateCQ(4, nil, 0)
			return err
		}},
	)
	add("resize_cq",
		misuseRow{name: "cqe 0", errno: inval, msg: "cqe 0 out of range", call: func(t *testing.T, f *misuseFixture) error {
			return f.a.cq.Resize(0)
		}},
		misuseRow{name: "cqe over max_cqe", errno: inval, msg: "cqe 32768 out of range", call: func(t *testing.T, f *misuseFixture) error {
			return f.a.cq.Resize(f.attr.MaxCQE + 1)
		}},
		misuseRow{name: "below the completions queued", errno: inval, msg: "cqe 1 below the 2 completions queued", call: func(t *testing.T, f *misuseFixture) error {
			_, err := f.a.qp.PostRecv([]verbs.RecvWR{recvWR(1, f.a), recvWR(2, f.a)})
			require.NoError(t, err)
			require.NoError(t, f.a.qp.Modify(&verbs.QPAttr{QPState: verbs.QPStateErr}, verbs.QPAttrState))
			return f.a.cq.Resize(1)
		}},
		misuseRow{name: "destroyed CQ", errno: inval, msg: "CQ is destroyed", call: func(t *testing.T, f *misuseFixture) error {
			cq, err := f.a.ctx.CreateCQ(4, nil, 0)
			require.NoError(t, err)
			require.NoError(t, cq.Destroy())
			return cq.Resize(8)
		}},
		misuseRow{name: "nil CQ", errno: inval, msg: "cq is nil", call: func(t *testing.T, f *misuseFixture) error {
			var cq *verbs.CQ
			return cq.Resize(8)
		}},
		misuseRow{name: "closed context", errno: inval, msg: closed, call: func(t *testing.T, f *misuseFixture) error {
			return f.closed(t).cq.Resize(8)
		}},
	)
	add("req_notify_cq",
		misuseRow{name: "destroyed CQ", errno: inval, msg: "CQ is destroyed", call: func(t *testing.T, f *misuseFixture) error {
			cq, err := f.a.ctx.CreateCQ(4, nil, 0)
			require.NoError(t, err)
			require.NoError(t, cq.Destroy())
			return cq.ReqNotify(false)
		}},
		misuseRow{name: "nil CQ", errno: inval, msg: "cq is nil", call: func(t *testing.T, f *misuseFixture) error {
			var cq *verbs.CQ
			return cq.ReqNotify(true)
		}},
		misuseRow{name: "closed context", errno: inval, msg: closed, call: func(t *testing.T, f *misuseFixture) error {
			return f.closed(t).cq.ReqNotify(false)
		}},
	)
	add("destroy_cq",
		misuseRow{name: "QP uses it", errno: busy, msg: "QPs use the CQ", call: func(t *testing.T, f *misuseFixture) error {
			return f.a.cq.Destroy()
		}},
		misuseRow{name: "destroyed twice", errno: inval, msg: "CQ already destroyed", call: func(t *testing.T, f *misuseFixture) error {
			cq, err := f.a.ctx.CreateCQ(4, nil, 0)
			require.NoError(t, err)
			require.NoError(t, cq.Destroy())
			return cq.Destroy()
		}},
		// An event read and not acknowledged: rdma-core's ibv_destroy_cq
		// waits for it (the kernel counts events read); one never read
		// it does not wait for, as on rxe (conformance
		// TestDestroyCQWithEventsRXE).
		misuseRow{name: "events not acknowledged", errno: busy, msg: "1 completion events read and not acknowledged", call: func(t *testing.T, f *misuseFixture) error {
			ch := f.a.ctx.CreateCompChannel()
			cq, err := f.a.ctx.CreateCQ(4, ch, 0)
			require.NoError(t, err)
			qp, err := f.a.pd.CreateQP(verbs.QPInitAttr{SendCQ: cq, RecvCQ: cq, Type: verbs.QPTypeRC,
				Cap: verbs.QPCap{MaxSendWR: 1, MaxRecvWR: 1, MaxRecvSGE: 1}})
			require.NoError(t, err)
			bring(t, &endpoint{qp: qp}, f.b, verbs.QPStateInit)
			_, err = qp.PostRecv([]verbs.RecvWR{recvWR(1, f.a)})
			require.NoError(t, err)
			require.NoError(t, cq.ReqNotify(false))
			require.NoError(t, qp.Modify(&verbs.QPAttr{QPState: verbs.QPStateErr}, verbs.QPAttrState))
			require.NoError(t, qp.Destroy())
			if got, ok := ch.GetCQEvent(); !ok || got != cq {
				t.Fatalf("no event of the CQ on its channel")
			}
			return cq.Destroy()
		}},
		misuseRow{name: "nil CQ", errno: inval, msg: "cq is nil", call: func(t *testing.T, f *misuseFixture) error {
			var cq *verbs.CQ
			return cq.Destroy()
		}},
		misuseRow{name: "closed context", errno: inval, msg: closed, call: func(t *testing.T, f *misuseFixture) error {
			return f.closed(t).cq.Destroy()
		}},
	)

	cap1 := verbs.QPCap{MaxSendWR: 1, MaxRecvWR: 1, MaxSendSGE: 1, MaxRecvSGE: 1}
	createQP := func(mod func(f *misuseFixture, ia *verbs.QPInitAttr)) func(t *testing.T, f *misuseFixture) error {
		return func(t *testing.T, f *misuseFixture) error {
			ia := verbs.QPInitAttr{SendCQ: f.a.cq, RecvCQ: f.a.cq, Type: verbs.QPTypeRC, Cap: cap1}
			mod(f, &ia)
			_, err := f.a.pd.CreateQP(ia)
			return err
		}
	}
	add("create_qp",
		misuseRow{name: "nil PD", errno: inval, msg: "pd is nil", call: func(t *testing.T, f *misuseFixture) error {
			var p *verbs.PD
			_, err := p.CreateQP(verbs.QPInitAttr{SendCQ: f.a.cq, RecvCQ: f.a.cq, Type: verbs.QPTypeRC, Cap: cap1})
			return err
		}},
		misuseRow{name: "deallocated PD", errno: inval, msg: "not a live PD", call: func(t *testing.T, f *misuseFixture) error {
			require.NoError(t, f.pd2.Dealloc())
			_, err := f.pd2.CreateQP(verbs.QPInitAttr{SendCQ: f.a.cq, RecvCQ: f.a.cq, Type: verbs.QPTypeRC, Cap: cap1})
			return err
		}},
		misuseRow{name: "nil send_cq", errno: inval, msg: "send_cq and recv_cq are required",
			call: createQP(func(f *misuseFixture, ia *verbs.QPInitAttr) { ia.SendCQ = nil })},
		misuseRow{name: "nil recv_cq", errno: inval, msg: "send_cq and recv_cq are required",
			call: createQP(func(f *misuseFixture, ia *verbs.QPInitAttr) { ia.RecvCQ = nil })},
		misuseRow{name: "destroyed send_cq", errno: inval, msg: "send_cq is not a live CQ", call: func(t *testing.T, f *misuseFixture) error {
			cq, err := f.a.ctx.CreateCQ(4, nil, 0)
			require.NoError(t, err)
			require.NoError(t, cq.Destroy())
			return createQP(func(f *misuseFixture, ia *verbs.QPInitAttr) { ia.SendCQ = cq })(t, f)
		}},
		misuseRow{name: "destroyed recv_cq", errno: inval, msg: "recv_cq is not a live CQ", call: func(t *testing.T, f *misuseFixture) error {
			cq, err := f.a.ctx.CreateCQ(4, nil, 0)
			require.NoError(t, err)
			require.NoError(t, cq.Destroy())
			return createQP(func(f *misuseFixture, ia *verbs.QPInitAttr) { ia.RecvCQ = cq })(t, f)
		}},
		misuseRow{name: "send_cq of another context", errno: inval, msg: "send_cq belongs to another context", call: func(t *testing.T, f *misuseFixture) error {
			cq, err := f.ctx2.CreateCQ(4, nil, 0)
			require.NoError(t, err)
			return createQP(func(f *misuseFixture, ia *verbs.QPInitAttr) { ia.SendCQ = cq })(t, f)
		}},
		misuseRow{name: "recv_cq of another host", errno: inval, msg: "recv_cq belongs to another context",
			call: createQP(func(f *misuseFixture, ia *verbs.QPInitAttr) { ia.RecvCQ = f.b.cq })},
		misuseRow{name: "destroyed SRQ", errno: inval, msg: "srq is not a live SRQ", call: func(t *testing.T, f *misuseFixture) error {
			s := f.srq(t)
			require.NoError(t, s.Destroy())
			return createQP(func(f *misuseFixture, ia *verbs.QPInitAttr) { ia.SRQ = s })(t, f)
		}},
		misuseRow{name: "SRQ of another context", errno: inval, msg: "srq belongs to another context", call: func(t *testing.T, f *misuseFixture) error {
			pd, err := f.ctx2.AllocPD()
			require.NoError(t, err)
			s, err := pd.CreateSRQ(verbs.SRQAttr{MaxWR: 1})
			require.NoError(t, err)
			return createQP(func(f *misuseFixture, ia *verbs.QPInitAttr) { ia.SRQ = s })(t, f)
		}},
		misuseRow{name: "qp_type unknown", errno: inval, msg: "qp_type QPType(5) unknown",
			call: createQP(func(f *misuseFixture, ia *verbs.QPInitAttr) { ia.Type = verbs.QPType(5) })},
		// rxe_qp_chk_init: a type uverbs knows (IBV_QPT_RAW_PACKET, as
		// rdma-core's tests create) but rxe does not serve.
		misuseRow{name: "qp_type RAW_PACKET", errno: syscall.EOPNOTSUPP, msg: "qp_type QPType(8) not supported (RC, UC or UD)",
			call: createQP(func(f *misuseFixture, ia *verbs.QPInitAttr) { ia.Type = verbs.QPType(8) })},
		misuseRow{name: "max_send_wr 0", errno: inval, msg: "max_send_wr 0 out of range 1..1048576",
			call: createQP(func(f *misuseFixture, ia *verbs.QPInitAttr) { ia.Cap.MaxSendWR = 0 })},
		misuseRow{name: "max_send_wr over the device's", errno: inval, msg: "max_send_wr 1048577 out of range 1..1048576",
			call: createQP(func(f *misuseFixture, ia *verbs.QPInitAttr) { ia.Cap.MaxSendWR = uint32(f.attr.MaxQPWR + 1) })},
		misuseRow{name: "max_recv_wr over the device's", errno: inval, msg: "max_recv_wr 1048577 out of range",
			call: createQP(func(f *misuseFixture, ia *verbs.QPInitAttr) { ia.Cap.MaxRecvWR = uint32(f.attr.MaxQPWR + 1) })},
		misuseRow{name: "max_send_sge over the device's", errno: inval, msg: "max_send_sge 33 over the device maximum 32",
			call: createQP(func(f *misuseFixture, ia *verbs.QPInitAttr) { ia.Cap.MaxSendSGE = uint32(f.attr.MaxSGE + 1) })},
		misuseRow{name: "max_recv_sge over the device's", errno: inval, msg: "max_recv_sge 33 over the device maximum 32",
			call: createQP(func(f *misuseFixture, ia *verbs.QPInitAttr) { ia.Cap.MaxRecvSGE = uint32(f.attr.MaxSGE + 1) })},
		misuseRow{name: "max_inline_data over the device's", errno: inval, msg: "max_inline_data 513 over the device maximum 512",
			call: createQP(func(f *misuseFixture, ia *verbs.QPInitAttr) { ia.Cap.MaxInlineData = uint32(f.attr.MaxInlineData + 1) })},
		misuseRow{name: "closed context", errno: inval, msg: closed, call: func(t *testing.T, f *misuseFixture) error {
			c := f.closed(t)
			_, err := c.pd.CreateQP(verbs.QPInitAttr{SendCQ: c.cq, RecvCQ: c.cq, Type: verbs.QPTypeRC, Cap: cap1})
			return err
		}},
	)

	// modify runs attr/mask (from mk) on a new RC QP in state st.
	modify := func(st verbs.QPState, mk func(f *misuseFixture) (*verbs.QPAttr, verbs.QPAttrMask)) func(t *testing.T, f *misuseFixture) error {
		return func(t *testing.T, f *misuseFixture) error {
			qp := f.rcIn(t, st)
			attr, mask := mk(f)
			return qp.Modify(attr, mask)
		}
	}
	init := func(change func(a *verbs.QPAttr)) func(f *misuseFixture) (*verbs.QPAttr, verbs.QPAttrMask) {
		return func(f *misuseFixture) (*verbs.QPAttr, verbs.QPAttrMask) {
			a, m := resetToInit()
			change(a)
			return a, m
		}
	}
	rtr := func(change func(a *verbs.QPAttr)) func(f *misuseFixture) (*verbs.QPAttr, verbs.QPAttrMask) {
		return func(f *misuseFixture) (*verbs.QPAttr, verbs.QPAttrMask) {
			a, m := f.initToRTR()
			change(a)
			return a, m
		}
	}
	rts := func(change func(a *verbs.QPAttr)) func(f *misuseFixture) (*verbs.QPAttr, verbs.QPAttrMask) {
		return func(f *misuseFixture) (*verbs.QPAttr, verbs.QPAttrMask) {
			a, m := rtrToRTS()
			change(a)
			return a, m
		}
	}
	add("modify_qp",
		misuseRow{name: "nil QP", errno: inval, msg: "qp is nil", call: func(t *testing.T, f *misuseFixture) error {
			var qp *verbs.QP
			a, m := resetToInit()
			return qp.Modify(a, m)
		}},
		misuseRow{name: "destroyed QP", errno: inval, msg: "not a live QP", call: func(t *testing.T, f *misuseFixture) error {
			qp := f.qp(t, verbs.QPTypeRC)
			require.NoError(t, qp.Destroy())
			a, m := resetToInit()
			return qp.Modify(a, m)
		}},
		misuseRow{name: "nil attr", errno: inval, msg: "attr is nil", call: func(t *testing.T, f *misuseFixture) error {
			return f.qp(t, verbs.QPTypeRC).Modify(nil, verbs.QPAttrState)
		}},
		misuseRow{name: "illegal transition RESET->RTS (see TestStateVerbTable, nic TestCheckModify*)", errno: inval, msg: "RESET->RTS: illegal transition",
			call: modify(verbs.QPStateReset, func(f *misuseFixture) (*verbs.QPAttr, verbs.QPAttrMask) { return rtrToRTS() })},
		misuseRow{name: "qp_state not a state", errno: inval, msg: "qp_state 9 is not a QP state",
			call: modify(verbs.QPStateReset, init(func(a *verbs.QPAttr) { a.QPState = 9 }))},
		misuseRow{name: "required attribute missing", errno: inval, msg: "missing required attribute PATH_MTU",
			call: modify(verbs.QPStateInit, func(f *misuseFixture) (*verbs.QPAttr, verbs.QPAttrMask) {
				a, m := f.initToRTR()
				return a, m &^ verbs.QPAttrPathMTU
			})},
		misuseRow{name: "unknown mask bit", errno: inval, msg: "attribute BIT30 not allowed",
			call: modify(verbs.QPStateReset, func(f *misuseFixture) (*verbs.QPAttr, verbs.QPAttrMask) {
				a, m := resetToInit()
				return a, m | 1<<30
			})},
		misuseRow{name: "port_num 0", errno: inval, msg: "port_num 0 out of range 1..1",
			call: modify(verbs.QPStateReset, init(func(a *verbs.QPAttr) { a.PortNum = 0 }))},
		misuseRow{name: "port_num 2", errno: inval, msg: "port_num 2 out of range 1..1",
			call: modify(verbs.QPStateReset, init(func(a *verbs.QPAttr) { a.PortNum = 2 }))},
		misuseRow{name: "pkey_index 1", errno: inval, msg: "pkey_index 1 out of range 0..0",
			call: modify(verbs.QPStateReset, init(func(a *verbs.QPAttr) { a.PKeyIndex = 1 }))},
		misuseRow{name: "qp_access_flags unknown bits", errno: inval, msg: "has undefined bits 0x100",
			call: modify(verbs.QPStateReset, init(func(a *verbs.QPAttr) { a.QPAccessFlags |= 1 << 8 }))},
		misuseRow{name: "path_mtu 0", errno: inval, msg: "path_mtu 0 out of range",
			call: modify(verbs.QPStateInit, rtr(func(a *verbs.QPAttr) { a.PathMTU = 0 }))},
		misuseRow{name: "path_mtu 6", errno: inval, msg: "path_mtu 6 out of range",
			call: modify(verbs.QPStateInit, rtr(func(a *verbs.QPAttr) { a.PathMTU = 6 }))},
		misuseRow{name: "path_mtu over the port's", errno: inval, msg: "path_mtu 4096 bytes over the port's 1024",
			call: modify(verbs.QPStateInit, rtr(func(a *verbs.QPAttr) { a.PathMTU = verbs.MTU4096 }))},
		misuseRow{name: "min_rnr_timer 32", errno: inval, msg: "min_rnr_timer 32 out of range 0..31",
			call: modify(verbs.QPStateInit, rtr(func(a *verbs.QPAttr) { a.MinRNRTimer = 32 }))},
		misuseRow{name: "dest_qp_num over 24 bits", errno: inval, msg: "dest_qp_num 0x1000000 out of range",
			call: modify(verbs.QPStateInit, rtr(func(a *verbs.QPAttr) { a.DestQPNum = 1 << 24 }))},
		misuseRow{name: "rq_psn over 24 bits", errno: inval, msg: "rq_psn 0x1000000 out of range",
			call: modify(verbs.QPStateInit, rtr(func(a *verbs.QPAttr) { a.RQPSN = 1 << 24 }))},
		misuseRow{name: "max_dest_rd_atomic over the device's", errno: inval, msg: "max_dest_rd_atomic 129 out of range 0..128",
			call: modify(verbs.QPStateInit, rtr(func(a *verbs.QPAttr) { a.MaxDestRdAtomic = 129 }))},
		misuseRow{name: "AV not global", errno: inval, msg: "is_global is 0",
			call: modify(verbs.QPStateInit, rtr(func(a *verbs.QPAttr) { a.AHAttr.IsGlobal = false }))},
		misuseRow{name: "AV without dgid", errno: inval, msg: "grh.dgid is not set",
			call: modify(verbs.QPStateInit, rtr(func(a *verbs.QPAttr) { a.AHAttr.GRH.DGID = netip.Addr{} }))},
		misuseRow{name: "AV dgid unknown", errno: inval, msg: "no route to GID 10.9.9.9",
			call: modify(verbs.QPStateInit, rtr(func(a *verbs.QPAttr) { a.AHAttr.GRH.DGID = netip.MustParseAddr("10.9.9.9") }))},
		misuseRow{name: "AV port_num 0", errno: inval, msg: "ah_attr.port_num 0 out of range 1..1",
			call: modify(verbs.QPStateInit, rtr(func(a *verbs.QPAttr) { a.AHAttr.PortNum = 0 }))},
		misuseRow{name: "AV port_num 2", errno: inval, msg: "ah_attr.port_num 2 out of range 1..1",
			call: modify(verbs.QPStateInit, rtr(func(a *verbs.QPAttr) { a.AHAttr.PortNum = 2 }))},
		misuseRow{name: "AV sgid_index past the GID table", errno: inval, msg: "ah_attr.grh.sgid_index 2 out of range 0..1",
			call: modify(verbs.QPStateInit, rtr(func(a *verbs.QPAttr) { a.AHAttr.GRH.SGIDIndex = 2 }))},
		misuseRow{name: "timeout 32", errno: inval, msg: "timeout 32 out of range 0..31",
			call: modify(verbs.QPStateRTR, rts(func(a *verbs.QPAttr) { a.Timeout = 32 }))},
		misuseRow{name: "retry_cnt 8", errno: inval, msg: "retry_cnt 8 out of range 0..7",
			call: modify(verbs.QPStateRTR, rts(func(a *verbs.QPAttr) { a.RetryCnt = 8 }))},
		misuseRow{name: "rnr_retry 8", errno: inval, msg: "rnr_retry 8 out of range 0..7",
			call: modify(verbs.QPStateRTR, rts(func(a *verbs.QPAttr) { a.RNRRetry = 8 }))},
		misuseRow{name: "sq_psn over 24 bits", errno: inval, msg: "sq_psn 0x1000000 out of range",
			call: modify(verbs.QPStateRTR, rts(func(a *verbs.QPAttr) { a.SQPSN = 1 << 24 }))},
		misuseRow{name: "max_rd_atomic over the device's", errno: inval, msg: "max_rd_atomic 129 out of range 0..128",
			call: modify(verbs.QPStateRTR, rts(func(a *verbs.QPAttr) { a.MaxRdAtomic = 129 }))},
		misuseRow{name: "cur_qp_state wrong", errno: inval, msg: "cur_qp_state INIT does not match the QP's state RTR",
			call: modify(verbs.QPStateRTR, func(f *misuseFixture) (*verbs.QPAttr, verbs.QPAttrMask) {
				a, m := rtrToRTS()
				a.CurQPState = verbs.QPStateInit
				return a, m | verbs.QPAttrCurState
			})},
		misuseRow{name: "closed context", errno: inval, msg: closed, call: func(t *testing.T, f *misuseFixture) error {
			a, m := resetToInit()
			return f.closed(t).qp.Modify(a, m)
		}},
	)
	add("destroy_qp",
		misuseRow{name: "nil QP", errno: inval, msg: "qp is nil", call: func(t *testing.T, f *misuseFixture) error {
			var qp *verbs.QP
			return qp.Destroy()
		}},
		misuseRow{name: "destroyed twice", errno: inval, msg: "not a live QP", call: func(t *testing.T, f *misuseFixture) error {
			require.NoError(t, f.a.qp.Destroy())
			return f.a.qp.Destroy()
		}},
		misuseRow{name: "closed context", errno: inval, msg: closed, call: func(t *testing.T, f *misuseFixture) error {
			return f.closed(t).qp.Destroy()
		}},
	)

	add("post_send",
		misuseRow{name: "nil QP", errno: inval, msg: "qp is nil", call: func(t *testing.T, f *misuseFixture) error {
			var qp *verbs.QP
			return postErr(t, 0)(qp.PostSend([]verbs.SendWR{f.send(1)}))
		}},
		misuseRow{name: "destroyed QP", errno: inval, msg: "not a live QP", call: func(t *testing.T, f *misuseFixture) error {
			require.NoError(t, f.a.qp.Destroy())
			return postErr(t, 0)(f.a.qp.PostSend([]verbs.SendWR{f.send(1)}))
		}},
		misuseRow{name: "nil WR list is a no-op", call: func(t *testing.T, f *misuseFixture) error {
			i, err := f.a.qp.PostSend(nil)
			assert.Zero(t, i)
			return err
		}},
		misuseRow{name: "QP in RESET (see TestStateVerbTable)", errno: inval, msg: "is in RESET; sends may be posted from RTS on", call: func(t *testing.T, f *misuseFixture) error {
			return postErr(t, 0)(f.qp(t, verbs.QPTypeRC).PostSend([]verbs.SendWR{f.send(1)}))
		}},
		misuseRow{name: "num_sge over max_send_sge", errno: inval, msg: "num_sge 2 over the QP's max_send_sge 1", call: func(t *testing.T, f *misuseFixture) error {
			wr := f.send(2)
			wr.SGList = append(wr.SGList, f.a.mr.SGE(8, 8))
			return postErr(t, 1)(f.a.qp.PostSend([]verbs.SendWR{f.send(1), wr}))
		}},
		// max_send_sge 1 and no inline data ask for a 16-byte send WQE:
		// rxe gives the QP max_inline_data 16 (nic's rxeQPCaps).
		misuseRow{name: "inline over max_inline_data", errno: inval, msg: "inline data of 24 bytes over the QP's max_inline_data 16", call: func(t *testing.T, f *misuseFixture) error {
			wr := f.send(1)
			wr.SGList = []verbs.SGE{f.a.mr.SGE(0, 24)}
			wr.Flags |= verbs.SendInline
			return postErr(t, 0)(f.a.qp.PostSend([]verbs.SendWR{wr}))
		}},
		misuseRow{name: "inline flag on a READ over max_inline_data", errno: inval, msg: "inline data of 24 bytes over the QP's max_inline_data 16", call: func(t *testing.T, f *misuseFixture) error {
			wr := f.send(1)
			wr.SGList = []verbs.SGE{f.a.mr.SGE(0, 24)}
			wr.Opcode, wr.RemoteAddr, wr.RKey = verbs.WRRDMARead, f.b.mr.Addr, f.b.mr.RKey
			wr.Flags |= verbs.SendInline
			return postErr(t, 0)(f.a.qp.PostSend([]verbs.SendWR{wr}))
		}},
		// max_send_wr 16 gets a queue of 31, as on rxe (rxeQPCaps).
		misuseRow{name: "more WRs than the queue holds", errno: nomem, msg: "send queue full (31 WRs outstanding, max_send_wr 31)", call: func(t *testing.T, f *misuseFixture) error {
			wrs := make([]verbs.SendWR, 32)
			for i := range wrs {
				wrs[i] = f.send(uint64(i))
			}
			return postErr(t, 31)(f.a.qp.PostSend(wrs))
		}},
		misuseRow{name: "opcode undefined", errno: inval, msg: "is not valid on a RC QP", call: func(t *testing.T, f *misuseFixture) error {
			wr := f.send(1)
			wr.Opcode = verbs.WROpcode(99)
			return postErr(t, 0)(f.a.qp.PostSend([]verbs.SendWR{wr}))
		}},
		misuseRow{name: "RDMA READ on UC", errno: inval, msg: "opcode IBV_WR_RDMA_READ is not valid on a UC QP", call: func(t *testing.T, f *misuseFixture) error {
			wr := f.send(1)
			wr.Opcode = verbs.WRRDMARead
			return postErr(t, 0)(f.uc(t).PostSend([]verbs.SendWR{wr}))
		}},
		misuseRow{name: "atomic on UC", errno: inval, msg: "opcode IBV_WR_ATOMIC_FETCH_AND_ADD is not valid on a UC QP", call: func(t *testing.T, f *misuseFixture) error {
			wr := f.send(1)
			wr.Opcode = verbs.WRAtomicFetchAndAdd
			return postErr(t, 0)(f.uc(t).PostSend([]verbs.SendWR{wr}))
		}},
		misuseRow{name: "RDMA READ on UD", errno: inval, msg: "opcode IBV_WR_RDMA_READ is not valid on a UD QP", call: func(t *testing.T, f *misuseFixture) error {
			wr := f.udSend(f.ah(t, f.a.pd))
			wr.Opcode = verbs.WRRDMARead
			return postErr(t, 0)(f.ud(t).PostSend([]verbs.SendWR{wr}))
		}},
		misuseRow{name: "RDMA WRITE on UD", errno: inval, msg: "opcode IBV_WR_RDMA_WRITE is not valid on a UD QP", call: func(t *testing.T, f *misuseFixture) error {
			wr := f.udSend(f.ah(t, f.a.pd))
			wr.Opcode = verbs.WRRDMAWrite
			return postErr(t, 0)(f.ud(t).PostSend([]verbs.SendWR{wr}))
		}},
		misuseRow{name: "UD without AH", errno: inval, msg: "a UD send needs wr.ah", call: func(t *testing.T, f *misuseFixture) error {
			return postErr(t, 0)(f.ud(t).PostSend([]verbs.SendWR{f.udSend(nil)}))
		}},
		misuseRow{name: "UD with a destroyed AH", errno: inval, msg: "a UD send needs wr.ah", call: func(t *testing.T, f *misuseFixture) error {
			ah := f.ah(t, f.a.pd)
			require.NoError(t, ah.Destroy())
			return postErr(t, 0)(f.ud(t).PostSend([]verbs.SendWR{f.udSend(ah)}))
		}},
		misuseRow{name: "UD with an AH of another PD", errno: inval, msg: "wr.ah is not in the QP's PD", call: func(t *testing.T, f *misuseFixture) error {
			return postErr(t, 0)(f.ud(t).PostSend([]verbs.SendWR{f.udSend(f.ah(t, f.pd2))}))
		}},
		misuseRow{name: "UD with an AH of another context", errno: inval, msg: "wr.ah belongs to another context", call: func(t *testing.T, f *misuseFixture) error {
			pd, err := f.ctx2.AllocPD()
			require.NoError(t, err)
			qp := f.ud(t)
			return postErr(t, 1)(qp.PostSend([]verbs.SendWR{f.udSend(f.ah(t, f.a.pd)), f.udSend(f.ah(t, pd))}))
		}},
		misuseRow{name: "atomic remote_addr unaligned", errno: inval, msg: "atomic remote_addr 0x1004 is not 8-byte aligned", call: func(t *testing.T, f *misuseFixture) error {
			wr := f.send(1)
			wr.Opcode, wr.RemoteAddr, wr.RKey = verbs.WRAtomicCmpAndSwp, 0x1004, f.b.mr.RKey
			return postErr(t, 0)(f.a.qp.PostSend([]verbs.SendWR{wr}))
		}},
		misuseRow{name: "atomic into 4 bytes", errno: inval, msg: "atomic sg_list holds 4 bytes; the original value needs 8", call: func(t *testing.T, f *misuseFixture) error {
			wr := f.send(1)
			wr.Opcode, wr.RemoteAddr, wr.RKey = verbs.WRAtomicFetchAndAdd, f.b.mr.Addr, f.b.mr.RKey
			wr.SGList = []verbs.SGE{f.a.mr.SGE(0, 4)}
			return postErr(t, 0)(f.a.qp.PostSend([]verbs.SendWR{wr}))
		}},
		misuseRow{name: "closed context", errno: inval, msg: closed, call: func(t *testing.T, f *misuseFixture) error {
			return postErr(t, 0)(f.closed(t).qp.PostSend([]verbs.SendWR{f.send(1)}))
		}},
	)
	add("post_recv",
		misuseRow{name: "nil QP", errno: inval, msg: "qp is nil", call: func(t *testing.T, f *misuseFixture) error {
			var qp *verbs.QP
			return postErr(t, 0)(qp.PostRecv([]verbs.RecvWR{recvWR(1, f.a)}))
		}},
		misuseRow{name: "destroyed QP", errno: inval, msg: "not a live QP", call: func(t *testing.T, f *misuseFixture) error {
			require.NoError(t, f.a.qp.Destroy())
			return postErr(t, 0)(f.a.qp.PostRecv([]verbs.RecvWR{recvWR(1, f.a)}))
		}},
		misuseRow{name: "nil WR list is a no-op", call: func(t *testing.T, f *misuseFixture) error {
			_, err := f.a.qp.PostRecv(nil)
			return err
		}},
		misuseRow{name: "QP in RESET (see TestStateVerbTable)", errno: inval, msg: "is in RESET; receives may be posted from INIT on", call: func(t *testing.T, f *misuseFixture) error {
			return postErr(t, 0)(f.qp(t, verbs.QPTypeRC).PostRecv([]verbs.RecvWR{recvWR(1, f.a)}))
		}},
		misuseRow{name: "num_sge over max_recv_sge", errno: inval, msg: "num_sge 2 over the QP's max_recv_sge 1", call: func(t *testing.T, f *misuseFixture) error {
			wr := recvWR(1, f.a)
			wr.SGList = append(wr.SGList, f.a.mr.SGE(0, 8))
			return postErr(t, 0)(f.a.qp.PostRecv([]verbs.RecvWR{wr}))
		}},
		misuseRow{name: "more WRs than the queue holds", errno: nomem, msg: "receive queue full (31 WRs outstanding, max_recv_wr 31)", call: func(t *testing.T, f *misuseFixture) error {
			wrs := make([]verbs.RecvWR, 32)
			for i := range wrs {
				wrs[i] = recvWR(uint64(i), f.a)
			}
			return postErr(t, 31)(f.a.qp.PostRecv(wrs))
		}},
		misuseRow{name: "QP on an SRQ", errno: inval, msg: "receives from an SRQ; post to the SRQ", call: func(t *testing.T, f *misuseFixture) error {
			qp, err := f.a.pd.CreateQP(verbs.QPInitAttr{SendCQ: f.a.cq, RecvCQ: f.a.cq, SRQ: f.srq(t), Type: verbs.QPTypeRC, Cap: cap1})
			require.NoError(t, err)
			return postErr(t, 0)(qp.PostRecv([]verbs.RecvWR{recvWR(1, f.a)}))
		}},
		misuseRow{name: "closed context", errno: inval, msg: closed, call: func(t *testing.T, f *misuseFixture) error {
			return postErr(t, 0)(f.closed(t).qp.PostRecv(nil))
		}},
	)

	add("create_srq",
		misuseRow{name: "nil PD", errno: inval, msg: "pd is nil", call: func(t *testing.T, f *misuseFixture) error {
			var p *verbs.PD
			_, err := p.CreateSRQ(verbs.SRQAttr{MaxWR: 1})
			return err
		}},
		misuseRow{name: "deallocated PD", errno: inval, msg: "not a live PD", call: func(t *testing.T, f *misuseFixture) error {
			require.NoError(t, f.pd2.Dealloc())
			_, err := f.pd2.CreateSRQ(verbs.SRQAttr{MaxWR: 1})
			return err
		}},
		misuseRow{name: "max_wr 0", errno: inval, msg: "max_wr 0 out of range 1..1048576", call: func(t *testing.T, f *misuseFixture) error {
			_, err := f.a.pd.CreateSRQ(verbs.SRQAttr{})
			return err
		}},
		misuseRow{name: "max_wr over the device's", errno: inval, msg: "max_wr 1048577 out of range 1..1048576", call: func(t *testing.T, f *misuseFixture) error {
			_, err := f.a.pd.CreateSRQ(verbs.SRQAttr{MaxWR: uint32(f.attr.MaxSRQWR + 1)})
			return err
		}},
		misuseRow{name: "max_sge over the device's", errno: inval, msg: "max_sge 28 over the device maximum 27", call: func(t *testing.T, f *misuseFixture) error {
			_, err := f.a.pd.CreateSRQ(verbs.SRQAttr{MaxWR: 1, MaxSGE: uint32(f.attr.MaxSRQSGE + 1)})
			return err
		}},
		misuseRow{name: "srq_limit over max_wr", errno: inval, msg: "srq_limit 5 over max_wr 4", call: func(t *testing.T, f *misuseFixture) error {
			_, err := f.a.pd.CreateSRQ(verbs.SRQAttr{MaxWR: 4, SRQLimit: 5})
			return err
		}},
		misuseRow{name: "closed context", errno: inval, msg: closed, call: func(t *testing.T, f *misuseFixture) error {
			_, err := f.closed(t).pd.CreateSRQ(verbs.SRQAttr{MaxWR: 1})
			return err
		}},
	)
	add("modify_srq",
		misuseRow{name: "nil SRQ", errno: inval, msg: "srq is nil", call: func(t *testing.T, f *misuseFixture) error {
			var s *verbs.SRQ
			return s.Modify(verbs.SRQAttr{SRQLimit: 1}, verbs.SRQAttrLimit)
		}},
		misuseRow{name: "destroyed SRQ", errno: inval, msg: "not a live SRQ", call: func(t *testing.T, f *misuseFixture) error {
			s := f.srq(t)
			require.NoError(t, s.Destroy())
			return s.Modify(verbs.SRQAttr{SRQLimit: 1}, verbs.SRQAttrLimit)
		}},
		misuseRow{name: "unknown mask bits", errno: inval, msg: "unknown attribute mask bits 0x4", call: func(t *testing.T, f *misuseFixture) error {
			return f.srq(t).Modify(verbs.SRQAttr{}, 1<<2)
		}},
		misuseRow{name: "max_wr 0", errno: inval, msg: "max_wr 0 below the 0 WRs queued or out of range", call: func(t *testing.T, f *misuseFixture) error {
			return f.srq(t).Modify(verbs.SRQAttr{}, verbs.SRQAttrMaxWR)
		}},
		misuseRow{name: "max_wr over the device's", errno: inval, msg: "max_wr 1048577 below the 0 WRs queued or out of range", call: func(t *testing.T, f *misuseFixture) error {
			return f.srq(t).Modify(verbs.SRQAttr{MaxWR: uint32(f.attr.MaxSRQWR + 1)}, verbs.SRQAttrMaxWR)
		}},
		misuseRow{name: "max_wr below the WRs queued", errno: inval, msg: "max_wr 1 below the 2 WRs queued", call: func(t *testing.T, f *misuseFixture) error {
			s := f.srq(t)
			_, err := s.PostRecv([]verbs.RecvWR{recvWR(1, f.a), recvWR(2, f.a)})
			require.NoError(t, err)
			return s.Modify(verbs.SRQAttr{MaxWR: 1}, verbs.SRQAttrMaxWR)
		}},
		// max_wr 4 holds 7, as on rxe (ibv_query_srq): the limit may be
		// up to that.
		misuseRow{name: "srq_limit over max_wr", errno: inval, msg: "srq_limit 8 over max_wr 7", call: func(t *testing.T, f *misuseFixture) error {
			return f.srq(t).Modify(verbs.SRQAttr{SRQLimit: 8}, verbs.SRQAttrLimit)
		}},
		misuseRow{name: "closed context", errno: inval, msg: closed, call: func(t *testing.T, f *misuseFixture) error {
			return f.closed(t).srq.Modify(verbs.SRQAttr{SRQLimit: 1}, verbs.SRQAttrLimit)
		}},
	)
	add("query_srq",
		misuseRow{name: "nil SRQ", errno: inval, msg: "srq is nil", call: func(t *testing.T, f *misuseFixture) error {
			var s *verbs.SRQ
			_, err := s.Query()
			return err
		}},
		misuseRow{name: "destroyed SRQ", errno: inval, msg: "the SRQ is destroyed", call: func(t *testing.T, f *misuseFixture) error {
			s := f.srq(t)
			require.NoError(t, s.Destroy())
			_, err := s.Query()
			return err
		}},
		misuseRow{name: "closed context", errno: inval, msg: closed, call: func(t *testing.T, f *misuseFixture) error {
			_, err := f.closed(t).srq.Query()
			return err
		}},
	)
	add("post_srq_recv",
		misuseRow{name: "nil SRQ", errno: inval, msg: "srq is nil", call: func(t *testing.T, f *misuseFixture) error {
			var s *verbs.SRQ
			return postErr(t, 0)(s.PostRecv([]verbs.RecvWR{recvWR(1, f.a)}))
		}},
		misuseRow{name: "destroyed SRQ", errno: inval, msg: "not a live SRQ", call: func(t *testing.T, f *misuseFixture) error {
			s := f.srq(t)
			require.NoError(t, s.Destroy())
			return postErr(t, 0)(s.PostRecv([]verbs.RecvWR{recvWR(1, f.a)}))
		}},
		misuseRow{name: "num_sge over max_sge", errno: inval, msg: "num_sge 2 over the SRQ's max_sge 1", call: func(t *testing.T, f *misuseFixture) error {
			wr := recvWR(1, f.a)
			wr.SGList = append(wr.SGList, f.a.mr.SGE(0, 8))
			return postErr(t, 0)(f.srq(t).PostRecv([]verbs.RecvWR{wr}))
		}},
		misuseRow{name: "more WRs than the SRQ holds", errno: nomem, msg: "SRQ full (7 WRs)", call: func(t *testing.T, f *misuseFixture) error {
			wrs := make([]verbs.RecvWR, 8)
			for i := range wrs {
				wrs[i] = recvWR(uint64(i), f.a)
			}
			return postErr(t, 7)(f.srq(t).PostRecv(wrs))
		}},
		misuseRow{name: "closed context", errno: inval, msg: closed, call: func(t *testing.T, f *misuseFixture) error {
			return postErr(t, 0)(f.closed(t).srq.PostRecv(nil))
		}},
	)
	add("destroy_srq",
		misuseRow{name: "nil SRQ", errno: inval, msg: "srq is nil", call: func(t *testing.T, f *misuseFixture) error {
			var s *verbs.SRQ
			return s.Destroy()
		}},
		misuseRow{name: "destroyed twice", errno: inval, msg: "not a live SRQ", call: func(t *testing.T, f *misuseFixture) error {
			s := f.srq(t)
			require.NoError(t, s.Destroy())
			return s.Destroy()
		}},
		misuseRow{name: "QP uses it", errno: busy, msg: "1 QPs still use the SRQ", call: func(t *testing.T, f *misuseFixture) error {
			s := f.srq(t)
			_, err := f.a.pd.CreateQP(verbs.QPInitAttr{SendCQ: f.a.cq, RecvCQ: f.a.cq, SRQ: s, Type: verbs.QPTypeRC, Cap: cap1})
			require.NoError(t, err)
			return s.Destroy()
		}},
		misuseRow{name: "closed context", errno: inval, msg: closed, call: func(t *testing.T, f *misuseFixture) error {
			return f.closed(t).srq.Destroy()
		}},
	)

	createAH := func(change func(f *misuseFixture, a *verbs.AHAttr)) func(t *testing.T, f *misuseFixture) error {
		return func(t *testing.T, f *misuseFixture) error {
			a := verbs.AHAttr{IsGlobal: true, PortNum: 1, GRH: verbs.GRH{DGID: f.gid, SGIDIndex: 1}}
			change(f, &a)
			_, err := f.a.pd.CreateAH(a)
			return err
		}
	}
	add("create_ah",
		misuseRow{name: "nil PD", errno: inval, msg: "pd is nil", call: func(t *testing.T, f *misuseFixture) error {
			var p *verbs.PD
			_, err := p.CreateAH(verbs.AHAttr{IsGlobal: true, PortNum: 1, GRH: verbs.GRH{DGID: f.gid}})
			return err
		}},
		misuseRow{name: "deallocated PD", errno: inval, msg: "not a live PD", call: func(t *testing.T, f *misuseFixture) error {
			require.NoError(t, f.pd2.Dealloc())
			_, err := f.pd2.CreateAH(verbs.AHAttr{IsGlobal: true, PortNum: 1, GRH: verbs.GRH{DGID: f.gid}})
			return err
		}},
		misuseRow{name: "not global", errno: inval, msg: "RoCE needs is_global and grh.dgid",
			call: createAH(func(f *misuseFixture, a *verbs.AHAttr) { a.IsGlobal = false })},
		misuseRow{name: "no dgid", errno: inval, msg: "RoCE needs is_global and grh.dgid",
			call: createAH(func(f *misuseFixture, a *verbs.AHAttr) { a.GRH.DGID = netip.Addr{} })},
		misuseRow{name: "dgid unknown", errno: inval, msg: "no route to GID fd00::99",
			call: createAH(func(f *misuseFixture, a *verbs.AHAttr) { a.GRH.DGID = netip.MustParseAddr("fd00::99") })},
		misuseRow{name: "port_num 0", errno: inval, msg: "ah_attr.port_num 0 out of range 1..1",
			call: createAH(func(f *misuseFixture, a *verbs.AHAttr) { a.PortNum = 0 })},
		misuseRow{name: "port_num 2", errno: inval, msg: "ah_attr.port_num 2 out of range 1..1",
			call: createAH(func(f *misuseFixture, a *verbs.AHAttr) { a.PortNum = 2 })},
		misuseRow{name: "sgid_index past the GID table", errno: inval, msg: "ah_attr.grh.sgid_index 2 out of range 0..1",
			call: createAH(func(f *misuseFixture, a *verbs.AHAttr) { a.GRH.SGIDIndex = 2 })},
		misuseRow{name: "closed context", errno: inval, msg: closed, call: func(t *testing.T, f *misuseFixture) error {
			_, err := f.closed(t).pd.CreateAH(verbs.AHAttr{IsGlobal: true, PortNum: 1, GRH: verbs.GRH{DGID: f.gid}})
			return err
		}},
	)
	add("destroy_ah",
		misuseRow{name: "nil AH", errno: inval, msg: "ah is nil", call: func(t *testing.T, f *misuseFixture) error {
			var a *verbs.AH
			return a.Destroy()
		}},
		misuseRow{name: "destroyed twice", errno: inval, msg: "not a live AH", call: func(t *testing.T, f *misuseFixture) error {
			ah := f.ah(t, f.a.pd)
			require.NoError(t, ah.Destroy())
			return ah.Destroy()
		}},
		misuseRow{name: "closed context", errno: inval, msg: closed, call: func(t *testing.T, f *misuseFixture) error {
			return f.closed(t).ah.Destroy()
		}},
	)
	mwRows(add)
	return rows
}

// mwRows lists the misuses of the memory window verbs and of the send
// opcodes that act on windows (issue 14, item 7).
func mwRows(add func(string, ...misuseRow)) {
	const inval, perm = syscall.EINVAL, syscall.EPERM
	bindable := func(t *testing.T, f *misuseFixture) *verbs.MR {
		mr, err := f.a.pd.RegMR(make([]byte, 4096), verbs.AccessLocalWrite|verbs.AccessMWBind)
		require.NoError(t, err)
		return mr
	}
	alloc := func(t *testing.T, pd *verbs.PD, typ verbs.MWType) *verbs.MW {
		mw, err := pd.AllocMW(typ)
		require.NoError(t, err)
		return mw
	}
	add("alloc_mw",
		misuseRow{name: "nil PD", errno: inval, msg: "pd is nil", call: func(t *testing.T, f *misuseFixture) error {
			var p *verbs.PD
			_, err := p.AllocMW(verbs.MWType2)
			return err
		}},
		misuseRow{name: "deallocated PD", errno: inval, msg: "pd is not a live PD", call: func(t *testing.T, f *misuseFixture) error {
			require.NoError(t, f.pd2.Dealloc())
			_, err := f.pd2.AllocMW(verbs.MWType2)
			return err
		}},
		misuseRow{name: "type 3", errno: inval, msg: "type 3 is neither IBV_MW_TYPE_1 nor IBV_MW_TYPE_2", call: func(t *testing.T, f *misuseFixture) error {
			_, err := f.a.pd.AllocMW(3)
			return err
		}},
		misuseRow{name: "closed context", errno: inval, msg: "context is closed", call: func(t *testing.T, f *misuseFixture) error {
			_, err := f.closed(t).pd.AllocMW(verbs.MWType1)
			return err
		}},
	)
	add("dealloc_mw",
		misuseRow{name: "nil MW", errno: inval, msg: "mw is nil", call: func(t *testing.T, f *misuseFixture) error {
			var m *verbs.MW
			return m.Dealloc()
		}},
		misuseRow{name: "deallocated twice", errno: inval, msg: "is not allocated on this device", call: func(t *testing.T, f *misuseFixture) error {
			mw := alloc(t, f.a.pd, verbs.MWType2)
			require.NoError(t, mw.Dealloc())
			return mw.Dealloc()
		}},
	)
	add("dealloc_pd",
		misuseRow{name: "a window is allocated in it", errno: syscall.EBUSY, msg: "still use the PD", call: func(t *testing.T, f *misuseFixture) error {
			alloc(t, f.pd2, verbs.MWType1)
			return f.pd2.Dealloc()
		}},
	)
	add("bind_mw",
		misuseRow{name: "nil QP", errno: inval, msg: "qp is nil", call: func(t *testing.T, f *misuseFixture) error {
			var q *verbs.QP
			return q.BindMW(alloc(t, f.a.pd, verbs.MWType1), verbs.MWBind{})
		}},
		misuseRow{name: "nil MW", errno: inval, msg: "mw is nil", call: func(t *testing.T, f *misuseFixture) error {
			return f.a.qp.BindMW(nil, verbs.MWBind{})
		}},
		misuseRow{name: "type 2 window", errno: inval, msg: "type 2 window; post an IBV_WR_BIND_MW", call: func(t *testing.T, f *misuseFixture) error {
			mr := bindable(t, f)
			return f.a.qp.BindMW(alloc(t, f.a.pd, verbs.MWType2), verbs.MWBind{BindInfo: verbs.BindInfo{MR: mr, Addr: mr.Addr, Length: 8}})
		}},
		misuseRow{name: "length without MR", errno: inval, msg: "bind_info.mr is nil but addr or length is set", call: func(t *testing.T, f *misuseFixture) error {
			return f.a.qp.BindMW(alloc(t, f.a.pd, verbs.MWType1), verbs.MWBind{BindInfo: verbs.BindInfo{Length: 8}})
		}},
		misuseRow{name: "zero based", errno: inval, msg: "cannot be ZERO_BASED", call: func(t *testing.T, f *misuseFixture) error {
			mr := bindable(t, f)
			return f.a.qp.BindMW(alloc(t, f.a.pd, verbs.MWType1), verbs.MWBind{BindInfo: verbs.BindInfo{MR: mr, Length: 8,
				Access: verbs.AccessRemoteRead | verbs.AccessZeroBased}})
		}},
		misuseRow{name: "MR of another PD", errno: perm, msg: "bind_info.mr is in another PD", call: func(t *testing.T, f *misuseFixture) error {
			mr := bindable(t, f)
			return f.a.qp.BindMW(alloc(t, f.pd2, verbs.MWType1), verbs.MWBind{BindInfo: verbs.BindInfo{MR: mr, Addr: mr.Addr, Length: 8}})
		}},
		misuseRow{name: "MW of another context", errno: inval, msg: "mw belongs to another context", call: func(t *testing.T, f *misuseFixture) error {
			pd, err := f.ctx2.AllocPD()
			require.NoError(t, err)
			return f.a.qp.BindMW(alloc(t, pd, verbs.MWType1), verbs.MWBind{})
		}},
		misuseRow{name: "deallocated MW", errno: inval, msg: "mw is not a live memory window", call: func(t *testing.T, f *misuseFixture) error {
			mw := alloc(t, f.a.pd, verbs.MWType1)
			require.NoError(t, mw.Dealloc())
			return f.a.qp.BindMW(mw, verbs.MWBind{})
		}},
		misuseRow{name: "closed context", errno: inval, msg: "context is closed", call: func(t *testing.T, f *misuseFixture) error {
			c := f.closed(t)
			return c.qp.BindMW(&verbs.MW{}, verbs.MWBind{})
		}},
	)
	add("post_send",
		misuseRow{name: "BIND_MW without a window", errno: inval, msg: "wr.bind_mw.mw is not a live memory window", call: func(t *testing.T, f *misuseFixture) error {
			return postErr(t, 1)(f.a.qp.PostSend([]verbs.SendWR{f.send(1), {Opcode: verbs.WRBindMW}}))
		}},
		misuseRow{name: "BIND_MW on UD", errno: inval, msg: "opcode IBV_WR_BIND_MW is not valid on a UD QP", call: func(t *testing.T, f *misuseFixture) error {
			return postErr(t, 0)(f.ud(t).PostSend([]verbs.SendWR{{Opcode: verbs.WRBindMW, BindMW: verbs.BindMWWR{MW: alloc(t, f.a.pd, verbs.MWType2)}}}))
		}},
		misuseRow{name: "LOCAL_INV on UC", errno: inval, msg: "opcode IBV_WR_LOCAL_INV is not valid on a UC QP", call: func(t *testing.T, f *misuseFixture) error {
			return postErr(t, 0)(f.uc(t).PostSend([]verbs.SendWR{{Opcode: verbs.WRLocalInv}}))
		}},
		misuseRow{name: "SEND_WITH_INV on UD", errno: inval, msg: "opcode IBV_WR_SEND_WITH_INV is not valid on a UD QP", call: func(t *testing.T, f *misuseFixture) error {
			wr := f.udSend(f.ah(t, f.a.pd))
			wr.Opcode = verbs.WRSendWithInv
			return postErr(t, 0)(f.ud(t).PostSend([]verbs.SendWR{wr}))
		}},
		misuseRow{name: "BIND_MW window of another context", errno: inval, msg: "wr.bind_mw.mw belongs to another context", call: func(t *testing.T, f *misuseFixture) error {
			pd, err := f.ctx2.AllocPD()
			require.NoError(t, err)
			return postErr(t, 0)(f.a.qp.PostSend([]verbs.SendWR{{Opcode: verbs.WRBindMW, BindMW: verbs.BindMWWR{MW: alloc(t, pd, verbs.MWType2)}}}))
		}},
	)
	add("rereg_mr",
		misuseRow{name: "nil MR", errno: inval, msg: "mr is nil", call: func(t *testing.T, f *misuseFixture) error {
			var m *verbs.MR
			return m.Rereg(verbs.ReregChangeAccess, nil, nil, 0)
		}},
		misuseRow{name: "deregistered MR", errno: inval, msg: "is deregistered", call: func(t *testing.T, f *misuseFixture) error {
			require.NoError(t, f.a.mr.Dereg())
			return f.a.mr.Rereg(verbs.ReregChangeAccess, nil, nil, verbs.AccessLocalWrite)
		}},
		misuseRow{name: "unknown flag", errno: inval, msg: "IBV_REREG_MR_ERR_INPUT: flags has unknown bits 0x8", call: func(t *testing.T, f *misuseFixture) error {
			return f.a.mr.Rereg(8, nil, nil, 0)
		}},
		misuseRow{name: "translation without a buffer", errno: inval, msg: "CHANGE_TRANSLATION needs addr and length", call: func(t *testing.T, f *misuseFixture) error {
			return f.a.mr.Rereg(verbs.ReregChangeTranslation, nil, nil, 0)
		}},
		misuseRow{name: "rxe 6.1 does not support it", errno: syscall.EOPNOTSUPP, msg: "IBV_REREG_MR_ERR_CMD", call: func(t *testing.T, f *misuseFixture) error {
			return f.a.mr.Rereg(verbs.ReregChangeAccess, nil, nil, verbs.AccessLocalWrite)
		}},
		misuseRow{name: "PD of another context", errno: inval, msg: "pd belongs to another context", call: func(t *testing.T, f *misuseFixture) error {
			pd, err := f.ctx2.AllocPD()
			require.NoError(t, err)
			return f.a.mr.Rereg(verbs.ReregChangePD, pd, nil, 0)
		}},
		misuseRow{name: "closed context", errno: inval, msg: "context is closed", call: func(t *testing.T, f *misuseFixture) error {
			return f.closed(t).mr.Rereg(verbs.ReregChangeAccess, nil, nil, 0)
		}},
	)
	add("dereg_mr",
		misuseRow{name: "a window is bound to it", errno: inval, msg: "has 1 memory windows bound", call: func(t *testing.T, f *misuseFixture) error {
			mr := bindable(t, f)
			mw := alloc(t, f.a.pd, verbs.MWType1)
			require.NoError(t, f.a.qp.BindMW(mw, verbs.MWBind{BindInfo: verbs.BindInfo{MR: mr, Addr: mr.Addr, Length: 8, Access: verbs.AccessRemoteRead}}))
			f.w.Run()
			return mr.Dereg()
		}},
	)
}

// callSafely runs call and turns a panic into a test failure naming row.
func callSafely(t *testing.T, row string, call func() error) (err error, panicked bool) {
	t.Helper()
	defer func() {
		if p := recover(); p != nil {
			t.Errorf("%s: panicked: %v", row, p)
			panicked = true
		}
	}()
	return call(), false
}

// TestVerbsMisuse runs every misuse row on a fresh world: no panic, the
// errno a libibverbs user expects, a message that names the fault.
func TestVerbsMisuse(t *testing.T) {
	rows := misuseRows()
	perVerb := map[string]int{}
	for _, r := range rows {
		perVerb[r.verb]++
		t.Run(r.verb+"/"+r.name, func(t *testing.T) {
			f := newMisuseFixture(t)
			err, panicked := callSafely(t, r.verb+"/"+r.name, func() error { return r.call(t, f) })
			if panicked {
				return
			}
			if r.errno == 0 {
				assert.NoError(t, err)
				return
			}
			require.Error(t, err, "the misuse must be refused")
			assert.True(t, errors.Is(err, r.errno), "want %v, got %v", r.errno, err)
			var ne *nic.Error
			assert.True(t, errors.As(err, &ne), "a *nic.Error: %T", err)
			assert.Contains(t, err.Error(), r.msg)
			assert.True(t, strings.HasPrefix(err.Error(), r.verb+":") || strings.HasPrefix(err.Error(), r.verb+" "),
				"the message starts with the verb %q: %v", r.verb, err)
		})
	}
	verbsSeen := make([]string, 0, len(perVerb))
	for v := range perVerb {
		verbsSeen = append(verbsSeen, v)
	}
	sort.Strings(verbsSeen)
	var b strings.Builder
	for _, v := range verbsSeen {
		fmt.Fprintf(&b, " %s=%d", v, perVerb[v])
	}
	t.Logf("%d misuse rows:%s", len(rows), b.String())
}

// TestVerbsMisuseNoErrorReturn: the verbs whose libibverbs form returns
// nothing useful to check here (poll, ack, get events, the accessors) do
// not panic on nil or closed objects either, and report nothing.
func TestVerbsMisuseNoErrorReturn(t *testing.T) {
	f := newMisuseFixture(t)
	c := f.closed(t)
	var (
		ctx *verbs.Context
		cq  *verbs.CQ
		ch  *verbs.CompChannel
		qp  *verbs.QP
		mr  *verbs.MR
	)
	checks := []struct {
		name string
		call func()
	}{
		{"query_device nil context", func() { assert.Equal(t, verbs.DeviceAttr{}, ctx.QueryDevice()) }},
		{"get_async_event nil context", func() { _, ok := ctx.GetAsyncEvent(); assert.False(t, ok) }},
		{"get_async_event closed context", func() { _, ok := c.ctx.GetAsyncEvent(); assert.False(t, ok) }},
		{"create_comp_channel nil context", func() { assert.Nil(t, ctx.CreateCompChannel()) }},
		{"create_comp_channel closed context", func() { assert.Nil(t, c.ctx.CreateCompChannel()) }},
		{"get_cq_event nil channel", func() { _, ok := ch.GetCQEvent(); assert.False(t, ok) }},
		{"get_cq_event closed context", func() { _, ok := c.ch.GetCQEvent(); assert.False(t, ok) }},
		{"poll_cq nil CQ", func() { assert.Zero(t, cq.Poll(make([]verbs.WC, 4))) }},
		{"poll_cq closed context", func() { assert.Zero(t, c.cq.Poll(make([]verbs.WC, 4))) }},
		{"poll_cq nil slice", func() { assert.Zero(t, f.a.cq.Poll(nil)) }},
		{"ack_cq_events nil CQ", func() { cq.AckEvents(1) }},
		{"ack_cq_events negative", func() { f.a.cq.AckEvents(-5) }},
		{"cqe nil CQ", func() { assert.Zero(t, cq.CQE()) }},
		{"query_qp nil QP", func() { a, ia := qp.Query(); assert.Zero(t, a.QPState); assert.Nil(t, ia.SendCQ) }},
		{"qp state nil QP", func() { assert.Equal(t, verbs.QPStateReset, qp.State()) }},
		{"mr bytes nil MR", func() { assert.Nil(t, mr.Bytes()) }},
		{"mr sge nil MR", func() { assert.Equal(t, verbs.SGE{}, mr.SGE(0, 8)) }},
	}
	for _, k := range checks {
		_, _ = callSafely(t, k.name, func() error { k.call(); return nil })
	}
	// ack_cq_events of more events than were read leaves the CQ
	// undestroyable, with a message that says why.
	extra, err := f.a.ctx.CreateCQ(4, nil, 0)
	require.NoError(t, err)
	extra.AckEvents(1)
	err = extra.Destroy()
	assert.True(t, errors.Is(err, syscall.EBUSY), "%v", err)
	assert.Contains(t, fmt.Sprint(err), "1 completion events acknowledged but only 0 read")
}

// TestVerbsMisuseCompletes covers the misuses a post accepts and the
// device refuses when it executes the WR, as rxe does (nic/post.go): the
// WR completes with an error status (and an RC QP goes to ERR), and the
// peer's memory is not touched.
func TestVerbsMisuseCompletes(t *testing.T) {
	rows := []struct {
		name string
		sge  func(f *misuseFixture) verbs.SGE
		op   verbs.WROpcode
		want string
	}{
		{"lkey of another PD", func(f *misuseFixture) verbs.SGE {
			mr, err := f.pd2.RegMR(make([]byte, 64), verbs.AccessLocalWrite)
			require.NoError(t, err)
			return mr.SGE(0, 8)
		}, verbs.WRSend, "IBV_WC_LOC_PROT_ERR"},
		{"lkey of another host", func(f *misuseFixture) verbs.SGE {
			s := f.b.mr.SGE(0, 8)
			s.LKey ^= 0x80 // another key generation: not a live key on host a
			return s
		}, verbs.WRSend, "IBV_WC_LOC_PROT_ERR"},
		{"lkey after dereg", func(f *misuseFixture) verbs.SGE {
			s := f.a.mr.SGE(0, 8)
			require.NoError(t, f.a.mr.Dereg())
			return s
		}, verbs.WRRDMAWrite, "IBV_WC_LOC_PROT_ERR"},
		{"SGE past the MR's end", func(f *misuseFixture) verbs.SGE { return f.a.mr.SGE(4090, 8) }, verbs.WRRDMAWrite, "IBV_WC_LOC_PROT_ERR"},
		{"zero-length SGE (2^31 bytes) on a small MR", func(f *misuseFixture) verbs.SGE { return f.a.mr.SGE(0, 0) }, verbs.WRSend, "IBV_WC_LOC_PROT_ERR"},
		{"READ into an MR without LOCAL_WRITE", func(f *misuseFixture) verbs.SGE {
			mr, err := f.a.pd.RegMR(make([]byte, 64), verbs.AccessRemoteRead)
			require.NoError(t, err)
			return mr.SGE(0, 8)
		}, verbs.WRRDMARead, "IBV_WC_LOC_PROT_ERR"},
	}
	for _, r := range rows {
		t.Run(r.name, func(t *testing.T) {
			f := newMisuseFixture(t)
			before := append([]byte(nil), f.b.buf...)
			wr := verbs.SendWR{WRID: 7, Opcode: r.op, Flags: verbs.SendSignaled, SGList: []verbs.SGE{r.sge(f)},
				RemoteAddr: f.b.mr.Addr, RKey: f.b.mr.RKey}
			if r.op == verbs.WRSend {
				_, err := f.b.qp.PostRecv([]verbs.RecvWR{recvWR(1, f.b)})
				require.NoError(t, err)
			}
			err, panicked := callSafely(t, r.name, func() error { _, err := f.a.qp.PostSend([]verbs.SendWR{wr}); return err })
			require.False(t, panicked)
			require.NoError(t, err, "the post accepts it; the execution refuses it")
			require.NoError(t, f.w.RunFor(100*sim.Microsecond))
			assert.Equal(t, []string{"7:" + r.want}, summary(pollAll(f.a.cq)))
			assert.Equal(t, verbs.QPStateErr, f.a.qp.State())
			assert.Equal(t, before, f.b.buf, "the peer's memory is unchanged")
		})
	}
}
