package faults

import (
	"slices"
	"strings"

	"github.com/rocesim/rocesim/sim"
)

// LinkChange is a moment at which a link goes down or comes back up, or a
// partition starts or heals: what the fabric traces ("link-down a-b rule 2").
type LinkChange struct {
	Time sim.Time
	// Link is the link's name, or for a partition its groups as the plan
	// writes them ("a,b|c,d").
	Link string
	// Partition is true when Link describes a partition.
	Partition bool
	// Up is true when the link comes back up (the partition heals), false
	// when it goes down (the partition starts).
	Up bool
	// Rule is the 1-based index of the event whose start or end this is.
	Rule int
	// Text is that event's canonical text.
	Text string
}

// Changes returns the moments at which link state or partitions change,
// sorted by time, then by plan order. Overlapping events on the same link
// (or the same partition) are merged: a change is listed only when
// Injector.LinkUp (or Injector.Partitioned) actually changes, so a link
// held down by two overlapping events goes down once and comes up once.
// Going down names the event that starts; coming up names the event that
// ends last.
func (p *Plan) Changes() []LinkChange {
	if p == nil {
		return nil
	}
	// One timeline per link or partition, in order of first appearance.
	type edge struct {
		t     sim.Time
		delta int // +1 an event starts, -1 one ends
		rule  int // 0-based
	}
	type timeline struct {
		name      string
		partition bool
		edges     []edge
	}
	var lines []*timeline
	find := func(name string, partition bool) *timeline {
		for _, l := range lines {
			if l.name == name && l.partition == partition {
				return l
			}
		}
		l := &timeline{name: name, partition: partition}
		lines = append(lines, l)
		return l
	}
	for i := range p.Rules {
		r := &p.Rules[i]
		var l *timeline
		switch r.Event {
		case EventDown:
			if r.After != 0 {
				continue // cut by traffic, at a time no plan can know
			}
			l = find(r.Match.Link, false)
		case EventPartition:
			l = find(groupsText(r.Groups), true)
		default:
			continue
		}
		l.edges = append(l.edges, edge{r.Match.From, +1, i})
		if r.Match.To != 0 {
			l.edges = append(l.edges, edge{r.Match.To, -1, i})
		}
	}

	var out []LinkChange
	for _, l := range lines {
		slices.SortStableFunc(l.edges, func(a, b edge) int { return cmpTime(a.t, b.t) })
		active := 0
		for j := 0; j < len(l.edges); {
			t := l.edges[j].t
			before := active
			start, end := -1, -1
			for ; j < len(l.edges) && l.edges[j].t == t; j++ {
				e := l.edges[j]
				active += e.delta
				if e.delta > 0 && start < 0 {
					start = e.rule
				}
				if e.delta < 0 && end < 0 {
					end = e.rule
				}
			}
			var rule int
			switch {
			case before == 0 && active > 0:
				rule = start
			case before > 0 && active == 0:
				rule = end
			default:
				continue
			}
			out = append(out, LinkChange{
				Time: t, Link: l.name, Partition: l.partition, Up: active == 0,
				Rule: rule + 1, Text: p.Rules[rule].String(),
			})
		}
	}
	slices.SortStableFunc(out, func(a, b LinkChange) int {
		if c := cmpTime(a.Time, b.Time); c != 0 {
			return c
		}
		return a.Rule - b.Rule
	})
	return out
}

func cmpTime(a, b sim.Time) int {
	switch {
	case a < b:
		return -1
	case a > b:
		return 1
	}
	return 0
}

// groupsText writes partition groups as the plan does: "a,b|c,d".
func groupsText(groups [][]string) string {
	parts := make([]string, len(groups))
	for i, g := range groups {
		parts[i] = strings.Join(g, ",")
	}
	return strings.Join(parts, "|")
}
