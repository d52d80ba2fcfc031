package scenario

import (
	"strings"

	"github.com/rocesim/rocesim/faults"
	"github.com/rocesim/rocesim/internal/lineformat"
	"github.com/rocesim/rocesim/nic"
)

// resolve is the second pass: references, implicit CQs, and the checks
// that need the whole file.
func (p *parser) resolve() error {
	s := p.s
	for _, n := range s.nodes {
		if n.attached == nil {
			p.line = n.line
			return p.errorf(1, "node %s is on no link or switch", n.name)
		}
	}
	for _, q := range s.qps {
		if err := p.resolveQP(q); err != nil {
			return err
		}
	}
	if err := p.resolveCM(); err != nil {
		return err
	}
	for _, q := range s.qps {
		if qpNeedsPeer(q, q.state) && q.peer == nil {
			p.line = q.line
			return p.errorf(1, "%v QP %s needs a peer (peer=node.qp), or state=reset|init until a modify step", q.typ, q)
		}
	}
	// CQs, node by node: the declared ones, then each QP's own.
	for _, n := range s.nodes {
		for _, q := range n.qps {
			if q.sendCQ == nil {
				size := q.cqSize
				if size == 0 {
					// What the queues can hold, as rxe sizes them
					// (a power of two less one each): the CQ
					// cannot overflow.
					size = int(nic.RXEQueueSlots(q.maxSendWR) + nic.RXEQueueSlots(q.maxRecvWR))
				}
				c := &cqDecl{node: n, name: q.name + "/cq", line: q.line, size: size, implicit: true}
				n.cqs = append(n.cqs, c)
				q.sendCQ, q.recvCQ = c, c
			}
		}
		for _, c := range n.cqs {
			c.idx = len(s.cqs)
			s.cqs = append(s.cqs, c)
		}
	}
	for _, f := range p.faults {
		if err := p.checkFault(f); err != nil {
			return err
		}
	}
	for _, st := range s.steps {
		if err := p.resolveStep(st); err != nil {
			return err
		}
	}
	for _, st := range s.ons {
		q, err := p.lookupQP(st.on.qpRef)
		if err != nil {
			return err
		}
		st.on.qp = q
		if err := p.resolveStep(st); err != nil {
			return err
		}
	}
	for _, e := range s.expects {
		if err := p.resolveExpect(e); err != nil {
			return err
		}
	}
	return nil
}

// at makes r's position the current one, for errorf.
func (p *parser) at(r ref) int {
	p.line = r.line
	return r.col
}

// lookupQP resolves node.qp.
func (p *parser) lookupQP(r ref) (*qpDecl, error) {
	col := p.at(r)
	n, ok := p.nodes[r.node]
	if !ok {
		return nil, p.errorf(col, "unknown node %q", r.node)
	}
	for _, q := range n.qps {
		if q.name == r.name {
			return q, nil
		}
	}
	return nil, p.errorf(col, "unknown QP %s (declare it with qp %s rc|uc|ud)", r, r)
}

// lookupCQ resolves the CQ node.name declared by a cq line.
func (p *parser) lookupCQ(r ref) (*cqDecl, error) {
	col := p.at(r)
	if n, ok := p.nodes[r.node]; ok {
		for _, c := range n.cqs {
			if c.name == r.name {
				return c, nil
			}
		}
	}
	return nil, p.errorf(col, "unknown CQ %s (declare it with cq %s size=N)", r, r)
}

// lookupMem resolves node.mr+off.
func (p *parser) lookupMem(m *memRef) error {
	col := p.at(m.ref)
	if n, ok := p.nodes[m.node]; ok {
		for _, mr := range n.mrs {
			if mr.name == m.name {
				m.mr = mr
				return nil
			}
		}
	}
	return p.errorf(col, "unknown memory region %s (declare it with mr %s size=N)", m.ref, m.ref)
}

func (p *parser) resolveQP(q *qpDecl) error {
	if q.sendCQRef.set {
		c, err := p.lookupCQ(q.sendCQRef)
		if err != nil {
			return err
		}
		q.sendCQ = c
	}
	if q.recvCQRef.set {
		c, err := p.lookupCQ(q.recvCQRef)
		if err != nil {
			return err
		}
		q.recvCQ = c
	}
	if (q.sendCQ == nil) != (q.recvCQ == nil) {
		p.line = q.line
		return p.errorf(1, "QP %s names one CQ: give both send_cq= and recv_cq=, or cq=, or neither", q)
	}
	if q.sendCQ != nil && q.cqSize != 0 {
		p.line = q.line
		return p.errorf(1, "QP %s: cq_size= sizes the QP's own CQ; size a declared CQ on its cq line", q)
	}
	if q.peerRef.set {
		peer, err := p.lookupQP(q.peerRef)
		if err != nil {
			return err
		}
		col := p.at(q.peerRef)
		switch {
		case peer == q:
			return p.errorf(col, "QP %s cannot be its own peer", q)
		case peer.node == q.node:
			return p.errorf(col, "QP %s and its peer %s are on the same node (loopback is not simulated)", q, peer)
		case peer.typ != q.typ:
			return p.errorf(col, "QP %s is %v but its peer %s is %v", q, q.typ, peer, peer.typ)
		case peer.node.attached != q.node.attached:
			return p.errorf(col, "nodes %s and %s are not on the same link or switch", q.node.name, peer.node.name)
		case peer.peer != nil && peer.peer != q:
			return p.errorf(col, "QP %s is already the peer of %s", peer, peer.peer)
		case peer.peerRef.set && (peer.peerRef.node != q.node.name || peer.peerRef.name != q.name):
			return p.errorf(col, "QP %s names %s as its peer, not %s", peer, peer.peerRef, q)
		}
		q.peer, peer.peer = peer, q
	}
	return nil
}

// qpNeedsPeer reports whether a QP must have a peer by the time it
// reaches state st.
func qpNeedsPeer(q *qpDecl, st nic.QPState) bool {
	return q.typ != nic.QPTypeUD && st >= nic.QPStateRTR
}

func (p *parser) resolveStep(st *step) error {
	if st.kind == stepPoll {
		for _, r := range st.pollRefs {
			col := p.at(r)
			n, ok := p.nodes[r.node]
			if !ok {
				return p.errorf(col, "unknown node %q", r.node)
			}
			var found []*cqDecl
			for _, c := range n.cqs {
				if c.name == r.name {
					found = append(found, c)
				}
			}
			for _, q := range n.qps {
				if q.name == r.name {
					found = append(found, q.sendCQ)
					if q.recvCQ != q.sendCQ {
						found = append(found, q.recvCQ)
					}
				}
			}
			if len(found) == 0 {
				return p.errorf(col, "unknown CQ or QP %s", r)
			}
			st.pollCQs = append(st.pollCQs, found...)
		}
		return nil
	}
	if st.kind == stepRereg {
		if err := p.lookupMem(&st.local); err != nil {
			return err
		}
		if st.hasLen && st.reregOff+st.length > st.local.mr.size {
			return p.errorf(p.at(st.local.ref), "rereg off=%d len=%d is past the end of %s (%d bytes): the new translation is a part of the region's buffer",
				st.reregOff, st.length, st.local.ref, st.local.mr.size)
		}
		return nil
	}
	q, err := p.lookupQP(st.qpRef)
	if err != nil {
		return err
	}
	st.qp = q
	col := p.at(st.qpRef)
	if st.kind == stepConnect || st.kind == stepDisconnect {
		return p.resolveCMStep(st, q, col)
	}
	if st.kind == stepModify {
		if st.mask&nic.QPAttrState != 0 && qpNeedsPeer(q, st.attr.QPState) && q.peer == nil {
			return p.errorf(col, "QP %s has no peer to connect to (peer=node.qp on its qp line)", q)
		}
		return nil
	}
	if st.hasLocal {
		if err := p.lookupMem(&st.local); err != nil {
			return err
		}
		if st.local.mr.node != q.node {
			return p.errorf(st.local.col, "local buffer %s is not on node %s", st.local.ref, q.node.name)
		}
	} else if st.length > 0 {
		if len(q.node.mrs) == 0 {
			return p.errorf(col, "node %s has no memory region for the %d bytes (declare one: mr %s.buf size=N)", q.node.name, st.length, q.node.name)
		}
		st.local = memRef{mr: q.node.mrs[0], ref: ref{node: q.node.name, name: q.node.mrs[0].name}}
	}
	if st.kind != stepSend {
		return nil
	}
	switch q.typ {
	case nic.QPTypeUC:
		switch st.op {
		case nic.WRRDMARead, nic.WRAtomicCmpAndSwp, nic.WRAtomicFetchAndAdd:
			return p.errorf(col, "UC QP %s cannot %s: UC has SEND and WRITE only", q, opName(st.op))
		}
	case nic.QPTypeUD:
		if st.op != nic.WRSend && st.op != nic.WRSendWithImm {
			return p.errorf(col, "UD QP %s cannot %s: UD has SEND only", q, opName(st.op))
		}
		if st.group.IsValid() {
			return nil // to every QP in the group, on every node the switch floods it to
		}
		if !st.destRef.set {
			return p.errorf(col, "a send on UD QP %s needs dest=node.qp or group=address", q)
		}
		d, err := p.lookupQP(st.destRef)
		if err != nil {
			return err
		}
		c := p.at(st.destRef)
		if d.typ != nic.QPTypeUD {
			return p.errorf(c, "dest %s is not a UD QP", d)
		}
		if d.node == q.node || d.node.attached != q.node.attached {
			return p.errorf(c, "dest %s is not on another node of %s's link or switch", d, q.node.name)
		}
		st.dest = d
		return nil
	}
	if st.destRef.set {
		return p.errorf(p.at(st.destRef), "dest= is for UD QPs; %s sends to its peer", q)
	}
	if st.mwRef.set {
		if err := p.resolveMW(st, q); err != nil {
			return err
		}
	}
	switch st.op {
	case nic.WRSend, nic.WRSendWithImm, nic.WRSendWithInv, nic.WRLocalInv, nic.WRBindMW:
		return nil
	}
	if st.hasRemote {
		if err := p.lookupMem(&st.remote); err != nil {
			return err
		}
		if q.peer != nil && st.remote.mr.node != q.peer.node {
			return p.errorf(st.remote.col, "remote buffer %s is not on %s, the node of %s's peer", st.remote.ref, q.peer.node.name, q)
		}
		return nil
	}
	if q.peer == nil {
		return p.errorf(col, "QP %s has no peer whose memory %s could target", q, opName(st.op))
	}
	if len(q.peer.node.mrs) == 0 {
		return p.errorf(col, "node %s has no memory region for %s to target (declare one: mr %s.buf size=N)", q.peer.node.name, opName(st.op), q.peer.node.name)
	}
	st.remote = memRef{mr: q.peer.node.mrs[0], ref: ref{node: q.peer.node.name, name: q.peer.node.mrs[0].name}}
	return nil
}

// resolveMW resolves a send step's mw=: a window of the posting node for
// bind and local_inv, of the peer's node for send_inv and accesses.
func (p *parser) resolveMW(st *step, q *qpDecl) error {
	col := p.at(st.mwRef)
	n, ok := p.nodes[st.mwRef.node]
	if ok {
		for _, w := range n.mws {
			if w.name == st.mwRef.name {
				st.mw = w
			}
		}
	}
	if st.mw == nil {
		return p.errorf(col, "unknown memory window %s (declare it with mw %s type=2)", st.mwRef, st.mwRef)
	}
	local := st.op == nic.WRBindMW || st.op == nic.WRLocalInv
	switch {
	case local && st.mw.node != q.node:
		return p.errorf(col, "op=%s names a window of %s's own node, not %s", opName(st.op), q, st.mwRef)
	case !local && (q.peer == nil || st.mw.node != q.peer.node):
		return p.errorf(col, "window %s is not on the node of %s's peer", st.mwRef, q)
	}
	return nil
}

// opName spells a WR opcode as op= takes it.
func opName(o nic.WROpcode) string {
	switch o {
	case nic.WRSend:
		return "send"
	case nic.WRSendWithImm:
		return "send_imm"
	case nic.WRRDMAWrite:
		return "write"
	case nic.WRRDMAWriteWithImm:
		return "write_imm"
	case nic.WRRDMARead:
		return "read"
	case nic.WRAtomicCmpAndSwp:
		return "cas"
	case nic.WRAtomicFetchAndAdd:
		return "faa"
	case nic.WRSendWithInv:
		return "send_inv"
	case nic.WRLocalInv:
		return "local_inv"
	case nic.WRBindMW:
		return "bind"
	}
	return o.String()
}

func (p *parser) resolveExpect(e *expectation) error {
	switch e.kind {
	case expectWR, expectCompletions, expectState:
		q, err := p.lookupQP(e.qpRef)
		if err != nil {
			return err
		}
		e.qp, e.node = q, q.node
	case expectCMEvents:
		q, err := p.lookupQP(e.qpRef)
		if err != nil {
			return err
		}
		if q.cm == cmNone {
			return p.errorf(p.at(e.qpRef), "QP %s is not connected through CM (cm= on its qp line): it has no CM events", q)
		}
		e.qp, e.node = q, q.node
	case expectEvent, expectEvents, expectCounter:
		if e.hasQPInRef {
			q, err := p.lookupQP(e.qpRef)
			if err != nil {
				return err
			}
			e.qp, e.node = q, q.node
			return nil
		}
		n, ok := p.nodes[e.nodeName]
		if !ok {
			p.line = e.line
			return p.errorf(e.nodeCol, "unknown node %q", e.nodeName)
		}
		e.node = n
	case expectMem, expectRereg:
		if err := p.lookupMem(&e.mem); err != nil {
			return err
		}
		if e.equals.set {
			return p.lookupMem(&e.equals)
		}
	}
	return nil
}

// faultDecl is a fault line, kept to check its names against the
// topology once the whole file is read.
type faultDecl struct {
	line int
	rule faults.Rule
	toks []lineformat.Token
}

// linkNames returns the names of the scenario's links, as the fabric
// names them: "a-b" for link a b, "a-sw" for node a on switch sw.
func (s *Scenario) linkNames() []string {
	var out []string
	for _, l := range s.links {
		if l.sw == "" {
			out = append(out, l.nodes[0].name+"-"+l.nodes[1].name)
			continue
		}
		for _, n := range l.nodes {
			out = append(out, n.name+"-"+l.sw)
		}
	}
	return out
}

// checkFault makes sure a fault rule names links and nodes that exist: a
// misspelt name would make the rule silently match nothing.
func (p *parser) checkFault(f faultDecl) error {
	p.line = f.line
	col := func(key string) int {
		for _, t := range f.toks {
			if strings.HasPrefix(t.Text, key) {
				return t.Col + len(key)
			}
		}
		return f.toks[0].Col
	}
	m := f.rule.Match
	if m.Link != "" {
		names := p.s.linkNames()
		found := false
		for _, n := range names {
			found = found || n == m.Link
		}
		if !found {
			return p.errorf(col("link="), "no link %q in this scenario (links: %s)", m.Link, strings.Join(names, ", "))
		}
	}
	for _, c := range []struct{ key, name string }{{"src=", m.Src}, {"dst=", m.Dst}, {"dir=", m.Dir.From}, {"dir=", m.Dir.To}} {
		if _, ok := p.nodes[c.name]; c.name != "" && !ok {
			return p.errorf(col(c.key), "no node %q in this scenario", c.name)
		}
	}
	for _, g := range f.rule.Groups {
		for _, n := range g {
			if _, ok := p.nodes[n]; !ok {
				return p.errorf(col("partition")+1, "no node %q in this scenario", n)
			}
		}
	}
	return nil
}
