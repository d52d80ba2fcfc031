package conformance

import (
	"encoding/hex"
	"fmt"
	"hash/crc32"
	"path/filepath"
	"testing"
	"time"
)

// TestAgentSendWrite runs the verbs agent in two rxe VMs on one link. B
// posts two receives; A sends 3000 bytes, then RDMA-writes 5000 bytes
// with immediate data into B's MR. Both sides' completions, and B's MR
// after them, must be what the verbs specify (IBTA vol. 1 chapter 11).
func TestAgentSendWrite(t *testing.T) {
	needHarness(t)
	ports, err := FreeUDPPorts(2)
	if err != nil {
		t.Fatal(err)
	}
	const (
		mrLen    = 16384
		seedA    = 1
		seedB    = 2
		sendLen  = 3000
		writeOff = 4096 // in A's MR
		writeLen = 5000
		writeDst = 8192 // in B's MR
		imm      = 0x12345678
	)
	setup := `open dev=rxe0
pd
cq depth=16
qp send=16 recv=16 sge=1
mr len=16384 seed=%d
info gid=$RXE_GID
`
	connect := `connect gid=$RXE_GID timeout=14 retry=7 rnr_retry=7 min_rnr=12
barrier
`
	scriptA := fmt.Sprintf(setup, seedA) + `exchange peer=$rxe_peer port=18515 role=client
` + connect + `post_send wr_id=1 op=send off=0 len=3000
post_send wr_id=2 op=write_imm off=4096 len=5000 roff=8192 imm=0x12345678
poll n=2 timeout_ms=60000
barrier`
	scriptB := fmt.Sprintf(setup, seedB) + `post_recv wr_id=101 off=0 len=4096
post_recv wr_id=102 off=16000 len=16
exchange port=18515 role=server
` + connect + `poll n=2 timeout_ms=60000
crc off=0 len=16384
dump off=2992 len=16
dump off=8184 len=16
dump off=13184 len=16
barrier`

	logs := t.TempDir()
	cfgs := []VMConfig{
		{Name: "A", IP: "10.0.0.1", Peer: "10.0.0.2", LocalPort: ports[0], RemotePort: ports[1], Cmd: AgentScript(scriptA), LogPath: filepath.Join(logs, "a.log"), Timeout: 5 * time.Minute},
		{Name: "B", IP: "10.0.0.2", Peer: "10.0.0.1", LocalPort: ports[1], RemotePort: ports[0], Cmd: AgentScript(scriptB), LogPath: filepath.Join(logs, "b.log"), Timeout: 5 * time.Minute},
	}
	results, errs := runVMs(t, cfgs)

	events := make([][]AgentEvent, len(cfgs))
	for i, cfg := range cfgs {
		r := results[i]
		t.Logf("%s: READY after %v, exit %d", cfg.Name, r.Ready.Round(time.Millisecond), r.ExitCode)
		evs, perr := ParseAgentOutput(r.Output)
		if errs[i] != nil || r.ExitCode != 0 || perr != nil {
			t.Fatalf("%s: exit %d, err %v, parse %v; console:\n%s", cfg.Name, r.ExitCode, errs[i], perr, r.Output)
		}
		for _, ev := range evs {
			switch ev.Event {
			case "info":
				t.Logf("%s: local qpn=%#x psn=%#x gid=%s", cfg.Name, ev.QPN, ev.PSN, ev.GID)
			case "wc":
				t.Logf("%s: wc wr_id=%d %s %s byte_len=%d imm=%#x", cfg.Name, ev.WRID, ev.Status, ev.Opcode, ev.ByteLen, ev.Imm)
			case "crc":
				t.Logf("%s: crc32 of MR %d+%d = %#08x", cfg.Name, ev.Off, ev.Len, ev.CRC32)
			}
		}
		events[i] = evs
	}

	wantWC := [][]AgentEvent{
		{
			{WRID: 1, Status: "IBV_WC_SUCCESS", Opcode: "IBV_WC_SEND", ByteLen: 0},
			{WRID: 2, Status: "IBV_WC_SUCCESS", Opcode: "IBV_WC_RDMA_WRITE", ByteLen: 0},
		},
		{
			{WRID: 101, Status: "IBV_WC_SUCCESS", Opcode: "IBV_WC_RECV", ByteLen: sendLen},
			{WRID: 102, Status: "IBV_WC_SUCCESS", Opcode: "IBV_WC_RECV_RDMA_WITH_IMM", ByteLen: writeLen, Imm: imm},
		},
	}
	for i, cfg := range cfgs {
		var got []AgentEvent
		for _, ev := range events[i] {
			if ev.Event == "wc" {
				got = append(got, ev)
			}
		}
		if len(got) != len(wantWC[i]) {
			t.Errorf("%s: %d completions, want %d: %+v", cfg.Name, len(got), len(wantWC[i]), got)
			continue
		}
		for j, w := range wantWC[i] {
			g := got[j]
			// A sender's byte_len is not defined (ibv_poll_cq(3)); rxe
			// leaves the message length there, so it is not compared.
			if g.WRID != w.WRID || g.Status != w.Status || g.Opcode != w.Opcode || g.Imm != w.Imm ||
				(i == 1 && g.ByteLen != w.ByteLen) {
				t.Errorf("%s: completion %d = %+v, want wr_id=%d %s %s byte_len=%d imm=%#x",
					cfg.Name, j, g, w.WRID, w.Status, w.Opcode, w.ByteLen, w.Imm)
			}
		}
	}

	// B's MR: its own pattern, with the SEND's payload at 0 and the
	// WRITE's at writeDst.
	patA := AgentPattern(seedA, mrLen)
	want := AgentPattern(seedB, mrLen)
	copy(want, patA[:sendLen])
	copy(want[writeDst:], patA[writeOff:writeOff+writeLen])
	var sawCRC bool
	for _, ev := range events[1] {
		switch ev.Event {
		case "crc":
			sawCRC = true
			if w := crc32.ChecksumIEEE(want[ev.Off : ev.Off+ev.Len]); ev.CRC32 != w {
				t.Errorf("B: MR crc32 of %d+%d = %#08x, want %#08x", ev.Off, ev.Len, ev.CRC32, w)
			}
		case "dump":
			if w := hex.EncodeToString(want[ev.Off : ev.Off+uint64(len(ev.Hex)/2)]); ev.Hex != w {
				t.Errorf("B: MR at %d = %s, want %s", ev.Off, ev.Hex, w)
			}
		}
	}
	if !sawCRC {
		t.Error("B printed no crc")
	}
}
