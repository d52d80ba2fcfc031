/*
 * transports [GID]: the other queue pair types and an SRQ on one device, in one
 * process, as ibv_ud_pingpong, ibv_uc_pingpong and ibv_srq_pingpong use
 * them: a UD SEND through an address handle (the receive buffer starts
 * with the 40 bytes of GRH, the completion names the sender's QPN) and
 * the answer through an AH made from that completion, a UC
 * SEND and RDMA WRITE, RC SENDs received through a shared receive queue,
 * and memory windows of both types, bound and used by RC. Prints
 * "transports ok" and exits 0 on success.
 */
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <infiniband/verbs.h>

#define SIZE 4096
#define QKEY 0x11111111

static struct ibv_context *ctx;
static struct ibv_pd *pd;
static struct ibv_cq *cq;
static union ibv_gid gid;
static int gidx; /* the GID index used: argv[1], default 1 (IPv4); 0 is IPv6 */

static void die(const char *what)
{
	fprintf(stderr, "transports: %s failed: %s\n", what, strerror(errno));
	exit(1);
}

static struct ibv_wc wait(uint64_t wr_id)
{
	struct ibv_wc wc;

	for (long spins = 0; spins < 10000000; spins++) {
		int n = ibv_poll_cq(cq, 1, &wc);

		if (n < 0)
			die("poll_cq");
		if (n == 0)
			continue;
		if (wc.status != IBV_WC_SUCCESS || wc.wr_id != wr_id) {
			fprintf(stderr, "transports: wr %" PRIu64 ": %s; want wr %" PRIu64 " success\n",
				(uint64_t)wc.wr_id, ibv_wc_status_str(wc.status), wr_id);
			exit(1);
		}
		return wc;
	}
	fprintf(stderr, "transports: no completion for wr %" PRIu64 "\n", wr_id);
	exit(1);
}

static struct ibv_qp *qp(enum ibv_qp_type type, struct ibv_srq *srq)
{
	struct ibv_qp_init_attr ia = {
		.send_cq = cq, .recv_cq = cq, .srq = srq, .qp_type = type,
		.cap = { .max_send_wr = 8, .max_recv_wr = srq ? 0 : 8, .max_send_sge = 1, .max_recv_sge = 1 },
	};
	struct ibv_qp *q = ibv_create_qp(pd, &ia);

	if (!q)
		die("create_qp");
	return q;
}

/* up takes q to RTS, toward peer for the connected types. */
static void up(struct ibv_qp *q, struct ibv_qp *peer)
{
	struct ibv_qp_attr a = { .qp_state = IBV_QPS_INIT, .port_num = 1 };
	int mask = IBV_QP_STATE | IBV_QP_PKEY_INDEX | IBV_QP_PORT;

	if (q->qp_type == IBV_QPT_UD) {
		a.qkey = QKEY;
		mask |= IBV_QP_QKEY;
	} else {
		a.qp_access_flags = IBV_ACCESS_REMOTE_WRITE | IBV_ACCESS_REMOTE_READ;
		mask |= IBV_QP_ACCESS_FLAGS;
	}
	if (ibv_modify_qp(q, &a, mask))
		die("modify_qp INIT");
	memset(&a, 0, sizeof(a));
	a.qp_state = IBV_QPS_RTR;
	mask = IBV_QP_STATE;
	if (q->qp_type != IBV_QPT_UD) {
		a.path_mtu = IBV_MTU_1024;
		a.dest_qp_num = peer->qp_num;
		a.ah_attr.is_global = 1;
		a.ah_attr.grh.dgid = gid;
		a.ah_attr.grh.sgid_index = gidx;
		a.ah_attr.grh.hop_limit = 1;
		a.ah_attr.port_num = 1;
		mask |= IBV_QP_AV | IBV_QP_PATH_MTU | IBV_QP_DEST_QPN | IBV_QP_RQ_PSN;
		if (q->qp_type == IBV_QPT_RC) {
			a.max_dest_rd_atomic = 1;
			a.min_rnr_timer = 12;
			mask |= IBV_QP_MAX_DEST_RD_ATOMIC | IBV_QP_MIN_RNR_TIMER;
		}
	}
	if (ibv_modify_qp(q, &a, mask))
		die("modify_qp RTR");
	memset(&a, 0, sizeof(a));
	a.qp_state = IBV_QPS_RTS;
	mask = IBV_QP_STATE | IBV_QP_SQ_PSN;
	if (q->qp_type == IBV_QPT_RC) {
		a.timeout = 14;
		a.retry_cnt = 7;
		a.rnr_retry = 7;
		a.max_rd_atomic = 1;
		mask |= IBV_QP_TIMEOUT | IBV_QP_RETRY_CNT | IBV_QP_RNR_RETRY | IBV_QP_MAX_QP_RD_ATOMIC;
	}
	if (ibv_modify_qp(q, &a, mask))
		die("modify_qp RTS");
}

static char *buf;
static struct ibv_mr *mr;

/* ud_send sends msg from q to the QPN qpn behind ah, received by to
 * (wr_ids id, id + 1), and checks the bytes after the GRH area. */
static struct ibv_wc ud_send(struct ibv_qp *q, struct ibv_qp *to, struct ibv_ah *ah, uint32_t qpn,
			     const char *msg, uint64_t id)
{
	struct ibv_sge sge = { .addr = (uintptr_t)buf, .length = strlen(msg) + 1, .lkey = mr->lkey };
	struct ibv_sge rsge = { .addr = (uintptr_t)buf + SIZE, .length = SIZE, .lkey = mr->lkey };
	struct ibv_recv_wr *rbad, rwr = { .wr_id = id, .sg_list = &rsge, .num_sge = 1 };
	struct ibv_send_wr *bad, wr = { .wr_id = id + 1, .sg_list = &sge, .num_sge = 1,
					.opcode = IBV_WR_SEND, .send_flags = IBV_SEND_SIGNALED };
	struct ibv_wc wc;

	wr.wr.ud.ah = ah;
	wr.wr.ud.remote_qpn = qpn;
	wr.wr.ud.remote_qkey = QKEY;
	if (ibv_post_recv(to, &rwr, &rbad))
		die("post_recv UD");
	strcpy(buf, msg);
	if (ibv_post_send(q, &wr, &bad))
		die("post_send UD");
	wait(id + 1);
	wc = wait(id);
	if (strcmp(buf + SIZE + 40, msg))
		die("UD bytes");
	return wc;
}

int main(int argc, char **argv)
{
	struct ibv_device **list = ibv_get_device_list(NULL);
	struct ibv_send_wr *bad, wr = { .num_sge = 1, .send_flags = IBV_SEND_SIGNALED };
	struct ibv_recv_wr *rbad, rwr = { .num_sge = 1 };
	struct ibv_sge sge, rsge;
	struct ibv_wc wc;

	if (!list || !list[0] || !(ctx = ibv_open_device(list[0])))
		die("open_device");
	ibv_free_device_list(list);
	gidx = argc > 1 ? atoi(argv[1]) : 1;
	if (ibv_query_gid(ctx, 1, gidx, &gid))
		die("query_gid");
	pd = ibv_alloc_pd(ctx);
	cq = ibv_create_cq(ctx, 64, NULL, NULL, 0);
	buf = calloc(1, 2 * SIZE);
	mr = ibv_reg_mr(pd, buf, 2 * SIZE, IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE |
			IBV_ACCESS_REMOTE_READ | IBV_ACCESS_MW_BIND);
	if (!pd || !cq || !buf || !mr)
		die("setup");
	sge = (struct ibv_sge){ .addr = (uintptr_t)buf, .lkey = mr->lkey };
	rsge = (struct ibv_sge){ .addr = (uintptr_t)buf + SIZE, .length = SIZE, .lkey = mr->lkey };
	wr.sg_list = &sge;
	rwr.sg_list = &rsge;

	/* UD: a SEND through an AH; the receiver sees the GRH first. */
	struct ibv_qp *ua = qp(IBV_QPT_UD, NULL), *ub = qp(IBV_QPT_UD, NULL);
	up(ua, NULL);
	up(ub, NULL);
	struct ibv_ah_attr aa = { .is_global = 1, .port_num = 1,
				  .grh = { .dgid = gid, .sgid_index = gidx, .hop_limit = 1 } };
	struct ibv_ah *ah = ibv_create_ah(pd, &aa);
	if (!ah)
		die("create_ah");
	wc = ud_send(ua, ub, ah, ub->qp_num, "over UD", 1);
	if (wc.byte_len != 40 + 8 || !(wc.wc_flags & IBV_WC_GRH) || wc.src_qp != ua->qp_num) {
		fprintf(stderr, "transports: UD receive: byte_len %u, wc_flags %#x, src_qp %#x (want %#x)\n",
			wc.byte_len, wc.wc_flags, wc.src_qp, ua->qp_num);
		exit(1);
	}
	/* The answer goes back through an AH made from that completion and
	 * its GRH (ibv_create_ah_from_wc), to the sender's QPN. */
	struct ibv_ah *back = ibv_create_ah_from_wc(pd, &wc, (struct ibv_grh *)(buf + SIZE), 1);
	if (!back)
		die("create_ah_from_wc");
	wc = ud_send(ub, ua, back, wc.src_qp, "answer", 50);
	if (wc.src_qp != ub->qp_num)
		die("UD answer's src_qp");
	if (ibv_destroy_ah(back))
		die("destroy_ah");

	/* UC: a SEND, then an RDMA WRITE. */
	struct ibv_qp *ca = qp(IBV_QPT_UC, NULL), *cb = qp(IBV_QPT_UC, NULL);
	up(ca, cb);
	up(cb, ca);
	rwr.wr_id = 3;
	if (ibv_post_recv(cb, &rwr, &rbad))
		die("post_recv UC");
	strcpy(buf, "over UC");
	sge.length = 8;
	memset(&wr.wr, 0, sizeof(wr.wr));
	wr.opcode = IBV_WR_SEND;
	wr.wr_id = 4;
	if (ibv_post_send(ca, &wr, &bad))
		die("post_send UC");
	wait(4);
	wc = wait(3);
	if (wc.byte_len != 8 || strcmp(buf + SIZE, "over UC"))
		die("UC SEND bytes");
	strcpy(buf, "UC WRITE");
	sge.length = 9;
	wr.wr_id = 5;
	wr.opcode = IBV_WR_RDMA_WRITE;
	wr.wr.rdma.remote_addr = (uintptr_t)buf + SIZE + 100;
	wr.wr.rdma.rkey = mr->rkey;
	if (ibv_post_send(ca, &wr, &bad))
		die("post_send UC WRITE");
	wait(5);
	/* UC completes at the sender when the packet leaves; it lands a
	 * little later: each poll that finds nothing moves time on. */
	for (int i = 0; i < 1000 && strcmp(buf + SIZE + 100, "UC WRITE"); i++)
		if (ibv_poll_cq(cq, 1, &wc) != 0)
			die("an unexpected completion");
	if (strcmp(buf + SIZE + 100, "UC WRITE"))
		die("UC WRITE bytes");

	/* RC into an SRQ: two SENDs, two receives taken from the SRQ. */
	struct ibv_srq_init_attr sa = { .attr = { .max_wr = 8, .max_sge = 1 } };
	struct ibv_srq *srq = ibv_create_srq(pd, &sa);
	if (!srq)
		die("create_srq");
	struct ibv_qp *ra = qp(IBV_QPT_RC, NULL), *rb = qp(IBV_QPT_RC, srq);
	up(ra, rb);
	up(rb, ra);
	for (int i = 0; i < 2; i++) {
		rwr.wr_id = 10 + i;
		if (ibv_post_srq_recv(srq, &rwr, &rbad))
			die("post_srq_recv");
	}
	memset(&wr.wr, 0, sizeof(wr.wr));
	wr.opcode = IBV_WR_SEND;
	sge.length = 4;
	for (int i = 0; i < 2; i++) {
		wr.wr_id = 20 + i;
		if (ibv_post_send(ra, &wr, &bad))
			die("post_send RC");
		/* The receive completes before the ACK comes back. */
		wc = wait(10 + i);
		if (wc.qp_num != rb->qp_num)
			die("SRQ receive's qp_num");
		wait(20 + i);
	}
	struct ibv_srq_attr q;
	if (ibv_query_srq(srq, &q) || q.max_wr < 8)
		die("query_srq");

	/* Memory windows over the second half of the buffer. A type 2
	 * window, bound by rb's IBV_WR_BIND_MW to 64 bytes at SIZE + 256,
	 * takes a's WRITE under its R_Key; a type 1 window, bound by
	 * ibv_bind_mw for reading, serves a's READ. */
	struct ibv_mw *w2 = ibv_alloc_mw(pd, IBV_MW_TYPE_2), *w1 = ibv_alloc_mw(pd, IBV_MW_TYPE_1);
	if (!w2 || !w1)
		die("alloc_mw");
	struct ibv_send_wr bw = { .wr_id = 30, .opcode = IBV_WR_BIND_MW, .send_flags = IBV_SEND_SIGNALED };
	bw.bind_mw.mw = w2;
	bw.bind_mw.rkey = ibv_inc_rkey(w2->rkey);
	bw.bind_mw.bind_info = (struct ibv_mw_bind_info){ .mr = mr, .addr = (uintptr_t)buf + SIZE + 256,
							  .length = 64, .mw_access_flags = IBV_ACCESS_REMOTE_WRITE };
	if (ibv_post_send(rb, &bw, &bad))
		die("post_send BIND_MW");
	wait(30);
	strcpy(buf, "through a window");
	sge.length = 17;
	wr.wr_id = 31;
	wr.opcode = IBV_WR_RDMA_WRITE;
	wr.wr.rdma.remote_addr = (uintptr_t)buf + SIZE + 256 + 8;
	wr.wr.rdma.rkey = bw.bind_mw.rkey;
	if (ibv_post_send(ra, &wr, &bad))
		die("post_send WRITE through the type 2 window");
	wait(31);
	if (strcmp(buf + SIZE + 256 + 8, "through a window"))
		die("bytes through the type 2 window");

	struct ibv_mw_bind b1 = { .wr_id = 32, .send_flags = IBV_SEND_SIGNALED,
				  .bind_info = { .mr = mr, .addr = (uintptr_t)buf + SIZE + 256, .length = 64,
						 .mw_access_flags = IBV_ACCESS_REMOTE_READ } };
	uint32_t old_rkey = w1->rkey;
	if (ibv_bind_mw(rb, w1, &b1))
		die("bind_mw");
	if (w1->rkey == old_rkey)
		die("bind_mw left the R_Key as it was");
	wait(32);
	struct ibv_sge rd = { .addr = (uintptr_t)buf + 1024, .length = 17, .lkey = mr->lkey };
	struct ibv_send_wr rw = { .wr_id = 33, .sg_list = &rd, .num_sge = 1, .opcode = IBV_WR_RDMA_READ,
				  .send_flags = IBV_SEND_SIGNALED };
	rw.wr.rdma.remote_addr = (uintptr_t)buf + SIZE + 256 + 8;
	rw.wr.rdma.rkey = w1->rkey;
	if (ibv_post_send(ra, &rw, &bad))
		die("post_send READ through the type 1 window");
	wait(33);
	if (strcmp(buf + 1024, "through a window"))
		die("bytes through the type 1 window");
	if (ibv_bind_mw(rb, w2, &b1) != EINVAL) /* a type 2 window is bound by a WR only */
		die("ibv_bind_mw of a type 2 window");
	if (ibv_dealloc_mw(w1) || ibv_dealloc_mw(w2))
		die("dealloc_mw");

	if (ibv_destroy_qp(ra) || ibv_destroy_qp(rb) || ibv_destroy_srq(srq) ||
	    ibv_destroy_qp(ca) || ibv_destroy_qp(cb) || ibv_destroy_ah(ah) ||
	    ibv_destroy_qp(ua) || ibv_destroy_qp(ub) || ibv_dereg_mr(mr) ||
	    ibv_destroy_cq(cq) || ibv_dealloc_pd(pd) || ibv_close_device(ctx))
		die("teardown");
	printf("transports ok\n");
	return 0;
}
