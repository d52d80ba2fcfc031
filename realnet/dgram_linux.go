//go:build linux

package realnet

import (
	"fmt"
	"net"
	"net/netip"
	"sync/atomic"

	"github.com/rocesim/rocesim/wire"
)

// DgramConfig describes a datagram link: each Ethernet frame is one UDP
// datagram between two fixed addresses, as QEMU's -netdev dgram (and
// -netdev socket,udp=) joins a VM's NIC to a peer.
type DgramConfig struct {
	// Local is where the link listens (port 0 picks a free one): the
	// VM's remote address.
	Local netip.AddrPort
	// Peer is where frames are sent: the VM's local address.
	Peer netip.AddrPort
	// Batch is the most frames one system call reads or writes (0: 32).
	Batch int
}

// Dgram is a Transport for whole Ethernet frames over a datagram link:
// byte-exact in both directions, outer headers included, so the peer's
// ICRC is checked over exactly what it sent. It carries any frame (ARP
// too); what to make of one is the driver's business. It takes frames
// from Peer only: a datagram from any other address is counted (Foreign)
// and dropped.
type Dgram struct {
	frameConn
	conn *net.UDPConn
}

// socketBuffer is the socket buffer size asked for (best effort): a
// burst of a long message fits, and a datagram the kernel has no room
// for is lost.
const socketBuffer = 4 << 20

// defaultBatch is the batch size when the configuration gives none.
const defaultBatch = 32

// NewDgram opens the link's socket.
func NewDgram(cfg DgramConfig) (*Dgram, error) {
	if !cfg.Peer.IsValid() || cfg.Peer.Port() == 0 {
		return nil, fmt.Errorf("realnet: dgram link: peer %v is not an address and port", cfg.Peer)
	}
	if cfg.Batch <= 0 {
		cfg.Batch = defaultBatch
	}
	network := "udp4"
	if cfg.Local.Addr().Is6() {
		network = "udp6"
	}
	conn, err := net.ListenUDP(network, net.UDPAddrFromAddrPort(cfg.Local))
	if err != nil {
		return nil, fmt.Errorf("realnet: dgram link: %w", err)
	}
	_ = conn.SetReadBuffer(socketBuffer)
	_ = conn.SetWriteBuffer(socketBuffer)
	bc, err := newBatchConn(conn, cfg.Batch)
	if err != nil {
		conn.Close()
		return nil, fmt.Errorf("realnet: dgram link: %w", err)
	}
	return &Dgram{frameConn: newFrameConn(bc, cfg.Peer, cfg.Batch), conn: conn}, nil
}

// LocalAddr is the address the link listens on.
func (d *Dgram) LocalAddr() netip.AddrPort {
	return d.conn.LocalAddr().(*net.UDPAddr).AddrPort()
}

// frameConn is a Transport for whole frames over a batchConn, each frame
// one datagram to peer (ignored on an AF_PACKET socket): Dgram and Packet.
type frameConn struct {
	bc    *batchConn
	peer  netip.AddrPort
	batch int
	bufs  [][]byte // Receive's views of the caller's buffers
	stats struct{ received, sent, truncated, foreign, checksummed atomic.Uint64 }
	// closed is set by Close before the socket closes: an os.File's
	// RawConn reports a closed descriptor as an error no sentinel matches.
	closed atomic.Bool
}

func newFrameConn(bc *batchConn, peer netip.AddrPort, batch int) frameConn {
	return frameConn{bc: bc, peer: peer, batch: batch, bufs: make([][]byte, batch)}
}

// Receive implements Transport. A datagram longer than its buffer is
// counted (Truncated) and dropped.
func (c *frameConn) Receive(msgs []Msg) (int, error) {
	for {
		n := min(len(msgs), c.batch)
		for i := range n {
			c.bufs[i] = msgs[i].Buf
		}
		got, err := c.bc.recv(c.bufs[:n])
		if err != nil {
			if c.closed.Load() {
				err = ErrClosed
			}
			return 0, err
		}
		k := 0
		for i := range got {
			l, trunc := c.bc.msgLen(i)
			if trunc {
				c.stats.truncated.Add(1)
				continue
			}
			if c.peer.IsValid() && c.bc.from(i) != c.peer {
				// A datagram link has one peer (the VM's QEMU); anything
				// else on its port is not the link's traffic.
				c.stats.foreign.Add(1)
				continue
			}
			if c.bc.link && csumNotReady(c.bc.oob(i)) && wire.CompleteChecksum(msgs[i].Buf[:l]) {
				c.stats.checksummed.Add(1)
			}
			msgs[i].Buf, msgs[k].Buf = msgs[k].Buf, msgs[i].Buf
			msgs[k].N = l
			k++
		}
		if k > 0 {
			c.stats.received.Add(uint64(k))
			return k, nil
		}
	}
}

// Send implements Transport: every frame goes to the peer as it is.
func (c *frameConn) Send(frames [][]byte) (int, error) {
	done := 0
	for done < len(frames) {
		n := min(len(frames)-done, c.batch)
		for i := range n {
			c.bc.setSend(i, frames[done+i], c.peer)
		}
		sent, err := c.bc.send(n)
		done += sent
		c.stats.sent.Add(uint64(sent))
		if err != nil {
			return done, err
		}
	}
	return done, nil
}

// BatchSize implements Transport.
func (c *frameConn) BatchSize() int { return c.batch }

// Carries implements Transport: whole frames.
func (c *frameConn) Carries() Carriage { return WholeFrames }

// Stats implements Transport.
func (c *frameConn) Stats() TransportStats {
	return TransportStats{Received: c.stats.received.Load(), Sent: c.stats.sent.Load(),
		Truncated: c.stats.truncated.Load(), Foreign: c.stats.foreign.Load(), Checksummed: c.stats.checksummed.Load()}
}

// Close implements Transport.
func (d *Dgram) Close() error {
	d.closed.Store(true)
	return d.conn.Close()
}
