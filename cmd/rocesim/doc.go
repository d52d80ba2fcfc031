// Command rocesim is the command-line front end of rocesim, the pure-Go
// RoCE v2 soft-RDMA simulator.
//
//	rocesim inspect [--json] FILE   list the frames of a pcap or pcapng file
//	rocesim demo [flags]            the same as: rocesim run go-back-n [flags]
//	rocesim help [COMMAND]          usage
//
// inspect decodes every frame with package wire, verifies each RoCE v2
// ICRC (which Wireshark does not), and prints one line per frame: index,
// seconds since the first frame, addresses, opcode, QPN, PSN, the
// extension headers' fields, payload length, icrc=ok|BAD and any pcapng
// comments. With --json it prints one JSON object per frame instead.
// Exit status: 0 when every RoCE frame is well formed with a good ICRC,
// 1 when one is not, 2 for a usage or I/O error.
//
// The logic lives in run (run.go), inspect (inspect.go, json.go for the
// JSON schema); main only connects run to the process.
package main
