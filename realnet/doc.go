// Package realnet runs rocesim's NIC model (a nic.Device) on a real
// network, in real time: transports that carry its frames over sockets,
// and a driver that runs the device's loop against the wall clock. The
// NIC itself is unchanged: it takes inputs and hands back a batch
// (nic/ready.go); this package is the third driver of that interface,
// after the simulated fabric (verbs) and beside the C adapter.
//
// # Transports
//
// A Transport (transport.go) moves whole Ethernet frames in batches, as
// wireguard-go's conn.Bind moves packets: Receive fills caller buffers,
// Send takes frames, Close unblocks a Receive, Carries says how much of a
// frame crosses the network as the device built it. Three exist, all on
// Linux, batched with recvmmsg(2)/sendmmsg(2) through golang.org/x/sys:
//
//   - UDP: RoCE v2 on a UDP socket bound to a specific IPv4 or IPv6
//     address, port 4791. The kernel does Ethernet, IP and UDP; only the
//     transport packet (BTH to ICRC) is the device's. No privilege is
//     needed, and two nodes on one machine bind 127.0.0.1:4791 and
//     127.0.0.2:4791 (over IPv6 there is one loopback address, ::1: two
//     QPs of one node talk to each other through it).
//   - Dgram: whole frames, one per UDP datagram between two fixed
//     addresses, as QEMU's -netdev dgram joins a VM's NIC to a peer (the
//     conformance harness's model host runs on it).
//   - Packet: whole frames on a network interface through an AF_PACKET
//     socket. It needs CAP_NET_RAW; its tests skip where that is missing.
//     A frame its host sent on a veth arrives with the UDP or TCP
//     checksum left to offload; with PacketConfig.CompleteChecksums the
//     transport completes it (PACKET_AUXDATA), so a forwarder (rocesim
//     switch, package rswitch) can send it on.
//
// # The ICRC over UDP
//
// The ICRC (IBTA vol. 1 Annex A17.8; rxe_icrc.c rxe_icrc_hdr) is a CRC-32
// over 8 bytes of ones, the IP header, the UDP header, the BTH and the
// rest of the packet, with only the fields a router may change masked to
// ones: IPv4 TOS, TTL and header checksum (IPv6 traffic class, flow label
// and hop limit), the UDP checksum, and BTH byte 4. Every other outer
// field is covered: addresses, the IPv4 total length, ID, flags and
// fragment offset, the protocol, and the UDP ports and length. Of those,
// the kernel chooses some when a socket sends, and the socket API does
// not report some when it receives:
//
//   - UDP source port: the socket's own (4791), not the per-QP port rxe
//     derives from the flow label. Sending, the transport rewrites it.
//   - IPv4 ID: Linux writes 0 on a datagram with DF set from an
//     unconnected socket (ip_select_ident_segs); the transport sets
//     IP_PMTUDISC_DO (DF on every datagram) and rewrites the ID to 0.
//     TestUDPOnTheWire checks this on the loopback interface with an
//     AF_PACKET socket: every datagram the kernel sent carries ID 0 and
//     DF, and its ICRC verifies over the headers as sent.
//   - TTL (64, rxe's default hop limit) and TOS (0): masked, but
//     rewritten too, so a capture of the rewritten frame shows the wire
//     (except the UDP checksum over IPv4, which the kernel fills in and
//     the capture shows as 0).
//   - IPv6 has no ID; its traffic class, flow label (Linux may set one
//     per flow) and hop limit are masked, and the UDP checksum too. Every
//     covered field is one the socket chooses from what it is told
//     (addresses, ports, lengths), so nothing is guessed.
//     TestUDPIPv6OnTheWire checks the frames the kernel sent on ::1.
//
// So on send the transport rewrites those fields in the device's frame
// and recomputes the IPv4 checksum and the ICRC over them; what the peer
// receives verifies. On receive it rebuilds the outer headers from the
// datagram: source address and port from recvmmsg's address, destination
// address from IP_PKTINFO, TTL and TOS from IP_RECVTTL and IP_RECVTOS,
// lengths from the datagram's length, destination port 4791; the ICRC
// check then runs over the addresses, ports and lengths that crossed the
// network. What no socket option delivers is the sender's IPv4 ID and
// flags: the transport assumes ID 0 and DF, what a UDP transport sends.
// Over IPv6 the destination comes from IPV6_PKTINFO, hop limit and
// traffic class from IPV6_RECVHOPLIMIT and IPV6_RECVTCLASS, the flow
// label is written 0 (masked), and the check is the whole one.
//
// # What holds, and what does not yet
//
// Two model nodes interoperate over real UDP on loopback (SEND, WRITE,
// READ; TestUDPTwoNodes, TestWorkload, rocesim node), and two QPs of one
// node over IPv6 on ::1 (TestUDPIPv6). A node interoperates with real rxe
// over IPv4 (conformance's TestInteropUDP, root only: the node in a
// network namespace on a veth bridged to an rxe guest's link by rocesim
// switch; SEND, WRITE, READ both ways, 1 B to 64 KiB), with
// RecoverIPv4ID on; so does an unmodified ibv_rc_pingpong on the drop-in
// library with ROCESIM_TRANSPORT=udp against ibv_rc_pingpong on rxe
// (TestInteropUDPPingpong). What stood in the way on receive: rxe takes the
// IPv4 ID from __ip_select_ident (rxe_net.c prepare_ipv4_hdr: a hashed,
// incrementing counter, as the captures in captures/ show), which the
// receiving socket does not report, so the rebuilt header carries the
// wrong ID and the device drops rxe's frames for a bad ICRC. With
// UDPConfig.RecoverIPv4ID the transport solves the ICRC for the ID
// instead (wire.Packet.RecoverIPv4ID: the CRC is linear in the 16 ID
// bits), at the price of 16 of the check's 32 bits; TestUDPForeignIPID
// shows both, with a raw socket sending as rxe would. The clean ways out
// are RoCE v2 over IPv6 (no ID field: the transport does it, untried
// against rxe, whose IPv6 GIDs need a global or link-local address the
// VM's peer can reach) or a receive path that sees the IP header (a raw
// IPPROTO_UDP socket, or the Packet transport on an interface: both need
// CAP_NET_RAW). Sending to rxe does not meet the problem: rxe checks
// the ICRC over the header it received (rxe_icrc_check), which our
// kernel wrote with the ID 0 the transport computed with (what
// TestUDPOnTheWire checks on lo, and TestInteropUDP against rxe). The
// other obstacle is the path: the harness's VMs sit on dgram links with
// no IP route to the host's stack, and a NAT between (QEMU's user
// networking) rewrites addresses the ICRC covers; TestInteropUDP gives
// the VM a real segment (a veth into a namespace, bridged to the VM's
// link by rocesim switch).
//
// # The driver
//
// Driver (driver.go) owns one device: a loop goroutine takes each batch
// of frames the reader goroutine received, the caller's functions (Do),
// and the device's timer, reads the clock once per input (the device's
// sim.Time is the time since the driver started, never going backwards),
// and then runs the loop over dev.Ready that nic/ready.go describes:
// frames out through the transport in one Send, TxDone for each, Ready
// again, the timer armed for the batch's Deadline. Hooks let a host see
// every frame received (Input: ARP, a capture), every batch (Ready:
// completions and events), and every frame before and after it is sent
// (Output, Sent). Await waits, without polling, until a condition on the
// device holds, checking it each time the device hands out completions.
// Receive buffers come from a fixed set, so a flood of garbage on the
// port costs dropped datagrams, never memory, and a batch through the UDP
// transport allocates nothing (TestUDPTransportAllocs).
//
// # Nodes and workloads
//
// Node (node.go) is a device on the UDP transport (or any Transport) with
// its driver; RC is one RC QP on it with its memory region and CQ, which
// connects to an Endpoint (address, QPN, PSN, VA, R_Key) exchanged out of
// band. RunClient and RunServer (workload.go) are a scripted workload in
// the manner of ibv_rc_pingpong over such an exchange (TCP in rocesim
// node): N SENDs, WRITEs or READs, data checked on both sides, throughput
// and latency measured (BenchmarkUDPWorkload, make bench-realnet), with
// Workload.Depth operations outstanding (1: one round trip at a time).
// RC.BindMW binds a type 2 memory window for a peer's SEND WITH
// INVALIDATE; a zero-length Post or PostRecv has no SGE.
//
// Bad input from the network is counted, never fatal: garbage on the
// port (TestUDPGarbage, four rounds of random datagrams, the heap flat),
// and frames for an unknown QP, with a bad ICRC or cut inside a header
// (TestUDPBadInput) land in the device's RxDrops and RxErrors.
package realnet
