//go:build linux

package rswitch

import (
	"bytes"
	"encoding/binary"
	"math/rand/v2"
	"path/filepath"
	"runtime"
	"testing"
	"time"

	"github.com/rocesim/rocesim/faults"
	"github.com/rocesim/rocesim/wire"
)

// TestSwitchBadInput: between two VM links, with a plan and a capture on,
// a RoCE v2 frame with a bad ICRC and one cut inside its BTH pass to the
// other VM byte for byte (the switch judges frames, the endpoints check
// them: rxe drops both); then four rounds of random datagrams (empty to
// 2000 bytes, a seeded stream; every other one behind the Ethernet, IPv4
// and UDP headers of a RoCE v2 frame, lengths and checksum right, with
// an RC opcode and TVer 0, so that the decoder and the plan judge random
// transport headers and payloads)
// flood port a: every one is counted, none
// crashes the switch, the heap after the last round is no larger than
// after the first, and a good frame still crosses both ways afterwards.
func TestSwitchBadInput(t *testing.T) {
	plan, err := faults.Parse("drop psn=5\ndup psn=7\nrewrite set-psn=+1 psn=9")
	if err != nil {
		t.Fatal(err)
	}
	s, a, b := vmSwitch(t, Config{Plan: plan, CapturePath: filepath.Join(t.TempDir(), "s.pcapng")})
	good := roceFrame(t, 1)
	badICRC := append([]byte(nil), good...)
	badICRC[len(badICRC)-1] ^= 0x5A
	cut := good[:14+20+8+6] // Ethernet, IPv4, UDP and half a BTH
	for _, f := range [][]byte{badICRC, cut} {
		a.send(f)
		if got := b.recv(5 * time.Second); !bytes.Equal(got, f) {
			t.Fatalf("delivered %x, want %x untouched", got, f)
		}
	}

	src := rand.NewChaCha8([32]byte{17})
	r := rand.New(src)
	buf := make([]byte, 2000)
	const flood, rounds = 3000, 4
	const outer = wire.EthernetLen + wire.IPv4MinLen + wire.UDPLen
	var heap [rounds]uint64
	for round := range rounds {
		for i := range flood {
			n := i % 2000
			src.Read(buf[:n])
			if i%2 == 1 && n >= outer+wire.BTHLen {
				// An RC opcode, TVer 0, pad 0 and a transport length of
				// whole words: most of these decode.
				n = outer + (n-outer)&^3
				copy(buf, good[:outer])
				ip := wire.IPv4(buf[wire.EthernetLen:outer])
				binary.BigEndian.PutUint16(ip[2:], uint16(n-wire.EthernetLen))
				binary.BigEndian.PutUint16(buf[outer-4:], uint16(n-outer+wire.UDPLen))
				ip.SetChecksum()
				buf[outer] = byte(r.IntN(int(wire.OpRCFetchAdd) + 1))
				buf[outer+1] &= 0xC0
			}
			a.send(buf[:n])
		}
		// The kernel may drop part of a flood at a full socket buffer:
		// wait until the count stops moving, then drain VM b.
		var last uint64
		deadline := time.Now().Add(10 * time.Second)
		for {
			time.Sleep(20 * time.Millisecond)
			f := s.Stats().Frames
			if f == last {
				break
			}
			if time.Now().After(deadline) {
				t.Fatalf("the switch still takes frames after 10 s: %+v", s.Stats())
			}
			last = f
		}
		for b.recv(50*time.Millisecond) != nil {
		}
		heap[round] = heapInUse()
	}
	st := s.Stats()
	t.Logf("stats %+v, port a %+v; heap after each round %v", st, s.tr[0].Stats(), heap)
	if st.Frames < 2+flood || st.RoCE < 2 {
		t.Errorf("stats %+v: fewer frames than one round of the flood", st)
	}
	if heap[rounds-1] > heap[0]+64<<10 {
		t.Errorf("the heap grew from %d to %d bytes over %d rounds of garbage", heap[0], heap[rounds-1], rounds-1)
	}
	// The plan's rules have acted on what they matched; now the switch
	// passes a good frame each way.
	for _, d := range []struct{ from, to *fakeVM }{{a, b}, {b, a}} {
		f := roceFrame(t, 100)
		d.from.send(f)
		if got := d.to.recv(5 * time.Second); !bytes.Equal(got, f) {
			t.Fatalf("after the flood: delivered %x, want %x", got, f)
		}
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
}

// heapInUse is the live heap after a collection.
func heapInUse() uint64 {
	runtime.GC()
	var m runtime.MemStats
	runtime.ReadMemStats(&m)
	return m.HeapAlloc
}
