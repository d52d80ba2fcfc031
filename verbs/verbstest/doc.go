// Package verbstest builds deterministic RDMA worlds for tests, as
// net/http/httptest builds servers: a few lines give a test connected
// RoCE v2 hosts, a fault plan, virtual time it controls, assertions that
// read like the protocol, and, when it fails, everything needed to look
// at the run again.
//
//	func TestLostWrite(t *testing.T) {
//		w := verbstest.New(t, verbstest.Options{Faults: "drop op=RC_RDMA_WRITE_ONLY tx=1"})
//		a, b := w.Pair("a", "b", verbstest.QPOptions{})
//		src, dst := a.Host.Buffer(512), b.Host.Buffer(512)
//		a.QP.PostSend([]verbs.SendWR{{WRID: 1, Opcode: verbs.WRRDMAWrite, Flags: verbs.SendSignaled,
//			SGList: []verbs.SGE{src.SGE(0, 512)}, RemoteAddr: dst.Addr, RKey: dst.RKey}})
//		w.RequireCompletion(a.CQ, verbs.WCSuccess, verbs.WCRDMAWrite)
//		w.RequireFrames("op=RC_RDMA_WRITE_ONLY tx=2", 1) // one retransmission
//	}
//
// # The world
//
// New builds the hosts of Options.Nodes (default "a" and "b"), each with
// its device opened and a protection domain, on one link or through a
// switch. Pair and Mesh make RC (or UC) QPs and take them to RTS; Connect
// does the same for QPs the code under test made. QPOptions set what a C
// test sets in its bring-up (retry counts, timers, max_rd_atomic and
// max_dest_rd_atomic, access flags, fixed PSNs, separate send and
// receive CQs, an SRQ), for one side only through QPOptions.Peer.
// Host.Buffer and Host.CQ make the usual resources in one line.
// Everything is deterministic: the same test and seed give the same
// frames, trace and capture, byte for byte, in microseconds of wall time.
//
// # Time and the application
//
// Virtual time moves only inside RunFor, RunUntilIdle, RunUntil, Await
// and RequireCompletion. Code under test that reacts to completions
// (a server answering requests) registers its polling loop with Poll; the
// world runs it after every instant, as a thread spinning on
// ibv_poll_cq. Poller.Pause stalls it for a while (a receiver that falls
// behind), Poller.Stop for good. After schedules a step of the workload
// at a virtual time. Every wait is bounded by Options.Limit
// of virtual time and by Options.MaxEvents simulation events (250000,
// well under a second of wall time), so a QP that retries forever fails
// the test instead of hanging it, with a message that names the pattern
// (the QP, the PSN it resends and how often, the RNR NAKs, the attribute
// that keeps it going). The budgets decide deterministically; a
// wall-clock watchdog is only a backstop. Memory is bounded too: the
// trace keeps its first 131072 events, the frame log its first
// Options.MaxFrames frames (65536), and the capture is streamed to its
// file.
//
// # Connection management
//
// PairCM connects two hosts' RC QPs through rdma_cm (package rdmacm),
// as rping does, instead of modify_qp calls; AwaitCM takes the next CM
// event, DisconnectCM hangs up as rping does. The CM's MADs are frames
// like any other: "drop cm=REQ first=1" loses the REQ, "cm=RTU" selects
// RTUs.
//
// # Assertions
//
// RequireCompletion, RequireNoCompletion, RequireQPState, RequireFrames
// and RequireNoFrames fail the test New was given (With lends the world
// to a subtest's T). A failure starts with the call as the test wrote it
// ("RequireCompletion(a's CQ #1, IBV_WC_SUCCESS, IBV_WC_SEND)") and says
// what the world saw: "15576 RNR NAKs from b QP 0x000011: no receive
// posted", a QP that resends one PSN, what the fault plan did.
//
// # Faults
//
// Options.Faults (text) or Options.Plan (Go) is the initial fault plan of
// package faults; SetFaults, AddFaults and SetPlan change it in the middle
// of a test ("now cut the server off": AddFaults("down link=" +
// server.LinkName())). RuleHits says how many frames a rule of the plan
// in force acted on, so a test can prove its fault happened rather than
// trust a rule whose psn= the run never reached; a failed test's report
// says it for every rule ("faults: rule 2 never matched a frame: ...").
//
// # Looking at frames
//
// Frames, RequireFrames and RequireNoFrames select the frames the fabric
// recorded with the match keys of a fault plan: "class=nak",
// "psn=2 tx=2", "src=server op=RC_RDMA_WRITE_MIDDLE". Trace gives the
// structured event log.
//
// # When a test fails
//
// Every world writes a pcapng capture, every frame commented, into its
// own temporary directory. When the test passes the directory is removed
// (-rocesim.keep keeps it); when it fails the test's log ends with the
// seed, the fault plan (with every change and when), the go test command
// that re-runs exactly that test and seed, and the paths of the capture,
// the trace and the run drawn as a ladder diagram:
//
//	rocesim: the simulated run of TestLostWritePacket, to look at or re-run:
//	  seed:    7
//	  plan:    from 0s: (none)
//	           from 2.278µs: drop src=server op=RC_RDMA_WRITE_MIDDLE tx=1 nth=3
//	  rerun:   go test ./examples/kvstore -run '^TestLostWritePacket$' -count=1 -kvstore.break=repost -rocesim.seed=7
//	  capture: /tmp/rocesim-TestLostWritePacket-310395302/capture.pcapng (3192 frames, ...)
//	  trace:   /tmp/rocesim-TestLostWritePacket-310395302/trace.txt (7988 events, ended at 999.643164ms)
//	  ladder:  /tmp/rocesim-TestLostWritePacket-310395302/ladder.txt
//	           /tmp/rocesim-TestLostWritePacket-310395302/ladder.svg (for a browser)
//	  inspect: go run github.com/rocesim/rocesim/cmd/rocesim inspect /tmp/rocesim-TestLostWritePacket-310395302/capture.pcapng
//
// A "loops:" line lists the pollers paused or stopped, and when. The
// ladder files draw the run as rocesim run does (package
// ladder): a column per host, an arrow per frame. The rerun
// command carries the test's other flags (here the example's
// -kvstore.break, which plants a bug), so it fails the same way.
//
// -rocesim.seed=N runs every world that leaves Options.Seed unset with
// seed N (a test that fixes its seed keeps it), and Seeds runs a test
// body over many seeds as subtests, or over seed N alone with the flag.
// The flags are the test binary's to take: importing verbstest defines
// none, and a test package opts in with
//
//	func init() { verbstest.RegisterFlags() }
package verbstest
