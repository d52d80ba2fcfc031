package scenario_test

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/rocesim/rocesim/scenario"
)

// cmPrelude is a pair connected through CM: a listens and accepts, b
// connects (lines 1-6).
const cmPrelude = "node a b\nlink a b\nmr a.buf size=4096\nmr b.buf size=4096\nqp a.q rc peer=b.q cm=accept\nqp b.q rc cm=connect\n"

// TestCMParseErrors: cm= lines, connect and disconnect steps and expect
// cm claims that cannot work fail where they are written.
func TestCMParseErrors(t *testing.T) {
	for _, c := range []struct{ text, want string }{
		{cmPrelude + "qp a.u ud cm=accept", `7:14: cm= connects RC QPs (RDMA_PS_TCP); a.u is UD`},
		{cmPrelude + "qp a.r rc cm=listen", `7:14: bad cm "listen": want connect (the active side), accept, reject or closed (the passive side)`},
		{cmPrelude + "qp a.r rc cm=connect psn=3", `7:14: a cm= QP takes its attributes from the CM exchange`},
		{cmPrelude + "qp a.r rc cm=connect state=init", `7:14: a cm= QP takes its attributes`},
		{cmPrelude + "qp a.r rc cm=connect", `7:14: cm= QP a.r needs a peer`},
		{"node a b\nlink a b\nqp a.q rc peer=b.q cm=accept\nqp b.q rc", `3:23: QP a.q is cm=accept but its peer b.q has no cm=`},
		{"node a b\nlink a b\nqp a.q rc peer=b.q cm=accept\nqp b.q rc cm=reject", `3:23: QP a.q and its peer b.q: exactly one of them is cm=connect`},
		{cmPrelude + "at 0 a.q connect", `7:6: connect needs a cm=connect QP; a.q is not one`},
		{cmPrelude + "at 0 b.q connect now", `7:18: unexpected "now": connect takes no options`},
		{cmPrelude + "qp a.p rc peer=b.p\nqp b.p rc\nat 0 a.p disconnect", `9:6: disconnect needs a QP connected through CM`},
		{cmPrelude + "qp a.p rc peer=b.p\nqp b.p rc\nexpect cm a.p none", `9:11: QP a.p is not connected through CM`},
		{cmPrelude + "expect cm a.q ESTABLISHED BOGUS", `7:27: unknown CM event "BOGUS"`},
		{cmPrelude + "expect cm a.q REJECTED:x", `7:24: bad status "x"`},
		{cmPrelude + "expect cm a.q", `7:8: cm needs a QP and its CM events in order, or none`},
	} {
		_, err := scenario.Parse("t.scenario", c.text)
		require.Error(t, err, c.text)
		assert.Contains(t, err.Error(), c.want, c.text)
	}
}

// TestCMEventsClaim: an expect cm line that does not hold says what the
// QP's CM ID saw; the prefix RDMA_CM_EVENT_ and a status are optional.
func TestCMEventsClaim(t *testing.T) {
	s, err := scenario.Parse("t.scenario", cmPrelude+`at 0 b.q connect
expect cm a.q RDMA_CM_EVENT_CONNECT_REQUEST ESTABLISHED:0
expect cm b.q ADDR_RESOLVED ROUTE_RESOLVED ESTABLISHED
expect cm b.q ADDR_RESOLVED ROUTE_RESOLVED REJECTED
expect cm a.q none
`)
	require.NoError(t, err)
	res, err := s.Run(scenario.Options{})
	require.NoError(t, err)
	assert.Equal(t, []string{
		"line 10: expect cm b.q ADDR_RESOLVED ROUTE_RESOLVED REJECTED: got ADDR_RESOLVED ROUTE_RESOLVED ESTABLISHED",
		"line 11: expect cm a.q none: got CONNECT_REQUEST ESTABLISHED",
	}, res.Failed)
	require.Len(t, res.CM, 5)
	assert.Equal(t, scenario.CMEvent{Time: res.CM[4].Time, Node: "a", QP: "a.q", Event: "RDMA_CM_EVENT_ESTABLISHED"}, res.CM[4])
	assert.Positive(t, int64(res.CM[4].Time), "the passive side is established when the RTU arrives")
}

// TestCMDisconnectBeforeConnect: a disconnect step on a QP whose
// connection does not exist yet is refused with EINVAL, naming the QP.
func TestCMDisconnectBeforeConnect(t *testing.T) {
	s, err := scenario.Parse("t.scenario", cmPrelude+"at 0 b.q disconnect\n")
	require.NoError(t, err)
	_, err = s.Run(scenario.Options{})
	require.ErrorContains(t, err, "line 7: b.q disconnect: rdma_disconnect b.q: no connection yet")
	require.ErrorContains(t, err, "invalid argument")
}

// TestCMTwoPairsOneNode: two passive QPs on one node listen on ports
// 7174 and 7175; each active QP reaches its own.
func TestCMTwoPairsOneNode(t *testing.T) {
	s, err := scenario.Parse("t.scenario", cmPrelude+`qp a.r rc peer=b.r cm=accept
qp b.r rc cm=connect
at 0 b.q connect
at 0 b.r connect
expect cm a.q CONNECT_REQUEST ESTABLISHED
expect cm a.r CONNECT_REQUEST ESTABLISHED
expect cm b.r ADDR_RESOLVED ROUTE_RESOLVED ESTABLISHED
`)
	require.NoError(t, err)
	res, err := s.Run(scenario.Options{})
	require.NoError(t, err)
	assert.Empty(t, res.Failed)
}
