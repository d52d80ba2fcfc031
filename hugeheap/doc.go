// Package hugeheap asks the kernel to back the Go heap with transparent
// huge pages, for a program about to build a large world.
//
// Many machines give transparent huge pages only on request
// (/sys/kernel/mm/transparent_hugepage/enabled reads "always [madvise]
// never", as on the one this was measured on): memory gets 2 MiB pages
// only where the program said so
// (madvise MADV_HUGEPAGE) before first touching it. The Go runtime asks
// for none, so a world of hundreds of megabytes (65,280 QPs at N = 256
// in the alltoall of tools/scale) lives on 4 KiB pages, and a message
// that visits a QP, a host's queues or a frame gone cold pays a TLB miss,
// a walk of the page tables, beside each cache miss.
//
// Reserve is the request, made once, early:
//
//  1. it allocates one large block, which the runtime maps as fresh
//     address space and does not touch (fresh memory is known to be
//     zero);
//  2. it advises the block's whole 2 MiB pages MADV_HUGEPAGE;
//  3. it drops the block and collects it, so the runtime's page heap
//     holds that address space free, and hands it out again for the
//     objects allocated next. The kernel faults those in on huge pages.
//
// Advice made after the memory was touched does nothing for it (the
// kernel's khugepaged collapses advised ranges in the background, too
// slowly for a run of seconds), and memory the heap maps beyond the block
// gets none: reserve what the world will need. The block costs address
// space, not memory; a huge page costs 2 MiB of memory once any of it is
// touched, so a heap with few live objects spread thin may hold more.
//
// Measured (tools/scale, README "Scale"): the alltoall at N = 256 runs
// about 1.2× faster, in one world or as a cluster of two parts; a 2-node
// stream, whose state stays in the caches, gains nothing. Where the
// machine gives huge pages always, or never, Reserve changes nothing; on
// a kernel without them it returns madvise's error and the heap stays as
// it was.
package hugeheap
