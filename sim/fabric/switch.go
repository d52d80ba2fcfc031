package fabric

// Switch is a store-and-forward Ethernet switch: a frame is received
// whole, then queued at the egress port toward its destination MAC. The
// forwarding table is static, computed from the topology when traffic
// starts (no learning: addresses are configured, as ARP is not
// simulated); a frame for a group MAC (multicast, broadcast) is flooded
// out of every other linked port, as a switch without IGMP snooping
// does; a frame for an unknown unicast MAC is dropped and counted, and
// so is a runt: a frame a fault cut shorter than its Ethernet header,
// which has no destination to read (a real switch discards any frame
// under IEEE 802.3's 64-byte minimum; the fabric carries
// frames without FCS or padding, so only frames it cannot route count as
// runts here).
type Switch struct {
	name  string
	ports []*Port
	// table is the egress port toward each MAC of Fabric.macs (nil: no
	// route), indexed as they are.
	table   []*Port
	unknown uint64
	runts   uint64
}

// AddSwitch adds a switch with n ports.
func (f *Fabric) AddSwitch(name string, n int) *Switch {
	if f.started {
		panic(ErrStarted)
	}
	s := &Switch{name: name}
	for i := range n {
		s.ports = append(s.ports, &Port{owner: name, index: i, sw: s})
	}
	f.switches = append(f.switches, s)
	return s
}

// Name returns the switch's name.
func (s *Switch) Name() string { return s.name }

// Port returns port i, or nil.
func (s *Switch) Port(i int) *Port {
	if i < 0 || i >= len(s.ports) {
		return nil
	}
	return s.ports[i]
}

// UnknownDrops counts frames dropped for a destination MAC with no route.
func (s *Switch) UnknownDrops() uint64 { return s.unknown }

// RuntDrops counts frames dropped for being shorter than an Ethernet
// header (wire.EthernetLen bytes): a truncate rule of the fault plan cut
// them before the switch, and they have no destination MAC to route by.
func (s *Switch) RuntDrops() uint64 { return s.runts }

// route returns the egress port toward the MAC of index dst in
// Fabric.macs, nil if there is none.
func (s *Switch) route(dst int32) *Port {
	if dst < 0 {
		return nil
	}
	return s.table[dst]
}

// buildTable finds, for every node port's MAC, the egress port on the
// shortest path (breadth-first over links; ties go to the lower port
// index, so the table is the same on every run).
func (s *Switch) buildTable(f *Fabric) {
	s.table = make([]*Port, len(f.macs))
	dist := make([]int, len(f.macs)) // 0: not reached yet
	for _, first := range s.ports {
		if first.linked == nil {
			continue
		}
		type item struct {
			p *Port
			d int
		}
		seen := map[*Port]bool{first: true}
		queue := []item{{first.out.to, 1}}
		for len(queue) > 0 {
			it := queue[0]
			queue = queue[1:]
			if seen[it.p] {
				continue
			}
			seen[it.p] = true
			if it.p.node != nil {
				mac := f.lookupMAC(it.p.cfg.MAC)
				if best := dist[mac]; best == 0 || it.d < best {
					dist[mac] = it.d
					s.table[mac] = first
				}
				continue
			}
			for _, q := range it.p.sw.ports {
				if q.linked != nil && !seen[q] {
					seen[q] = true // leaving through q; its far end is next
					queue = append(queue, item{q.out.to, it.d + 1})
				}
			}
		}
	}
}
