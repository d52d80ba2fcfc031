// Package wire is the RoCE v2 wire format: byte views of every header,
// the opcode table, 24-bit PSN arithmetic and the invariant CRC.
//
// A RoCE v2 frame is Ethernet, IPv4 or IPv6, UDP to port 4791, then the
// InfiniBand transport: a 12-byte BTH, the extension headers the opcode
// calls for (DETH, RETH, AtomicETH, AETH, AtomicAckETH, ImmDt, IETH),
// payload, 0–3 pad bytes and a 4-byte ICRC (IBTA vol. 1 ch. 9, Annex A17).
//
// Two directions, both allocation-free:
//
//	var p wire.Packet             // reusable view
//	err := p.Decode(frame)        // parse + verify ICRC; typed *wire.Error on failure
//	p.BTH.PSN(), p.AETH.Syndrome(), p.Payload ...
//
//	f := wire.Frame{...}          // structured description
//	n, err := wire.Encode(buf, &f) // lengths, pad, IPv4 checksum and ICRC derived
//
// Packet.Frame converts a decoded packet back into a Frame, and Encode of
// that Frame reproduces the original bytes exactly (the real rxe captures
// in testdata/ hold this).
//
// The package uses only the standard library. The same headers as gopacket
// layers live in wire/rocelayers; capture files in wire/capture.
package wire
