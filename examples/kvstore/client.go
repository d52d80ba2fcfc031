package kvstore

import (
	"fmt"
	"syscall"

	"github.com/rocesim/rocesim/verbs"
)

// The client, in the order an operation flows through it:
//
//  1. Get or Put takes the lowest free request slot, builds the request
//     in the slot's send buffer and posts a signaled SEND with the slot
//     as its WR ID (and, for a GET, the slot's value region as the
//     place to WRITE the value).
//  2. Progress polls the CQ. The SEND's completion marks the request
//     delivered; the response's receive completion finds the Op by the
//     ID in the response, copies a GET's value out of the slot's region
//     and completes the Op; the receive is re-posted.
//  3. The slot is free again once both have happened: the Op is done
//     and its SEND's completion has been polled (so a slot's WR ID is
//     never in the send queue twice).
//  4. A failed completion breaks the connection (see the package doc
//     for the error each Op then ends with).

// Client is one connection to a server, with up to Slots operations in
// flight. It is not safe for concurrent use; one loop calls Get, Put and
// Progress.
type Client struct {
	ctx       *verbs.Context
	cfg       Config
	pd        *verbs.PD
	cq        *verbs.CQ
	qp        *verbs.QP
	local     Endpoint
	sendBuf   []byte // Slots request buffers of sendSize bytes
	sendMR    *verbs.MR
	recvBuf   []byte // RecvDepth response buffers of responseLen bytes
	recvMR    *verbs.MR
	valueBuf  []byte // Slots value regions of MaxValue bytes, the server WRITEs into
	valueMR   *verbs.MR
	slots     []slot // indexed by request ID
	inUse     int
	connected bool
	broken    *WCError // the first failed completion; nil while healthy
	wcs       []verbs.WC
	// skipRepost is a deliberate bug: the client never re-posts a
	// receive. Only the package's tests set it (export_test.go), to show
	// how a broken client fails its tests.
	skipRepost bool
}

// slot is one request slot.
type slot struct {
	op        *Op  // nil when the slot is free
	delivered bool // the request's SEND completed successfully
	sent      bool // the request's SEND completed, successfully or not
}

// Op is one GET or PUT. It is done once Progress has seen its response,
// or a failure that means no response will come.
type Op struct {
	key   string
	get   bool
	done  bool
	value []byte
	err   error
}

// Done reports whether the operation has completed (successfully or not).
func (o *Op) Done() bool { return o.done }

// Value returns a GET's value: the Op's own copy, taken out of the
// registered value region when the response arrived (empty, not nil,
// for an empty value). It is nil for a PUT, a failed GET, or an Op not
// yet done.
func (o *Op) Value() []byte { return o.value }

// Err returns why the operation failed: nil on success, ErrNotFound,
// ErrNoSpace, ErrTooLarge or ErrBadRequest from the server, or a
// *WCError when a work completion failed. It is nil while the Op is not
// done.
func (o *Op) Err() error { return o.err }

// Key returns the key the operation is for.
func (o *Op) Key() string { return o.key }

// finish completes o, unless it already has: the first outcome stands.
func (o *Op) finish(value []byte, err error) {
	if o.done {
		return
	}
	o.done, o.value, o.err = true, value, err
}

// sendSize is the size of a client request buffer: the largest request.
func (cfg *Config) sendSize() int { return reqHeaderLen + cfg.MaxKey + cfg.MaxValue }

// NewClient allocates the client's protection domain, CQ, QP and
// buffers on ctx. Zero fields of cfg take their defaults. The QP stays
// in RESET until Connect.
func NewClient(ctx *verbs.Context, cfg Config) (*Client, error) {
	cfg, err := cfg.resolve()
	if err != nil {
		return nil, err
	}
	c := &Client{ctx: ctx, cfg: cfg, slots: make([]slot, cfg.Slots), wcs: make([]verbs.WC, 16),
		sendBuf:  make([]byte, cfg.Slots*cfg.sendSize()),
		recvBuf:  make([]byte, cfg.RecvDepth*responseLen),
		valueBuf: make([]byte, cfg.Slots*cfg.MaxValue)}
	if c.pd, err = ctx.AllocPD(); err != nil {
		return nil, fmt.Errorf("kvstore: alloc PD: %w", err)
	}
	// One completion per receive and per send, each reposted only after
	// its completion is polled: Slots + RecvDepth ≤ 2×Slots never
	// overflows.
	if c.cq, err = ctx.CreateCQ(2*cfg.Slots, nil, 0); err != nil {
		return nil, fmt.Errorf("kvstore: create CQ: %w", err)
	}
	if c.sendMR, err = c.pd.RegMR(c.sendBuf, 0); err != nil {
		return nil, fmt.Errorf("kvstore: register send buffers: %w", err)
	}
	if c.recvMR, err = c.pd.RegMR(c.recvBuf, verbs.AccessLocalWrite); err != nil {
		return nil, fmt.Errorf("kvstore: register receive buffers: %w", err)
	}
	// The server WRITEs GET values here: remote write needs local write
	// too (IBTA §10.6.3.1, as ibv_reg_mr insists).
	if c.valueMR, err = c.pd.RegMR(c.valueBuf, verbs.AccessLocalWrite|verbs.AccessRemoteWrite); err != nil {
		return nil, fmt.Errorf("kvstore: register value buffers: %w", err)
	}
	c.qp, err = c.pd.CreateQP(verbs.QPInitAttr{SendCQ: c.cq, RecvCQ: c.cq, Type: verbs.QPTypeRC,
		Cap: verbs.QPCap{MaxSendWR: uint32(cfg.Slots), MaxRecvWR: uint32(cfg.RecvDepth), MaxSendSGE: 1, MaxRecvSGE: 1}})
	if err != nil {
		return nil, fmt.Errorf("kvstore: create QP: %w", err)
	}
	if c.local, err = localEndpoint(ctx, c.qp); err != nil {
		return nil, err
	}
	return c, nil
}

// Endpoint returns the client's side of the connection, for the
// server's Accept.
func (c *Client) Endpoint() Endpoint { return c.local }

// Connect brings the QP to RTS toward the server's Endpoint (the one
// Accept returned) and posts RecvDepth receives for responses.
func (c *Client) Connect(server Endpoint) error {
	if c.connected {
		return fmt.Errorf("kvstore: client QP %#x is already connected: %w", c.qp.QPNum, syscall.EISCONN)
	}
	if err := bringUp(c.qp, &c.cfg, verbs.AccessRemoteWrite, c.local.PSN, server); err != nil {
		return err
	}
	if err := postRecvs(c.qp, c.recvMR, responseLen, 0, c.cfg.RecvDepth); err != nil {
		return err
	}
	c.connected = true
	return nil
}

// Get posts a GET of key. The returned Op completes in a later
// Progress.
func (c *Client) Get(key string) (*Op, error) {
	if len(key) > c.cfg.MaxKey {
		return nil, fmt.Errorf("%w: key of %d bytes, MaxKey %d", ErrTooLarge, len(key), c.cfg.MaxKey)
	}
	return c.post(&Op{key: key, get: true}, nil)
}

// Put posts a PUT of key with value; value is copied into the request,
// so the caller may reuse it at once. The returned Op completes in a
// later Progress.
func (c *Client) Put(key string, value []byte) (*Op, error) {
	if len(key) > c.cfg.MaxKey {
		return nil, fmt.Errorf("%w: key of %d bytes, MaxKey %d", ErrTooLarge, len(key), c.cfg.MaxKey)
	}
	if len(value) > c.cfg.MaxValue {
		return nil, fmt.Errorf("%w: value of %d bytes, MaxValue %d", ErrTooLarge, len(value), c.cfg.MaxValue)
	}
	return c.post(&Op{key: key}, value)
}

// post builds op's request in the lowest free slot and posts its SEND.
func (c *Client) post(op *Op, value []byte) (*Op, error) {
	if !c.connected {
		return nil, fmt.Errorf("kvstore: client QP %#x is not connected: %w", c.qp.QPNum, syscall.ENOTCONN)
	}
	id := c.freeSlot()
	if id < 0 {
		return nil, fmt.Errorf("%w: %d requests outstanding", ErrBusy, c.inUse)
	}
	size := c.cfg.sendSize()
	req := request(c.sendBuf[id*size : (id+1)*size])
	n := reqHeaderLen + len(op.key)
	req.SetID(uint32(id))
	if op.get {
		req.SetOpKey(opGet, op.key)
		req.SetAddr(c.valueMR.Addr + uint64(id*c.cfg.MaxValue))
		req.SetRKey(c.valueMR.RKey)
		req.SetLen(c.cfg.MaxValue)
	} else {
		req.SetOpKey(opPut, op.key)
		req.SetAddr(0)
		req.SetRKey(0)
		req.SetLen(len(value))
		n += copy(req[n:], value)
	}
	wr := [1]verbs.SendWR{{WRID: uint64(id), Opcode: verbs.WRSend, Flags: verbs.SendSignaled,
		SGList: []verbs.SGE{c.sendMR.SGE(uint64(id*size), uint64(n))}}}
	if _, err := c.qp.PostSend(wr[:]); err != nil {
		return nil, fmt.Errorf("kvstore: post request on QP %#x: %w", c.qp.QPNum, err)
	}
	c.slots[id] = slot{op: op}
	c.inUse++
	return op, nil
}

// freeSlot returns the lowest free slot, or -1.
func (c *Client) freeSlot() int {
	for i := range c.slots {
		if c.slots[i].op == nil {
			return i
		}
	}
	return -1
}

// Progress polls the CQ until it is empty: it completes the Ops whose
// responses (or failures) arrived, re-posts the receives the responses
// used and frees their slots. It never blocks.
func (c *Client) Progress() {
	for {
		n := c.cq.Poll(c.wcs)
		if n == 0 {
			return
		}
		for i := range c.wcs[:n] {
			c.complete(&c.wcs[i])
		}
	}
}

// complete handles one completion.
func (c *Client) complete(wc *verbs.WC) {
	var failed *WCError
	if wc.Status != verbs.WCSuccess {
		failed = wcError(wc)
		c.breakOff(failed)
	}
	switch wc.Opcode {
	case verbs.WCSend:
		c.sendDone(int(wc.WRID), failed)
	case verbs.WCRecv:
		if wc.Status == verbs.WCSuccess {
			c.receive(int(wc.WRID), int(wc.ByteLen))
		}
	}
}

// breakOff records the first failed completion. The QP is in the error
// state: no response will arrive any more, so every Op whose request was
// delivered and is still waiting fails with this first error. Ops whose
// requests are still in the send queue fail by their own (flushed)
// completions.
func (c *Client) breakOff(e *WCError) {
	if c.broken != nil {
		return
	}
	c.broken = e
	for i := range c.slots {
		if s := &c.slots[i]; s.op != nil && s.delivered {
			s.op.finish(nil, e)
			c.release(i)
		}
	}
}

// sendDone handles the completion of slot id's request SEND; failed is
// nil if it succeeded.
func (c *Client) sendDone(id int, failed *WCError) {
	if id >= len(c.slots) || c.slots[id].op == nil {
		return
	}
	s := &c.slots[id]
	s.sent = true
	switch {
	case failed != nil:
		s.op.finish(nil, failed)
	case c.broken != nil:
		// Delivered, but the connection broke before: no response can come.
		s.op.finish(nil, c.broken)
	default:
		s.delivered = true
	}
	c.release(id)
}

// receive handles a response that arrived in receive buffer buf, n bytes
// long, and re-posts the buffer.
func (c *Client) receive(buf, n int) {
	if n >= responseLen {
		resp := response(c.recvBuf[buf*responseLen : (buf+1)*responseLen])
		c.respond(resp)
	}
	// A response that is short, or names no waiting Op, is dropped: the
	// receive is re-posted all the same.
	// Once broken, the QP would only flush it.
	if c.broken == nil && !c.skipRepost {
		// This cannot fail: the receive queue has room for the receive
		// just consumed, and a QP in ERR accepts posts (to flush them).
		// Only a QP destroyed behind the client's back refuses, and then
		// nothing completes any more anyway.
		_ = postRecvs(c.qp, c.recvMR, responseLen, buf, buf+1)
	}
}

// respond completes the Op a response is for.
func (c *Client) respond(resp response) {
	id := int(resp.ID())
	if id >= len(c.slots) || c.slots[id].op == nil || c.slots[id].op.done {
		return
	}
	op := c.slots[id].op
	err := statusErr(resp.Status())
	var value []byte
	if err == nil && op.get {
		n := resp.Len()
		if n > c.cfg.MaxValue {
			err = ErrBadRequest
		} else {
			// The server's WRITE landed before its SEND (RC executes in
			// order): copy the value out so the region can take the
			// slot's next GET.
			off := id * c.cfg.MaxValue
			value = append([]byte{}, c.valueBuf[off:off+n]...)
		}
	}
	op.finish(value, err)
	c.release(id)
}

// release frees slot id once its Op is done and its SEND has completed.
func (c *Client) release(id int) {
	s := &c.slots[id]
	if s.op != nil && s.op.done && s.sent {
		*s = slot{}
		c.inUse--
	}
}

// QP returns the client's queue pair.
func (c *Client) QP() *verbs.QP { return c.qp }

// CQ returns the client's completion queue.
func (c *Client) CQ() *verbs.CQ { return c.cq }

// ValueMR returns the registered buffer GET values are written into:
// Slots regions of MaxValue bytes, region i for request slot i.
func (c *Client) ValueMR() *verbs.MR { return c.valueMR }

// Outstanding returns how many request slots are in use: Ops posted
// whose slot is not yet free (not done, or done before the completion of
// their request's SEND was polled).
func (c *Client) Outstanding() int { return c.inUse }
