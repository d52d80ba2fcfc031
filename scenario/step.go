package scenario

import (
	"math"
	"net/netip"
	"strings"

	"github.com/rocesim/rocesim/internal/lineformat"
	"github.com/rocesim/rocesim/nic"
	"github.com/rocesim/rocesim/sim"
)

// stepKind is what a workload step does.
type stepKind uint8

const (
	stepSend       stepKind = iota // ibv_post_send of one WR
	stepRecv                       // ibv_post_recv of one WR
	stepModify                     // ibv_modify_qp
	stepPoll                       // poll CQs (manual ones too)
	stepConnect                    // rdma_resolve_addr, rdma_resolve_route, rdma_connect (cm.go)
	stepDisconnect                 // rdma_disconnect (cm.go)
	stepRereg                      // ibv_rereg_mr of a memory region
)

// step is one "at" or "on" line.
type step struct {
	at    sim.Duration
	line  int
	times int      // times=: how many times the step is done (at) or may fire (on); 1 without it
	on    *trigger // an on line's trigger; nil for an at line
	text  string   // the line after the time, as written (for the trace)
	kind  stepKind

	qpRef ref
	qp    *qpDecl

	// send and recv
	wrID      uint64
	op        nic.WROpcode
	length    uint64
	hasLen    bool
	local     memRef
	hasLocal  bool
	remote    memRef
	hasRemote bool
	rkey      uint32
	hasRKey   bool
	badRKey   bool // rkey=invalid
	imm       uint32
	compare   uint64
	swapAdd   uint64 // swap= for cas, add= for faa
	destRef   ref
	dest      *qpDecl
	group     netip.Addr // group=: a UD send to a multicast group
	qkey      uint32
	hasQKey   bool
	flags     nic.SendFlags
	mwRef     ref             // mw=: the window a bind binds, an invalidation names, or an access goes through
	mw        *mwDecl         // mwRef resolved
	access    nic.AccessFlags // access= of op=bind: the window's rights
	hasAccess bool

	// rereg: the region is local (local.off is 0); length and reregOff
	// are the new translation, access the new rights
	rereg    nic.ReregFlags
	reregOff uint64
	otherPD  bool // pd=other: the node's second PD (pd=own: its first)

	// modify
	attr nic.QPAttr
	mask nic.QPAttrMask

	// poll: the CQs, or nil for every CQ
	pollRefs []ref
	pollCQs  []*cqDecl
}

// trigger is what an on line waits for: a completion polled from qp's
// CQs, of work request wrID (if hasWR) with status (if hasStatus).
type trigger struct {
	qpRef     ref
	qp        *qpDecl
	wrID      uint64
	hasWR     bool
	status    nic.WCStatus
	hasStatus bool
	after     sim.Duration // after=: do the step this long after the completion is polled
}

// atLine reads "at DURATION [times=N] STEP".
func (p *parser) atLine() error {
	if len(p.toks) < 3 {
		return p.errorf(p.toks[0].Col, "at needs a time and a step, e.g. at 10us a.q send wr=1 len=64")
	}
	d, err := p.duration(p.toks[1].Text, p.toks[1].Col)
	if err != nil {
		return err
	}
	if len(p.s.steps) > 0 && d < p.last {
		return p.errorf(p.toks[1].Col, "step at %v comes after a step at %v: list steps in time order", d, p.last)
	}
	if p.s.hasDeadline && d > p.s.deadline {
		return p.errorf(p.toks[1].Col, "step at %v is after the deadline %v", d, p.s.deadline)
	}
	st := &step{at: d, line: p.line, times: 1}
	rest, err := p.stepPrefix(st, p.toks[2:], nil)
	if err != nil {
		return err
	}
	if err := p.stepBody(st, rest); err != nil {
		return err
	}
	p.last = d
	p.s.steps = append(p.s.steps, st)
	return nil
}

// onLine reads "on QP [wr=N] [status=S] [times=N] [after=D] STEP": a step done
// when a completion of that QP (and work request) is polled.
func (p *parser) onLine() error {
	if len(p.toks) < 3 {
		return p.errorf(p.toks[0].Col, "on needs a QP and a step, e.g. on b.q wr=1 b.q recv wr=1 len=64")
	}
	t := p.toks[1]
	trig := &trigger{}
	var err error
	if trig.qpRef, err = p.ref(t.Text, t.Col, "the QP whose completions trigger the step"); err != nil {
		return err
	}
	st := &step{line: p.line, times: 1, on: trig}
	rest, err := p.stepPrefix(st, p.toks[2:], trig)
	if err != nil {
		return err
	}
	if err := p.stepBody(st, rest); err != nil {
		return err
	}
	p.s.ons = append(p.s.ons, st)
	return nil
}

// stepPrefix reads the key=value words before a step (times=, and for an
// on line wr= and status=) and returns the tokens of the step itself,
// which starts at the first word without '='.
func (p *parser) stepPrefix(st *step, toks []lineformat.Token, trig *trigger) ([]lineformat.Token, error) {
	n := 0
	for n < len(toks) && strings.Contains(toks[n].Text, "=") {
		n++
	}
	if n == len(toks) {
		col := p.toks[len(p.toks)-1].Col
		return nil, p.errorf(col, "expected a step (send, recv, modify, poll or rereg) after the options")
	}
	h := map[string]func(string, int) error{
		"times": func(v string, col int) error {
			x, err := p.num(v, col, "times", math.MaxInt32)
			if err == nil && x == 0 {
				err = p.errorf(col, "bad times %q: want a whole number >= 1", v)
			}
			st.times = int(x)
			return err
		},
	}
	if trig != nil {
		h["wr"] = func(v string, col int) error {
			x, err := p.num(v, col, "wr", math.MaxUint64)
			trig.wrID, trig.hasWR = x, true
			return err
		}
		h["after"] = func(v string, col int) error {
			d, err := p.duration(v, col)
			trig.after = d
			return err
		}
		h["status"] = func(v string, col int) error {
			s, err := p.status(v, col)
			trig.status, trig.hasStatus = s, true
			return err
		}
	}
	stmt := p.toks[0].Text
	if err := p.opts(stmt, toks[:n], h, nil); err != nil {
		return nil, err
	}
	st.text = strings.TrimSpace(p.raw[toks[n].Off:])
	if i := strings.IndexByte(st.text, '#'); i >= 0 {
		st.text = strings.TrimSpace(st.text[:i])
	}
	return toks[n:], nil
}

// stepBody reads the step itself: toks start at its first word.
func (p *parser) stepBody(st *step, toks []lineformat.Token) error {
	var err error
	t := toks[0]
	if t.Text == "poll" {
		st.kind = stepPoll
		for _, r := range toks[1:] {
			rr, err := p.ref(r.Text, r.Col, "a CQ or QP to poll")
			if err != nil {
				return err
			}
			st.pollRefs = append(st.pollRefs, rr)
		}
		return nil
	}
	if st.qpRef, err = p.ref(t.Text, t.Col, "a QP, a memory region (or poll)"); err != nil {
		return err
	}
	if len(toks) < 2 {
		return p.errorf(t.Col+len([]rune(t.Text)), "expected send, recv, modify, poll or rereg after %s", t.Text)
	}
	verb, rest := toks[1], toks[2:]
	switch verb.Text {
	case "send":
		err = p.sendStep(st, rest)
	case "recv":
		err = p.recvStep(st, rest)
	case "modify":
		err = p.modifyStep(st, rest)
	case "rereg":
		err = p.reregStep(st, rest)
	case "connect", "disconnect":
		err = p.cmStep(st, verb, rest)
	case "poll":
		st.kind = stepPoll
		st.pollRefs = []ref{st.qpRef}
		if len(rest) > 0 {
			err = p.errorf(rest[0].Col, "unexpected %q: %s poll polls the QP's CQs", rest[0].Text, t.Text)
		}
	default:
		err = p.errorf(verb.Col, "unknown step %q (want send, recv, modify, poll or rereg)", verb.Text)
	}
	return err
}

func (p *parser) sendStep(st *step, toks []lineformat.Token) error {
	st.kind = stepSend
	st.op = nic.WRSend
	st.flags = nic.SendSignaled
	hasWR := false
	var immCol, cmpCol, swapCol, addCol, destCol, groupCol, qkeyCol, remoteCol int
	h := map[string]func(string, int) error{
		"wr": func(v string, c int) error {
			hasWR = true
			var err error
			st.wrID, err = p.num(v, c, "wr", math.MaxUint64)
			return err
		},
		"op": func(v string, c int) error {
			o, ok := sendOps[v]
			if !ok {
				return p.errorf(c, "bad op %q: want send, send_imm, write, write_imm, read, cas, faa, send_inv, local_inv or bind", v)
			}
			st.op = o
			return nil
		},
		"len":   p.lenOpt(st),
		"local": p.localOpt(st),
		"remote": func(v string, c int) error {
			var err error
			st.remote, err = p.memRef(v, c)
			st.hasRemote = true
			remoteCol = firstCol(remoteCol, c-len("remote="))
			return err
		},
		"rkey": func(v string, c int) error {
			st.hasRKey = true
			remoteCol = firstCol(remoteCol, c-len("rkey="))
			if v == "invalid" {
				st.badRKey = true
				return nil
			}
			n, err := p.num(v, c, "rkey", math.MaxUint32)
			st.rkey = uint32(n)
			return err
		},
		"imm": func(v string, c int) error {
			immCol = c
			n, err := p.num(v, c, "imm", math.MaxUint32)
			st.imm = uint32(n)
			return err
		},
		"compare": func(v string, c int) error {
			cmpCol = c
			var err error
			st.compare, err = p.num(v, c, "compare", math.MaxUint64)
			return err
		},
		"swap": func(v string, c int) error {
			swapCol = c
			var err error
			st.swapAdd, err = p.num(v, c, "swap", math.MaxUint64)
			return err
		},
		"add": func(v string, c int) error {
			addCol = c
			var err error
			st.swapAdd, err = p.num(v, c, "add", math.MaxUint64)
			return err
		},
		"group": func(v string, c int) error {
			groupCol = c
			var err error
			st.group, err = p.group(v, c)
			return err
		},
		"dest": func(v string, c int) error {
			destCol = c
			var err error
			st.destRef, err = p.ref(v, c, "a destination QP")
			return err
		},
		"mw": func(v string, c int) error {
			var err error
			st.mwRef, err = p.ref(v, c, "a memory window")
			return err
		},
		"access": func(v string, c int) error {
			var err error
			st.access, err = p.access(v, c)
			st.hasAccess = true
			return err
		},
		"qkey": func(v string, c int) error {
			qkeyCol = c
			n, err := p.num(v, c, "qkey", math.MaxUint32)
			st.qkey, st.hasQKey = uint32(n), true
			return err
		},
	}
	flag := func(set, clear nic.SendFlags) func() error {
		return func() error { st.flags = st.flags&^clear | set; return nil }
	}
	flags := map[string]func() error{
		"signaled":   flag(nic.SendSignaled, 0),
		"unsignaled": flag(0, nic.SendSignaled),
		"fence":      flag(nic.SendFence, 0),
		"solicited":  flag(nic.SendSolicited, 0),
		"inline":     flag(nic.SendInline, 0),
	}
	if err := p.opts("send", toks, h, flags); err != nil {
		return err
	}
	sig, unsig := 0, 0
	for _, t := range toks {
		switch t.Text {
		case "signaled":
			sig = t.Col
		case "unsignaled":
			unsig = t.Col
		}
	}
	if sig > 0 && unsig > 0 {
		return p.errorf(max(sig, unsig), "send is signaled or unsignaled, not both")
	}
	if !hasWR {
		return p.errorf(p.toks[3].Col, "send needs wr=, e.g. send wr=1 op=send len=64")
	}
	atomic := st.op == nic.WRAtomicCmpAndSwp || st.op == nic.WRAtomicFetchAndAdd
	if !st.hasLen && st.op == nic.WRLocalInv {
		st.hasLen = true // no data
	}
	if !st.hasLen {
		if !atomic {
			return p.errorf(p.toks[3].Col, "send needs len= (bytes; 0 for none)")
		}
		st.length, st.hasLen = 8, true
	}
	misplaced := func(col int, key, ops string) error {
		return p.errorf(col-len(key)-1, "%s= applies only to %s", key, ops)
	}
	switch {
	case immCol > 0 && st.op != nic.WRSendWithImm && st.op != nic.WRRDMAWriteWithImm:
		return misplaced(immCol, "imm", "op=send_imm and op=write_imm")
	case cmpCol > 0 && st.op != nic.WRAtomicCmpAndSwp:
		return misplaced(cmpCol, "compare", "op=cas")
	case swapCol > 0 && st.op != nic.WRAtomicCmpAndSwp:
		return misplaced(swapCol, "swap", "op=cas")
	case addCol > 0 && st.op != nic.WRAtomicFetchAndAdd:
		return misplaced(addCol, "add", "op=faa")
	case (st.hasRemote || st.hasRKey) && (st.op == nic.WRSend || st.op == nic.WRSendWithImm || windowOp(st.op)):
		return p.errorf(remoteCol, "remote= and rkey= apply to write, write_imm, read, cas and faa")
	case windowOp(st.op) && !st.mwRef.set:
		return p.errorf(p.toks[3].Col, "op=%s needs mw=node.window", opName(st.op))
	case st.mwRef.set && (st.op == nic.WRSend || st.op == nic.WRSendWithImm):
		return p.errorf(p.toks[3].Col, "mw= applies to bind, local_inv, send_inv and to write, read and atomics through a window")
	case st.mwRef.set && st.hasRKey:
		return p.errorf(p.toks[3].Col, "mw= gives the window's R_Key: no rkey= with it")
	case st.hasAccess && st.op != nic.WRBindMW:
		return p.errorf(p.toks[3].Col, "access= applies only to op=bind")
	case destCol > 0 && st.op != nic.WRSend && st.op != nic.WRSendWithImm:
		return misplaced(destCol, "dest", "UD sends (op=send, op=send_imm)")
	case groupCol > 0 && st.op != nic.WRSend && st.op != nic.WRSendWithImm:
		return misplaced(groupCol, "group", "UD sends (op=send, op=send_imm)")
	case groupCol > 0 && destCol > 0:
		return p.errorf(groupCol, "a send goes to one QP (dest=) or to a group (group=), not both")
	case qkeyCol > 0 && destCol == 0 && groupCol == 0:
		return misplaced(qkeyCol, "qkey", "UD sends with dest= or group=")
	}
	return nil
}

// windowOp reports whether a send opcode names a window with mw=.
func windowOp(o nic.WROpcode) bool {
	return o == nic.WRBindMW || o == nic.WRLocalInv || o == nic.WRSendWithInv
}

// lenOpt parses len= of send and recv: a size up to 2 GiB.
func (p *parser) lenOpt(st *step) func(string, int) error {
	return func(v string, c int) error {
		var err error
		st.length, err = p.size(v, c, nic.MaxMessage)
		st.hasLen = true
		return err
	}
}

// localOpt parses local= of send and recv: the local buffer.
func (p *parser) localOpt(st *step) func(string, int) error {
	return func(v string, c int) error {
		var err error
		st.local, err = p.memRef(v, c)
		st.hasLocal = true
		return err
	}
}

func (p *parser) recvStep(st *step, toks []lineformat.Token) error {
	st.kind = stepRecv
	hasWR := false
	err := p.opts("recv", toks, map[string]func(string, int) error{
		"wr": func(v string, c int) error {
			hasWR = true
			var err error
			st.wrID, err = p.num(v, c, "wr", math.MaxUint64)
			return err
		},
		"len":   p.lenOpt(st),
		"local": p.localOpt(st),
	}, nil)
	if err != nil {
		return err
	}
	if !hasWR || !st.hasLen {
		return p.errorf(p.toks[3].Col, "recv needs wr= and len= (bytes; 0 for none), e.g. recv wr=1 len=4096")
	}
	return nil
}

func (p *parser) modifyStep(st *step, toks []lineformat.Token) error {
	st.kind = stepModify
	a := &st.attr
	h := p.attrHandlers(qpAttrOpts{mtu: &a.PathMTU, psn: &a.SQPSN, rqPSN: &a.RQPSN, qkey: &a.QKey, timeout: &a.Timeout,
		retry: &a.RetryCnt, rnr: &a.RNRRetry, minRNR: &a.MinRNRTimer, rd: &a.MaxRdAtomic, drd: &a.MaxDestRdAtomic,
		access: &a.QPAccessFlags, state: &a.QPState, mask: &st.mask})
	if err := p.opts("modify", toks, h, nil); err != nil {
		return err
	}
	if st.mask == 0 {
		return p.errorf(p.toks[3].Col, "modify needs an attribute, e.g. modify state=err")
	}
	return nil
}

// reregStep reads "node.mr rereg [access=A] [pd=own|other] [off=N len=N]":
// one ibv_rereg_mr of the region. Which keys are given makes the flags
// (IBV_REREG_MR_CHANGE_ACCESS, _PD, _TRANSLATION), so every rereg a
// step writes passes libibverbs' own input checks and reaches the
// device, the call rxe 6.1 refuses (rxe_verbs.c has no rereg_user_mr).
func (p *parser) reregStep(st *step, toks []lineformat.Token) error {
	st.kind = stepRereg
	st.local = memRef{ref: st.qpRef}
	st.qpRef = ref{}
	offCol := 0
	err := p.opts("rereg", toks, map[string]func(string, int) error{
		"access": func(v string, c int) error {
			var err error
			st.access, err = p.access(v, c)
			st.hasAccess = true
			st.rereg |= nic.ReregChangeAccess
			return err
		},
		"pd": func(v string, c int) error {
			switch v {
			case "own":
			case "other":
				st.otherPD = true
			default:
				return p.errorf(c, "bad pd %q: want own (the node's PD) or other (a second PD of the node)", v)
			}
			st.rereg |= nic.ReregChangePD
			return nil
		},
		"off": func(v string, c int) error {
			offCol = c
			var err error
			st.reregOff, err = p.size(v, c, nic.MaxMessage)
			return err
		},
		"len": func(v string, c int) error {
			var err error
			st.length, err = p.size(v, c, nic.MaxMessage)
			st.hasLen = true
			st.rereg |= nic.ReregChangeTranslation
			return err
		},
	}, nil)
	switch {
	case err != nil:
		return err
	case offCol > 0 && !st.hasLen:
		return p.errorf(offCol-len("off="), "off= needs len=: the new translation is [off, off+len) of the region's buffer")
	case st.hasLen && st.length == 0:
		return p.errorf(p.toks[3].Col, "rereg len=0: a translation needs at least one byte")
	case st.rereg == 0:
		return p.errorf(p.toks[3].Col, "rereg needs access=, pd= or len=, e.g. %s rereg access=local_write,remote_write", st.local.ref)
	}
	return nil
}

// firstCol returns the leftmost of two columns, 0 standing for none: an
// error about several words points at the first of them.
func firstCol(a, b int) int {
	if a == 0 || b < a {
		return b
	}
	return a
}
