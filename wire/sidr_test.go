package wire_test

import (
	"bytes"
	"testing"

	"github.com/rocesim/rocesim/wire"
)

// TestSIDROffsets: each SIDR field sits where IBTA vol. 1 §12.11 (and
// the kernel's cm_msgs.h) puts it, and Decode gives back what Encode
// wrote.
func TestSIDROffsets(t *testing.T) {
	d := make([]byte, wire.MADDataLen)
	req := wire.SIDRREQ{RequestID: 0x11223344, PKey: 0xFFFF, ServiceID: wire.CMServiceIDPS(wire.CMPortSpaceUDP, 7174)}
	req.PrivateData[0], req.PrivateData[wire.SIDRREQPrivateLen-1] = 0xA1, 0xA2
	req.Encode(d)
	// Request ID, P_Key, reserved, then service ID 0x0000000001111c06
	// (RDMA_PS_UDP, port 7174).
	want := []byte{0x11, 0x22, 0x33, 0x44, 0xFF, 0xFF, 0, 0, 0, 0, 0, 0, 0x01, 0x11, 0x1C, 0x06}
	if !bytes.Equal(d[:len(want)], want) || d[16] != 0xA1 || d[231] != 0xA2 {
		t.Fatalf("SIDR_REQ bytes % x", d[:20])
	}
	var r2 wire.SIDRREQ
	r2.Decode(d)
	if r2 != req {
		t.Fatalf("SIDR_REQ round trip: %+v, want %+v", r2, req)
	}

	clear(d)
	rep := wire.SIDRREP{RequestID: 0x55667788, Status: wire.SIDRReject, AddInfoLength: 3, QPN: 0xABCDEF,
		ServiceID: 0x0102030405060708, QKey: wire.UDPQKey}
	rep.AdditionalInfo[0], rep.PrivateData[0], rep.PrivateData[wire.SIDRREPPrivateLen-1] = 0xB1, 0xC1, 0xC2
	rep.Encode(d)
	if d[3] != 0x88 || d[4] != 2 || d[5] != 3 || d[8] != 0xAB || d[10] != 0xEF || d[11] != 0 || d[12] != 1 || d[19] != 8 ||
		!bytes.Equal(d[20:24], []byte{0x01, 0x23, 0x45, 0x67}) || d[24] != 0xB1 || d[96] != 0xC1 || d[231] != 0xC2 {
		t.Fatalf("SIDR_REP bytes % x", d[:100])
	}
	var p2 wire.SIDRREP
	p2.Decode(d)
	if p2 != rep {
		t.Fatalf("SIDR_REP round trip: %+v, want %+v", p2, rep)
	}
	if wire.CMAttrSIDRREQ.String() != "SIDR_REQ" || wire.CMAttrSIDRREP.String() != "SIDR_REP" {
		t.Fatalf("names %v %v", wire.CMAttrSIDRREQ, wire.CMAttrSIDRREP)
	}
}

// TestSIDRNoAlloc: encoding and decoding a SIDR message allocates
// nothing (the CM builds them on its per-MAD path).
func TestSIDRNoAlloc(t *testing.T) {
	d := make([]byte, wire.MADDataLen)
	var req wire.SIDRREQ
	var rep wire.SIDRREP
	if n := testing.AllocsPerRun(100, func() {
		req.Encode(d)
		req.Decode(d)
		rep.Encode(d)
		rep.Decode(d)
	}); n != 0 {
		t.Fatalf("%v allocations per SIDR encode and decode", n)
	}
}

// FuzzSIDR: any 232 bytes decode as a SIDR_REQ and a SIDR_REP without a
// panic, and re-encode to the same bytes (every bit is a field or a
// reserved field kept).
func FuzzSIDR(f *testing.F) {
	f.Add(make([]byte, wire.MADDataLen))
	f.Fuzz(func(t *testing.T, b []byte) {
		if len(b) < wire.MADDataLen {
			return
		}
		b = b[:wire.MADDataLen]
		out := make([]byte, wire.MADDataLen)
		var req wire.SIDRREQ
		req.Decode(b)
		req.Encode(out)
		if !bytes.Equal(out, b) {
			t.Fatalf("SIDR_REQ re-encoded differs")
		}
		var rep wire.SIDRREP
		rep.Decode(b)
		rep.Encode(out)
		if !bytes.Equal(out, b) {
			t.Fatalf("SIDR_REP re-encoded differs")
		}
	})
}
