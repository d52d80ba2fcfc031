//go:build !linux

package hugeheap

// Reserve does nothing where the kernel has no transparent huge pages to
// ask for; it reports that no memory was advised.
func Reserve(n int) (int, error) { return 0, nil }

// Mode returns "": no transparent huge pages.
func Mode() string { return "" }
