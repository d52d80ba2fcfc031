package faults_test

import (
	"encoding/binary"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/rocesim/rocesim/faults"
	"github.com/rocesim/rocesim/wire"
)

// TestRewriteAnyField: each set- field changes its header field in
// place; by default the frame stays valid (IP checksum, ICRC), with
// fix=none the ICRC (or the IPv4 checksum, for ECN) is left stale.
func TestRewriteAnyField(t *testing.T) {
	write := pktSpec{op: wire.OpRCWriteOnly, psn: 1, qp: 0x11}
	imm := pktSpec{op: wire.OpRCSendOnlyImm, psn: 1, qp: 0x11}
	ud := pktSpec{op: wire.OpUDSendOnly, psn: 1, qp: 0x11}
	faa := pktSpec{op: wire.OpRCFetchAdd, psn: 1, qp: 0x11}
	send := pktSpec{op: wire.OpRCSendOnly, psn: 1, qp: 0x11}
	cases := []struct {
		rule string
		pkt  pktSpec
		get  func(p *wire.Packet) uint64
		want uint64
	}{
		{"rewrite set-qp=0x42", send, func(p *wire.Packet) uint64 { return uint64(p.BTH.DestQP()) }, 0x42},
		{"rewrite set-qp=-0x12", send, func(p *wire.Packet) uint64 { return uint64(p.BTH.DestQP()) }, 0xFFFFFF},
		{"rewrite set-rkey=0x1234", write, func(p *wire.Packet) uint64 { return uint64(p.RETH.RKey()) }, 0x1234},
		{"rewrite set-va=0xffffffffffffffff", write, func(p *wire.Packet) uint64 { return p.RETH.VA() }, 1<<64 - 1},
		{"rewrite set-va=+0x1000", write, func(p *wire.Packet) uint64 { return p.RETH.VA() }, 4096},
		{"rewrite set-dmalen=4096", write, func(p *wire.Packet) uint64 { return uint64(p.RETH.DMALength()) }, 4096},
		{"rewrite set-rkey=0x7", faa, func(p *wire.Packet) uint64 { return uint64(binary.BigEndian.Uint32(p.AtomicETH[8:])) }, 7},
		{"rewrite set-va=0x8", faa, func(p *wire.Packet) uint64 { return binary.BigEndian.Uint64(p.AtomicETH) }, 8},
		{"rewrite set-qkey=0x80010000", ud, func(p *wire.Packet) uint64 { return uint64(p.DETH.QKey()) }, 0x80010000},
		{"rewrite set-imm=99", imm, func(p *wire.Packet) uint64 { return uint64(p.ImmDt.Value()) }, 99},
		{"rewrite set-pad=3", send, func(p *wire.Packet) uint64 { return uint64(p.BTH.PadCount()) }, 3},
	}
	for _, c := range cases {
		for _, fix := range []string{"", " fix=none"} {
			frame := c.pkt.build(t)
			v := decideOne(t, c.rule+fix, frame, true)
			require.Equal(t, faults.Rewrite, v.Action, c.rule+fix)
			assert.Equal(t, c.rule+fix, v.Text)
			var p wire.Packet
			err := p.Decode(frame)
			if fix == "" {
				require.NoError(t, err, c.rule)
				assert.True(t, p.UDPChecksumValid(), c.rule)
			} else {
				require.Error(t, err, c.rule+fix)
				require.NoError(t, p.DecodeHeaders(frame), "fix=none leaves only checks failing: %s", c.rule)
			}
			assert.Equal(t, c.want, c.get(&p), c.rule+fix)
		}
	}
}

// TestRewriteECN: set-ecn=ce marks Congestion Experienced in the IP
// header, which the ICRC does not cover; by default the IPv4 header
// checksum is recomputed, with fix=none it is left stale (IPv6 has none).
func TestRewriteECN(t *testing.T) {
	for _, c := range []struct {
		fix   string
		v6    bool
		stale bool
	}{{"", false, false}, {" fix=none", false, true}, {"", true, false}, {" fix=none", true, false}} {
		frame := pktSpec{op: wire.OpRCSendOnly, psn: 1, qp: 0x11, v6: c.v6}.build(t)
		v := decideOne(t, "rewrite set-ecn=ce"+c.fix, frame, true)
		require.Equal(t, faults.Rewrite, v.Action)
		ecn := frame[wire.EthernetLen+1] & 3 // IPv4 TOS
		if c.v6 {
			ecn = frame[wire.EthernetLen+1] >> 4 & 3 // low bits of the traffic class
		}
		assert.Equal(t, byte(3), ecn, "CE")
		var p wire.Packet
		if c.stale {
			assert.Error(t, p.Decode(frame), "stale IPv4 checksum")
		} else {
			assert.NoError(t, p.Decode(frame))
		}
	}
}

// TestRewriteNeedsItsHeader: a rewrite whose field the frame lacks does
// not match, so the next rule decides.
func TestRewriteNeedsItsHeader(t *testing.T) {
	send := pktSpec{op: wire.OpRCSendOnly, psn: 1, qp: 0x11}
	for _, rule := range []string{"rewrite set-rkey=1", "rewrite set-va=1", "rewrite set-dmalen=1", "rewrite set-qkey=1", "rewrite set-imm=1"} {
		v := decideOne(t, rule+"\ndrop", send.build(t), true)
		assert.Equal(t, 2, v.Rule, rule)
	}
	faa := pktSpec{op: wire.OpRCFetchAdd, psn: 1, qp: 0x11}
	assert.Equal(t, 2, decideOne(t, "rewrite set-dmalen=1\ndrop", faa.build(t), true).Rule, "an AtomicETH has no DMA length")
}

// TestRewriteFieldsText: the new keys parse, print canonically and are
// refused where they do not belong.
func TestRewriteFieldsText(t *testing.T) {
	p := mustParse(t, "rewrite fix=none set-ecn=3 set-va=0xFFFFFFFFFFFFFFFF set-rkey=+1 op=RC_RDMA_WRITE_ONLY\ntruncate cut=8 fix=none\ntruncate cut=8 fix=all\n")
	assert.Equal(t, "rewrite set-rkey=+0x1 set-va=0xffffffffffffffff set-ecn=ce fix=none op=RC_RDMA_WRITE_ONLY\ntruncate cut=8 fix=none\ntruncate cut=8\n", p.String())
	for text, want := range map[string]string{
		"rewrite set-pad=4":        `1:17: bad set-pad "4": want at most 3`,
		"rewrite set-pad=+1":       `1:17: bad set-pad "+1": want a number (decimal or 0x hex)`,
		"rewrite set-ecn=red":      `1:17: bad set-ecn "red": want not-ect, ect1, ect0, ce or 0..3`,
		"rewrite set-qp=0x1000000": `1:16: bad set-qp "0x1000000": want at most 16777215`,
		"drop set-rkey=1":          `1:6: key "set-rkey" does not apply to drop`,
		"drop fix=none":            `1:6: key "fix" does not apply to drop`,
		"rewrite fix=none":         "1:1: rewrite needs a field to set: set-psn=, set-msn=, set-syndrome=, set-opcode=, set-qp=, set-rkey=, set-va=, set-dmalen=, set-qkey=, set-imm=, set-pad= or set-ecn=",
		"truncate cut=1 fix=some":  `1:20: bad fix "some": want all (recompute lengths, checksums and ICRC) or none (leave them stale)`,
	} {
		_, err := faults.Parse(text)
		require.Error(t, err, text)
		assert.Equal(t, want, err.Error(), text)
	}
	bad := faults.Plan{Rules: []faults.Rule{{Action: faults.Drop, SetImm: faults.Assign{Mode: faults.AssignSet, Value: 1}}}}
	assert.EqualError(t, bad.Validate(), "faults: rule 1: set- fields belong to rewrite only")
	bad = faults.Plan{Rules: []faults.Rule{{Action: faults.Rewrite, SetPad: faults.Assign{Mode: faults.AssignAdd, Value: 1}}}}
	assert.EqualError(t, bad.Validate(), "faults: rule 1: bad set-pad: only AssignSet")
}

// TestTruncateFixes: by default a truncated RoCE frame's IP and UDP
// lengths, IPv4 checksum and ICRC describe what is left.
func TestTruncateFixes(t *testing.T) {
	frame := pktSpec{op: wire.OpRCSendOnly, psn: 1, qp: 0x11}.build(t)
	v := decideOne(t, "truncate cut=4", frame, true)
	var p wire.Packet
	require.NoError(t, p.Decode(frame[:v.Len]))
	assert.Equal(t, []byte{1, 2, 3, 4}, p.Payload)
	assert.Equal(t, uint16(v.Len-wire.EthernetLen), p.IPv4.TotalLength())
}
