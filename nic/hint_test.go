package nic

import (
	"net/netip"
	"testing"
	"unsafe"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestFramesCarryPeerHint: an RC QP asks Config.PeerHint for its
// destination's hint when it is connected, and every frame it sends
// carries that hint; a QP's own hint (QPHint) names the QP itself, and
// a number with no QP has none. A move to RESET forgets the hint with
// the address vector.
func TestFramesCarryPeerHint(t *testing.T) {
	d, pd, cq := resDevice(t)
	type ask struct {
		gid netip.Addr
		qpn uint32
	}
	var asked []ask
	peer := Hint{Addr: 0x7f0000001008, Len: 616}
	d.cfg.PeerHint = func(gid netip.Addr, qpn uint32) Hint {
		asked = append(asked, ask{gid, qpn})
		return peer
	}
	qp := timerQP(t, d, pd, cq) // RC toward QP 0x99 at 10.0.0.2
	assert.Equal(t, []ask{{netip.MustParseAddr("10.0.0.2"), 0x99}}, asked, "asked once, at RTR, for the destination")
	_, err := d.PostSend(0, qp, []SendWR{{WRID: 1, Opcode: WRSend, Flags: SendSignaled}})
	require.NoError(t, err)
	rd := d.Ready()
	require.Len(t, rd.Frames, 1)
	assert.Equal(t, peer, rd.Frames[0].Hint, "the SEND carries its destination's hint")

	own := d.QPHint(qp.num)
	assert.Equal(t, uintptr(unsafe.Pointer(qp)), own.Addr, "a QP's hint is the QP")
	assert.Equal(t, uint32(unsafe.Sizeof(*qp)), own.Len)
	assert.Zero(t, d.QPHint(qp.num+1), "no QP, no hint")

	require.NoError(t, d.ModifyQP(0, qp, &QPAttr{QPState: QPStateReset}, QPAttrState))
	assert.Zero(t, qp.peer, "RESET forgets the destination and its hint")

	// A UD QP has no one destination: it never asks.
	asked = nil
	ud, err := d.CreateQP(pd, QPInitAttr{SendCQ: cq, RecvCQ: cq, Type: QPTypeUD,
		Cap: QPCap{MaxSendWR: 1, MaxRecvWR: 1, MaxSendSGE: 1, MaxRecvSGE: 1}})
	require.NoError(t, err)
	require.NoError(t, d.ModifyQP(0, ud, &QPAttr{QPState: QPStateInit, PortNum: 1, QKey: 1},
		QPAttrState|QPAttrPKeyIndex|QPAttrPort|QPAttrQKey))
	require.NoError(t, d.ModifyQP(0, ud, &QPAttr{QPState: QPStateRTR}, QPAttrState))
	assert.Empty(t, asked)
	assert.Zero(t, ud.peer)
}

// TestResponsesCarryPeerHint: the responder's frames carry its own
// peer's hint too: the frame that answers a SEND (here an RNR NAK, no
// receive being posted) carries the requester's QP's hint, which the
// responder's device got from its PeerHint when its QP was connected.
func TestResponsesCarryPeerHint(t *testing.T) {
	a, b, qa, qb := connectedPair(t, 0, func(a, b *Device) {
		a.cfg.PeerHint = func(_ netip.Addr, qpn uint32) Hint { return b.QPHint(qpn) }
		b.cfg.PeerHint = func(_ netip.Addr, qpn uint32) Hint { return a.QPHint(qpn) }
	})
	_, err := a.PostSend(0, qa, []SendWR{{WRID: 1, Opcode: WRSend, Flags: SendSignaled}})
	require.NoError(t, err)
	rd := a.Ready()
	require.Len(t, rd.Frames, 1)
	assert.Equal(t, b.QPHint(qb.num), rd.Frames[0].Hint, "the request carries the responder's QP")
	b.Receive(0, append([]byte(nil), rd.Frames[0].Bytes...))
	resp := b.Ready()
	require.NotEmpty(t, resp.Frames, "the responder answers")
	want := a.QPHint(qa.num)
	require.NotZero(t, want.Addr)
	for _, f := range resp.Frames {
		assert.Equal(t, want, f.Hint, "the response carries the requester's QP")
	}
}
