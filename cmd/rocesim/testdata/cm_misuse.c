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
	rdma_destroy_id(id);
	rdma_destroy_event_channel(ch);
	printf("done\n");
	return 0;
}
