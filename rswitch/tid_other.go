//go:build !linux

package rswitch

// gettid returns 0: thread IDs are only reported on Linux.
func gettid() int { return 0 }
