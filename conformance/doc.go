// Package conformance compares rocesim with the Linux kernel's soft-RoCE
// driver (rdma_rxe) running real libibverbs inside QEMU: the model and
// rxe on one link (interop), and the same scenarios and fault plans run on
// both (differential runs).
//
// # The harness
//
// conformance/install.sh installs qemu-system-x86, busybox-static and
// rdma-core from Debian and unpacks a Debian 6.1 kernel package (never
// installed) into CacheDir. Prepare then builds, once, an uncompressed
// vmlinux (PVH boot, about twice as fast as the bzImage under TCG), the
// verbs agent, and a busybox + libibverbs initramfs holding rdma_rxe and
// its dependencies. Boot starts one guest under TCG whose eth0 is carried
// as UDP datagrams on 127.0.0.1 (QEMU -netdev dgram: no root, no tap);
// the guest adds rxe0 on eth0, prints a READY marker with the RoCE v2
// GID index and runs VMConfig.Cmd. VMConfig.CapturePath adds QEMU's own
// capture of eth0 (filter-dump).
//
// # The agent
//
// agent/agent.c, compiled by Prepare against the host's libibverbs and
// run in the guest as AgentPath, takes verbs commands (open, pd, cq, mr,
// poke, qp, connect, post_send for all seven RC opcodes, post_recv, poll,
// drain, async, dump, crc) and prints JSON lines. From a script it runs
// to the end (AgentScript, ParseAgentOutput); on the serial console of a
// guest booted with Interactive and Cmd AgentLoop it answers each line
// with an "ok" or an "error", so StartAgent and Agent.Do drive it
// command by command over the console, with no guest network service.
// Commands on one line, separated by ';', run back to back.
//
// # Interop
//
// ModelHost attaches a nic.Device to a guest's link in real time: it owns
// an IPv4 address and its GID, answers ARP, and runs the device on
// package realnet's driver (one loop goroutine, the wall clock as its
// time) over realnet's datagram-link transport. TestInteropMatrix runs
// SEND, SEND_WITH_IMM, RDMA_WRITE, RDMA_WRITE_WITH_IMM, RDMA_READ and
// both atomics at six sizes each way between rxe and the model, checks
// the data and the completions, compares each role's completions between
// rxe and the model, and holds the model's capture to QEMU's frame for
// frame. TestInteropWrongModel shows a broken model (ModelHostConfig.
// FlipICRC) failing it.
//
// # Differential runs
//
// scenarios/*.scenario are the eleven fault scenarios, in the format of
// package scenario. ModelOutcome runs one in the simulation (rxe
// profile); a Rig (two guests with interactive agents, joined through a
// Switch, rocesim switch's package rswitch, that applies the same
// faults.Plan to real frames) runs it on
// rxe. Both are normalised into an Outcome (completions, memory, the wire
// per direction with PSNs relative to each QP's initial PSN) and compared
// (Compare). A real run that differs while a QEMU or the switch waited
// for a CPU for the scenario's StallLimit is void and run again
// (cpuwait.go): on a busy host rxe's retransmit timer fires before a
// response that was on its way is processed, which the simulation, a
// machine that is never busy, does not model. TestDifferential prints
// the table (RenderResults), which
// make conformance writes to conformance/RESULTS.md; README.md lists what
// is compared, what is not, and every known deviation with its cause.
//
// make test runs the tests (tools/install-deps.sh calls install.sh when it
// can install packages); they fail when the host is not prepared under
// CI=true or ROCESIM_CONFORMANCE=1 (make conformance), and skip
// elsewhere. ROCESIM_CONFORMANCE_LOGS=DIR keeps consoles and captures.
package conformance
