/*
 * cm_misuse: the common misuses of librdmacm, one a line, each printed
 * as "name ret errno-name" (TestRdmacmMisuse compares the lines with
 * what librdmacm answers). Built against rdma-core's <rdma/rdma_cma.h>,
 * run on the drop-in librdmacm.so.1 with ROCESIM_DEVICES=2 (rocesim0 is
 * 10.0.0.1, rocesim1 10.0.0.2), and on real rxe at 10.0.0.1 in a
 * conformance guest (conformance TestRdmacmMisuseRxe) with --real, where
 * each misuse runs in a child process: rdma-core's librdmacm crashes on
 * some (a NULL ID, rdma_accept on an unconnected ID), which prints
 * "name crash"; the drop-in says EINVAL there.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>
#include <sys/wait.h>
#include <arpa/inet.h>
#include <rdma/rdma_cma.h>

static const char *ename(int e)
{
	switch (e) {
	case 0: return "0";
	case EINVAL: return "EINVAL";
	case EAGAIN: return "EAGAIN";
	case ENOSYS: return "ENOSYS";
	case EADDRNOTAVAIL: return "EADDRNOTAVAIL";
	case EAFNOSUPPORT: return "EAFNOSUPPORT";
	case EADDRINUSE: return "EADDRINUSE";
	case EOPNOTSUPP: return "EOPNOTSUPP";
	default: return strerror(e);
	}
}

static int real;

#define CHECK(name, call) do { \
	errno = 0; \
	long r_ = (long)(call); \
	printf("%s %ld %s\n", name, r_, ename(r_ ? errno : 0)); \
	fflush(stdout); \
} while (0)

/* CRASHY is CHECK for a call that should fail and change nothing, and
 * that rdma-core's librdmacm crashes on (seen on real rxe: a NULL ID,
 * an ID with no device). On real librdmacm (--real) it runs in a child
 * process, so that the crash prints "name crash" and the rest goes on
 * (the drop-in library cannot fork: its Go runtime does not survive
 * that; and the kernel refuses a child's ucma calls, so only calls that
 * never reach it can run there). */
#define CRASHY(name, call) do { \
	if (!real) { \
		CHECK(name, call); \
		break; \
	} \
	pid_t p_ = fork(); \
	if (p_ == 0) { \
		CHECK(name, call); \
		_exit(0); \
	} \
	int st_ = 0; \
	waitpid(p_, &st_, 0); \
	if (WIFSIGNALED(st_)) \
		printf("%s crash\n", name); \
	fflush(stdout); \
} while (0)

static struct sockaddr_in sin4(const char *ip, int port)
{
	struct sockaddr_in s;

	memset(&s, 0, sizeof(s));
	s.sin_family = AF_INET;
	s.sin_port = htons(port);
	inet_pton(AF_INET, ip, &s.sin_addr);
	return s;
}

/* next_event takes the channel's next event, or, on real librdmacm,
 * says "name timeout" and ends the run if none comes in 10 s (a wrong
 * guess of what the kernel answers must not hang the guest); the test
 * that runs the model bounds its run itself. */
static const char *waiting_for;

static void timed_out(int sig)
{
	char b[128];
	int n = snprintf(b, sizeof(b), "%s timeout\n", waiting_for);

	(void)sig;
	if (write(1, b, n) < 0)
		_exit(4);
	_exit(3);
}

static struct rdma_cm_event *next_event(struct rdma_event_channel *ch, const char *name)
{
	struct rdma_cm_event *ev = NULL;

	waiting_for = name;
	if (real) {
		signal(SIGALRM, timed_out);
		alarm(10);
	}
	if (rdma_get_cm_event(ch, &ev))
		printf("%s get_event %s\n", name, ename(errno));
	if (real)
		alarm(0);
	return ev;
}

/* event_line prints an event as "name EVENT status=N" and acks it. */
static struct rdma_cm_id *event_line(struct rdma_event_channel *ch, const char *name)
{
	struct rdma_cm_event *ev = next_event(ch, name);
	struct rdma_cm_id *id;

	if (!ev)
		return NULL;
	printf("%s %s status=%d\n", name, rdma_event_str(ev->event), ev->status);
	fflush(stdout);
	id = ev->id;
	rdma_ack_cm_event(ev);
	return id;
}

/* connect_to makes an ID in port space ps that connects to the
 * device's own address at port, naming qpn as its QP (no QP needed for
 * the exchange to start), printing "name_connect" for rdma_connect; the
 * listener's CONNECT_REQUEST is the next event, printed as name, and its
 * ID is returned in *req. */
static struct rdma_cm_id *connect_to(struct rdma_event_channel *ch, enum rdma_port_space ps, int port,
				     uint32_t qpn, const char *name, struct rdma_cm_id **req)
{
	struct sockaddr_in self = sin4("10.0.0.1", port);
	struct rdma_conn_param cp;
	struct rdma_cm_event *ev;
	struct rdma_cm_id *id;
	char call[64];

	rdma_create_id(ch, &id, NULL, ps);
	rdma_resolve_addr(id, NULL, (struct sockaddr *)&self, 2000);
	if ((ev = next_event(ch, name)))
		rdma_ack_cm_event(ev);
	rdma_resolve_route(id, 2000);
	if ((ev = next_event(ch, name)))
		rdma_ack_cm_event(ev);
	memset(&cp, 0, sizeof(cp));
	cp.qp_num = qpn;
	cp.retry_count = cp.rnr_retry_count = 7;
	snprintf(call, sizeof(call), "%s_connect", name);
	CHECK(call, rdma_connect(id, &cp));
	*req = event_line(ch, name);
	return id;
}

static volatile int acked;

static void *ack_later(void *ev)
{
	usleep(200 * 1000);
	acked = 1;
	rdma_ack_cm_event(ev);
	return NULL;
}

int main(int argc, char **argv)
{
	real = argc > 1 && !strcmp(argv[1], "--real");
	struct rdma_event_channel *ch = rdma_create_event_channel();
	struct rdma_cm_id *id, *id2;
	struct rdma_cm_event *ev;
	struct sockaddr_in any = sin4("0.0.0.0", 7174), far = sin4("10.9.9.9", 7174);
	struct sockaddr_in peer = sin4("10.0.0.1", 7174); /* the device's own: no ARP */
	struct ibv_qp_init_attr qa;
	struct ibv_qp_attr qattr;
	int qmask = 0;
	pthread_t th;
	int one = 1;

	if (!ch) {
		perror("rdma_create_event_channel");
		return 1;
	}
	memset(&qa, 0, sizeof(qa));
	qa.qp_type = IBV_QPT_RC;
	qa.cap.max_send_wr = qa.cap.max_recv_wr = qa.cap.max_send_sge = qa.cap.max_recv_sge = 1;

	CHECK("create_id_bad_ps", rdma_create_id(ch, &id, NULL, (enum rdma_port_space)0x9999));
	/* rdma-core writes *id unchecked after the kernel made the ID. */
	if (!real)
		CHECK("create_id_null_out", rdma_create_id(ch, NULL, NULL, RDMA_PS_TCP));
	{
		CRASHY("destroy_id_null", rdma_destroy_id(NULL));
		CRASHY("get_event_null_channel", rdma_get_cm_event(NULL, &ev));
		CRASHY("get_event_null_out", rdma_get_cm_event(ch, NULL));
		CRASHY("ack_event_null", rdma_ack_cm_event(NULL));
		CRASHY("bind_null_id", rdma_bind_addr(NULL, (struct sockaddr *)&any));
		CRASHY("connect_null_id", rdma_connect(NULL, NULL));
		CRASHY("accept_null_id", rdma_accept(NULL, NULL));
	}

	if (rdma_create_id(ch, &id, NULL, RDMA_PS_TCP)) {
		perror("rdma_create_id");
		return 1;
	}
	/* No device yet: nothing to say of a QP's attributes. */
	memset(&qattr, 0, sizeof(qattr));
	qattr.qp_state = IBV_QPS_INIT;
	CHECK("init_qp_attr_unbound", rdma_init_qp_attr(id, &qattr, &qmask));
	CHECK("establish_unbound", rdma_establish(id));
	CRASHY("bind_null_addr", rdma_bind_addr(id, NULL));
	CHECK("bind_foreign_addr", rdma_bind_addr(id, (struct sockaddr *)&far));
	CRASHY("connect_before_resolve", rdma_connect(id, NULL));
	CRASHY("accept_unconnected", rdma_accept(id, NULL));
	CHECK("reject_unconnected", rdma_reject(id, NULL, 0));
	CRASHY("disconnect_unconnected", rdma_disconnect(id));
	CRASHY("resolve_route_before_addr", rdma_resolve_route(id, 2000));
	CRASHY("create_qp_unbound", rdma_create_qp(id, NULL, &qa));
	CRASHY("resolve_addr_null_dst", rdma_resolve_addr(id, NULL, NULL, 2000));
	CHECK("set_option_unknown", rdma_set_option(id, 99, 99, &one, sizeof(one)));
	fcntl(ch->fd, F_SETFL, fcntl(ch->fd, F_GETFL) | O_NONBLOCK);
	CHECK("get_event_nonblock_empty", rdma_get_cm_event(ch, &ev));
	fcntl(ch->fd, F_SETFL, fcntl(ch->fd, F_GETFL) & ~O_NONBLOCK);
	printf("event_str_unknown %s\n", rdma_event_str((enum rdma_cm_event_type)99));

	/* An event held while the ID is destroyed: rdma_destroy_id waits
	 * until another thread acks it, as librdmacm's does. */
	CHECK("resolve_addr", rdma_resolve_addr(id, NULL, (struct sockaddr *)&peer, 2000));
	CHECK("get_event", rdma_get_cm_event(ch, &ev));
	printf("event %s\n", rdma_event_str(ev->event));
	CRASHY("connect_before_route", rdma_connect(id, NULL));
	/* Before rdma_connect the kernel has no ib_cm ID to ask: INIT's
	 * fields, with no access flags, whatever state is asked. */
	memset(&qattr, 0, sizeof(qattr));
	qattr.qp_state = IBV_QPS_RTR;
	qmask = 0;
	CHECK("init_qp_attr_before_connect", rdma_init_qp_attr(id, &qattr, &qmask));
	printf("init_qp_attr_before_connect_attr mask=%#x state=%d access=%#x port=%d pkey_index=%d\n", qmask,
	       qattr.qp_state, qattr.qp_access_flags, qattr.port_num, qattr.pkey_index);
	CHECK("establish_before_connect", rdma_establish(id));
	pthread_create(&th, NULL, ack_later, ev);
	CHECK("destroy_id_unacked", rdma_destroy_id(id));
	printf("destroy_returned_after_ack %d\n", acked);
	pthread_join(th, NULL);

	/* A second listener on a port: EADDRINUSE. */
	rdma_create_id(ch, &id, NULL, RDMA_PS_TCP);
	rdma_create_id(ch, &id2, NULL, RDMA_PS_TCP);
	CHECK("bind_any", rdma_bind_addr(id, (struct sockaddr *)&any));
	CHECK("listen", rdma_listen(id, 1));
	CHECK("bind_any_again", rdma_bind_addr(id2, (struct sockaddr *)&any));
	CHECK("listen_same_port", rdma_listen(id2, 1));
	CHECK("listen_twice", rdma_listen(id, 1));
	rdma_destroy_id(id2);

	/* A connect request whose new ID is destroyed unanswered is
	 * rejected at once (cm_destroy_id: a consumer reject), not left to
	 * time out. The client names a QP number of its own (no QP is
	 * needed for the exchange to start). */
	{
		struct sockaddr_in self = sin4("10.0.0.1", 7174);
		struct rdma_conn_param cp;
		struct rdma_cm_id *req;

		rdma_create_id(ch, &id2, NULL, RDMA_PS_TCP);
		rdma_resolve_addr(id2, NULL, (struct sockaddr *)&self, 2000);
		rdma_get_cm_event(ch, &ev);
		rdma_ack_cm_event(ev);
		rdma_resolve_route(id2, 2000);
		rdma_get_cm_event(ch, &ev);
		rdma_ack_cm_event(ev);
		memset(&cp, 0, sizeof(cp));
		cp.qp_num = 0x4242;
		cp.retry_count = cp.rnr_retry_count = 7;
		CHECK("connect_own_qpn", rdma_connect(id2, &cp));
		CHECK("get_request", rdma_get_cm_event(ch, &ev));
		printf("request_event %s qp_num=%#x\n", rdma_event_str(ev->event), ev->param.conn.qp_num);
		req = ev->id;
		rdma_ack_cm_event(ev);
		CHECK("destroy_unanswered_request", rdma_destroy_id(req));
		CHECK("get_answer", rdma_get_cm_event(ch, &ev));
		printf("answer_event %s status=%d\n", rdma_event_str(ev->event), ev->status);
		rdma_ack_cm_event(ev);
		rdma_destroy_id(id2);
	}

	/* rdma_destroy_id in each state of a connection (cm_destroy_id):
	 * the peer learns at once what became of it. */
	{
		struct rdma_cm_id *cl, *req, *req2, *ul;
		struct rdma_conn_param cp;

		/* Connecting, REQ_SENT: ib_cm's REJ of reason timeout voids
		 * the listener's request, with no event: the next events are
		 * the next connection's, and answering the request fails. */
		cl = connect_to(ch, RDMA_PS_TCP, 7174, 0x4343, "connecting_request", &req2);
		CHECK("destroy_connecting", rdma_destroy_id(cl));

		/* Accepted, REP_SENT, the client owing its RTU
		 * (CONNECT_RESPONSE: its QP is its own): a consumer REJ. */
		cl = connect_to(ch, RDMA_PS_TCP, 7174, 0x4444, "accepted_request", &req);
		CHECK("reject_after_client_destroyed", rdma_reject(req2, NULL, 0));
		rdma_destroy_id(req2);
		memset(&cp, 0, sizeof(cp));
		cp.qp_num = 0x4545;
		CHECK("accept_own_qpn", rdma_accept(req, &cp));
		event_line(ch, "accepted_response");
		CHECK("destroy_accepted", rdma_destroy_id(req));
		event_line(ch, "accepted_destroyed_event");
		rdma_destroy_id(cl);

		/* rdma_disconnect on an ID with an ib_cm ID but no
		 * connection (ib_send_cm_dreq and _drep both refuse): 0,
		 * nothing sent; twice after a disconnect: 0 again. */
		cl = connect_to(ch, RDMA_PS_TCP, 7174, 0x4a4a, "disc_request", &req);
		CHECK("disconnect_listener", rdma_disconnect(id));
		CHECK("disconnect_connecting", rdma_disconnect(cl));
		CHECK("disconnect_unaccepted", rdma_disconnect(req));
		memset(&cp, 0, sizeof(cp));
		cp.qp_num = 0x4b4b;
		CHECK("accept_after_disconnect", rdma_accept(req, &cp));
		event_line(ch, "disc_response");
		CHECK("disconnect_accepted", rdma_disconnect(req));
		CHECK("disconnect_response", rdma_disconnect(cl));
		rdma_destroy_id(cl);
		rdma_destroy_id(req);

		/* A bound ID has its device's PD (ucma_get_device), which
		 * rdma_create_qp uses when given none. */
		{
			struct sockaddr_in self = sin4("10.0.0.1", 7174);

			rdma_create_id(ch, &cl, NULL, RDMA_PS_TCP);
			rdma_resolve_addr(cl, NULL, (struct sockaddr *)&self, 2000);
			if ((ev = next_event(ch, "qp_pd")))
				rdma_ack_cm_event(ev);
			CHECK("create_qp_null_pd", rdma_create_qp(cl, NULL, &qa));
			printf("qp_pd id_pd=%d same=%d\n", cl->pd != NULL, cl->qp && cl->qp->pd == cl->pd);
			rdma_destroy_qp(cl);

			/* rdma_create_qp_ex with send opcodes: an extended QP
			 * whose builders are the opcodes asked for, on the
			 * ID's PD and CQs librdmacm makes; opcodes the device
			 * lacks refuse it. */
			struct ibv_qp_init_attr_ex qx;

			memset(&qx, 0, sizeof(qx));
			qx.qp_type = IBV_QPT_RC;
			qx.cap.max_send_wr = qx.cap.max_recv_wr = 4;
			qx.cap.max_send_sge = qx.cap.max_recv_sge = 1;
			qx.comp_mask = IBV_QP_INIT_ATTR_SEND_OPS_FLAGS;
			qx.send_ops_flags = IBV_QP_EX_WITH_SEND | IBV_QP_EX_WITH_RDMA_WRITE;
			CHECK("create_qp_ex_send_ops", rdma_create_qp_ex(cl, &qx));
			struct ibv_qp_ex *x = cl->qp ? ibv_qp_to_qp_ex(cl->qp) : NULL;

			printf("qp_ex ex=%d send=%d write=%d read=%d pd=%d cqs=%d\n", x != NULL, x && x->wr_send,
			       x && x->wr_rdma_write, x && x->wr_rdma_read, qx.pd == cl->pd,
			       qx.send_cq == cl->send_cq && qx.recv_cq == cl->recv_cq && cl->send_cq);
			rdma_destroy_qp(cl);
			memset(&qx, 0, sizeof(qx));
			qx.qp_type = IBV_QPT_RC;
			qx.cap.max_send_wr = qx.cap.max_recv_wr = 4;
			qx.cap.max_send_sge = qx.cap.max_recv_sge = 1;
			qx.comp_mask = IBV_QP_INIT_ATTR_SEND_OPS_FLAGS;
			qx.send_ops_flags = IBV_QP_EX_WITH_TSO;
			CHECK("create_qp_ex_tso", rdma_create_qp_ex(cl, &qx));
			printf("create_qp_ex_tso_left qp=%d send_cq=%d\n", cl->qp != NULL, cl->send_cq != NULL);
			rdma_destroy_id(cl);
		}

		/* Established, never disconnected: a DREQ, and the peer
		 * answers it with its rdma_disconnect. */
		cl = connect_to(ch, RDMA_PS_TCP, 7174, 0x4646, "established_request", &req);
		memset(&cp, 0, sizeof(cp));
		cp.qp_num = 0x4747;
		rdma_accept(req, &cp);
		event_line(ch, "established_response");
		CHECK("establish", rdma_establish(cl));
		event_line(ch, "established_event");
		CHECK("destroy_established", rdma_destroy_id(cl));
		event_line(ch, "established_destroyed_event");
		CHECK("disconnect_destroyed_peer", rdma_disconnect(req));
		rdma_destroy_id(req);

		/* A UD (SIDR) request destroyed unanswered: a SIDR_REP,
		 * status 2 (IB_SIDR_REJECT). */
		rdma_create_id(ch, &ul, NULL, RDMA_PS_UDP);
		CHECK("bind_udp", rdma_bind_addr(ul, (struct sockaddr *)&any));
		CHECK("listen_udp", rdma_listen(ul, 1));
		cl = connect_to(ch, RDMA_PS_UDP, 7174, 0x4848, "sidr_request", &req);
		CHECK("destroy_unanswered_sidr", rdma_destroy_id(req));
		event_line(ch, "sidr_answer_event");
		rdma_destroy_id(cl);
		rdma_destroy_id(ul);

		/* rdma_set_option: the ID options programs set (perftest
		 * the TOS, UCX address reuse and the ACK timeout), each with
		 * the size the kernel wants (ucma_set_option_id). */
		{
			uint8_t u8v = 0x10;
			int iv = 1;

			rdma_create_id(ch, &cl, NULL, RDMA_PS_TCP);
			rdma_create_id(ch, &ul, NULL, RDMA_PS_UDP);
			CHECK("set_option_tos", rdma_set_option(cl, RDMA_OPTION_ID, RDMA_OPTION_ID_TOS, &u8v, sizeof(u8v)));
			CHECK("set_option_tos_int", rdma_set_option(cl, RDMA_OPTION_ID, RDMA_OPTION_ID_TOS, &iv, sizeof(iv)));
			CHECK("set_option_reuseaddr", rdma_set_option(cl, RDMA_OPTION_ID, RDMA_OPTION_ID_REUSEADDR, &iv, sizeof(iv)));
			CHECK("set_option_reuseaddr_byte", rdma_set_option(cl, RDMA_OPTION_ID, RDMA_OPTION_ID_REUSEADDR, &u8v, sizeof(u8v)));
			CHECK("set_option_afonly", rdma_set_option(cl, RDMA_OPTION_ID, RDMA_OPTION_ID_AFONLY, &iv, sizeof(iv)));
			CHECK("set_option_ack_timeout", rdma_set_option(cl, RDMA_OPTION_ID, RDMA_OPTION_ID_ACK_TIMEOUT, &u8v, sizeof(u8v)));
			CHECK("set_option_ack_timeout_int", rdma_set_option(cl, RDMA_OPTION_ID, RDMA_OPTION_ID_ACK_TIMEOUT, &iv, sizeof(iv)));
			CHECK("set_option_ack_timeout_udp", rdma_set_option(ul, RDMA_OPTION_ID, RDMA_OPTION_ID_ACK_TIMEOUT, &u8v, sizeof(u8v)));
			CHECK("set_option_bad_level", rdma_set_option(cl, 99, RDMA_OPTION_ID_TOS, &u8v, sizeof(u8v)));
			/* The states each option is taken in (rdma_set_reuseaddr,
			 * rdma_set_afonly): reuse turned off only before a bind,
			 * on anywhere but on a listener; IPv6-only while IDLE,
			 * bound or not. */
			{
				struct sockaddr_in opt = sin4("0.0.0.0", 7190);
				int off = 0;

				CHECK("set_option_reuseaddr_off_idle", rdma_set_option(cl, RDMA_OPTION_ID, RDMA_OPTION_ID_REUSEADDR, &off, sizeof(off)));
				CHECK("bind_for_options", rdma_bind_addr(cl, (struct sockaddr *)&opt));
				CHECK("set_option_reuseaddr_off_bound", rdma_set_option(cl, RDMA_OPTION_ID, RDMA_OPTION_ID_REUSEADDR, &off, sizeof(off)));
				CHECK("set_option_reuseaddr_on_bound", rdma_set_option(cl, RDMA_OPTION_ID, RDMA_OPTION_ID_REUSEADDR, &iv, sizeof(iv)));
				CHECK("set_option_afonly_bound", rdma_set_option(cl, RDMA_OPTION_ID, RDMA_OPTION_ID_AFONLY, &iv, sizeof(iv)));
				CHECK("listen_for_options", rdma_listen(cl, 1));
				CHECK("set_option_reuseaddr_on_listener", rdma_set_option(cl, RDMA_OPTION_ID, RDMA_OPTION_ID_REUSEADDR, &iv, sizeof(iv)));
				CHECK("set_option_reuseaddr_off_listener", rdma_set_option(cl, RDMA_OPTION_ID, RDMA_OPTION_ID_REUSEADDR, &off, sizeof(off)));
				CHECK("set_option_afonly_listener", rdma_set_option(cl, RDMA_OPTION_ID, RDMA_OPTION_ID_AFONLY, &iv, sizeof(iv)));
				CHECK("set_option_tos_listener", rdma_set_option(cl, RDMA_OPTION_ID, RDMA_OPTION_ID_TOS, &u8v, sizeof(u8v)));
			}
			rdma_destroy_id(cl);
			rdma_destroy_id(ul);
		}
	}
	/* Sharing a port (cma_check_port): two IDs that both allow address
	 * reuse bind it; an ID that does not is refused by either, with
	 * EADDRINUSE for the same address and EADDRNOTAVAIL for the any
	 * address; a reusable ID listens only once the port is its own,
	 * and is not reusable from then on. */
	{
		struct rdma_cm_id *r1, *r2, *r3;
		struct sockaddr_in self = sin4("10.0.0.1", 7300), anyp = sin4("0.0.0.0", 7300);
		int on = 1;

		rdma_create_id(ch, &r1, NULL, RDMA_PS_TCP);
		rdma_create_id(ch, &r2, NULL, RDMA_PS_TCP);
		rdma_create_id(ch, &r3, NULL, RDMA_PS_TCP);
		rdma_set_option(r1, RDMA_OPTION_ID, RDMA_OPTION_ID_REUSEADDR, &on, sizeof(on));
		rdma_set_option(r2, RDMA_OPTION_ID, RDMA_OPTION_ID_REUSEADDR, &on, sizeof(on));
		CHECK("reuse_bind_first", rdma_bind_addr(r1, (struct sockaddr *)&self));
		CHECK("reuse_bind_both", rdma_bind_addr(r2, (struct sockaddr *)&self));
		CHECK("reuse_bind_one_not_same_addr", rdma_bind_addr(r3, (struct sockaddr *)&self));
		CHECK("reuse_bind_one_not_any", rdma_bind_addr(r3, (struct sockaddr *)&anyp));
		CHECK("reuse_listen_shared", rdma_listen(r1, 1));
		rdma_destroy_id(r2);
		CHECK("reuse_listen_alone", rdma_listen(r1, 1));
		rdma_create_id(ch, &r2, NULL, RDMA_PS_TCP);
		rdma_set_option(r2, RDMA_OPTION_ID, RDMA_OPTION_ID_REUSEADDR, &on, sizeof(on));
		CHECK("reuse_bind_by_listener", rdma_bind_addr(r2, (struct sockaddr *)&self));
		rdma_destroy_id(r1);
		CHECK("reuse_bind_after_listener", rdma_bind_addr(r2, (struct sockaddr *)&self));
		rdma_destroy_id(r2);
		rdma_destroy_id(r3);
	}
	/* The port rdma_resolve_addr gives an unbound ID is its own until
	 * it is destroyed: another ID's bind to it is refused, on the any
	 * address and on the device's (which resolution gave the ID). */
	{
		struct rdma_cm_id *c, *o;
		struct sockaddr_in to = sin4("10.0.0.1", 7174);

		rdma_create_id(ch, &c, NULL, RDMA_PS_TCP);
		rdma_create_id(ch, &o, NULL, RDMA_PS_TCP);
		rdma_resolve_addr(c, NULL, (struct sockaddr *)&to, 2000);
		if ((ev = next_event(ch, "resolved_port")))
			rdma_ack_cm_event(ev);
		uint16_t port = ntohs(rdma_get_src_port(c));
		struct sockaddr_in anyp = sin4("0.0.0.0", port), selfp = sin4("10.0.0.1", port);

		printf("resolved_port_ephemeral %d\n", port >= 32768 && port <= 60999);
		CHECK("bind_resolved_port_any", rdma_bind_addr(o, (struct sockaddr *)&anyp));
		CHECK("bind_resolved_port_same", rdma_bind_addr(o, (struct sockaddr *)&selfp));
		rdma_destroy_id(c);
		CHECK("bind_resolved_port_freed", rdma_bind_addr(o, (struct sockaddr *)&selfp));
		rdma_destroy_id(o);
	}
	/* A bind to port 0 takes an ephemeral port at once (cma_get_port:
	 * cma_alloc_any_port), each ID its own, which rdma_listen keeps;
	 * rdma_listen on an unbound ID binds it to one too, and librdmacm
	 * shows both (it queries the address after the bind and the
	 * listen). */
	{
		struct sockaddr_in zero = sin4("10.0.0.1", 0);
		struct rdma_cm_id *z1, *z2, *z3;
		uint16_t p1, p2, p3;

		rdma_create_id(ch, &z1, NULL, RDMA_PS_TCP);
		rdma_create_id(ch, &z2, NULL, RDMA_PS_TCP);
		rdma_create_id(ch, &z3, NULL, RDMA_PS_TCP);
		CHECK("bind_port0", rdma_bind_addr(z1, (struct sockaddr *)&zero));
		p1 = ntohs(rdma_get_src_port(z1));
		printf("bind_port0_ephemeral %d\n", p1 >= 32768 && p1 <= 60999);
		CHECK("bind_port0_second", rdma_bind_addr(z2, (struct sockaddr *)&zero));
		p2 = ntohs(rdma_get_src_port(z2));
		printf("bind_port0_distinct %d\n", p2 != p1 && p2 >= 32768 && p2 <= 60999);
		CHECK("bind_port0_listen", rdma_listen(z1, 1));
		printf("bind_port0_listen_keeps %d\n", ntohs(rdma_get_src_port(z1)) == p1);
		CHECK("listen_unbound", rdma_listen(z3, 1));
		p3 = ntohs(rdma_get_src_port(z3));
		printf("listen_unbound_ephemeral %d\n", p3 >= 32768 && p3 <= 60999 && p3 != p1 && p3 != p2);
		rdma_destroy_id(z3);
		rdma_destroy_id(z2);
		rdma_destroy_id(z1);
	}
	rdma_destroy_id(id);
	rdma_destroy_event_channel(ch);
	printf("done\n");
	return 0;
}
