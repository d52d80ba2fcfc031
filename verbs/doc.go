// Package verbs is rocesim's user API, in the vocabulary of libibverbs,
// over a deterministic simulated cluster.
//
// A World holds the clock, the fabric and the hosts; each host has one
// device, rxe0. A test reads like the C program it stands for:
//
//	w := verbs.NewWorld(verbs.WorldConfig{Seed: 1, Plan: plan})
//	a, b := w.AddHost("a"), w.AddHost("b")
//	w.Connect(a, b)
//	ctx, _ := a.GetDeviceList()[0].Open()
//	pd, _ := ctx.AllocPD()
//	mr, _ := pd.RegMR(buf, verbs.AccessLocalWrite|verbs.AccessRemoteWrite)
//	cq, _ := ctx.CreateCQ(16, nil, 0)
//	qp, _ := pd.CreateQP(verbs.QPInitAttr{SendCQ: cq, RecvCQ: cq, Type: verbs.QPTypeRC, Cap: ...})
//	qp.Modify(&attr, verbs.QPAttrState|...)      // INIT, RTR, RTS with the peer's QPN, PSN, GID
//	qp.PostSend([]verbs.SendWR{...})
//	w.Run()                                      // virtual time moves only here
//	n := cq.Poll(wcs)
//
// Memory windows follow libibverbs too: pd.AllocMW(verbs.MWType2), a
// bind by an IBV_WR_BIND_MW work request (SendWR.BindMW; the user then
// takes the new R_Key, verbs.IncRKey(mw.RKey)) or, for type 1,
// qp.BindMW; LOCAL_INV and SEND_WITH_INV name the R_Key in
// SendWR.InvalidateRKey. mr.Rereg is ibv_rereg_mr: rxe 6.1 refuses it
// (EOPNOTSUPP) and so does the rxe profile; the spec profile does it.
//
// Misuse returns the errno libibverbs returns (errors.Is(err,
// syscall.EINVAL), ENOMEM, EBUSY) with a message naming the field at
// fault. A send on a host that was never connected (no World.Connect or
// ConnectSwitch) fails with ENETDOWN: real rxe has no such state, and
// the call is the place to hear about it. A link that is down is
// another thing: there, as rxe on a netdev without carrier, sends are
// accepted and lost on the wire, and the transport retries. Memory
// addresses are simulated virtual addresses allocated in a
// fixed order, so the same program and seed give the same frames, trace
// and capture on every run. See the Example functions for connecting two
// RC QPs by hand, a SEND/RECV ping-pong, an RDMA WRITE with immediate, an
// RNR retry exhausted (error completions and their names) and port
// events.
//
// The vocabulary is libibverbs' (vocab.go): every constant of
// <infiniband/verbs.h> the model can produce or take has a name here, with
// the header's value (WCLocQPOpErr is IBV_WC_LOC_QP_OP_ERR, EventSRQLimitReached
// IBV_EVENT_SRQ_LIMIT_REACHED, SRQAttrLimit IBV_SRQ_LIMIT), so a user
// never needs package nic or a numeric cast. The types (WC, QPAttr,
// AHAttr, …) are aliases of package nic's; each alias's comment lists its
// fields with their C names.
//
// A run that never settles (rxe's retry_cnt 7 and rnr_retry 7 retry
// forever) ends when it has fired WorldConfig.MaxEvents events (the
// scheduler's limit) with a *RunawayError that says what kept it going:
// the QP, the PSN it resends and how often, the RNR NAKs it was sent, the
// attribute that makes it go on, and what the fault plan did. The world
// keeps a few numbers per flow for this (runaway.go) and nothing that
// grows per event; Stalls and Diagnose give the same diagnosis at any
// time, and WorldConfig.Progress lets a driver show progress.
//
// A large world can run on several cores as a Cluster (cluster.go): the
// same hosts and switch cut into parts, each a World of its own, that
// goroutines advance side by side one link propagation delay at a time
// (conservative parallel simulation). The program is the same but for
// NewCluster, AddHost and Run; the result depends on the seed and the
// number of parts, never on the number of goroutines:
//
//	c, _ := verbs.NewCluster(verbs.ClusterConfig{World: cfg, Parts: 2, Hosts: n, Each: parallel.Each(0)})
//	for i := range n { hosts[i] = c.AddHost(name(i)) }
//	c.ConnectSwitch()
//	…                                            // verbs on the hosts, as above
//	c.Run()
//
// This package starts no goroutine: package verbs/parallel runs the parts
// of each step on every core (ClusterConfig.Each). A cluster takes a
// fault plan, a capture, a trace and a frame observer (each part records
// its own links' frames and its own events, and between steps the
// cluster hands them on in time order, the same file, trace and records
// whatever the goroutines). The switch is in every part, each copy with
// the ports toward its part's hosts, so that the parts share its work.
package verbs
