package hugeheap

import (
	"fmt"
	"os"
	"runtime"
	"strings"
	"unsafe"

	"golang.org/x/sys/unix"
)

// hugePage is the size of an x86-64 or arm64 (4 KiB granule) transparent
// huge page: the unit the advice is given in.
const hugePage = 2 << 20

// Reserve grows the Go heap by n bytes of address space advised
// MADV_HUGEPAGE (see the package comment) and returns how many bytes
// the advice covers: n rounded down to whole huge pages within the
// block. Call it before the allocations it is for; it runs a
// collection.
func Reserve(n int) (int, error) {
	if n < 2*hugePage {
		return 0, fmt.Errorf("hugeheap: reserve of %d bytes: at least %d needed", n, 2*hugePage)
	}
	b := make([]byte, n)
	start := uintptr(unsafe.Pointer(unsafe.SliceData(b)))
	lo := (start + hugePage - 1) &^ (hugePage - 1)
	hi := (start + uintptr(n)) &^ (hugePage - 1)
	advised := b[lo-start : hi-start]
	err := unix.Madvise(advised, unix.MADV_HUGEPAGE)
	size := len(advised)
	// Drop the block: the collection frees it and sweeps it (runtime.GC
	// returns once every span is swept), so its pages are back in the
	// runtime's page heap, address space and advice kept, for what is
	// allocated next.
	b, advised = nil, nil
	runtime.GC()
	if err != nil {
		return 0, fmt.Errorf("hugeheap: madvise MADV_HUGEPAGE: %w", err)
	}
	return size, nil
}

// Mode returns the machine's transparent huge page mode ("always",
// "madvise" or "never"; "" if the kernel has none), the word in brackets
// in /sys/kernel/mm/transparent_hugepage/enabled.
func Mode() string {
	b, err := os.ReadFile("/sys/kernel/mm/transparent_hugepage/enabled")
	if err != nil {
		return ""
	}
	return bracketed(string(b))
}

// bracketed returns the word in brackets in s, the one a sysfs choice
// file has chosen ("always [madvise] never"), or "".
func bracketed(s string) string {
	i, j := strings.IndexByte(s, '['), strings.IndexByte(s, ']')
	if i < 0 || j < i {
		return ""
	}
	return s[i+1 : j]
}
