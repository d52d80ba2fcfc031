// Package ladder draws ladder diagrams (sequence diagrams) of a rocesim
// trace: one column per node, virtual time flowing down, an arrow for
// every frame from its sender to its receiver, and notes for what
// happened at a node: timers, QP state changes, async events,
// completions.
//
//	tr := &sim.Trace{}
//	w := verbs.NewWorld(verbs.WorldConfig{Seed: 1, Plan: plan, Trace: tr})
//	... run a scenario ...
//	ladder.Text(os.Stdout, tr, ladder.Options{Color: isTerminal})
//	ladder.SVG(file, tr, ladder.Options{}, "go-back-N: PSN 101 lost once")
//
// Text, for a terminal (the go-back-N demo, 100 columns):
//
//	   time   a                                                          b
//	     0s   ● RESET→INIT→RTR→RTS                    RESET→INIT→RTR→RTS ●
//	     0s   ├─ SEND_FIRST psn=100 ────────────────────────────────────▶│
//	     0s   ├─ SEND_MIDDLE psn=101 ─────────✗ rule 1: drop src=a psn=101 │
//	   89ns   ├─ SEND_MIDDLE psn=102 ───────────────────────────────────▶│
//	1.178µs   │◀───────────────────────────────── NAK(seq) psn=101 msn=0 ─┤
//	2.185µs   ├─ SEND_MIDDLE psn=101 · retx #1 after NAK ───────────────▶│
//	4.459µs   ● ✔ wr=2 SEND SUCCESS                                      │
//
// A frame is one arrow however many hops it takes: the package follows
// it through switches (switches are never columns) from the sender's
// first-hop frame-tx to the receiver's frame-rx. A frame that never
// arrives ends in ✗ with the reason ("rule 1" of the fault plan, "queue
// full", ...): half-way when it was lost at the sender, three quarters
// when beyond. The fault plan's other interventions and the sender's
// notes are marked on the label: "dup by rule 2", "delayed 3µs by rule
// 1", "retx #1 after NAK". Labels shorten, and notes of one instant share
// a row, to fit the width; beyond four or so nodes the terminal drawing
// compresses.
//
// SVG draws the same as a standalone picture for a slide or a bug
// report: arrows slant from (sender, time sent) to (receiver, time
// received) on a time axis to scale within a burst, with a marked break
// across long idle stretches (an ACK timeout); a browser shows each
// arrow's trace lines on hover.
//
// Both are deterministic: the same trace and options give the same bytes.
// They read only the trace's events (the fabric's frame-* and link-*
// kinds, the NIC's qp-state, completion, timer and async-event); kinds
// they do not know are left out.
package ladder
