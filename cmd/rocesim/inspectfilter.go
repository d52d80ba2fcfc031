package main

import (
	"net/netip"
	"strings"

	"github.com/rocesim/rocesim/faults"
	"github.com/rocesim/rocesim/sim"
	"github.com/rocesim/rocesim/wire"
	"github.com/rocesim/rocesim/wire/capture"
)

// inspect -Y: selecting frames of a capture with the match keys of a
// fault plan (faults.ParseMatch, faults.Match.Matches), as tshark's -Y
// selects with a display filter. A plan judges a frame on a hop of the
// fabric (faults.Hop); a capture only has the frame and the pcapng
// interface it was written on, so the hop is rebuilt:
//
//  1. The interface: rocesim names each direction of a link "a->b" and
//     describes it "link a-b: a to b" (sim/fabric addTap), which gives
//     link= and the ends of this hop. A capture without such names (a
//     classic pcap, a real tcpdump) has no hop: link=, src=, dst= and dir=
//     then select nothing, the other keys work.
//  2. The sender: the first frame seen from an IP source address is on
//     its sender's own link (a frame reaches a switch's egress after its
//     first hop), so that interface's sending end is the node with that
//     address. A frame is on its first hop when its interface starts at
//     the node of its source address; src= is that node, dst= the node of
//     its destination address (read from a file, the capture is read
//     once before it is listed to learn every node's address; from
//     standard input, a node that has not sent yet is not known, and the
//     hop's own end stands in).
//  3. tx=: faults.Injector.CountTx on each interface, in file order: on
//     the first hop, exactly what the fabric counted when it applied a
//     plan.
//  4. from= and to= are times since the first frame, as inspect's second
//     column shows them (a rocesim capture's first frame is at virtual
//     time 0 or later; a real capture's timestamps are wall clock).

// selector is an inspect -Y filter and what it learns of the capture.
type selector struct {
	text   string
	m      faults.Match
	hostOf map[netip.Addr]string // IP address -> node (rule 2)
	tx     map[int]*faults.Injector
	ifaces map[int]ifaceEnds
}

// ifaceEnds is what a rocesim interface name says about its hop.
type ifaceEnds struct {
	link, from, to string
}

// newSelector parses filter.
func newSelector(filter string) (*selector, error) {
	m, err := faults.ParseMatch(filter)
	if err != nil {
		return nil, err
	}
	return &selector{text: filter, m: m, hostOf: map[netip.Addr]string{}, tx: map[int]*faults.Injector{}, ifaces: map[int]ifaceEnds{}}, nil
}

// ends returns the hop ends of interface i of rd (zero when it is not
// named as rocesim names them).
func (s *selector) ends(rd *capture.Reader, i int) ifaceEnds {
	if e, ok := s.ifaces[i]; ok {
		return e
	}
	var e ifaceEnds
	if ifc, ok := rd.Interface(i); ok {
		if from, to, ok := strings.Cut(ifc.Name, "->"); ok && from != "" && to != "" {
			e.from, e.to = from, to
			if l, ok := strings.CutPrefix(ifc.Description, "link "); ok {
				e.link, _, _ = strings.Cut(l, ":")
			}
		}
	}
	s.ifaces[i] = e
	return e
}

// match reports whether the frame rec, decoded into p (p.BTH nil: not
// RoCE, or not decodable), is selected. It must see every frame of the
// file, in order: it learns from each.
func (s *selector) match(rd *capture.Reader, rec *capture.Record, p *wire.Packet, sinceFirst int64) bool {
	e := s.ends(rd, rec.Interface)
	hop := faults.Hop{Link: e.link, First: true}
	var pkt *wire.Packet
	if p.BTH != nil && p.Info != nil {
		pkt = p
	}
	if (p.IPv4 != nil || p.IPv6 != nil) && e.from != "" {
		s.observe(rd, rec, p)
		src, dst := p.Src(), p.Dst()
		hop.From = s.hostOf[src]
		hop.First = hop.From == e.from
		hop.To = s.hostOf[dst]
		if hop.To == "" {
			hop.To = e.to
		}
		if pkt != nil {
			in := s.tx[rec.Interface]
			if in == nil {
				in = faults.NewInjector(nil, nil) // counts only
				s.tx[rec.Interface] = in
			}
			hop.Tx = in.CountTx(hop, pkt)
		}
	}
	return s.m.Matches(sim.Time(sinceFirst), &hop, pkt)
}

// observe learns from one frame, decoded into p, which node has its
// source address (rule 2).
func (s *selector) observe(rd *capture.Reader, rec *capture.Record, p *wire.Packet) {
	e := s.ends(rd, rec.Interface)
	if (p.IPv4 == nil && p.IPv6 == nil) || e.from == "" {
		return
	}
	if _, ok := s.hostOf[p.Src()]; !ok {
		s.hostOf[p.Src()] = e.from
	}
}

// learn reads the whole capture at path once, before the listing, so
// that a frame's dst= is known even when its addressee has not yet sent
// anything (the first frame to a node behind a switch). Standard input
// cannot be read twice: there dst= is learnt as the frames go by.
func (s *selector) learn(path string) error {
	rd, err := capture.Open(path)
	if err != nil {
		return err
	}
	defer rd.Close()
	var p wire.Packet
	for rec, err := range rd.Records() {
		if err != nil {
			return err
		}
		if rec.LinkType != capture.LinkTypeEthernet {
			continue
		}
		p = wire.Packet{}
		_ = p.DecodeHeaders(rec.Data) // the addresses are all it needs; errors are the listing's to report
		s.observe(rd, rec, &p)
	}
	return nil
}
