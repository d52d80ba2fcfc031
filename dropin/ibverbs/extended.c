//go:build cgo && linux

/*
 * The extended CQ and QP: ibv_create_cq_ex with its polling functions
 * (ibv_start_poll, ibv_next_poll, ibv_end_poll, ibv_wc_read_*), and
 * ibv_create_qp_ex with the work request builders (ibv_wr_start,
 * ibv_wr_send, ibv_wr_set_sge, ..., ibv_wr_complete). The header's inline
 * functions call through the function pointers set here, as they do into
 * rdma-core's userspace rxe provider (providers/rxe/rxe.c), whose rules
 * these follow: the same completion fields, the same send opcodes per QP
 * type, the same errors.
 *
 * rxe builds each WR straight into the send queue it shares with the
 * kernel and makes the batch visible at ibv_wr_complete. Here the
 * builders collect the batch in the QP's own arrays and ibv_wr_complete
 * hands the chain to the model (rs_wr_complete), which posts all of it or
 * none: ENOSPC when the queue has no room for it all (as rxe's builders
 * answer a full queue), or the errno ibv_post_send would give the first
 * WR the device refuses.
 */

#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "glue.h"
#include "_cgo_export.h"
#include "calls.h"

/* ---- extended CQs ---- */

/* The completion fields rxe's provider can report (RXE_SUP_WC_FLAGS):
 * no timestamps, VLANs, flow tags or tag matching. */
#define RS_SUP_WC_FLAGS (IBV_WC_EX_WITH_BYTE_LEN | IBV_WC_EX_WITH_IMM |	\
			 IBV_WC_EX_WITH_QP_NUM | IBV_WC_EX_WITH_SRC_QP |	\
			 IBV_WC_EX_WITH_SLID | IBV_WC_EX_WITH_SL |		\
			 IBV_WC_EX_WITH_DLID_PATH_BITS)

/* An extended CQ: the ibv_cq_ex the program sees, whose first members are
 * an ibv_cq's (so ibv_cq_ex_to_cq, ibv_poll_cq and ibv_destroy_cq work on
 * it), and the completion the current poll is at. */
struct rs_cq_ex {
	struct ibv_cq_ex cq;
	struct ibv_wc wc;
};

static struct rs_cq_ex *to_rs_cq_ex(struct ibv_cq_ex *cq)
{
	return container_of(cq, struct rs_cq_ex, cq);
}

/* cq_take moves the CQ's next completion, if any, into the poll's
 * current one. A completion is taken from the model when the poll
 * reaches it (rxe frees its slot at the next next_poll or end_poll). */
static int cq_take(struct ibv_cq_ex *current)
{
	struct rs_cq_ex *c = to_rs_cq_ex(current);
	int n = rs_poll_cq(c->cq.handle, 1, &c->wc);

	if (n < 0) {
		errno = -n;
		return errno;
	}
	if (n == 0) {
		errno = ENOENT;
		return ENOENT;
	}
	c->cq.status = c->wc.status;
	c->cq.wr_id = c->wc.wr_id;
	return 0;
}

/* ibv_start_poll: the first completion, or ENOENT when there is none
 * (the program then does not call ibv_end_poll). attr is not read, as in
 * rxe. */
static int cq_start_poll(struct ibv_cq_ex *current, struct ibv_poll_cq_attr *attr)
{
	(void)attr;
	return cq_take(current);
}

/* ibv_next_poll: the next completion, or ENOENT; either way the program
 * ends the poll with ibv_end_poll. */
static int cq_next_poll(struct ibv_cq_ex *current)
{
	return cq_take(current);
}

/* ibv_end_poll: nothing is held between the calls here (the model's
 * lock is taken per completion). */
static void cq_end_poll(struct ibv_cq_ex *current)
{
	(void)current;
}

static enum ibv_wc_opcode cq_read_opcode(struct ibv_cq_ex *current)
{
	return to_rs_cq_ex(current)->wc.opcode;
}

static uint32_t cq_read_vendor_err(struct ibv_cq_ex *current)
{
	return to_rs_cq_ex(current)->wc.vendor_err;
}

static unsigned int cq_read_wc_flags(struct ibv_cq_ex *current)
{
	return to_rs_cq_ex(current)->wc.wc_flags;
}

static uint32_t cq_read_byte_len(struct ibv_cq_ex *current)
{
	return to_rs_cq_ex(current)->wc.byte_len;
}

/* The immediate data in network order; for a SEND with invalidate, the
 * invalidated R_Key, which shares its place in the completion. */
static __be32 cq_read_imm_data(struct ibv_cq_ex *current)
{
	return to_rs_cq_ex(current)->wc.imm_data;
}

static uint32_t cq_read_qp_num(struct ibv_cq_ex *current)
{
	return to_rs_cq_ex(current)->wc.qp_num;
}

static uint32_t cq_read_src_qp(struct ibv_cq_ex *current)
{
	return to_rs_cq_ex(current)->wc.src_qp;
}

static uint32_t cq_read_slid(struct ibv_cq_ex *current)
{
	return to_rs_cq_ex(current)->wc.slid;
}

static uint8_t cq_read_sl(struct ibv_cq_ex *current)
{
	return to_rs_cq_ex(current)->wc.sl;
}

static uint8_t cq_read_dlid_path_bits(struct ibv_cq_ex *current)
{
	return to_rs_cq_ex(current)->wc.dlid_path_bits;
}

/* rs_create_cq_ex_op is the context's create_cq_ex. As rxe: fields it
 * cannot report (a timestamp, say) are EOPNOTSUPP, and so are the
 * attributes libibverbs' command does not know; a read_* function is set
 * only for a field the program asked for (calling one it did not ask for
 * calls NULL, as on rxe). */
struct ibv_cq_ex *rs_create_cq_ex_op(struct ibv_context *context,
				     struct ibv_cq_init_attr_ex *attr)
{
	struct rs_cq_ex *c;
	struct ibv_cq *cq;
	int err;

	if (!context || !attr) {
		errno = EINVAL;
		return NULL;
	}
	if ((attr->wc_flags & ~(uint64_t)RS_SUP_WC_FLAGS) ||
	    (attr->comp_mask & ~(uint32_t)(IBV_CQ_INIT_ATTR_MASK_FLAGS | IBV_CQ_INIT_ATTR_MASK_PD))) {
		errno = EOPNOTSUPP;
		return NULL;
	}
	/* The kernel's rxe takes no CQ creation flags: ignoring overruns is
	 * refused; single-threaded use is a hint libibverbs keeps. */
	if ((attr->comp_mask & IBV_CQ_INIT_ATTR_MASK_FLAGS) &&
	    (attr->flags & IBV_CREATE_CQ_ATTR_IGNORE_OVERRUN)) {
		errno = EOPNOTSUPP;
		return NULL;
	}
	c = calloc(1, sizeof(*c));
	if (!c) {
		errno = ENOMEM;
		return NULL;
	}
	cq = ibv_cq_ex_to_cq(&c->cq);
	err = rs_cq_init(cq, context, attr->cqe, attr->channel, attr->comp_vector, attr->cq_context);
	if (err) {
		free(c);
		errno = err;
		return NULL;
	}

	c->cq.start_poll = cq_start_poll;
	c->cq.next_poll = cq_next_poll;
	c->cq.end_poll = cq_end_poll;
	c->cq.read_opcode = cq_read_opcode;
	c->cq.read_vendor_err = cq_read_vendor_err;
	c->cq.read_wc_flags = cq_read_wc_flags;
	if (attr->wc_flags & IBV_WC_EX_WITH_BYTE_LEN)
		c->cq.read_byte_len = cq_read_byte_len;
	if (attr->wc_flags & IBV_WC_EX_WITH_IMM)
		c->cq.read_imm_data = cq_read_imm_data;
	if (attr->wc_flags & IBV_WC_EX_WITH_QP_NUM)
		c->cq.read_qp_num = cq_read_qp_num;
	if (attr->wc_flags & IBV_WC_EX_WITH_SRC_QP)
		c->cq.read_src_qp = cq_read_src_qp;
	if (attr->wc_flags & IBV_WC_EX_WITH_SLID)
		c->cq.read_slid = cq_read_slid;
	if (attr->wc_flags & IBV_WC_EX_WITH_SL)
		c->cq.read_sl = cq_read_sl;
	if (attr->wc_flags & IBV_WC_EX_WITH_DLID_PATH_BITS)
		c->cq.read_dlid_path_bits = cq_read_dlid_path_bits;
	return &c->cq;
}

/* ---- extended QPs: the work request builders ---- */

/* The send opcodes each QP type may build (rxe's
 * RXE_SUP_*_QP_SEND_OPS_FLAGS in the rdma-core Debian 12 ships, 44.0).
 * It takes ATOMIC WRITE on RC, which Linux 6.1's rxe cannot carry: the
 * QP is made, and a batch with one fails at ibv_wr_complete (EINVAL, the
 * model's answer to an opcode it does not have; the 6.1 kernel would
 * fail the WR at the device instead). */
#define RS_RC_SEND_OPS (IBV_QP_EX_WITH_RDMA_WRITE | IBV_QP_EX_WITH_RDMA_WRITE_WITH_IMM |	\
			IBV_QP_EX_WITH_SEND | IBV_QP_EX_WITH_SEND_WITH_IMM |		\
			IBV_QP_EX_WITH_RDMA_READ | IBV_QP_EX_WITH_ATOMIC_CMP_AND_SWP |	\
			IBV_QP_EX_WITH_ATOMIC_FETCH_AND_ADD | IBV_QP_EX_WITH_LOCAL_INV |	\
			IBV_QP_EX_WITH_BIND_MW | IBV_QP_EX_WITH_SEND_WITH_INV |		\
			IBV_QP_EX_WITH_ATOMIC_WRITE)
#define RS_UC_SEND_OPS (IBV_QP_EX_WITH_RDMA_WRITE | IBV_QP_EX_WITH_RDMA_WRITE_WITH_IMM |	\
			IBV_QP_EX_WITH_SEND | IBV_QP_EX_WITH_SEND_WITH_IMM |		\
			IBV_QP_EX_WITH_BIND_MW | IBV_QP_EX_WITH_SEND_WITH_INV)
#define RS_UD_SEND_OPS (IBV_QP_EX_WITH_SEND | IBV_QP_EX_WITH_SEND_WITH_IMM)

static struct rs_qp *to_rs_qp(struct ibv_qp_ex *qpx)
{
	return container_of(qpx, struct rs_qp, qpx);
}

/* grow makes room for one more element of size sz in *arr (holding *n
 * of *cap), doubling it; 0, or ENOMEM. */
static int grow(void **arr, size_t *cap, size_t n, size_t sz)
{
	void *p;
	size_t c;

	if (n < *cap)
		return 0;
	c = *cap ? 2 * *cap : 8;
	p = realloc(*arr, c * sz);
	if (!p)
		return ENOMEM;
	*arr = p;
	*cap = c;
	return 0;
}

/* build starts the batch's next WR with the QP's wr_id and wr_flags and
 * returns it, or NULL once the batch has failed. */
static struct ibv_send_wr *build(struct ibv_qp_ex *qpx, enum ibv_wr_opcode opcode)
{
	struct rs_batch *b = &to_rs_qp(qpx)->batch;
	struct rs_built *w;

	if (b->err || !b->open)
		return NULL;
	b->err = grow((void **)&b->wr, &b->cap, b->n, sizeof(*b->wr));
	if (b->err)
		return NULL;
	w = &b->wr[b->n++];
	memset(w, 0, sizeof(*w));
	w->wr.wr_id = qpx->wr_id;
	w->wr.send_flags = qpx->wr_flags;
	w->wr.opcode = opcode;
	return &w->wr;
}

/* last is the WR the setters (ibv_wr_set_*) adjust: the one built last,
 * or NULL once the batch has failed. A setter before any builder is the
 * program's mistake (rxe would write into the slot before the batch):
 * the batch fails with EINVAL. */
static struct rs_built *last(struct ibv_qp_ex *qpx)
{
	struct rs_batch *b = &to_rs_qp(qpx)->batch;

	if (b->err || !b->open)
		return NULL;
	if (!b->n) {
		b->err = EINVAL;
		return NULL;
	}
	return &b->wr[b->n - 1];
}

static void wr_send(struct ibv_qp_ex *qpx)
{
	build(qpx, IBV_WR_SEND);
}

static void wr_send_imm(struct ibv_qp_ex *qpx, __be32 imm_data)
{
	struct ibv_send_wr *wr = build(qpx, IBV_WR_SEND_WITH_IMM);

	if (wr)
		wr->imm_data = imm_data;
}

static void wr_send_inv(struct ibv_qp_ex *qpx, uint32_t invalidate_rkey)
{
	struct ibv_send_wr *wr = build(qpx, IBV_WR_SEND_WITH_INV);

	if (wr)
		wr->invalidate_rkey = invalidate_rkey;
}

static void wr_rdma_write(struct ibv_qp_ex *qpx, uint32_t rkey, uint64_t remote_addr)
{
	struct ibv_send_wr *wr = build(qpx, IBV_WR_RDMA_WRITE);

	if (wr) {
		wr->wr.rdma.rkey = rkey;
		wr->wr.rdma.remote_addr = remote_addr;
	}
}

static void wr_rdma_write_imm(struct ibv_qp_ex *qpx, uint32_t rkey, uint64_t remote_addr,
			      __be32 imm_data)
{
	struct ibv_send_wr *wr = build(qpx, IBV_WR_RDMA_WRITE_WITH_IMM);

	if (wr) {
		wr->wr.rdma.rkey = rkey;
		wr->wr.rdma.remote_addr = remote_addr;
		wr->imm_data = imm_data;
	}
}

static void wr_rdma_read(struct ibv_qp_ex *qpx, uint32_t rkey, uint64_t remote_addr)
{
	struct ibv_send_wr *wr = build(qpx, IBV_WR_RDMA_READ);

	if (wr) {
		wr->wr.rdma.rkey = rkey;
		wr->wr.rdma.remote_addr = remote_addr;
	}
}

static void wr_atomic_cmp_swp(struct ibv_qp_ex *qpx, uint32_t rkey, uint64_t remote_addr,
			      uint64_t compare, uint64_t swap)
{
	struct ibv_send_wr *wr = build(qpx, IBV_WR_ATOMIC_CMP_AND_SWP);

	if (wr) {
		wr->wr.atomic.rkey = rkey;
		wr->wr.atomic.remote_addr = remote_addr;
		wr->wr.atomic.compare_add = compare;
		wr->wr.atomic.swap = swap;
	}
}

static void wr_atomic_fetch_add(struct ibv_qp_ex *qpx, uint32_t rkey, uint64_t remote_addr,
				uint64_t add)
{
	struct ibv_send_wr *wr = build(qpx, IBV_WR_ATOMIC_FETCH_AND_ADD);

	if (wr) {
		wr->wr.atomic.rkey = rkey;
		wr->wr.atomic.remote_addr = remote_addr;
		wr->wr.atomic.compare_add = add;
	}
}

/* ATOMIC WRITE: built as rxe builds it (8 bytes from atomic_wr), and
 * refused when the batch is posted (see RS_RC_SEND_OPS). */
static void wr_atomic_write(struct ibv_qp_ex *qpx, uint32_t rkey, uint64_t remote_addr,
			    const void *atomic_wr)
{
	struct ibv_send_wr *wr = build(qpx, IBV_WR_ATOMIC_WRITE);

	(void)atomic_wr;
	if (wr) {
		wr->wr.rdma.rkey = rkey;
		wr->wr.rdma.remote_addr = remote_addr;
	}
}

static void wr_local_inv(struct ibv_qp_ex *qpx, uint32_t invalidate_rkey)
{
	struct ibv_send_wr *wr = build(qpx, IBV_WR_LOCAL_INV);

	if (wr)
		wr->invalidate_rkey = invalidate_rkey;
}

static void wr_bind_mw(struct ibv_qp_ex *qpx, struct ibv_mw *mw, uint32_t rkey,
		       const struct ibv_mw_bind_info *info)
{
	struct ibv_send_wr *wr = build(qpx, IBV_WR_BIND_MW);

	if (!wr)
		return;
	if (!info) {
		to_rs_qp(qpx)->batch.err = EINVAL;
		return;
	}
	wr->bind_mw.mw = mw;
	wr->bind_mw.rkey = rkey;
	wr->bind_mw.bind_info = *info;
}

/* ibv_wr_set_ud_addr: where a UD SEND goes. */
static void wr_set_ud_addr(struct ibv_qp_ex *qpx, struct ibv_ah *ah, uint32_t remote_qpn,
			   uint32_t remote_qkey)
{
	struct rs_built *w = last(qpx);

	if (!w)
		return;
	w->wr.wr.ud.ah = ah;
	w->wr.wr.ud.remote_qpn = remote_qpn;
	w->wr.wr.ud.remote_qkey = remote_qkey;
}

/* add_sges appends n SGEs to the batch for the WR w, replacing any it
 * had (a setter called twice keeps the second, as rxe overwrites). */
static void add_sges(struct ibv_qp_ex *qpx, struct rs_built *w, size_t n,
		     const struct ibv_sge *sg)
{
	struct rs_batch *b = &to_rs_qp(qpx)->batch;

	w->sge_at = b->nsge;
	w->num_sge = 0;
	w->inline_data = 0;
	for (size_t i = 0; i < n; i++) {
		b->err = grow((void **)&b->sge, &b->sgecap, b->nsge, sizeof(*b->sge));
		if (b->err)
			return;
		b->sge[b->nsge++] = sg[i];
		w->num_sge++;
	}
}

/* ibv_wr_set_sge: one SGE; a length of 0 makes a message of no bytes
 * (no SGE), as rxe builds it. */
static void wr_set_sge(struct ibv_qp_ex *qpx, uint32_t lkey, uint64_t addr, uint32_t length)
{
	struct rs_built *w = last(qpx);
	struct ibv_sge sge = { .addr = addr, .length = length, .lkey = lkey };

	if (w)
		add_sges(qpx, w, length ? 1 : 0, &sge);
}

/* ibv_wr_set_sge_list: more SGEs than the QP's max_send_sge fail the
 * batch with ENOSPC, as rxe. */
static void wr_set_sge_list(struct ibv_qp_ex *qpx, size_t num_sge, const struct ibv_sge *sg_list)
{
	struct rs_qp *q = to_rs_qp(qpx);
	struct rs_built *w = last(qpx);

	if (!w)
		return;
	if (num_sge > q->max_send_sge) {
		q->batch.err = ENOSPC;
		return;
	}
	if (num_sge && !sg_list) {
		q->batch.err = EINVAL;
		return;
	}
	add_sges(qpx, w, num_sge, sg_list);
}

/* add_inline copies the program's buffers into the batch (they may be
 * reused as soon as the setter returns) as one SGE over the copy, marked
 * inline. More than the QP's max_inline_data fails the batch with ENOSPC,
 * as rxe. The WR carries IBV_SEND_INLINE whatever wr_flags said: the data
 * is in the request now, not in registered memory. */
static void add_inline(struct ibv_qp_ex *qpx, size_t num_buf, const struct ibv_data_buf *buf)
{
	struct rs_qp *q = to_rs_qp(qpx);
	struct rs_batch *b = &q->batch;
	struct rs_built *w = last(qpx);
	size_t total = 0, at;

	if (!w)
		return;
	for (size_t i = 0; i < num_buf; i++) {
		if (buf[i].length && !buf[i].addr) {
			b->err = EINVAL; /* where libibverbs' memcpy would crash */
			return;
		}
		if (buf[i].length > q->max_inline_data - total) {
			b->err = ENOSPC;
			return;
		}
		total += buf[i].length;
	}
	at = b->ninl;
	for (size_t i = 0; i < num_buf; i++) {
		if (!buf[i].length)
			continue;
		while (b->ninl + buf[i].length > b->inlcap) {
			b->err = grow((void **)&b->inl, &b->inlcap, b->inlcap, 1);
			if (b->err)
				return;
		}
		memcpy(b->inl + b->ninl, buf[i].addr, buf[i].length);
		b->ninl += buf[i].length;
	}
	/* The SGE's address is an offset into b->inl until ibv_wr_complete
	 * (the buffer may move as it grows). */
	struct ibv_sge sge = { .addr = at, .length = (uint32_t)total };

	add_sges(qpx, w, total ? 1 : 0, &sge);
	w->inline_data = 1;
	w->wr.send_flags |= IBV_SEND_INLINE;
}

static void wr_set_inline_data(struct ibv_qp_ex *qpx, void *addr, size_t length)
{
	struct ibv_data_buf buf = { .addr = addr, .length = length };

	add_inline(qpx, 1, &buf);
}

static void wr_set_inline_data_list(struct ibv_qp_ex *qpx, size_t num_buf,
				    const struct ibv_data_buf *buf_list)
{
	if (num_buf && !buf_list) {
		to_rs_qp(qpx)->batch.err = EINVAL;
		return;
	}
	add_inline(qpx, num_buf, buf_list);
}

/* ibv_wr_start: a new batch. A QP builds one batch at a time, as rxe
 * holds its send queue's lock from ibv_wr_start to ibv_wr_complete or
 * ibv_wr_abort: another thread's ibv_wr_start waits for the batch to
 * end (whichever thread ends it). The same thread starting again drops
 * the batch it had, where rxe's spinlock would spin for ever. */
static void wr_start(struct ibv_qp_ex *qpx)
{
	struct rs_qp *q = to_rs_qp(qpx);
	pthread_t self = pthread_self();

	pthread_mutex_lock(&q->batch_mu);
	while (q->building && !pthread_equal(q->owner, self))
		pthread_cond_wait(&q->batch_free, &q->batch_mu);
	q->building = 1;
	q->owner = self;
	pthread_mutex_unlock(&q->batch_mu);
	q->batch.n = q->batch.nsge = q->batch.ninl = 0;
	q->batch.err = 0;
	q->batch.open = 1;
}

/* building says whether a batch is open (ibv_wr_start came first). */
static int building(struct rs_qp *q)
{
	int b;

	pthread_mutex_lock(&q->batch_mu);
	b = q->building;
	pthread_mutex_unlock(&q->batch_mu);
	return b;
}

/* end_batch drops the batch and lets the next one start. */
static void end_batch(struct rs_qp *q)
{
	q->batch.n = 0;
	q->batch.open = 0;
	pthread_mutex_lock(&q->batch_mu);
	q->building = 0;
	pthread_cond_broadcast(&q->batch_free);
	pthread_mutex_unlock(&q->batch_mu);
}

/* ibv_wr_complete: posts the batch (all of it, or nothing and an errno:
 * the first a builder met, or the model's). Without ibv_wr_start first
 * it is EINVAL (rxe would post whatever its queue held). */
static int wr_complete(struct ibv_qp_ex *qpx)
{
	struct rs_qp *q = to_rs_qp(qpx);
	struct rs_batch *b = &q->batch;
	int err = b->err;

	if (!building(q))
		return EINVAL;
	if (!err && b->n) {
		for (size_t i = 0; i < b->n; i++) {
			struct rs_built *w = &b->wr[i];

			w->wr.next = i + 1 < b->n ? &b->wr[i + 1].wr : NULL;
			w->wr.num_sge = (int)w->num_sge;
			w->wr.sg_list = w->num_sge ? &b->sge[w->sge_at] : NULL;
			if (w->inline_data && w->num_sge)
				w->wr.sg_list[0].addr = (uintptr_t)(b->inl + w->wr.sg_list[0].addr);
		}
		err = rs_wr_complete(q->qpx.qp_base.handle, &b->wr[0].wr, (int)b->n);
	}
	end_batch(q);
	return err;
}

/* ibv_wr_abort: the batch is dropped. */
static void wr_abort(struct ibv_qp_ex *qpx)
{
	struct rs_qp *q = to_rs_qp(qpx);

	if (building(q))
		end_batch(q);
}

/* rs_qp_ex_init gives q the builders for the send opcodes in ops (the
 * init attributes' send_ops_flags) and the setters. An opcode not asked
 * for has no builder (NULL, as on rxe). */
void rs_qp_ex_init(struct rs_qp *q, uint64_t ops)
{
	struct ibv_qp_ex *x = &q->qpx;

	if (ops & IBV_QP_EX_WITH_SEND)
		x->wr_send = wr_send;
	if (ops & IBV_QP_EX_WITH_SEND_WITH_IMM)
		x->wr_send_imm = wr_send_imm;
	if (ops & IBV_QP_EX_WITH_SEND_WITH_INV)
		x->wr_send_inv = wr_send_inv;
	if (ops & IBV_QP_EX_WITH_RDMA_WRITE)
		x->wr_rdma_write = wr_rdma_write;
	if (ops & IBV_QP_EX_WITH_RDMA_WRITE_WITH_IMM)
		x->wr_rdma_write_imm = wr_rdma_write_imm;
	if (ops & IBV_QP_EX_WITH_RDMA_READ)
		x->wr_rdma_read = wr_rdma_read;
	if (ops & IBV_QP_EX_WITH_ATOMIC_CMP_AND_SWP)
		x->wr_atomic_cmp_swp = wr_atomic_cmp_swp;
	if (ops & IBV_QP_EX_WITH_ATOMIC_FETCH_AND_ADD)
		x->wr_atomic_fetch_add = wr_atomic_fetch_add;
	if (ops & IBV_QP_EX_WITH_LOCAL_INV)
		x->wr_local_inv = wr_local_inv;
	if (ops & IBV_QP_EX_WITH_ATOMIC_WRITE)
		x->wr_atomic_write = wr_atomic_write;
	if (ops & IBV_QP_EX_WITH_BIND_MW)
		x->wr_bind_mw = wr_bind_mw;
	x->wr_set_ud_addr = wr_set_ud_addr;
	x->wr_set_sge = wr_set_sge;
	x->wr_set_sge_list = wr_set_sge_list;
	x->wr_set_inline_data = wr_set_inline_data;
	x->wr_set_inline_data_list = wr_set_inline_data_list;
	x->wr_start = wr_start;
	x->wr_complete = wr_complete;
	x->wr_abort = wr_abort;
}

/* rs_create_qp_ex_op is the context's create_qp_ex (ibv_create_qp_ex
 * with more than IBV_QP_INIT_ATTR_PD; with only that, the header calls
 * ibv_create_qp). As rxe's check_qp_init_attr: attributes beyond the PD,
 * creation flags and send opcodes, any creation flag, and send opcodes
 * the QP type does not have are EOPNOTSUPP. */
struct ibv_qp *rs_create_qp_ex_op(struct ibv_context *context, struct ibv_qp_init_attr_ex *attr)
{
	uint64_t ops = 0;

	if (!context || !attr) {
		errno = EINVAL;
		return NULL;
	}
	if ((attr->comp_mask & ~(uint32_t)(IBV_QP_INIT_ATTR_PD | IBV_QP_INIT_ATTR_CREATE_FLAGS |
					   IBV_QP_INIT_ATTR_SEND_OPS_FLAGS)) ||
	    ((attr->comp_mask & IBV_QP_INIT_ATTR_CREATE_FLAGS) && attr->create_flags)) {
		errno = EOPNOTSUPP;
		return NULL;
	}
	if (attr->comp_mask & IBV_QP_INIT_ATTR_SEND_OPS_FLAGS) {
		uint64_t sup;

		switch (attr->qp_type) {
		case IBV_QPT_RC:
			sup = RS_RC_SEND_OPS;
			break;
		case IBV_QPT_UC:
			sup = RS_UC_SEND_OPS;
			break;
		case IBV_QPT_UD:
			sup = RS_UD_SEND_OPS;
			break;
		default:
			sup = 0;
			break;
		}
		if (!sup || (attr->send_ops_flags & ~sup)) {
			errno = EOPNOTSUPP;
			return NULL;
		}
		ops = attr->send_ops_flags;
	}
	/* The command needs a PD for every QP type the model has. */
	if (!(attr->comp_mask & IBV_QP_INIT_ATTR_PD) || !attr->pd || attr->pd->context != context) {
		errno = EINVAL;
		return NULL;
	}
	/* The attributes up to sq_sig_all are an ibv_qp_init_attr's. */
	return rs_new_qp(attr->pd, (struct ibv_qp_init_attr *)attr, 1,
			 (attr->comp_mask & IBV_QP_INIT_ATTR_SEND_OPS_FLAGS) != 0, ops);
}
