// Package conformance will compare rocesim with the Linux kernel's
// soft-RoCE driver (rdma_rxe) running real libibverbs inside QEMU: the same
// scenarios and fault plans, run on both, traces compared.
//
// The harness arrives with issue 7. The real rxe captures that issue 2
// uses as test vectors live in wire/testdata.
package conformance
