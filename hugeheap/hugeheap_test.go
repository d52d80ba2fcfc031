//go:build linux

package hugeheap

import (
	"bufio"
	"os"
	"os/exec"
	"runtime"
	"strconv"
	"strings"
	"testing"
	"unsafe"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestReserve holds what a program relies on: the memory the heap hands
// out after Reserve lies in a mapping the kernel will back with huge
// pages (its VmFlags carry "hg", MADV_HUGEPAGE), where without it the
// heap's mappings carry none. Whether the kernel then finds free 2 MiB
// pages is the machine's business, so the test reads the advice, not
// AnonHugePages.
//
// The test runs in a process of its own (this test binary again), whose
// heap has never been advised: in this one, an earlier run of the test
// (-count 2) leaves its advised block to be handed out as anything.
func TestReserve(t *testing.T) {
	if Mode() == "" {
		t.Skip("the kernel has no transparent huge pages (no /sys/kernel/mm/transparent_hugepage): nothing to advise")
	}
	if os.Getenv("HUGEHEAP_TEST_CHILD") != "1" {
		cmd := exec.Command(os.Args[0], "-test.run=^TestReserve$", "-test.count=1", "-test.v")
		cmd.Env = append(os.Environ(), "HUGEHEAP_TEST_CHILD=1")
		out, err := cmd.CombinedOutput()
		require.NoError(t, err, "the test in its own process:\n%s", out)
		require.Contains(t, string(out), "--- PASS: TestReserve", "the child ran the test:\n%s", out)
		t.Logf("%s", out)
		return
	}
	before := make([]byte, 8<<20)
	assert.False(t, advised(t, unsafe.Pointer(&before[0])), "the heap is advised before any Reserve: the test proves nothing")

	n, err := Reserve(256 << 20)
	require.NoError(t, err)
	assert.Greater(t, n, 250<<20, "all but the block's ragged ends are advised")
	assert.Zero(t, n%hugePage)

	// A large object after Reserve comes from the block's pages (the
	// page heap hands out the lowest free run that fits), from its start:
	// its first huge page may be the block's ragged head, unadvised.
	after := make([]byte, 32<<20)
	for i := 0; i < len(after); i += 4096 {
		after[i] = 1
	}
	assert.True(t, advised(t, unsafe.Pointer(&after[hugePage])), "memory allocated after Reserve is not in an advised mapping")
	assert.True(t, advised(t, unsafe.Pointer(&after[len(after)-1])))
	t.Logf("mode %q; %d bytes advised", Mode(), n)
	runtime.KeepAlive(before) // its pages must not be handed out again as after's
}

func TestReserveTooSmall(t *testing.T) {
	n, err := Reserve(4096)
	require.ErrorContains(t, err, "at least")
	assert.Zero(t, n)
}

func TestBracketed(t *testing.T) {
	assert.Equal(t, "madvise", bracketed("always [madvise] never\n"))
	assert.Equal(t, "always", bracketed("[always] madvise never\n"))
	assert.Equal(t, "", bracketed("always madvise never\n"))
	assert.Equal(t, "", bracketed("] [\n"))
}

// advised reports whether the mapping holding p has VM_HUGEPAGE, "hg"
// among its VmFlags in /proc/self/smaps.
func advised(t *testing.T, p unsafe.Pointer) bool {
	t.Helper()
	f, err := os.Open("/proc/self/smaps")
	require.NoError(t, err)
	defer f.Close()
	addr := uint64(uintptr(p))
	in := false
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		line := sc.Text()
		if lo, hi, ok := strings.Cut(strings.Fields(line + " ")[0], "-"); ok && !strings.HasSuffix(lo, ":") {
			a, err1 := strconv.ParseUint(lo, 16, 64)
			b, err2 := strconv.ParseUint(hi, 16, 64)
			if err1 == nil && err2 == nil {
				in = a <= addr && addr < b
				continue
			}
		}
		if in && strings.HasPrefix(line, "VmFlags:") {
			return strings.Contains(line+" ", " hg ")
		}
	}
	require.NoError(t, sc.Err())
	t.Fatalf("no mapping holds %#x", addr)
	return false
}
