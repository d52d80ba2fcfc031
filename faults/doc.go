// Package faults holds fault plans as data and the pure decision function
// that applies them: given (time, hop, frame), what happens to the frame.
// The fabric (sim/fabric) asks; it also carries out the verdict. Nothing
// here reads a clock, starts a goroutine or draws from global randomness:
// the same plan, seed and traffic give the same verdicts.
//
// # A plan
//
//	# lose the first transmission of request PSN 2; its retransmission
//	# passes (without class=request, the NAK asking for PSN 2 again,
//	# which carries PSN 2 too, would be lost as well)
//	drop class=request psn=2 tx=1
//	# slow ACKs down now and then
//	delay 50us class=ack prob=0.1
//	# turn the third ACK into a PSN sequence error NAK
//	rewrite set-syndrome=nak-seq class=ack nth=3 first=1
//	down link=a-sw from=1ms to=3ms
//	partition a|b from=5ms to=6ms
//
// Used like this (the fabric does it for every frame on every hop):
//
//	plan, err := faults.Parse(text)                  // or build a faults.Plan in Go
//	in := faults.NewInjector(plan, seeds.Stream("faults"))
//	hop := faults.Hop{Link: "a-sw", From: "a", To: "b", First: true}
//	hop.Tx = in.CountTx(hop, pkt)                    // first hop only, before Decide
//	v := in.Decide(now, hop, frame, pkt)             // pkt: frame after wire DecodeHeaders, or nil
//	// v.Action: Pass, Drop, Duplicate (v.Copies), Delay (v.Delay),
//	// Reorder (v.Hold), Truncate (v.Len), Corrupt, Rewrite (frame changed in place)
//	// v.String(): "dropped by rule 1: drop psn=2 tx=1"
//
// # Evaluation
//
// Rules are numbered from 1 in plan order, frame rules and link events
// together (the N-th non-blank, non-comment line is rule N); Verdict.Rule,
// LinkChange.Rule and Injector.Hits use that number.
//
// For one frame on one hop, Decide first checks the link events: a down
// event whose link is the hop's link and whose window holds now, or an
// active partition with Hop.From and Hop.To in different groups, returns
// Drop with Rule pointing at that event. This is the one path for link
// drops; it applies on every hop, and frame rules never see such a frame.
// LinkUp and Partitioned give the same answers for other uses (frames
// already on a wire, status displays), and Plan.Changes lists the moments
// the answers change.
//
// Then the frame rules are tried in plan order, and the FIRST one whose
// match holds acts; later rules do not see that frame on that hop. A rule
// without link= is judged only on a frame's first hop (Hop.First); a rule
// with link=X only on hops over link X, every one of them. So a rule's
// counters and random draws happen once per frame, never once per hop
// (link=X names one link, which a frame crosses once).
//
// A rule's match holds when, in this order:
//
//  1. every deterministic key holds (link dir src dst qp op class cm psn tx
//     from to);
//  2. the action applies to the frame: corrupt byte=N needs a frame longer
//     than N bytes, truncate a frame longer than the new length, rewrite a
//     RoCE frame (set-syndrome= and set-msn= also need an AETH);
//  3. the stateful keys pass, each evaluated only for frames that passed
//     everything before it: nth=N counts such frames and passes the N-th,
//     2N-th, ...; prob=P draws rng.Float64() and passes if it is < P;
//     first=N passes the first N frames that got this far, and once those
//     are spent the rule neither counts nor draws again.
//
// So the random stream is consumed only by frames that match a prob=
// rule's other keys, identically across runs with the same traffic, and
// "prob=0.1 first=3" means "three random frames, then no more".
//
// What the counting keys count, with examples (RC SEND of 4 packets,
// PSNs 1-4, the second lost once, so the requester resends 2, 3, 4):
//
//	tx=1        the first transmission of its PSN: 1, 2, 3, 4 (not the
//	            resent 2, 3, 4, which are tx=2). tx= is per PSN, not
//	            per message: "tx=1 op=RC_SEND_MIDDLE" matches BOTH
//	            middle packets, each being its PSN's first transmission.
//	first=1     only the first frame that passes every other key: with
//	            op=RC_SEND_MIDDLE, the first middle packet (PSN 2) and
//	            never another, retransmissions included. "the first
//	            one" is first=1, not tx=1.
//	nth=2       every second frame that passes the deterministic keys:
//	            "drop class=ack nth=2" loses the 2nd, 4th, ... ACK.
//	nth=3 first=1  the third such frame, and that one only.
//	tx=2 first=1   the first retransmission of any PSN, once.
//	psn=2 tx=1  PSN 2's first transmission, and the first response
//	            that carries PSN 2: an ACK of it, or the NAK that asks
//	            for it again after it was lost. "class=request psn=2
//	            tx=1" is the usual "lose one packet once" (its
//	            retransmission passes).
//
// Counters belong to the rule (nth=, first=) or to the PSN (tx=); a
// frame that an earlier rule already acted on is not seen by later
// rules, so it advances none of their counters.
//
// If pkt is nil (the frame is not RoCE v2), the keys that read the packet
// (qp op class cm psn tx) do not match; link, node, time and stateful keys
// still can.
//
// # Transmission counting
//
// CountTx numbers the transmissions of each PSN per (sender, addressee,
// destination QPN, requests or responses): 1 the first time, 2 for the
// retransmission, ... The fabric calls it once per frame on the frame's
// first hop, before Decide, and carries the number in Hop.Tx to later
// hops, so "drop class=request psn=2 tx=1" loses the first transmission
// only. CNPs are
// counted apart from both directions; ACKs count as responses, so a
// repeated ACK of the same PSN is tx=2. Memory is bounded (2^16 PSNs per
// flow, 2^18 flows, 2^24 counters in all); past a bound a flow is
// forgotten, one that has not sent lately before one in use
// (Injector.TxEvictions counts them), and a forgotten flow's next frame
// of any PSN is tx=1 again. Whoever shows a run's fault statistics shows
// the evictions and warns that tx= rules may have misjudged
// (fabric.Fabric.TxEvictions, scenario.Result.TxEvictions, rswitch
// Stats.TxEvictions); Injector.LimitTx lowers the bounds.
//
// # Text format
//
// One rule per line. '#' starts a comment that runs to the end of the
// line; blank lines are ignored. A line is a verb followed by
// white-space-separated words, most of them key=value; keys may come in
// any order but not twice. String prints the canonical form: the verb,
// its arguments, then the match keys in the order of the table below,
// defaults left out; Parse(p.String()) gives a plan equal to p, and a
// canonical text prints back unchanged.
//
//	plan      = { line "\n" } .
//	line      = [ rule ] [ "#" comment ] .
//	rule      = "drop"                              { key }
//	          | "dup" [ "n=" count ]                { key }   (extra copies, default 1)
//	          | "delay" duration                    { key }
//	          | "reorder" "n=" count                { key }
//	          | "corrupt" [ "byte=" num ] [ "bit=" 0..7 ] { key }
//	          | "truncate" ( "len=" count | "cut=" count ) [ fix ] { key }
//	          | "rewrite" assignment { assignment } [ fix ] { key }
//	          | "down" "link=" name [ "from=" duration ] ( [ "to=" duration ] | "after=" count )
//	          | "partition" groups  [ "from=" duration ] [ "to=" duration ] .
//	assignment = "set-psn=" delta | "set-msn=" delta | "set-syndrome=" syndrome
//	          | "set-opcode=" opcode | "set-qp=" delta | "set-rkey=" delta32
//	          | "set-va=" delta64 | "set-dmalen=" delta32 | "set-qkey=" delta32
//	          | "set-imm=" delta32 | "set-pad=" 0..3 | "set-ecn=" ecn .
//	fix       = "fix=all" | "fix=none" .             (default all)
//	delta32   = like delta, 32 bits; delta64 = like delta, 64 bits .
//	ecn       = "not-ect" | "ect1" | "ect0" | "ce" | 0..3 .
//	opcode    = an opcode name (RC_RDMA_READ_REQUEST) | num .  (0..255, reserved ones too)
//	delta     = num | "+" num | "-" num .            (24 bits; + and - add modulo 2^24)
//	syndrome  = "ack" | "nak-seq" | "nak-invalid" | "nak-access" | "nak-op"
//	          | "nak-rd" | "rnr-" 0..31 | num .       (0x1F 0x60 0x61 0x62 0x63 0x64 0x20+N)
//	groups    = nodes "|" nodes { "|" nodes } .       (no node twice)
//	nodes     = name { "," name } .
//	name      = letters, digits and _ . : / -  (never '>', '=', ',', '|', '#', space)
//	num       = decimal | "0x" hex .
//	count     = num >= 1 .
//	duration  = decimal [ "." decimal ] ( "ns" | "us" | "µs" | "ms" | "s" ) | "0" .
//
// Match keys (all optional, ANDed):
//
//	link=NAME      only hops over this link (otherwise: the frame's first hop only)
//	dir=A->B       sent by A and addressed to B (Hop.From, Hop.To)
//	src=NODE       sent by NODE
//	dst=NODE       addressed to NODE
//	qp=N           BTH destination QPN (printed as 0x hex)
//	op=NAME        BTH opcode by wire name (RC_SEND_ONLY, case-insensitive) or number
//	class=C        request     SEND, WRITE, READ request, CMP_SWAP, FETCH_ADD (RC, UC, UD;
//	                           the CM's MADs too, UD SENDs to QP1: with rdma_cm, count
//	                           data with qp= or op=, and CM messages with cm=)
//	               response    ACKNOWLEDGE, READ responses, ATOMIC_ACKNOWLEDGE
//	               ack         ACKNOWLEDGE with a positive syndrome
//	               nak         ACKNOWLEDGE with a NAK syndrome (not RNR)
//	               rnr         ACKNOWLEDGE with an RNR NAK syndrome
//	               read-response  RDMA READ response first/middle/last/only
//	               atomic      CMP_SWAP, FETCH_ADD, ATOMIC_ACKNOWLEDGE
//	               ud          UD transport
//	               cnp         congestion notification packet
//	cm=MSG         a CM MAD (a UD SEND to QP1) carrying MSG: REQ, MRA, REJ, REP, RTU,
//	               DREQ, DREP, LAP, APR, SIDR_REQ or SIDR_REP (case-insensitive); a
//	               MAD sent again is a new datagram with a new PSN, so count its
//	               sendings with first=
//	psn=N, psn=N-M one PSN, or N through M wrap-aware (at most 2^23 PSNs)
//	tx=K           the K-th transmission of the PSN (Hop.Tx)
//	from=T, to=T   at or after T, before T (simulated time since the start)
//	nth=N          every N-th frame that matched the keys above
//	prob=P         with probability P, 0 < P <= 1
//	first=N        only the first N frames that passed everything else
//
// Action arguments:
//
//	drop             discard the frame as it enters the link: it takes no
//	                 time on the wire, and the sender's next frame leaves
//	                 when it would have had this one never been sent (a
//	                 port or switch that discards it). A frame lost on the
//	                 wire itself, which occupies the link and is thrown
//	                 away by its receiver, is "corrupt": the receiver's NIC
//	                 drops it on its ICRC (the ladder: "dropped by B").
//	dup n=N          send the frame and N extra copies (default 1)
//	delay D          hold the frame D before it enters the link (D > 0)
//	reorder n=N      hold the frame until N later frames entered the same link direction
//	corrupt          flip bit 0 of the first ICRC byte: the frame fails its ICRC;
//	                 bit=B flips bit B (0 least significant) instead; byte=N flips a bit of
//	                 byte N of the Ethernet frame (0-based; outside the ICRC-covered bytes
//	                 other checks fail first, e.g. the IPv4 checksum). A non-RoCE frame
//	                 without byte= gets its last byte flipped.
//	truncate len=N   cut the frame to N bytes (Verdict.Len = N);
//	truncate cut=N   cut N bytes off its end (Verdict.Len = length - N).
//	                 By default (fix=all) a RoCE frame's headers then describe
//	                 what is left: IP total (or payload) length, UDP length,
//	                 IPv4 checksum, and the last 4 bytes left become a valid
//	                 ICRC (a non-zero UDP checksum too); the pad count is left
//	                 as it was. fix=none leaves them stale: the IP length
//	                 then says more than the frame holds, and the receiver's
//	                 IP layer drops it.
//	rewrite set-psn=N | set-psn=+N | set-psn=-N | set-syndrome=S | set-msn=N | +N | -N
//	        set-opcode=OP
//	                 rewrite BTH PSN, AETH syndrome, AETH MSN, BTH opcode in place and
//	                 recompute the ICRC (and a non-zero UDP checksum): a valid ghost frame.
//	                 The set- prefix keeps these apart from the psn= match key.
//	                 set-opcode= moves no byte: the headers and payload that follow
//	                 the BTH stay, so a WRITE_ONLY made a READ request keeps its
//	                 RETH and still carries its payload, and a reserved opcode (a
//	                 number rocesim has no name for) can be sent. It is what the
//	                 receiver's opcode and length checks are tested with.
//	        set-qp=N         BTH destination QPN (24 bits; +N, -N add)
//	        set-rkey=N       R_Key of the RETH, or of the AtomicETH (32 bits)
//	        set-va=N         virtual address of the RETH or AtomicETH (64 bits)
//	        set-dmalen=N     DMA length of the RETH (32 bits)
//	        set-qkey=N       Q_Key of the DETH (32 bits)
//	        set-imm=N        immediate data (32 bits)
//	        set-pad=N        BTH pad count (0..3); the frame's bytes stay, so the
//	                         receiver takes N more (or fewer) of them for pad
//	        set-ecn=CE       the IP header's ECN codepoint (RFC 3168): ce marks
//	                         congestion as a switch would; the ICRC does not
//	                         cover it, the IPv4 header checksum does
//	                 A rewrite applies only to a frame that carries every field
//	                 it assigns (set-dmalen= a RETH, set-qkey= a DETH, ...);
//	                 for another frame the rule does not match. Several
//	                 assignments may share a rule. Every change is made in
//	                 place before the frame is queued, so the capture shows
//	                 the frame as it was sent on. By default (fix=all) the
//	                 IPv4 header checksum, the ICRC and a non-zero UDP
//	                 checksum are recomputed: a valid frame carrying a wrong
//	                 field, which reaches the receiver's transport checks.
//	                 fix=none recomputes nothing: the frame fails its ICRC
//	                 (or, after set-ecn= over IPv4, its IP checksum) first.
//
// Link events take only their own keys:
//
//	down link=NAME [from=T] [to=T]       no frame enters NAME in [from, to); no to= is forever
//	down link=NAME [from=T] after=K      NAME carries the first K RoCE frames that enter it
//	                                     (from T on, both directions, every hop over it), then
//	                                     is down for good: a cable pulled after the K-th frame.
//	                                     The cut is traced and reported (port events) when the
//	                                     K-th frame enters; Plan.Changes cannot list it. The
//	                                     cut counts as one of the rule's Hits, each drop after
//	                                     it as another.
//	partition A,B|C,D [from=T] [to=T]    frames between nodes of different groups are
//	                                     dropped, in both directions; unlisted nodes are
//	                                     not affected
//
// # Errors
//
// Parse returns a *ParseError whose text is "line:col: message", both
// 1-based, col counting characters and pointing at the offending token
// (at the verb when something is missing). For example:
//
//	lose psn=2         1:1: unknown action "lose" (want drop, dup, delay, reorder, corrupt, truncate, rewrite, down or partition)
//	drop pns=2         1:6: unknown key "pns"
//	drop psn=2 psn=3   1:12: duplicate key "psn"
//	drop psn=x         1:6: bad psn "x": want a number (decimal or 0x hex)
//	drop psn=          1:6: missing value for psn=
//	delay class=ack    1:1: delay needs a duration, e.g. "delay 50us"
//	down link=a qp=1   1:13: key "qp" does not apply to down
//
// Plans built in Go are checked by Plan.Validate (*RuleError); NewInjector
// panics on an invalid plan.
package faults
