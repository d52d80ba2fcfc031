//go:build linux

// Package netnstest makes network namespaces joined to the test's own by
// veth pairs, for tests of real-network code (rocesim switch over
// AF_PACKET, the model in a namespace facing an rxe VM). It needs root;
// Skip says so where it is missing. Everything a test makes is removed
// when it ends (testing.T.Cleanup).
package netnstest

import (
	"fmt"
	"os"
	"os/exec"
	"runtime"
	"strings"
	"testing"

	"golang.org/x/sys/unix"
)

// Skip skips t unless it runs as root with iproute2's ip.
func Skip(t testing.TB) {
	t.Helper()
	if os.Geteuid() != 0 {
		t.Skip("needs root: creates network namespaces, veth pairs and AF_PACKET sockets")
	}
	if _, err := exec.LookPath("ip"); err != nil {
		t.Skip("needs iproute2's ip")
	}
}

// NS is a network namespace joined to the test's by a veth pair.
type NS struct {
	// Name is the namespace's name (ip netns).
	Name string
	// Outer is the pair's end in the test's namespace (up, no address).
	Outer string
	// Inner is the end in the namespace, with the address given to New.
	Inner string
}

// New makes a namespace named after tag and this process, with a veth
// pair whose inner end has prefix (such as "10.0.0.2/24"); the inner end,
// the outer end and the namespace's lo are up.
func New(t testing.TB, tag, prefix string) NS {
	t.Helper()
	id := os.Getpid() % 100000
	ns := NS{Name: fmt.Sprintf("rs%d%s", id, tag), Outer: fmt.Sprintf("rs%d%s0", id, tag), Inner: fmt.Sprintf("rs%d%s1", id, tag)}
	run := func(args ...string) {
		t.Helper()
		if out, err := exec.Command("ip", args...).CombinedOutput(); err != nil {
			t.Fatalf("ip %s: %v\n%s", strings.Join(args, " "), err, out)
		}
	}
	run("netns", "add", ns.Name)
	t.Cleanup(func() { exec.Command("ip", "netns", "del", ns.Name).Run() })
	run("link", "add", ns.Outer, "type", "veth", "peer", "name", ns.Inner)
	t.Cleanup(func() { exec.Command("ip", "link", "del", ns.Outer).Run() })
	run("link", "set", ns.Inner, "netns", ns.Name)
	run("-n", ns.Name, "addr", "add", prefix, "dev", ns.Inner)
	run("-n", ns.Name, "link", "set", ns.Inner, "up")
	run("-n", ns.Name, "link", "set", "lo", "up")
	run("link", "set", ns.Outer, "up")
	return ns
}

// Do runs f on a thread moved into the namespace: sockets f opens live
// there, whatever goroutine uses them later.
func (ns NS) Do(f func() error) error {
	done := make(chan error, 1)
	go func() {
		// Never unlocked: the thread ends with the goroutine, so no
		// other goroutine runs in the namespace.
		runtime.LockOSThread()
		fd, err := unix.Open("/run/netns/"+ns.Name, unix.O_RDONLY|unix.O_CLOEXEC, 0)
		if err == nil {
			err = unix.Setns(fd, unix.CLONE_NEWNET)
			unix.Close(fd)
		}
		if err == nil {
			err = f()
		}
		done <- err
	}()
	return <-done
}
