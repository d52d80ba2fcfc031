package main

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/rocesim/rocesim/procfabric"
	"github.com/rocesim/rocesim/sim"
)

// TestFabricCommand runs `rocesim fabric --exit-when-idle` with two
// in-process clients: a sends b a frame, b gets it, both leave, and the
// command ends with its summary and a capture holding the frame.
func TestFabricCommand(t *testing.T) {
	dir, err := os.MkdirTemp("", "pf")
	if err != nil {
		t.Fatal(err)
	}
	defer os.RemoveAll(dir)
	t.Setenv("XDG_RUNTIME_DIR", dir)
	pcap := filepath.Join(dir, "f.pcapng")
	var stdout, stderr bytes.Buffer
	code := make(chan int, 1)
	go func() {
		code <- run([]string{"fabric", "--name", "ct", "--nodes", "a,b", "--exit-when-idle", "--pcap", pcap, "--quiet",
			"--faults", "delay 1us src=a; drop src=b"}, &stdout, &stderr)
	}()
	sock := filepath.Join(dir, "rocesim", "ct.sock")
	attach := func(node string) *procfabric.Port {
		end := time.Now().Add(20 * time.Second)
		for {
			p, err := procfabric.AttachDir("", "ct", node)
			if err == nil {
				return p
			}
			if time.Now().After(end) {
				t.Fatalf("attach %s to %s: %v (stderr %q)", node, sock, err, stderr.String())
			}
			time.Sleep(5 * time.Millisecond)
		}
	}
	a, b := attach("a"), attach("b")
	frame := make([]byte, 60)
	dst, src := b.Self().MAC, a.Self().MAC
	copy(frame, dst[:])
	copy(frame[6:], src[:])
	frame[12], frame[13] = 0x88, 0xb5 // a local experimental EtherType: not RoCE
	type result struct {
		in  *procfabric.Inputs
		err error
	}
	got := make(chan result, 1)
	go func() { in, err := b.Wait(sim.Never); got <- result{in, err} }()
	if err := a.Send(frame, []byte("hello")); err != nil {
		t.Fatal(err)
	}
	if _, err := a.Wait(sim.Never); err != nil { // woken by its tx-done
		t.Fatal(err)
	}
	a.Close()
	var res result
	select {
	case res = <-got:
	case <-time.After(20 * time.Second):
		t.Fatal("b was never woken by a's frame")
	}
	in, err := res.in, res.err
	if err != nil {
		t.Fatal(err)
	}
	if len(in.Events) != 1 || !bytes.Equal(in.Events[0].Frame, frame) {
		t.Fatalf("b got %+v, want a's frame", in)
	}
	b.Close()
	select {
	case c := <-code:
		if c != exitOK {
			t.Fatalf("exit %d, stderr %q", c, stderr.String())
		}
	case <-time.After(20 * time.Second):
		t.Fatal("rocesim fabric --exit-when-idle did not exit")
	}
	if want := "fabric ct: virtual time " + in.Now.String() + ","; !strings.Contains(stdout.String(), want) {
		t.Errorf("stdout %q lacks %q", stdout.String(), want)
	}
	if !strings.Contains(stdout.String(), "2 attaches, 0 refused") || !strings.Contains(stdout.String(), "capture: "+pcap) {
		t.Errorf("stdout %q", stdout.String())
	}
	// What each rule did: a's frame was delayed, b sent nothing.
	for _, want := range []string{"\nfault rule 1 acted on 1 frame: delay 1us src=a\n", "\nwarning: fault rule 2 never matched a frame: drop src=b\n"} {
		if !strings.Contains(stdout.String(), want) {
			t.Errorf("stdout %q lacks %q", stdout.String(), want)
		}
	}
	frames := readFrames(t, pcap)
	for _, f := range frames {
		if !bytes.Equal(f.data, frame) || !strings.Contains(strings.Join(f.comments, " "), "hello") || !strings.Contains(strings.Join(f.comments, " "), "rule 1") {
			t.Errorf("captured %x %q", f.data, f.comments)
		}
	}
	if len(frames) != 1 {
		t.Errorf("%d frames captured, want 1", len(frames))
	}
	if _, err := os.Stat(sock); !os.IsNotExist(err) {
		t.Errorf("the socket is still there after exit: %v", err)
	}
}

func TestFabricUsage(t *testing.T) {
	for _, c := range []struct {
		args []string
		code int
		out  string
	}{
		{[]string{"help", "fabric"}, exitOK, "Usage: rocesim fabric"},
		{[]string{"fabric", "--help"}, exitOK, "Usage: rocesim fabric"},
		{[]string{"fabric", "extra"}, exitUsage, `takes no arguments, got ["extra"]`},
		{[]string{"fabric", "--faults", "lose psn=2"}, exitUsage, `--faults: 1:1: unknown action "lose"`},
		{[]string{"fabric", "--deadline", "soon"}, exitUsage, `--deadline "soon"`},
		{[]string{"fabric", "--nodes", "a"}, exitUsage, "1 nodes, want 2 to 65535"},
		{[]string{"fabric", "--nodes", "1"}, exitUsage, "1 nodes, want 2 to 65535"},
		{[]string{"fabric", "--nodes", "a,a"}, exitUsage, `node "a" named twice`},
		{[]string{"fabric", "--name", "../x"}, exitUsage, `fabric name "../x"`},
	} {
		code, out, errOut := runCmd(c.args...)
		if code != c.code || !strings.Contains(out+errOut, c.out) {
			t.Errorf("%q: exit %d, output %q; want exit %d and %q", c.args, code, out+errOut, c.code, c.out)
		}
	}
}
