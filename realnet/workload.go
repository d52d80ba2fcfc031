package realnet

// A scripted workload between two nodes, in the manner of rdma-core's
// ibv_rc_pingpong: the two exchange their Endpoint over a stream (TCP),
// connect an RC QP, and the client runs N operations of one kind with a
// window of them outstanding, while the server serves (posts receives
// for SENDs, nothing for WRITEs and READs: the responder does it). Both
// check the data: each node's MR holds a pattern made from its own seed,
// so the receiver of a SEND or WRITE and the reader of a READ know what
// they must find.
//
// The exchange, one line each way, client first:
//
//	client → server: op size iters qpn psn va rkey addr
//	server → client: qpn psn va rkey addr
//	client → server: done            (after the last completion)
//	server → client: ok | bad REASON (after checking what it received)

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"net/netip"
	"strings"
	"time"

	"github.com/rocesim/rocesim/nic"
)

// Workload is what the client runs.
type Workload struct {
	Op    string // "send", "write" or "read"
	Size  int    // bytes per operation, 1..MaxWorkloadSize
	Iters int    // operations
	// Depth is how many operations the client keeps outstanding,
	// 1..MaxDepth; 0 means MaxDepth. Depth 1 measures one operation's
	// round trip (post to completion) alone. The server need not know
	// it: it keeps MaxDepth receives posted whatever the client does.
	Depth int
}

// MaxWorkloadSize is the largest operation a workload runs.
const MaxWorkloadSize = 1 << 20

// MaxDepth is the most operations the client keeps outstanding (the
// default), and how many receives the server keeps posted (the QP's
// queues hold 64).
const MaxDepth = 16

// window is the server's and the default client's depth.
const window = MaxDepth

// depth is the number of operations the client keeps outstanding.
func (w Workload) depth() int {
	if w.Depth == 0 {
		return MaxDepth
	}
	return w.Depth
}

// Result is what the client measured.
type Result struct {
	Workload
	Elapsed time.Duration // first post to last completion
	Latency time.Duration // mean time from a post to its completion
}

// String is a one-line summary.
func (r Result) String() string {
	sec := r.Elapsed.Seconds()
	bytes := float64(r.Size) * float64(r.Iters)
	return fmt.Sprintf("%d x %s of %d bytes in %v: %.1f MB/s, %.0f ops/s, mean latency %v (%d outstanding)",
		r.Iters, r.Op, r.Size, r.Elapsed.Round(time.Microsecond), bytes/sec/1e6, float64(r.Iters)/sec,
		r.Latency.Round(time.Microsecond), r.depth())
}

// Validate reports what is wrong with w, naming the field.
func (w Workload) Validate() error {
	switch {
	case w.Op != "send" && w.Op != "write" && w.Op != "read":
		return fmt.Errorf("op %q: want send, write or read", w.Op)
	case w.Size < 1 || w.Size > MaxWorkloadSize:
		return fmt.Errorf("size %d: want 1..%d", w.Size, MaxWorkloadSize)
	case w.Iters < 1:
		return fmt.Errorf("iters %d: want at least 1", w.Iters)
	case w.Depth < 0 || w.Depth > MaxDepth:
		return fmt.Errorf("depth %d: want 1..%d, or 0 for %d", w.Depth, MaxDepth, MaxDepth)
	}
	return nil
}

// pattern fills b with the bytes of seed's pattern.
func pattern(seed byte) func([]byte) {
	return func(b []byte) {
		for i := range b {
			b[i] = seed ^ byte(i*7) ^ byte(i>>8)
		}
	}
}

// Workload seeds: the client's MR holds pattern(clientSeed), the
// server's pattern(serverSeed).
const (
	clientSeed = 0x5A
	serverSeed = 0xC3
)

// first PSNs, fixed so that captures of two runs compare.
const (
	clientPSN = 0x1000
	serverPSN = 0x2000
)

// RunClient runs w from node n against the server at the other end of
// conn and returns what it measured.
func RunClient(ctx context.Context, n *Node, conn io.ReadWriter, w Workload) (Result, error) {
	if err := w.Validate(); err != nil {
		return Result{}, err
	}
	rc, err := n.NewRC(2*w.Size, pattern(clientSeed), clientPSN)
	if err != nil {
		return Result{}, err
	}
	l := rc.Local()
	if _, err := fmt.Fprintf(conn, "%s %d %d %s\n", w.Op, w.Size, w.Iters, formatEndpoint(l)); err != nil {
		return Result{}, err
	}
	r := bufio.NewReader(conn)
	line, err := r.ReadString('\n')
	if err != nil {
		return Result{}, fmt.Errorf("realnet: reading the server's endpoint: %w", err)
	}
	peer, err := parseEndpoint(strings.Fields(line))
	if err != nil {
		return Result{}, err
	}
	if n.PeerAddr.IsValid() {
		peer.Addr = n.PeerAddr
	}
	if err := rc.Connect(peer); err != nil {
		return Result{}, err
	}
	res := Result{Workload: w}
	posted := make([]time.Time, w.Iters)
	var lat time.Duration
	start := time.Now()
	next, done := 0, 0
	for done < w.Iters {
		for next < w.Iters && next-done < w.depth() {
			wr := nic.SendWR{WRID: uint64(next)}
			off := 0
			switch w.Op {
			case "send":
				wr.Opcode = nic.WRSend
			case "write":
				wr.Opcode, wr.RemoteAddr, wr.RKey = nic.WRRDMAWrite, peer.VA, peer.RKey
			case "read":
				wr.Opcode, wr.RemoteAddr, wr.RKey = nic.WRRDMARead, peer.VA, peer.RKey
				off = w.Size
			}
			posted[next] = time.Now()
			if err := rc.Post(wr, off, w.Size); err != nil {
				return res, err
			}
			next++
		}
		wc, err := rc.Wait(ctx)
		if err != nil {
			return res, err
		}
		if wc.Status != nic.WCSuccess {
			return res, fmt.Errorf("realnet: operation %d: %s", wc.WRID, wc.Status)
		}
		lat += time.Since(posted[wc.WRID])
		done++
	}
	res.Elapsed = time.Since(start)
	res.Latency = lat / time.Duration(w.Iters)
	if w.Op == "read" {
		got, err := rc.Bytes(w.Size, w.Size)
		if err != nil {
			return res, err
		}
		want := make([]byte, w.Size)
		pattern(serverSeed)(want)
		if i := firstDiff(got, want); i >= 0 {
			return res, fmt.Errorf("realnet: the READ's data differs from the server's at byte %d", i)
		}
	}
	if _, err := fmt.Fprintln(conn, "done"); err != nil {
		return res, err
	}
	line, err = r.ReadString('\n')
	if err != nil {
		return res, fmt.Errorf("realnet: reading the server's verdict: %w", err)
	}
	if line = strings.TrimSpace(line); line != "ok" {
		return res, fmt.Errorf("realnet: the server says: %s", line)
	}
	return res, nil
}

// RunServer serves one client's workload on node n at the other end of
// conn and returns it, once the client is done and the data checked.
func RunServer(ctx context.Context, n *Node, conn io.ReadWriter) (Workload, error) {
	r := bufio.NewReader(conn)
	line, err := r.ReadString('\n')
	if err != nil {
		return Workload{}, fmt.Errorf("realnet: reading the client's request: %w", err)
	}
	f := strings.Fields(line)
	var w Workload
	if len(f) != 8 {
		return w, fmt.Errorf("realnet: client's request %q: want 8 fields", strings.TrimSpace(line))
	}
	w.Op = f[0]
	if _, err := fmt.Sscan(f[1]+" "+f[2], &w.Size, &w.Iters); err != nil {
		return w, fmt.Errorf("realnet: client's request %q: %w", strings.TrimSpace(line), err)
	}
	if err := w.Validate(); err != nil {
		return w, err
	}
	peer, err := parseEndpoint(f[3:])
	if err != nil {
		return w, err
	}
	rc, err := n.NewRC(2*w.Size, pattern(serverSeed), serverPSN)
	if err != nil {
		return w, err
	}
	if n.PeerAddr.IsValid() {
		peer.Addr = n.PeerAddr
	}
	if err := rc.Connect(peer); err != nil {
		return w, err
	}
	// The receives a SEND needs are posted before the client learns our
	// endpoint, so its first SEND finds one.
	posted, received := 0, 0
	if w.Op == "send" {
		for ; posted < min(window, w.Iters); posted++ {
			if err := rc.PostRecv(uint64(posted), 0, w.Size); err != nil {
				return w, err
			}
		}
	}
	if _, err := fmt.Fprintln(conn, formatEndpoint(rc.Local())); err != nil {
		return w, err
	}
	want := make([]byte, w.Size)
	pattern(clientSeed)(want)
	verdict := "ok"
	for w.Op == "send" && received < w.Iters {
		wc, err := rc.Wait(ctx)
		if err != nil {
			return w, err
		}
		if wc.Status != nic.WCSuccess || wc.ByteLen != uint32(w.Size) {
			verdict = fmt.Sprintf("bad receive %d: %s, %d bytes", wc.WRID, wc.Status, wc.ByteLen)
			break
		}
		got, err := rc.Bytes(0, w.Size)
		if err != nil {
			return w, err
		}
		if i := firstDiff(got, want); i >= 0 {
			verdict = fmt.Sprintf("bad SEND data at byte %d of message %d", i, received)
			break
		}
		received++
		if posted < w.Iters {
			if err := rc.PostRecv(uint64(posted), 0, w.Size); err != nil {
				return w, err
			}
			posted++
		}
	}
	if line, err = r.ReadString('\n'); err != nil || strings.TrimSpace(line) != "done" {
		return w, fmt.Errorf("realnet: waiting for the client's done: %q, %v", line, err)
	}
	if w.Op == "write" && verdict == "ok" {
		got, err := rc.Bytes(0, w.Size)
		if err != nil {
			return w, err
		}
		if i := firstDiff(got, want); i >= 0 {
			verdict = fmt.Sprintf("bad WRITE data at byte %d", i)
		}
	}
	if _, err := fmt.Fprintln(conn, verdict); err != nil {
		return w, err
	}
	if verdict != "ok" {
		return w, fmt.Errorf("realnet: %s", verdict)
	}
	return w, nil
}

// formatEndpoint writes e as the exchange's fields: qpn psn va rkey addr.
func formatEndpoint(e Endpoint) string {
	return fmt.Sprintf("%d %d %d %d %s", e.QPN, e.PSN, e.VA, e.RKey, e.Addr)
}

// parseEndpoint reads the fields formatEndpoint writes.
func parseEndpoint(f []string) (Endpoint, error) {
	var e Endpoint
	if len(f) != 5 {
		return e, fmt.Errorf("realnet: endpoint %q: want qpn psn va rkey addr", f)
	}
	if _, err := fmt.Sscan(strings.Join(f[:4], " "), &e.QPN, &e.PSN, &e.VA, &e.RKey); err != nil {
		return e, fmt.Errorf("realnet: endpoint %q: %w", f, err)
	}
	a, err := netip.ParseAddr(f[4])
	if err != nil || a.Zone() != "" {
		return e, fmt.Errorf("realnet: endpoint %q: address %q is not an IP address", f, f[4])
	}
	e.Addr = a
	return e, nil
}

// firstDiff is the first index where a and b differ, or -1.
func firstDiff(a, b []byte) int {
	for i := range min(len(a), len(b)) {
		if a[i] != b[i] {
			return i
		}
	}
	if len(a) != len(b) {
		return min(len(a), len(b))
	}
	return -1
}
