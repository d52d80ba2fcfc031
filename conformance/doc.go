// Package conformance will compare rocesim with the Linux kernel's
// soft-RoCE driver (rdma_rxe) running real libibverbs inside QEMU: the same
// scenarios and fault plans, run on both, traces compared.
//
// This first increment boots real rxe. conformance/install.sh installs
// qemu-system-x86, busybox-static and rdma-core from Debian and unpacks a
// Debian 6.1 kernel package (never installed) into CacheDir. Prepare then
// builds, once, an uncompressed vmlinux (PVH boot, about twice as fast as
// the bzImage under TCG) and a busybox + libibverbs initramfs holding
// rdma_rxe and its dependencies. Boot starts one VM under TCG whose eth0 is
// carried as UDP datagrams on 127.0.0.1 (QEMU -netdev dgram: no root, no
// tap), so two VMs given each other's ports share one Ethernet link. The
// guest adds rxe0 on eth0, prints a READY marker, runs VMConfig.Cmd with
// $RXE_GID set to the RoCE v2 IPv4 GID index, prints the exit status and
// powers off; Wait returns the console and that status.
//
// The verbs agent (agent/agent.c, compiled by Prepare with the host's cc
// against libibverbs and carried in the initramfs as AgentPath) runs a
// script of verbs commands (open, pd, cq, qp, mr, exchange, connect,
// post_send, post_recv, poll, dump, crc) and prints JSON lines, which
// ParseAgentOutput reads back from the console. Two agents swap QPN, PSN,
// GID and rkey over TCP inside the guests, so each VM boots once.
//
// Switch sits on the link instead of the VMs' direct ports: it applies a
// faults.Plan to every frame as sim/fabric does (drop, dup, delay,
// reorder, corrupt, truncate, rewrite) and writes a pcapng with the
// verdicts as comments, so the same plan can run against real rxe and
// against the model.
//
// make test runs the tests (tools/install-deps.sh calls install.sh when it
// can install packages); they fail when the host is not prepared under
// CI=true or ROCESIM_CONFORMANCE=1 (`make conformance`), and skip
// elsewhere. The real rxe captures that issue 2 uses as test vectors live
// in wire/testdata.
package conformance
