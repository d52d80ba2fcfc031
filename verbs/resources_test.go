package verbs_test

import (
	"errors"
	"flag"
	"runtime"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/rocesim/rocesim/verbs"
)

// TestPostSendWithoutLink: a host that was never connected refuses a
// send with ENETDOWN, naming the host and what to do, and posts nothing;
// it used to panic in the fabric. Once connected, the same QP sends.
func TestPostSendWithoutLink(t *testing.T) {
	w := verbs.NewWorld(verbs.WorldConfig{Seed: 1})
	ha, hb := w.AddHost("a"), w.AddHost("b")
	a, b := setup(ha, 1), setup(hb, 1)
	require.NoError(t, a.connect(b))
	require.NoError(t, b.connect(a))
	_, err := b.qp.PostRecv([]verbs.RecvWR{recvWR(100, b)})
	require.NoError(t, err)

	i, err := a.qp.PostSend([]verbs.SendWR{sendWR(1, a, 16)})
	require.Error(t, err)
	assert.True(t, errors.Is(err, syscall.ENETDOWN), "%v", err)
	assert.Contains(t, err.Error(), "post_send: host a has no link")
	assert.Equal(t, 0, i, "the first WR is the one refused")
	require.NoError(t, w.Run())
	assert.Empty(t, pollAll(a.cq), "nothing was posted")
	assert.Zero(t, ha.Unsent())

	require.NoError(t, w.Connect(ha, hb))
	_, err = a.qp.PostSend([]verbs.SendWR{sendWR(2, a, 16)})
	require.NoError(t, err)
	require.NoError(t, w.Run())
	assert.Equal(t, []string{"2:IBV_WC_SUCCESS"}, summary(pollAll(a.cq)))
	assert.Equal(t, []string{"100:IBV_WC_SUCCESS"}, summary(pollAll(b.cq)))
}

// cycles is how many times TestCreateDestroyEveryResource creates and
// destroys each kind of object: a million (about 6 s on 2 busy cores),
// a tenth of that with -short.
var cycles = flag.Int("resources.cycles", 0, "create/destroy cycles of TestCreateDestroyEveryResource (0: 1,000,000, or 100,000 with -short)")

// TestCreateDestroyEveryResource creates and destroys every kind of
// object — context, completion channel, CQ, PD, MR, SRQ, QP (RC on the
// SRQ, and UD), AH — a million times over (see cycles), with one QP
// connected and alive throughout; then, a tenth as many times, creates
// them all and only closes the context, which destroys them as the
// kernel does; then, as many times, creates and destroys them all in one
// context that stays open. Nothing may fail (destroyed objects used to keep their
// place: AllocPD failed at 32,764, CreateQP at 65,536) and the heap after
// each loop, after a GC, may exceed the heap before it by at most
// heapSlack for the first (the MR table's slots grow once to rxe's
// 0x80000 MR indices, 16 bytes each, as the cyclic index goes round) and
// 1 MiB for the others; anything kept per cycle (the host's CQ list once
// was; a closed context's objects were) passes them, with -short too.
func TestCreateDestroyEveryResource(t *testing.T) {
	const heapSlack = 12 << 20
	n := *cycles
	if n == 0 {
		n = 1_000_000
		if testing.Short() {
			n = 100_000
		}
	}
	f := newMisuseFixture(t) // a connected pair, and b's GID
	w, ha, a, b, gid := f.w, f.ha, f.a, f.b, f.gid
	buf := make([]byte, 64)
	for _, mode := range []struct {
		name   string
		cycles int
		close  bool // only close the context
		keep   bool // one context for every cycle, never closed
		slack  int64
	}{
		{"destroy each", n, false, false, heapSlack},
		// The MR slots have grown (nearly) all they will: a little slack.
		{"close the context", n / 10, true, false, 1 << 20},
		{"one context", n / 10, false, true, 1 << 20},
	} {
		var before, after runtime.MemStats
		runtime.GC()
		runtime.ReadMemStats(&before)
		t0 := time.Now()
		var err error
		for i := range mode.cycles {
			ctx := a.ctx
			if !mode.keep {
				ctx, err = ha.GetDeviceList()[0].Open()
				require.NoError(t, err)
			}
			ch := ctx.CreateCompChannel()
			cq, err := ctx.CreateCQ(1, ch, 0)
			require.NoError(t, err, "cycle %d", i)
			pd, err := ctx.AllocPD()
			require.NoError(t, err, "cycle %d", i)
			mr, err := pd.RegMR(buf, verbs.AccessLocalWrite)
			require.NoError(t, err, "cycle %d", i)
			srq, err := pd.CreateSRQ(verbs.SRQAttr{MaxWR: 1, MaxSGE: 1})
			require.NoError(t, err, "cycle %d", i)
			rc, err := pd.CreateQP(verbs.QPInitAttr{SendCQ: cq, RecvCQ: cq, SRQ: srq, Type: verbs.QPTypeRC,
				Cap: verbs.QPCap{MaxSendWR: 1, MaxSendSGE: 1}})
			require.NoError(t, err, "cycle %d", i)
			ud, err := pd.CreateQP(verbs.QPInitAttr{SendCQ: cq, RecvCQ: cq, Type: verbs.QPTypeUD,
				Cap: verbs.QPCap{MaxSendWR: 1, MaxRecvWR: 1, MaxSendSGE: 1, MaxRecvSGE: 1}})
			require.NoError(t, err, "cycle %d", i)
			ah, err := pd.CreateAH(verbs.AHAttr{IsGlobal: true, PortNum: 1, GRH: verbs.GRH{DGID: gid}})
			require.NoError(t, err, "cycle %d", i)
			destroy := []func() error{ah.Destroy, ud.Destroy, rc.Destroy, srq.Destroy, mr.Dereg, pd.Dealloc, cq.Destroy, ch.Destroy, ctx.Close}
			switch {
			case mode.close:
				destroy = destroy[len(destroy)-1:]
			case mode.keep:
				destroy = destroy[:len(destroy)-1]
			}
			for _, d := range destroy {
				require.NoError(t, d(), "cycle %d", i)
			}
		}
		elapsed := time.Since(t0)
		runtime.GC()
		runtime.ReadMemStats(&after)
		growth := int64(after.HeapAlloc) - int64(before.HeapAlloc)
		t.Logf("%s: %d cycles of 9 objects in %v; heap %d -> %d bytes (%+d)", mode.name, mode.cycles,
			elapsed.Round(time.Millisecond), before.HeapAlloc, after.HeapAlloc, growth)
		assert.LessOrEqual(t, growth, mode.slack, "%s: heap growth over %d cycles", mode.name, mode.cycles)
	}

	// The pair still works.
	_, err := b.qp.PostRecv([]verbs.RecvWR{recvWR(100, b)})
	require.NoError(t, err)
	_, err = a.qp.PostSend([]verbs.SendWR{sendWR(1, a, 16)})
	require.NoError(t, err)
	require.NoError(t, w.Run())
	assert.Equal(t, []string{"1:IBV_WC_SUCCESS"}, summary(pollAll(a.cq)))
}

// TestClosedContextsQPStopsAnswering: closing a context destroys its QP,
// as the kernel does when the device file closes, so the peer's SEND is
// never acknowledged and fails with RETRY_EXC_ERR. The QP used to live on
// in the device and acknowledge it.
func TestClosedContextsQPStopsAnswering(t *testing.T) {
	w, a, b := pairWith(t, verbs.WorldConfig{Seed: 1}, func(a, b *endpoint) { b.retry = 1 })
	_, err := a.qp.PostRecv([]verbs.RecvWR{recvWR(100, a)})
	require.NoError(t, err)
	require.NoError(t, a.ctx.Close())
	_, err = b.qp.PostSend([]verbs.SendWR{sendWR(1, b, 16)})
	require.NoError(t, err)
	require.NoError(t, w.Run())
	assert.Equal(t, []string{"1:IBV_WC_RETRY_EXC_ERR"}, summary(pollAll(b.cq)))
}

// TestCQOverrunFailsEachQPThatUsesIt: two QPs of host a complete into one
// send CQ of one entry. qp1 sends twice: the second completion overruns
// the CQ. Then the CQ is polled empty and qp2 sends once.
//
// Under the spec profile (IBTA vol. 1 C11-37, C9-218; see pushCQE): one
// CQ_ERR; qp1, which attempted the completion, raises QP_FATAL and goes
// to ERR; qp2 is untouched until it completes into the CQ, which is in
// error for good: its completion is lost though the CQ has room, and it
// too raises QP_FATAL and goes to ERR. Before, the spec profile raised no
// QP event and the CQ took qp2's completion once polled.
//
// Under the rxe profile (as real rxe, cq-overflow differential scenario):
// CQ_ERR, the lost send completion leaves qp1 in RTS, and the polled CQ
// takes qp2's completion.
func TestCQOverrunFailsEachQPThatUsesIt(t *testing.T) {
	for _, c := range []struct {
		prof             verbs.Profile
		events           []string
		qp1, qp2         verbs.QPState
		afterPoll, qp2wc []string
	}{
		{prof: verbs.ProfileSpec, events: []string{"CQ_ERR", "QP_FATAL qp1", "QP_FATAL qp2"},
			qp1: verbs.QPStateErr, qp2: verbs.QPStateErr, afterPoll: []string{"1:IBV_WC_SUCCESS"}},
		{prof: verbs.ProfileRXE, events: []string{"CQ_ERR"},
			qp1: verbs.QPStateRTS, qp2: verbs.QPStateRTS, afterPoll: []string{"1:IBV_WC_SUCCESS"}, qp2wc: []string{"3:IBV_WC_SUCCESS"}},
	} {
		t.Run(c.prof.String(), func(t *testing.T) {
			w := verbs.NewWorld(verbs.WorldConfig{Seed: 1, Profile: c.prof})
			ha, hb := w.AddHost("a"), w.AddHost("b")
			require.NoError(t, w.Connect(ha, hb))
			a1, b1, b2 := setup(ha, 1), setup(hb, 1), setup(hb, 2)
			tiny, err := a1.ctx.CreateCQ(1, nil, 0)
			require.NoError(t, err)
			a2 := *a1
			for _, e := range []*endpoint{a1, &a2} {
				e.qp, err = e.pd.CreateQP(verbs.QPInitAttr{SendCQ: tiny, RecvCQ: e.cq, Type: verbs.QPTypeRC,
					Cap: verbs.QPCap{MaxSendWR: 4, MaxRecvWR: 4, MaxSendSGE: 1, MaxRecvSGE: 1}})
				require.NoError(t, err)
			}
			a2.psn = 2
			for _, p := range [][2]*endpoint{{a1, b1}, {&a2, b2}} {
				require.NoError(t, p[0].connect(p[1]))
				require.NoError(t, p[1].connect(p[0]))
				_, err = p[1].qp.PostRecv([]verbs.RecvWR{recvWR(100, p[1]), recvWR(101, p[1])})
				require.NoError(t, err)
			}
			_, err = a1.qp.PostSend([]verbs.SendWR{sendWR(1, a1, 16), sendWR(2, a1, 16)})
			require.NoError(t, err)
			require.NoError(t, w.Run())
			assert.Equal(t, c.qp1, a1.qp.State(), "qp1, whose completion overran")
			assert.Equal(t, verbs.QPStateRTS, a2.qp.State(), "qp2 has not used the CQ yet")
			assert.Equal(t, c.afterPoll, summary(pollAll(tiny)))

			_, err = a2.qp.PostSend([]verbs.SendWR{sendWR(3, &a2, 16)})
			require.NoError(t, err)
			require.NoError(t, w.Run())
			assert.Equal(t, c.qp2wc, summary(pollAll(tiny)), "qp2's completion")
			assert.Equal(t, c.qp2, a2.qp.State())
			var events []string
			for {
				ev, ok := a1.ctx.GetAsyncEvent()
				if !ok {
					break
				}
				s := ev.Type.String()
				switch {
				case ev.QP == nil:
				case ev.QP.Num() == a1.qp.QPNum:
					s += " qp1"
				case ev.QP.Num() == a2.qp.QPNum:
					s += " qp2"
				}
				events = append(events, s)
			}
			assert.Equal(t, c.events, events)
		})
	}
}

// TestWorldMaxQP: WorldConfig.MaxQP is every device's max_qp, reported
// by ibv_query_device and enforced by create_qp; 0 keeps rxe's.
func TestWorldMaxQP(t *testing.T) {
	for _, c := range []struct{ ask, want int }{{0, 1048560}, {3, 3}, {2_000_000, 2_000_000}} {
		w := verbs.NewWorld(verbs.WorldConfig{Seed: 1, MaxQP: c.ask})
		ctx, err := w.AddHost("a").GetDeviceList()[0].Open()
		require.NoError(t, err)
		assert.Equal(t, c.want, ctx.QueryDevice().MaxQP, "MaxQP %d", c.ask)
	}
	// 3, of which the kernel's GSI QP is one: two user QPs, then EINVAL.
	w := verbs.NewWorld(verbs.WorldConfig{Seed: 1, MaxQP: 3})
	ctx, err := w.AddHost("a").GetDeviceList()[0].Open()
	require.NoError(t, err)
	pd, err := ctx.AllocPD()
	require.NoError(t, err)
	cq, err := ctx.CreateCQ(4, nil, 0)
	require.NoError(t, err)
	attr := verbs.QPInitAttr{SendCQ: cq, RecvCQ: cq, Type: verbs.QPTypeRC, Cap: verbs.QPCap{MaxSendWR: 1, MaxRecvWR: 1, MaxSendSGE: 1, MaxRecvSGE: 1}}
	for i := range 2 {
		_, err := pd.CreateQP(attr)
		require.NoError(t, err, "QP %d", i+1)
	}
	_, err = pd.CreateQP(attr)
	require.ErrorIs(t, err, syscall.EINVAL)
}
