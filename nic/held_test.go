package nic_test

import (
	"fmt"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/rocesim/rocesim/nic"
	"github.com/rocesim/rocesim/wire"
)

// TestRequestsHeldWhileReadReplies: with 64 of its frames waiting at the
// port (nothing reports them gone), the RC QP's responder starts a 17th
// READ but builds none of its responses; the requests that arrive
// meanwhile are held, in order, up to 4096, and the rest are dropped and
// counted (responder-busy) rather than held without limit. Once the port
// takes frames again (TxDone), the READ's responses go out first, then
// the held requests run in arrival order.
func TestRequestsHeldWhileReadReplies(t *testing.T) {
	r := newRig(t, rigOptions{})
	reth := wire.RETHFields{VA: r.rw.Addr, RKey: r.rw.RKey, DMALength: 4096} // 4 responses at 1024
	for i := range 17 {
		r.dev.Receive(0, r.frame(t, pkt{op: wire.OpRCReadRequest, psn: uint32(4 * i), reth: reth}))
	}
	require.Len(t, r.responses(t), 64, "16 READs answered; the 17th waits for the port")

	const sent = 5000
	w := wire.RETHFields{VA: r.rw.Addr, RKey: r.rw.RKey, DMALength: 8}
	for i := range sent {
		r.dev.Receive(0, r.frame(t, pkt{op: wire.OpRCWriteOnly, psn: uint32(68 + i), reth: w, payload: make([]byte, 8)}))
	}
	require.Empty(t, r.responses(t), "nothing answered while the READ waits")
	require.Equal(t, uint64(sent-4096), r.dev.RxDrops(nic.DropBusy))
	require.Equal(t, "responder-busy", nic.DropBusy.String())

	for range 48 {
		r.dev.TxDone(0) // 16 frames left at the port: the READ resumes
	}
	out := r.responses(t)
	require.Len(t, out, 4+4096)
	for i, op := range []string{"RC_RDMA_READ_RESPONSE_FIRST", "RC_RDMA_READ_RESPONSE_MIDDLE", "RC_RDMA_READ_RESPONSE_MIDDLE", "RC_RDMA_READ_RESPONSE_LAST"} {
		require.Contains(t, out[i], fmt.Sprintf("%s psn=%d", op, rigRQPSN+64+i))
	}
	for i, f := range out[4:] {
		require.Contains(t, f, fmt.Sprintf("RC_ACKNOWLEDGE psn=%d", rigRQPSN+68+i), "held request %d, in arrival order", i)
	}
}

// TestHeldRequestWithStrayPayload: a READ request carrying a payload its
// opcode lacks reaches the responder under the rxe profile (which answers
// it, as rxe does) also when it was held behind a READ waiting for the
// port: a held request is judged as it was on arrival (forQP).
func TestHeldRequestWithStrayPayload(t *testing.T) {
	r := newRig(t, rigOptions{})
	reth := wire.RETHFields{VA: r.rw.Addr, RKey: r.rw.RKey, DMALength: 4096}
	for i := range 17 {
		r.dev.Receive(0, r.frame(t, pkt{op: wire.OpRCReadRequest, psn: uint32(4 * i), reth: reth}))
	}
	require.Len(t, r.responses(t), 64)
	r.dev.Receive(0, strayRead(t, r, 68))
	require.Empty(t, r.responses(t), "held behind the READ")
	for range 48 {
		r.dev.TxDone(0)
	}
	out := r.responses(t)
	require.Len(t, out, 5, "the waiting READ's 4 responses, then the held one's")
	require.Contains(t, out[4], fmt.Sprintf("RC_RDMA_READ_RESPONSE_ONLY psn=%d", rigRQPSN+68))
}

// TestStrayPayloadBadICRC: a READ request with a stray payload whose ICRC
// is wrong is dropped for its ICRC (counted bad-icrc), as every frame
// that fails the check is (rxe_rcv checks the ICRC of every packet before
// the responder sees it); it is not answered. Found by flooding a UDP
// node with random datagrams (realnet's TestUDPGarbage): a random READ
// request with bytes after its RETH reached the QP lookup.
func TestStrayPayloadBadICRC(t *testing.T) {
	r := newRig(t, rigOptions{})
	f := strayRead(t, r, 0)
	f[len(f)-1] ^= 0xFF
	r.dev.Receive(0, f)
	require.Empty(t, r.responses(t), "a frame with a bad ICRC is not answered")
	require.Equal(t, uint64(1), r.dev.RxErrors(wire.CodeICRC))
}

// strayRead is an 8-byte READ request at psn carrying 8 bytes of payload:
// a WRITE_ONLY turned into a READ request, its payload kept and its ICRC
// made valid again (what `rewrite set-opcode=` does).
func strayRead(t *testing.T, r *rig, psn uint32) []byte {
	t.Helper()
	small := wire.RETHFields{VA: r.rw.Addr, RKey: r.rw.RKey, DMALength: 8}
	f := r.frame(t, pkt{op: wire.OpRCWriteOnly, psn: psn, reth: small, payload: make([]byte, 8)})
	var p wire.Packet
	require.NoError(t, p.Decode(f))
	p.BTH.SetOpcode(wire.OpRCReadRequest)
	p.UpdateICRC()
	return f
}
