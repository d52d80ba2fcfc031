package verbstest_test

import (
	"errors"
	"strings"
	"syscall"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/rocesim/rocesim/verbs"
	"github.com/rocesim/rocesim/verbs/verbstest"
)

// send posts a signaled SEND of n bytes from src.
func send(t verbstest.TB, from *verbstest.Endpoint, wrid uint64, src *verbs.MR, n int) {
	t.Helper()
	_, err := from.QP.PostSend([]verbs.SendWR{{WRID: wrid, Opcode: verbs.WRSend, Flags: verbs.SendSignaled,
		SGList: []verbs.SGE{src.SGE(0, uint64(n))}}})
	require.NoError(t, err)
}

// TestFixedPSN: each side sends from the PSN it was given, not one drawn
// from the seed (seed 1 draws 12378170 for a), so filters name them
// plainly.
func TestFixedPSN(t *testing.T) {
	w := verbstest.New(t, verbstest.Options{})
	a, b := w.Pair("a", "b", verbstest.QPOptions{FixedPSN: true, Peer: &verbstest.QPOptions{FixedPSN: true, PSN: 0xFFFFFF}})
	abuf, bbuf := a.Host.Buffer(64), b.Host.Buffer(64)
	b.PostRecv(7, bbuf.SGE(0, 64))
	send(t, a, 1, abuf, 64)
	w.RequireCompletion(a.CQ, verbs.WCSuccess, verbs.WCSend)
	w.RequireCompletion(b.CQ, verbs.WCSuccess, verbs.WCRecv)
	w.RequireFrames("src=a op=RC_SEND_ONLY psn=0", 1)
	w.RequireFrames("src=b class=ack psn=0", 1)
	for range 2 { // the second WRITE wraps to PSN 0
		write(t, b, bbuf, abuf, 8)
		w.RequireCompletion(b.CQ, verbs.WCSuccess, verbs.WCRDMAWrite)
	}
	w.RequireFrames("src=b op=RC_RDMA_WRITE_ONLY psn=16777215", 1)
	w.RequireFrames("src=b op=RC_RDMA_WRITE_ONLY psn=0", 1)
	attr, _ := a.QP.Query()
	assert.Equal(t, uint32(0xFFFFFF), attr.RQPSN, "a's rq_psn is b's first PSN")
}

// TestAsymmetricAttributes: the attributes of one side only (Peer takes
// the defaults). a may keep one RDMA READ outstanding: its three READs
// leave one at a time, each after the previous response.
func TestAsymmetricAttributes(t *testing.T) {
	w := verbstest.New(t, verbstest.Options{})
	a, b := w.Pair("a", "b", verbstest.QPOptions{MaxRdAtomic: 1, Timeout: 10, RetryCnt: 3, RNRRetry: 2, MinRNRTimer: 1,
		Peer: &verbstest.QPOptions{MaxDestRdAtomic: 4}})
	qa, _ := a.QP.Query()
	qb, _ := b.QP.Query()
	type attrs struct{ rd, dest, timeout, retry, rnr, minRNR uint8 }
	get := func(q verbs.QPAttr) attrs {
		return attrs{q.MaxRdAtomic, q.MaxDestRdAtomic, q.Timeout, q.RetryCnt, q.RNRRetry, q.MinRNRTimer}
	}
	assert.Equal(t, attrs{1, 16, 10, 3, 2, 1}, get(qa))
	assert.Equal(t, attrs{16, 4, 14, 7, 7, 12}, get(qb))

	src, dst := b.Host.Buffer(64), a.Host.Buffer(64)
	for i := range 3 {
		_, err := a.QP.PostSend([]verbs.SendWR{{WRID: uint64(i), Opcode: verbs.WRRDMARead, Flags: verbs.SendSignaled,
			SGList: []verbs.SGE{dst.SGE(uint64(16*i), 16)}, RemoteAddr: src.Addr + uint64(16*i), RKey: src.RKey}})
		require.NoError(t, err)
	}
	w.Await(a.CQ, 3)
	var order []string
	for _, f := range w.Frames("") {
		order = append(order, f.Packet.Info.Name)
	}
	assert.Equal(t, []string{"RC_RDMA_READ_REQUEST", "RC_RDMA_READ_RESPONSE_ONLY", "RC_RDMA_READ_REQUEST",
		"RC_RDMA_READ_RESPONSE_ONLY", "RC_RDMA_READ_REQUEST", "RC_RDMA_READ_RESPONSE_ONLY"}, order)
}

// TestAccessFlags: b's QP allows remote READ only: a's WRITE is refused,
// its READ is served. With NoAccess even the READ is refused. (The
// model answers an access the QP's flags forbid as rxe_resp.c's
// check_op_valid does: NAK invalid request, so the requester's WR ends
// in a remote invalid request error; real rxe does so in the conformance
// scenarios write-without-qp-access and read-without-remote-read.)
func TestAccessFlags(t *testing.T) {
	w := verbstest.New(t, verbstest.Options{})
	a, b := w.Pair("a", "b", verbstest.QPOptions{Peer: &verbstest.QPOptions{Access: verbs.AccessRemoteRead}})
	abuf, bbuf := a.Host.Buffer(64), b.Host.Buffer(64)
	read := func(from, to *verbstest.Endpoint, local, remote *verbs.MR) {
		_, err := from.QP.PostSend([]verbs.SendWR{{WRID: 3, Opcode: verbs.WRRDMARead, Flags: verbs.SendSignaled,
			SGList: []verbs.SGE{local.SGE(0, 8)}, RemoteAddr: remote.Addr, RKey: remote.RKey}})
		require.NoError(t, err)
	}
	read(a, b, abuf, bbuf)
	w.RequireCompletion(a.CQ, verbs.WCSuccess, verbs.WCRDMARead)
	write(t, a, abuf, bbuf, 8)
	w.RequireCompletion(a.CQ, verbs.WCRemInvReqErr)
	w.RequireFrames("src=b class=nak", 1)

	c, d := w.Pair("a", "b", verbstest.QPOptions{NoAccess: true})
	read(c, d, abuf, bbuf)
	w.RequireCompletion(c.CQ, verbs.WCRemInvReqErr)
}

// TestSeparateCQs: a QP's send completions go to its CQ, its receive
// completions to its RecvCQ.
func TestSeparateCQs(t *testing.T) {
	w := verbstest.New(t, verbstest.Options{})
	a, b := w.Pair("a", "b", verbstest.QPOptions{SeparateCQs: true})
	require.NotSame(t, a.CQ, a.RecvCQ)
	src, dst := a.Host.Buffer(64), b.Host.Buffer(64)
	b.PostRecv(9, dst.SGE(0, 64))
	send(t, a, 1, src, 32)
	w.RequireCompletion(a.CQ, verbs.WCSuccess, verbs.WCSend)
	wc := w.RequireCompletion(b.RecvCQ, verbs.WCSuccess, verbs.WCRecv)
	assert.Equal(t, uint32(32), wc.ByteLen)
	w.RequireNoCompletion(b.CQ)
	w.RequireNoCompletion(a.RecvCQ)

	one, other := w.Pair("a", "b", verbstest.QPOptions{})
	assert.Same(t, one.CQ, one.RecvCQ, "without SeparateCQs one CQ serves both")
	assert.Same(t, other.CQ, other.RecvCQ)
}

// TestSRQ: receives come from the endpoint's SRQ (the QP has none of its
// own); a mesh's host shares one SRQ among its QPs.
func TestSRQ(t *testing.T) {
	w := verbstest.New(t, verbstest.Options{})
	a, b := w.Pair("a", "b", verbstest.QPOptions{SRQ: true})
	require.NotNil(t, b.SRQ)
	src, dst := a.Host.Buffer(64), b.Host.Buffer(64)
	_, err := b.QP.PostRecv([]verbs.RecvWR{{WRID: 1, SGList: []verbs.SGE{dst.SGE(0, 64)}}})
	require.True(t, errors.Is(err, syscall.EINVAL), "a QP on an SRQ takes no receives of its own: %v", err)
	b.PostRecv(5, dst.SGE(0, 64))
	send(t, a, 1, src, 16)
	wc := w.RequireCompletion(b.CQ, verbs.WCSuccess, verbs.WCRecv)
	assert.Equal(t, uint64(5), wc.WRID)
	assert.Equal(t, b.QP.QPNum, wc.QPNum)

	m := verbstest.New(t, verbstest.Options{Nodes: []string{"n1", "n2", "n3"}})
	mesh := m.Mesh(verbstest.QPOptions{SRQ: true})
	srv := mesh.Get("n1", "n2")
	require.Same(t, srv.SRQ, mesh.Get("n1", "n3").SRQ, "n1's QPs share one SRQ")
	buf := m.Host("n1").Buffer(64)
	srv.PostRecv(1, buf.SGE(0, 32))
	srv.PostRecv(2, buf.SGE(32, 32))
	for _, from := range []string{"n2", "n3"} {
		e := mesh.Get(from, "n1")
		send(t, e, 1, e.Host.Buffer(8), 8)
	}
	wcs := m.Await(mesh.CQ("n1"), 2)
	assert.ElementsMatch(t, []uint32{mesh.Get("n1", "n2").QP.QPNum, mesh.Get("n1", "n3").QP.QPNum},
		[]uint32{wcs[0].QPNum, wcs[1].QPNum})
}

// TestQPOptionsMisuse: options that cannot be honoured fail the test
// saying which.
func TestQPOptionsMisuse(t *testing.T) {
	for _, c := range []struct {
		name, want string
		body       func(w *verbstest.World)
	}{
		{"psn-24-bits", "verbstest: Pair(\"a\", \"b\"): QPOptions.PSN 0x1000000: a PSN has 24 bits", func(w *verbstest.World) {
			w.Pair("a", "b", verbstest.QPOptions{FixedPSN: true, PSN: 1 << 24})
		}},
		{"peer-type", "verbstest: Pair(\"a\", \"b\"): QPOptions.Type RC and Peer.Type UC", func(w *verbstest.World) {
			w.Pair("a", "b", verbstest.QPOptions{Peer: &verbstest.QPOptions{Type: verbs.QPTypeUC}})
		}},
		{"peer-peer", "QPOptions.Peer.Peer is set", func(w *verbstest.World) {
			w.Pair("a", "b", verbstest.QPOptions{Peer: &verbstest.QPOptions{Peer: &verbstest.QPOptions{}}})
		}},
		{"mesh-peer", "verbstest: Mesh: QPOptions.Peer is set", func(w *verbstest.World) {
			w.Mesh(verbstest.QPOptions{Peer: &verbstest.QPOptions{}})
		}},
	} {
		t.Run(c.name, func(t *testing.T) {
			var r verbstest.Recorder
			require.False(t, r.Run(t.Name(), func(tb verbstest.TB) { c.body(verbstest.New(tb, verbstest.Options{})) }))
			first, _, _ := strings.Cut(r.Output(), "\n")
			assert.Contains(t, first, c.want)
		})
	}
}
