package kvstore_test

import (
	"bytes"
	"errors"
	"fmt"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/rocesim/rocesim/examples/kvstore"
	"github.com/rocesim/rocesim/verbs"
	"github.com/rocesim/rocesim/verbs/verbstest"
)

// storeRig is the rig of kvstore_test.go with one client and an
// optional fault plan.
type storeRig struct {
	*rig
	t   *testing.T
	cli *kvstore.Client
}

func newStoreRig(t *testing.T, cfg kvstore.Config, plan string) *storeRig {
	t.Helper()
	r := newRig(t, verbstest.Options{Faults: plan}, cfg, 1)
	return &storeRig{rig: r, t: t, cli: r.cli()}
}

func (r *storeRig) put(key string, value []byte) *kvstore.Op { return r.rig.put(r.t, key, value) }
func (r *storeRig) get(key string) *kvstore.Op               { return r.rig.get(r.t, key) }

func TestPutGetRoundTrip(t *testing.T) {
	r := newStoreRig(t, kvstore.Config{}, "")
	for i, n := range []int{0, 1, 1024, 3000, 4096} {
		key := fmt.Sprintf("key-%d", n)
		want := pattern(n, byte(i))
		op := r.put(key, want)
		require.NoError(t, op.Err())
		require.Nil(t, op.Value())
		require.Equal(t, key, op.Key())

		op = r.get(key)
		require.NoError(t, op.Err())
		require.Len(t, op.Value(), n)
		require.True(t, bytes.Equal(want, op.Value()), "value of %d bytes differs", n)
		require.Equal(t, i+1, r.srv.Len())
	}
	require.Zero(t, r.cli.Outstanding())
	require.Empty(t, r.srv.Errors())
}

func TestGetMissing(t *testing.T) {
	r := newStoreRig(t, kvstore.Config{}, "")
	op := r.get("nope")
	require.ErrorIs(t, op.Err(), kvstore.ErrNotFound)
	require.Nil(t, op.Value())
}

func TestReplace(t *testing.T) {
	r := newStoreRig(t, kvstore.Config{}, "")
	require.NoError(t, r.put("k", []byte("first")).Err())
	require.NoError(t, r.put("k", []byte("second value")).Err())
	require.Equal(t, []byte("second value"), r.get("k").Value())
	require.Equal(t, 1, r.srv.Len())
}

func TestBusy(t *testing.T) {
	cfg := kvstore.Config{Slots: 4}
	r := newStoreRig(t, cfg, "")
	var ops []*kvstore.Op
	for i := range cfg.Slots {
		op, err := r.cli.Put(fmt.Sprint("k", i), pattern(100*i, byte(i)))
		require.NoError(t, err)
		ops = append(ops, op)
	}
	require.Equal(t, cfg.Slots, r.cli.Outstanding())
	_, err := r.cli.Get("k0")
	require.ErrorIs(t, err, kvstore.ErrBusy)

	r.wait(ops...)
	for i := range cfg.Slots {
		require.NoError(t, ops[i].Err())
	}
	// Pipelined GETs: every slot at once, each value in its own region.
	ops = ops[:0]
	for i := range cfg.Slots {
		op, err := r.cli.Get(fmt.Sprint("k", i))
		require.NoError(t, err)
		ops = append(ops, op)
	}
	r.wait(ops...)
	for i, op := range ops {
		require.NoError(t, op.Err())
		require.True(t, bytes.Equal(pattern(100*i, byte(i)), op.Value()))
	}
	require.Zero(t, r.cli.Outstanding())
}

func TestTooLarge(t *testing.T) {
	r := newStoreRig(t, kvstore.Config{MaxKey: 8, MaxValue: 64}, "")
	_, err := r.cli.Put("k", make([]byte, 65))
	require.ErrorIs(t, err, kvstore.ErrTooLarge)
	_, err = r.cli.Put("key-too-long", nil)
	require.ErrorIs(t, err, kvstore.ErrTooLarge)
	_, err = r.cli.Get("key-too-long")
	require.ErrorIs(t, err, kvstore.ErrTooLarge)
	require.Zero(t, r.cli.Outstanding())
	require.NoError(t, r.put("k", make([]byte, 64)).Err())
}

func TestNoSpace(t *testing.T) {
	r := newStoreRig(t, kvstore.Config{PoolSize: 100}, "")
	require.NoError(t, r.put("a", pattern(60, 1)).Err())
	require.ErrorIs(t, r.put("b", pattern(60, 2)).Err(), kvstore.ErrNoSpace)
	// Replacing frees the old extent once the new one is stored.
	require.NoError(t, r.put("a", pattern(40, 3)).Err())
	require.NoError(t, r.put("b", pattern(60, 4)).Err())
	require.Equal(t, pattern(40, 3), r.get("a").Value())
	require.Equal(t, pattern(60, 4), r.get("b").Value())
}

// TestFlushed breaks the client's QP before its request leaves: the Op
// ends with its flushed SEND completion.
func TestFlushed(t *testing.T) {
	r := newStoreRig(t, kvstore.Config{}, "")
	op, err := r.cli.Get("k")
	require.NoError(t, err)
	require.NoError(t, r.cli.QP().Modify(&verbs.QPAttr{QPState: verbs.QPStateErr}, verbs.QPAttrState))
	r.cli.Progress()
	require.True(t, op.Done())
	var wce *kvstore.WCError
	require.True(t, errors.As(op.Err(), &wce))
	require.Equal(t, verbs.WCWRFlushErr, wce.Status)
	require.Equal(t, verbs.WCSend, wce.Opcode)
	require.Equal(t, r.cli.QP().QPNum, wce.QPN)
	require.Equal(t, fmt.Sprintf("kvstore: send completion on QP %#x: Work Request Flushed Error", wce.QPN), wce.Error())
	require.Zero(t, r.cli.Outstanding())

	// Later requests are flushed too, as the QP accepts and flushes them.
	op, err = r.cli.Put("k", []byte("v"))
	require.NoError(t, err)
	r.cli.Progress()
	require.True(t, errors.As(op.Err(), &wce))
	require.Equal(t, verbs.WCWRFlushErr, wce.Status)
}

func TestConfigInvalid(t *testing.T) {
	ctx := verbstest.New(t, verbstest.Options{Nodes: []string{"a"}}).Host("a").Ctx
	for _, cfg := range []kvstore.Config{{Slots: -1}, {MaxKey: 1 << 16}, {RetryCnt: 8}, {PoolSize: -1}, {Slots: 2, RecvDepth: 3}} {
		_, err := kvstore.NewServer(ctx, cfg)
		require.Error(t, err, "%+v", cfg)
	}
}

// lossy is the transport configuration of the failure tests: a short
// ACK timeout (4.096 µs × 2^8 ≈ 1 ms, one 4 ms jiffy under rxe) and two
// retries.
var lossy = kvstore.Config{Timeout: 8, RetryCnt: 2}

// TestRequestLost loses every transmission of the second of three
// pipelined requests: its SEND fails with RETRY_EXC_ERR; the first,
// delivered and waiting for the response that now cannot come, fails
// with that same first error; the third, behind it in the send queue, is
// flushed.
func TestRequestLost(t *testing.T) {
	psn := newStoreRig(t, lossy, "").cli.Endpoint().PSN // the same in every run
	r := newStoreRig(t, lossy, fmt.Sprintf("drop src=server op=RC_SEND_ONLY\ndrop src=client op=RC_SEND_ONLY psn=%d\n", psn+1))
	var ops []*kvstore.Op
	for _, k := range []string{"a", "b", "c"} {
		op, err := r.cli.Put(k, []byte(k))
		require.NoError(t, err)
		ops = append(ops, op)
	}
	r.wait(ops...)
	var first, second, third *kvstore.WCError
	require.True(t, errors.As(ops[0].Err(), &first))
	require.True(t, errors.As(ops[1].Err(), &second))
	require.True(t, errors.As(ops[2].Err(), &third))
	require.Equal(t, verbs.WCRetryExcErr, second.Status)
	require.Equal(t, uint64(1), second.WRID)
	require.Same(t, second, first)
	require.Equal(t, verbs.WCWRFlushErr, third.Status)
	require.Equal(t, uint64(2), third.WRID)
	require.Zero(t, r.cli.Outstanding())
	require.Equal(t, verbs.QPStateErr, r.cli.QP().State())
}

// TestResponseLost loses every response: the server's SEND fails, the
// server records it and drops the connection; the client's Op, delivered
// and waiting, ends only when its own QP fails, with that first failed
// completion (here a flushed receive).
func TestResponseLost(t *testing.T) {
	r := newStoreRig(t, lossy, "drop src=server op=RC_SEND_ONLY\n")
	op, err := r.cli.Put("k", []byte("v"))
	require.NoError(t, err)
	r.w.RunUntil("the server's first error", func() bool { return len(r.srv.Errors()) > 0 })
	errs := r.srv.Errors()
	require.Equal(t, verbs.WCRetryExcErr, errs[0].Status)
	require.Equal(t, verbs.WCSend, errs[0].Opcode)
	for _, e := range errs[1:] {
		require.Equal(t, verbs.WCWRFlushErr, e.Status)
		require.Equal(t, verbs.WCRecv, e.Opcode)
	}
	require.Equal(t, 1, r.srv.Len(), "the PUT was executed; only its response was lost")
	require.False(t, op.Done(), "the client's QP is healthy: it still waits")

	require.NoError(t, r.cli.QP().Modify(&verbs.QPAttr{QPState: verbs.QPStateErr}, verbs.QPAttrState))
	r.cli.Progress()
	var wce *kvstore.WCError
	require.True(t, errors.As(op.Err(), &wce))
	require.Equal(t, verbs.WCWRFlushErr, wce.Status)
	require.Equal(t, verbs.WCRecv, wce.Opcode)
	require.Zero(t, r.cli.Outstanding())
}

// Example stores a value and reads it back, stepping the simulation one
// instant at a time and letting both sides poll in between.
func Example() {
	w := verbs.NewWorld(verbs.WorldConfig{Seed: 1})
	hs, hc := w.AddHost("server"), w.AddHost("client")
	if err := w.Connect(hs, hc); err != nil {
		panic(err)
	}
	sctx, _ := hs.GetDeviceList()[0].Open()
	cctx, _ := hc.GetDeviceList()[0].Open()
	srv, err := kvstore.NewServer(sctx, kvstore.Config{})
	if err != nil {
		panic(err)
	}
	cli, err := kvstore.NewClient(cctx, kvstore.Config{})
	if err != nil {
		panic(err)
	}
	sep, err := srv.Accept(cli.Endpoint()) // the Endpoints cross a control channel
	if err != nil {
		panic(err)
	}
	if err := cli.Connect(sep); err != nil {
		panic(err)
	}

	wait := func(op *kvstore.Op) {
		s := w.Scheduler()
		for !op.Done() && s.Pending() > 0 {
			s.RunUntil(s.NextAt())
			srv.Progress()
			cli.Progress()
		}
	}
	put, _ := cli.Put("answer", []byte("42"))
	wait(put)
	get, _ := cli.Get("answer")
	wait(get)
	missing, _ := cli.Get("question")
	wait(missing)
	fmt.Printf("put: %v\nget: %q %v\nmissing: %v\nkeys: %d\n",
		put.Err(), get.Value(), get.Err(), missing.Err(), srv.Len())
	// Output:
	// put: <nil>
	// get: "42" <nil>
	// missing: kvstore: key not found
	// keys: 1
}
