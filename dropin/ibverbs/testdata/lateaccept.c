/*
 * lateaccept: an rdma_cm server that answers one connect request late
 * (TestLateAcceptUDP), as conformance's rocesim-cmagent "later" does on
 * real rxe.
 *
 *   lateaccept IP PORT DELAY
 *
 * Listens on IP:PORT and prints "listening"; takes one CONNECT_REQUEST,
 * creates its QP (rdma_create_qp), sleeps DELAY seconds outside the
 * library, then rdma_accept; waits for ESTABLISHED, then for the
 * client's DREQ (DISCONNECTED), answers it (rdma_disconnect: the DREP)
 * and exits 0. Every CM event is printed as "event NAME status S".
 * Links with -lrdmacm -libverbs.
 */
#include <arpa/inet.h>
#include <errno.h>
#include <infiniband/verbs.h>
#include <netinet/in.h>
#include <rdma/rdma_cma.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static void die(const char *what)
{
	printf("error %s: %s\n", what, strerror(errno));
	exit(1);
}

/* next takes the next CM event, prints it and checks it is want. */
static struct rdma_cm_event *next(struct rdma_event_channel *ch, enum rdma_cm_event_type want)
{
	struct rdma_cm_event *ev;
	if (rdma_get_cm_event(ch, &ev))
		die("rdma_get_cm_event");
	printf("event %s status %d\n", rdma_event_str(ev->event), ev->status);
	if (ev->event != want) {
		printf("error: want %s\n", rdma_event_str(want));
		exit(1);
	}
	return ev;
}

int main(int argc, char **argv)
{
	struct sockaddr_in sin;
	struct rdma_event_channel *ch;
	struct rdma_cm_id *l, *id;
	struct rdma_cm_event *ev;
	struct ibv_qp_init_attr a;
	struct rdma_conn_param p = {.responder_resources = 1, .initiator_depth = 1, .retry_count = 7, .rnr_retry_count = 7};
	struct ibv_pd *pd;
	struct ibv_cq *cq;

	if (argc != 4) {
		fprintf(stderr, "usage: %s IP PORT DELAY\n", argv[0]);
		return 2;
	}
	setvbuf(stdout, NULL, _IOLBF, 0);
	memset(&sin, 0, sizeof(sin));
	sin.sin_family = AF_INET;
	sin.sin_port = htons(atoi(argv[2]));
	if (inet_pton(AF_INET, argv[1], &sin.sin_addr) != 1) {
		fprintf(stderr, "bad address %s\n", argv[1]);
		return 2;
	}
	if (!(ch = rdma_create_event_channel()) || rdma_create_id(ch, &l, NULL, RDMA_PS_TCP))
		die("rdma_create_id");
	if (rdma_bind_addr(l, (struct sockaddr *)&sin) || rdma_listen(l, 1))
		die("rdma_listen");
	printf("listening\n");

	ev = next(ch, RDMA_CM_EVENT_CONNECT_REQUEST);
	id = ev->id;
	rdma_ack_cm_event(ev);
	if (!(pd = ibv_alloc_pd(id->verbs)) || !(cq = ibv_create_cq(id->verbs, 4, NULL, NULL, 0)))
		die("ibv_create_cq");
	memset(&a, 0, sizeof(a));
	a.send_cq = cq;
	a.recv_cq = cq;
	a.qp_type = IBV_QPT_RC;
	a.cap.max_send_wr = 1;
	a.cap.max_recv_wr = 1;
	a.cap.max_send_sge = 1;
	a.cap.max_recv_sge = 1;
	if (rdma_create_qp(id, pd, &a))
		die("rdma_create_qp");
	printf("accept in %s s\n", argv[3]);
	sleep(atoi(argv[3]));
	if (rdma_accept(id, &p))
		die("rdma_accept");
	rdma_ack_cm_event(next(ch, RDMA_CM_EVENT_ESTABLISHED));
	rdma_ack_cm_event(next(ch, RDMA_CM_EVENT_DISCONNECTED));
	if (rdma_disconnect(id))
		die("rdma_disconnect");
	rdma_destroy_qp(id);
	rdma_destroy_id(id);
	ibv_destroy_cq(cq);
	ibv_dealloc_pd(pd);
	rdma_destroy_id(l);
	rdma_destroy_event_channel(ch);
	printf("done\n");
	return 0;
}
