//go:build linux

package realnet

// Flow through the UDP transport:
//
// Send, per frame the device built (a whole Ethernet frame):
//  1. Decode the headers (wire.Packet.DecodeHeaders); anything but RoCE
//     v2 over IPv4 from our own address is refused (ErrRefused).
//  2. Rewrite in place the outer fields the kernel will choose and the
//     ICRC covers: the UDP source port becomes the socket's port, the
//     IPv4 ID 0 with DF set (what Linux puts on a datagram from an
//     unconnected socket with IP_PMTUDISC_DO: ip_select_ident_segs), the
//     TTL the socket's (64) and the TOS 0 (both masked, rewritten so the
//     capture shows the wire); recompute the IPv4 checksum and the ICRC.
//  3. sendmmsg the transport packets (BTH to ICRC) to the frame's
//     destination address, port 4791.
//
// Receive, per datagram (recvmmsg, into the buffer past room for the
// outer headers):
//  1. The source address and port come from the socket, the destination
//     address from IP_PKTINFO, the TTL and TOS from IP_RECVTTL and
//     IP_RECVTOS.
//  2. Write Ethernet (our MAC; a source MAC made from the source IPv4
//     address), IPv4 (ID 0, DF: see the package doc for why) and UDP
//     (checksum 0: the kernel has verified it) in front of the packet, so
//     the device's ICRC check runs over the addresses, ports and lengths
//     that crossed the network.

import (
	"encoding/binary"
	"fmt"
	"net"
	"net/netip"
	"sync/atomic"
	"unsafe"

	"golang.org/x/sys/unix"

	"github.com/rocesim/rocesim/wire"
)

// UDPConfig describes a RoCE v2 endpoint on a UDP socket.
type UDPConfig struct {
	// Addr is the local IPv4 address and port to bind: the device's own
	// address (its GID), port 4791 (0 means 4791). A specific address is
	// required, never 0.0.0.0: the device's frames carry it as their
	// source, and it is the one the ICRC is computed over.
	Addr netip.AddrPort
	// MAC is the device's Ethernet address, the destination of the frames
	// rebuilt on receive.
	MAC wire.MAC
	// Batch is the most datagrams one system call reads or writes (0: 32).
	Batch int
	// RecoverIPv4ID solves a received packet's ICRC for the IPv4 ID its
	// sender used (wire.Packet.RecoverIPv4ID) when the rebuilt header's
	// ID 0 does not verify: what receiving from rxe, whose IDs a socket
	// does not report, needs. The ICRC check then keeps 16 of its 32
	// bits (see the package doc).
	RecoverIPv4ID bool
	// KeepICRCError makes Send keep the error a frame's ICRC carries
	// (wire.Packet.UpdateICRCWithError) instead of writing a good one
	// over the rewritten headers: for a forwarder (rocesim switch), which
	// must pass on a frame with a bad ICRC as bad. A device's frames carry
	// none, so a node does not need it.
	KeepICRCError bool
}

// UDP is a Transport for RoCE v2 over a UDP socket bound to port 4791:
// the kernel does Ethernet, IP and UDP; the device's frames lose their
// outer headers on the way out and get them rebuilt on the way in (see
// the flow at the top of this file and the package doc for what the ICRC
// then covers).
type UDP struct {
	conn  *net.UDPConn
	bc    *batchConn
	local netip.AddrPort
	mac   wire.MAC
	batch int
	bufs  [][]byte    // Receive's views of the caller's buffers, past the header room
	pkt   wire.Packet // Send's view (the driver's loop goroutine)
	rpkt  wire.Packet // Receive's view (the reader goroutine)
	// recoverID: see UDPConfig.RecoverIPv4ID.
	recoverID bool
	// keepErr: see UDPConfig.KeepICRCError.
	keepErr bool
	// hdr is the outer headers' length: Ethernet, IPv4 or IPv6, UDP.
	hdr   int
	stats struct{ received, sent, truncated, garbage, refused, recovered atomic.Uint64 }
}

// UDP transport constants.
const (
	// sendTTL is the TTL the socket sends with, rxe's (rxe_net.c
	// prepare_ipv4_hdr is called with the AV's hop limit, 64 by default).
	sendTTL = 64
	// minPacket is the shortest transport packet: a BTH and an ICRC.
	minPacket = wire.BTHLen + wire.ICRCLen
)

// NewUDP binds the endpoint's socket.
func NewUDP(cfg UDPConfig) (*UDP, error) {
	a := cfg.Addr.Addr()
	if !a.IsValid() || a.Is4In6() || a.IsUnspecified() || a.Zone() != "" {
		return nil, fmt.Errorf("realnet: udp: Addr %v is not a specific IPv4 or IPv6 address", a)
	}
	v6 := a.Is6()
	if cfg.Addr.Port() == 0 {
		cfg.Addr = netip.AddrPortFrom(a, wire.UDPPortRoCEv2)
	}
	if cfg.Batch <= 0 {
		cfg.Batch = defaultBatch
	}
	network, level, opts := "udp4", unix.IPPROTO_IP, []struct{ opt, val int }{
		{unix.IP_PKTINFO, 1}, {unix.IP_RECVTTL, 1}, {unix.IP_RECVTOS, 1},
		// DF on every datagram, and with it ID 0 (see Send).
		{unix.IP_MTU_DISCOVER, unix.IP_PMTUDISC_DO},
		{unix.IP_TTL, sendTTL}, {unix.IP_TOS, 0},
	}
	if v6 {
		network, level, opts = "udp6", unix.IPPROTO_IPV6, []struct{ opt, val int }{
			{unix.IPV6_RECVPKTINFO, 1}, {unix.IPV6_RECVHOPLIMIT, 1}, {unix.IPV6_RECVTCLASS, 1},
			// Never fragment: a RoCE v2 packet is one datagram.
			{unix.IPV6_MTU_DISCOVER, unix.IPV6_PMTUDISC_DO},
			{unix.IPV6_UNICAST_HOPS, sendTTL}, {unix.IPV6_TCLASS, 0},
		}
	}
	conn, err := net.ListenUDP(network, net.UDPAddrFromAddrPort(cfg.Addr))
	if err != nil {
		return nil, fmt.Errorf("realnet: udp: %w", err)
	}
	_ = conn.SetReadBuffer(socketBuffer)
	_ = conn.SetWriteBuffer(socketBuffer)
	rc, err := conn.SyscallConn()
	if err == nil {
		var serr error
		err = rc.Control(func(fd uintptr) {
			for _, o := range opts {
				if serr == nil {
					serr = unix.SetsockoptInt(int(fd), level, o.opt, o.val)
				}
			}
		})
		if err == nil {
			err = serr
		}
	}
	var bc *batchConn
	if err == nil {
		bc, err = newBatchConn(conn, cfg.Batch)
	}
	if err != nil {
		conn.Close()
		return nil, fmt.Errorf("realnet: udp: %w", err)
	}
	return &UDP{conn: conn, bc: bc, local: conn.LocalAddr().(*net.UDPAddr).AddrPort(), mac: cfg.MAC, batch: cfg.Batch,
		bufs: make([][]byte, cfg.Batch), recoverID: cfg.RecoverIPv4ID, keepErr: cfg.KeepICRCError, hdr: outerLen(v6)}, nil
}

// LocalAddr is the address and port the endpoint is bound to.
func (u *UDP) LocalAddr() netip.AddrPort { return u.local }

// Receive implements Transport: each datagram becomes a whole frame
// (outer headers rebuilt, see the top of this file). A datagram cut to
// its buffer is counted in Truncated, one shorter than a BTH and an ICRC
// or without IP_PKTINFO in Garbage, and dropped.
func (u *UDP) Receive(msgs []Msg) (int, error) {
	for {
		n := min(len(msgs), u.batch)
		for i := range n {
			u.bufs[i] = msgs[i].Buf[u.hdr:]
		}
		got, err := u.bc.recv(u.bufs[:n])
		if err != nil {
			return 0, err
		}
		k := 0
		for i := range got {
			l, trunc := u.bc.msgLen(i)
			if trunc {
				u.stats.truncated.Add(1)
				continue
			}
			if l < minPacket || !u.rebuild(msgs[i].Buf, l, u.bc.from(i), u.bc.oob(i)) {
				u.stats.garbage.Add(1)
				continue
			}
			msgs[i].Buf, msgs[k].Buf = msgs[k].Buf, msgs[i].Buf
			msgs[k].N = u.hdr + l
			k++
		}
		if k > 0 {
			u.stats.received.Add(uint64(k))
			return k, nil
		}
	}
}

// outerLen is the length of the outer headers over IPv4 or IPv6.
func outerLen(v6 bool) int {
	if v6 {
		return wire.EthernetLen + wire.IPv6Len + wire.UDPLen
	}
	return wire.EthernetLen + wire.IPv4MinLen + wire.UDPLen
}

// rebuild writes the outer headers of a received packet of n bytes at
// buf[u.hdr:]; it reports false if the control data lacks the
// destination address.
func (u *UDP) rebuild(buf []byte, n int, from netip.AddrPort, oob []byte) bool {
	dst, ttl, tos, ok := parseOOB(oob)
	src := from.Addr()
	if !ok || src.Is4In6() || src.Is6() != u.local.Addr().Is6() || dst.Is6() != src.Is6() {
		return false
	}
	eth := buf[:wire.EthernetLen]
	copy(eth[0:6], u.mac[:])
	sm := StandInMAC(src)
	copy(eth[6:12], sm[:])
	ipEnd := u.hdr - wire.UDPLen
	if src.Is6() {
		binary.BigEndian.PutUint16(eth[12:], wire.EtherTypeIPv6)
		ip := buf[wire.EthernetLen:ipEnd]
		// Flow label 0: not delivered, and masked in the ICRC.
		binary.BigEndian.PutUint32(ip[0:], 6<<28|uint32(tos)<<20)
		binary.BigEndian.PutUint16(ip[4:], uint16(wire.UDPLen+n))
		ip[6] = wire.ProtocolUDP
		ip[7] = ttl
		s16, d16 := src.As16(), dst.As16()
		copy(ip[8:24], s16[:])
		copy(ip[24:40], d16[:])
	} else {
		binary.BigEndian.PutUint16(eth[12:], wire.EtherTypeIPv4)
		ip := wire.IPv4(buf[wire.EthernetLen:ipEnd])
		ip[0] = 4<<4 | wire.IPv4MinLen/4
		ip[1] = tos
		binary.BigEndian.PutUint16(ip[2:], uint16(wire.IPv4MinLen+wire.UDPLen+n))
		binary.BigEndian.PutUint16(ip[4:], 0)                   // ID: not delivered by the socket (package doc)
		binary.BigEndian.PutUint16(ip[6:], wire.IPv4FlagDF<<13) // DF, offset 0: a fragment was reassembled by the kernel
		ip[8] = ttl
		ip[9] = wire.ProtocolUDP
		s4, d4 := src.As4(), dst.As4()
		copy(ip[12:16], s4[:])
		copy(ip[16:20], d4[:])
		ip.SetChecksum()
	}
	udp := buf[ipEnd:u.hdr]
	binary.BigEndian.PutUint16(udp[0:], from.Port())
	binary.BigEndian.PutUint16(udp[2:], u.local.Port())
	binary.BigEndian.PutUint16(udp[4:], uint16(wire.UDPLen+n))
	binary.BigEndian.PutUint16(udp[6:], 0) // verified by the kernel; outside the ICRC
	if u.recoverID && !src.Is6() {
		u.recoverIPv4ID(buf[:u.hdr+n])
	}
	return true
}

// recoverIPv4ID writes into a rebuilt frame the IPv4 ID its sender used,
// found from its ICRC, when ID 0 does not verify; a frame no ID makes
// verify is left as it is, for the device to count its bad ICRC.
func (u *UDP) recoverIPv4ID(frame []byte) {
	p := &u.rpkt
	if p.DecodeHeaders(frame) != nil && !p.StrayPayload() || p.ICRCValid() {
		return
	}
	if id, ok := p.RecoverIPv4ID(); ok {
		binary.BigEndian.PutUint16(p.IPv4[4:], id)
		p.IPv4.SetChecksum()
		u.stats.recovered.Add(1)
	}
}

// parseOOB reads IP_PKTINFO, IP_TTL and IP_TOS (or IPV6_PKTINFO,
// IPV6_HOPLIMIT and IPV6_TCLASS) from a datagram's control data without
// allocating (unix.ParseSocketControlMessage allocates).
func parseOOB(b []byte) (dst netip.Addr, ttl, tos uint8, ok bool) {
	ttl = sendTTL
	for len(b) >= unix.SizeofCmsghdr {
		h := (*unix.Cmsghdr)(unsafe.Pointer(&b[0]))
		l := int(h.Len)
		if l < unix.SizeofCmsghdr || l > len(b) {
			break
		}
		data := b[unix.SizeofCmsghdr:l]
		switch h.Level {
		case unix.IPPROTO_IPV6:
			switch h.Type {
			case unix.IPV6_PKTINFO:
				if len(data) >= unix.SizeofInet6Pktinfo {
					pi := (*unix.Inet6Pktinfo)(unsafe.Pointer(&data[0]))
					dst, ok = netip.AddrFrom16(pi.Addr), true
				}
			case unix.IPV6_HOPLIMIT:
				if len(data) >= 4 {
					ttl = uint8(*(*int32)(unsafe.Pointer(&data[0])))
				}
			case unix.IPV6_TCLASS:
				if len(data) >= 4 {
					tos = uint8(*(*int32)(unsafe.Pointer(&data[0])))
				}
			}
		case unix.IPPROTO_IP:
			switch h.Type {
			case unix.IP_PKTINFO:
				if len(data) >= unix.SizeofInet4Pktinfo {
					pi := (*unix.Inet4Pktinfo)(unsafe.Pointer(&data[0]))
					dst, ok = netip.AddrFrom4(pi.Addr), true
				}
			case unix.IP_TTL:
				if len(data) >= 4 {
					ttl = uint8(*(*int32)(unsafe.Pointer(&data[0])))
				}
			case unix.IP_TOS:
				if len(data) >= 1 {
					tos = data[0]
				}
			}
		}
		next := unix.CmsgSpace(l - unix.SizeofCmsghdr)
		if next > len(b) {
			break
		}
		b = b[next:]
	}
	return dst, ttl, tos, ok
}

// Send implements Transport: each frame is rewritten to the outer headers
// the kernel sends it with, its ICRC recomputed over them, and its
// transport packet sent to the frame's destination on port 4791 (see the
// top of this file). A frame that is not RoCE v2 over IPv4 from our
// address is counted in Refused and reported as ErrRefused at its index.
func (u *UDP) Send(frames [][]byte) (int, error) {
	done := 0
	for done < len(frames) {
		n := 0
		var refused bool
		for n < u.batch && done+n < len(frames) {
			payload, dst, ok := u.rewrite(frames[done+n])
			if !ok {
				refused = true
				break
			}
			u.bc.setSend(n, payload, dst)
			n++
		}
		sent := 0
		var err error
		if n > 0 {
			sent, err = u.bc.send(n)
			u.stats.sent.Add(uint64(sent))
		}
		done += sent
		if err != nil {
			return done, err
		}
		if refused {
			u.stats.refused.Add(1)
			return done, ErrRefused
		}
	}
	return done, nil
}

// rewrite sets the outer fields of frame to those the kernel sends it
// with and recomputes the ICRC; it returns the transport packet and where
// it goes.
func (u *UDP) rewrite(frame []byte) (payload []byte, dst netip.AddrPort, ok bool) {
	p := &u.pkt
	if p.DecodeHeaders(frame) != nil && !p.StrayPayload() || p.Src() != u.local.Addr() || len(p.Trailer) != 0 {
		return nil, netip.AddrPort{}, false
	}
	var icrcErr uint32
	if u.keepErr {
		icrcErr = p.ICRCError()
	}
	if p.IPv6 != nil {
		// Traffic class and hop limit: the socket's; flow label 0 (the
		// kernel's default without IPV6_FLOWINFO_SEND); all three masked.
		binary.BigEndian.PutUint32(p.IPv6[0:], 6<<28)
		p.IPv6[7] = sendTTL
	} else {
		ip := p.IPv4
		if len(ip) != wire.IPv4MinLen {
			return nil, netip.AddrPort{}, false // options: the socket would not send them
		}
		ip[1] = 0 // TOS: the socket's (IP_TOS 0); masked in the ICRC
		binary.BigEndian.PutUint16(ip[4:], 0)
		binary.BigEndian.PutUint16(ip[6:], wire.IPv4FlagDF<<13)
		ip[8] = sendTTL
		ip.SetChecksum()
		// The kernel fills in a checksum; outside the ICRC. Zero keeps
		// UpdateICRC from computing one.
		binary.BigEndian.PutUint16(p.UDP[6:], 0)
	}
	binary.BigEndian.PutUint16(p.UDP[0:], u.local.Port())
	// Over IPv6 the UDP checksum is recomputed too (it is never zero
	// there): the capture then shows the one the kernel sends.
	p.UpdateICRCWithError(icrcErr)
	return frame[u.hdr:], netip.AddrPortFrom(p.Dst(), p.UDP.DstPort()), true
}

// BatchSize implements Transport.
func (u *UDP) BatchSize() int { return u.batch }

// Carries implements Transport: transport packets.
func (u *UDP) Carries() Carriage { return TransportPackets }

// Stats implements Transport.
func (u *UDP) Stats() TransportStats {
	return TransportStats{Received: u.stats.received.Load(), Sent: u.stats.sent.Load(),
		Truncated: u.stats.truncated.Load(), Garbage: u.stats.garbage.Load(), Refused: u.stats.refused.Load(),
		Recovered: u.stats.recovered.Load()}
}

// Close implements Transport.
func (u *UDP) Close() error { return u.conn.Close() }
