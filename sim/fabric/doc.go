// Package fabric is rocesim's simulated Ethernet: nodes with ports,
// point-to-point links and store-and-forward switches, driven by a
// sim.Scheduler, with the fault plan applied to every frame and every
// frame recorded in the trace and the capture.
//
//	s := sim.NewScheduler()
//	f := fabric.New(fabric.Config{Sched: s, Trace: tr, Tap: pcapng, Plan: plan, Rand: seeds.Stream("faults")})
//	a := f.AddNode("a", fabric.PortConfig{MAC: macA, IPv4: ipA})
//	b := f.AddNode("b", fabric.PortConfig{MAC: macB, IPv4: ipB})
//	f.Connect("a-b", a.Port(0), b.Port(0), fabric.DefaultLinkConfig())
//	b.SetReceiver(nicB)              // nicB.Receive(now, port, frame)
//	a.Send(0, frame, nil)             // copied, judged, queued, serialized
//	s.Run()
//
// The link model: each direction has an egress queue (capacity in bytes,
// tail drop, counted), a wire that serializes one frame at a time in
// (len+overhead)·8/bandwidth, and a propagation delay; frames arrive in
// order. A switch receives a frame whole, then queues it at the egress
// port toward its destination MAC (a static table computed from the
// topology: ARP is not simulated, so addresses are configured).
//
// Faults: a frame is judged by the plan (faults.Injector) each time it
// enters a link; rules without link= act on the first hop only. Dropped
// frames are still written to the capture, at the sender's side, with a
// comment naming the rule ("dropped by rule 3: drop psn=2 tx=1"), where
// they would have been on the wire: a frame the plan drops while frames
// ahead of it wait for the wire (queued or being serialized) waits with
// them, taking no wire time, and is recorded (capture, trace, Observe) at
// the moment it would have started onto the link, after the frames ahead
// of it, so PSNs in a capture keep their wire order; a frame dropped at
// an idle link is recorded at once, which is the same moment. Its sender
// is told the frame has left at once either way. Tail drops, MTU drops
// and frames a switch cannot route are recorded when they happen (they
// never had a place on the wire): a destination no port leads to
// (Switch.UnknownDrops, drop=no-route), and a runt, a frame a truncate
// rule cut below its Ethernet header, whose destination MAC is gone
// (Switch.RuntDrops, drop=runt; Node.Send refuses one, ErrRunt). Altered,
// duplicated, delayed and reordered frames say so too, and so do frames
// whose sender gave a note ("retransmission #2"). A duplicate's copies
// are made one at a time while its egress queue has room; the copies it
// has no room for are tail drops, counted in DirStats.QueueDrops and
// traced as one queue-drop event (the capture holds only the copies the
// queue took), so "dup n=100000000" costs a queue's worth of frames. With an unlimited queue (QueueBytes 0) every
// copy is made: memory then grows with n.
//
// A sender that encoded its frames itself (a NIC model: wire.Encode
// computes the ICRC) sends them with SendSealed; a receiver that is a
// SealedReceiver gets such a frame through ReceiveSealed, unless a rule
// altered it on the way (corrupt, truncate, rewrite), and may skip
// computing its ICRC again: the answer is known, and in a large world
// the frame is cold by the time it arrives, so that CRC over every byte
// cost a fifth of the receive path.
//
// Nothing here reads the wall clock, starts a goroutine or iterates a map
// where the order could reach output; frame buffers are pooled, so the
// per-frame path allocates nothing when tracing is off.
//
// In a large world a frame waits behind tens of thousands of others
// between two hops, so each hop finds what it reads cold and pays a cache
// miss per object it reaches. A frame's bookkeeping is therefore one
// 64-byte record in a slab, with nodes and its destination as indices
// (its destination MAC is looked up once, at Send, and a switch forwards
// by the index); its flight entry carries what a switch needs, so a
// switch queues a frame without reading its record; and each link
// direction holds copies of what a frame would otherwise reach through
// the link, its ports and their nodes. An observer of what nodes send
// (Config.ObserveFirst) is called on first hops only, so a fabric without
// a hop-by-hop observer builds no FrameRecord for the hops beyond; a
// record names its nodes by index too (FrameRecord.FromNode, ToNode).
package fabric
