// Package rswitch is rocesim switch: a fault-injecting switch for real
// RoCE v2 traffic between two real endpoints. It applies a fault plan in
// the scenario files' format (package faults) to every frame with the
// decisions the simulated fabric makes on a frame's first hop (the same
// faults.Injector: CountTx numbers each PSN's transmissions, Decide
// matches the rules), forwards everything that is not RoCE v2 untouched,
// and writes a pcapng capture with the verdict as each frame's comment
// and a trace that package ladder draws. The plan's clock is the wall
// time since the switch started (or since Reset), less the time it was
// held (Hold, Release: the conformance rig stops it while a step is
// typed on a guest's console).
//
// # Endpoints
//
// Each side is a realnet.Transport:
//
//   - two QEMU VMs on datagram links (VMLinks: one UDP datagram per
//     Ethernet frame, as -netdev dgram): the conformance harness's rig,
//     whose switch this is;
//   - two interfaces through AF_PACKET (realnet.Packet; CAP_NET_RAW):
//     two network namespaces joined to the switch's by veth pairs, the
//     frames byte-exact in both directions but for the UDP and TCP
//     checksums the namespaces' kernels left to offload, which the
//     transport completes (PacketConfig.CompleteChecksums); a VM's
//     datagram link may be joined to such an interface too;
//   - two RoCE v2 hosts on UDP port 4791 (realnet.UDP, Config.Endpoints):
//     the switch holds a stand-in address for each, each host talks to
//     the other's stand-in, and the switch rewrites the addresses as it
//     forwards. The ICRC covers them, so it is recomputed with the error
//     the frame carried kept (wire.Packet.UpdateICRCWithError,
//     realnet.UDPConfig.KeepICRCError): a frame good at one end is good
//     at the other, a corrupted one stays bad.
//
// The switch forwards only between the two endpoints it was given: a
// datagram link takes frames from its VM's address only
// (realnet.TransportStats.Foreign), and on UDP a frame from any address
// but the endpoint's is dropped unjudged (Stats.Foreign).
//
// Bad input costs neither memory nor a crash: a frame whose ICRC fails is
// judged and forwarded as it is (the endpoint drops it, as rxe does) but
// not numbered for the plan's tx= key (Stats.BadICRC), so garbage with
// random QPNs and PSNs opens no transmission windows (TestSwitchBadInput:
// the heap is flat over a flood); the per-frame path allocates nothing,
// a capture and the plan's comments included (TestSwitchFrameAllocs).
// A frame shorter than an Ethernet header, received so from a whole-frame
// transport or cut so by a truncate rule, is dropped as a real switch
// drops a runt (Stats.Runts), traced drop=runt and captured with a
// comment saying why, without an allocation (TestSwitchRuntAllocs).
// Stats.TxEvictions reports flows the plan's tx= numbering forgot to
// bound its memory (faults.Injector.TxEvictions); rocesim switch warns
// when it is not 0.
//
// The flow of a frame is at the top of switch.go. The command is
// rocesim switch (cmd/rocesim/switch.go).
package rswitch
