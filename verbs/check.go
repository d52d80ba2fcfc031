package verbs

// Argument checks shared by the verbs. A verb called on a nil object, on
// an object of a closed context, or with an object of another context
// returns an error wrapping the errno libibverbs would give (EINVAL
// almost everywhere, as the kernel's uverbs handle lookups do), never a
// panic; the checks on values and states are package nic's.

import (
	"fmt"
	"syscall"

	"github.com/rocesim/rocesim/nic"
)

// errno returns the error a verb reports: a *nic.Error wrapping e, so
// that errors.Is(err, syscall.EINVAL) holds, with a message naming the
// verb and what was wrong.
func errno(e syscall.Errno, format string, args ...any) error {
	return &nic.Error{Errno: e, Msg: fmt.Sprintf(format, args...)}
}

// usable returns nil if c is an open context, else the error verb returns.
// Closing a device's file in the kernel destroys every object opened
// through it, so a verb on any of them fails once the context is closed.
func (c *Context) usable(verb string) error {
	switch {
	case c == nil:
		return errno(syscall.EINVAL, "%s: context is nil", verb)
	case c.closed:
		return errno(syscall.EINVAL, "%s: the context is closed", verb)
	}
	return nil
}

// nilObject returns the EINVAL of verb called on a nil what.
func nilObject(verb, what string) error {
	return errno(syscall.EINVAL, "%s: %s is nil", verb, what)
}

// sameContext returns the EINVAL of verb given an object of another
// context: the kernel looks handles up in the caller's own file, so one
// from another open device (or another host) is not found there.
func sameContext(verb, what string, got, want *Context) error {
	if got != want {
		return errno(syscall.EINVAL, "%s: %s belongs to another context", verb, what)
	}
	return nil
}

// destroyed is what a destroy verb returns: err, and when the device
// destroyed the object (err is nil), the context forgets it.
func (c *Context) destroyed(slot int, err error) error {
	if err == nil {
		c.owned.remove(slot)
	}
	return err
}
