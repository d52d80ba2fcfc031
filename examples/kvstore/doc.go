// Package kvstore is a small key-value store over RDMA, written against
// package verbs alone: a worked example of a request/response protocol
// on RC queue pairs, with two-sided SENDs for requests and responses
// and a one-sided RDMA WRITE carrying GET values straight from the
// server's memory into the client's.
//
// # Connecting
//
// Each side describes its queue pair in an Endpoint (QPN, first PSN,
// GID); the two exchange them out of band, as ibv_rc_pingpong does over
// TCP, and each takes its QP through INIT, RTR and RTS toward the other:
//
//	srv, _ := kvstore.NewServer(serverCtx, kvstore.Config{})
//	cli, _ := kvstore.NewClient(clientCtx, kvstore.Config{})
//	sep, _ := srv.Accept(cli.Endpoint()) // one QP per client
//	cli.Connect(sep)
//
// The server has one QP per client and one CQ for all of them; a
// completion names its connection by wc.QPNum. Initial PSNs are a hash
// of the QPN: no randomness, so a seed reproduces a run.
//
// # Driving it
//
// Nothing here blocks or keeps time: Get and Put post a request and
// return an Op, and Progress (on each side) polls the CQ and does
// whatever the completions call for: it is the body of a busy-polling
// loop. In a test, package verbs/verbstest runs such loops between the
// simulation's events:
//
//	w := verbstest.New(t, verbstest.Options{Nodes: []string{"server", "client"}})
//	srv, _ := kvstore.NewServer(w.Host("server").Ctx, kvstore.Config{})
//	cli, _ := kvstore.NewClient(w.Host("client").Ctx, kvstore.Config{})
//	sep, _ := srv.Accept(cli.Endpoint())
//	cli.Connect(sep)
//	w.Poll("server", srv.Progress)
//	w.Poll("client", cli.Progress)
//	op, _ := cli.Put("answer", []byte("42"))
//	w.RunUntil("the PUT", op.Done)
//
// kvstore_test.go tests the store this way under faults: a lost WRITE
// packet, a client that falls behind posting receives, a dead server, a
// wrong rkey, many clients.
//
// # Walk-through
//
// A client has Slots request slots. Slot i owns the i-th request buffer
// (registered for the SEND), the i-th region of MaxValue bytes of the
// value buffer (registered with local and remote write) and request ID
// i, which is also the WR ID of the request's SEND. The client posts
// RecvDepth (by default Slots) receives for responses; the server posts
// Slots receives per connection, each big enough for the largest
// request.
//
// GET "k": the client SENDs {GET, id, "k", addr, rkey, cap}, where
// addr, rkey and cap name slot id's value region. If the server holds
// "k", it posts an RDMA WRITE of the value to addr/rkey, gathered from
// its pool MR (no copy), then the SEND of the response {id, OK, len}.
// An RC QP executes its requests in order (IBTA vol. 1 §9.5), so the
// value is in the client's region before the response's receive
// completes; the client copies it out into the Op. A missing key is the
// response {id, NotFound, 0} alone.
//
// PUT "k" v: the client SENDs {PUT, id, "k", v}, the value inside the
// message. The server copies v into its value pool (a first-fit
// allocator over one registered buffer of PoolSize bytes) and SENDs
// {id, OK, 0}, or {id, NoSpace, 0} if no free extent is large enough (the
// key then keeps its old value). A PUT that replaces a key allocates
// the new value before it frees the old one, so it needs room for both;
// the old extent is freed once no WRITE in flight still reads it.
//
// The client matches a response to its Op by the ID, completes the Op
// and re-posts the receive the response used. The slot is free for the
// next request once the Op is done and its SEND's completion has been
// polled.
//
// # Messages
//
// Every field is little endian. A request is a 32-byte header, the key,
// and for a PUT the value:
//
//	offset size field
//	     0    1 op       1 GET, 2 PUT
//	     1    1 reserved 0
//	     2    2 key_len  bytes of key, at most MaxKey
//	     4    4 id       the client's request slot
//	     8    4 len      GET: bytes the region holds (MaxValue); PUT: value length
//	    12    4 magic    "KVS1"
//	    16    8 addr     GET: virtual address of the slot's value region; PUT: 0
//	    24    4 rkey     GET: R_Key of the value buffer; PUT: 0
//	    28    4 reserved 0
//	    32    - key      key_len bytes
//	     -    - value    PUT: len bytes
//
// A response is 16 bytes, sent inline (the device copies it when it is
// posted):
//
//	offset size field
//	     0    4 id       the request's id
//	     4    1 status   0 OK, 1 NotFound, 2 NoSpace, 3 TooLarge, 4 BadRequest
//	     5    3 reserved 0
//	     8    4 len      GET OK: the value's length (written at addr); else 0
//	    12    4 magic    "KVS1"
//
// The magic at bytes 12..15 of both keeps a stock Wireshark from taking
// the store's SENDs for RPC-over-RDMA: its heuristic claims an RC SEND
// whose bytes 12..15 read 0 or 2 as a big-endian word, or that is
// shorter than 16 bytes, and then shows it as [Malformed Packet].
//
// # Completions and failures
//
// Every work request is signaled on both sides, so every failure is
// reported against the request it hit. A failed completion on an RC QP
// means the QP is in the error state: the device flushes everything
// still queued on it, the send queue first, with WR_FLUSH_ERR (IBTA
// §10.3.1). What the Ops then end with:
//
//   - An Op whose request SEND completes with an error ends with that
//     completion as a *WCError: the request that failed carries the real
//     status (e.g. RETRY_EXC_ERR), the requests queued behind it
//     WR_FLUSH_ERR, and so does any request posted later.
//   - An Op whose request was delivered (its SEND completed successfully)
//     and still waits for its response when the client polls its first
//     failed completion, of any kind, ends with that first *WCError (the
//     same pointer for all of them): no response can arrive on a QP in
//     error. If the first failure is a SEND's, it is the failed request's
//     status; if no request was outstanding, a flushed receive's
//     (WR_FLUSH_ERR, opcode WCRecv).
//   - An Op that is done keeps its outcome; receives are no longer
//     re-posted after the first failure.
//
// The server records every failed completion, in order, in Errors, and
// stops serving that connection (its queued requests are dropped, its
// receives not re-posted); the others carry on. Note that a server-side
// failure does not fail the client's QP: a client whose responses are
// lost for good waits until its own QP fails. A real client would add a
// timeout; this one has no clock, by design.
//
// Errors that are not completions: Get and Put return ErrBusy when every
// slot is in use and ErrTooLarge for a key over MaxKey or a value over
// MaxValue; a finished Op's Err is nil, ErrNotFound, ErrNoSpace,
// ErrTooLarge (the stored value exceeds the client's MaxValue),
// ErrBadRequest, or a *WCError.
package kvstore
