package realnet

import (
	"errors"
	"net/netip"

	"github.com/rocesim/rocesim/wire"
)

// Transport moves a device's Ethernet frames to and from a real network,
// a batch at a time, in the spirit of wireguard-go's conn.Bind: the
// driver hands it buffers to receive into and frames to send, and never
// looks at sockets. Every transport exchanges whole Ethernet frames with
// the driver, so the device always sees and builds the frames it would on
// a simulated link; what differs is how much of the frame crosses the
// network as it is (Carries).
//
// Receive is called from one goroutine, Send from another (the driver's
// loop); Close may be called from any goroutine and makes a blocked
// Receive return ErrClosed.
type Transport interface {
	// Receive blocks until at least one frame has arrived, then fills
	// msgs[0:n] (at most len(msgs), at most BatchSize) and returns n.
	// Each Msg's Buf is the caller's buffer (BufLen bytes); the transport
	// sets N, the frame's length (the frame is Buf[:N]). A datagram that
	// is not a frame the transport can carry (garbage, truncated) is
	// counted in the transport's Stats and dropped, never returned.
	Receive(msgs []Msg) (n int, err error)
	// Send puts frames on the network, in order, and returns how many
	// left before the first failure (and that failure). A transport may
	// rewrite a frame's outer headers in place to what the network
	// carries (the UDP transport does: see UDP), so after Send the frame
	// shows what was sent.
	Send(frames [][]byte) (n int, err error)
	// BatchSize is the most frames one Receive or Send handles in one
	// system call.
	BatchSize() int
	// Carries says what of a frame crosses the network as the device
	// built it.
	Carries() Carriage
	// Stats returns the transport's counters.
	Stats() TransportStats
	// Close closes the socket; a blocked Receive returns ErrClosed.
	Close() error
}

// Msg is one frame received: Buf is the caller's buffer, N the frame's
// length in it.
type Msg struct {
	Buf []byte
	N   int
}

// Carriage says what of a frame crosses the network as the device built
// it.
type Carriage uint8

const (
	// WholeFrames: every byte, outer headers included (a QEMU socket or
	// dgram link, AF_PACKET). The ICRC is checked over exactly what the
	// peer sent.
	WholeFrames Carriage = iota
	// TransportPackets: the kernel builds Ethernet, IP and UDP; only the
	// RoCE v2 transport packet (BTH to ICRC) is the device's. The
	// transport rewrites the outer headers the kernel chooses before the
	// ICRC is computed on send, and rebuilds them from the datagram on
	// receive (see UDP).
	TransportPackets
)

// String names the carriage.
func (c Carriage) String() string {
	if c == WholeFrames {
		return "whole frames"
	}
	return "transport packets"
}

// TransportStats counts what a transport did.
type TransportStats struct {
	Received    uint64 // frames handed to the driver
	Sent        uint64 // frames the socket took
	Truncated   uint64 // datagrams longer than a buffer, dropped
	Garbage     uint64 // datagrams that are not a frame this transport carries, dropped
	Refused     uint64 // frames Send would not put on the network (not RoCE v2 over this transport's IP version, wrong source address)
	Recovered   uint64 // frames whose sender's IPv4 ID was found from the ICRC (UDPConfig.RecoverIPv4ID)
	Foreign     uint64 // datagrams from an address that is not a datagram link's peer, dropped
	Checksummed uint64 // frames whose UDP or TCP checksum, left to offload, the transport completed (Packet)
}

// BufLen is the size of a receive buffer: a 9000-byte jumbo frame fits,
// and the largest frame the device builds (4096 bytes of payload) with
// room to spare. A longer datagram is counted as truncated.
const BufLen = 16 << 10

// ErrClosed is returned by Receive and Send once the transport is closed.
var ErrClosed = errors.New("realnet: transport closed")

// ErrRefused is returned by Send for a frame the transport cannot carry.
var ErrRefused = errors.New("realnet: frame refused by the transport")

// StandInMAC is the Ethernet address the UDP transport writes as the
// source of the frames it rebuilds from datagrams sent by ip:
// 02:00:a.b.c.d, locally administered, from the IPv4 address or the last
// four bytes of the IPv6 one. The kernel resolves the real one; a device
// on the UDP transport lists its peers under this address
// (nic.Device.AddNeighbour), which the transport strips again on send.
func StandInMAC(ip netip.Addr) wire.MAC {
	a := ip.Unmap().As16()
	return wire.MAC{0x02, 0x00, a[12], a[13], a[14], a[15]}
}
