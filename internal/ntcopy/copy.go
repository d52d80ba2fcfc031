package ntcopy

import "unsafe"

// minBody is the shortest copy worth the non-temporal path: below it the
// alignment's head and tail would be most of the work.
const minBody = 256

// Copy copies min(len(dst), len(src)) bytes from src to dst, as copy
// does, and returns that count. The bytes are the same; only the caches
// differ: the body of a long copy goes to memory with non-temporal
// stores, fenced before Copy returns (SFENCE), so that another core
// that later learns of the copy through a lock or an atomic sees it.
// dst and src must not overlap.
func Copy(dst, src []byte) int {
	n := min(len(dst), len(src))
	if n < minBody || !supported {
		return copy(dst, src)
	}
	// The stores need 16-byte alignment; a line-aligned body keeps each
	// 64-byte group of stores in one line.
	head := int(-uintptr(unsafe.Pointer(unsafe.SliceData(dst))) & 63)
	copy(dst[:head], src[:head])
	body := (n - head) &^ 63
	lines(unsafe.SliceData(dst[head:]), unsafe.SliceData(src[head:]), uintptr(body))
	copy(dst[head+body:n], src[head+body:n])
	return n
}
