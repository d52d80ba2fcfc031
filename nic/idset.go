package nic

import "math/bits"

// idSet is the set of taken numbers in a cyclic index space (QPNs, MR
// and MW indices), as rxe's pools keep them in an xarray: finding the
// first free number at or after a cursor, as xa_alloc_cyclic does,
// costs a few word operations however many numbers are taken, where a
// walk from the cursor pays one step per taken number it passes (issue
// 20: set-up in O(1) per resource). Words are added as numbers are
// taken, so a device that uses 20 QPNs holds a few words, not a bitmap
// of its whole range.
//
// Two levels: bit b of words[w] is number w*64+b; bit c of full[f] says
// words[f*64+c] is all taken. A search looks in the cursor's word, then
// for the next word not full in full, whose length is the range over
// 4096: at most 256 words for rxe's 2^20 QPNs, scanned only past a run
// of 4096 consecutive taken numbers.
type idSet struct {
	words []uint64
	full  []uint64
}

// has reports whether n is taken.
func (s *idSet) has(n uint32) bool {
	w := int(n >> 6)
	return w < len(s.words) && s.words[w]&(1<<(n&63)) != 0
}

// take marks n taken.
func (s *idSet) take(n uint32) {
	w := int(n >> 6)
	for len(s.words) <= w {
		s.words = append(s.words, 0)
	}
	s.words[w] |= 1 << (n & 63)
	if s.words[w] == ^uint64(0) {
		f := w >> 6
		for len(s.full) <= f {
			s.full = append(s.full, 0)
		}
		s.full[f] |= 1 << (w & 63)
	}
}

// free marks n free.
func (s *idSet) free(n uint32) {
	w := int(n >> 6)
	if w >= len(s.words) {
		return
	}
	s.words[w] &^= 1 << (n & 63)
	if f := w >> 6; f < len(s.full) {
		s.full[f] &^= 1 << (w & 63)
	}
}

// firstFree returns the smallest free number in [from, hi], or false.
func (s *idSet) firstFree(from, hi uint32) (uint32, bool) {
	if from > hi {
		return 0, false
	}
	w := int(from >> 6)
	if w >= len(s.words) {
		return from, true // past every word: all free
	}
	if m := ^s.words[w] & (^uint64(0) << (from & 63)); m != 0 {
		n := uint32(w)<<6 | uint32(bits.TrailingZeros64(m))
		return n, n <= hi
	}
	// The next word after w that is not full.
	next := w + 1
	for f := next >> 6; ; f++ {
		var m uint64 = ^uint64(0) // words past full's end are not full
		if f < len(s.full) {
			m = ^s.full[f]
		}
		if f == next>>6 {
			m &= ^uint64(0) << (next & 63)
		}
		if m == 0 {
			continue
		}
		ww := f<<6 | bits.TrailingZeros64(m)
		n := uint32(ww) << 6
		if ww < len(s.words) {
			n |= uint32(bits.TrailingZeros64(^s.words[ww]))
		}
		return n, n <= hi
	}
}

// next returns the first free number at or after cursor in [lo, hi],
// wrapping to lo past hi, and takes it; false if every one is taken.
func (s *idSet) next(cursor, lo, hi uint32) (uint32, bool) {
	n, ok := s.firstFree(max(cursor, lo), hi)
	if !ok {
		n, ok = s.firstFree(lo, hi)
	}
	if ok {
		s.take(n)
	}
	return n, ok
}
