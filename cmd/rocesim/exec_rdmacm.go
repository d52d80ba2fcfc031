package main

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
)

// rdmacmArgs are the C compiler's arguments that build the drop-in
// librdmacm.so.1 (dropin/rdmacm/shim) into dir, beside the drop-in
// libibverbs.so.1 it links against: the SONAME and rdma-core's symbol
// versions (librdmacm.map), which unmodified programs bind to
// (rdma_create_id@RDMACM_1.0 ...). `make dropin` runs the same.
func rdmacmArgs(src, dir string) []string {
	shim := filepath.Join(src, "dropin", "rdmacm", "shim")
	return []string{"-std=gnu11", "-Wall", "-Werror", "-O2", "-fPIC", "-shared", "-fvisibility=hidden",
		"-o", filepath.Join(dir, "librdmacm.so.1"),
		"-Wl,-soname,librdmacm.so.1,--version-script," + filepath.Join(shim, "librdmacm.map") + ",-z,defs",
		filepath.Join(shim, "rdmacm.c"), "-L" + dir, "-l:libibverbs.so.1", "-lpthread"}
}

// buildRdmacm builds librdmacm.so.1 into dir, which holds the
// libibverbs.so.1 built from the same sources. It needs rdma-core's
// <rdma/rdma_cma.h> (Debian's librdmacm-dev).
func buildRdmacm(src, dir string) error {
	cmd := exec.Command(cc(), rdmacmArgs(src, dir)...)
	cmd.Env = os.Environ()
	if out, err := cmd.CombinedOutput(); err != nil {
		return fmt.Errorf("building the drop-in librdmacm.so.1: %s dropin/rdmacm/shim/rdmacm.c (needs <rdma/rdma_cma.h>: librdmacm-dev): %v\n%s", cc(), err, out)
	}
	return nil
}
