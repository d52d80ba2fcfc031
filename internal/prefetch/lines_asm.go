//go:build amd64 || arm64

package prefetch

// lines prefetches the line at first and the more lines after it
// (prefetch_$GOARCH.s).
func lines(first, more uintptr)
