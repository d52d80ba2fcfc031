package kvstore_test

import (
	"bytes"
	"errors"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/rocesim/rocesim/examples/kvstore"
	"github.com/rocesim/rocesim/internal/tsharktest"
	"github.com/rocesim/rocesim/sim"
	"github.com/rocesim/rocesim/verbs"
	"github.com/rocesim/rocesim/verbs/verbstest"
	"github.com/rocesim/rocesim/wire"
	"github.com/rocesim/rocesim/wire/capture"
)

// The store under faults, tested with verbs/verbstest: each test builds
// a world, connects a server and its clients over real RC queue pairs,
// lets their polling loops run, injects a fault and checks exact
// statuses and bytes. Every test is deterministic: TestSameSeedSameTrace
// runs each twice and compares the traces.

// The verbstest flags (-rocesim.seed, -rocesim.keep) for this test binary.
func init() { verbstest.RegisterFlags() }

var breakFlag = flag.String("kvstore.break", "", `plant a bug to see how a failing test reads: "repost" (the client never re-posts a receive)`)

// rig is a server and its clients, each on its own host, with their
// polling loops registered in the world.
type rig struct {
	w       *verbstest.World
	srv     *kvstore.Server
	srvLoop *verbstest.Poller
	clients []*kvstore.Client
	loops   []*verbstest.Poller
	eps     []kvstore.Endpoint // the server's side of each connection
}

// newRig builds the world: host "server" and host "client" on one link,
// or hosts "c1".."cN" through a switch when there are several clients.
func newRig(t testing.TB, opts verbstest.Options, cfg kvstore.Config, clients int) *rig {
	t.Helper()
	opts.Nodes = []string{"server", "client"}
	if clients > 1 {
		opts.Nodes = []string{"server"}
		for i := 1; i <= clients; i++ {
			opts.Nodes = append(opts.Nodes, fmt.Sprintf("c%d", i))
		}
	}
	if opts.Limit == 0 {
		opts.Limit = sim.Second
	}
	r := &rig{w: verbstest.New(t, opts)}
	var err error
	r.srv, err = kvstore.NewServer(r.w.Host("server").Ctx, cfg)
	require.NoError(t, err)
	r.srvLoop = r.w.Poll("server", r.srv.Progress)
	for _, name := range opts.Nodes[1:] {
		c, err := kvstore.NewClient(r.w.Host(name).Ctx, cfg)
		require.NoError(t, err)
		if *breakFlag == "repost" {
			kvstore.BreakRepost(c)
		}
		// The control channel: a real program sends these over TCP.
		ep, err := r.srv.Accept(c.Endpoint())
		require.NoError(t, err)
		require.NoError(t, c.Connect(ep))
		r.clients = append(r.clients, c)
		r.eps = append(r.eps, ep)
		r.loops = append(r.loops, r.w.Poll(name, c.Progress))
	}
	return r
}

// cli is the first (or only) client.
func (r *rig) cli() *kvstore.Client { return r.clients[0] }

// wait runs the world until every op is done.
func (r *rig) wait(ops ...*kvstore.Op) {
	for _, op := range ops {
		r.w.RunUntil(fmt.Sprintf("the operation on %q", op.Key()), op.Done)
	}
}

func (r *rig) put(t testing.TB, key string, value []byte) *kvstore.Op {
	t.Helper()
	op, err := r.cli().Put(key, value)
	require.NoError(t, err)
	r.wait(op)
	return op
}

func (r *rig) get(t testing.TB, key string) *kvstore.Op {
	t.Helper()
	op, err := r.cli().Get(key)
	require.NoError(t, err)
	r.wait(op)
	return op
}

// requireWCError checks that op failed with a work completion of this
// status and opcode, and returns it.
func requireWCError(t testing.TB, op *kvstore.Op, status verbs.WCStatus, opcode verbs.WCOpcode) *kvstore.WCError {
	t.Helper()
	require.True(t, op.Done(), "op on %q is not done", op.Key())
	var wce *kvstore.WCError
	require.True(t, errors.As(op.Err(), &wce), "op on %q: want a work completion error, got %v", op.Key(), op.Err())
	require.Equal(t, status.Name(), wce.Status.Name(), "op on %q", op.Key())
	require.Equal(t, opcode.String(), wce.Opcode.String(), "op on %q", op.Key())
	return wce
}

func pattern(n int, seed byte) []byte {
	b := make([]byte, n)
	for i := range b {
		b[i] = seed + byte(i*7)
	}
	return b
}

// scenario is one of the tests below: its world and its body.
type scenario struct {
	opts    verbstest.Options
	cfg     kvstore.Config
	clients int
	body    func(t *testing.T, r *rig)
}

var scenarios = map[string]scenario{
	"normal":              {clients: 1, body: normalOperation},
	"lost-write-packet":   {clients: 1, body: lostWritePacket},
	"client-falls-behind": {clients: 1, cfg: kvstore.Config{Slots: 4, RecvDepth: 1}, body: clientFallsBehind},
	"dead-server":         {clients: 1, cfg: kvstore.Config{Timeout: 10, RetryCnt: 3}, body: deadServer},
	"wrong-rkey":          {clients: 1, body: wrongRKey},
	"many-clients":        {clients: 4, cfg: kvstore.Config{Timeout: 10, RetryCnt: 2}, body: manyClients},
}

// order is the order TestSameSeedSameTrace runs them in.
var order = []string{"normal", "lost-write-packet", "client-falls-behind", "dead-server", "wrong-rkey", "many-clients"}

func run(t *testing.T, name string) *rig {
	s := scenarios[name]
	r := newRig(t, s.opts, s.cfg, s.clients)
	s.body(t, r)
	return r
}

func TestNormalOperation(t *testing.T)   { run(t, "normal") }
func TestLostWritePacket(t *testing.T)   { run(t, "lost-write-packet") }
func TestClientFallsBehind(t *testing.T) { run(t, "client-falls-behind") }
func TestDeadServer(t *testing.T)        { run(t, "dead-server") }
func TestWrongRKey(t *testing.T)         { run(t, "wrong-rkey") }
func TestManyClients(t *testing.T)       { run(t, "many-clients") }

// TestSameSeedSameTrace runs every scenario twice with the same seed:
// the traces (every frame, fault, state change and completion, with its
// virtual time) and the captures' packets (time, link, bytes, comment)
// are identical. (The files' headers name the test, run1 or run2.)
func TestSameSeedSameTrace(t *testing.T) {
	for _, name := range order {
		var traces [2]string
		var captures [2][]byte
		for i := range traces {
			t.Run(fmt.Sprintf("%s/run%d", name, i+1), func(t *testing.T) {
				w := run(t, name).w
				traces[i], captures[i] = w.Trace().Text(), packets(t, w.CaptureBytes())
				require.Empty(t, shortSends(t, w.CaptureBytes()), "%s: SENDs a stock Wireshark shows as malformed", name)
			})
		}
		require.NotEmpty(t, traces[0], name)
		require.Equal(t, traces[0], traces[1], "%s: two runs with the same seed differ", name)
		require.NotEmpty(t, captures[0], name)
		require.True(t, bytes.Equal(captures[0], captures[1]), "%s: the captures of two runs differ", name)
	}
}

// TestStockWiresharkShowsTheStore opens every scenario's capture in
// tshark with Wireshark's heuristic dissectors on, as a user's Wireshark
// has them: no frame is malformed, and none is taken for another protocol
// (RPC-over-RDMA claimed every request of the store while bytes 12..15
// held the high half of an address; the messages now carry a magic
// there).
func TestStockWiresharkShowsTheStore(t *testing.T) {
	tsharktest.Need(t)
	for _, name := range order {
		t.Run(name, func(t *testing.T) {
			w := run(t, name).w
			path := filepath.Join(t.TempDir(), name+".pcapng")
			require.NoError(t, os.WriteFile(path, w.CaptureBytes(), 0o644))
			out := tsharktest.Run(t, "-r", path, "-Y", "_ws.malformed || rpcordma || smc || smb_direct || infiniband.eoib || iser || nvme-rdma")
			require.Empty(t, strings.TrimSpace(out), "%s: frames a stock Wireshark shows as malformed or as another protocol", name)
			n := tsharktest.Run(t, "-r", path, "-Y", "infiniband.bth.opcode == 4", "-T", "fields", "-e", "frame.number")
			require.NotEmpty(t, strings.TrimSpace(n), "%s: the capture holds no SEND ONLY to check", name)
		})
	}
}

// shortSends lists the SENDs of a capture whose payload (pad included)
// is shorter than 16 bytes: Wireshark 4.0's RPC-over-RDMA heuristic
// (dissect_rpcrdma_ib_heur, packet-rpcrdma.c) reads bytes 12..15 of an RC
// SEND payload before checking its length and shows each such frame as
// [Malformed Packet]; the store's messages are sized to stay clear of it.
func shortSends(t *testing.T, pcapng []byte) []string {
	t.Helper()
	var short []string
	var p wire.Packet
	eachRecord(t, pcapng, func(i int, rec *capture.Record) {
		if p.Decode(rec.Data) == nil && p.BTH.Opcode().Info().Kind == wire.KindSend && len(p.Payload)+len(p.Pad) < 16 {
			short = append(short, fmt.Sprintf("frame %d: %s, %d payload bytes", i, p.Info.Name, len(p.Payload)))
		}
	})
	return short
}

// packets flattens a pcapng capture's packets: for each, its time,
// interface, comments and bytes.
func packets(t *testing.T, pcapng []byte) []byte {
	t.Helper()
	var out []byte
	eachRecord(t, pcapng, func(_ int, rec *capture.Record) {
		out = fmt.Appendf(out, "%d %d %q ", rec.Time, rec.Interface, rec.Comments)
		out = append(append(out, rec.Data...), '\n')
	})
	return out
}

// eachRecord calls f with each record of a pcapng capture, numbered from
// 1 as Wireshark numbers frames.
func eachRecord(t *testing.T, pcapng []byte, f func(i int, rec *capture.Record)) {
	t.Helper()
	rd, err := capture.NewReader(bytes.NewReader(pcapng))
	require.NoError(t, err)
	i := 0
	for rec, err := range rd.Records() {
		require.NoError(t, err, "after record %d", i)
		i++
		f(i, rec)
	}
}

// normalOperation: PUT and GET values of every size class, exactly, and
// a missing key; nothing on the wire but requests, WRITEs, responses and
// ACKs.
func normalOperation(t *testing.T, r *rig) {
	for i, n := range []int{0, 1, 1024, 3000, 4096} {
		key := fmt.Sprintf("key-%d", n)
		require.NoError(t, r.put(t, key, pattern(n, byte(i))).Err())
		got := r.get(t, key)
		require.NoError(t, got.Err())
		require.True(t, bytes.Equal(pattern(n, byte(i)), got.Value()), "value of %d bytes", n)
	}
	require.ErrorIs(t, r.get(t, "missing").Err(), kvstore.ErrNotFound)

	// 3000 bytes are three packets at path MTU 1024, 4096 four.
	r.w.RequireFrames("src=server op=RC_RDMA_WRITE_MIDDLE", 1+2)
	r.w.RequireFrames("src=server op=RC_RDMA_WRITE_ONLY", 2) // 1 and 1024 bytes
	// 11 requests: the GETs and the two small PUTs are one packet, the
	// PUTs of 1024 bytes and more (the value rides in the SEND) several.
	r.w.RequireFrames("src=client op=RC_SEND_ONLY", 8)
	r.w.RequireFrames("src=client op=RC_SEND_FIRST", 3)
	r.w.RequireNoFrames("tx=2")
	r.w.RequireNoFrames("class=nak")
	r.w.RequireNoFrames("class=rnr")
	require.Empty(t, r.srv.Errors())
	require.Zero(t, r.cli().Outstanding())
}

// lostWritePacket: every third WRITE carrying a GET's value loses its
// middle packet, once. Each time the client's NIC NAKs the gap and the
// server's goes back to it: all twelve GETs return the exact value,
// neither side sees an error, and recovery takes microseconds (a NAK,
// not an ACK timeout).
func lostWritePacket(t *testing.T, r *rig) {
	value := pattern(3000, 42) // three packets at path MTU 1024
	require.NoError(t, r.put(t, "k", value).Err())
	r.w.SetFaults("drop src=server op=RC_RDMA_WRITE_MIDDLE tx=1 nth=3")
	start := r.w.Now()
	for i := range 12 {
		got := r.get(t, "k")
		require.NoError(t, got.Err(), "GET %d", i)
		require.Equal(t, value, got.Value(), "GET %d", i)
	}
	require.Less(t, r.w.Now().Sub(start), 200*sim.Microsecond, "recovered by NAKs, not by 64 ms ACK timeouts")

	lost := r.w.RequireFrames("src=server op=RC_RDMA_WRITE_MIDDLE tx=1", 12)
	resent := r.w.RequireFrames("src=server op=RC_RDMA_WRITE_MIDDLE tx=2", 4)
	naks := r.w.RequireFrames("src=client class=nak", 4)
	for i := range resent {
		dropped := lost[3*i+2]
		require.True(t, dropped.Dropped, "the third, sixth, ... first transmission")
		require.Equal(t, dropped.Packet.BTH.PSN(), naks[i].Packet.BTH.PSN(), "the NAK names the lost PSN")
		require.Equal(t, dropped.Packet.BTH.PSN(), resent[i].Packet.BTH.PSN())
		require.Contains(t, resent[i].Comment, "retransmission #1")
	}
	require.Empty(t, r.srv.Errors())
}

// clientFallsBehind: the client keeps one receive posted for responses
// (RecvDepth 1) and its loop stalls for 3 ms with three GETs in flight.
// The first response takes the receive; the next finds none and is
// refused with an RNR NAK, and the server's NIC retries it every RNR
// timer (0.64 ms, code 12) until the loop runs again and re-posts. Then
// all three GETs return their values; no error anywhere.
func clientFallsBehind(t *testing.T, r *rig) {
	for i := range 3 {
		require.NoError(t, r.put(t, fmt.Sprint("k", i), pattern(100, byte(i))).Err())
	}
	r.loops[0].Pause(3 * sim.Millisecond)
	var ops []*kvstore.Op
	for i := range 3 {
		op, err := r.cli().Get(fmt.Sprint("k", i))
		require.NoError(t, err)
		ops = append(ops, op)
	}
	r.wait(ops...)
	for i, op := range ops {
		require.NoError(t, op.Err(), "GET k%d", i)
		require.Equal(t, pattern(100, byte(i)), op.Value(), "GET k%d", i)
	}
	require.GreaterOrEqual(t, r.w.Now(), sim.Time(3*sim.Millisecond), "nothing completes while the client's loop is stalled")

	// RNR NAKs at 0, 0.64, 1.28, 1.92 and 2.56 ms after the stall
	// began; the retry at 3.2 ms finds a receive.
	rnr := r.w.RequireFrames("src=client class=rnr", 5)
	require.Equal(t, "RNR-NAK(timer=12: 0.64 ms)", rnr[0].Packet.AETH.Syndrome().String())
	// The third response, right behind the refused one, is out of
	// sequence for the client (it still expects the refused PSN): a PSN
	// sequence error NAK follows each RNR NAK, naming the same PSN.
	seq := r.w.RequireFrames("src=client class=nak", 5)
	for i := range seq {
		require.Equal(t, rnr[i].Packet.BTH.PSN(), seq[i].Packet.BTH.PSN())
	}
	require.Empty(t, r.srv.Errors())
}

// deadServer: the server's link is cut with three requests in flight.
// The first request's SEND is retransmitted RetryCnt (3) times, an ACK
// timeout (4.096 µs · 2^10 ≈ 4.2 ms: one 4 ms jiffy under rxe) apart, and fails with
// RETRY_EXC_ERR after four timeouts; the two behind it are flushed
// (WR_FLUSH_ERR) and the client's QP is in ERROR.
func deadServer(t *testing.T, r *rig) {
	require.NoError(t, r.put(t, "k", []byte("v")).Err())
	r.w.AddFaults("down link=" + r.w.Host("server").LinkName())
	start := r.w.Now()
	var ops []*kvstore.Op
	for _, key := range []string{"a", "b", "c"} {
		op, err := r.cli().Get(key)
		require.NoError(t, err)
		ops = append(ops, op)
	}
	r.wait(ops...)
	failed := requireWCError(t, ops[0], verbs.WCRetryExcErr, verbs.WCSend)
	require.Equal(t, r.cli().QP().QPNum, failed.QPN)
	requireWCError(t, ops[1], verbs.WCWRFlushErr, verbs.WCSend)
	requireWCError(t, ops[2], verbs.WCWRFlushErr, verbs.WCSend)

	timeout := verbs.ProfileRXE.ACKTimeout(10) // 4 ms: 4.2 ms rounded down to one jiffy
	elapsed := r.w.Now().Sub(start)
	// The first transmission and three retries, each waiting a timeout;
	// the first wait is shorter: rxe's retransmit timer, armed by the
	// put's request and never stopped, fires one timeout after that.
	require.Greater(t, elapsed, 3*timeout, "the first transmission and three retries, each waiting a timeout")
	require.LessOrEqual(t, elapsed, 4*timeout)
	// Go-back-N: each timeout resends all three requests, from the
	// first PSN not acknowledged; every transmission dies on the link.
	sends := r.w.RequireFrames(fmt.Sprintf("src=client op=RC_SEND_ONLY from=%v", start), 3*4)
	first := r.w.RequireFrames(fmt.Sprintf("src=client psn=%d", uint32(sends[0].Packet.BTH.PSN())), 4)
	for i, f := range first {
		require.Equal(t, i+1, f.Tx)
		require.True(t, f.Dropped, "the link is down")
	}
	r.w.RequireNoFrames("src=client tx=5")
	r.w.RequireQPState(r.cli().QP(), verbs.QPStateErr)
	require.Zero(t, r.cli().Outstanding())
}

// wrongRKey: the client deregistered its value buffer, so the rkey its
// GET carries is no longer valid. The client's NIC refuses the WRITE
// with a NAK (remote access error) and moves its QP to ERROR; the
// server's WRITE completes with REM_ACCESS_ERR and the response behind
// it is flushed; the client's GET fails with the flushed receive.
func wrongRKey(t *testing.T, r *rig) {
	require.NoError(t, r.put(t, "k", pattern(500, 1)).Err())
	require.NoError(t, r.cli().ValueMR().Dereg())
	op := r.get(t, "k")
	requireWCError(t, op, verbs.WCWRFlushErr, verbs.WCRecv)
	r.w.RunUntil("the server polls its failed WRITE", func() bool { return len(r.srv.Errors()) >= 2 })

	nak := r.w.RequireFrames("src=client class=nak", 1)
	require.Equal(t, "NAK(remote access error)", nak[0].Packet.AETH.Syndrome().String())
	errs := r.srv.Errors()
	require.GreaterOrEqual(t, len(errs), 2)
	require.Equal(t, verbs.WCRemAccessErr.Name(), errs[0].Status.Name())
	require.Equal(t, verbs.WCRDMAWrite.String(), errs[0].Opcode.String())
	require.Equal(t, verbs.WCWRFlushErr.Name(), errs[1].Status.Name())
	require.Equal(t, verbs.WCSend.String(), errs[1].Opcode.String(), "the response behind the WRITE")
	r.w.RequireQPState(r.cli().QP(), verbs.QPStateErr)
}

// manyClients: four clients, one RC QP per connection (a QP is one
// reliable connection: sharing one between clients is the classic bug
// the troubleshooting guides fix by giving each peer its own). All four
// work at once; then one client's host dies with a GET in flight, and
// only that connection fails, on the server, while the other three go
// on.
func manyClients(t *testing.T, r *rig) {
	var ops []*kvstore.Op
	for i, c := range r.clients {
		op, err := c.Put(fmt.Sprint("key-of-c", i+1), pattern(2000, byte(i)))
		require.NoError(t, err)
		ops = append(ops, op)
	}
	r.wait(ops...)
	ops = ops[:0]
	for i, c := range r.clients {
		op, err := c.Get(fmt.Sprint("key-of-c", (i+1)%4+1)) // each reads its neighbour's
		require.NoError(t, err)
		ops = append(ops, op)
	}
	r.wait(ops...)
	for i, op := range ops {
		require.NoError(t, op.Err())
		require.Equal(t, pattern(2000, byte((i+1)%4)), op.Value())
	}
	for i, ep := range r.eps {
		// A PUT of 2000 bytes is two packets, the GET one: every
		// request of client i on its own connection.
		r.w.RequireFrames(fmt.Sprintf("src=c%d dst=server qp=%d class=request", i+1, ep.QPN), 3)
	}

	// c3's host dies as its GET is answered: the server's WRITE to it
	// finds no ACK and fails after RetryCnt retries.
	require.NoError(t, r.put(t, "big", pattern(4000, 9)).Err())
	dead, err := r.clients[2].Get("big")
	require.NoError(t, err)
	r.w.RunUntil("c3's GET reaches the server", func() bool {
		return len(r.w.Frames("src=server dst=c3 op=RC_RDMA_WRITE_FIRST")) == 2
	})
	r.w.AddFaults("down link=c3-sw")
	r.loops[2].Stop()
	r.w.RunUntil("the server gives up on c3", func() bool { return len(r.srv.Errors()) > 0 })
	errs := r.srv.Errors()
	require.Equal(t, verbs.WCRetryExcErr.Name(), errs[0].Status.Name())
	require.Equal(t, r.eps[2].QPN, errs[0].QPN, "only c3's connection")
	for _, e := range errs {
		require.Equal(t, r.eps[2].QPN, e.QPN)
	}
	require.False(t, dead.Done(), "c3's loop is dead: it never hears")

	for _, i := range []int{0, 1, 3} {
		got := func() *kvstore.Op {
			op, err := r.clients[i].Get("big")
			require.NoError(t, err)
			r.wait(op)
			return op
		}()
		require.NoError(t, got.Err(), "c%d", i+1)
		require.Equal(t, pattern(4000, 9), got.Value(), "c%d", i+1)
	}
}
