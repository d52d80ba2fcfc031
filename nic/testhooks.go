package nic

import "github.com/rocesim/rocesim/wire"

// TestHooks are bugs a test plants in a device on purpose, to show that
// the invariant swarm (verbs' TestSwarm) catches a broken transport and
// shrinks it to a small case. They are for tests only: a real use leaves
// Config.TestHooks nil, and then no hook costs more than one nil check,
// on retransmissions only.
type TestHooks struct {
	// SkipRetransmit, if set, is asked before the requester sends a SEND
	// or WRITE packet again (go-back-N after a NAK, or the ACK timeout);
	// true makes it skip the packet while believing it sent, the bug of
	// a requester that loses track of one PSN.
	SkipRetransmit func(qpn uint32, psn wire.PSN) bool
}

// skipRetransmit reports whether a hook drops this retransmission.
func (d *Device) skipRetransmit(qp *QP, psn wire.PSN) bool {
	h := d.cfg.TestHooks
	return h != nil && h.SkipRetransmit != nil && psn.Less(qp.req.highest) && h.SkipRetransmit(qp.num, psn)
}
