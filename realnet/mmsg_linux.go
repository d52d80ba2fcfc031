//go:build linux

package realnet

// Batched datagram I/O on a UDP socket: recvmmsg(2) and sendmmsg(2)
// through golang.org/x/sys/unix, on the socket's non-blocking descriptor
// (syscall.RawConn), so a call that would block parks the goroutine in
// Go's network poller, as net.UDPConn does, and Close wakes it.
//
// The message headers, I/O vectors, address and control buffers are
// allocated once per socket; a batch allocates nothing.

import (
	"errors"
	"net"
	"net/netip"
	"os"
	"syscall"
	"unsafe"

	"golang.org/x/sys/unix"
)

// oobLen is the control buffer per message: IP_PKTINFO, IP_TTL and
// IP_TOS (or their IPv6 counterparts) with room to spare.
const oobLen = 128

// batchConn is a datagram socket with batched reads and writes.
type batchConn struct {
	rc syscall.RawConn
	v6 bool
	// link: an AF_PACKET socket, bound to its interface, sends with no
	// destination address.
	link bool

	rhdr  []unix.Mmsghdr
	riov  []unix.Iovec
	rname []unix.RawSockaddrInet6 // large enough for either family
	roob  [][oobLen]byte

	whdr  []unix.Mmsghdr
	wiov  []unix.Iovec
	wname []unix.RawSockaddrInet6

	// The system calls, with their arguments and results, as method
	// values bound once: a closure passed to RawConn.Read or Write would
	// be allocated on every call.
	rcall, wcall mmsgCall
}

// mmsgCall is one recvmmsg or sendmmsg call, run by RawConn.Read or Write
// through fn.
type mmsgCall struct {
	sysno uintptr
	hdrs  []unix.Mmsghdr
	got   int
	errno syscall.Errno
	fn    func(fd uintptr) bool // run, bound once
}

// run makes the call on fd; it reports false (wait, then call again) if
// it would block.
func (m *mmsgCall) run(fd uintptr) bool {
	r, _, e := unix.Syscall6(m.sysno, fd, uintptr(unsafe.Pointer(&m.hdrs[0])), uintptr(len(m.hdrs)), unix.MSG_DONTWAIT, 0, 0)
	if e == unix.EAGAIN || e == unix.EINTR {
		return false
	}
	m.got, m.errno = int(r), e
	return true
}

// newBatchConn wraps conn for batches of up to n datagrams.
func newBatchConn(conn *net.UDPConn, n int) (*batchConn, error) {
	rc, err := conn.SyscallConn()
	if err != nil {
		return nil, err
	}
	return newBatchRaw(rc, conn.LocalAddr().(*net.UDPAddr).IP.To4() == nil, n), nil
}

// newBatchRaw wraps a non-blocking socket for batches of up to n
// datagrams.
func newBatchRaw(rc syscall.RawConn, v6 bool, n int) *batchConn {
	c := &batchConn{rc: rc, v6: v6,
		rcall: mmsgCall{sysno: unix.SYS_RECVMMSG}, wcall: mmsgCall{sysno: unix.SYS_SENDMMSG},
		rhdr: make([]unix.Mmsghdr, n), riov: make([]unix.Iovec, n), rname: make([]unix.RawSockaddrInet6, n),
		roob: make([][oobLen]byte, n),
		whdr: make([]unix.Mmsghdr, n), wiov: make([]unix.Iovec, n), wname: make([]unix.RawSockaddrInet6, n)}
	for i := range n {
		h := &c.rhdr[i].Hdr
		h.Iov = &c.riov[i]
		h.SetIovlen(1)
		h.Name = (*byte)(unsafe.Pointer(&c.rname[i]))
		h.Control = &c.roob[i][0]
		w := &c.whdr[i].Hdr
		w.Iov = &c.wiov[i]
		w.SetIovlen(1)
		w.Name = (*byte)(unsafe.Pointer(&c.wname[i]))
	}
	c.rcall.fn, c.wcall.fn = c.rcall.run, c.wcall.run
	return c
}

// recv reads up to len(bufs) datagrams, bufs[i] receiving the i-th; it
// blocks until at least one has arrived.
func (c *batchConn) recv(bufs [][]byte) (int, error) {
	n := min(len(bufs), len(c.rhdr))
	for i := range n {
		c.riov[i].Base = &bufs[i][0]
		c.riov[i].SetLen(len(bufs[i]))
		h := &c.rhdr[i].Hdr
		h.Namelen = unix.SizeofSockaddrInet6
		h.SetControllen(oobLen)
		h.Flags = 0
	}
	got, err := c.mmsg(c.rc.Read, &c.rcall, c.rhdr[:n])
	if err != nil {
		return 0, closedOr(err)
	}
	return got, nil
}

// msgLen is the length of the i-th datagram of the last recv, and
// whether it was cut to fit its buffer.
func (c *batchConn) msgLen(i int) (n int, truncated bool) {
	return int(c.rhdr[i].Len), c.rhdr[i].Hdr.Flags&unix.MSG_TRUNC != 0
}

// from is the source address of the i-th datagram of the last recv.
func (c *batchConn) from(i int) netip.AddrPort {
	sa := &c.rname[i]
	if sa.Family == unix.AF_INET {
		s4 := (*unix.RawSockaddrInet4)(unsafe.Pointer(sa))
		return netip.AddrPortFrom(netip.AddrFrom4(s4.Addr), ntohs(s4.Port))
	}
	return netip.AddrPortFrom(netip.AddrFrom16(sa.Addr), ntohs(sa.Port))
}

// oob is the control data of the i-th datagram of the last recv.
func (c *batchConn) oob(i int) []byte {
	return c.roob[i][:c.rhdr[i].Hdr.Controllen]
}

// setSend fills the i-th message of the next send: payload to dst.
func (c *batchConn) setSend(i int, payload []byte, dst netip.AddrPort) {
	c.wiov[i].Base = nil
	if len(payload) > 0 {
		c.wiov[i].Base = &payload[0]
	}
	c.wiov[i].SetLen(len(payload))
	sa := &c.wname[i]
	h := &c.whdr[i].Hdr
	if c.link {
		h.Namelen = 0
		return
	}
	if c.v6 {
		*sa = unix.RawSockaddrInet6{Family: unix.AF_INET6, Addr: dst.Addr().As16()}
		sa.Port = htons(dst.Port())
		h.Namelen = unix.SizeofSockaddrInet6
	} else {
		s4 := (*unix.RawSockaddrInet4)(unsafe.Pointer(sa))
		*s4 = unix.RawSockaddrInet4{Family: unix.AF_INET, Addr: dst.Addr().Unmap().As4()}
		s4.Port = htons(dst.Port())
		h.Namelen = unix.SizeofSockaddrInet4
	}
}

// send sends the first n messages filled by setSend and returns how many
// the kernel took before the first failure.
func (c *batchConn) send(n int) (int, error) {
	done := 0
	for done < n {
		got, err := c.mmsg(c.rc.Write, &c.wcall, c.whdr[done:n])
		if err != nil {
			return done, closedOr(err)
		}
		done += got
	}
	return done, nil
}

// mmsg makes one recvmmsg or sendmmsg call over hdrs, through the
// RawConn's Read or Write (wait), which parks the goroutine in the
// network poller while the call would block.
func (c *batchConn) mmsg(wait func(func(uintptr) bool) error, call *mmsgCall, hdrs []unix.Mmsghdr) (int, error) {
	call.hdrs, call.got, call.errno = hdrs, 0, 0
	err := wait(call.fn)
	call.hdrs = nil
	if err == nil && call.errno != 0 {
		err = call.errno
	}
	return call.got, err
}

// closedOr maps the error of a closed socket to ErrClosed.
func closedOr(err error) error {
	if errors.Is(err, net.ErrClosed) || errors.Is(err, os.ErrClosed) {
		return ErrClosed
	}
	return err
}

// htons and ntohs convert a port between host order and the network
// order a raw sockaddr holds it in.
func htons(p uint16) (v uint16) {
	b := (*[2]byte)(unsafe.Pointer(&v))
	b[0], b[1] = byte(p>>8), byte(p)
	return v
}

func ntohs(p uint16) uint16 {
	b := (*[2]byte)(unsafe.Pointer(&p))
	return uint16(b[0])<<8 | uint16(b[1])
}
