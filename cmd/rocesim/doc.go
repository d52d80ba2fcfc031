// Command rocesim is the command-line front end of rocesim, the pure-Go
// RoCE v2 soft-RDMA simulator.
//
//	rocesim run NAME|FILE|- [flags] run a scenario: ladder, summary, --pcap, --svg, --json
//	rocesim scenarios [--json]      list the built-in scenarios
//	rocesim inspect [flags] FILE    list the frames of a pcap or pcapng file (-Y, -c)
//	rocesim demo [flags]            the same as: rocesim run go-back-n [flags]
//	rocesim fabric [flags]          a fabric daemon joining processes' NICs
//	rocesim exec [flags] -- PROG    an unmodified libibverbs program on a fabric node
//	rocesim node [flags]            a model node on a real network, with a workload
//	rocesim switch [flags]          a fault switch between two real RoCE endpoints
//	rocesim help [COMMAND]          usage
//	rocesim --version               module version and VCS revision
//
// run executes a built-in scenario (package scenario holds the catalogue
// and the file format; examples/ has each as a file) on the simulated
// fabric and prints its ladder diagram (package ladder), then a summary:
// completions per status, counters that changed, virtual and wall time,
// and whether the scenario's expectations held. --pcap writes an
// annotated pcapng, --svg the ladder as SVG, --json a machine-readable
// result (scenario.Result is its schema). --set TARGET.KEY=VALUE and
// --fault RULE vary the scenario without editing it (overrides.go: they
// rewrite its text and parse it again, so a value is checked where the
// file's own is); "-" reads the scenario from standard input; a parse
// error is printed FILE:LINE:COL: message. The ladder is drawn to COLUMNS,
// else the terminal's width, else 80 columns (the summary's lines wrap to
// the same width, printSummary), coloured only on a terminal
// without NO_COLOR and with TERM other than dumb; --nodes a,b draws only
// those columns (both ladders). --deadline ends the run at a
// virtual time; --max-events (default 200000) bounds its events, and a run
// that spends them without settling stops with a message naming what kept
// it going (the QP, the PSN it resends, how often, and the attribute, such
// as rxe's infinite retry_cnt 7). A run longer than two seconds of wall
// time prints progress to standard error. Memory is bounded whatever the
// run's length: the trace (and the ladder) keeps its first 131072 events,
// --pcap streams to its file. Exit status: 0 when the expectations hold,
// 1 when one fails, 2 for a usage or I/O error, 3 when the run did not
// settle within --max-events.
//
// inspect decodes every frame with package wire, verifies each RoCE v2
// ICRC (which Wireshark does not), and prints one line per frame: index,
// seconds since the first frame, addresses, opcode, QPN, PSN, the
// extension headers' fields, payload length, icrc=ok|BAD and any pcapng
// comments. With --json it prints one JSON object per frame instead.
// -Y selects frames with a fault plan's match keys and -c stops after N
// listed, as tshark's -Y and -c do (inspectfilter.go rebuilds each
// frame's hop from the pcapng interface rocesim wrote it on).
// Exit status: 0 when every RoCE frame is well formed with a good ICRC,
// 1 when one is not, 2 for a usage or I/O error.
//
// fabric runs package procfabric's daemon: processes attach to its nodes
// over a Unix socket ($XDG_RUNTIME_DIR/rocesim/NAME.sock, else
// /tmp/rocesim-UID/NAME.sock, a directory only the user can open) and
// their NICs meet on one simulated fabric in one virtual time, which
// advances only while every attached process waits. --faults, --pcap and
// --trace are as for run; the ladder and a summary are printed at exit
// (interrupt, --exit-when-idle, --deadline). --hold-limit bounds the wall
// time a process may hold virtual time without waiting.
//
// exec runs an unmodified libibverbs program (ibv_rc_pingpong,
// perftest) on the drop-in libibverbs.so.1 (dropin/ibverbs) as node
// --node of the fabric --name (exec.go): it finds the library in the
// cache or builds it there (go build -buildmode=c-shared: the source
// tree, the Go toolchain and gcc; else --lib), starts the fabric if none
// answers (with --nodes, --faults, --pcap, --deadline), runs the program
// with LD_LIBRARY_PATH and ROCESIM_FABRIC/ROCESIM_NODE/ROCESIM_PROFILE,
// passes its exit status through and says where the capture and the
// fabric's log are. With --transport udp there is no fabric: the
// program's device is a RoCE v2 endpoint on UDP port 4791 of --addr (a
// loopback address unless --routable), in real time
// (ROCESIM_TRANSPORT=udp, dropin/ibverbs udp.go).
//
// node runs package realnet's Node: the NIC model on UDP port 4791 of
// --addr (a loopback address unless --routable) in real time, and a
// workload with one peer node in the manner of ibv_rc_pingpong (endpoints
// exchanged over TCP --port, then --iters SENDs, WRITEs or READs of
// --size bytes, data checked on both sides); the client prints
// throughput and latency, --pcap writes what the node sent. --peer-addr
// reaches the peer at a rocesim switch's stand-in address.
//
// switch runs package rswitch between two real endpoints of one kind
// (--a, --b: dgram: QEMU VMs' datagram links, packet: interfaces through
// AF_PACKET, udp: RoCE v2 hosts on UDP 4791 behind stand-in addresses),
// applies --faults to every frame with the simulated fabric's decisions,
// writes --pcap with each verdict as a comment, and prints the ladder
// (and writes --ladder) when interrupted or after --duration.
//
// The command is thin: the scenario format (parsing, the built-in
// catalogue, running) is package scenario and the drawings are package
// ladder, both at the module root, where conformance and verbs/verbstest
// import them too. What stays here is the command line and its output:
// run.go dispatches; runcmd.go is run and scenarios (flags, the report,
// the files written) and inspect (inspect.go, json.go for its JSON
// schema); main only connects run to the process.
package main
