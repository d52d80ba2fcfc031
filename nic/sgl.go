package nic

// peek returns the bytes an SGE names, for inline data: they must lie in
// a registered MR (rocesim has no other memory), whose access flags are
// not checked, as the NIC never reads inline data from memory itself.
// Bytes outside any MR read as nothing.
func (t *memTable) peek(s SGE) []byte {
	mr := t.byLKey(s.LKey)
	if mr == nil || s.Addr < mr.Addr || s.Addr-mr.Addr+uint64(s.Length) > mr.Length {
		return nil
	}
	start := s.Addr - mr.Addr
	return mr.buf[start : start+uint64(s.Length)]
}
