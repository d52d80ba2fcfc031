package conformance

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/rocesim/rocesim/faults"
	"github.com/rocesim/rocesim/rswitch"
	"github.com/rocesim/rocesim/wire"
)

// capturedFrame is one RoCE v2 frame of a switch capture.
type capturedFrame struct {
	index   int   // record number in the file
	time    int64 // wall clock, nanoseconds since the Unix epoch
	iface   int
	op      string
	qp      uint32
	psn     wire.PSN
	ackReq  bool
	aeth    bool
	syn     wire.Syndrome
	comment string
}

func (f capturedFrame) String() string {
	s := fmt.Sprintf("#%d if%d qp=%#x %s psn=%s", f.index, f.iface, f.qp, f.op, f.psn)
	if f.ackReq {
		s += " ackreq"
	}
	if f.aeth {
		s += " aeth=" + f.syn.String()
	}
	if f.comment != "" {
		s += " [" + f.comment + "]"
	}
	return s
}

// readRoCE returns the RoCE v2 frames of the capture at path, and how many
// frames it holds in all.
func readRoCE(t *testing.T, path string) ([]capturedFrame, int) {
	t.Helper()
	recs := readRecords(t, path)
	var out []capturedFrame
	var p wire.Packet
	for i, rec := range recs {
		if p.DecodeHeaders(rec.Data) != nil {
			continue
		}
		f := capturedFrame{index: i + 1, time: rec.Time, iface: rec.Interface, op: p.Info.Name, qp: p.BTH.DestQP(),
			psn: p.BTH.PSN(), ackReq: p.BTH.AckReq(), comment: strings.Join(rec.Comments, "; ")}
		if p.AETH != nil {
			f.aeth, f.syn = true, p.AETH.Syndrome()
		}
		out = append(out, f)
	}
	return out, len(recs)
}

// TestRxeGoBackNThroughSwitch runs ibv_rc_pingpong between two rxe VMs
// through the fault switch, which drops the first transmission of the
// first SEND_MIDDLE once. The receiver must answer the next packet with a
// PSN sequence error NAK for the dropped PSN, and the sender must resend
// from that PSN (go-back-N, IBTA vol. 1 9.7.5.1.3 and C9-110).
func TestRxeGoBackNThroughSwitch(t *testing.T) {
	needHarness(t)
	ports, err := FreeUDPPorts(2)
	if err != nil {
		t.Fatal(err)
	}
	// rxe draws its initial PSNs at random, so the plan names the
	// packet by opcode, not by PSN: 4-packet messages at MTU 1024 are
	// FIRST, MIDDLE, MIDDLE, LAST, and the first MIDDLE is lost once.
	const planText = "drop op=RC_SEND_MIDDLE tx=1 first=1"
	plan, err := faults.Parse(planText)
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	pcap := filepath.Join(dir, "rxe_go_back_n.pcapng")
	sw, err := NewSwitch([2]int{ports[0], ports[1]}, rswitch.Config{Plan: plan, CapturePath: pcap})
	if err != nil {
		t.Fatal(err)
	}
	defer sw.Close()

	pingpong := `ibv_rc_pingpong -d rxe0 -g $RXE_GID -n 2 -s 4096 -m 1024`
	server := pingpong
	client := `n=0; until ping -c1 -W1 $rxe_peer >/dev/null 2>&1; do n=$((n+1)); [ $n -ge 60 ] && exit 98; done
n=0; until ` + pingpong + ` $rxe_peer; do n=$((n+1)); [ $n -ge 30 ] && exit 99; sleep 1; done`
	cfgs := []VMConfig{
		{Name: "server", IP: "10.0.0.1", Peer: "10.0.0.2", LocalPort: ports[0], RemotePort: switchPort(sw, 0), Cmd: server, LogPath: filepath.Join(dir, "server.log"), Timeout: 5 * time.Minute},
		{Name: "client", IP: "10.0.0.2", Peer: "10.0.0.1", LocalPort: ports[1], RemotePort: switchPort(sw, 1), Cmd: client, LogPath: filepath.Join(dir, "client.log"), Timeout: 5 * time.Minute},
	}
	results, errs := runVMs(t, cfgs)
	if err := sw.Close(); err != nil {
		t.Fatal(err)
	}
	st := sw.Stats()
	t.Logf("switch: %+v; capture %s", st, pcap)
	if d := os.Getenv("ROCESIM_CONFORMANCE_SAVE"); d != "" {
		if fi, err := os.Stat(d); err == nil && fi.IsDir() {
			data, err := os.ReadFile(pcap)
			if err == nil {
				err = os.WriteFile(filepath.Join(d, filepath.Base(pcap)), data, 0o644)
			}
			if err != nil {
				t.Error(err)
			} else {
				t.Logf("capture saved to %s", filepath.Join(d, filepath.Base(pcap)))
			}
		}
	}
	for i, cfg := range cfgs {
		r := results[i]
		t.Logf("%s: READY after %v, exit %d", cfg.Name, r.Ready.Round(time.Millisecond), r.ExitCode)
		if errs[i] != nil || r.ExitCode != 0 {
			t.Errorf("%s: exit %d, err %v; console:\n%s", cfg.Name, r.ExitCode, errs[i], r.Output)
			continue
		}
		if !strings.Contains(r.Output, "2 iters in") {
			t.Errorf("%s: output lacks %q; console:\n%s", cfg.Name, "2 iters in", r.Output)
		}
	}

	frames, total := readRoCE(t, pcap)
	t.Logf("capture: %d frames, %d RoCE v2", total, len(frames))
	for _, f := range frames {
		t.Logf("%8.3fms %v", float64(f.time-frames[0].time)/1e6, f)
	}
	var dropped []capturedFrame
	for _, f := range frames {
		if strings.HasPrefix(f.comment, "dropped by rule ") {
			dropped = append(dropped, f)
		}
	}
	if len(dropped) != 1 {
		t.Fatalf("capture holds %d dropped frames, want 1: %v", len(dropped), dropped)
	}
	d := dropped[0]
	if want := "dropped by rule 1: " + planText; d.comment != want || d.op != "RC_SEND_MIDDLE" {
		t.Errorf("dropped frame %v, want an RC_SEND_MIDDLE commented %q", d, want)
	}
	// The NAK goes the other way, to the sender's QP, and carries the
	// PSN the receiver expected: the dropped one.
	nak := -1
	for j, f := range frames {
		if f.index > d.index && f.iface != d.iface && f.aeth && f.syn.IsNAK() &&
			f.syn.NAKCode() == wire.NAKPSNSequenceError && f.psn == d.psn {
			nak = j
			break
		}
	}
	if nak < 0 {
		t.Fatalf("no PSN sequence error NAK for PSN %s after the drop", d.psn)
	}
	t.Logf("NAK: %v", frames[nak])
	retx := -1
	for j := nak + 1; j < len(frames); j++ {
		f := frames[j]
		if f.iface == d.iface && f.qp == d.qp && f.psn == d.psn {
			retx = j
			break
		}
	}
	if retx < 0 {
		t.Fatalf("no retransmission of PSN %s after the NAK", d.psn)
	}
	if f := frames[retx]; f.op != d.op || f.comment != "" {
		t.Errorf("retransmission %v, want a forwarded %s", f, d.op)
	}
	t.Logf("retransmission: %v", frames[retx])
}
