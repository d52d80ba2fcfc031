package verbs_test

import (
	"fmt"
	"sync/atomic"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/rocesim/rocesim/sim"
	"github.com/rocesim/rocesim/verbs"
	"github.com/rocesim/rocesim/verbs/parallel"
)

// TestLargeWorldStreamsWrites: the devices of a world of 32 hosts or more
// write what they receive past the caches from the 32nd host on (a world
// of 31 does not; a cluster's parts count every host), and what lands is what was sent: a WRITE, a SEND into
// a receive buffer and a READ's response, each several packets long.
func TestLargeWorldStreamsWrites(t *testing.T) {
	world := func(n int) (*verbs.World, []*verbs.Host) {
		w := verbs.NewWorld(verbs.WorldConfig{Seed: 1})
		var hs []*verbs.Host
		for i := range n {
			hs = append(hs, w.AddHost(fmt.Sprintf("h%d", i)))
		}
		require.NoError(t, w.ConnectSwitch())
		return w, hs
	}
	small, smallHosts := world(31)
	require.NoError(t, small.Run())
	for _, h := range smallHosts {
		assert.False(t, h.StreamsWrites(), "%s of 31 hosts", h.Name())
	}

	// A cluster's parts count the other parts' hosts (their stand-ins):
	// 32 hosts in two parts stream, 31 do not.
	for _, n := range []int{31, 32} {
		c, err := verbs.NewCluster(verbs.ClusterConfig{World: verbs.WorldConfig{Seed: 1}, Parts: 2, Hosts: n})
		require.NoError(t, err)
		var hs []*verbs.Host
		for i := range n {
			hs = append(hs, c.AddHost(fmt.Sprintf("h%d", i)))
		}
		for _, h := range hs {
			assert.Equal(t, n >= 32, h.StreamsWrites(), "%s of a cluster of %d hosts", h.Name(), n)
		}
	}

	w, hs := world(32)
	// From the 32nd host on, before any run (a world that verbstest
	// steps without Run streams too).
	for _, h := range hs {
		assert.True(t, h.StreamsWrites(), "%s of 32 hosts, before a run", h.Name())
	}
	a, b := setup(hs[0], 1), setup(hs[31], 2)
	require.NoError(t, a.connect(b))
	require.NoError(t, b.connect(a))
	require.NoError(t, w.Run())
	for _, h := range hs {
		assert.True(t, h.StreamsWrites(), "%s of 32 hosts", h.Name())
	}
	for k := range a.buf {
		a.buf[k] = byte(k*7 + 3)
	}
	// WRITE a's first 4000 bytes to b's; then SEND 3000 of them into b's
	// buffer at 0 (over the WRITE's), and READ b's bytes 0..2499 into a's
	// buffer at 1000.
	_, err := b.qp.PostRecv([]verbs.RecvWR{{WRID: 9, SGList: []verbs.SGE{b.mr.SGE(0, 3000)}}})
	require.NoError(t, err)
	_, err = a.qp.PostSend([]verbs.SendWR{
		{WRID: 1, Opcode: verbs.WRRDMAWrite, Flags: verbs.SendSignaled, SGList: []verbs.SGE{a.mr.SGE(0, 4000)}, RemoteAddr: b.mr.Addr, RKey: b.mr.RKey},
	})
	require.NoError(t, err)
	require.NoError(t, w.Run())
	assert.Equal(t, a.buf[:4000], b.buf[:4000], "the WRITE")
	for k := range 3000 {
		a.buf[k] = byte(k*13 + 5)
	}
	_, err = a.qp.PostSend([]verbs.SendWR{{WRID: 2, Opcode: verbs.WRSend, Flags: verbs.SendSignaled, SGList: []verbs.SGE{a.mr.SGE(0, 3000)}}})
	require.NoError(t, err)
	require.NoError(t, w.Run())
	assert.Equal(t, a.buf[:3000], b.buf[:3000], "the SEND")
	want := append([]byte(nil), b.buf[:2500]...)
	_, err = a.qp.PostSend([]verbs.SendWR{{WRID: 3, Opcode: verbs.WRRDMARead, Flags: verbs.SendSignaled, SGList: []verbs.SGE{a.mr.SGE(1000, 2500)}, RemoteAddr: b.mr.Addr, RKey: b.mr.RKey}})
	require.NoError(t, err)
	require.NoError(t, w.Run())
	assert.Equal(t, want, a.buf[1000:3500], "the READ's response")
	wcs := append(pollAll(a.cq), pollAll(b.cq)...)
	require.Len(t, wcs, 4)
	for _, wc := range wcs {
		assert.Equal(t, verbs.WCSuccess, wc.Status, "%+v", wc)
	}
}

// TestRunEndsFenced: every run ends with the non-temporal stores its
// frames and payloads were copied with fenced, after its last event (a
// large world's copies are unfenced: internal/ntcopy), and so does each
// part's step of a cluster, on the goroutine that ran it.
func TestRunEndsFenced(t *testing.T) {
	var fences, atFence atomic.Int64
	var w *verbs.World
	defer verbs.SetFence(func() {
		fences.Add(1)
		if w != nil {
			atFence.Store(int64(w.Scheduler().Fired()))
		}
	})()
	w = verbs.NewWorld(verbs.WorldConfig{Seed: 1})
	var hs []*verbs.Host
	for i := range 32 {
		hs = append(hs, w.AddHost(fmt.Sprintf("h%d", i)))
	}
	require.NoError(t, w.ConnectSwitch())
	a, b := setup(hs[0], 1), setup(hs[31], 2)
	require.NoError(t, a.connect(b))
	require.NoError(t, b.connect(a))
	require.True(t, hs[31].StreamsWrites())
	for _, run := range []struct {
		name string
		do   func() error
	}{
		{"Run", w.Run},
		{"RunFor", func() error { return w.RunFor(sim.Microsecond) }},
		{"RunTo", func() error { return w.RunTo(w.Now().Add(sim.Millisecond)) }},
	} {
		_, err := a.qp.PostSend([]verbs.SendWR{{WRID: 1, Opcode: verbs.WRRDMAWrite, Flags: verbs.SendSignaled,
			SGList: []verbs.SGE{a.mr.SGE(0, 4000)}, RemoteAddr: b.mr.Addr, RKey: b.mr.RKey}})
		require.NoError(t, err)
		before := fences.Load()
		require.NoError(t, run.do(), run.name)
		assert.Equal(t, before+1, fences.Load(), "%s: fences", run.name)
		assert.Equal(t, int64(w.Scheduler().Fired()), atFence.Load(), "%s: the fence came before the run's last event", run.name)
	}

	// A cluster: each part's step ends fenced, on whichever goroutine ran it.
	w = nil
	c, err := verbs.NewCluster(verbs.ClusterConfig{World: verbs.WorldConfig{Seed: 1}, Parts: 2, Hosts: 32, Each: parallel.Each(2)})
	require.NoError(t, err)
	hs = hs[:0]
	for i := range 32 {
		hs = append(hs, c.AddHost(fmt.Sprintf("h%d", i)))
	}
	require.NoError(t, c.ConnectSwitch())
	a, b = setup(hs[0], 1), setup(hs[31], 2)
	require.NoError(t, a.connect(b))
	require.NoError(t, b.connect(a))
	before := fences.Load()
	_, err = a.qp.PostSend([]verbs.SendWR{{WRID: 1, Opcode: verbs.WRRDMAWrite, Flags: verbs.SendSignaled,
		SGList: []verbs.SGE{a.mr.SGE(0, 4000)}, RemoteAddr: b.mr.Addr, RKey: b.mr.RKey}})
	require.NoError(t, err)
	require.NoError(t, c.Run())
	assert.Equal(t, a.buf[:4000], b.buf[:4000], "the WRITE across the parts")
	// The run ends with each part settling (one fence a part); the steps
	// before it, several for a frame that crosses, fence too.
	assert.Greater(t, fences.Load()-before, int64(2), "fences: each part's steps as well as its end")
}
