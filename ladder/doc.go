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
// Text, for a terminal (the go-back-N demo, Width 74):
//
//	   time   a                                                             b
//	     0s   ● RESET→INIT→RTR→RTS                       RESET→INIT→RTR→RTS ●
//	     0s   ├─ SEND_FIRST psn=100 ───────────────────────────────────────▶│
//	     0s   ├─ SEND_MIDDLE psn=101 ────────✗ rule 1                       │
//	   89ns   ├─ SEND_MIDDLE psn=102 ──────────────────────────────────────▶│
//	  178ns   ├─ SEND_LAST psn=103 A ──────────────────────────────────────▶│
//	1.178µs   │◀─────────────────────────────────── NAK(seq) psn=101 msn=0 ─┤
//	2.185µs   ├─ SEND_MIDDLE psn=101 · retx #1 after NAK ──────────────────▶│
//	2.274µs   ├─ SEND_MIDDLE psn=102 · retx #1 after NAK ──────────────────▶│
//	2.363µs   ├─ SEND_LAST psn=103 A · retx #1 after NAK ──────────────────▶│
//	3.452µs   │                                ✔ wr=1 RECV SUCCESS len=4096 ●
//	3.452µs   │◀──────────────────────────────────────── ACK psn=103 msn=1 ─┤
//	4.459µs   ● ✔ wr=2 SEND SUCCESS len=4096                                │
//
// Each row is one event, at the time on the left: ├─…▶│ a frame from the
// sender's column (├) to the receiver's; ● a note at that node. "A" marks
// an AckReq, "· …" what happened to the frame beyond its own headers.
//
// A frame is one arrow however many hops it takes: the package follows
// it through switches (switches are never columns) from the sender's
// first-hop frame-tx to the receiver's frame-rx; a datagram to a
// multicast group (QPN 0xFFFFFF), which a switch floods, is an arrow to
// each node it reaches, all from where it was sent. A frame that never
// arrives ends in ✗ with the reason ("rule 1" of the fault plan, "queue
// full", ...): half-way when it was lost at the sender, three quarters
// when beyond. The fault plan's other interventions and the sender's
// notes on retransmissions, NAKs and other odd frames are marked on the
// label: "dup by rule 2", "delayed 3µs by rule 1", "retx #1 after NAK".
// Labels shorten, and notes of one instant share a row, to fit the width;
// beyond four or so nodes the terminal drawing compresses.
//
// SVG draws the same as a standalone picture for a slide or a bug
// report: arrows slant from (sender, time sent) to (receiver, time
// received) on a time axis to scale within a burst, with a marked break
// across long idle stretches (an ACK timeout); a browser shows each
// arrow's trace lines on hover. No text covers other text (svgplace.go):
// a label slides along its arrow, or takes a shorter form, or is left to
// the tooltip; labels carry what the terminal's do ("NAK(seq) psn=2 msn=0
// · PSN 2 expected, PSN 3 received"). A legend under the drawing says
// what the colours, the dashed lines, ✗ and "A" mean. For a scenario of
// many nodes, Options.Nodes draws a chosen pair (rocesim run --nodes).
//
// Both are deterministic: the same trace and options give the same bytes.
// They read only the trace's events (the fabric's frame-* and link-*
// kinds, the NIC's qp-state, completion, timer and async-event, and a
// host's frame-loop: its own multicast datagram handed back to it, or a
// frame a node turned round itself on a direct link, off the wire, a
// note "↺ … looped back"); kinds they do not know are left out. A frame
// between two QPs of one host that a switch sent back down the host's
// link has no arrow either: it is a note at the host, "↺" and the
// arrow's label, with ✗ where it was lost. A frame that arrived and that
// its receiver's NIC threw away (rx-drop: a bad ICRC, no such QP, a QP
// no longer ready for it) is drawn in red with "dropped by NODE: why".
//
// The package is a library at the module root, not part of the CLI: rocesim
// run draws with it, and so does verbs/verbstest for a failed test's world.
// It depends on sim and wire alone (deps_test.go).
package ladder
