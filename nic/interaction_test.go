package nic_test

import (
	"bytes"
	"flag"
	"fmt"
	"net/netip"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/rocesim/rocesim/nic"
	"github.com/rocesim/rocesim/sim"
	"github.com/rocesim/rocesim/wire"
)

// rewriteInteraction regenerates the expected output of the interaction
// scripts; the result must be reviewed before it is committed.
var rewriteInteraction = flag.Bool("rewrite", false, "rewrite the expected output in nic/testdata/interaction")

// TestInteraction runs the scripts in testdata/interaction: two devices,
// a and b, wired back to back with no delay, driven one input at a time
// in explicit virtual time (in the style of etcd-io/raft's interaction
// tests). Each block of a script is a command line, "----", and the
// output the command must produce; the comment lines above a block say
// what it shows. The commands:
//
//	new type=rc|uc|ud [profile=rxe|spec] [mtu=256..4096] [apsn=N] [bpsn=N]
//	    [retry=N] [rnr=N] [timeout=N] [minrnr=N] [rdatomic=N] [destrd=N]
//	    [cqe=N] [srq] [trace]
//	                     fresh devices, one connected QP each
//	post a|b OP [len=N] [id=N] [unsig] [inline] [fence] [badkey] [off=N] [loff=N]
//	    [add=N] [swap=N]
//	                     OP: send send-imm write write-imm read cas faa,
//	                     bind (a type 2 window over the first 4096 bytes
//	                     of the MR), local-inv and send-inv (of that
//	                     window; mwkey aims a WRITE or READ at the peer's)
//	recv a|b [len=N] [n=N] [id=N]
//	deliver [drop=i,j,...] [stop] [hold]
//	                     moves frames between the devices until neither
//	                     has any left, printing each one (numbered from
//	                     1 in this command); drop loses those, stop
//	                     delivers none and ends after the first batch;
//	                     hold leaves the frames at the port (no TxDone)
//	txdone a|b [n=N]     the port reports N held frames gone (all if no n)
//	advance [to=N]       moves time to the earliest deadline (or to N ns)
//	                     and runs the timers due
//	poll a|b             the completions, then the asynchronous events
//	bind1 a|b [write] [id=N]
//	                     a type 1 window over the first 4096 bytes of the
//	                     MR, remote read (and write) access, ibv_bind_mw
//	srqlimit a|b n=N     resizes the SRQ to 128 WRs and arms its limit at N
//	port a|b up|down     the port's state changes
//	trace a|b            the device's trace since the last trace command
//	                     (new with the trace option)
//	modify a|b STATE [sqpsn=N] [rqpsn=N]
//	                     STATE: err reset init rtr rts (rtr and rts take
//	                     the same attributes as new)
func TestInteraction(t *testing.T) {
	files, err := filepath.Glob("testdata/interaction/*.txt")
	if err != nil || len(files) == 0 {
		t.Fatalf("no scripts: %v", err)
	}
	for _, file := range files {
		t.Run(strings.TrimSuffix(filepath.Base(file), ".txt"), func(t *testing.T) {
			runScript(t, file)
		})
	}
}

// block is one command of a script with its expected output.
type block struct {
	comments []string
	line     int
	cmd      string
	want     string
}

// parseScript splits a script into blocks: comment lines, a command, a
// "----" line, and the output up to the next blank line.
func parseScript(t *testing.T, file string, text string) []block {
	var bs []block
	lines := strings.Split(text, "\n")
	var cur block
	for i := 0; i < len(lines); i++ {
		l := lines[i]
		switch {
		case strings.HasPrefix(l, "#"):
			cur.comments = append(cur.comments, l)
		case strings.TrimSpace(l) == "":
			if len(cur.comments) > 0 && cur.cmd == "" {
				cur.comments = append(cur.comments, "")
			}
		default:
			cur.cmd, cur.line = l, i+1
			if i+1 >= len(lines) || lines[i+1] != "----" {
				t.Fatalf("%s:%d: command without a ---- line", file, i+1)
			}
			i += 2
			var out []string
			for ; i < len(lines) && lines[i] != ""; i++ {
				out = append(out, lines[i])
			}
			cur.want = strings.Join(out, "\n")
			bs = append(bs, cur)
			cur = block{}
		}
	}
	return bs
}

func runScript(t *testing.T, file string) {
	text, err := os.ReadFile(file)
	if err != nil {
		t.Fatal(err)
	}
	bs := parseScript(t, file, string(text))
	var h *pair
	var rewritten strings.Builder
	for _, b := range bs {
		var got string
		if h == nil && !strings.HasPrefix(b.cmd, "new") {
			t.Fatalf("%s:%d: the first command must be new", file, b.line)
		}
		if strings.HasPrefix(b.cmd, "new") {
			h = newPair(t, parseArgs(strings.Fields(b.cmd)[1:]))
			got = "ok"
		} else {
			got = h.run(t, b.cmd)
		}
		if got == "" {
			got = "(nothing)"
		}
		for _, c := range b.comments {
			rewritten.WriteString(c + "\n")
		}
		fmt.Fprintf(&rewritten, "%s\n----\n%s\n\n", b.cmd, got)
		if !*rewriteInteraction && got != b.want {
			t.Errorf("%s:%d: %s\ngot:\n%s\nwant:\n%s", file, b.line, b.cmd, got, b.want)
		}
	}
	if *rewriteInteraction {
		out := strings.TrimRight(rewritten.String(), "\n") + "\n"
		if err := os.WriteFile(file, []byte(out), 0o644); err != nil {
			t.Fatal(err)
		}
	}
}

// args are a command's key=value arguments; a bare word maps to "".
type args map[string]string

func parseArgs(fields []string) args {
	a := args{}
	for _, f := range fields {
		k, v, _ := strings.Cut(f, "=")
		a[k] = v
	}
	return a
}

// num returns the argument k as a number, or def when it is absent.
func (a args) num(t *testing.T, k string, def uint64) uint64 {
	v, ok := a[k]
	if !ok {
		return def
	}
	n, err := strconv.ParseUint(v, 0, 64)
	if err != nil {
		t.Fatalf("argument %s=%q: %v", k, v, err)
	}
	return n
}

// side is one device of the pair with its resources.
type side struct {
	name string
	dev  *nic.Device
	ip   netip.Addr
	pd   *nic.PD
	cq   *nic.CQ
	mr   *nic.MR
	qp   *nic.QP
	ah   *nic.AH // UD: the address of the other side
	srq  *nic.SRQ
	mw   *nic.MW // a type 2 window over the first 4096 bytes of mr, once bound
	tr   *sim.Trace
	seen int // trace events already printed
	held int // frames handed to the port that it has not reported gone
	// What the device's batches held and the script has not yet used:
	// frames to deliver, asynchronous events to print at the next poll.
	frames [][]byte
	events []nic.AsyncEvent
}

// take applies the device's batches: frames wait for deliver, events for
// poll.
func (s *side) take() {
	s.frames, s.events = takeReady(s.dev, s.frames, s.events)
}

// takeReady takes the device's batches until it has nothing more, and
// appends copies of their frames and their events to frames and events.
func takeReady(d *nic.Device, frames [][]byte, events []nic.AsyncEvent) ([][]byte, []nic.AsyncEvent) {
	for d.HasReady() {
		rd := d.Ready()
		for _, f := range rd.Frames {
			frames = append(frames, bytes.Clone(f.Bytes))
		}
		events = append(events, rd.Events...)
	}
	return frames, events
}

// pair is the two devices of a script and its virtual time.
type pair struct {
	a, b *side
	now  sim.Time
	typ  nic.QPType
	opts args
}

const pairMRLen = 1 << 16

func newPair(t *testing.T, o args) *pair {
	h := &pair{opts: o}
	switch o["type"] {
	case "rc", "":
		h.typ = nic.QPTypeRC
	case "uc":
		h.typ = nic.QPTypeUC
	case "ud":
		h.typ = nic.QPTypeUD
	default:
		t.Fatalf("type=%q", o["type"])
	}
	profile := nic.ProfileRXE
	if o["profile"] == "spec" {
		profile = nic.ProfileSpec
	}
	mk := func(name string, last byte) *side {
		s := &side{name: name, ip: netip.AddrFrom4([4]byte{10, 0, 0, last})}
		s.dev = nic.New(nic.Config{Name: name, MAC: wire.MAC{2, 0, 0, 0, 0, last}, IPv4: s.ip, Profile: profile})
		var err error
		if s.pd, err = s.dev.AllocPD(); err != nil {
			t.Fatal(err)
		}
		if s.cq, err = s.dev.CreateCQ(int(o.num(t, "cqe", 256)), nil, 0); err != nil {
			t.Fatal(err)
		}
		buf := make([]byte, pairMRLen)
		for i := range buf {
			buf[i] = last + byte(i*7)
		}
		all := nic.AccessLocalWrite | nic.AccessRemoteWrite | nic.AccessRemoteRead | nic.AccessRemoteAtomic | nic.AccessMWBind
		if s.mr, err = s.dev.RegMR(s.pd, buf, all); err != nil {
			t.Fatal(err)
		}
		if _, ok := o["trace"]; ok {
			s.tr = &sim.Trace{Limit: -1}
			s.dev.SetTrace(s.tr)
		}
		if _, ok := o["srq"]; ok {
			if s.srq, err = s.dev.CreateSRQ(s.pd, nic.SRQInitAttr{MaxWR: 64, MaxSGE: 1}); err != nil {
				t.Fatal(err)
			}
		}
		s.qp, err = s.dev.CreateQP(s.pd, nic.QPInitAttr{SendCQ: s.cq, RecvCQ: s.cq, Type: h.typ, SRQ: s.srq,
			Cap: nic.QPCap{MaxSendWR: 64, MaxRecvWR: 64, MaxSendSGE: 1, MaxRecvSGE: 1, MaxInlineData: 64}})
		if err != nil {
			t.Fatal(err)
		}
		return s
	}
	h.a, h.b = mk("a", 1), mk("b", 2)
	h.a.dev.AddNeighbour(h.b.ip, wire.MAC{2, 0, 0, 0, 0, 2})
	h.b.dev.AddNeighbour(h.a.ip, wire.MAC{2, 0, 0, 0, 0, 1})
	for _, s := range []*side{h.a, h.b} {
		for _, st := range []string{"init", "rtr", "rts"} {
			if out := h.modify(t, s, st, o); out != "ok" {
				t.Fatalf("connecting %s: %s", s.name, out)
			}
		}
		if h.typ == nic.QPTypeUD {
			var err error
			s.ah, err = s.dev.CreateAH(s.pd, nic.AHAttr{IsGlobal: true, PortNum: 1,
				GRH: nic.GRH{DGID: h.other(s).ip, HopLimit: 1}})
			if err != nil {
				t.Fatal(err)
			}
		}
	}
	return h
}

func (h *pair) other(s *side) *side {
	if s == h.a {
		return h.b
	}
	return h.a
}

func (h *pair) side(t *testing.T, name string) *side {
	switch name {
	case "a":
		return h.a
	case "b":
		return h.b
	}
	t.Fatalf("no device %q", name)
	return nil
}

const pairQKey = 0x1234

// modify moves s's QP to state st; rtr and rts take their attributes
// from a, falling back to the script's new line.
func (h *pair) modify(t *testing.T, s *side, st string, a args) string {
	get := func(k string, def uint64) uint64 { return a.num(t, k, h.opts.num(t, k, def)) }
	var attr nic.QPAttr
	var mask nic.QPAttrMask
	psnKey := map[*side][2]string{h.a: {"apsn", "bpsn"}, h.b: {"bpsn", "apsn"}}[s]
	switch st {
	case "err":
		attr.QPState, mask = nic.QPStateErr, nic.QPAttrState
	case "reset":
		attr.QPState, mask = nic.QPStateReset, nic.QPAttrState
	case "init":
		attr = nic.QPAttr{QPState: nic.QPStateInit, PortNum: 1}
		mask = nic.QPAttrState | nic.QPAttrPKeyIndex | nic.QPAttrPort
		if h.typ == nic.QPTypeUD {
			attr.QKey, mask = pairQKey, mask|nic.QPAttrQKey
		} else {
			attr.QPAccessFlags = nic.AccessRemoteWrite | nic.AccessRemoteRead | nic.AccessRemoteAtomic
			mask |= nic.QPAttrAccessFlags
		}
	case "rtr":
		attr.QPState, mask = nic.QPStateRTR, nic.QPAttrState
		if h.typ != nic.QPTypeUD {
			attr.PathMTU = nic.MTU(map[uint64]int{256: 1, 512: 2, 1024: 3, 2048: 4, 4096: 5}[get("mtu", 1024)])
			attr.DestQPNum = h.other(s).qp.Num()
			attr.RQPSN = uint32(a.num(t, "rqpsn", h.opts.num(t, psnKey[1], 0)))
			attr.AHAttr = nic.AHAttr{IsGlobal: true, PortNum: 1, GRH: nic.GRH{DGID: h.other(s).ip, HopLimit: 1}}
			mask |= nic.QPAttrAV | nic.QPAttrPathMTU | nic.QPAttrDestQPN | nic.QPAttrRQPSN
		}
		if h.typ == nic.QPTypeRC {
			attr.MaxDestRdAtomic, attr.MinRNRTimer = uint8(get("destrd", get("rdatomic", 4))), uint8(get("minrnr", 1))
			mask |= nic.QPAttrMaxDestRdAtomic | nic.QPAttrMinRNRTimer
		}
	case "rts":
		attr = nic.QPAttr{QPState: nic.QPStateRTS, SQPSN: uint32(a.num(t, "sqpsn", h.opts.num(t, psnKey[0], 0)))}
		mask = nic.QPAttrState | nic.QPAttrSQPSN
		if h.typ == nic.QPTypeRC {
			attr.Timeout, attr.RetryCnt, attr.RNRRetry = uint8(get("timeout", 14)), uint8(get("retry", 7)), uint8(get("rnr", 7))
			attr.MaxRdAtomic = uint8(get("rdatomic", 4))
			mask |= nic.QPAttrTimeout | nic.QPAttrRetryCnt | nic.QPAttrRNRRetry | nic.QPAttrMaxQPRdAtomic
		}
	default:
		t.Fatalf("modify to %q", st)
	}
	if err := s.dev.ModifyQP(h.now, s.qp, &attr, mask); err != nil {
		return "error: " + err.Error()
	}
	return "ok"
}

// run executes one command other than new and returns its output.
func (h *pair) run(t *testing.T, cmd string) string {
	f := strings.Fields(cmd)
	switch f[0] {
	case "post":
		return h.post(t, h.side(t, f[1]), f[2], parseArgs(f[3:]))
	case "recv":
		s, a := h.side(t, f[1]), parseArgs(f[2:])
		n := a.num(t, "n", 1)
		for i := range n {
			wr := []nic.RecvWR{{WRID: a.num(t, "id", 100) + i,
				SGList: []nic.SGE{{Addr: s.mr.Addr + pairMRLen/2, Length: uint32(a.num(t, "len", 4096)), LKey: s.mr.LKey}}}}
			var err error
			if s.srq != nil {
				_, err = s.dev.PostSRQRecv(s.srq, wr)
			} else {
				_, err = s.dev.PostRecv(h.now, s.qp, wr)
			}
			if err != nil {
				return "error: " + err.Error()
			}
		}
		return "ok"
	case "deliver":
		return h.deliver(t, parseArgs(f[1:]))
	case "advance":
		a := parseArgs(f[1:])
		next := min(h.a.dev.NextDeadline(), h.b.dev.NextDeadline())
		if _, ok := a["to"]; ok {
			next = sim.Time(a.num(t, "to", 0))
		}
		if next == sim.Never {
			return "no deadline"
		}
		h.now = next
		h.a.dev.Advance(h.now)
		h.b.dev.Advance(h.now)
		return fmt.Sprintf("t=%v", h.now)
	case "poll":
		return h.poll(h.side(t, f[1]))
	case "txdone":
		s := h.side(t, f[1])
		n := int(parseArgs(f[2:]).num(t, "n", uint64(s.held)))
		for range min(n, s.held) {
			s.dev.TxDone(h.now)
		}
		s.held -= min(n, s.held)
		return fmt.Sprintf("%d frames still at the port", s.held)
	case "bind1":
		// A type 1 window, bound with ibv_bind_mw (through s's QP).
		s, a := h.side(t, f[1]), parseArgs(f[2:])
		mw, err := s.dev.AllocMW(s.pd, nic.MWType1)
		if err != nil {
			return "error: " + err.Error()
		}
		s.mw = mw
		acc := nic.AccessRemoteRead
		if _, ok := a["write"]; ok {
			acc |= nic.AccessRemoteWrite
		}
		err = s.dev.Bind(h.now, s.qp, mw, a.num(t, "id", 60), nic.SendSignaled,
			nic.BindInfo{MR: s.mr, Addr: s.mr.Addr, Length: 4096, Access: acc})
		if err != nil {
			return "error: " + err.Error()
		}
		return "ok"
	case "srqlimit":
		s := h.side(t, f[1])
		lim := uint32(parseArgs(f[2:]).num(t, "n", 0))
		if err := s.dev.ModifySRQ(s.srq, nic.SRQInitAttr{SRQLimit: lim, MaxWR: 128}, nic.SRQAttrLimit|nic.SRQAttrMaxWR); err != nil {
			return "error: " + err.Error()
		}
		return "ok"
	case "port":
		h.side(t, f[1]).dev.SetPortState(h.now, f[2] == "up")
		return "ok"
	case "trace":
		s := h.side(t, f[1])
		ev := s.tr.Events()
		out := strings.Split(strings.TrimRight(s.tr.Text(), "\n"), "\n")
		if s.seen > len(out) || len(ev) == 0 {
			return ""
		}
		out, s.seen = out[s.seen:], len(out)
		return strings.Join(out, "\n")
	case "modify":
		return h.modify(t, h.side(t, f[1]), f[2], parseArgs(f[3:]))
	}
	t.Fatalf("unknown command %q", cmd)
	return ""
}

func (h *pair) post(t *testing.T, s *side, op string, a args) string {
	peer := h.other(s)
	n := uint32(a.num(t, "len", 64))
	wr := nic.SendWR{WRID: a.num(t, "id", 1), Flags: nic.SendSignaled,
		SGList:     []nic.SGE{{Addr: s.mr.Addr + a.num(t, "loff", 0), Length: n, LKey: s.mr.LKey}},
		RemoteAddr: peer.mr.Addr + a.num(t, "off", 0), RKey: peer.mr.RKey, ImmData: 0x11223344}
	if n == 0 {
		wr.SGList = nil // a zero-length message has no SGE
	}
	if _, ok := a["unsig"]; ok {
		wr.Flags = 0
	}
	if _, ok := a["inline"]; ok {
		wr.Flags |= nic.SendInline
	}
	if _, ok := a["fence"]; ok {
		wr.Flags |= nic.SendFence
	}
	if _, ok := a["mwkey"]; ok {
		wr.RKey = peer.mw.RKey // the peer's window instead of its MR
	}
	if _, ok := a["badkey"]; ok {
		wr.RKey ^= 0x80000000
	}
	switch op {
	case "send":
		wr.Opcode = nic.WRSend
	case "send-imm":
		wr.Opcode = nic.WRSendWithImm
	case "write":
		wr.Opcode = nic.WRRDMAWrite
	case "send-inv":
		wr.Opcode, wr.InvalidateRKey = nic.WRSendWithInv, peer.mw.RKey
	case "local-inv":
		wr.Opcode, wr.InvalidateRKey, wr.SGList = nic.WRLocalInv, s.mw.RKey, nil
	case "bind":
		if s.mw == nil {
			mw, err := s.dev.AllocMW(s.pd, nic.MWType2)
			if err != nil {
				return "error: " + err.Error()
			}
			s.mw = mw
		}
		wr.Opcode, wr.SGList = nic.WRBindMW, nil
		wr.BindMW = nic.BindMW{MW: s.mw, RKey: nic.IncRKey(s.mw.RKey), BindInfo: nic.BindInfo{MR: s.mr,
			Addr: s.mr.Addr, Length: 4096, Access: nic.AccessRemoteWrite | nic.AccessRemoteRead}}
	case "write-imm":
		wr.Opcode = nic.WRRDMAWriteWithImm
	case "read":
		wr.Opcode = nic.WRRDMARead
	case "cas", "faa":
		wr.Opcode, wr.CompareAdd, wr.Swap = nic.WRAtomicFetchAndAdd, a.num(t, "add", 1), a.num(t, "swap", 0)
		if op == "cas" {
			wr.Opcode = nic.WRAtomicCmpAndSwp
		}
		wr.SGList[0].Length = 8
	default:
		t.Fatalf("post %q", op)
	}
	if h.typ == nic.QPTypeUD {
		wr.AH, wr.RemoteQPN, wr.RemoteQKey = s.ah, peer.qp.Num(), pairQKey
	}
	if _, err := s.dev.PostSend(h.now, s.qp, []nic.SendWR{wr}); err != nil {
		return "error: " + err.Error()
	}
	if op == "bind" {
		// As an application does for a type 2 window: the new R_Key is
		// the one the bind WR named (ibv_inc_rkey on mw->rkey).
		s.mw.RKey = wr.BindMW.RKey
	}
	return "ok"
}

// deliver moves frames until neither device has one left.
func (h *pair) deliver(t *testing.T, a args) string {
	drop := map[int]bool{}
	if d := a["drop"]; d != "" {
		for _, s := range strings.Split(d, ",") {
			i, err := strconv.Atoi(s)
			if err != nil {
				t.Fatalf("drop=%q", d)
			}
			drop[i] = true
		}
	}
	_, stop := a["stop"]
	_, hold := a["hold"]
	var out []string
	count := 0
	for rounds := 0; ; rounds++ {
		h.a.take()
		h.b.take()
		if len(h.a.frames)+len(h.b.frames) == 0 {
			break
		}
		if rounds > 10000 {
			t.Fatal("the devices never go quiet")
		}
		for _, s := range []*side{h.a, h.b} {
			s.take()
			frames := s.frames
			s.frames = nil
			if hold {
				s.held += len(frames)
			} else {
				for range frames {
					s.dev.TxDone(h.now) // the port took it at once
				}
			}
			for _, f := range frames {
				count++
				line := fmt.Sprintf("%d %s->%s %s", count, s.name, h.other(s).name, describeFrame(t, f))
				if drop[count] || stop {
					line += " (dropped)"
				} else {
					h.other(s).dev.Receive(h.now, f)
				}
				out = append(out, line)
			}
		}
		if stop {
			break
		}
	}
	return strings.Join(out, "\n")
}

// describeFrame is one frame on one line: opcode, PSN, AckReq, the
// extension headers that matter, payload length.
func describeFrame(t *testing.T, f []byte) string {
	var p wire.Packet
	if err := p.Decode(f); err != nil {
		t.Fatalf("a device sent a bad frame: %v", err)
	}
	var b strings.Builder
	fmt.Fprintf(&b, "%s psn=%d", p.BTH.Opcode(), p.BTH.PSN())
	if p.BTH.AckReq() {
		b.WriteString(" ack")
	}
	if p.RETH != nil {
		fmt.Fprintf(&b, " dmalen=%d", p.RETH.DMALength())
	}
	if p.AETH != nil {
		fmt.Fprintf(&b, " %s msn=%d", p.AETH.Syndrome(), p.AETH.MSN())
	}
	if p.AtomicAckETH != nil {
		fmt.Fprintf(&b, " orig=%#x", p.AtomicAckETH.OrigRemoteData())
	}
	if p.ImmDt != nil {
		b.WriteString(" imm")
	}
	if len(p.Payload) > 0 {
		fmt.Fprintf(&b, " len=%d", len(p.Payload))
	}
	return b.String()
}

// poll lists s's completions, then its asynchronous events.
func (h *pair) poll(s *side) string {
	var out []string
	wcs := make([]nic.WC, 16)
	for n := s.cq.Poll(wcs); n > 0; n = s.cq.Poll(wcs) {
		for _, wc := range wcs[:n] {
			line := fmt.Sprintf("wc id=%d %s %s", wc.WRID, wc.Opcode, wc.Status)
			if wc.Status == nic.WCSuccess {
				line += fmt.Sprintf(" len=%d", wc.ByteLen)
			}
			if wc.WCFlags&nic.WCFlagWithImm != 0 {
				line += fmt.Sprintf(" imm=%#x", wc.ImmData)
			}
			// The flag an invalidating receive carries depends on the
			// profile (rxe's lands on IBV_WC_IP_CSUM_OK), so name it.
			switch {
			case wc.WCFlags&nic.WCFlagWithInv != 0:
				line += " inv=IBV_WC_WITH_INV"
			case wc.WCFlags&nic.WCFlagIPCSumOK != 0:
				line += " inv=IBV_WC_IP_CSUM_OK"
			}
			out = append(out, line)
		}
	}
	s.take()
	for _, e := range s.events {
		out = append(out, "event "+e.Type.String())
	}
	s.events = s.events[:0]
	out = append(out, "state "+s.qp.State().String())
	return strings.Join(out, "\n")
}
