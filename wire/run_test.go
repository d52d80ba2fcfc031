package wire

import "testing"

// TestPacketRunTake: a run takes its next packet and only that: the
// next PSN, to its QP, of its opcode and payload length, without
// AckReq, while its count lasts.
func TestPacketRunTake(t *testing.T) {
	bth := func(qpn uint32, op Opcode, psn PSN, ack bool) BTH {
		b := make(BTH, BTHLen)
		b.Encode(&BTHFields{Opcode: op, DestQP: qpn, PSN: psn, AckReq: ack})
		return b
	}
	r := PacketRun{QPN: 7, PSN: PSNMask, Opcode: OpRCWriteMiddle, Len: 1024, Count: 2}
	for _, c := range []struct {
		name string
		b    BTH
		n    int
		want bool
	}{
		{"another QP", bth(8, OpRCWriteMiddle, PSNMask, false), 1024, false},
		{"a later PSN", bth(7, OpRCWriteMiddle, 0, false), 1024, false},
		{"another opcode", bth(7, OpRCSendMiddle, PSNMask, false), 1024, false},
		{"AckReq", bth(7, OpRCWriteMiddle, PSNMask, true), 1024, false},
		{"short", bth(7, OpRCWriteMiddle, PSNMask, false), 1000, false},
		{"the next", bth(7, OpRCWriteMiddle, PSNMask, false), 1024, true},
		{"the next after, across the PSN wrap", bth(7, OpRCWriteMiddle, 0, false), 1024, true},
		{"past the count", bth(7, OpRCWriteMiddle, 1, false), 1024, false},
	} {
		if got := r.Take(c.b, c.n); got != c.want {
			t.Errorf("%s: Take = %v, want %v (run %+v)", c.name, got, c.want, r)
		}
	}
}
