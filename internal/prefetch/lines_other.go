//go:build !amd64 && !arm64

package prefetch

func lines(first, more uintptr) {}
