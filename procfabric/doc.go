// Package procfabric joins NICs that live in separate processes on one
// simulated fabric, in one virtual time: `rocesim fabric` is its daemon,
// and Attach is the client side a process (the drop-in libibverbs' Go
// side, or a test) drives its nic.Device with.
//
//	d, err := procfabric.Listen(procfabric.Config{Name: "default", Nodes: []string{"a", "b"},
//		Plan: plan, Tap: pcapng, Trace: tr})
//	go d.Serve()                               // until Close, or until idle (ExitWhenIdle)
//
//	p, err := procfabric.Attach("default", "a")  // in each process
//	dev := nic.New(nic.Config{MAC: p.Self().MAC, IPv4: p.Self().IPv4, ...})
//	for {                                      // the driver loop
//		... the program's verbs (PollCQ, PostSend) at p.Now() ...
//		rd := dev.Ready()
//		for _, f := range rd.Frames { p.Send(f.Bytes, f.Note) }
//		in, err := p.Wait(rd.Deadline)          // blocks: the process waits
//		for _, e := range in.Events {          // frames and tx-dones, in order
//			if e.Frame != nil { dev.Receive(e.At, e.Frame) } else { dev.TxDone(e.At) }
//		}
//		dev.Advance(in.Now)
//	}
//
// # The daemon
//
// The daemon owns what one simulated world owns: a sim.Scheduler, a
// sim/fabric fabric (one node per name in Config.Nodes, joined by a link
// when there are two and by a switch "sw" when there are more), the fault
// plan, the capture (one pcapng, a comment per frame), the trace and so
// the ladder the command prints at exit. Node i (from 1) has MAC
// 02:00:00:00:00:i, IPv4 10.0.0.i and IPv6 fe80::ff:fe00:i, the
// link-local address of the MAC, as the drop-in library's world has
// (verbs.WorldConfig.LinkLocalGID: rxe's GID 0);
// the attach reply tells a process its own addresses and every other
// node's, since ARP is not simulated. The fabric's topology is fixed
// once frames flow (sim/fabric builds switch tables then), so the nodes
// are known before the clock starts: named in Config.Nodes, or, with
// Config.Count (`--nodes N`, the command's default 2), named by the first
// N processes that attach, numbered in the names' order so that the
// addresses do not depend on which process came first; no attach is
// answered until all N have come.
//
// It listens on a Unix socket NAME.sock in a directory only its user can
// open: $XDG_RUNTIME_DIR/rocesim, else /tmp/rocesim-UID, created 0700 and
// refused if it belongs to another user or others can open it. Two
// fabrics with different names run side by side. The daemon holds an
// exclusive flock on NAME.lock for its life, so a socket whose lock is
// free is stale (its daemon died) and is replaced, and two daemons of one
// name cannot both start. A connecting process of another UID is refused
// (SO_PEERCRED) and counted.
//
// Starting: `rocesim fabric --name X --nodes a,b --faults … --pcap …`
// starts one explicitly. A client that finds none (Attach returns
// ErrNoFabric) may start one with Start (AttachOrStart does both), which
// runs the given command (`rocesim exec` passes its own executable with
// `fabric --name X --nodes N --exit-when-idle`, and --faults/--pcap if
// its user gave them), detached from the caller's session, its output
// appended to NAME.log beside the socket, and waits until the socket
// answers; then it attaches. Two clients racing to start one are safe:
// the loser's daemon finds the lock taken (ErrRunning) and exits, or, if
// it starts after the winner has gone, exits when nobody comes within
// Config.IdleLimit; both clients attach to the winner.
//
// # The protocol
//
// Every message is [length uint32 BE][version uint8][type uint8][body],
// length counting version, type and body, at most MaxMessage bytes. A
// message with a length out of bounds, another version, an unknown type,
// a body that does not parse, or a type that is out of place (a frame
// before attach, a second attach) is refused: counted in Stats.Refused,
// logged, and its connection closed; the daemon goes on. Messages:
//
//	process → daemon   attach(node)          → attached(index, now, node count, the first nodes' name, MAC, IPv4, IPv6),
//	                                           then nodes(the next nodes) until every node is listed (179 a message)
//	                   frame(note, bytes)    the process's NIC sent a frame, at the process's virtual time
//	                   wait(deadline, slack, rx slack) the process waits until deadline (sim.Never: for
//	                                         input only); the port's next slack tx-dones, and frames
//	                                         that match the rx slack, need not wake it
//	                   pollwait(…)           the same, for a poll that found nothing: woken once at an
//	                                         instant when every process waits and nothing will happen
//	                   will(key, note, bytes) the frame of the process's will under key (replacing any)
//	                   will(key)             key's frame is out of the will
//	                   detach                the process is done (closing the socket is the same, but for the will)
//	                   resume                (while waiting) another thread has work: run now
//	                   poll                  (while waiting) the wait is a poll's from now on (pollwait)
//	                   tick                  (while waiting) as resume, for the library's housekeeping:
//	                                         not activity, so a run of ticks alone is still quiet
//	daemon → process   deliver(at, bytes)    a frame arrived at the node's port at virtual time at
//	                   txdone(at)            the port finished (or dropped) one of the node's frames
//	                   now(t)                end of a batch: the process runs again, at time t
//	                   bye(reason)           the daemon detaches the process, and says why
//
// # Virtual time across processes
//
// There is one clock, the daemon's scheduler. Each attached process is
// either running (it holds the clock) or waiting until a deadline. A
// process runs from attach until its first wait, and from each now(t) the
// daemon sends it until its next wait. The clock moves only when every
// attached process waits. Then the daemon takes t = the earliest of the
// fabric's next event and the processes' deadlines, fires the fabric's
// events up to t (frames arrive at ports, ports finish frames, the plan
// drops and delays), and wakes, in node order, every process that has
// input due at t or whose deadline is t: it sends that process its
// deliveries and tx-dones in the order they happened, then now(t). The
// woken processes run (the NIC takes its inputs and its timers, the
// program its completions) and wait again.
//
// A wait carries its slack: input the process's NIC would take in
// silence, doing nothing but count it or place it (nic/slack.go).
//
//   - The tx slack (Port.SetTxSlack) is how many of the port's next
//     tx-dones free nothing a QP waits for (nic.Device.TxSlack). A
//     stream's sender, which rxe lets put 64 frames of a QP in the port
//     and resumes at 16, is woken once for 48 frames, not for each.
//   - The rx slack (Port.SetRxSlack) lists, for QPs in the middle of a
//     message, the middle packets still to come: the next PSNs, the
//     opcode (SEND or WRITE MIDDLE), a full path MTU of payload, no
//     AckReq, as many as the buffer or the RETH's length has room for
//     (nic.Device.RxSlack), for the four QPs that last received. A
//     stream's receiver is woken at a message's first and last packets
//     (and every 256 KiB of a longer one), not at each.
//
// The daemon does not wake the process for those; it keeps them, in
// order, with its other input, and wakes it at the first input past the
// slack (or at its deadline, at a resume, at a Hold, or when nothing
// else is left to happen), with all of them at their instants. The
// process's device then ends as it would have, and since nothing it
// would have done at those instants is held back, every frame leaves
// when it would have: for a program whose threads wait in verbs, the
// capture and the virtual times are the same. A verb called by one
// thread while another waits runs on the device as the last wake left
// it, without what the wait has left with the daemon since (as it ran
// without the input of the current instant before): its effect on the
// held input is applied after it. What moves is when a middle packet's
// bytes land in the program's memory: with its message's last packet,
// which is all a program may rely on; and a poll that finds nothing
// returns 0 less often, so a program that spins outside the verbs
// between polls, or polls memory (ib_write_lat), sees its virtual times
// move as its thread timing would move them anyway.
//
// When every process waits and nothing is left to happen (no frame, no
// deadline), the daemon wakes, at that instant, each process whose wait
// is a poll's (pollwait: a poll_cq that found nothing), once: a poll on a
// quiet NIC returns 0, and the program may be what the others wait for
// outside the verbs (on TCP). A second poll at the same instant sleeps
// until something happens, so pollers never spin; and a poll is not
// woken early while timers are pending anywhere (the clock goes through
// them first, in virtual time, as it would have to for any answer).
//
// The frames a process sends while it runs are held, not put on the
// fabric at once: when every process waits again, the held frames enter
// the fabric at t in node order, then in the order each process sent
// them. So what processes do at the same instant reaches the fabric in
// the same order however the operating system scheduled them, and two
// runs of the same deterministic programs give the same capture bytes.
// The clock also stays at 0, and no frame enters the fabric, until every
// node of Config.Nodes has attached once: otherwise whoever attached
// first would run alone for a while, as fast as the wall clock let it.
//
// A process whose Wait is blocked in one thread while another thread's
// poll finds nothing calls Port.Poll: the wait becomes a poll's, woken
// when nothing is left to happen once per instant, and not ended before
// (ending it, the poll would return 0 at once, again and again, while the
// other thread waited again each time: a spin at one instant).
//
// A process whose Wait is blocked in one thread while another thread
// has work (a post from the program's own thread) calls Port.Interrupt:
// resume makes the daemon wake it at once, at the current instant, with
// no input but what it held as slack; the order of such wake-ups
// against other processes follows the wall clock, so a program that
// relies on them is reproducible only as far as its threads are.
//
// The frames such a thread sends while the owner waits stay in the
// process (the daemon detaches a waiting process for a frame) and go with
// the next wait. They are bounded: at MaxPending bytes (1 MiB) Send wakes
// the wait itself, as Interrupt does, and blocks until the Wait has
// returned; the owner's next wait writes them out. The resume makes the
// daemon wake the process at once, so the block always ends (or the port
// fails or closes, and Send returns the error).
//
// A process that exits or is killed (its socket closes, even inside a
// message it was writing: it died, it did not misbehave) is detached: the
// frames it sent before are still put on the fabric, frames to its node
// are dropped and counted (Stats.Undelivered), and its node stays on the
// fabric as a port whose program has gone, so its peers' QPs time out
// and retry as on a real network where the program died. Its kernel
// still answers a DREQ with a DREP, a REQ with a REJ and a SIDR_REQ with
// a SIDR_REP (kernel.go, Stats.KernelAnswers). The same node name may attach again.
//
// A process may leave a will (Port.SetWill): frames the daemon puts on
// the fabric for it, in the order of their keys, with its round, if its
// socket closes without a detach (or the daemon sends it away: refused,
// held the clock too long), each note saying so (Stats.Wills). A
// Linux host whose program is killed still sends what the kernel owes
// for it: closing the process's rdma_cm file destroys its IDs, and a
// connection's DREQ leaves. The drop-in library keeps under each CM ID's
// key the MAD the ID would send if destroyed (rdmacm.CM.FarewellChanges),
// changed as the ID changes, so the peer of a killed program learns at
// once, and a server with many connections sends one frame per change,
// not its whole will. Detach (Close) voids the will: a process that
// closes its port has said its farewells itself. The will's bytes are
// bounded as a turn's frames are.
//
// A process that never waits (a busy loop with no verbs call, a
// debugger's breakpoint) holds the clock for everyone. The bound is wall
// time: a process that has run for Config.HoldLimit (default 10 s;
// `--hold-limit`, 0 for no bound) without waiting, while the clock runs
// and another process waits on it, is sent bye("held virtual time for …
// of wall time without waiting …"), detached, and the reason is logged;
// its Wait returns that message in an ErrDetached. Running while nobody
// waits does not count (a server blocked in accept() until its client
// comes, programs trading QP numbers over TCP). A program that computes
// for longer between verbs calls needs a larger limit. Writes to a
// process are bounded by a wall-clock deadline too, so one that stops
// reading is detached rather than blocking the daemon.
//
// The opposite stall, every process waiting with nothing left to happen
// (no input due, no deadline, no event in the fabric: a program blocked
// in ibv_get_cq_event for a completion its peer never causes), is not
// detected as an error, since programs may be waiting on each other
// outside the fabric; after Config.QuietReport (default 10 s) of it the
// log says so once, naming how each node waits (in a poll, or in a
// blocking wait), and again after each new quiet period.
//
// The daemon is a driver (see the package graph in STYLE.md): it reads
// the wall clock only for those bounds and that report, and uses
// goroutines only to read its sockets; every decision that reaches the
// fabric is taken in its one loop, in virtual time.
package procfabric
