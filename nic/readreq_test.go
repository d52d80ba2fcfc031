package nic_test

import (
	"bytes"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/rocesim/rocesim/nic"
	"github.com/rocesim/rocesim/wire"
)

// TestReadRequestChecks feeds the rig READ requests its responder must
// refuse or ignore, and asserts what it sends back and the QP's state.
func TestReadRequestChecks(t *testing.T) {
	read := func(r *rig, psn uint32, off uint64, n uint32) pkt {
		return pkt{op: wire.OpRCReadRequest, psn: psn,
			reth: wire.RETHFields{VA: r.rw.Addr + off, RKey: r.rw.RKey, DMALength: n}}
	}
	for _, c := range []struct {
		name    string
		profile nic.Profile
		pkts    func(r *rig) []pkt
		frames  func(t *testing.T, r *rig) [][]byte // instead of pkts
		want    []string
		state   nic.QPState
	}{{
		// A READ request carrying a payload (IBTA vol. 1 §9.9.3: a
		// payload inconsistent with the opcode is an invalid request):
		// the spec profile NAKs it invalid request and the QP goes to
		// ERR. (rxe answers it as a READ: TestHeldRequestWithStrayPayload
		// and the differential scenario read-request-with-payload.)
		name: "stray payload, spec", profile: nic.ProfileSpec,
		frames: func(t *testing.T, r *rig) [][]byte {
			// A WRITE_ONLY turned into a READ request, its payload kept
			// and its ICRC made valid again (`rewrite set-opcode=`).
			f := r.frame(t, pkt{op: wire.OpRCWriteOnly, payload: bytes.Repeat([]byte{0xEE}, 8),
				reth: wire.RETHFields{VA: r.rw.Addr, RKey: r.rw.RKey, DMALength: 8}})
			var p wire.Packet
			require.NoError(t, p.Decode(f))
			p.BTH.SetOpcode(wire.OpRCReadRequest)
			p.UpdateICRC()
			return [][]byte{f}
		},
		want: []string{"RC_ACKNOWLEDGE psn=1000 NAK(invalid request)"}, state: nic.QPStateErr,
	}, {
		// A duplicate READ (its PSN inside one answered) that asks for
		// bytes outside the original READ is dropped without an answer:
		// rxe's duplicate_request replays only a request that is the
		// same as the original or a part of it.
		name: "duplicate READ outside the original",
		pkts: func(r *rig) []pkt { return []pkt{read(r, 0, 0, 3000), read(r, 1, 3072, 1024)} },
		want: []string{"RC_RDMA_READ_RESPONSE_FIRST psn=1000 ACK", "RC_RDMA_READ_RESPONSE_MIDDLE psn=1001",
			"RC_RDMA_READ_RESPONSE_LAST psn=1002 ACK"}, state: nic.QPStateRTS,
	}, {
		// The same duplicate asking for the rest of the original from its
		// second response on is answered from memory, from a MIDDLE.
		name: "duplicate READ of the rest",
		pkts: func(r *rig) []pkt { return []pkt{read(r, 0, 0, 3000), read(r, 1, 1024, 1976)} },
		want: []string{"RC_RDMA_READ_RESPONSE_FIRST psn=1000 ACK", "RC_RDMA_READ_RESPONSE_MIDDLE psn=1001",
			"RC_RDMA_READ_RESPONSE_LAST psn=1002 ACK", "RC_RDMA_READ_RESPONSE_MIDDLE psn=1001",
			"RC_RDMA_READ_RESPONSE_LAST psn=1002 ACK"}, state: nic.QPStateRTS,
	}} {
		t.Run(c.name, func(t *testing.T) {
			r := newRig(t, rigOptions{profile: c.profile})
			var frames [][]byte
			if c.frames != nil {
				frames = c.frames(t, r)
			} else {
				for _, p := range c.pkts(r) {
					frames = append(frames, r.frame(t, p))
				}
			}
			for _, f := range frames {
				r.dev.Receive(0, f)
			}
			assert.Equal(t, c.want, r.responses(t))
			assert.Equal(t, c.state, r.rc.State())
			assert.Empty(t, r.memoryChanged(), "no region may change")
		})
	}
}
