/*
 * rocesim-cmagent: a small rdma_cm program for the conformance harness
 * (TestRpingCM's "flush" phase): a disconnect under load, on real rxe.
 *
 *   rocesim-cmagent server IP PORT N SIZE   listen on IP:PORT, forever:
 *       accept a connection with N receives of SIZE bytes posted; when
 *       the first receive completes, rdma_disconnect (the QP to ERR, the
 *       DREQ) while the client's SENDs are still arriving; wait for
 *       DISCONNECTED; poll the N completions.
 *   rocesim-cmagent late IP PORT N SIZE     as server, but each accept
 *       comes 8 s after the connect request, later than the REQ's
 *       timeout (6.1 s): the client's REQ comes again meanwhile, and the
 *       kernel answers it with an MRA (TestRpingCM's "mra" phase).
 *   rocesim-cmagent later IP PORT N SIZE    as late, 15 s: longer than
 *       two REQ timeouts, so a client that ignored the MRA would send
 *       a third REQ (TestInteropLateAccept).
 *   rocesim-cmagent reject IP PORT N SIZE   listen on IP:PORT, forever:
 *       reject every connect request (rdma_reject, no private data).
 *   rocesim-cmagent client IP PORT N SIZE   connect to IP:PORT, post N
 *       SENDs of SIZE bytes at once; on DISCONNECTED (the server's DREQ)
 *       rdma_disconnect (the QP to ERR, the DREP); poll the N completions.
 *   rocesim-cmagent udpreject|udpclient IP PORT N SIZE   the same over
 *       RDMA_PS_UDP (TestUdaddySIDR): the client only connects (a
 *       SIDR_REQ, no QP) and prints the event the SIDR_REP gives.
 *
 * Every CM event is printed as "SIDE event NAME status S", every
 * completion status as "SIDE wc STATUS", and at the end one line
 * "SIDE completions N success K flushed F other O". Links with
 * -lrdmacm -libverbs; needs librdmacm in the guest (rping's).
 */
#include <arpa/inet.h>
#include <errno.h>
#include <infiniband/verbs.h>
#include <netinet/in.h>
#include <rdma/rdma_cma.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

static const char *side;

static void die(const char *what)
{
	printf("%s error %s: %s\n", side, what, strerror(errno));
	fflush(stdout);
	exit(1);
}

/* next takes the next CM event, prints it and checks it is want. */
static struct rdma_cm_event *next(struct rdma_event_channel *ch, enum rdma_cm_event_type want)
{
	struct rdma_cm_event *ev;
	if (rdma_get_cm_event(ch, &ev))
		die("rdma_get_cm_event");
	printf("%s event %s status %d\n", side, rdma_event_str(ev->event), ev->status);
	fflush(stdout);
	if (ev->event != want) {
		printf("%s error: want %s\n", side, rdma_event_str(want));
		exit(1);
	}
	return ev;
}

struct conn {
	struct ibv_pd *pd;
	struct ibv_cq *cq;
	struct ibv_mr *mr;
	char *buf;
};

static void setup(struct rdma_cm_id *id, struct conn *c, int n, int size)
{
	struct ibv_qp_init_attr a;
	if (!(c->pd = ibv_alloc_pd(id->verbs)))
		die("ibv_alloc_pd");
	if (!(c->cq = ibv_create_cq(id->verbs, 2 * n + 2, NULL, NULL, 0)))
		die("ibv_create_cq");
	if (!(c->buf = calloc(n, size)))
		die("calloc");
	if (!(c->mr = ibv_reg_mr(c->pd, c->buf, (size_t)n * size, IBV_ACCESS_LOCAL_WRITE)))
		die("ibv_reg_mr");
	memset(&a, 0, sizeof(a));
	a.send_cq = c->cq;
	a.recv_cq = c->cq;
	a.qp_type = IBV_QPT_RC;
	a.cap.max_send_wr = n;
	a.cap.max_recv_wr = n;
	a.cap.max_send_sge = 1;
	a.cap.max_recv_sge = 1;
	if (rdma_create_qp(id, c->pd, &a))
		die("rdma_create_qp");
}

static void post(struct rdma_cm_id *id, struct conn *c, int n, int size, int send)
{
	for (int i = 0; i < n; i++) {
		struct ibv_sge sge = {.addr = (uintptr_t)(c->buf + (size_t)i * size), .length = size, .lkey = c->mr->lkey};
		if (send) {
			struct ibv_send_wr wr = {.wr_id = i, .sg_list = &sge, .num_sge = 1, .opcode = IBV_WR_SEND,
						 .send_flags = IBV_SEND_SIGNALED}, *bad;
			if (ibv_post_send(id->qp, &wr, &bad))
				die("ibv_post_send");
		} else {
			struct ibv_recv_wr wr = {.wr_id = i, .sg_list = &sge, .num_sge = 1}, *bad;
			if (ibv_post_recv(id->qp, &wr, &bad))
				die("ibv_post_recv");
		}
	}
}

/* drain polls until n completions came (or 30 s passed) and prints them. */
static void drain(struct conn *c, int n, int got, int ok, int flushed)
{
	int other = 0;
	time_t end = time(NULL) + 30;
	while (got < n && time(NULL) < end) {
		struct ibv_wc wc;
		int k = ibv_poll_cq(c->cq, 1, &wc);
		if (k < 0)
			die("ibv_poll_cq");
		if (k == 0) {
			usleep(1000);
			continue;
		}
		got++;
		printf("%s wc %s\n", side, ibv_wc_status_str(wc.status));
		if (wc.status == IBV_WC_SUCCESS)
			ok++;
		else if (wc.status == IBV_WC_WR_FLUSH_ERR)
			flushed++;
		else
			other++;
	}
	printf("%s completions %d success %d flushed %d other %d\n", side, got, ok, flushed, other);
	fflush(stdout);
}

/* The port space: RDMA_PS_TCP, or RDMA_PS_UDP for the udp* sides. */
static enum rdma_port_space ps = RDMA_PS_TCP;

static void addr(const char *ip, const char *port, struct sockaddr_in *sin)
{
	memset(sin, 0, sizeof(*sin));
	sin->sin_family = AF_INET;
	sin->sin_port = htons(atoi(port));
	if (inet_pton(AF_INET, ip, &sin->sin_addr) != 1) {
		printf("%s error: bad address %s\n", side, ip);
		exit(2);
	}
}

/* listener listens on sin and returns the channel of its events. */
static struct rdma_event_channel *listener(struct sockaddr_in *sin)
{
	struct rdma_event_channel *ch = rdma_create_event_channel();
	struct rdma_cm_id *l;
	if (!ch || rdma_create_id(ch, &l, NULL, ps))
		die("rdma_create_id");
	if (rdma_bind_addr(l, (struct sockaddr *)sin) || rdma_listen(l, 1))
		die("rdma_listen");
	return ch;
}

static void server(struct sockaddr_in *sin, int n, int size, unsigned delay)
{
	struct rdma_event_channel *ch = listener(sin);
	for (;;) {
		struct rdma_cm_event *ev = next(ch, RDMA_CM_EVENT_CONNECT_REQUEST);
		struct rdma_cm_id *id = ev->id;
		struct rdma_conn_param p = {.responder_resources = 1, .initiator_depth = 1, .retry_count = 7, .rnr_retry_count = 7};
		struct conn c;
		rdma_ack_cm_event(ev);
		setup(id, &c, n, size);
		post(id, &c, n, size, 0);
		if (delay) {
			printf("%s accept in %u s\n", side, delay);
			sleep(delay);
		}
		if (rdma_accept(id, &p))
			die("rdma_accept");
		rdma_ack_cm_event(next(ch, RDMA_CM_EVENT_ESTABLISHED));
		/* The first SEND has landed: the rest are on their way. */
		int got = 0, ok = 0;
		while (got == 0) {
			struct ibv_wc wc;
			int k = ibv_poll_cq(c.cq, 1, &wc);
			if (k < 0)
				die("ibv_poll_cq");
			if (k == 1) {
				got++;
				printf("%s wc %s\n", side, ibv_wc_status_str(wc.status));
				ok += wc.status == IBV_WC_SUCCESS;
			}
		}
		printf("%s disconnect\n", side);
		if (rdma_disconnect(id))
			die("rdma_disconnect");
		rdma_ack_cm_event(next(ch, RDMA_CM_EVENT_DISCONNECTED));
		drain(&c, n, got, ok, 0);
		rdma_destroy_qp(id);
		rdma_destroy_id(id);
		ibv_dereg_mr(c.mr);
		ibv_destroy_cq(c.cq);
		ibv_dealloc_pd(c.pd);
		free(c.buf);
	}
}

static void rejecter(struct sockaddr_in *sin)
{
	struct rdma_event_channel *ch = listener(sin);
	for (;;) {
		struct rdma_cm_event *ev = next(ch, RDMA_CM_EVENT_CONNECT_REQUEST);
		struct rdma_cm_id *id = ev->id;
		rdma_ack_cm_event(ev);
		if (rdma_reject(id, NULL, 0))
			die("rdma_reject");
		printf("%s rejected\n", side);
		rdma_destroy_id(id);
	}
}

static void client(struct sockaddr_in *sin, int n, int size)
{
	struct rdma_event_channel *ch = rdma_create_event_channel();
	struct rdma_cm_id *id;
	struct rdma_conn_param p = {.responder_resources = 1, .initiator_depth = 1, .retry_count = 7, .rnr_retry_count = 7};
	struct conn c;
	if (!ch || rdma_create_id(ch, &id, NULL, ps))
		die("rdma_create_id");
	if (rdma_resolve_addr(id, NULL, (struct sockaddr *)sin, 2000))
		die("rdma_resolve_addr");
	rdma_ack_cm_event(next(ch, RDMA_CM_EVENT_ADDR_RESOLVED));
	if (rdma_resolve_route(id, 2000))
		die("rdma_resolve_route");
	rdma_ack_cm_event(next(ch, RDMA_CM_EVENT_ROUTE_RESOLVED));
	/* A UD client only asks (SIDR): the kernel needs no QP for it. */
	if (ps == RDMA_PS_TCP)
		setup(id, &c, n, size);
	if (rdma_connect(id, &p))
		die("rdma_connect");
	struct rdma_cm_event *ev;
	if (rdma_get_cm_event(ch, &ev))
		die("rdma_get_cm_event");
	printf("%s event %s status %d\n", side, rdma_event_str(ev->event), ev->status);
	if (ev->event == RDMA_CM_EVENT_REJECTED || ps == RDMA_PS_UDP)
		return; /* the reject server's answer, or the SIDR_REP's */
	if (ev->event != RDMA_CM_EVENT_ESTABLISHED) {
		printf("%s error: want %s\n", side, rdma_event_str(RDMA_CM_EVENT_ESTABLISHED));
		exit(1);
	}
	rdma_ack_cm_event(ev);
	post(id, &c, n, size, 1);
	/* The server's DREQ: hang up as rping does, which flushes. */
	rdma_ack_cm_event(next(ch, RDMA_CM_EVENT_DISCONNECTED));
	if (rdma_disconnect(id))
		die("rdma_disconnect");
	drain(&c, n, 0, 0, 0);
}

int main(int argc, char **argv)
{
	struct sockaddr_in sin;
	if (argc != 6) {
		fprintf(stderr, "usage: %s server|late|later|reject|client IP PORT N SIZE\n", argv[0]);
		return 2;
	}
	side = argv[1];
	/* udpclient, udpreject: the same over RDMA_PS_UDP (SIDR). */
	if (strncmp(side, "udp", 3) == 0) {
		ps = RDMA_PS_UDP;
		side += 3;
	}
	addr(argv[2], argv[3], &sin);
	setvbuf(stdout, NULL, _IOLBF, 0);
	if (strcmp(side, "server") == 0)
		server(&sin, atoi(argv[4]), atoi(argv[5]), 0);
	else if (strcmp(side, "late") == 0)
		server(&sin, atoi(argv[4]), atoi(argv[5]), 8);
	else if (strcmp(side, "later") == 0)
		server(&sin, atoi(argv[4]), atoi(argv[5]), 15);
	else if (strcmp(side, "reject") == 0)
		rejecter(&sin);
	else
		client(&sin, atoi(argv[4]), atoi(argv[5]));
	return 0;
}
