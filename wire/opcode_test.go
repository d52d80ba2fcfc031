package wire_test

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"

	"github.com/rocesim/rocesim/wire"
)

// TestOpcodeTable checks the table against IBTA vol. 1 table 36 (opcodes)
// and §9.2–9.5 (which headers each opcode carries).
func TestOpcodeTable(t *testing.T) {
	type want struct {
		name    string
		headers wire.Headers
		hdrLen  int
		kind    wire.Kind
		pos     wire.Position
	}
	P := wire.HasPayload
	cases := map[wire.Opcode]want{
		wire.OpRCSendFirst:              {"RC_SEND_FIRST", P, 0, wire.KindSend, wire.PosFirst},
		wire.OpRCSendMiddle:             {"RC_SEND_MIDDLE", P, 0, wire.KindSend, wire.PosMiddle},
		wire.OpRCSendLastImm:            {"RC_SEND_LAST_WITH_IMMEDIATE", P | wire.HasImmDt, 4, wire.KindSend, wire.PosLast},
		wire.OpRCWriteFirst:             {"RC_RDMA_WRITE_FIRST", P | wire.HasRETH, 16, wire.KindWrite, wire.PosFirst},
		wire.OpRCWriteOnlyImm:           {"RC_RDMA_WRITE_ONLY_WITH_IMMEDIATE", P | wire.HasRETH | wire.HasImmDt, 20, wire.KindWrite, wire.PosOnly},
		wire.OpRCReadRequest:            {"RC_RDMA_READ_REQUEST", wire.HasRETH, 16, wire.KindReadRequest, wire.PosOnly},
		wire.OpRCReadResponseFirst:      {"RC_RDMA_READ_RESPONSE_FIRST", P | wire.HasAETH, 4, wire.KindReadResponse, wire.PosFirst},
		wire.OpRCReadResponseMiddle:     {"RC_RDMA_READ_RESPONSE_MIDDLE", P, 0, wire.KindReadResponse, wire.PosMiddle},
		wire.OpRCAcknowledge:            {"RC_ACKNOWLEDGE", wire.HasAETH, 4, wire.KindAck, wire.PosOnly},
		wire.OpRCAtomicAcknowledge:      {"RC_ATOMIC_ACKNOWLEDGE", wire.HasAETH | wire.HasAtomicAckETH, 12, wire.KindAtomicAck, wire.PosOnly},
		wire.OpRCCompareSwap:            {"RC_COMPARE_SWAP", wire.HasAtomicETH, 28, wire.KindCompareSwap, wire.PosOnly},
		wire.OpRCFetchAdd:               {"RC_FETCH_ADD", wire.HasAtomicETH, 28, wire.KindFetchAdd, wire.PosOnly},
		wire.OpRCSendOnlyWithInvalidate: {"RC_SEND_ONLY_WITH_INVALIDATE", P | wire.HasIETH, 4, wire.KindSend, wire.PosOnly},
		wire.OpUCWriteLastImm:           {"UC_RDMA_WRITE_LAST_WITH_IMMEDIATE", P | wire.HasImmDt, 4, wire.KindWrite, wire.PosLast},
		wire.OpUDSendOnly:               {"UD_SEND_ONLY", P | wire.HasDETH, 8, wire.KindSend, wire.PosOnly},
		wire.OpUDSendOnlyImm:            {"UD_SEND_ONLY_WITH_IMMEDIATE", P | wire.HasDETH | wire.HasImmDt, 12, wire.KindSend, wire.PosOnly},
		wire.OpCNP:                      {"CNP", P, 0, wire.KindCNP, wire.PosOnly},
	}
	for op, w := range cases {
		i := op.Info()
		assert.True(t, i.Valid, "%#x", op)
		assert.Equal(t, w.name, op.String())
		assert.Equal(t, w.headers, i.Headers, op.String())
		assert.Equal(t, w.hdrLen, i.HdrLen, op.String())
		assert.Equal(t, w.kind, i.Kind, op.String())
		assert.Equal(t, w.pos, i.Position, op.String())
	}
	// RC 0x00-0x14, 0x16-0x17; UC 0x20-0x2B; UD 0x64-0x65; CNP.
	assert.Len(t, wire.AllOpcodes(), 21+2+12+2+1)
	for _, op := range []wire.Opcode{0x15, 0x18, 0x1F, 0x2C, 0x40, 0x4A, 0x60, 0x63, 0x66, 0x80, 0xC0, 0xFF} {
		assert.False(t, op.Valid(), "%#x must not be valid", op)
	}
	assert.Equal(t, "OPCODE_0x15", wire.Opcode(0x15).String())
	assert.Equal(t, wire.TransportUD, wire.OpUDSendOnly.Transport())
	assert.True(t, wire.KindFetchAdd.IsRequest())
	assert.True(t, wire.KindReadResponse.IsResponse())
	assert.False(t, wire.KindSend.IsResponse())
}

func TestSyndrome(t *testing.T) {
	for _, c := range []struct {
		s    wire.Syndrome
		text string
	}{
		{0x1F, "ACK"},
		{wire.ACKSyndrome(5), "ACK(credits=5)"},
		{0x2C, "RNR-NAK(timer=12: 0.64 ms)"},
		{wire.RNRNAKSyndrome(0), "RNR-NAK(timer=0: 655.36 ms)"},
		{wire.RNRNAKSyndrome(1), "RNR-NAK(timer=1: 0.01 ms)"},
		{0x60, "NAK(PSN sequence error)"},
		{wire.NAKSyndrome(wire.NAKInvalidRequest), "NAK(invalid request)"},
		{0x62, "NAK(remote access error)"},
		{0x63, "NAK(remote operational error)"},
		{0x64, "NAK(invalid RD request)"},
		{0x45, "RESERVED(0x45)"},
	} {
		assert.Equal(t, c.text, c.s.String(), "%#x", uint8(c.s))
	}
	assert.True(t, wire.Syndrome(0x2C).IsRNRNAK())
	assert.Equal(t, uint8(12), wire.Syndrome(0x2C).RNRTimerCode())
	assert.True(t, wire.Syndrome(0x62).IsNAK())
	assert.Equal(t, wire.NAKRemoteAccess, wire.Syndrome(0x62).NAKCode())
	// IBTA table 45, spot checks at the ends and the breaks of the scale.
	for code, us := range map[uint8]int64{0: 655360, 1: 10, 8: 160, 9: 240, 16: 2560, 17: 3840, 24: 40960, 25: 61440, 31: 491520} {
		assert.Equal(t, time.Duration(us)*time.Microsecond, wire.RNRDelay(code), "code %d", code)
	}
}

func TestUDPSourcePortMatchesRxe(t *testing.T) {
	// From testdata/rc_send.pcap (QPN 0x11<->0x11 and 0x12<->0x12) and
	// testdata/ud_send.pcap (UD QPN 0x11).
	assert.Equal(t, uint16(49441), wire.UDPSourcePort(0x11, 0x11))
	assert.Equal(t, uint16(49476), wire.UDPSourcePort(0x12, 0x12))
	assert.Equal(t, uint16(57236), wire.UDPSourcePortUD(0x11))
	for _, q := range []uint32{0, 1, 0xFFFFFF} {
		assert.GreaterOrEqual(t, wire.UDPSourcePort(q, 0xABCDEF), uint16(0xC000))
	}
}

// TestMaxExtHdrLen checks that no opcode carries more extension-header
// bytes than MaxExtHdrLen, and that one carries exactly that many: the
// buffer and MTU bounds derived from it hold for every packet.
func TestMaxExtHdrLen(t *testing.T) {
	most := 0
	for _, op := range wire.AllOpcodes() {
		most = max(most, op.Info().HdrLen)
	}
	if most != wire.MaxExtHdrLen {
		t.Fatalf("largest extension headers: %d bytes, MaxExtHdrLen says %d", most, wire.MaxExtHdrLen)
	}
}
