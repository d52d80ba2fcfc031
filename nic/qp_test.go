package nic

import (
	"testing"

	"github.com/stretchr/testify/assert"
)

// TestSendByteLen: a successful send-side completion's byte_len per
// profile. rxe's make_send_cqe copies wqe->dma.length for every opcode;
// the spec profile reports only the bytes placed in local memory.
// (Failed and flushed completions have 0 under both; completeSend never
// asks.)
func TestSendByteLen(t *testing.T) {
	for _, c := range []struct {
		op        WROpcode
		length    uint64
		rxe, spec uint32
	}{
		{WRSend, 3000, 3000, 0},
		{WRSend, 0, 0, 0},
		{WRSendWithImm, 100, 100, 0},
		{WRRDMAWrite, 4096, 4096, 0},
		{WRRDMAWriteWithImm, 5000, 5000, 0},
		{WRRDMARead, 3000, 3000, 3000},
		{WRAtomicFetchAndAdd, 8, 8, 8},
		{WRAtomicCmpAndSwp, 8, 8, 8},
	} {
		w := &sendWQE{wr: SendWR{Opcode: c.op}, length: c.length}
		assert.Equal(t, c.rxe, sendByteLen(ProfileRXE, w), "rxe: %v of %d bytes", c.op, c.length)
		assert.Equal(t, c.spec, sendByteLen(ProfileSpec, w), "spec: %v of %d bytes", c.op, c.length)
	}
}
