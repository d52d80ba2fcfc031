// Package ntcopy copies bytes into memory that will not be read again
// soon, past the caches: non-temporal stores (MOVNTDQ on amd64; a plain
// copy elsewhere, and under the race detector, which sees nothing inside
// assembly), which neither read the destination's lines first nor push
// out of the caches what the program is about to use.
//
// The fabric of a large world writes each frame into a buffer that waits
// behind thousands of others before anyone reads it (README, "Scale": the
// alltoall at N = 256 has 84 MB of frames in flight): an ordinary copy
// reads each of those cold lines before it writes them and evicts the
// state the next events need, for nothing. In a small world the frame is
// read at once, from the cache, and an ordinary copy is the right one
// (sim/fabric chooses by the size of its buffers).
package ntcopy
