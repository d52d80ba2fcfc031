//go:build !amd64

package ntcopy

func lines(dst, src *byte, n uintptr) { panic("ntcopy: no non-temporal copy on this architecture") }

// Fence does nothing where Copy makes only ordinary stores.
func Fence() {}
