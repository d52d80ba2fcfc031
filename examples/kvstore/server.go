package kvstore

import (
	"fmt"

	"github.com/rocesim/rocesim/verbs"
)

// The server, in the order a request flows through it:
//
//  1. Accept creates a QP per client on the one shared CQ and posts
//     Slots receives, each big enough for the largest request.
//  2. Progress polls the CQ; a receive completion names its connection by
//     wc.QPNum and its buffer by wc.WRID, and queues the request.
//  3. serve answers queued requests while the send queue has room for
//     two work requests: a GET hit is an RDMA WRITE of the value from the
//     pool, then a SEND of the response; anything else is the SEND alone.
//  4. The request's receive buffer is re-posted once it is answered.
//  5. Send completions give send-queue room back and unpin the extents
//     WRITEs read; any failed completion is recorded and ends the
//     connection.

// Server is the store: a value pool, an index, and one RC connection per
// client, all completing on one CQ. It is not safe for concurrent use;
// one loop calls Progress.
type Server struct {
	ctx     *verbs.Context
	cfg     Config
	pd      *verbs.PD
	cq      *verbs.CQ
	pool    pool
	poolMR  *verbs.MR
	entries map[string]*entry // looked up, never iterated
	conns   []*conn           // in Accept order
	byQPN   map[uint32]*conn  // looked up, never iterated
	errs    []*WCError
	wcs     []verbs.WC
}

// conn is the server's side of one client connection.
type conn struct {
	qp      *verbs.QP
	recvBuf []byte     // Slots receive buffers of recvSize bytes
	recvMR  *verbs.MR  // registers recvBuf
	respBuf response   // the response being posted; sent inline
	respMR  *verbs.MR  // registers respBuf
	queued  []received // requests received and not yet answered, in order
	pinned  []*entry   // entries read by WRITEs in flight, in posting order
	sending int        // send WRs posted and not yet completed
	failed  bool       // a completion failed: no more requests are served
}

// received is a request waiting in receive buffer slot, n bytes long.
type received struct {
	slot, n int
}

// cqePerConn is how many completions one connection can have queued:
// one per receive, and up to two send WRs (WRITE, SEND) per request.
// Every work request is signaled and none is posted again until its
// completion is polled, so the CQ never overflows.
func (cfg *Config) cqePerConn() int { return 3 * cfg.Slots }

// recvSize is the size of a server receive buffer: the largest request.
func (cfg *Config) recvSize() int { return reqHeaderLen + cfg.MaxKey + cfg.MaxValue }

// NewServer allocates the server's protection domain, CQ and value pool
// on ctx. Zero fields of cfg take their defaults.
func NewServer(ctx *verbs.Context, cfg Config) (*Server, error) {
	cfg, err := cfg.resolve()
	if err != nil {
		return nil, err
	}
	s := &Server{ctx: ctx, cfg: cfg, pool: newPool(cfg.PoolSize), entries: map[string]*entry{},
		byQPN: map[uint32]*conn{}, wcs: make([]verbs.WC, 16)}
	if s.pd, err = ctx.AllocPD(); err != nil {
		return nil, fmt.Errorf("kvstore: alloc PD: %w", err)
	}
	if s.cq, err = ctx.CreateCQ(cfg.cqePerConn(), nil, 0); err != nil {
		return nil, fmt.Errorf("kvstore: create CQ: %w", err)
	}
	// Only the local device reads the pool (the WRITEs' gather lists): no
	// remote access is granted, and the CPU writes it.
	if s.poolMR, err = s.pd.RegMR(s.pool.buf, 0); err != nil {
		return nil, fmt.Errorf("kvstore: register the value pool: %w", err)
	}
	return s, nil
}

// Accept makes the QP for one client connection, brings it to RTS
// toward client, posts Slots receives for its requests and returns the
// server's Endpoint, for the client's Connect.
func (s *Server) Accept(client Endpoint) (Endpoint, error) {
	cfg := &s.cfg
	if err := s.cq.Resize(cfg.cqePerConn() * (len(s.conns) + 1)); err != nil {
		return Endpoint{}, fmt.Errorf("kvstore: grow the CQ for connection %d: %w", len(s.conns)+1, err)
	}
	c := &conn{recvBuf: make([]byte, cfg.Slots*cfg.recvSize()), respBuf: make(response, responseLen)}
	var err error
	if c.recvMR, err = s.pd.RegMR(c.recvBuf, verbs.AccessLocalWrite); err != nil {
		return Endpoint{}, fmt.Errorf("kvstore: register receive buffers: %w", err)
	}
	if c.respMR, err = s.pd.RegMR(c.respBuf, 0); err != nil {
		return Endpoint{}, fmt.Errorf("kvstore: register the response buffer: %w", err)
	}
	c.qp, err = s.pd.CreateQP(verbs.QPInitAttr{SendCQ: s.cq, RecvCQ: s.cq, Type: verbs.QPTypeRC,
		Cap: verbs.QPCap{MaxSendWR: uint32(2 * cfg.Slots), MaxRecvWR: uint32(cfg.Slots),
			MaxSendSGE: 1, MaxRecvSGE: 1, MaxInlineData: responseLen}})
	if err != nil {
		return Endpoint{}, fmt.Errorf("kvstore: create QP: %w", err)
	}
	local, err := localEndpoint(s.ctx, c.qp)
	if err == nil {
		err = bringUp(c.qp, cfg, 0, local.PSN, client)
	}
	if err == nil {
		err = postRecvs(c.qp, c.recvMR, cfg.recvSize(), 0, cfg.Slots)
	}
	if err != nil {
		c.qp.Destroy()
		return Endpoint{}, err
	}
	s.conns = append(s.conns, c)
	s.byQPN[c.qp.QPNum] = c
	return local, nil
}

// Progress polls the CQ until it is empty, serves every request that
// has arrived and re-posts the receives they used. It never blocks: a
// busy-polling loop calls it, between steps of the simulation.
func (s *Server) Progress() {
	for {
		n := s.cq.Poll(s.wcs)
		if n == 0 {
			return
		}
		for i := range s.wcs[:n] {
			s.complete(&s.wcs[i])
		}
	}
}

// Errors returns the failed completions the server has polled, oldest
// first: on a failed connection, the completion that failed, then its
// work requests flushed (WR_FLUSH_ERR).
func (s *Server) Errors() []*WCError { return s.errs }

// Len returns the number of keys stored.
func (s *Server) Len() int { return len(s.entries) }

// complete handles one completion.
func (s *Server) complete(wc *verbs.WC) {
	c := s.byQPN[wc.QPNum]
	if c == nil {
		return // not one of ours: the CQ is only the server's
	}
	if wc.Status != verbs.WCSuccess {
		// An RC QP with a failed completion is in the error state: every
		// work request still queued will be flushed. The connection is
		// over; the flushed completions still give back what they held.
		s.errs = append(s.errs, wcError(wc))
		c.fail()
	}
	switch wc.Opcode {
	case verbs.WCRecv:
		if !c.failed {
			c.queued = append(c.queued, received{slot: int(wc.WRID), n: int(wc.ByteLen)})
		}
	case verbs.WCRDMAWrite:
		c.sending--
		s.unpin(c)
	default: // WCSend
		c.sending--
	}
	s.serve(c)
}

// serve answers c's queued requests, in arrival order, while its send
// queue has room for a WRITE and a SEND.
func (s *Server) serve(c *conn) {
	for len(c.queued) > 0 && !c.failed && c.sending+2 <= 2*s.cfg.Slots {
		r := c.queued[0]
		c.queued = c.queued[1:]
		size := s.cfg.recvSize()
		off := r.slot * size
		s.answer(c, request(c.recvBuf[off:off+r.n]))
		if c.failed {
			return
		}
		// The request is answered (a PUT's value copied to the pool), so
		// its buffer can take the next one.
		if err := postRecvs(c.qp, c.recvMR, size, r.slot, r.slot+1); err != nil {
			c.fail()
		}
	}
}

// answer executes one request and posts its response (after the value's
// WRITE, for a GET that found its key).
func (s *Server) answer(c *conn, req request) {
	if !req.check(s.cfg.MaxKey, s.cfg.MaxValue) {
		if len(req) < reqHeaderLen {
			return // no ID to answer to
		}
		s.respond(c, req.ID(), statusBadRequest, 0, nil)
		return
	}
	switch req.Op() {
	case opGet:
		e, ok := s.entries[string(req.Key())] // no allocation: the compiler looks up the bytes
		switch {
		case !ok:
			s.respond(c, req.ID(), statusNotFound, 0, nil)
		case e.n > req.Len():
			s.respond(c, req.ID(), statusTooLarge, 0, nil)
		case e.n == 0:
			s.respond(c, req.ID(), statusOK, 0, nil) // nothing to write
		default:
			// The WRITE gathers from the pool itself, no copy. RC delivers
			// and executes in order (IBTA §9.5), so the value has landed
			// when the client sees the SEND behind it.
			write := verbs.SendWR{WRID: uint64(req.ID()), Opcode: verbs.WRRDMAWrite, Flags: verbs.SendSignaled,
				SGList:     []verbs.SGE{s.poolMR.SGE(uint64(e.off), uint64(e.n))},
				RemoteAddr: req.Addr(), RKey: req.RKey()}
			if s.respond(c, req.ID(), statusOK, e.n, &write) > 0 {
				// The WRITE is posted (its completion will unpin, even
				// if the SEND behind it was refused).
				e.pins++
				c.pinned = append(c.pinned, e)
			}
		}
	case opPut:
		v := req.Value()
		ext, ok := s.pool.alloc(len(v))
		if !ok {
			s.respond(c, req.ID(), statusNoSpace, 0, nil)
			return
		}
		copy(s.pool.bytes(ext), v)
		key := string(req.Key())
		if old := s.entries[key]; old != nil {
			old.stale = true
			s.releaseIfUnpinned(old)
		}
		s.entries[key] = &entry{extent: ext}
		s.respond(c, req.ID(), statusOK, 0, nil)
	}
}

// respond posts write (if not nil) and the response {id, status, n} in
// one call. The response is sent inline: the device copies it at post
// time, so the one staging buffer is free again at once. It returns how
// many work requests were posted; a refused post ends the connection
// (the send-queue accounting makes it impossible short of a bug).
func (s *Server) respond(c *conn, id uint32, status uint8, n int, write *verbs.SendWR) int {
	c.respBuf.Set(id, status, n)
	var wrs [2]verbs.SendWR
	list := wrs[:0]
	if write != nil {
		list = append(list, *write)
	}
	list = append(list, verbs.SendWR{WRID: uint64(id), Opcode: verbs.WRSend,
		Flags:  verbs.SendSignaled | verbs.SendInline,
		SGList: []verbs.SGE{c.respMR.SGE(0, responseLen)}})
	posted, err := c.qp.PostSend(list)
	c.sending += posted
	if err != nil {
		c.fail()
	}
	return posted
}

// unpin releases the extent the oldest WRITE in flight on c read: send
// completions come back in posting order (IBTA §10.8.3), failed or not.
func (s *Server) unpin(c *conn) {
	if len(c.pinned) == 0 {
		return
	}
	e := c.pinned[0]
	c.pinned[0] = nil
	c.pinned = c.pinned[1:]
	e.pins--
	s.releaseIfUnpinned(e)
}

// releaseIfUnpinned frees a replaced entry's extent once no WRITE reads
// it any more.
func (s *Server) releaseIfUnpinned(e *entry) {
	if e.stale && e.pins == 0 {
		s.pool.release(e.extent)
		e.extent = extent{}
	}
}

// fail stops serving c: its queued requests are dropped and its receives
// are not re-posted.
func (c *conn) fail() {
	c.failed = true
	c.queued = nil
}
