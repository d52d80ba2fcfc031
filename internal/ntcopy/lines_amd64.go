package ntcopy

// lines copies n bytes, a multiple of 64 and more than 0, from src to
// dst (16-byte aligned) with non-temporal stores, then fences them
// (ntcopy_amd64.s).
//
//go:noescape
func lines(dst, src *byte, n uintptr)
