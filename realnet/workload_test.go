//go:build linux

package realnet_test

import (
	"context"
	"fmt"
	"net"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/rocesim/rocesim/realnet"
)

// TestWorkload runs each kind of scripted workload between two nodes on
// 127.0.0.1 and 127.0.0.2 (the exchange over an in-memory pipe), the
// server checking what it received and the client what it read.
func TestWorkload(t *testing.T) {
	for _, w := range []realnet.Workload{
		{Op: "send", Size: 5000, Iters: 100},
		{Op: "write", Size: 65536, Iters: 50},
		{Op: "read", Size: 9000, Iters: 50},
		{Op: "send", Size: 1, Iters: 3},
	} {
		t.Run(w.Op, func(t *testing.T) {
			dir := t.TempDir()
			c := newNode(t, "client", "127.0.0.1", filepath.Join(dir, "c.pcapng"))
			s := newNode(t, "server", "127.0.0.2", filepath.Join(dir, "s.pcapng"))
			res, got, err := runPair(wallBound, c.n, s.n, w)
			if err != nil {
				t.Fatal(err)
			}
			if got != w {
				t.Errorf("server ran %+v, want %+v", got, w)
			}
			if res.Workload != w || res.Elapsed <= 0 {
				t.Fatalf("result %+v", res)
			}
			t.Log(res)
		})
	}
}

// TestWorkloadRefused checks the server refuses a malformed request.
func TestWorkloadRefused(t *testing.T) {
	s := newNode(t, "server", "127.0.0.2", filepath.Join(t.TempDir(), "s.pcapng"))
	cc, sc := net.Pipe()
	defer cc.Close()
	go func() { cc.Write([]byte("fly 1 1 1 1 1 1 127.0.0.1\n")) }()
	if _, err := realnet.RunServer(context.Background(), s.n, sc); err == nil {
		t.Fatal("the server accepted op fly")
	}
}

// runPair runs w between client c and server s, the exchange over an
// in-memory pipe, within bound; it returns the client's result and what
// the server ran.
func runPair(bound time.Duration, c, s *realnet.Node, w realnet.Workload) (realnet.Result, realnet.Workload, error) {
	ctx, cancel := context.WithTimeout(context.Background(), bound)
	defer cancel()
	cc, sc := net.Pipe()
	defer cc.Close()
	defer sc.Close()
	type served struct {
		w   realnet.Workload
		err error
	}
	srv := make(chan served, 1)
	go func() {
		got, err := realnet.RunServer(ctx, s, sc)
		srv <- served{got, err}
	}()
	res, err := realnet.RunClient(ctx, c, cc, w)
	if err != nil {
		cancel()
		<-srv
		return res, realnet.Workload{}, fmt.Errorf("client: %w", err)
	}
	got := <-srv
	if got.err != nil {
		return res, got.w, fmt.Errorf("server: %w", got.err)
	}
	return res, got.w, nil
}

// TestWorkloadDepth: Depth outside 0..MaxDepth is refused naming the
// field; a Depth 1 run (one operation at a time: its latency is one
// round trip) completes and says so.
func TestWorkloadDepth(t *testing.T) {
	for _, d := range []int{-1, realnet.MaxDepth + 1} {
		w := realnet.Workload{Op: "write", Size: 64, Iters: 1, Depth: d}
		if err := w.Validate(); err == nil || !strings.Contains(err.Error(), "depth") {
			t.Errorf("depth %d: Validate gave %v, want an error naming depth", d, err)
		}
	}
	dir := t.TempDir()
	c := newNode(t, "client", "127.0.0.1", filepath.Join(dir, "c.pcapng"))
	s := newNode(t, "server", "127.0.0.2", filepath.Join(dir, "s.pcapng"))
	res, _, err := runPair(wallBound, c.n, s.n, realnet.Workload{Op: "write", Size: 4096, Iters: 20, Depth: 1})
	if err != nil {
		t.Fatal(err)
	}
	if !strings.HasSuffix(res.String(), "(1 outstanding)") {
		t.Errorf("result %q, want it to say 1 outstanding", res)
	}
	t.Log(res)
}
