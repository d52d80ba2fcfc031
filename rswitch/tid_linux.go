package rswitch

import "golang.org/x/sys/unix"

// gettid returns the calling OS thread's ID.
func gettid() int { return unix.Gettid() }
