/*
 * misuse: verbs called wrongly, and verbs the model does not offer, on
 * the drop-in library. Each case prints "CASE name ok" when the verb
 * returned what libibverbs returns (errno set, NULL or the error code)
 * and "CASE name FAIL ..." otherwise; the process must not crash. The Go
 * test reads the lines.
 */
#include <endian.h>
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <infiniband/verbs.h>

/* Exported by libibverbs, declared in rdma-core's driver.h, which Debian
 * does not install (ibv_devinfo calls the first). */
int ibv_read_sysfs_file(const char *dir, const char *file, char *buf, size_t size);
int ibv_get_sysfs_path(char *buf, size_t size);

static int failures;

/* start_batch opens a batch on the extended QP arg from another thread
 * (a Go program's verbs move between OS threads). */
static void *start_batch(void *arg)
{
	ibv_wr_start(arg);
	return NULL;
}

static void check(const char *name, int ok, int err)
{
	printf("CASE %s %s", name, ok ? "ok" : "FAIL");
	if (!ok) {
		printf(" (errno %d: %s)", err, strerror(err));
		failures++;
	}
	printf("\n");
}

/* null_ptr: a call returning a pointer must return NULL with errno. */
#define null_ptr(name, call, want)                                      \
	do {                                                            \
		errno = 0;                                              \
		void *r_ = (void *)(call);                              \
		int e_ = errno;                                         \
		check(name, r_ == NULL && e_ == (want), e_);            \
	} while (0)

/* code: a call returning an errno must return want. */
#define code(name, call, want)                                          \
	do {                                                            \
		int r_ = (call);                                        \
		check(name, r_ == (want), r_);                          \
	} while (0)

/* minus_one: a call returning -1 with errno. */
#define minus_one(name, call, want)                                     \
	do {                                                            \
		errno = 0;                                              \
		int r_ = (call);                                        \
		int e_ = errno;                                         \
		check(name, r_ == -1 && e_ == (want), e_);              \
	} while (0)

int main(void)
{
	struct ibv_device **list = ibv_get_device_list(NULL);
	struct ibv_context *ctx;
	struct ibv_pd *pd;
	struct ibv_cq *cq;
	struct ibv_comp_channel *ch;
	struct ibv_qp *qp;
	struct ibv_device fake = {};
	char buf[64];

	setvbuf(stdout, NULL, _IONBF, 0);
	if (!list || !list[0]) {
		printf("no device\n");
		return 1;
	}
	ctx = ibv_open_device(list[0]);
	pd = ibv_alloc_pd(ctx);
	ch = ibv_create_comp_channel(ctx);
	cq = ibv_create_cq(ctx, 4, NULL, ch, 0);
	struct ibv_qp_init_attr ia = { .send_cq = cq, .recv_cq = cq, .qp_type = IBV_QPT_RC,
				       .cap = { .max_send_wr = 4, .max_recv_wr = 4,
						.max_send_sge = 1, .max_recv_sge = 1 } };
	qp = ibv_create_qp(pd, &ia);
	if (!ctx || !pd || !ch || !cq || !qp) {
		printf("setup failed\n");
		return 1;
	}

	/* NULL objects, where libibverbs would dereference them. */
	null_ptr("open_device(NULL)", ibv_open_device(NULL), ENODEV);
	null_ptr("open_device(not listed)", ibv_open_device(&fake), ENODEV);
	null_ptr("get_device_name(NULL)", ibv_get_device_name(NULL), EINVAL);
	code("close_device(NULL)", ibv_close_device(NULL), EINVAL);
	code("query_device(NULL)", ibv_query_device(NULL, NULL), EINVAL);
	minus_one("query_gid(NULL)", ibv_query_gid(ctx, 1, 0, NULL), 0);
	minus_one("query_gid(index 1024, past gid_tbl_len)", ibv_query_gid(ctx, 1, 1024, &(union ibv_gid){}), EINVAL);
	minus_one("query_pkey(index 5)", ibv_query_pkey(ctx, 1, 5, &(__be16){0}), EINVAL);
	code("query_port(port 2)", ibv_query_port(ctx, 2, &(struct ibv_port_attr){}), EINVAL);
	code("query_port(NULL attr)", ibv_query_port(ctx, 1, NULL), EINVAL);
	minus_one("query_pkey(NULL)", ibv_query_pkey(ctx, 1, 0, NULL), 0);
	check("get_pkey_index(0x1234)", ibv_get_pkey_index(ctx, 1, htobe16(0x1234)) == -1, 0);
	check("get_pkey_index(0xffff)", ibv_get_pkey_index(ctx, 1, 0xffff) == 0, 0);
	check("get_device_guid(NULL)", ibv_get_device_guid(NULL) == 0, 0);
	check("get_device_index(NULL)", ibv_get_device_index(NULL) == -1, 0);
	code("query_gid_ex(NULL entry)", ibv_query_gid_ex(ctx, 1, 0, NULL, 0), EINVAL);
	code("query_gid_ex(flags 1)", ibv_query_gid_ex(ctx, 1, 0, &(struct ibv_gid_entry){}, 1), EINVAL);
	code("query_gid_ex(empty entry 5)", ibv_query_gid_ex(ctx, 1, 5, &(struct ibv_gid_entry){}, 0), ENODATA);
	code("query_gid_ex(index 1024, past the table)", ibv_query_gid_ex(ctx, 1, 1024, &(struct ibv_gid_entry){}, 0), EINVAL);
	{
		struct ibv_gid_entry e[4];

		check("query_gid_table: 2 entries", ibv_query_gid_table(ctx, e, 4, 0) == 2, 0);
		check("query_gid_table(flags 1)", ibv_query_gid_table(ctx, e, 4, 1) == -EINVAL, 0);
	}
	minus_one("read_sysfs_file(NULL)", ibv_read_sysfs_file(NULL, "x", buf, sizeof(buf)), EINVAL);
	minus_one("read_sysfs_file(missing)", ibv_read_sysfs_file(list[0]->ibdev_path, "board_id", buf, sizeof(buf)), ENOENT);
	minus_one("get_sysfs_path(NULL)", ibv_get_sysfs_path(NULL, 0), 0);
	null_ptr("alloc_pd(NULL)", ibv_alloc_pd(NULL), EINVAL);
	code("dealloc_pd(NULL)", ibv_dealloc_pd(NULL), EINVAL);
	code("dealloc_pd(in use)", ibv_dealloc_pd(pd), EBUSY);
	null_ptr("reg_mr(NULL pd)", ibv_reg_mr(NULL, buf, sizeof(buf), 0), EINVAL);
	null_ptr("reg_mr(NULL addr)", ibv_reg_mr(pd, NULL, 4096, IBV_ACCESS_LOCAL_WRITE), EFAULT);
	null_ptr("reg_mr(length 0)", ibv_reg_mr(pd, buf, 0, IBV_ACCESS_LOCAL_WRITE), EINVAL);
	null_ptr("reg_mr(REMOTE_WRITE without LOCAL_WRITE)",
		 ibv_reg_mr(pd, buf, sizeof(buf), IBV_ACCESS_REMOTE_WRITE), EINVAL);
	code("dereg_mr(NULL)", ibv_dereg_mr(NULL), EINVAL);
	null_ptr("create_comp_channel(NULL)", ibv_create_comp_channel(NULL), EINVAL);
	code("destroy_comp_channel(NULL)", ibv_destroy_comp_channel(NULL), EINVAL);
	code("destroy_comp_channel(CQs on it)", ibv_destroy_comp_channel(ch), EBUSY);
	null_ptr("create_cq(NULL)", ibv_create_cq(NULL, 4, NULL, NULL, 0), EINVAL);
	null_ptr("create_cq(cqe over max_cqe)", ibv_create_cq(ctx, 1 << 20, NULL, NULL, 0), EINVAL);
	null_ptr("create_cq(comp_vector 5)", ibv_create_cq(ctx, 4, NULL, NULL, 5), EINVAL);
	code("destroy_cq(NULL)", ibv_destroy_cq(NULL), EINVAL);
	code("destroy_cq(QP on it)", ibv_destroy_cq(cq), EBUSY);
	code("resize_cq(NULL)", ibv_resize_cq(NULL, 8), EINVAL);
	code("poll_cq(negative)", ibv_poll_cq(cq, -1, NULL), -EINVAL);
	code("req_notify_cq ok", ibv_req_notify_cq(cq, 0), 0);
	minus_one("get_cq_event(NULL)", ibv_get_cq_event(NULL, NULL, NULL), EINVAL);
	{
		struct ibv_cq *ev_cq;
		void *ev_ctx;
		int fl = fcntl(ch->fd, F_GETFL);

		fcntl(ch->fd, F_SETFL, fl | O_NONBLOCK);
		minus_one("get_cq_event(O_NONBLOCK, none)", ibv_get_cq_event(ch, &ev_cq, &ev_ctx), EAGAIN);
		fcntl(ch->fd, F_SETFL, fl);
	}
	{
		struct ibv_async_event ev;
		int fl = fcntl(ctx->async_fd, F_GETFL);

		minus_one("get_async_event(NULL)", ibv_get_async_event(NULL, &ev), EINVAL);
		fcntl(ctx->async_fd, F_SETFL, fl | O_NONBLOCK);
		minus_one("get_async_event(O_NONBLOCK, none)", ibv_get_async_event(ctx, &ev), EAGAIN);
		fcntl(ctx->async_fd, F_SETFL, fl);
	}
	null_ptr("create_qp(NULL pd)", ibv_create_qp(NULL, &ia), EINVAL);
	null_ptr("create_qp(NULL attr)", ibv_create_qp(pd, NULL), EINVAL);
	{
		struct ibv_qp_init_attr big = ia;

		big.cap.max_send_sge = 1000;
		null_ptr("create_qp(max_send_sge over max_sge)", ibv_create_qp(pd, &big), EINVAL);
	}
	code("modify_qp(NULL)", ibv_modify_qp(NULL, NULL, 0), EINVAL);
	code("modify_qp(RESET to RTS)",
	     ibv_modify_qp(qp, &(struct ibv_qp_attr){ .qp_state = IBV_QPS_RTS }, IBV_QP_STATE), EINVAL);
	code("query_qp(NULL)", ibv_query_qp(NULL, NULL, 0, NULL), EINVAL);
	code("destroy_qp(NULL)", ibv_destroy_qp(NULL), EINVAL);
	{
		struct ibv_sge sge = { .addr = (uintptr_t)buf, .length = 8 };
		struct ibv_send_wr wr = { .sg_list = &sge, .num_sge = 1, .opcode = IBV_WR_SEND }, *bad = NULL;
		struct ibv_recv_wr rwr = { .sg_list = &sge, .num_sge = 5 }, *rbad = NULL;

		/* rxe's provider clears *bad_wr, queues the WR and rings the
		 * doorbell, which the kernel refuses for a QP in RESET: EINVAL
		 * with *bad_wr NULL (so on real rxe: TestPostChecksMatchRxe).
		 * A WR the provider refuses itself is *bad_wr, and the
		 * doorbell's EINVAL still the answer. */
		struct ibv_send_wr w5 = { .sg_list = &sge, .num_sge = 5, .opcode = IBV_WR_SEND };

		bad = &wr;
		code("post_send(in RESET)", ibv_post_send(qp, &wr, &bad), EINVAL);
		check("post_send(in RESET) bad_wr NULL", bad == NULL, 0);
		wr.next = &w5;
		code("post_send(then 5 SGEs, max 1, in RESET)", ibv_post_send(qp, &wr, &bad), EINVAL);
		check("post_send(then 5 SGEs, in RESET) bad_wr the second", bad == &w5, 0);
		wr.next = NULL;
		/* In RESET, rxe_post_recv refuses before it reads a WR. */
		rbad = &rwr;
		code("post_recv(5 SGEs, max 1, in RESET)", ibv_post_recv(qp, &rwr, &rbad), EINVAL);
		check("post_recv(in RESET) bad_wr NULL", rbad == NULL, 0);
		code("post_send(NULL list)", ibv_post_send(qp, NULL, &bad), EINVAL);
		code("post_recv(NULL list)", ibv_post_recv(qp, NULL, &rbad), EINVAL);

		/* In ERR the WRs reach the device (and are flushed): there a
		 * remote address that is no pointer (the library must not
		 * read the union's UD fields of an RC WR), and inline data far
		 * over max_inline_data at an address nothing maps (it must not
		 * be read): the first accepted, the second refused, no crash. */
		code("modify_qp(RESET to ERR)",
		     ibv_modify_qp(qp, &(struct ibv_qp_attr){ .qp_state = IBV_QPS_ERR }, IBV_QP_STATE), EINVAL);
		code("modify_qp(to INIT)",
		     ibv_modify_qp(qp, &(struct ibv_qp_attr){ .qp_state = IBV_QPS_INIT, .port_num = 1 },
				   IBV_QP_STATE | IBV_QP_PKEY_INDEX | IBV_QP_PORT | IBV_QP_ACCESS_FLAGS), 0);
		code("modify_qp(INIT to ERR)",
		     ibv_modify_qp(qp, &(struct ibv_qp_attr){ .qp_state = IBV_QPS_ERR }, IBV_QP_STATE), 0);
		struct ibv_send_wr w2 = { .sg_list = &sge, .num_sge = 1, .opcode = IBV_WR_RDMA_WRITE };
		w2.wr.rdma.remote_addr = 0x10;
		code("post_send(WRITE to 0x10, RC in ERR: flushed)", ibv_post_send(qp, &w2, &bad), 0);
		struct ibv_sge huge = { .addr = 0x10, .length = 0x7fffffff };
		struct ibv_send_wr w3 = { .sg_list = &huge, .num_sge = 1, .opcode = IBV_WR_SEND,
					  .send_flags = IBV_SEND_INLINE };
		code("post_send(2 GiB inline at 0x10, in ERR)", ibv_post_send(qp, &w3, &bad), EINVAL);
		check("post_send(2 GiB inline, in ERR) bad_wr", bad == &w3, 0);
		code("post_recv(5 SGEs, max 1, in ERR)", ibv_post_recv(qp, &rwr, &rbad), EINVAL);
		check("post_recv(5 SGEs, in ERR) bad_wr", rbad == &rwr, 0);
		rwr.num_sge = -1;
		code("post_recv(num_sge -1)", ibv_post_recv(qp, &rwr, &rbad), EINVAL);
	}
	null_ptr("create_srq(NULL)", ibv_create_srq(NULL, NULL), EINVAL);
	code("modify_srq(NULL)", ibv_modify_srq(NULL, NULL, 0), EINVAL);
	code("query_srq(NULL)", ibv_query_srq(NULL, NULL), EINVAL);
	code("destroy_srq(NULL)", ibv_destroy_srq(NULL), EINVAL);
	ibv_ack_cq_events(NULL, 1); /* nothing to acknowledge, no crash */
	null_ptr("create_ah(NULL)", ibv_create_ah(NULL, NULL), EINVAL);
	null_ptr("create_ah(not global)", ibv_create_ah(pd, &(struct ibv_ah_attr){ .port_num = 1 }), EINVAL);
	code("destroy_ah(NULL)", ibv_destroy_ah(NULL), EINVAL);

	/* Verbs the model does not offer: as libibverbs over a provider
	 * without them. */
	null_ptr("alloc_mw(type 3)", ibv_alloc_mw(pd, 3), EINVAL);
	{
		struct ibv_send_wr bw = { .opcode = IBV_WR_BIND_MW }, *bad = NULL;

		code("post_send(BIND_MW of no window, in ERR)", ibv_post_send(qp, &bw, &bad), EINVAL);
		check("post_send(BIND_MW of no window) bad_wr", bad == &bw, 0);
	}
	null_ptr("create_cq_ex(completion timestamps)",
		 ibv_create_cq_ex(ctx, &(struct ibv_cq_init_attr_ex){ .cqe = 4,
				  .wc_flags = IBV_WC_EX_WITH_COMPLETION_TIMESTAMP }), EOPNOTSUPP);
	null_ptr("create_cq_ex(NULL attr)", ibv_create_cq_ex(ctx, NULL), EINVAL);
	null_ptr("create_qp_ex(TSO on RC)",
		 ibv_create_qp_ex(ctx, &(struct ibv_qp_init_attr_ex){ .qp_type = IBV_QPT_RC,
				  .comp_mask = IBV_QP_INIT_ATTR_PD | IBV_QP_INIT_ATTR_SEND_OPS_FLAGS,
				  .send_ops_flags = IBV_QP_EX_WITH_TSO, .pd = pd }), EOPNOTSUPP);
	null_ptr("create_qp_ex(no PD)",
		 ibv_create_qp_ex(ctx, &(struct ibv_qp_init_attr_ex){ .qp_type = IBV_QPT_RC,
				  .comp_mask = IBV_QP_INIT_ATTR_SEND_OPS_FLAGS,
				  .send_ops_flags = IBV_QP_EX_WITH_SEND }), EINVAL);
	null_ptr("qp_to_qp_ex(NULL)", ibv_qp_to_qp_ex(NULL), EINVAL);
	check("qp_to_qp_ex(a QP of ibv_create_qp) is NULL", ibv_qp_to_qp_ex(qp) == NULL, 0);
	{
		struct ibv_cq *xcq = ibv_create_cq(ctx, 4, NULL, NULL, 0);
		struct ibv_qp *x = ibv_create_qp_ex(ctx, &(struct ibv_qp_init_attr_ex){
			.qp_type = IBV_QPT_RC, .send_cq = xcq, .recv_cq = xcq,
			.cap = { .max_send_wr = 4, .max_recv_wr = 4, .max_send_sge = 1, .max_recv_sge = 1 },
			.comp_mask = IBV_QP_INIT_ATTR_PD | IBV_QP_INIT_ATTR_SEND_OPS_FLAGS,
			.send_ops_flags = IBV_QP_EX_WITH_SEND, .pd = pd });
		struct ibv_qp_ex *qx = x ? ibv_qp_to_qp_ex(x) : NULL;

		check("create_qp_ex(RC, SEND)", qx != NULL, errno);
		if (qx) {
			check("qp_ex has no RDMA WRITE builder (not asked for)", qx->wr_rdma_write == NULL, 0);
			code("wr_complete without wr_start", ibv_wr_complete(qx), EINVAL);
			ibv_wr_start(qx);
			ibv_wr_set_sge(qx, 0, 0, 0);
			ibv_wr_send(qx);
			code("wr_set_sge before any builder", ibv_wr_complete(qx), EINVAL);
			ibv_wr_start(qx);
			ibv_wr_abort(qx);
			ibv_wr_abort(qx); /* a second abort: nothing to end */
			ibv_wr_start(qx);
			ibv_wr_send(qx);
			ibv_wr_set_inline_data(qx, NULL, 8);
			code("wr_set_inline_data(NULL, 8)", ibv_wr_complete(qx), EINVAL);
			ibv_wr_start(qx);
			ibv_wr_start(qx); /* twice from one thread: no hang */
			code("wr_start twice, then an empty batch", ibv_wr_complete(qx), 0);
			pthread_t th;
			pthread_create(&th, NULL, start_batch, qx);
			pthread_join(th, NULL);
			code("wr_complete of a batch another thread started", ibv_wr_complete(qx), 0);
			ibv_wr_start(qx); /* free again: no hang */
			code("wr_start after it", ibv_wr_complete(qx), 0);
			code("destroy_qp of an extended QP", ibv_destroy_qp(x), 0);
		}
		ibv_destroy_cq(xcq);
	}
	null_ptr("open_xrcd (no provider op)",
		 ibv_open_xrcd(ctx, &(struct ibv_xrcd_init_attr){ .fd = -1 }), EOPNOTSUPP);
	null_ptr("alloc_td (no provider op)", ibv_alloc_td(ctx, &(struct ibv_td_init_attr){}), EOPNOTSUPP);
	{
		struct ibv_device_attr_ex ax;

		code("query_device_ex", ibv_query_device_ex(ctx, NULL, &ax), 0);
		check("query_device_ex max_qp_wr", ax.orig_attr.max_qp_wr > 0, 0);
	}
	/* Not a multicast GID, and not a UD QP: the kernel's EINVAL. */
	code("attach_mcast(gid 0)", ibv_attach_mcast(qp, &(union ibv_gid){}, 0), EINVAL);
	code("attach_mcast(RC QP)", ibv_attach_mcast(qp, &(union ibv_gid){ .raw = { 0xff, 0x0e, [15] = 1 } }, 0), EINVAL);
	code("detach_mcast(not attached)", ibv_detach_mcast(qp, &(union ibv_gid){ .raw = { 0xff, 0x0e, [15] = 1 } }, 0), EINVAL);
	code("attach_mcast(NULL gid)", ibv_attach_mcast(qp, NULL, 0), EINVAL);
	code("detach_mcast(NULL qp)", ibv_detach_mcast(NULL, &(union ibv_gid){}, 0), EINVAL);
	null_ptr("create_ah_from_wc(no GRH)", ibv_create_ah_from_wc(pd, &(struct ibv_wc){}, &(struct ibv_grh){}, 1), EINVAL);
	null_ptr("create_ah_from_wc(NULL pd)", ibv_create_ah_from_wc(NULL, &(struct ibv_wc){}, &(struct ibv_grh){}, 1), EINVAL);
	minus_one("init_ah_from_wc(NULL)", ibv_init_ah_from_wc(ctx, 1, NULL, NULL, NULL), EINVAL);
	null_ptr("import_device", ibv_import_device(0), EOPNOTSUPP);
	null_ptr("import_pd", ibv_import_pd(ctx, 1), EOPNOTSUPP);
	null_ptr("import_mr", ibv_import_mr(pd, 1), EOPNOTSUPP);
	null_ptr("import_dm", ibv_import_dm(ctx, 1), EOPNOTSUPP);
	null_ptr("reg_dmabuf_mr", ibv_reg_dmabuf_mr(pd, 0, 4096, 0, -1, IBV_ACCESS_LOCAL_WRITE), EOPNOTSUPP);
	code("set_ece", ibv_set_ece(qp, &(struct ibv_ece){}), EOPNOTSUPP);
	code("query_ece", ibv_query_ece(qp, &(struct ibv_ece){}), EOPNOTSUPP);
	code("query_qp_data_in_order", ibv_query_qp_data_in_order(qp, IBV_WR_RDMA_WRITE, 0), 0);
	check("qp_to_qp_ex", ibv_qp_to_qp_ex(qp) == NULL, 0);
	{
		/* ibv_rereg_mr as the conformance suite's TestReregMRMatchesRxe
		 * found it on rxe 6.1: libibverbs' own checks give
		 * IBV_REREG_MR_ERR_INPUT and EINVAL, every call past them
		 * IBV_REREG_MR_ERR_CMD and EOPNOTSUPP (no rereg_user_mr); under
		 * the spec profile the device does it. */
		const char *profile = getenv("ROCESIM_PROFILE");
		int spec = profile && !strcmp(profile, "spec");
		struct ibv_mr *mr = ibv_reg_mr(pd, buf, sizeof(buf), IBV_ACCESS_LOCAL_WRITE);
		uint32_t lkey = mr ? mr->lkey : 0;
		int r;

		errno = 0;
		r = ibv_rereg_mr(mr, IBV_REREG_MR_CHANGE_ACCESS, NULL, NULL, 0,
				 IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE);
		if (spec)
			check("rereg_mr(access), spec: done", r == 0 && mr->lkey == lkey, errno);
		else
			check("rereg_mr(access), rxe: ERR_CMD EOPNOTSUPP", r == IBV_REREG_MR_ERR_CMD && errno == EOPNOTSUPP, errno);
		errno = 0;
		r = ibv_rereg_mr(mr, IBV_REREG_MR_CHANGE_TRANSLATION, NULL, buf + 8, 16, 0);
		if (spec)
			check("rereg_mr(translation), spec: done", r == 0 && mr->addr == buf + 8 && mr->length == 16, errno);
		else
			check("rereg_mr(translation), rxe: ERR_CMD EOPNOTSUPP", r == IBV_REREG_MR_ERR_CMD && errno == EOPNOTSUPP, errno);
		errno = 0;
		r = ibv_rereg_mr(mr, 0, NULL, NULL, 0, 0);
		check("rereg_mr(no flag): ERR_CMD", r == IBV_REREG_MR_ERR_CMD && errno == (spec ? EINVAL : EOPNOTSUPP), errno);
		errno = 0;
		r = ibv_rereg_mr(mr, 8, NULL, NULL, 0, 0);
		check("rereg_mr(unknown flag): ERR_INPUT", r == IBV_REREG_MR_ERR_INPUT && errno == EINVAL, errno);
		errno = 0;
		r = ibv_rereg_mr(mr, IBV_REREG_MR_CHANGE_TRANSLATION, NULL, buf, 0, 0);
		check("rereg_mr(translation without length): ERR_INPUT", r == IBV_REREG_MR_ERR_INPUT && errno == EINVAL, errno);
		errno = 0;
		r = ibv_rereg_mr(NULL, IBV_REREG_MR_CHANGE_ACCESS, NULL, NULL, 0, 0);
		check("rereg_mr(NULL)", r == IBV_REREG_MR_ERR_INPUT && errno == EINVAL, errno);
		code("dereg_mr", ibv_dereg_mr(mr), 0);
	}

	code("destroy_qp", ibv_destroy_qp(qp), 0);
	code("destroy_cq", ibv_destroy_cq(cq), 0);
	code("destroy_comp_channel", ibv_destroy_comp_channel(ch), 0);
	code("dealloc_pd", ibv_dealloc_pd(pd), 0);
	code("close_device", ibv_close_device(ctx), 0);
	{
		/* Closing a context destroys what it holds; its channel's fd
		 * stays the program's until ibv_destroy_comp_channel. */
		struct ibv_context *c2 = ibv_open_device(list[0]);
		struct ibv_comp_channel *ch2 = c2 ? ibv_create_comp_channel(c2) : NULL;

		check("second context and channel", ch2 != NULL, errno);
		code("close_device with a channel left", ibv_close_device(c2), 0);
		check("the channel's fd still open", ch2 && fcntl(ch2->fd, F_GETFD) != -1, errno);
		code("destroy_comp_channel after close_device", ibv_destroy_comp_channel(ch2), 0);
	}
	ibv_free_device_list(list);
	printf("misuse: %d failures\n", failures);
	return failures != 0;
}
