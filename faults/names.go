package faults

import (
	"fmt"
	"slices"
	"strings"
)

// CheckNames makes sure every rule names links and nodes the topology
// has: links are link names ("a-b", "a-sw"), nodes the names of its
// hosts and switches. A misspelt name would make its rule silently match
// nothing, so a driver that knows its topology when the plan is given
// (the drop-in library's ROCESIM_FAULTS, rocesim fabric with named
// nodes) refuses it instead. The error names the rule (from 1), the key
// and what the topology has.
func (p *Plan) CheckNames(links, nodes []string) error {
	if p == nil {
		return nil
	}
	for i := range p.Rules {
		r := &p.Rules[i]
		m := &r.Match
		if m.Link != "" && !slices.Contains(links, m.Link) {
			return fmt.Errorf("rule %d: link=%s: no such link (links: %s)", i+1, m.Link, strings.Join(links, ", "))
		}
		for _, c := range []struct{ key, name string }{{"src", m.Src}, {"dst", m.Dst}, {"dir", m.Dir.From}, {"dir", m.Dir.To}} {
			if c.name != "" && !slices.Contains(nodes, c.name) {
				return fmt.Errorf("rule %d: %s=: no node %q (nodes: %s)", i+1, c.key, c.name, strings.Join(nodes, ", "))
			}
		}
		for _, g := range r.Groups {
			for _, n := range g {
				if !slices.Contains(nodes, n) {
					return fmt.Errorf("rule %d: partition: no node %q (nodes: %s)", i+1, n, strings.Join(nodes, ", "))
				}
			}
		}
	}
	return nil
}
