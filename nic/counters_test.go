package nic

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// rxeCounterNames is rxe_counter_descs[] of Linux
// drivers/infiniband/sw/rxe/rxe_hw_counters.c (6.1), copied by hand in
// its order.
var rxeCounterNames = []string{
	"sent_pkts",
	"rcvd_pkts",
	"duplicate_request",
	"out_of_seq_request",
	"rcvd_rnr_err",
	"send_rnr_err",
	"rcvd_seq_err",
	"ack_deferred",
	"retry_exceeded_err",
	"retry_rnr_exceeded_err",
	"completer_retry_err",
	"send_err",
	"link_downed",
	"rdma_sends",
	"rdma_recvs",
}

func TestCounterNamesAndOrder(t *testing.T) {
	var c Counters
	assert.Equal(t, rxeCounterNames, c.Names())
	assert.Equal(t, len(rxeCounterNames), NumCounters)

	consts := []struct {
		k    Counter
		name string
	}{
		{CounterSentPkts, "sent_pkts"},
		{CounterRcvdPkts, "rcvd_pkts"},
		{CounterDuplicateRequest, "duplicate_request"},
		{CounterOutOfSeqRequest, "out_of_seq_request"},
		{CounterRcvdRNRErr, "rcvd_rnr_err"},
		{CounterSendRNRErr, "send_rnr_err"},
		{CounterRcvdSeqErr, "rcvd_seq_err"},
		{CounterAckDeferred, "ack_deferred"},
		{CounterRetryExceededErr, "retry_exceeded_err"},
		{CounterRetryRNRExceededErr, "retry_rnr_exceeded_err"},
		{CounterCompleterRetryErr, "completer_retry_err"},
		{CounterSendErr, "send_err"},
		{CounterLinkDowned, "link_downed"},
		{CounterRDMASends, "rdma_sends"},
		{CounterRDMARecvs, "rdma_recvs"},
	}
	require.Len(t, consts, NumCounters)
	for i, tc := range consts {
		assert.Equal(t, i, int(tc.k), "%s is at rxe's index", tc.name)
		assert.Equal(t, tc.name, tc.k.String())
	}
	assert.Equal(t, "Counter(15)", Counter(15).String())

	names := c.Names()
	names[0] = "changed"
	assert.Equal(t, "sent_pkts", c.Names()[0], "Names returns a copy")
}

func TestCountersAddGetSnapshot(t *testing.T) {
	var c Counters
	for i := range NumCounters {
		c.Add(Counter(i), uint64(i+1))
	}
	c.Add(CounterRcvdSeqErr, 100)
	c.Add(CounterSentPkts, 0)

	v, ok := c.Get("rcvd_seq_err")
	assert.True(t, ok)
	assert.Equal(t, uint64(107), v)
	v, ok = c.Get("rdma_recvs")
	assert.True(t, ok)
	assert.Equal(t, uint64(15), v)
	assert.Equal(t, uint64(1), c[CounterSentPkts])
	for _, bad := range []string{"", "RCVD_SEQ_ERR", "out_of_sequence", "ack_deffered", "sent_bytes"} {
		_, ok := c.Get(bad)
		assert.False(t, ok, "%q is not an rxe counter", bad)
	}

	snap := c.Snapshot()
	require.Len(t, snap, NumCounters)
	for i, nc := range snap {
		assert.Equal(t, rxeCounterNames[i], nc.Name)
		want := uint64(i + 1)
		if Counter(i) == CounterRcvdSeqErr {
			want += 100
		}
		assert.Equal(t, want, nc.Value, nc.Name)
	}
	c.Add(CounterSentPkts, 5)
	assert.Equal(t, uint64(1), snap[0].Value, "a snapshot does not follow later counts")
}

func TestCountersAddAllocs(t *testing.T) {
	var c Counters
	assert.Zero(t, testing.AllocsPerRun(100, func() { c.Add(CounterSentPkts, 1) }))
	assert.Zero(t, testing.AllocsPerRun(100, func() { _, _ = c.Get("rdma_recvs") }))
}
