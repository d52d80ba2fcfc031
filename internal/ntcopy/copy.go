package ntcopy

import "unsafe"

// minBody is the shortest copy worth the non-temporal path: below it the
// alignment's head and tail would be most of the work.
const minBody = 256

// Copy copies min(len(dst), len(src)) bytes from src to dst, as copy
// does, and returns that count. The bytes are the same; only the caches
// differ: the body of a long copy goes to memory with non-temporal
// stores. dst and src must not overlap.
//
// The stores are not fenced. The goroutine that copied reads them back
// as it reads any store of its own (a core sees its own stores in
// program order, whatever their type; a goroutine moved to another core
// passes the scheduler's locks or the kernel's switch on the way, which
// drain them as below). Another goroutine sees them once
// it has synchronized with this one, as the Go memory model requires
// anyway: on amd64 every lock, channel operation and atomic store is a
// locked instruction, and a locked instruction is among the events that
// empty the write-combining buffers (Intel SDM vol. 3, "Buffering of
// Write Combining Memory Locations"; and "Strengthening or Weakening
// the Memory-Ordering Model": locked operations wait for buffered
// writes to drain). Code that hands the bytes on by any other way calls
// Fence first; verbs.World does at the end of every Run, RunTo, RunFor
// and RunUntil, and of each step of a cluster's part. A fence per
// copy was most of its cost: one write to memory waited for every frame
// (tools/scale, runs in turns: the alltoall at N = 64 25% faster
// without it, N = 256 11%, N = 1024 9%).
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
