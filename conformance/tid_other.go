//go:build !linux

package conformance

// gettid returns 0: only Linux has per-thread schedstat (cpuwait.go).
func gettid() int { return 0 }
