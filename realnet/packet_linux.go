//go:build linux

package realnet

import (
	"fmt"
	"net"
	"net/netip"
	"os"
	"unsafe"

	"golang.org/x/sys/unix"
)

// PacketConfig describes an AF_PACKET endpoint on a network interface.
type PacketConfig struct {
	// Interface is the interface's name ("eth0", "veth1", "lo").
	Interface string
	// Batch is the most frames one system call reads or writes (0: 32).
	Batch int
	// CompleteChecksums completes the UDP or TCP checksum of a frame the
	// host left to offload (see Packet): what a forwarder needs (rocesim
	// switch), and a cost over every such frame an observer can spare.
	CompleteChecksums bool
}

// Packet is a Transport for whole Ethernet frames on a network interface
// through an AF_PACKET socket (packet(7)): every frame the interface
// receives, byte-exact, and frames written to it as they are. Opening one
// needs CAP_NET_RAW. Frames the host itself sends on the interface are
// not returned (PACKET_IGNORE_OUTGOING); on the loopback interface each
// datagram is then seen once, with a zero Ethernet header.
//
// A frame the host itself sent on a virtual interface (a veth from a
// network namespace) may arrive with its UDP or TCP checksum left to an
// offload that never ran (TP_STATUS_CSUMNOTREADY in PACKET_AUXDATA): with
// PacketConfig.CompleteChecksums the transport completes it
// (wire.CompleteChecksum, counted in TransportStats.Checksummed), so the
// frame can be sent on as a wire would carry it.
//
// The kernel's own stack sees the interface's traffic too: a device on an
// AF_PACKET socket should own an address the host's stack does not (as a
// NIC with its own MAC on a bridge or veth), or the kernel answers the
// peer as well (an ICMP port unreachable for UDP 4791).
type Packet struct {
	frameConn
	file *os.File
}

// NewPacket opens an AF_PACKET socket on the interface.
func NewPacket(cfg PacketConfig) (*Packet, error) {
	ifc, err := net.InterfaceByName(cfg.Interface)
	if err != nil {
		return nil, fmt.Errorf("realnet: packet: %w", err)
	}
	if cfg.Batch <= 0 {
		cfg.Batch = defaultBatch
	}
	proto := int(htons(unix.ETH_P_ALL))
	fd, err := unix.Socket(unix.AF_PACKET, unix.SOCK_RAW|unix.SOCK_NONBLOCK|unix.SOCK_CLOEXEC, proto)
	if err != nil {
		return nil, fmt.Errorf("realnet: packet: %s: %w (needs CAP_NET_RAW)", cfg.Interface, err)
	}
	err = unix.Bind(fd, &unix.SockaddrLinklayer{Protocol: uint16(proto), Ifindex: ifc.Index})
	if err == nil {
		err = unix.SetsockoptInt(fd, unix.SOL_PACKET, unix.PACKET_IGNORE_OUTGOING, 1)
	}
	if err == nil && cfg.CompleteChecksums {
		// Each frame's status, to complete checksums left to offload.
		err = unix.SetsockoptInt(fd, unix.SOL_PACKET, unix.PACKET_AUXDATA, 1)
	}
	if err == nil {
		_ = unix.SetsockoptInt(fd, unix.SOL_SOCKET, unix.SO_RCVBUF, socketBuffer)
		_ = unix.SetsockoptInt(fd, unix.SOL_SOCKET, unix.SO_SNDBUF, socketBuffer)
	}
	if err != nil {
		unix.Close(fd)
		return nil, fmt.Errorf("realnet: packet: %s: %w", cfg.Interface, err)
	}
	// A non-blocking descriptor in an os.File is registered with Go's
	// network poller, so SyscallConn's Read and Write park the goroutine
	// and Close wakes it.
	f := os.NewFile(uintptr(fd), "packet:"+cfg.Interface)
	rc, err := f.SyscallConn()
	if err != nil {
		f.Close()
		return nil, fmt.Errorf("realnet: packet: %s: %w", cfg.Interface, err)
	}
	bc := newBatchRaw(rc, false, cfg.Batch)
	bc.link = true
	return &Packet{frameConn: newFrameConn(bc, netip.AddrPort{}, cfg.Batch), file: f}, nil
}

// Close implements Transport.
func (p *Packet) Close() error {
	p.closed.Store(true)
	return p.file.Close()
}

// csumNotReady reports whether a frame's PACKET_AUXDATA (its control
// data from recvmmsg) says its checksum was left to offload.
func csumNotReady(oob []byte) bool {
	for len(oob) >= unix.SizeofCmsghdr {
		h := (*unix.Cmsghdr)(unsafe.Pointer(&oob[0]))
		l := int(h.Len)
		if l < unix.SizeofCmsghdr || l > len(oob) {
			return false
		}
		if h.Level == unix.SOL_PACKET && h.Type == unix.PACKET_AUXDATA && l-unix.SizeofCmsghdr >= int(unsafe.Sizeof(unix.TpacketAuxdata{})) {
			aux := (*unix.TpacketAuxdata)(unsafe.Pointer(&oob[unix.SizeofCmsghdr]))
			return aux.Status&unix.TP_STATUS_CSUMNOTREADY != 0
		}
		next := unix.CmsgSpace(l - unix.SizeofCmsghdr)
		if next > len(oob) {
			return false
		}
		oob = oob[next:]
	}
	return false
}
