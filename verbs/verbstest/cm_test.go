package verbstest_test

import (
	"testing"

	"github.com/stretchr/testify/assert"

	"github.com/rocesim/rocesim/sim"
	"github.com/rocesim/rocesim/verbs"
	"github.com/rocesim/rocesim/verbs/verbstest"
)

// TestPairCM: a connection through rdma_cm carries a WRITE and ends as
// rping's does: REQ, REP, RTU, the data, DREQ, DREP.
func TestPairCM(t *testing.T) {
	w := verbstest.New(t, verbstest.Options{})
	cli, srv := w.PairCM("b", "a", verbstest.QPOptions{})
	assert.Equal(t, verbs.QPStateRTS, cli.QP.State())
	assert.Equal(t, verbs.QPStateRTS, srv.QP.State())
	src, dst := cli.Host.Buffer(256), srv.Host.Buffer(256)
	copy(src.Bytes(), "through rdma_cm")
	write(t, cli.Endpoint, src, dst, 256)
	w.RequireCompletion(cli.CQ, verbs.WCSuccess, verbs.WCRDMAWrite)
	assert.Equal(t, src.Bytes(), dst.Bytes())
	w.DisconnectCM(cli)
	assert.Equal(t, []string{"RDMA_CM_EVENT_ADDR_RESOLVED", "RDMA_CM_EVENT_ROUTE_RESOLVED", "RDMA_CM_EVENT_ESTABLISHED",
		"RDMA_CM_EVENT_DISCONNECTED"}, cli.Events)
	assert.Equal(t, []string{"RDMA_CM_EVENT_CONNECT_REQUEST", "RDMA_CM_EVENT_ESTABLISHED", "RDMA_CM_EVENT_DISCONNECTED"}, srv.Events)
	for _, m := range []string{"cm=REQ src=b", "cm=REP src=a", "cm=RTU src=b", "cm=DREQ src=b", "cm=DREP src=a"} {
		w.RequireFrames(m, 1)
	}
	// A second connection between the same hosts: the port is free again.
	c2, _ := w.PairCM("b", "a", verbstest.QPOptions{})
	assert.NotEqual(t, cli.QP.QPNum, c2.QP.QPNum)
}

// TestPairCMLostREQ: the fault plan sees the CM's MADs; a lost REQ is
// sent again one REQ timeout (6144 ms) later and the pair still connects.
func TestPairCMLostREQ(t *testing.T) {
	w := verbstest.New(t, verbstest.Options{Faults: "drop cm=REQ first=1"})
	w.PairCM("b", "a", verbstest.QPOptions{})
	reqs := w.RequireFrames("cm=REQ", 2)
	assert.Equal(t, 6144*sim.Millisecond, reqs[1].Time.Sub(reqs[0].Time))
}

// TestDisconnectCMFlushes: the server disconnects while the client has
// WRITEs in flight; the client's rdma_disconnect (on DISCONNECTED) moves
// its QP to ERR and what was not acknowledged is flushed.
func TestDisconnectCMFlushes(t *testing.T) {
	w := verbstest.New(t, verbstest.Options{Link: verbstest.Link{Bandwidth: 1e9}})
	cli, srv := w.PairCM("b", "a", verbstest.QPOptions{})
	src, dst := cli.Host.Buffer(65536), srv.Host.Buffer(65536)
	for range 8 {
		write(t, cli.Endpoint, src, dst, 65536)
	}
	w.RunFor(sim.Millisecond)
	w.DisconnectCM(srv)
	wcs := w.Await(cli.CQ, 8)
	var ok, flushed int
	for _, wc := range wcs {
		switch wc.Status {
		case verbs.WCSuccess:
			ok++
		case verbs.WCWRFlushErr:
			flushed++
		}
	}
	assert.Equal(t, 8, ok+flushed, "every WRITE completes, with success or flushed")
	assert.Positive(t, flushed, "some WRITEs were flushed")
	assert.Positive(t, ok, "some WRITEs completed before the disconnect")
	assert.Equal(t, verbs.QPStateErr, cli.QP.State())
}
