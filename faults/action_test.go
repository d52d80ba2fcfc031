package faults_test

import (
	"bytes"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/rocesim/rocesim/faults"
	"github.com/rocesim/rocesim/sim"
	"github.com/rocesim/rocesim/wire"
)

var firstHop = faults.Hop{Link: "a-b", From: "a", To: "b", First: true, Tx: 1}

// decideOne runs plan over one frame on its first hop and returns the
// verdict; frame may be changed in place.
func decideOne(t *testing.T, plan string, frame []byte, roce bool) faults.Verdict {
	t.Helper()
	var pkt *wire.Packet
	if roce {
		pkt = decode(t, frame)
	}
	return faults.NewInjector(mustParse(t, plan), newRand(1)).Decide(0, firstHop, frame, pkt)
}

// TestActionVerdicts: the actions that only tell the fabric what to do
// fill in their field of the verdict and leave the frame alone.
func TestActionVerdicts(t *testing.T) {
	send := pktSpec{op: wire.OpRCSendOnly, psn: 9, qp: 0x11}
	cases := []struct {
		plan string
		want faults.Verdict
	}{
		{"drop", faults.Verdict{Action: faults.Drop, Rule: 1, Text: "drop"}},
		{"dup", faults.Verdict{Action: faults.Duplicate, Rule: 1, Copies: 1, Text: "dup"}},
		{"dup n=3 psn=9", faults.Verdict{Action: faults.Duplicate, Rule: 1, Copies: 3, Text: "dup n=3 psn=9"}},
		{"delay 50us", faults.Verdict{Action: faults.Delay, Rule: 1, Delay: 50 * sim.Microsecond, Text: "delay 50us"}},
		{"delay 1.5ms", faults.Verdict{Action: faults.Delay, Rule: 1, Delay: 1500 * sim.Microsecond, Text: "delay 1.5ms"}},
		{"reorder n=2", faults.Verdict{Action: faults.Reorder, Rule: 1, Hold: 2, Text: "reorder n=2"}},
		{"truncate len=50 fix=none", faults.Verdict{Action: faults.Truncate, Rule: 1, Len: 50, Text: "truncate len=50 fix=none"}},
		{"truncate cut=4 fix=none", faults.Verdict{Action: faults.Truncate, Rule: 1, Len: 66 - 4, Text: "truncate cut=4 fix=none"}},
		// A frame no longer than the result is not truncated: the next rule decides.
		{"truncate len=66\ndrop", faults.Verdict{Action: faults.Drop, Rule: 2, Text: "drop"}},
		{"truncate cut=66\ndrop", faults.Verdict{Action: faults.Drop, Rule: 2, Text: "drop"}},
		{"drop psn=10", faults.Verdict{}},
	}
	for _, c := range cases {
		t.Run(c.plan, func(t *testing.T) {
			frame := send.build(t)
			require.Len(t, frame, 66) // Ethernet 14, IPv4 20, UDP 8, BTH 12, payload 8, ICRC 4
			orig := bytes.Clone(frame)
			v := decideOne(t, c.plan, frame, true)
			require.Equal(t, c.want, v)
			require.Equal(t, orig, frame, "frame changed in place")
			if v.Action == faults.Truncate {
				var p wire.Packet
				require.Len(t, frame[:v.Len], c.want.Len)
				require.Error(t, p.Decode(frame[:v.Len]))
			}
		})
	}
}

// TestVerdictNotes: the capture comments of a verdict and of the copies
// a dup makes say what happened and which rule did it.
func TestVerdictNotes(t *testing.T) {
	v := faults.Verdict{Action: faults.Duplicate, Rule: 3, Copies: 2, Text: "dup n=2 psn=9"}
	assert.Equal(t, "duplicated by rule 3: dup n=2 psn=9", v.String())
	assert.Equal(t, "copy 1 of 2 made by rule 3: dup n=2 psn=9", v.CopyNote(1))
	assert.Equal(t, "copy 2 of 2 made by rule 3: dup n=2 psn=9", v.CopyNote(2))
	assert.Equal(t, "passed", faults.Verdict{}.String())
}

// TestCorrupt: corrupt flips exactly one bit, by default in the ICRC, so
// the frame fails ICRC verification and nothing else.
func TestCorrupt(t *testing.T) {
	send := pktSpec{op: wire.OpRCSendOnly, psn: 9, qp: 0x11}
	icrc := 66 - wire.ICRCLen
	// FECN/BECN (BTH byte 4, frame byte 46) are outside the ICRC: flipping
	// one there leaves a valid frame.
	frame := send.build(t)
	decideOne(t, "corrupt byte=46 bit=7", frame, true)
	require.NoError(t, new(wire.Packet).Decode(frame))

	cases := []struct {
		plan    string
		roce    bool
		off     int  // the byte that changes
		bit     byte // the mask flipped
		wantErr error
	}{
		{"corrupt", true, icrc, 0x01, wire.ErrICRC},
		{"corrupt bit=7", true, icrc, 0x80, wire.ErrICRC},
		{"corrupt byte=60", true, 60, 0x01, wire.ErrICRC},       // payload byte
		{"corrupt byte=48 bit=2", true, 48, 0x04, wire.ErrICRC}, // BTH DestQP
		{"corrupt byte=24", true, 24, 0x01, wire.ErrIPChecksum}, // IPv4 header: caught before the ICRC
		{"corrupt", false, 59, 0x01, nil},                       // not RoCE: the last byte
	}
	for _, c := range cases {
		t.Run(c.plan, func(t *testing.T) {
			frame := nonRoCE()
			if c.roce {
				frame = send.build(t)
			}
			orig := bytes.Clone(frame)
			v := decideOne(t, c.plan, frame, c.roce)
			require.Equal(t, faults.Corrupt, v.Action)
			require.Equal(t, 1, v.Rule)
			for i := range frame {
				want := orig[i]
				if i == c.off {
					want ^= c.bit
				}
				require.Equal(t, want, frame[i], "byte %d", i)
			}
			if c.roce {
				var p wire.Packet
				require.ErrorIs(t, p.Decode(frame), c.wantErr)
			}
		})
	}

	// byte= beyond the frame: the rule does not apply and does not count.
	frame = send.build(t)
	in := faults.NewInjector(mustParse(t, "corrupt byte=66 first=1\ncorrupt byte=65 first=1"), nil)
	v := in.Decide(0, firstHop, frame, decode(t, frame))
	require.Equal(t, 2, v.Rule)
	frame = append(frame, 0) // Ethernet padding: now byte 66 exists
	v = in.Decide(0, firstHop, frame, decode(t, frame))
	require.Equal(t, 1, v.Rule)
}

// TestRewrite: a rewritten frame is a valid frame whose fields changed,
// and only those.
func TestRewrite(t *testing.T) {
	send := pktSpec{op: wire.OpRCSendOnly, psn: 9, qp: 0x11}
	ack := pktSpec{op: wire.OpRCAcknowledge, psn: 9, qp: 0x12, syn: 0x1F, msn: 4}
	cases := []struct {
		plan string
		pkt  pktSpec
		edit func(f *wire.Frame) // what the rewrite should have done
	}{
		{"rewrite set-psn=+1", send, func(f *wire.Frame) { f.BTH.PSN = 10 }},
		{"rewrite set-psn=-10", send, func(f *wire.Frame) { f.BTH.PSN = 0xFFFFFF }},
		{"rewrite set-psn=0x100", send, func(f *wire.Frame) { f.BTH.PSN = 0x100 }},
		{"rewrite set-syndrome=nak-seq", ack, func(f *wire.Frame) { f.AETH.Syndrome = 0x60 }},
		{"rewrite set-syndrome=rnr-12", ack, func(f *wire.Frame) { f.AETH.Syndrome = 0x2C }},
		{"rewrite set-syndrome=0x62 set-msn=+2 set-psn=8", ack, func(f *wire.Frame) {
			f.AETH.Syndrome, f.AETH.MSN, f.BTH.PSN = 0x62, 6, 8
		}},
		{"rewrite set-msn=7", pktSpec{op: wire.OpRCAcknowledge, psn: 9, qp: 0x12, syn: 0x1F, msn: 4, v6: true}, func(f *wire.Frame) { f.AETH.MSN = 7 }},
		{"rewrite set-psn=+1", pktSpec{op: wire.OpRCSendOnly, psn: 9, qp: 0x11, v6: true}, func(f *wire.Frame) { f.BTH.PSN = 10 }},
		{"rewrite set-opcode=RC_SEND_LAST set-psn=3", send, func(f *wire.Frame) { f.BTH.Opcode, f.BTH.PSN = wire.OpRCSendLast, 3 }},
		{"rewrite set-opcode=RC_RDMA_READ_RESPONSE_ONLY", ack, func(f *wire.Frame) { f.BTH.Opcode = wire.OpRCReadResponseOnly }},
	}
	for _, c := range cases {
		t.Run(c.plan, func(t *testing.T) {
			frame := c.pkt.build(t)
			var before, after wire.Frame
			decode(t, frame).Frame(&before)
			v := decideOne(t, c.plan, frame, true)
			require.Equal(t, faults.Rewrite, v.Action)
			require.Equal(t, mustParse(t, c.plan).Rules[0].String(), v.Text)

			var p wire.Packet
			require.NoError(t, p.Decode(frame), "rewritten frame must verify")
			require.True(t, p.UDPChecksumValid())
			p.Frame(&after)
			if c.pkt.v6 { // the UDP checksum covers the rewritten bytes too
				require.NotEqual(t, before.UDPChecksum, after.UDPChecksum)
				before.UDPChecksum = after.UDPChecksum
			}
			c.edit(&before)
			require.Equal(t, before, after)
		})
	}

	// set-syndrome= and set-msn= need an AETH; a non-RoCE frame has nothing
	// to rewrite. Such frames pass to the next rule.
	for _, plan := range []string{"rewrite set-syndrome=ack\ndrop", "rewrite set-msn=1\ndrop"} {
		frame := send.build(t)
		orig := bytes.Clone(frame)
		require.Equal(t, 2, decideOne(t, plan, frame, true).Rule)
		require.Equal(t, orig, frame)
	}
	frame := nonRoCE()
	require.Equal(t, 2, decideOne(t, "rewrite set-psn=1\ndrop", frame, false).Rule)
	require.Equal(t, nonRoCE(), frame)
}
