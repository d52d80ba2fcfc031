//go:build cgo && linux

/*
 * The C side of the drop-in libibverbs.so.1: the structures
 * <infiniband/verbs.h> defines, allocated and filled here, and the few
 * helpers the Go side calls to reach the unions cgo cannot name.
 */
#ifndef ROCESIM_GLUE_H
#define ROCESIM_GLUE_H

#include <pthread.h>
#include <stddef.h>
#include <stdint.h>
#include <infiniband/verbs.h>

#define container_of(ptr, type, member) \
	((type *)((char *)(ptr) - offsetof(type, member)))

/* The union parts of an ibv_send_wr, flattened for Go. */
struct rs_send_wr_ext {
	uint64_t remote_addr;
	uint32_t rkey;
	uint64_t compare_add;
	uint64_t swap;
	uint32_t ah;		/* the AH's handle; 0 for none */
	uint32_t remote_qpn;
	uint32_t remote_qkey;
	uint32_t imm_data;	/* in host order */
	uint32_t invalidate_rkey;
	/* IBV_WR_BIND_MW: the window, its new R_Key, the region. */
	uint32_t mw;		/* the MW's handle */
	uint32_t bind_rkey;
	uint32_t bind_mr;	/* the MR's handle; 0 for none (an unbind) */
	uint64_t bind_addr;
	uint64_t bind_length;
	unsigned int bind_access;
};

/* A work request an extended QP's builders made (extended.c): the WR,
 * and where its SGEs are in the batch's array until ibv_wr_complete
 * links them (the arrays move as they grow). */
struct rs_built {
	struct ibv_send_wr wr;
	size_t sge_at, num_sge;
	int inline_data;	/* its one SGE's address is an offset into inl */
};

/* The WRs built since ibv_wr_start. */
struct rs_batch {
	struct rs_built *wr;
	size_t n, cap;
	struct ibv_sge *sge;
	size_t nsge, sgecap;
	uint8_t *inl;		/* the inline data, copied */
	size_t ninl, inlcap;
	int err;		/* the first error a builder met */
	int open;		/* set by ibv_wr_start; the builders need it */
};

/* A QP: the ibv_qp_ex whose first member is the ibv_qp the program sees
 * (every QP is allocated so, so that ibv_qp_to_qp_ex can tell), then
 * what an extended one keeps for its builders. */
struct rs_qp {
	struct ibv_qp_ex qpx;
	int extended;		/* made by ibv_create_qp_ex */
	uint32_t max_send_sge, max_inline_data;
	/* One batch at a time: building is set from ibv_wr_start to its
	 * ibv_wr_complete or ibv_wr_abort (which any thread may call, as
	 * rxe's spinlock lets it), by the thread owner; another thread's
	 * ibv_wr_start waits on batch_free. */
	pthread_mutex_t batch_mu;
	pthread_cond_t batch_free;
	int building;
	pthread_t owner;
	struct rs_batch batch;
};

struct ibv_qp *rs_new_qp(struct ibv_pd *pd, struct ibv_qp_init_attr *attr, int extended,
			 int builders, uint64_t ops);
void rs_qp_ex_init(struct rs_qp *q, uint64_t ops);
int rs_cq_init(struct ibv_cq *cq, struct ibv_context *context, int cqe,
	       struct ibv_comp_channel *channel, int comp_vector, void *cq_context);
struct ibv_cq_ex *rs_create_cq_ex_op(struct ibv_context *context, struct ibv_cq_init_attr_ex *attr);
struct ibv_qp *rs_create_qp_ex_op(struct ibv_context *context, struct ibv_qp_init_attr_ex *attr);

void rs_send_wr_ext(const struct ibv_send_wr *wr, int ud, struct rs_send_wr_ext *out);
void rs_wc_set_imm(struct ibv_wc *wc, uint32_t imm, int invalidated);
void rs_set_async_event(struct ibv_async_event *ev, void *element, int port, int type);

/* The calls of the Go side in progress (calls.h, threads.go): rs_entry
 * counts one in before the call, rs_leave out once it is back. */
extern int rs_inside;

static inline void rs_entry(void)
{
	__atomic_add_fetch(&rs_inside, 1, __ATOMIC_SEQ_CST);
}

static inline void rs_leave(void)
{
	__atomic_sub_fetch(&rs_inside, 1, __ATOMIC_SEQ_CST);
}

#endif
