package main

import (
	"encoding/binary"

	"golang.org/x/sys/unix"
)

// eventFDs backs channels and async events with eventfds: blocking for
// the program (libibverbs' own fds are), written to 1 when an event
// waits and read back to 0 when none does, so poll and epoll on the fd
// see what ibv_get_cq_event would find.
type eventFDs struct{}

func (eventFDs) open() (int, error) { return unix.Eventfd(0, unix.EFD_CLOEXEC) }

// set moves the counter between 0 and 1; the model calls it only on a
// change, so the read never blocks.
func (eventFDs) set(fd int, readable bool) {
	var b [8]byte
	if readable {
		binary.NativeEndian.PutUint64(b[:], 1)
		_, _ = unix.Write(fd, b[:])
		return
	}
	_, _ = unix.Read(fd, b[:])
}

func (eventFDs) close(fd int) { _ = unix.Close(fd) }
