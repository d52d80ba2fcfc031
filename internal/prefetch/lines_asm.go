//go:build amd64 || arm64

package prefetch

// lines prefetches the lines of [p, p+n), n > 0 (prefetch_$GOARCH.s).
func lines(p, n uintptr)
