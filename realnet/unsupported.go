//go:build !linux

package realnet

import (
	"errors"
	"net/netip"

	"github.com/rocesim/rocesim/wire"
)

// errUnsupported is returned by the socket transports off Linux: they use
// recvmmsg, sendmmsg and IP_PKTINFO.
var errUnsupported = errors.New("realnet: the socket transports need Linux")

// DgramConfig describes a datagram link (Linux only).
type DgramConfig struct {
	Local, Peer netip.AddrPort
	Batch       int
}

// Dgram is the datagram-link transport (Linux only).
type Dgram struct{ Transport }

// NewDgram fails off Linux.
func NewDgram(DgramConfig) (*Dgram, error) { return nil, errUnsupported }

// LocalAddr is the zero address off Linux.
func (*Dgram) LocalAddr() netip.AddrPort { return netip.AddrPort{} }

// UDPConfig describes a RoCE v2 endpoint on a UDP socket (Linux only).
type UDPConfig struct {
	Addr          netip.AddrPort
	MAC           wire.MAC
	Batch         int
	RecoverIPv4ID bool
	KeepICRCError bool
}

// UDP is the UDP transport (Linux only).
type UDP struct{ Transport }

// NewUDP fails off Linux.
func NewUDP(UDPConfig) (*UDP, error) { return nil, errUnsupported }

// LocalAddr is the zero address off Linux.
func (*UDP) LocalAddr() netip.AddrPort { return netip.AddrPort{} }
