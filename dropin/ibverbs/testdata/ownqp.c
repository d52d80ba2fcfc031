/*
 * ownqp: a connection through librdmacm whose QPs the program makes and
 * moves itself, as UCX does: ibv_create_qp, rdma_init_qp_attr before
 * each ibv_modify_qp, rdma_connect and rdma_accept naming the QP by
 * qp_num, RDMA_CM_EVENT_CONNECT_RESPONSE on the active side and
 * rdma_establish to answer it. Both sides run in this one process, on
 * one event channel, over the device's own address (a loopback
 * connection, as rxe makes one). Then a SEND each way and an RDMA READ
 * cross, and the connection is taken down.
 *
 * usage: ownqp [port] ; prints "ownqp ok" and exits 0, or says what
 * went wrong and exits 1.
 */
#include <arpa/inet.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <rdma/rdma_cma.h>

static struct rdma_event_channel *ch;

#define die(...) do { printf(__VA_ARGS__); printf("\n"); exit(1); } while (0)

/* event takes the next event, which must be want, and acks it. */
static void event(enum rdma_cm_event_type want, struct rdma_cm_id **id, uint32_t *qpn)
{
	struct rdma_cm_event *ev;

	if (rdma_get_cm_event(ch, &ev))
		die("rdma_get_cm_event: %s", strerror(errno));
	if (ev->event != want)
		die("event %s (status %d), want %s", rdma_event_str(ev->event), ev->status, rdma_event_str(want));
	if (id)
		*id = ev->id;
	if (qpn)
		*qpn = ev->param.conn.qp_num;
	rdma_ack_cm_event(ev);
}

/* move takes qp to state with the attributes the ID gives for it. */
static void move(struct rdma_cm_id *id, struct ibv_qp *qp, enum ibv_qp_state state)
{
	struct ibv_qp_attr attr;
	int mask;

	memset(&attr, 0, sizeof(attr));
	attr.qp_state = state;
	if (rdma_init_qp_attr(id, &attr, &mask))
		die("rdma_init_qp_attr(%d): %s", state, strerror(errno));
	if (attr.qp_state != state || !(mask & IBV_QP_STATE))
		die("rdma_init_qp_attr(%d) gave state %d, mask %#x", state, attr.qp_state, mask);
	if (ibv_modify_qp(qp, &attr, mask))
		die("ibv_modify_qp to %d with rdma_init_qp_attr's mask %#x: %s", state, mask, strerror(errno));
}

static struct ibv_qp *make_qp(struct ibv_pd *pd, struct ibv_cq *cq)
{
	struct ibv_qp_init_attr ia;
	struct ibv_qp *qp;

	memset(&ia, 0, sizeof(ia));
	ia.send_cq = ia.recv_cq = cq;
	ia.qp_type = IBV_QPT_RC;
	ia.cap.max_send_wr = ia.cap.max_recv_wr = 4;
	ia.cap.max_send_sge = ia.cap.max_recv_sge = 1;
	qp = ibv_create_qp(pd, &ia);
	if (!qp)
		die("ibv_create_qp: %s", strerror(errno));
	return qp;
}

/* poll waits for n completions on cq, each a success. */
static void poll(struct ibv_cq *cq, int n)
{
	struct ibv_wc wc;
	int got = 0, spins = 0;

	while (got < n) {
		int k = ibv_poll_cq(cq, 1, &wc);

		if (k < 0)
			die("ibv_poll_cq: %d", k);
		if (k == 0) {
			if (++spins > 10000000)
				die("%d of %d completions", got, n);
			continue;
		}
		if (wc.status != IBV_WC_SUCCESS)
			die("wr %llu: %s", (unsigned long long)wc.wr_id, ibv_wc_status_str(wc.status));
		got++;
	}
}

int main(int argc, char **argv)
{
	struct rdma_cm_id *listen_id, *cid, *sid, *eid;
	struct rdma_conn_param param;
	struct sockaddr_in addr;
	struct ibv_qp_attr attr;
	struct ibv_qp *cqp, *sqp;
	struct ibv_pd *pd;
	struct ibv_cq *ccq, *scq;
	struct ibv_mr *mr;
	struct ibv_sge sge;
	struct ibv_send_wr wr[2], *bad;
	struct ibv_sge s0, s1, s2, rsge;
	struct ibv_send_wr back;
	struct ibv_recv_wr rwr, *rbad;
	static char buf[4096];
	uint32_t qpn;
	int mask;

	ch = rdma_create_event_channel();
	if (!ch)
		die("rdma_create_event_channel: %s", strerror(errno));
	memset(&addr, 0, sizeof(addr));
	addr.sin_family = AF_INET;
	addr.sin_port = htons(argc > 1 ? atoi(argv[1]) : 7471);
	if (rdma_create_id(ch, &listen_id, NULL, RDMA_PS_TCP) || rdma_bind_addr(listen_id, (struct sockaddr *)&addr) ||
	    rdma_listen(listen_id, 1))
		die("listen: %s", strerror(errno));

	/* The active side: address, route, its own QP in INIT. */
	if (rdma_create_id(ch, &cid, NULL, RDMA_PS_TCP))
		die("rdma_create_id: %s", strerror(errno));
	inet_pton(AF_INET, "10.0.0.1", &addr.sin_addr);
	if (rdma_resolve_addr(cid, NULL, (struct sockaddr *)&addr, 2000))
		die("rdma_resolve_addr: %s", strerror(errno));
	event(RDMA_CM_EVENT_ADDR_RESOLVED, NULL, NULL);
	if (rdma_resolve_route(cid, 2000))
		die("rdma_resolve_route: %s", strerror(errno));
	event(RDMA_CM_EVENT_ROUTE_RESOLVED, NULL, NULL);
	pd = ibv_alloc_pd(cid->verbs);
	ccq = ibv_create_cq(cid->verbs, 8, NULL, NULL, 0);
	scq = ibv_create_cq(cid->verbs, 8, NULL, NULL, 0);
	mr = pd ? ibv_reg_mr(pd, buf, sizeof(buf), IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_READ) : NULL;
	if (!pd || !ccq || !scq || !mr)
		die("pd, cq or mr: %s", strerror(errno));
	cqp = make_qp(pd, ccq);
	move(cid, cqp, IBV_QPS_INIT);

	/* Without a parameter there is no QP number to connect: EINVAL. */
	if (rdma_connect(cid, NULL) == 0 || errno != EINVAL)
		die("rdma_connect(NULL) with no QP of its own: %s, want EINVAL", strerror(errno));
	memset(&param, 0, sizeof(param));
	param.qp_num = cqp->qp_num;
	param.responder_resources = param.initiator_depth = 1;
	param.retry_count = param.rnr_retry_count = 7;
	if (rdma_connect(cid, &param))
		die("rdma_connect: %s", strerror(errno));
	/* The peer is not known before the REP: no RTR yet. */
	memset(&attr, 0, sizeof(attr));
	attr.qp_state = IBV_QPS_RTR;
	if (rdma_init_qp_attr(cid, &attr, &mask) == 0 || errno != EINVAL)
		die("rdma_init_qp_attr(RTR) before the REP: %s, want EINVAL", strerror(errno));

	/* The passive side: its own QP to RTS before the REP, a receive. */
	event(RDMA_CM_EVENT_CONNECT_REQUEST, &sid, &qpn);
	if (qpn != cqp->qp_num)
		die("CONNECT_REQUEST names QP %#x, want %#x", qpn, cqp->qp_num);
	sqp = make_qp(pd, scq);
	move(sid, sqp, IBV_QPS_INIT);
	move(sid, sqp, IBV_QPS_RTR);
	move(sid, sqp, IBV_QPS_RTS);
	sge.addr = (uintptr_t)buf;
	sge.length = 64;
	sge.lkey = mr->lkey;
	memset(&rwr, 0, sizeof(rwr));
	rwr.wr_id = 7;
	rwr.sg_list = &sge;
	rwr.num_sge = 1;
	if (ibv_post_recv(sqp, &rwr, &rbad))
		die("ibv_post_recv: %s", strerror(errno));
	memset(&param, 0, sizeof(param));
	param.qp_num = sqp->qp_num;
	param.responder_resources = param.initiator_depth = 1;
	if (rdma_accept(sid, &param))
		die("rdma_accept: %s", strerror(errno));

	/* The active side: CONNECT_RESPONSE, INIT again (now with the
	 * connection's access flags), RTR, RTS, then the RTU. */
	event(RDMA_CM_EVENT_CONNECT_RESPONSE, NULL, &qpn);
	if (qpn != sqp->qp_num)
		die("CONNECT_RESPONSE names QP %#x, want %#x", qpn, sqp->qp_num);
	move(cid, cqp, IBV_QPS_INIT);
	move(cid, cqp, IBV_QPS_RTR);
	move(cid, cqp, IBV_QPS_RTS);
	/* A receive for the passive side's SEND (it sends from the PSN this
	 * side receives from, which the REQ advertised). */
	rsge.addr = (uintptr_t)(buf + 3072);
	rsge.length = 64;
	rsge.lkey = mr->lkey;
	rwr.wr_id = 8;
	rwr.sg_list = &rsge;
	if (ibv_post_recv(cqp, &rwr, &rbad))
		die("ibv_post_recv (active): %s", strerror(errno));
	if (rdma_establish(cid))
		die("rdma_establish: %s", strerror(errno));
	event(RDMA_CM_EVENT_ESTABLISHED, &eid, NULL);
	if (eid != sid)
		die("ESTABLISHED on another ID than the passive one");

	/* A SEND, and a READ of what the passive side holds at 1024. */
	strcpy(buf + 512, "ping");
	strcpy(buf + 1024, "pong");
	memset(wr, 0, sizeof(wr));
	s0.addr = (uintptr_t)(buf + 512);
	s1.addr = (uintptr_t)(buf + 2048);
	s0.length = s1.length = 5;
	s0.lkey = s1.lkey = mr->lkey;
	wr[0].wr_id = 1;
	wr[0].opcode = IBV_WR_SEND;
	wr[0].sg_list = &s0;
	wr[0].num_sge = 1;
	wr[0].send_flags = IBV_SEND_SIGNALED;
	wr[0].next = &wr[1];
	wr[1].wr_id = 2;
	wr[1].opcode = IBV_WR_RDMA_READ;
	wr[1].sg_list = &s1;
	wr[1].num_sge = 1;
	wr[1].send_flags = IBV_SEND_SIGNALED;
	wr[1].wr.rdma.remote_addr = (uintptr_t)(buf + 1024);
	wr[1].wr.rdma.rkey = mr->rkey;
	if (ibv_post_send(cqp, wr, &bad))
		die("ibv_post_send: %s", strerror(errno));
	strcpy(buf + 256, "back");
	s2.addr = (uintptr_t)(buf + 256);
	s2.length = 5;
	s2.lkey = mr->lkey;
	memset(&back, 0, sizeof(back));
	back.wr_id = 3;
	back.opcode = IBV_WR_SEND;
	back.sg_list = &s2;
	back.num_sge = 1;
	back.send_flags = IBV_SEND_SIGNALED;
	if (ibv_post_send(sqp, &back, &bad))
		die("ibv_post_send (passive): %s", strerror(errno));
	poll(ccq, 3);
	poll(scq, 2);
	if (strcmp(buf, "ping") || strcmp(buf + 2048, "pong") || strcmp(buf + 3072, "back"))
		die("received %.5s and %.5s, read %.5s", buf, buf + 3072, buf + 2048);

	if (rdma_disconnect(cid))
		die("rdma_disconnect: %s", strerror(errno));
	event(RDMA_CM_EVENT_DISCONNECTED, NULL, NULL);
	if (rdma_disconnect(sid))
		die("rdma_disconnect (passive): %s", strerror(errno));
	event(RDMA_CM_EVENT_DISCONNECTED, NULL, NULL);
	ibv_destroy_qp(cqp);
	ibv_destroy_qp(sqp);
	rdma_destroy_id(cid);
	rdma_destroy_id(sid);
	rdma_destroy_id(listen_id);
	rdma_destroy_event_channel(ch);
	printf("ownqp ok\n");
	return 0;
}
