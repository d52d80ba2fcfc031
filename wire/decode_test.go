package wire_test

import (
	"encoding/binary"
	"errors"
	"math/rand/v2"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/rocesim/rocesim/wire"
)

func encodeOne(t testing.TB, f *wire.Frame) []byte {
	t.Helper()
	n, err := f.Len()
	require.NoError(t, err)
	b := make([]byte, n)
	_, err = wire.Encode(b, f)
	require.NoError(t, err)
	return b
}

// setLengths grows or shrinks the IPv4 datagram by delta bytes at its end
// and fixes the IP and UDP length fields and the IPv4 checksum, so that a
// test can produce a frame whose only fault is in the transport.
func setLengths(frame []byte, delta int) []byte {
	if delta > 0 {
		frame = append(frame, make([]byte, delta)...)
	} else {
		frame = frame[:len(frame)+delta]
	}
	ip := frame[wire.EthernetLen:]
	binary.BigEndian.PutUint16(ip[2:], uint16(len(ip)))
	binary.BigEndian.PutUint16(ip[24:], uint16(len(ip)-20))
	fixIPv4Checksum(frame)
	return frame
}

// TestDecodeErrors gives one malformed frame per way a frame can be wrong
// and checks the typed error.
func TestDecodeErrors(t *testing.T) {
	r := rand.New(rand.NewPCG(4, 4))
	sendOnly := func(n int) []byte {
		f := testFrame(r, wire.OpRCSendOnly, false, make([]byte, n))
		return encodeOne(t, &f)
	}
	ack := func() []byte {
		f := testFrame(r, wire.OpRCAcknowledge, false, nil)
		return encodeOne(t, &f)
	}
	v6 := func() []byte {
		f := testFrame(r, wire.OpRCWriteOnly, true, make([]byte, 8))
		return encodeOne(t, &f)
	}
	const ip, udp, bth = 14, 34, 42
	cases := []struct {
		name  string
		frame []byte
		want  *wire.Error
	}{
		{"empty", nil, wire.ErrTruncated},
		{"ethernet only", sendOnly(8)[:14], wire.ErrTruncated},
		{"cut in IPv4 header", sendOnly(8)[:30], wire.ErrTruncated},
		{"cut in IPv6 header", v6()[:40], wire.ErrTruncated},
		{"cut in payload (IP length says more)", sendOnly(64)[:80], wire.ErrTruncated},
		{"UDP holds less than BTH+ICRC", func() []byte { return setLengths(sendOnly(0), -4) }(), wire.ErrTruncated},
		{"RETH cut", func() []byte {
			f := testFrame(r, wire.OpRCReadRequest, false, nil)
			return setLengths(encodeOne(t, &f), -8)
		}(), wire.ErrTruncated},
		{"ARP", func() []byte { b := sendOnly(8); b[12], b[13] = 0x08, 0x06; return b }(), wire.ErrNotRoCE},
		{"TCP", func() []byte { b := sendOnly(8); b[ip+9] = 6; fixIPv4Checksum(b); return b }(), wire.ErrNotRoCE},
		{"UDP to 53", func() []byte { b := sendOnly(8); b[udp+2], b[udp+3] = 0, 53; return b }(), wire.ErrNotRoCE},
		{"IPv6 extension header", func() []byte { b := v6(); b[ip+6] = 0; return b }(), wire.ErrNotRoCE},
		{"IPv4 more fragments", func() []byte { b := sendOnly(8); b[ip+6] |= 0x20; fixIPv4Checksum(b); return b }(), wire.ErrFragment},
		{"IPv4 fragment offset", func() []byte { b := sendOnly(8); b[ip+7] = 1; fixIPv4Checksum(b); return b }(), wire.ErrFragment},
		{"IP version 5", func() []byte { b := sendOnly(8); b[ip] = 0x55; return b }(), wire.ErrIPHeader},
		{"IHL 4", func() []byte { b := sendOnly(8); b[ip] = 0x44; return b }(), wire.ErrIPHeader},
		{"IPv6 frame with version 4", func() []byte { b := v6(); b[ip] = 0x40; return b }(), wire.ErrIPHeader},
		{"IPv4 checksum", func() []byte { b := sendOnly(8); b[ip+10] ^= 1; return b }(), wire.ErrIPChecksum},
		{"UDP length short", func() []byte { b := sendOnly(8); b[udp+5] -= 4; return b }(), wire.ErrLength},
		{"IPv4 total length below IP+UDP", func() []byte {
			b := sendOnly(8)
			binary.BigEndian.PutUint16(b[ip+2:], 24)
			fixIPv4Checksum(b)
			return b
		}(), wire.ErrLength},
		{"IPv6 payload length below UDP", func() []byte { b := v6(); b[ip+4], b[ip+5] = 0, 4; return b }(), wire.ErrLength},
		{"ACK with payload", func() []byte { return withICRC(setLengths(ack(), 4)) }(), wire.ErrLength},
		{"ACK with payload, bad ICRC", func() []byte { return setLengths(ack(), 4) }(), wire.ErrICRC},
		{"reserved RC opcode 0x15", func() []byte { b := sendOnly(8); b[bth] = 0x15; return b }(), wire.ErrUnknownOpcode},
		{"RD opcode", func() []byte { b := sendOnly(8); b[bth] = 0x44; return b }(), wire.ErrUnknownOpcode},
		{"manufacturer opcode", func() []byte { b := sendOnly(8); b[bth] = 0xE0; return b }(), wire.ErrUnknownOpcode},
		{"TVer 1", func() []byte { b := sendOnly(8); b[bth+1] |= 1; return b }(), wire.ErrHeaderVersion},
		{"pad count beyond payload", func() []byte { b := sendOnly(0); b[bth+1] |= 0x10; return b }(), wire.ErrPad},
		{"transport not 4-aligned", func() []byte { return setLengths(sendOnly(8), 1) }(), wire.ErrPad},
		{"bad ICRC", func() []byte { b := sendOnly(8); b[len(b)-1] ^= 0x80; return b }(), wire.ErrICRC},
		{"payload bit flip", func() []byte { b := sendOnly(8); b[bth+12] ^= 1; return b }(), wire.ErrICRC},
	}
	var p wire.Packet
	for _, c := range cases {
		err := p.Decode(c.frame)
		require.Truef(t, errors.Is(err, c.want), "%s: got %v, want %v", c.name, err, c.want)
		var we *wire.Error
		require.True(t, errors.As(err, &we), c.name)
		require.Equal(t, c.want.Code, we.Code, c.name)
		require.NotEqual(t, "unknown-error", we.Code.String(), c.name)
	}
}

func TestEncodeErrors(t *testing.T) {
	r := rand.New(rand.NewPCG(5, 5))
	f := testFrame(r, wire.OpRCAcknowledge, false, []byte{1})
	_, err := wire.Encode(make([]byte, 100), &f)
	require.ErrorIs(t, err, wire.ErrBadFrame, "payload on an ACK")

	f = testFrame(r, wire.Opcode(0x15), false, nil)
	_, err = wire.Encode(make([]byte, 100), &f)
	require.ErrorIs(t, err, wire.ErrUnknownOpcode)

	f = testFrame(r, wire.OpRCSendOnly, false, make([]byte, 100))
	_, err = wire.Encode(make([]byte, 100), &f)
	require.ErrorIs(t, err, wire.ErrBufferTooSmall)

	f = testFrame(r, wire.OpRCSendOnly, true, nil)
	f.Dst = testFrame(r, wire.OpRCSendOnly, false, nil).Dst
	_, err = wire.Encode(make([]byte, 200), &f)
	require.ErrorIs(t, err, wire.ErrBadFrame, "mixed address families")

	f = testFrame(r, wire.OpRCSendOnly, false, nil)
	f.IPOptions = []byte{1, 1, 1}
	_, err = wire.Encode(make([]byte, 200), &f)
	require.ErrorIs(t, err, wire.ErrBadFrame, "options not a multiple of 4")

	f = testFrame(r, wire.OpRCSendOnly, false, make([]byte, 70000))
	_, err = wire.Encode(make([]byte, 80000), &f)
	require.ErrorIs(t, err, wire.ErrBadFrame, "datagram over 64 KiB")
}

// TestIPv4OptionsRoundTrip covers a header longer than 20 bytes, which
// rxe never sends but a network may deliver.
func TestIPv4OptionsRoundTrip(t *testing.T) {
	r := rand.New(rand.NewPCG(6, 6))
	f := testFrame(r, wire.OpRCWriteFirst, false, make([]byte, 256))
	f.IPOptions = []byte{1, 1, 1, 0} // NOP, NOP, NOP, EOL
	b := encodeOne(t, &f)
	var p wire.Packet
	require.NoError(t, p.Decode(b))
	require.Equal(t, 24, p.IPv4.HeaderLen())
	require.Equal(t, f.IPOptions, p.IPv4.Options())
	require.Equal(t, f.RETH, p.RETH.Fields())
}

// TestDecodeErrorClearsLaterViews checks that a Packet reused after a good
// frame keeps no stale view when the next frame fails part-way.
func TestDecodeErrorClearsLaterViews(t *testing.T) {
	r := rand.New(rand.NewPCG(10, 10))
	good := testFrame(r, wire.OpRCWriteOnlyImm, false, make([]byte, 8))
	var p wire.Packet
	require.NoError(t, p.Decode(encodeOne(t, &good)))
	require.NotNil(t, p.RETH)

	bad := encodeOne(t, &good)
	bad[36], bad[37] = 0, 53 // UDP destination port 53
	require.ErrorIs(t, p.Decode(bad), wire.ErrNotRoCE)
	require.NotNil(t, p.Eth)
	require.NotNil(t, p.IPv4)
	require.NotNil(t, p.UDP, "the UDP header was decoded")
	for name, v := range map[string][]byte{"BTH": p.BTH, "RETH": p.RETH, "ImmDt": p.ImmDt,
		"ICRC": p.ICRC, "Payload": p.Payload} {
		require.Nil(t, v, "%s must be cleared", name)
	}
	require.Nil(t, p.Info)

	require.NoError(t, p.Decode(encodeOne(t, &good)))
	tver := encodeOne(t, &good)
	tver[43] |= 1
	require.ErrorIs(t, p.Decode(tver), wire.ErrHeaderVersion)
	require.NotNil(t, p.BTH)
	require.NotNil(t, p.Info)
	require.Nil(t, p.RETH)
	require.Nil(t, p.Payload)
}

// withICRC recomputes the ICRC of a frame whose headers decode.
func withICRC(frame []byte) []byte {
	var p wire.Packet
	_ = p.DecodeHeaders(frame)
	p.UpdateICRC()
	return frame
}

// TestStrayPayload: a READ request that carries a payload (a WRITE_ONLY
// whose opcode was rewritten) decodes completely, ICRC checked, with
// ErrLength, so a receiver that acts on it as rxe does can; with a bad
// ICRC it is a bad ICRC, like any other frame.
func TestStrayPayload(t *testing.T) {
	r := rand.New(rand.NewPCG(1, 2))
	f := testFrame(r, wire.OpRCWriteOnly, false, []byte("0123456789abcdef"))
	frame := encodeOne(t, &f)
	var p wire.Packet
	require.NoError(t, p.Decode(frame))
	p.BTH.SetOpcode(wire.OpRCReadRequest)
	p.UpdateICRC()

	require.ErrorIs(t, p.Decode(frame), wire.ErrLength)
	require.True(t, p.StrayPayload())
	require.Equal(t, wire.OpRCReadRequest, p.BTH.Opcode())
	require.Equal(t, f.RETH, p.RETH.Fields())
	require.Equal(t, "0123456789abcdef", string(p.Payload))

	frame[len(frame)-1] ^= 1
	require.ErrorIs(t, p.Decode(frame), wire.ErrICRC)

	// A length error of the IP or UDP headers is not a stray payload.
	g := testFrame(r, wire.OpRCReadRequest, false, nil)
	short := encodeOne(t, &g)
	short[wire.EthernetLen+20+5] -= 4 // UDP length
	require.ErrorIs(t, p.Decode(short), wire.ErrLength)
	require.False(t, p.StrayPayload())
}
