package wire_test

import (
	"bytes"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"testing"

	"github.com/rocesim/rocesim/wire"
)

var writeCorpus = flag.Bool("corpus", false, "rewrite the committed fuzz seed corpus from testdata captures")

// FuzzDecode feeds arbitrary frames to the decoder: it must never panic,
// and whatever decodes must re-encode to the same bytes (all but the ICRC
// when only the headers parse).
func FuzzDecode(f *testing.F) {
	f.Add([]byte{})
	var p wire.Packet
	var fr wire.Frame
	buf := make([]byte, 1<<17)
	f.Fuzz(func(t *testing.T, data []byte) {
		err := p.Decode(data)
		if err != nil && p.DecodeHeaders(data) != nil {
			return
		}
		p.Frame(&fr)
		n, eerr := wire.Encode(buf, &fr)
		if eerr != nil {
			t.Fatalf("decoded frame does not re-encode: %v", eerr)
		}
		got := buf[:n]
		if err == nil {
			if !bytes.Equal(got, data) {
				t.Fatalf("re-encode differs:\n in  % x\n out % x", data, got)
			}
			return
		}
		// Headers parsed but the ICRC did not verify: everything except the
		// 4 ICRC bytes must match, and the re-encoded frame must verify.
		icrc := len(data) - len(p.Trailer) - wire.ICRCLen
		if len(got) != len(data) || !bytes.Equal(got[:icrc], data[:icrc]) || !bytes.Equal(got[icrc+4:], data[icrc+4:]) {
			t.Fatalf("re-encode differs outside the ICRC:\n in  % x\n out % x", data, got)
		}
		if err := p.Decode(got); err != nil {
			t.Fatalf("re-encoded frame does not verify: %v", err)
		}
	})
}

// headerRoundTrip is the shared body of the per-header fuzz targets: the
// fields read from a view, encoded into a fresh view, give the same bytes.
func headerRoundTrip(t *testing.T, data []byte, size int, rt func(in, out []byte)) {
	if len(data) < size {
		return
	}
	out := make([]byte, size)
	rt(data[:size], out)
	if !bytes.Equal(out, data[:size]) {
		t.Fatalf("round trip differs:\n in  % x\n out % x", data[:size], out)
	}
}

func FuzzBTH(f *testing.F) {
	f.Fuzz(func(t *testing.T, data []byte) {
		headerRoundTrip(t, data, wire.BTHLen, func(in, out []byte) {
			v := wire.BTH(in).Fields()
			wire.BTH(out).Encode(&v)
			_ = wire.BTH(in).Opcode().String()
		})
	})
}

func FuzzRETH(f *testing.F) {
	f.Fuzz(func(t *testing.T, data []byte) {
		headerRoundTrip(t, data, wire.RETHLen, func(in, out []byte) {
			v := wire.RETH(in).Fields()
			wire.RETH(out).Encode(&v)
		})
	})
}

func FuzzAETH(f *testing.F) {
	f.Fuzz(func(t *testing.T, data []byte) {
		headerRoundTrip(t, data, wire.AETHLen, func(in, out []byte) {
			v := wire.AETH(in).Fields()
			wire.AETH(out).Encode(&v)
			_ = v.Syndrome.String()
		})
	})
}

func FuzzAtomicETH(f *testing.F) {
	f.Fuzz(func(t *testing.T, data []byte) {
		headerRoundTrip(t, data, wire.AtomicETHLen, func(in, out []byte) {
			v := wire.AtomicETH(in).Fields()
			wire.AtomicETH(out).Encode(&v)
		})
	})
}

func FuzzAtomicAckETH(f *testing.F) {
	f.Fuzz(func(t *testing.T, data []byte) {
		headerRoundTrip(t, data, wire.AtomicAckETHLen, func(in, out []byte) {
			wire.AtomicAckETH(out).SetOrigRemoteData(wire.AtomicAckETH(in).OrigRemoteData())
		})
	})
}

func FuzzDETH(f *testing.F) {
	f.Fuzz(func(t *testing.T, data []byte) {
		headerRoundTrip(t, data, wire.DETHLen, func(in, out []byte) {
			v := wire.DETH(in).Fields()
			wire.DETH(out).Encode(&v)
		})
	})
}

func FuzzImmDt(f *testing.F) {
	f.Fuzz(func(t *testing.T, data []byte) {
		headerRoundTrip(t, data, wire.ImmDtLen, func(in, out []byte) {
			wire.ImmDt(out).Set(wire.ImmDt(in).Value())
		})
	})
}

func FuzzIETH(f *testing.F) {
	f.Fuzz(func(t *testing.T, data []byte) {
		headerRoundTrip(t, data, wire.IETHLen, func(in, out []byte) {
			wire.IETH(out).Set(wire.IETH(in).RKey())
		})
	})
}

// TestWriteFuzzCorpus (with -corpus) rewrites testdata/fuzz from the real
// captures: for FuzzDecode the first frame of each opcode in each capture
// and a few non-RoCE frames; for each header target the header bytes of
// the first frame that carries it.
func TestWriteFuzzCorpus(t *testing.T) {
	if !*writeCorpus {
		t.Skip("run with -corpus to rewrite the seed corpus")
	}
	write := func(target, name string, data []byte) {
		dir := filepath.Join("testdata", "fuzz", target)
		if err := os.MkdirAll(dir, 0o755); err != nil {
			t.Fatal(err)
		}
		body := fmt.Sprintf("go test fuzz v1\n[]byte(%q)\n", data)
		if err := os.WriteFile(filepath.Join(dir, name), []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	var p wire.Packet
	seen := map[string]bool{}
	for _, pcap := range captures(t) {
		base := filepath.Base(pcap)
		other := 0
		for i, fr := range readPcap(t, pcap) {
			if err := p.Decode(fr); err != nil {
				if other < 2 {
					write("FuzzDecode", fmt.Sprintf("%s-%03d-other", base, i+1), fr)
					other++
				}
				continue
			}
			key := base + p.Info.Name
			if seen[key] {
				continue
			}
			seen[key] = true
			write("FuzzDecode", fmt.Sprintf("%s-%03d-%s", base, i+1, p.Info.Name), fr)
			for target, h := range map[string][]byte{"FuzzBTH": p.BTH, "FuzzRETH": p.RETH, "FuzzAETH": p.AETH,
				"FuzzAtomicETH": p.AtomicETH, "FuzzAtomicAckETH": p.AtomicAckETH, "FuzzDETH": p.DETH,
				"FuzzImmDt": p.ImmDt, "FuzzIETH": p.IETH} {
				if h != nil && !seen[target] {
					seen[target] = true
					write(target, base+"-"+p.Info.Name, h)
				}
			}
		}
	}
	// Generated frames cover what the captures lack: IPv6, pad, IETH, ImmDt.
	for i, f := range allTestFrames(7) {
		if len(f.Payload) > 3 {
			continue
		}
		b := encodeOne(t, &f)
		write("FuzzDecode", fmt.Sprintf("gen-%03d-%s", i, f.BTH.Opcode), b)
		if p.Decode(b) == nil {
			if p.ImmDt != nil && !seen["FuzzImmDt"] {
				seen["FuzzImmDt"] = true
				write("FuzzImmDt", "gen", p.ImmDt)
			}
			if p.IETH != nil && !seen["FuzzIETH"] {
				seen["FuzzIETH"] = true
				write("FuzzIETH", "gen", p.IETH)
			}
		}
	}
}
