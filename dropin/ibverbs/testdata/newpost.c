/*
 * newpost [GID [model]]: the extended verbs, run the same on the model and on real
 * rxe (conformance TestNewPostRxe compares the two outputs line by line):
 * ibv_create_cq_ex and ibv_create_qp_ex with what they accept and refuse,
 * then two RC QPs (and two UD QPs) of one device connected to each other,
 * driven only through the work request builders (ibv_wr_*) and polled only
 * through ibv_start_poll / ibv_next_poll / ibv_end_poll and the
 * ibv_wc_read_* functions.
 *
 * Each case prints one line, "name result", with nothing that differs
 * between two correct devices (no QPNs, keys or addresses: a QPN is
 * printed as "peer" when it is the one expected). Prints "newpost done"
 * at the end and exits 0; a step the cases depend on failing prints what
 * and exits 1.
 */
#include <endian.h>
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <infiniband/verbs.h>

#define SIZE 4096

static void die(const char *what)
{
	printf("newpost: %s failed: %s\n", what, strerror(errno));
	exit(1);
}

static const char *err_name(int e)
{
	switch (e) {
	case 0: return "0";
	case EINVAL: return "EINVAL";
	case ENOSPC: return "ENOSPC";
	case ENOMEM: return "ENOMEM";
	case EOPNOTSUPP: return "EOPNOTSUPP";
	case ENOENT: return "ENOENT";
	default: return strerror(e);
	}
}

/* made prints whether a creation returned an object, or NULL and errno. */
static void made(const char *name, void *obj, int err)
{
	if (obj)
		printf("%s ok\n", name);
	else
		printf("%s NULL %s\n", name, err_name(err));
}

struct end {
	struct ibv_qp *qp;
	struct ibv_qp_ex *x;
	struct ibv_cq_ex *cq;	/* send and receive completions */
	char *buf;
	struct ibv_mr *mr;
};

static struct ibv_context *ctx;
static struct ibv_pd *pd;
static union ibv_gid gid;
static int gid_index;

static struct ibv_cq_ex *cq_ex(void)
{
	struct ibv_cq_init_attr_ex ca = { .cqe = 32, .wc_flags = IBV_WC_STANDARD_FLAGS };
	struct ibv_cq_ex *cq = ibv_create_cq_ex(ctx, &ca);

	if (!cq)
		die("create_cq_ex");
	return cq;
}

static void make_end(struct end *e, enum ibv_qp_type type, uint64_t ops)
{
	struct ibv_qp_init_attr_ex ia = {
		.qp_type = type,
		.cap = { .max_send_wr = 16, .max_recv_wr = 16, .max_send_sge = 2,
			 .max_recv_sge = 2, .max_inline_data = 64 },
		.comp_mask = IBV_QP_INIT_ATTR_PD | IBV_QP_INIT_ATTR_SEND_OPS_FLAGS,
		.send_ops_flags = ops,
		.pd = pd,
	};

	e->cq = cq_ex();
	ia.send_cq = ia.recv_cq = ibv_cq_ex_to_cq(e->cq);
	e->qp = ibv_create_qp_ex(ctx, &ia);
	if (!e->qp)
		die("create_qp_ex");
	e->x = ibv_qp_to_qp_ex(e->qp);
	if (!e->x)
		die("qp_to_qp_ex");
	e->buf = calloc(1, SIZE);
	e->mr = ibv_reg_mr(pd, e->buf, SIZE, IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE |
			   IBV_ACCESS_REMOTE_READ | IBV_ACCESS_REMOTE_ATOMIC);
	if (!e->buf || !e->mr)
		die("reg_mr");
}

static void rc_connect(struct end *e, struct end *peer)
{
	struct ibv_qp_attr a = {
		.qp_state = IBV_QPS_INIT, .port_num = 1,
		.qp_access_flags = IBV_ACCESS_REMOTE_WRITE | IBV_ACCESS_REMOTE_READ |
				   IBV_ACCESS_REMOTE_ATOMIC,
	};

	if (ibv_modify_qp(e->qp, &a, IBV_QP_STATE | IBV_QP_PKEY_INDEX | IBV_QP_PORT |
			  IBV_QP_ACCESS_FLAGS))
		die("modify_qp INIT");
	memset(&a, 0, sizeof(a));
	a.qp_state = IBV_QPS_RTR;
	a.path_mtu = IBV_MTU_1024;
	a.dest_qp_num = peer->qp->qp_num;
	a.rq_psn = 0;
	a.max_dest_rd_atomic = 1;
	a.min_rnr_timer = 12;
	a.ah_attr.is_global = 1;
	a.ah_attr.grh.dgid = gid;
	a.ah_attr.grh.sgid_index = gid_index;
	a.ah_attr.grh.hop_limit = 1;
	a.ah_attr.port_num = 1;
	if (ibv_modify_qp(e->qp, &a, IBV_QP_STATE | IBV_QP_AV | IBV_QP_PATH_MTU |
			  IBV_QP_DEST_QPN | IBV_QP_RQ_PSN | IBV_QP_MAX_DEST_RD_ATOMIC |
			  IBV_QP_MIN_RNR_TIMER))
		die("modify_qp RTR");
	memset(&a, 0, sizeof(a));
	a.qp_state = IBV_QPS_RTS;
	a.timeout = 14;
	a.retry_cnt = 7;
	a.rnr_retry = 7;
	a.max_rd_atomic = 1;
	if (ibv_modify_qp(e->qp, &a, IBV_QP_STATE | IBV_QP_TIMEOUT | IBV_QP_RETRY_CNT |
			  IBV_QP_RNR_RETRY | IBV_QP_SQ_PSN | IBV_QP_MAX_QP_RD_ATOMIC))
		die("modify_qp RTS");
}

static void ud_ready(struct end *e)
{
	struct ibv_qp_attr a = { .qp_state = IBV_QPS_INIT, .port_num = 1, .qkey = 0x11111111 };

	if (ibv_modify_qp(e->qp, &a, IBV_QP_STATE | IBV_QP_PKEY_INDEX | IBV_QP_PORT | IBV_QP_QKEY))
		die("modify_qp UD INIT");
	a.qp_state = IBV_QPS_RTR;
	if (ibv_modify_qp(e->qp, &a, IBV_QP_STATE))
		die("modify_qp UD RTR");
	a.qp_state = IBV_QPS_RTS;
	a.sq_psn = 0;
	if (ibv_modify_qp(e->qp, &a, IBV_QP_STATE | IBV_QP_SQ_PSN))
		die("modify_qp UD RTS");
}

static void recv(struct end *e, uint64_t wr_id, uint32_t off, uint32_t len)
{
	struct ibv_sge sge = { .addr = (uintptr_t)e->buf + off, .length = len, .lkey = e->mr->lkey };
	struct ibv_recv_wr wr = { .wr_id = wr_id, .sg_list = &sge, .num_sge = 1 }, *bad;

	if (ibv_post_recv(e->qp, &wr, &bad))
		die("post_recv");
}

/* qpn names a completion's QP number relative to the ends. */
static const char *qpn(uint32_t n, struct end *a, struct end *b)
{
	static char s[16];

	if (n == a->qp->qp_num)
		return "a";
	if (n == b->qp->qp_num)
		return "b";
	snprintf(s, sizeof(s), "%u", n);
	return s;
}

/* show prints the completion the poll is at, every field the CQ
 * reports. */
static void show(const char *name, struct ibv_cq_ex *cq, struct end *a, struct end *b)
{
	printf("%s wr_id=%" PRIu64 " status=%s opcode=%d byte_len=%u imm=0x%x qp=%s src_qp=%s wc_flags=0x%x sl=%u slid=%u dlid_path_bits=%u vendor_err=%u\n",
	       name, cq->wr_id, ibv_wc_status_str(cq->status), ibv_wc_read_opcode(cq),
	       ibv_wc_read_byte_len(cq), be32toh(ibv_wc_read_imm_data(cq)),
	       qpn(ibv_wc_read_qp_num(cq), a, b), qpn(ibv_wc_read_src_qp(cq), a, b),
	       ibv_wc_read_wc_flags(cq), ibv_wc_read_sl(cq), ibv_wc_read_slid(cq),
	       ibv_wc_read_dlid_path_bits(cq), ibv_wc_read_vendor_err(cq));
}

/* poll_all waits for want completions on cq and prints each (bounded:
 * a completion that never comes is a line saying so), one
 * ibv_start_poll and ibv_end_poll each. */
static void poll_all(const char *name, struct ibv_cq_ex *cq, int want, struct end *a, struct end *b)
{
	struct ibv_poll_cq_attr pa = {};
	int got = 0, ret;
	long spins = 0;

	while (got < want) {
		ret = ibv_start_poll(cq, &pa);
		if (ret == ENOENT) {
			if (++spins > 20000000) {
				printf("%s: %d of %d completions\n", name, got, want);
				return;
			}
			continue;
		}
		if (ret) {
			printf("%s start_poll %s\n", name, err_name(ret));
			return;
		}
		char n[64];

		snprintf(n, sizeof(n), "%s[%d]", name, got++);
		show(n, cq, a, b);
		ibv_end_poll(cq);
	}
}

/* poll_two reads two completions in one poll, the second through
 * ibv_next_poll. It first gives a real device time to have both (the
 * rdma-core Debian 12 ships breaks its CQ when ibv_end_poll follows an
 * ibv_next_poll that found nothing; fixed upstream in 2024-25); the
 * model moves its time as it is polled, so there the second may come
 * only after another poll, and is read so. */
static int wait_start(const char *name, struct ibv_cq_ex *cq, int have)
{
	struct ibv_poll_cq_attr pa = {};
	long spins = 0;

	while (ibv_start_poll(cq, &pa) == ENOENT)
		if (++spins > 20000000) {
			printf("%s: %d of 2 completions\n", name, have);
			return -1;
		}
	return 0;
}

static void poll_two(const char *name, struct ibv_cq_ex *cq, struct end *a, struct end *b)
{
	char n[64];

	usleep(500000);
	if (wait_start(name, cq, 0))
		return;
	snprintf(n, sizeof(n), "%s[0]", name);
	show(n, cq, a, b);
	if (ibv_next_poll(cq) == 0) {
		snprintf(n, sizeof(n), "%s[1]", name);
		show(n, cq, a, b);
		ibv_end_poll(cq);
		return;
	}
	ibv_end_poll(cq);
	if (wait_start(name, cq, 1))
		return;
	snprintf(n, sizeof(n), "%s[1]", name);
	show(n, cq, a, b);
	ibv_end_poll(cq);
}

/* empty says whether the CQ has nothing, as start_poll answers. */
static void empty(const char *name, struct ibv_cq_ex *cq)
{
	struct ibv_poll_cq_attr pa = {};
	int ret = ibv_start_poll(cq, &pa);

	printf("%s start_poll %s\n", name, err_name(ret));
	if (!ret)
		ibv_end_poll(cq);
}

static void creation(void)
{
	struct ibv_cq_init_attr_ex ca;
	struct ibv_cq_ex *cq;

	ca = (struct ibv_cq_init_attr_ex){ .cqe = 4, .wc_flags = IBV_WC_STANDARD_FLAGS };
	errno = 0;
	cq = ibv_create_cq_ex(ctx, &ca);
	made("create_cq_ex(standard fields)", cq, errno);
	if (cq)
		printf("create_cq_ex(standard fields) cqe>=4 %d\n", ibv_cq_ex_to_cq(cq)->cqe >= 4);
	if (cq)
		ibv_destroy_cq(ibv_cq_ex_to_cq(cq));
	static const struct {
		const char *name;
		uint64_t wc_flags;
		uint32_t comp_mask, flags;
	} cqs[] = {
		{ "create_cq_ex(no fields)", 0, 0, 0 },
		{ "create_cq_ex(completion timestamp)", IBV_WC_EX_WITH_COMPLETION_TIMESTAMP, 0, 0 },
		{ "create_cq_ex(wallclock timestamp)", IBV_WC_EX_WITH_COMPLETION_TIMESTAMP_WALLCLOCK, 0, 0 },
		{ "create_cq_ex(cvlan)", IBV_WC_EX_WITH_CVLAN, 0, 0 },
		{ "create_cq_ex(flow tag)", IBV_WC_EX_WITH_FLOW_TAG, 0, 0 },
		{ "create_cq_ex(single threaded)", IBV_WC_STANDARD_FLAGS, IBV_CQ_INIT_ATTR_MASK_FLAGS,
		  IBV_CREATE_CQ_ATTR_SINGLE_THREADED },
		{ "create_cq_ex(ignore overrun)", IBV_WC_STANDARD_FLAGS, IBV_CQ_INIT_ATTR_MASK_FLAGS,
		  IBV_CREATE_CQ_ATTR_IGNORE_OVERRUN },
	};
	for (size_t i = 0; i < sizeof(cqs) / sizeof(cqs[0]); i++) {
		ca = (struct ibv_cq_init_attr_ex){ .cqe = 4, .wc_flags = cqs[i].wc_flags,
						   .comp_mask = cqs[i].comp_mask, .flags = cqs[i].flags };
		errno = 0;
		cq = ibv_create_cq_ex(ctx, &ca);
		made(cqs[i].name, cq, errno);
		if (cq)
			ibv_destroy_cq(ibv_cq_ex_to_cq(cq));
	}

	struct ibv_cq *scq = ibv_create_cq(ctx, 8, NULL, NULL, 0);
	static const struct {
		const char *name;
		enum ibv_qp_type type;
		uint32_t comp_mask;
		uint64_t ops;
		uint32_t create_flags;
	} qps[] = {
		{ "create_qp_ex(RC, PD only)", IBV_QPT_RC, IBV_QP_INIT_ATTR_PD, 0, 0 },
		{ "create_qp_ex(RC, every RC opcode)", IBV_QPT_RC,
		  IBV_QP_INIT_ATTR_PD | IBV_QP_INIT_ATTR_SEND_OPS_FLAGS,
		  IBV_QP_EX_WITH_RDMA_WRITE | IBV_QP_EX_WITH_RDMA_WRITE_WITH_IMM | IBV_QP_EX_WITH_SEND |
		  IBV_QP_EX_WITH_SEND_WITH_IMM | IBV_QP_EX_WITH_RDMA_READ |
		  IBV_QP_EX_WITH_ATOMIC_CMP_AND_SWP | IBV_QP_EX_WITH_ATOMIC_FETCH_AND_ADD |
		  IBV_QP_EX_WITH_LOCAL_INV | IBV_QP_EX_WITH_BIND_MW | IBV_QP_EX_WITH_SEND_WITH_INV, 0 },
		{ "create_qp_ex(RC, ATOMIC WRITE)", IBV_QPT_RC,
		  IBV_QP_INIT_ATTR_PD | IBV_QP_INIT_ATTR_SEND_OPS_FLAGS, IBV_QP_EX_WITH_ATOMIC_WRITE, 0 },
		{ "create_qp_ex(UC, ATOMIC WRITE)", IBV_QPT_UC,
		  IBV_QP_INIT_ATTR_PD | IBV_QP_INIT_ATTR_SEND_OPS_FLAGS, IBV_QP_EX_WITH_ATOMIC_WRITE, 0 },
		{ "create_qp_ex(RC, no opcodes)", IBV_QPT_RC,
		  IBV_QP_INIT_ATTR_PD | IBV_QP_INIT_ATTR_SEND_OPS_FLAGS, 0, 0 },
		{ "create_qp_ex(RC, TSO)", IBV_QPT_RC,
		  IBV_QP_INIT_ATTR_PD | IBV_QP_INIT_ATTR_SEND_OPS_FLAGS, IBV_QP_EX_WITH_TSO, 0 },
		{ "create_qp_ex(UC, RDMA READ)", IBV_QPT_UC,
		  IBV_QP_INIT_ATTR_PD | IBV_QP_INIT_ATTR_SEND_OPS_FLAGS, IBV_QP_EX_WITH_RDMA_READ, 0 },
		{ "create_qp_ex(UC, WRITE and SEND)", IBV_QPT_UC,
		  IBV_QP_INIT_ATTR_PD | IBV_QP_INIT_ATTR_SEND_OPS_FLAGS,
		  IBV_QP_EX_WITH_RDMA_WRITE | IBV_QP_EX_WITH_SEND, 0 },
		{ "create_qp_ex(UD, RDMA WRITE)", IBV_QPT_UD,
		  IBV_QP_INIT_ATTR_PD | IBV_QP_INIT_ATTR_SEND_OPS_FLAGS, IBV_QP_EX_WITH_RDMA_WRITE, 0 },
		{ "create_qp_ex(UD, SEND with immediate)", IBV_QPT_UD,
		  IBV_QP_INIT_ATTR_PD | IBV_QP_INIT_ATTR_SEND_OPS_FLAGS,
		  IBV_QP_EX_WITH_SEND | IBV_QP_EX_WITH_SEND_WITH_IMM, 0 },
		{ "create_qp_ex(RC, creation flag)", IBV_QPT_RC,
		  IBV_QP_INIT_ATTR_PD | IBV_QP_INIT_ATTR_CREATE_FLAGS, 0, IBV_QP_CREATE_SCATTER_FCS },
		{ "create_qp_ex(RC, no creation flags)", IBV_QPT_RC,
		  IBV_QP_INIT_ATTR_PD | IBV_QP_INIT_ATTR_CREATE_FLAGS, 0, 0 },
		{ "create_qp_ex(RC, max TSO header)", IBV_QPT_RC,
		  IBV_QP_INIT_ATTR_PD | IBV_QP_INIT_ATTR_MAX_TSO_HEADER, 0, 0 },
	};
	for (size_t i = 0; i < sizeof(qps) / sizeof(qps[0]); i++) {
		struct ibv_qp_init_attr_ex ia = {
			.qp_type = qps[i].type, .send_cq = scq, .recv_cq = scq,
			.cap = { .max_send_wr = 4, .max_recv_wr = 4, .max_send_sge = 1, .max_recv_sge = 1 },
			.comp_mask = qps[i].comp_mask, .send_ops_flags = qps[i].ops,
			.create_flags = qps[i].create_flags, .pd = pd,
		};
		struct ibv_qp *qp;

		errno = 0;
		qp = ibv_create_qp_ex(ctx, &ia);
		made(qps[i].name, qp, errno);
		if (qp) {
			struct ibv_qp_ex *x = ibv_qp_to_qp_ex(qp);

			printf("%s qp_ex %s", qps[i].name, x ? "yes" : "NULL");
			if (x)
				printf(" send=%d write=%d read=%d send_imm=%d set_sge=%d start=%d",
				       x->wr_send != NULL, x->wr_rdma_write != NULL, x->wr_rdma_read != NULL,
				       x->wr_send_imm != NULL, x->wr_set_sge != NULL, x->wr_start != NULL);
			printf("\n");
			ibv_destroy_qp(qp);
		}
	}
	/* The capacities a QP gets for what it asks (rxe sizes a send WQE
	 * to hold the larger of the SGEs and the inline data, and its
	 * queues to a power of two less one). */
	static const struct ibv_qp_cap caps[] = {
		{ .max_send_wr = 16, .max_recv_wr = 16, .max_send_sge = 2, .max_recv_sge = 2, .max_inline_data = 64 },
		{ .max_send_wr = 1, .max_recv_wr = 1, .max_send_sge = 1, .max_recv_sge = 1 },
		{ .max_send_wr = 100, .max_recv_wr = 5, .max_send_sge = 3, .max_recv_sge = 3, .max_inline_data = 20 },
		{ .max_send_wr = 64, .max_recv_wr = 63, .max_send_sge = 0, .max_recv_sge = 0, .max_inline_data = 0 },
		{ .max_send_wr = 4, .max_recv_wr = 4, .max_send_sge = 1, .max_recv_sge = 1, .max_inline_data = 512 },
	};
	for (size_t i = 0; i < sizeof(caps) / sizeof(caps[0]); i++) {
		struct ibv_qp_init_attr ca = { .qp_type = IBV_QPT_RC, .send_cq = scq, .recv_cq = scq, .cap = caps[i] };
		struct ibv_qp *qp = ibv_create_qp(pd, &ca);
		struct ibv_qp_attr qa;
		struct ibv_qp_init_attr qi;

		printf("caps(wr %u/%u sge %u/%u inline %u)", caps[i].max_send_wr, caps[i].max_recv_wr,
		       caps[i].max_send_sge, caps[i].max_recv_sge, caps[i].max_inline_data);
		if (!qp) {
			printf(" NULL %s\n", err_name(errno));
			continue;
		}
		printf(" got wr %u/%u sge %u/%u inline %u", ca.cap.max_send_wr, ca.cap.max_recv_wr,
		       ca.cap.max_send_sge, ca.cap.max_recv_sge, ca.cap.max_inline_data);
		if (!ibv_query_qp(qp, &qa, IBV_QP_CAP, &qi))
			printf(", query wr %u/%u sge %u/%u inline %u", qi.cap.max_send_wr, qi.cap.max_recv_wr,
			       qi.cap.max_send_sge, qi.cap.max_recv_sge, qi.cap.max_inline_data);
		printf("\n");
		ibv_destroy_qp(qp);
	}
	/* And an SRQ's, and a CQ's. */
	static const struct ibv_srq_attr srqs[] = {
		{ .max_wr = 16, .max_sge = 1 }, { .max_wr = 100, .max_sge = 3 }, { .max_wr = 1, .max_sge = 1 },
	};
	for (size_t i = 0; i < sizeof(srqs) / sizeof(srqs[0]); i++) {
		struct ibv_srq_init_attr si = { .attr = srqs[i] };
		struct ibv_srq *srq = ibv_create_srq(pd, &si);
		struct ibv_srq_attr sa;

		printf("srq caps(wr %u sge %u)", srqs[i].max_wr, srqs[i].max_sge);
		if (!srq) {
			printf(" NULL %s\n", err_name(errno));
			continue;
		}
		printf(" got wr %u sge %u", si.attr.max_wr, si.attr.max_sge);
		if (!ibv_query_srq(srq, &sa)) {
			printf(", query wr %u sge %u limit %u", sa.max_wr, sa.max_sge, sa.srq_limit);
			/* An armed limit may be anything up to what the SRQ holds. */
			struct ibv_srq_attr la = { .srq_limit = sa.max_wr };
			printf(", limit at query's max_wr %s", err_name(ibv_modify_srq(srq, &la, IBV_SRQ_LIMIT)));
			la.srq_limit = sa.max_wr + 1;
			printf(", past it %s", err_name(ibv_modify_srq(srq, &la, IBV_SRQ_LIMIT)));
		}
		printf("\n");
		ibv_destroy_srq(srq);
	}
	static const int cqes[] = { 1, 4, 16, 100 };
	for (size_t i = 0; i < sizeof(cqes) / sizeof(cqes[0]); i++) {
		struct ibv_cq *c = ibv_create_cq(ctx, cqes[i], NULL, NULL, 0);

		printf("cq caps(cqe %d) got %d\n", cqes[i], c ? c->cqe : -1);
		if (c)
			ibv_destroy_cq(c);
	}
	struct ibv_qp_init_attr la = { .qp_type = IBV_QPT_RC, .send_cq = scq, .recv_cq = scq,
		.cap = { .max_send_wr = 4, .max_recv_wr = 4, .max_send_sge = 1, .max_recv_sge = 1 } };
	struct ibv_qp *lq = ibv_create_qp(pd, &la);

	if (!lq)
		die("create_qp");
	printf("qp_to_qp_ex(ibv_create_qp) %s\n", ibv_qp_to_qp_ex(lq) ? "yes" : "NULL");
	ibv_destroy_qp(lq);
	ibv_destroy_cq(scq);
}

static void rc(void)
{
	uint64_t all = IBV_QP_EX_WITH_RDMA_WRITE | IBV_QP_EX_WITH_RDMA_WRITE_WITH_IMM |
		IBV_QP_EX_WITH_SEND | IBV_QP_EX_WITH_SEND_WITH_IMM | IBV_QP_EX_WITH_RDMA_READ |
		IBV_QP_EX_WITH_ATOMIC_CMP_AND_SWP | IBV_QP_EX_WITH_ATOMIC_FETCH_AND_ADD;
	struct end a = {}, b = {};
	struct ibv_qp_ex *x;

	make_end(&a, IBV_QPT_RC, all);
	make_end(&b, IBV_QPT_RC, all);
	x = a.x;

	/* In RESET: a batch the send queue cannot hold fails whole; one it
	 * can is refused by the device (or not) as a post would be. */
	ibv_wr_start(x);
	for (int i = 0; i < 64; i++) {
		x->wr_id = i;
		x->wr_flags = IBV_SEND_SIGNALED;
		ibv_wr_send(x);
		ibv_wr_set_sge(x, a.mr->lkey, (uintptr_t)a.buf, 8);
	}
	printf("reset: 64 SENDs on max_send_wr 16 %s\n", err_name(ibv_wr_complete(x)));

	rc_connect(&a, &b);
	rc_connect(&b, &a);
	empty("rc: nothing yet", a.cq);

	/* SEND of 20 bytes through one SGE. */
	recv(&b, 100, 0, 64);
	strcpy(a.buf, "hello through wr_send");
	ibv_wr_start(x);
	x->wr_id = 1;
	x->wr_flags = IBV_SEND_SIGNALED;
	ibv_wr_send(x);
	ibv_wr_set_sge(x, a.mr->lkey, (uintptr_t)a.buf, 22);
	printf("rc: send complete %s\n", err_name(ibv_wr_complete(x)));
	poll_all("rc: send, a", a.cq, 1, &a, &b);
	poll_all("rc: send, b", b.cq, 1, &a, &b);
	printf("rc: send bytes %s\n", strcmp(b.buf, "hello through wr_send") ? "differ" : "same");

	/* SEND with immediate, its data inline (the flag given, as rxe needs
	 * it), a batch of two with a WRITE of two SGEs behind it,
	 * unsignaled. (The SGEs are of one length, and the inline data one
	 * buffer: the rdma-core Debian 12 ships sums an SGE list's lengths,
	 * and an inline list's, wrongly; see model_only.) */
	recv(&b, 101, 0, 64);
	char text[] = "inline data";
	ibv_wr_start(x);
	x->wr_id = 2;
	x->wr_flags = IBV_SEND_SIGNALED | IBV_SEND_INLINE;
	ibv_wr_send_imm(x, htobe32(0xabcd1234));
	ibv_wr_set_inline_data(x, text, sizeof(text));
	memcpy(text, "XXXXXX", 6); /* the builder copied it */
	for (int i = 0; i < 3000; i++)
		a.buf[1024 + i] = (char)(i * 7);
	struct ibv_sge two[] = {
		{ .addr = (uintptr_t)a.buf + 1024, .length = 1500, .lkey = a.mr->lkey },
		{ .addr = (uintptr_t)a.buf + 2524, .length = 1500, .lkey = a.mr->lkey },
	};
	x->wr_id = 3;
	x->wr_flags = 0;
	ibv_wr_rdma_write(x, b.mr->rkey, (uintptr_t)b.buf + 1024);
	ibv_wr_set_sge_list(x, 2, two);
	printf("rc: batch of two complete %s\n", err_name(ibv_wr_complete(x)));
	poll_all("rc: send_imm, a", a.cq, 1, &a, &b);
	poll_all("rc: send_imm, b", b.cq, 1, &a, &b);
	printf("rc: inline bytes %s\n", strcmp(b.buf, "inline data") ? "differ" : "same");

	/* WRITE with immediate of 0 bytes (set_sge with length 0), behind
	 * the unsignaled WRITE: b's receive completes once both landed. */
	recv(&b, 102, 0, 64);
	ibv_wr_start(x);
	x->wr_id = 4;
	x->wr_flags = IBV_SEND_SIGNALED;
	ibv_wr_rdma_write_imm(x, b.mr->rkey, (uintptr_t)b.buf, htobe32(7));
	ibv_wr_set_sge(x, a.mr->lkey, (uintptr_t)a.buf, 0);
	printf("rc: write_imm complete %s\n", err_name(ibv_wr_complete(x)));
	poll_all("rc: write_imm, a", a.cq, 1, &a, &b);
	poll_all("rc: write_imm, b", b.cq, 1, &a, &b);
	printf("rc: write bytes %s\n", memcmp(b.buf + 1024, a.buf + 1024, 3000) ? "differ" : "same");

	/* READ back, FETCH_ADD and CMP_SWAP, one batch of three. */
	uint64_t *word = (uint64_t *)(b.buf + 512);
	*word = 40;
	ibv_wr_start(x);
	x->wr_id = 5;
	x->wr_flags = IBV_SEND_SIGNALED;
	ibv_wr_rdma_read(x, b.mr->rkey, (uintptr_t)b.buf + 1024);
	ibv_wr_set_sge(x, a.mr->lkey, (uintptr_t)a.buf + 3072, 1000);
	x->wr_id = 6;
	ibv_wr_atomic_fetch_add(x, b.mr->rkey, (uintptr_t)word, 2);
	ibv_wr_set_sge(x, a.mr->lkey, (uintptr_t)a.buf + 8, 8);
	x->wr_id = 7;
	ibv_wr_atomic_cmp_swp(x, b.mr->rkey, (uintptr_t)word, 42, 9);
	ibv_wr_set_sge(x, a.mr->lkey, (uintptr_t)a.buf + 16, 8);
	printf("rc: read and atomics complete %s\n", err_name(ibv_wr_complete(x)));
	poll_all("rc: read and atomics, a", a.cq, 3, &a, &b);
	printf("rc: read bytes %s\n", memcmp(a.buf + 3072, b.buf + 1024, 1000) ? "differ" : "same");
	printf("rc: fetch_add saw %" PRIu64 ", cmp_swp saw %" PRIu64 ", word now %" PRIu64 "\n",
	       *(uint64_t *)(a.buf + 8), *(uint64_t *)(a.buf + 16), *word);

	/* An aborted batch posts nothing. */
	ibv_wr_start(x);
	x->wr_id = 8;
	ibv_wr_send(x);
	ibv_wr_set_sge(x, a.mr->lkey, (uintptr_t)a.buf, 8);
	ibv_wr_abort(x);
	empty("rc: after abort", a.cq);

	/* Batches the builders refuse: nothing of them is posted. The
	 * limits are the ones the QP reports. */
	struct ibv_qp_attr qa;
	struct ibv_qp_init_attr qia;
	if (ibv_query_qp(a.qp, &qa, IBV_QP_CAP, &qia))
		die("query_qp");
	size_t nsge = qia.cap.max_send_sge + 1;
	struct ibv_sge *many = calloc(nsge, sizeof(*many));
	for (size_t i = 0; i < nsge; i++)
		many[i] = (struct ibv_sge){ .addr = (uintptr_t)a.buf, .length = 8, .lkey = a.mr->lkey };
	ibv_wr_start(x);
	x->wr_id = 9;
	x->wr_flags = IBV_SEND_SIGNALED;
	ibv_wr_send(x);
	ibv_wr_set_sge(x, a.mr->lkey, (uintptr_t)a.buf, 8);
	ibv_wr_rdma_write(x, b.mr->rkey, (uintptr_t)b.buf);
	ibv_wr_set_sge_list(x, nsge, many);
	printf("rc: max_send_sge+1 SGEs %s\n", err_name(ibv_wr_complete(x)));
	free(many);
	char *big = calloc(1, qia.cap.max_inline_data + 1);
	ibv_wr_start(x);
	ibv_wr_send(x);
	ibv_wr_set_inline_data(x, big, qia.cap.max_inline_data + 1);
	printf("rc: max_inline_data+1 bytes inline %s\n", err_name(ibv_wr_complete(x)));
	free(big);
	/* The queue holds max_send_wr (as the QP reports it): one more than
	 * that in a batch is refused whole, that many go. */
	int cap = (int)qia.cap.max_send_wr;
	ibv_wr_start(x);
	for (int i = 0; i <= cap; i++) {
		x->wr_id = 10 + i;
		ibv_wr_rdma_write(x, b.mr->rkey, (uintptr_t)b.buf);
		ibv_wr_set_sge(x, a.mr->lkey, (uintptr_t)a.buf, 8);
	}
	printf("rc: max_send_wr+1 WRITEs %s\n", err_name(ibv_wr_complete(x)));
	empty("rc: after the refused batches", a.cq);
	empty("rc: b after the refused batches", b.cq);
	ibv_wr_start(x);
	for (int i = 0; i < cap; i++) {
		x->wr_id = 1000 + i;
		x->wr_flags = i == cap - 1 ? IBV_SEND_SIGNALED : 0;
		ibv_wr_rdma_write(x, b.mr->rkey, (uintptr_t)b.buf + 8 * (i % 64));
		ibv_wr_set_sge(x, a.mr->lkey, (uintptr_t)a.buf, 8);
	}
	printf("rc: max_send_wr WRITEs %s\n", err_name(ibv_wr_complete(x)));
	poll_all("rc: a full queue of WRITEs", a.cq, 1, &a, &b);
	printf("rc: max_send_wr %s 16\n", cap >= 16 ? ">=" : "<");

	/* Two completions polled in one start/next/end. */
	recv(&b, 103, 0, 64);
	recv(&b, 104, 64, 64);
	ibv_wr_start(x);
	x->wr_flags = IBV_SEND_SIGNALED;
	x->wr_id = 50;
	ibv_wr_send(x);
	ibv_wr_set_sge(x, a.mr->lkey, (uintptr_t)a.buf, 4);
	x->wr_id = 51;
	ibv_wr_send(x);
	ibv_wr_set_sge(x, a.mr->lkey, (uintptr_t)a.buf, 5);
	printf("rc: two SENDs complete %s\n", err_name(ibv_wr_complete(x)));
	poll_two("rc: two SENDs, a", a.cq, &a, &b);
	poll_two("rc: two SENDs, b", b.cq, &a, &b);
	empty("rc: drained", b.cq);
}

static void ud(void)
{
	struct end a = {}, b = {};
	struct ibv_qp_ex *x;

	make_end(&a, IBV_QPT_UD, IBV_QP_EX_WITH_SEND | IBV_QP_EX_WITH_SEND_WITH_IMM);
	make_end(&b, IBV_QPT_UD, IBV_QP_EX_WITH_SEND);
	ud_ready(&a);
	ud_ready(&b);
	struct ibv_ah_attr aa = { .is_global = 1, .port_num = 1,
				  .grh = { .dgid = gid, .sgid_index = gid_index, .hop_limit = 1 } };
	struct ibv_ah *ah = ibv_create_ah(pd, &aa);

	if (!ah)
		die("create_ah");
	recv(&b, 200, 0, 1024);
	strcpy(a.buf, "datagram");
	x = a.x;
	ibv_wr_start(x);
	x->wr_id = 60;
	x->wr_flags = IBV_SEND_SIGNALED;
	ibv_wr_send_imm(x, htobe32(0x55));
	ibv_wr_set_ud_addr(x, ah, b.qp->qp_num, 0x11111111);
	ibv_wr_set_sge(x, a.mr->lkey, (uintptr_t)a.buf, 9);
	printf("ud: send_imm complete %s\n", err_name(ibv_wr_complete(x)));
	poll_all("ud: a", a.cq, 1, &a, &b);
	poll_all("ud: b", b.cq, 1, &a, &b);
	printf("ud: bytes after the GRH %s\n", strcmp(b.buf + 40, "datagram") ? "differ" : "same");
	/* A wrong Q_Key is dropped at b: a's send still completes. */
	recv(&b, 201, 0, 1024);
	ibv_wr_start(x);
	x->wr_id = 61;
	ibv_wr_send(x);
	ibv_wr_set_ud_addr(x, ah, b.qp->qp_num, 0x22222222);
	ibv_wr_set_sge(x, a.mr->lkey, (uintptr_t)a.buf, 9);
	printf("ud: send with a wrong Q_Key complete %s\n", err_name(ibv_wr_complete(x)));
	poll_all("ud: wrong Q_Key, a", a.cq, 1, &a, &b);
}

/* model_only: what the rdma-core Debian 12 ships (44.0) gets wrong, so
 * that real rxe cannot be the reference here, and rdma-core fixed in
 * 2026 ("Fix missing length accumulation in wr_set_inline_data_list",
 * "Fix dma.length computation in wr_set_sge_list"): inline data from a
 * list of buffers, and an SGE list of unequal lengths. */
static void model_only(void)
{
	uint64_t ops = IBV_QP_EX_WITH_SEND | IBV_QP_EX_WITH_RDMA_WRITE | IBV_QP_EX_WITH_ATOMIC_FETCH_AND_ADD;
	struct end a = {}, b = {};
	struct ibv_qp_ex *x;

	make_end(&a, IBV_QPT_RC, ops);
	make_end(&b, IBV_QPT_RC, ops);
	rc_connect(&a, &b);
	rc_connect(&b, &a);
	x = a.x;
	recv(&b, 300, 0, 64);
	char part1[] = "inline ", part2[] = "list";
	struct ibv_data_buf parts[] = { { part1, 7 }, { part2, 5 } };
	ibv_wr_start(x);
	x->wr_id = 70;
	x->wr_flags = IBV_SEND_SIGNALED;
	ibv_wr_send(x);
	ibv_wr_set_inline_data_list(x, 2, parts);
	memcpy(part1, "XXXXXXX", 7);
	for (int i = 0; i < 3000; i++)
		a.buf[1024 + i] = (char)(i * 3);
	struct ibv_sge two[] = {
		{ .addr = (uintptr_t)a.buf + 1024, .length = 1000, .lkey = a.mr->lkey },
		{ .addr = (uintptr_t)a.buf + 2024, .length = 2000, .lkey = a.mr->lkey },
	};
	x->wr_id = 71;
	ibv_wr_rdma_write(x, b.mr->rkey, (uintptr_t)b.buf + 1024);
	ibv_wr_set_sge_list(x, 2, two);
	printf("model: inline list and unequal SGEs complete %s\n", err_name(ibv_wr_complete(x)));
	poll_all("model: a", a.cq, 2, &a, &b);
	poll_all("model: b", b.cq, 1, &a, &b);
	printf("model: inline list bytes %s\n", strcmp(b.buf, "inline list") ? "differ" : "same");
	printf("model: unequal SGEs bytes %s\n", memcmp(b.buf + 1024, a.buf + 1024, 3000) ? "differ" : "same");

	/* A batch the device refuses part of (an atomic at an unaligned
	 * address, which ibv_post_send refuses with EINVAL) is refused
	 * whole: its WRITEs before and after do not happen either. (rxe's
	 * builders check no alignment; its kernel would run the WRITEs and
	 * fail the atomic at the responder.) */
	memset(b.buf + 2048, 0, 16);
	ibv_wr_start(x);
	x->wr_id = 80;
	x->wr_flags = IBV_SEND_SIGNALED;
	ibv_wr_rdma_write(x, b.mr->rkey, (uintptr_t)b.buf + 2048);
	ibv_wr_set_sge(x, a.mr->lkey, (uintptr_t)a.buf + 1024, 8);
	x->wr_id = 81;
	ibv_wr_atomic_fetch_add(x, b.mr->rkey, (uintptr_t)b.buf + 4, 1);
	ibv_wr_set_sge(x, a.mr->lkey, (uintptr_t)a.buf, 8);
	x->wr_id = 82;
	ibv_wr_rdma_write(x, b.mr->rkey, (uintptr_t)b.buf + 2056);
	ibv_wr_set_sge(x, a.mr->lkey, (uintptr_t)a.buf + 1024, 8);
	printf("model: batch with an unaligned atomic %s\n", err_name(ibv_wr_complete(x)));
	/* A WRITE behind it completes first: RC completes in order, so a
	 * WRITE of the refused batch posted would have come before. */
	ibv_wr_start(x);
	x->wr_id = 83;
	ibv_wr_rdma_write(x, b.mr->rkey, (uintptr_t)b.buf + 2064);
	ibv_wr_set_sge(x, a.mr->lkey, (uintptr_t)a.buf + 1024, 8);
	ibv_wr_complete(x);
	poll_all("model: after the refused batch", a.cq, 1, &a, &b);
	static const char zeros[16];
	printf("model: WRITEs of the refused batch %s\n", memcmp(b.buf + 2048, zeros, 16) ? "landed" : "never landed");
}

int main(int argc, char **argv)
{
	struct ibv_device **list;
	int n;

	gid_index = argc > 1 ? atoi(argv[1]) : 1;
	setvbuf(stdout, NULL, _IONBF, 0);
	list = ibv_get_device_list(&n);
	if (!list || n < 1)
		die("get_device_list");
	ctx = ibv_open_device(list[0]);
	if (!ctx)
		die("open_device");
	ibv_free_device_list(list);
	if (ibv_query_gid(ctx, 1, gid_index, &gid))
		die("query_gid");
	pd = ibv_alloc_pd(ctx);
	if (!pd)
		die("alloc_pd");
	creation();
	rc();
	ud();
	if (argc > 2 && !strcmp(argv[2], "model"))
		model_only();
	printf("newpost done\n");
	return 0;
}
