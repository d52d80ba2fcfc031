package ntcopy

// lines copies n bytes, a multiple of 64 and more than 0, from src to
// dst (16-byte aligned) with non-temporal stores, unfenced
// (ntcopy_amd64.s).
//
//go:noescape
func lines(dst, src *byte, n uintptr)

// Fence makes the non-temporal stores this goroutine's core made before
// it visible to every other core before any store after it (SFENCE).
// See Copy for when it is needed.
func Fence()
