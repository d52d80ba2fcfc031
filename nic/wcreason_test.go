package nic

import (
	"testing"

	"github.com/stretchr/testify/assert"
)

// TestCompletionReasonText pins the trace text (why=) of every completion
// and message-drop reason: the traces, ladders and captures made before
// the reasons were typed hold these words, and the device decides on the
// kind, never on the text.
func TestCompletionReasonText(t *testing.T) {
	for _, c := range []struct {
		r    wcReason
		want string
	}{
		{wcReason{}, ""},
		{memCheck(""), ""},
		{memCheck("sge[0]: lkey 0x1234 unknown"), "sge[0]: lkey 0x1234 unknown"},
		{wcReason{kind: whyMessageOver2G, n: 1<<31 + 1}, "post_send: message of 2147483649 bytes over 2^31"},
		{wcReason{kind: whyUDOverMTU, n: 5000}, "post_send: UD message of 5000 bytes over the path MTU"},
		{wcReason{kind: whyRecvTooShort, max: 64}, "message longer than the receive buffer of 64 bytes"},
		{wcReason{kind: whyDatagramTooLong, n: 140, max: 100},
			"datagram of 140 bytes (with the GRH) longer than the receive buffer of 100 bytes"},
		{wcReason{kind: whyRecvDeregistered}, "receive buffer deregistered while in use"},
		{wcReason{kind: whyUCLostPacket}, "UC message broken by a lost packet"},
		{wcReason{kind: whyUCOpcodeSequence}, "UC message broken by an opcode out of sequence"},
		{wcReason{kind: whySendInvalidate, detail: "rkey 0x80001 names no MW"}, "send with invalidate: rkey 0x80001 names no MW"},
		{wcReason{kind: whyLocalInvalidate, detail: "rkey 0x80001 names no MW"}, "local_inv: rkey 0x80001 names no MW"},
		{wcReason{kind: 200}, "wcReason(200)"},
	} {
		assert.Equal(t, c.want, c.r.String(), "kind %d", c.r.kind)
	}
	assert.Equal(t, "UC: dropped, a WRITE broke earlier (rxe keeps its opcode as the last one seen)", dropAfterBrokenWrite.String())
	assert.Equal(t, "UC: the message after a broken one is dropped (rxe check_op_seq: LAST missing)", dropAfterBrokenMsg.String())
	assert.Equal(t, "msgDropReason(9)", msgDropReason(9).String())
}
