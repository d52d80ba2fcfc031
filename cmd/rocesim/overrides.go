package main

// run's --set and --fault: a teacher varies a scenario without editing
// it. Both rewrite the scenario's text and parse it again, so a value is
// checked by exactly the code that checks the same value written in the
// file, and --json, --pcap and the ladder show the run that happened.
//
//  1. --set TARGET.KEY=VALUE finds the declarations TARGET names (link:
//     every link and switch line; NODE.NAME: the qp, mr, cq or mw line
//     that declares it), replaces the word KEY=... on that line, or adds
//     KEY=VALUE at its end (before any comment).
//  2. --fault RULE appends "fault RULE": rule N+1 after the file's N.
//  3. Parse the new text under the file's name. An error on a line a flag
//     wrote names the flag, not a line the user cannot see.

import (
	"errors"
	"fmt"
	"slices"
	"strings"

	"github.com/rocesim/rocesim/internal/lineformat"
	"github.com/rocesim/rocesim/scenario"
)

// setUsage lists, for --help and for errors, the attributes --set takes.
const setUsage = `link.delay, link.bandwidth, link.mtu, link.queue
                      (every link and switch line); NODE.QP.timeout,
                      .retry_cnt, .rnr_retry, .min_rnr_timer, .psn, .mtu,
                      .max_rd_atomic, .cq_size (any key of a qp line);
                      NODE.MR.size, .fill (of an mr line)`

// listFlag is a repeatable string flag (--set, --fault).
type listFlag []string

// String returns the values given, joined, for the flag package.
func (l *listFlag) String() string { return strings.Join(*l, " ") }

// Set appends one value.
func (l *listFlag) Set(v string) error { *l = append(*l, v); return nil }

// declStatements are the statements whose second word is the NODE.NAME
// --set addresses.
var declStatements = []string{"qp", "mr", "cq", "mw"}

// applyOverrides returns sc with the --set and --fault flags applied (sc
// itself when there are none).
func applyOverrides(sc *scenario.Scenario, sets, faultRules []string) (*scenario.Scenario, error) {
	if len(sets) == 0 && len(faultRules) == 0 {
		return sc, nil
	}
	lines := strings.Split(sc.Text, "\n")
	byLine := map[int]string{} // 1-based line -> the flag that wrote it
	for _, s := range sets {
		flagText := "--set " + s
		target, key, val, err := splitSet(s)
		if err != nil {
			return nil, fmt.Errorf("%s: %v", flagText, err)
		}
		var hit []int
		var names []string // the declarations there are, for the error
		for i, raw := range lines {
			toks := lineformat.Tokenize(strings.TrimSuffix(raw, "\r"))
			if len(toks) < 2 {
				continue
			}
			stmt := toks[0].Text
			switch {
			case target == "link" && (stmt == "link" || stmt == "switch"):
			case slices.Contains(declStatements, stmt):
				names = append(names, toks[1].Text)
				if toks[1].Text != target {
					continue
				}
			default:
				continue
			}
			lines[i] = setWord(strings.TrimSuffix(raw, "\r"), toks, key, val)
			byLine[i+1] = flagText
			hit = append(hit, i)
		}
		if len(hit) == 0 {
			if target == "link" {
				return nil, fmt.Errorf("%s: the scenario has no link or switch line", flagText)
			}
			return nil, fmt.Errorf("%s: no qp, mr, cq or mw %s in the scenario (it declares %s); --set takes %s",
				flagText, target, strings.Join(names, ", "), strings.Join(strings.Fields(setUsage), " "))
		}
	}
	if n := len(lines); n > 0 && lines[n-1] == "" {
		lines = lines[:n-1]
	}
	for _, f := range faultRules {
		lines = append(lines, "fault "+f)
		byLine[len(lines)] = "--fault " + f
	}
	out, err := scenario.Parse(sc.File, strings.Join(lines, "\n")+"\n")
	var pe *scenario.ParseError
	if errors.As(err, &pe) {
		if flagText, ok := byLine[pe.Line]; ok {
			return nil, fmt.Errorf("%s: %s (on line %d as it then reads: %s)", flagText, pe.Msg, pe.Line, strings.TrimSpace(strings.SplitN(lines[pe.Line-1], "#", 2)[0]))
		}
	}
	return out, err
}

// splitSet splits "a.q.retry_cnt=7" into ("a.q", "retry_cnt", "7") and
// "link.delay=10us" into ("link", "delay", "10us").
func splitSet(s string) (target, key, val string, err error) {
	lhs, val, ok := strings.Cut(s, "=")
	dot := strings.LastIndexByte(lhs, '.')
	if !ok || val == "" || dot <= 0 || dot == len(lhs)-1 || strings.ContainsAny(s, " \t#") {
		return "", "", "", errors.New("want TARGET.KEY=VALUE, e.g. a.q.retry_cnt=7 or link.delay=10us")
	}
	return lhs[:dot], lhs[dot+1:], val, nil
}

// setWord returns line with its word key=... replaced by key=val, or with
// key=val added after its last word.
func setWord(line string, toks []lineformat.Token, key, val string) string {
	word := key + "=" + val
	for _, t := range toks[2:] {
		if k, _, _, ok := t.KeyValue(); ok && k == key {
			return line[:t.Off] + word + line[t.Off+len(t.Text):]
		}
	}
	last := toks[len(toks)-1]
	end := last.Off + len(last.Text)
	return line[:end] + " " + word + line[end:]
}
