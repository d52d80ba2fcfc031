//go:build !amd64

package ntcopy

const supported = false

func lines(dst, src *byte, n uintptr) { panic("ntcopy: no non-temporal copy on this architecture") }
