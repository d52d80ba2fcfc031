package conformance

import (
	"fmt"
	"hash/crc32"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/rocesim/rocesim/verbs"
	"github.com/rocesim/rocesim/verbs/verbstest"
)

// TestLongMessageMatchesRxe sends a 3000-byte SEND into a 1024-byte
// receive, then a 100-byte SEND, over RC and over UC (over UD a
// 1000-byte datagram, 1040 bytes with its GRH area), on two rxe guests
// and on the model, and requires the same completions on both sides and
// the same bytes in the receiver's buffers.
//
// Real rxe (6.1) takes the overflow for a malformed WQE (its copy_data
// answers it with -EINVAL, which send_data_in maps to
// RESPST_ERR_MALFORMED_WQE, class A), not for the length error of the
// IBTA: the receive completes with LOC_QP_OP_ERR, the receiver's QP goes
// to ERR and flushes the next receive, and on RC the NAK is remote
// operational error, so the requester sees REM_OP_ERR. The first packet's
// 1024 bytes stay in the buffer (UD: the GRH area, written before the
// payload was refused).
func TestLongMessageMatchesRxe(t *testing.T) {
	for _, typ := range []string{"rc", "uc", "ud", "rc+srq", "uc+srq"} {
		t.Run(typ, func(t *testing.T) { longMessage(t, typ) })
	}
}

// longMessage runs one case; typ is rc, uc or ud, with "+srq" for a
// receiver whose QP takes its receives from an SRQ (which a QP in ERR
// does not flush; rxe 6.1 raises no LAST_WQE_REACHED then, though the
// IBTA asks for it). B's asynchronous events are compared too.
func longMessage(t *testing.T, typ string) {
	needHarness(t)
	typ, useSRQ := strings.CutSuffix(typ, "+srq")
	ports, err := FreeUDPPorts(2)
	if err != nil {
		t.Fatal(err)
	}
	const (
		mrLen      = 4096
		seedA      = 1
		seedB      = 2
		shortOff   = 3000 // in A's MR
		shortLen   = 100
		recvLen    = 1024
		secondRecv = 2048 // in B's MR
	)
	longLen := 3000
	if typ == "ud" {
		longLen = 1000 // one datagram; with the 40-byte GRH area over the receive
	}
	// The first receive's bytes are compared by CRC, but for a UD
	// receive's 40-byte GRH area, whose IPv4 header (IP ID, checksum)
	// differs between any two stacks: of it, only the byte that says an
	// IPv4 header was written there (0x45 at offset 20) is compared.
	skip := 0
	if typ == "ud" {
		skip = 40
	}
	setup := `open dev=rxe0
pd
cq depth=16
qp send=16 recv=16 sge=1 type=%s
mr len=4096 seed=%d
info gid=1
`
	setupB := setup
	if useSRQ {
		setupB = strings.Replace(setup, "qp send=16 recv=16 sge=1 type=%s", "srq max_wr=16\nqp send=16 recv=16 sge=1 type=%s srq=1", 1)
	}
	scriptA := fmt.Sprintf(setup, typ, seedA) + fmt.Sprintf(`exchange peer=$rxe_peer port=18515 role=client
connect gid=1
barrier
post_send wr_id=1 op=send off=0 len=%d
post_send wr_id=2 op=send off=%d len=%d
poll n=2 timeout_ms=60000
async
barrier`, longLen, shortOff, shortLen)
	scriptB := fmt.Sprintf(setupB, typ, seedB) + fmt.Sprintf(`post_recv wr_id=101 off=0 len=%d
post_recv wr_id=102 off=%d len=%d
exchange port=18515 role=server
connect gid=1
barrier
poll n=1 timeout_ms=60000
drain
async
dump off=20 len=1
crc off=%d len=%d
crc off=%d len=%d
barrier`, recvLen, secondRecv, recvLen, skip, recvLen-skip, secondRecv, recvLen)

	logs := t.TempDir()
	cfgs := []VMConfig{
		{Name: "A", IP: "10.0.0.1", Peer: "10.0.0.2", LocalPort: ports[0], RemotePort: ports[1], Cmd: AgentScript(scriptA), LogPath: filepath.Join(logs, "a.log"), Timeout: 5 * time.Minute},
		{Name: "B", IP: "10.0.0.2", Peer: "10.0.0.1", LocalPort: ports[1], RemotePort: ports[0], Cmd: AgentScript(scriptB), LogPath: filepath.Join(logs, "b.log"), Timeout: 5 * time.Minute},
	}
	results, errs := runVMs(t, cfgs)
	var real []string // A's completions, then B's and its CRCs, in order
	for i, cfg := range cfgs {
		evs, perr := ParseAgentOutput(results[i].Output)
		if errs[i] != nil || results[i].ExitCode != 0 || perr != nil {
			t.Fatalf("%s: exit %d, err %v, parse %v; console:\n%s", cfg.Name, results[i].ExitCode, errs[i], perr, results[i].Output)
		}
		for _, ev := range evs {
			switch ev.Event {
			case "async":
				if cfg.Name == "B" && ComparedAsync(ev.Type) {
					real = append(real, "async B "+ev.Type)
				}
			case "wc":
				real = append(real, wcLine(cfg.Name, ev.WRID, ev.Status, ev.Opcode, ev.ByteLen))
			case "crc":
				real = append(real, fmt.Sprintf("crc %d+%d %#08x", ev.Off, ev.Len, ev.CRC32))
			case "dump":
				real = append(real, "byte 20 "+ev.Hex)
			}
		}
	}

	// The model, with the same memory and the same work requests.
	w := verbstest.New(t, verbstest.Options{})
	var qa, qb *verbs.QP
	var acq, bcq *verbs.CQ
	var srq *verbs.SRQ
	var ma, mb *verbs.MR
	send := verbs.SendWR{Opcode: verbs.WRSend, Flags: verbs.SendSignaled}
	if typ == "ud" {
		ea, eb := w.UD("a", 0x11111111, verbstest.QPOptions{}), w.UD("b", 0x11111111, verbstest.QPOptions{})
		qa, qb, acq, bcq = ea.QP, eb.QP, ea.CQ, eb.CQ
		send = ea.Datagram(eb, 0x11111111)
		send.Flags = verbs.SendSignaled
	} else {
		a, b := w.Host("a"), w.Host("b")
		acq, bcq = a.CQ(16), b.CQ(16)
		qpType := verbs.QPTypeRC
		if typ == "uc" {
			qpType = verbs.QPTypeUC
		}
		mk := func(h *verbstest.Host, cq *verbs.CQ, srq *verbs.SRQ) *verbs.QP {
			qp, err := h.PD.CreateQP(verbs.QPInitAttr{SendCQ: cq, RecvCQ: cq, Type: qpType, SRQ: srq,
				Cap: verbs.QPCap{MaxSendWR: 16, MaxRecvWR: 16, MaxSendSGE: 1, MaxRecvSGE: 1}})
			if err != nil {
				t.Fatal(err)
			}
			return qp
		}
		if useSRQ {
			if srq, err = b.PD.CreateSRQ(verbs.SRQAttr{MaxWR: 16, MaxSGE: 1}); err != nil {
				t.Fatal(err)
			}
		}
		qa, qb = mk(a, acq, nil), mk(b, bcq, srq)
		w.Connect(qa, qb, verbstest.QPOptions{Type: qpType})
	}
	ma, mb = w.Host("a").Buffer(mrLen), w.Host("b").Buffer(mrLen)
	copy(ma.Bytes(), AgentPattern(seedA, mrLen))
	copy(mb.Bytes(), AgentPattern(seedB, mrLen))
	recvs := []verbs.RecvWR{{WRID: 101, SGList: []verbs.SGE{mb.SGE(0, recvLen)}},
		{WRID: 102, SGList: []verbs.SGE{mb.SGE(secondRecv, recvLen)}}}
	if srq != nil {
		_, err = srq.PostRecv(recvs)
	} else {
		_, err = qb.PostRecv(recvs)
	}
	if err != nil {
		t.Fatal(err)
	}
	long, short := send, send
	long.WRID, long.SGList = 1, []verbs.SGE{ma.SGE(0, uint64(longLen))}
	short.WRID, short.SGList = 2, []verbs.SGE{ma.SGE(shortOff, shortLen)}
	if _, err := qa.PostSend([]verbs.SendWR{long, short}); err != nil {
		t.Fatal(err)
	}
	w.Await(acq, 0)
	w.RunUntilIdle()
	var model []string
	var wc [4]verbs.WC
	for _, q := range []struct {
		node string
		cq   *verbs.CQ
	}{{"A", acq}, {"B", bcq}} {
		for n := q.cq.Poll(wc[:]); n > 0; n = q.cq.Poll(wc[:]) {
			for _, c := range wc[:n] {
				model = append(model, wcLine(q.node, c.WRID, c.Status.Name(), c.Opcode.String(), c.ByteLen))
			}
		}
	}
	for ev, ok := w.Host("b").Ctx.GetAsyncEvent(); ok; ev, ok = w.Host("b").Ctx.GetAsyncEvent() {
		if typ := "IBV_EVENT_" + ev.Type.String(); ComparedAsync(typ) {
			model = append(model, "async B "+typ)
		}
	}
	model = append(model, fmt.Sprintf("byte 20 %02x", mb.Bytes()[20]))
	for _, r := range [][2]int{{skip, recvLen - skip}, {secondRecv, recvLen}} {
		model = append(model, fmt.Sprintf("crc %d+%d %#08x", r[0], r[1], crc32.ChecksumIEEE(mb.Bytes()[r[0]:r[0]+r[1]])))
	}
	if fmt.Sprint(real) != fmt.Sprint(model) {
		t.Errorf("rxe and the model differ:\nrxe:   %q\nmodel: %q", real, model)
	}
	t.Logf("rxe and the model: %q", real)
	if qb.State() != verbs.QPStateErr {
		t.Errorf("model receiver QP in %v, want ERR", qb.State())
	}
}

// wcLine is a completion as the comparison sees it: node, wr_id and
// status, and for a success the opcode and byte_len (undefined for an
// error, ibv_poll_cq(3)); a sender's byte_len is left out, as elsewhere.
func wcLine(node string, wrid uint64, status, opcode string, byteLen uint32) string {
	s := fmt.Sprintf("wc %s %d %s", node, wrid, status)
	if status == "IBV_WC_SUCCESS" {
		s += " " + opcode
		if node == "B" {
			s += fmt.Sprintf(" byte_len=%d", byteLen)
		}
	}
	return s
}
