/*
 * loopback [GID [DEVICES [threads|sleep|busy]]]: two RC QPs, each in a context
 * of its own, on one device (or, with DEVICES 2, on two devices: run with
 * ROCESIM_DEVICES=2) in one process, as rdma-core's own tests are written:
 * SEND/RECV, RDMA WRITE, RDMA READ, FETCH_ADD and CMP_SWAP, each
 * completion polled, the bytes checked; an inline SEND waited for through
 * a completion channel (ibv_get_cq_event), its fd watched with poll(2);
 * with "threads", a thread that takes 100 receives through the channel
 * while the main thread sends; with "sleep", the program waits for an
 * event in poll(2) instead of a verb; with "busy", a thread that computes
 * all along, calling ibv_query_port after each millisecond or so of work,
 * while the main thread runs the rest; a WRITE under a wrong R_Key and the
 * asynchronous event it raises at the responder under
 * ROCESIM_PROFILE=spec, the async fds watched too. Prints "loopback ok"
 * and exits 0 on success; any failure prints what and exits 1.
 *
 * Built by the Go test with gcc against the installed <infiniband/verbs.h>
 * and run with LD_LIBRARY_PATH naming the drop-in library.
 */
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <poll.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <infiniband/verbs.h>

#define SIZE 4096

static void die(const char *what)
{
	fprintf(stderr, "loopback: %s failed: %s\n", what, strerror(errno));
	exit(1);
}

/* What each device the program uses holds. */
struct dev {
	struct ibv_context *ctx;
	struct ibv_pd *pd;
	struct ibv_comp_channel *ch;
	struct ibv_cq *cq;	/* receive completions, on the channel */
	struct ibv_cq *scq;	/* send completions */
	union ibv_gid gid;
};

struct end {
	struct dev *d;
	struct ibv_qp *qp;
	char *buf;
	struct ibv_mr *mr;
	uint32_t psn;
};

static void to_rts(struct end *e, struct end *peer, int gid_index)
{
	struct ibv_qp_attr a = {
		.qp_state = IBV_QPS_INIT,
		.pkey_index = 0,
		.port_num = 1,
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
	a.rq_psn = peer->psn;
	a.max_dest_rd_atomic = 1;
	a.min_rnr_timer = 12;
	a.ah_attr.is_global = 1;
	a.ah_attr.grh.dgid = peer->d->gid;
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
	a.sq_psn = e->psn;
	a.max_rd_atomic = 1;
	if (ibv_modify_qp(e->qp, &a, IBV_QP_STATE | IBV_QP_TIMEOUT | IBV_QP_RETRY_CNT |
			  IBV_QP_RNR_RETRY | IBV_QP_SQ_PSN | IBV_QP_MAX_QP_RD_ATOMIC))
		die("modify_qp RTS");
	if (e->qp->state != IBV_QPS_RTS)
		die("qp->state after RTS");
}

/* wait polls cq until it has a completion and checks it. */
static void wait(struct ibv_cq *cq, uint64_t wr_id, enum ibv_wc_opcode op, uint32_t len)
{
	struct ibv_wc wc;
	int n, spins = 0;

	while ((n = ibv_poll_cq(cq, 1, &wc)) == 0)
		if (++spins > 10000000) {
			fprintf(stderr, "loopback: no completion for wr %" PRIu64 "\n", wr_id);
			exit(1);
		}
	if (n < 0)
		die("poll_cq");
	if (wc.status != IBV_WC_SUCCESS || wc.wr_id != wr_id || wc.opcode != op ||
	    (len && wc.byte_len != len)) {
		fprintf(stderr, "loopback: wr %" PRIu64 ": %s (%d), opcode %d, byte_len %u; want wr %" PRIu64 " opcode %d byte_len %u\n",
			(uint64_t)wc.wr_id, ibv_wc_status_str(wc.status), wc.status, wc.opcode, wc.byte_len,
			wr_id, op, len);
		exit(1);
	}
}

/* receiver: a second thread that takes ROUNDS receive completions of b
 * through its completion channel, blocking in ibv_get_cq_event while the
 * main thread posts and polls: the library's lock serialises them, and
 * a blocked waiter runs the world when there is something to run. */
#define ROUNDS 100

struct rx {
	struct end *b;
	struct ibv_recv_wr *rwr;
	int got;
};

static void *receiver(void *arg)
{
	struct rx *rx = arg;
	struct ibv_cq *cq = rx->b->d->cq, *ev_cq;
	void *ev_ctx;
	struct ibv_wc wc;

	while (rx->got < ROUNDS) {
		if (ibv_get_cq_event(rx->b->d->ch, &ev_cq, &ev_ctx) || ev_cq != cq)
			return NULL;
		ibv_ack_cq_events(cq, 1);
		if (ibv_req_notify_cq(cq, 0))
			return NULL;
		while (ibv_poll_cq(cq, 1, &wc) == 1) {
			struct ibv_recv_wr *bad;

			if (wc.status != IBV_WC_SUCCESS || wc.opcode != IBV_WC_RECV)
				return NULL;
			rx->got++;
			if (ibv_post_recv(rx->b->qp, rx->rwr, &bad)) /* the next one */
				return NULL;
		}
	}
	return NULL;
}

/* The "busy" thread: work, a verb, work, ... until the main thread is
 * done. The library's waits yield to it a while, then move time anyway. */
static volatile int busy_stop;

static void *busy(void *arg)
{
	struct ibv_context *ctx = arg;
	struct ibv_port_attr pa;
	volatile unsigned long x = 0;

	while (!busy_stop) {
		for (unsigned long i = 0; i < 500000; i++)
			x += i;
		if (ibv_query_port(ctx, 1, &pa))
			die("query_port (busy)");
	}
	return NULL;
}

static void post(struct ibv_qp *qp, struct ibv_send_wr *wr)
{
	struct ibv_send_wr *bad;
	int err = ibv_post_send(qp, wr, &bad);

	if (err) {
		errno = err;
		die("post_send");
	}
}

int main(int argc, char **argv)
{
	int gid_index = argc > 1 ? atoi(argv[1]) : 0;
	int ndev = argc > 2 ? atoi(argv[2]) : 1;
	int sleeper = argc > 3 && !strcmp(argv[3], "sleep");
	int busier = argc > 3 && !strcmp(argv[3], "busy");
	pthread_t busy_th;

	setvbuf(stdout, NULL, _IONBF, 0);
	struct ibv_device **list;
	struct dev devs[2] = {};
	struct end a = { .psn = 100 }, b = { .psn = 200 };
	struct end *ends[] = { &a, &b };
	int n;

	list = ibv_get_device_list(&n);
	if (!list || n < ndev || ndev < 1 || ndev > 2)
		die("get_device_list");
	/* Each end has a context of its own, on one device or on two. */
	if (busier) {
		struct ibv_context *bctx = ibv_open_device(list[0]);

		if (!bctx || pthread_create(&busy_th, NULL, busy, bctx))
			die("busy thread");
	}
	for (int i = 0; i < 2; i++) {
		struct dev *d = &devs[i];

		d->ctx = ibv_open_device(list[ndev == 2 ? i : 0]);
		if (!d->ctx)
			die("open_device");
		if (ibv_query_gid(d->ctx, 1, gid_index, &d->gid))
			die("query_gid");
		d->pd = ibv_alloc_pd(d->ctx);
		if (!d->pd)
			die("alloc_pd");
		d->ch = ibv_create_comp_channel(d->ctx);
		if (!d->ch)
			die("create_comp_channel");
		d->cq = ibv_create_cq(d->ctx, 16, NULL, d->ch, 0);
		d->scq = ibv_create_cq(d->ctx, 16, NULL, NULL, 0);
		if (!d->cq || !d->scq)
			die("create_cq");
	}
	ibv_free_device_list(list);
	a.d = &devs[0];
	b.d = &devs[1];
	for (int i = 0; i < 2; i++) {
		struct end *e = ends[i];
		struct ibv_qp_init_attr ia = {
			.send_cq = e->d->scq,
			.recv_cq = e->d->cq,
			.cap = { .max_send_wr = 16, .max_recv_wr = 16, .max_send_sge = 1,
				 .max_recv_sge = 1, .max_inline_data = 64 },
			.qp_type = IBV_QPT_RC,
		};

		e->buf = calloc(1, SIZE);
		e->mr = ibv_reg_mr(e->d->pd, e->buf, SIZE, IBV_ACCESS_LOCAL_WRITE |
				   IBV_ACCESS_REMOTE_WRITE | IBV_ACCESS_REMOTE_READ |
				   IBV_ACCESS_REMOTE_ATOMIC);
		if (!e->mr)
			die("reg_mr");
		e->qp = ibv_create_qp(e->d->pd, &ia);
		if (!e->qp)
			die("create_qp");
	}
	/* The completion queues the steps below wait on. */
	struct ibv_cq *cq = b.d->cq, *ascq = a.d->scq, *bscq = b.d->scq;
	struct ibv_comp_channel *ch = b.d->ch;

	to_rts(&a, &b, gid_index);
	to_rts(&b, &a, gid_index);

	/* SEND/RECV: a to b. */
	struct ibv_sge rsge = { .addr = (uintptr_t)b.buf, .length = SIZE, .lkey = b.mr->lkey };
	struct ibv_recv_wr rwr = { .wr_id = 1, .sg_list = &rsge, .num_sge = 1 }, *rbad;
	if (ibv_post_recv(b.qp, &rwr, &rbad))
		die("post_recv");
	strcpy(a.buf, "hello over the loop");
	struct ibv_sge sge = { .addr = (uintptr_t)a.buf, .length = 20, .lkey = a.mr->lkey };
	struct ibv_send_wr wr = { .wr_id = 2, .sg_list = &sge, .num_sge = 1,
				  .opcode = IBV_WR_SEND, .send_flags = IBV_SEND_SIGNALED };
	post(a.qp, &wr);
	wait(ascq, 2, IBV_WC_SEND, 0);
	wait(cq, 1, IBV_WC_RECV, 20);
	if (strcmp(b.buf, "hello over the loop"))
		die("SEND bytes");

	/* RDMA WRITE of 3000 bytes (three packets) into b at offset 512. */
	for (int i = 0; i < 3000; i++)
		a.buf[i] = (char)i;
	sge.length = 3000;
	wr.wr_id = 3;
	wr.opcode = IBV_WR_RDMA_WRITE;
	wr.wr.rdma.remote_addr = (uintptr_t)b.buf + 512;
	wr.wr.rdma.rkey = b.mr->rkey;
	post(a.qp, &wr);
	wait(ascq, 3, IBV_WC_RDMA_WRITE, 0);
	if (memcmp(b.buf + 512, a.buf, 3000))
		die("WRITE bytes");

	/* RDMA READ: b reads a's first 2000 bytes into its buffer's start. */
	struct ibv_sge bsge = { .addr = (uintptr_t)b.buf, .length = 2000, .lkey = b.mr->lkey };
	struct ibv_send_wr rd = { .wr_id = 4, .sg_list = &bsge, .num_sge = 1,
				  .opcode = IBV_WR_RDMA_READ, .send_flags = IBV_SEND_SIGNALED };
	rd.wr.rdma.remote_addr = (uintptr_t)a.buf;
	rd.wr.rdma.rkey = a.mr->rkey;
	post(b.qp, &rd);
	wait(bscq, 4, IBV_WC_RDMA_READ, 2000);
	if (memcmp(b.buf, a.buf, 2000))
		die("READ bytes");

	/* FETCH_ADD then CMP_SWAP on a 64-bit word of b. */
	uint64_t *word = (uint64_t *)(b.buf + 1024);
	*word = 40;
	struct ibv_sge asge = { .addr = (uintptr_t)a.buf + 8, .length = 8, .lkey = a.mr->lkey };
	struct ibv_send_wr at = { .wr_id = 5, .sg_list = &asge, .num_sge = 1,
				  .opcode = IBV_WR_ATOMIC_FETCH_AND_ADD, .send_flags = IBV_SEND_SIGNALED };
	at.wr.atomic.remote_addr = (uintptr_t)word;
	at.wr.atomic.rkey = b.mr->rkey;
	at.wr.atomic.compare_add = 2;
	post(a.qp, &at);
	wait(ascq, 5, IBV_WC_FETCH_ADD, 8);
	if (*(uint64_t *)(a.buf + 8) != 40 || *word != 42) {
		fprintf(stderr, "loopback: FETCH_ADD: original %" PRIu64 " now %" PRIu64 "\n",
			*(uint64_t *)(a.buf + 8), *word);
		exit(1);
	}
	at.wr_id = 6;
	at.opcode = IBV_WR_ATOMIC_CMP_AND_SWP;
	at.wr.atomic.compare_add = 42;
	at.wr.atomic.swap = 7;
	post(a.qp, &at);
	wait(ascq, 6, IBV_WC_COMP_SWAP, 8);
	if (*word != 7)
		die("CMP_SWAP result");

	/* An inline SEND from unregistered memory, waited for through the
	 * completion channel: the fd is readable once the event is there. */
	if (ibv_req_notify_cq(cq, 0))
		die("req_notify_cq");
	if (ibv_post_recv(b.qp, &rwr, &rbad))
		die("post_recv");
	char msg[] = "inline";
	struct ibv_sge isge = { .addr = (uintptr_t)msg, .length = sizeof(msg), .lkey = 0 };
	struct ibv_send_wr iw = { .wr_id = 7, .sg_list = &isge, .num_sge = 1, .opcode = IBV_WR_SEND,
				  .send_flags = IBV_SEND_SIGNALED | IBV_SEND_INLINE };
	post(a.qp, &iw);
	struct pollfd pfd = { .fd = ch->fd, .events = POLLIN };
	/* (With "sleep" the library may run the world whenever the program
	 * is slow to come back: the fd may be readable already.) */
	if (!sleeper && poll(&pfd, 1, 0) != 0)
		die("poll before the event (readable too early)");
	struct ibv_cq *ev_cq;
	void *ev_ctx;
	if (ibv_get_cq_event(ch, &ev_cq, &ev_ctx))
		die("get_cq_event");
	if (ev_cq != cq)
		die("get_cq_event cq");
	ibv_ack_cq_events(cq, 1);
	wait(cq, 1, IBV_WC_RECV, sizeof(msg));
	wait(ascq, 7, IBV_WC_SEND, 0);
	if (strcmp(b.buf, "inline"))
		die("inline bytes");

	/* A second event: the fd becomes readable before get_cq_event. */
	if (ibv_req_notify_cq(cq, 0) || ibv_post_recv(b.qp, &rwr, &rbad))
		die("re-arm");
	post(a.qp, &iw);
	if (sleeper) {
		/* Sleep in poll(2), outside the library: after
		 * ROCESIM_IDLE_WAKE of quiet the library runs the world until
		 * the event comes. */
		if (poll(&pfd, 1, 10000) != 1 || !(pfd.revents & POLLIN))
			die("poll(2) sleeping for the event (fd not readable in 10 s)");
		wait(ascq, 7, IBV_WC_SEND, 0);
	} else {
		/* Polling the send CQ is waiting: time moves, and the RECV at
		 * b completes before the ACK reaches a. */
		wait(ascq, 7, IBV_WC_SEND, 0);
		if (poll(&pfd, 1, 0) != 1 || !(pfd.revents & POLLIN))
			die("poll after the event (fd not readable)");
	}
	if (ibv_get_cq_event(ch, &ev_cq, &ev_ctx))
		die("get_cq_event 2");
	ibv_ack_cq_events(cq, 1);
	if (poll(&pfd, 1, 0) != 0)
		die("poll after get_cq_event (still readable)");
	wait(cq, 1, IBV_WC_RECV, sizeof(msg));

	/* Two threads ("loopback GID DEVICES threads"): the receiver waits on
	 * b's channel, this one sends. A thread's wait moves virtual time only
	 * while the other is not about to act (the library's threads.go), so
	 * the run is the same twice (TestLoopbackThreadsSameTwice). */
	if (argc > 3 && !strcmp(argv[3], "threads")) {
		struct ibv_recv_wr *rbad2;
		struct rx rx = { .b = &b, .rwr = &rwr };
		pthread_t th;

		for (int i = 0; i < 8; i++)
			if (ibv_post_recv(b.qp, &rwr, &rbad2))
				die("post_recv (threads)");
		if (ibv_req_notify_cq(cq, 0))
			die("req_notify_cq (threads)");
		if (pthread_create(&th, NULL, receiver, &rx))
			die("pthread_create");
		for (int i = 0; i < ROUNDS; i++) {
			iw.wr_id = 100 + i;
			post(a.qp, &iw);
			wait(ascq, 100 + i, IBV_WC_SEND, 0);
		}
		pthread_join(th, NULL);
		if (rx.got != ROUNDS) {
			fprintf(stderr, "loopback: receiver thread took %d of %d\n", rx.got, ROUNDS);
			exit(1);
		}
	}

	/* A WRITE under a wrong R_Key: a's WR completes with
	 * REM_ACCESS_ERR and b's QP goes to ERROR. Under the spec profile
	 * b's device raises QP_ACCESS_ERR for it (IBTA 11.6.3) and the async
	 * fd is readable until the event is taken; rxe 6.1 raises none (the
	 * model's rxe profile neither), and the fd stays quiet. */
	const char *profile = getenv("ROCESIM_PROFILE");
	int spec = profile && !strcmp(profile, "spec");
	struct pollfd afd = { .fd = b.d->ctx->async_fd, .events = POLLIN };
	if (poll(&afd, 1, 0) != 0)
		die("async fd readable before any event");
	sge.length = 8;
	wr.wr_id = 8;
	wr.opcode = IBV_WR_RDMA_WRITE;
	wr.wr.rdma.remote_addr = (uintptr_t)b.buf;
	wr.wr.rdma.rkey = b.mr->rkey + 1;
	post(a.qp, &wr);
	{
		struct ibv_wc wc;
		int k;

		while ((k = ibv_poll_cq(ascq, 1, &wc)) == 0)
			;
		if (k < 0 || wc.wr_id != 8 || wc.status != IBV_WC_REM_ACCESS_ERR) {
			fprintf(stderr, "loopback: bad rkey WRITE: %s\n", ibv_wc_status_str(wc.status));
			exit(1);
		}
	}
	struct ibv_async_event aev;
	if (!spec) {
		int fl = fcntl(afd.fd, F_GETFL);

		fcntl(afd.fd, F_SETFL, fl | O_NONBLOCK);
		if (poll(&afd, 1, 0) != 0 || ibv_get_async_event(b.d->ctx, &aev) != -1 || errno != EAGAIN)
			die("rxe profile: an async event");
		fcntl(afd.fd, F_SETFL, fl);
		goto teardown;
	}
	/* The event is for b's context alone, not a's (another context,
	 * on the same device with DEVICES 1). */
	{
		int fl = fcntl(a.d->ctx->async_fd, F_GETFL);

		fcntl(a.d->ctx->async_fd, F_SETFL, fl | O_NONBLOCK);
		if (ibv_get_async_event(a.d->ctx, &aev) != -1 || errno != EAGAIN)
			die("a's context got b's QP event");
		fcntl(a.d->ctx->async_fd, F_SETFL, fl);
	}
	if (poll(&afd, 1, 0) != 1)
		die("async fd not readable with an event");
	if (ibv_get_async_event(b.d->ctx, &aev))
		die("get_async_event");
	if (aev.event_type != IBV_EVENT_QP_ACCESS_ERR || aev.element.qp != b.qp) {
		fprintf(stderr, "loopback: async event %s for %p, want %s for %p\n",
			ibv_event_type_str(aev.event_type), (void *)aev.element.qp,
			ibv_event_type_str(IBV_EVENT_QP_ACCESS_ERR), (void *)b.qp);
		exit(1);
	}
	ibv_ack_async_event(&aev);
	if (poll(&afd, 1, 0) != 0)
		die("async fd readable after the event was taken");

teardown:
	/* ibv_destroy_cq waits for every event the CQ queued to be
	 * acknowledged (libibverbs waits forever; the model says EBUSY):
	 * take the ones still on the channels. */
	for (int i = 0; i < 2; i++) {
		struct ibv_cq *ev_cq;
		void *ev_ctx;

		fcntl(devs[i].ch->fd, F_SETFL, fcntl(devs[i].ch->fd, F_GETFL) | O_NONBLOCK);
		while (ibv_get_cq_event(devs[i].ch, &ev_cq, &ev_ctx) == 0)
			ibv_ack_cq_events(ev_cq, 1);
	}
	for (int i = 0; i < 2; i++) {
		if (ibv_destroy_qp(ends[i]->qp) || ibv_dereg_mr(ends[i]->mr))
			die("destroy");
		free(ends[i]->buf);
	}
	for (int i = 0; i < 2; i++) {
		struct dev *d = &devs[i];

		if (ibv_destroy_cq(d->cq) || ibv_destroy_cq(d->scq) ||
		    ibv_destroy_comp_channel(d->ch) || ibv_dealloc_pd(d->pd) ||
		    ibv_close_device(d->ctx))
			die("teardown");
	}
	if (busier) {
		busy_stop = 1;
		pthread_join(busy_th, NULL);
	}
	printf("loopback ok\n");
	return 0;
}
