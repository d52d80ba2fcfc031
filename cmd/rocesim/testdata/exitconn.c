/*
 * exitconn: a client that connects through librdmacm and returns from
 * main with the connection up, never calling rdma_disconnect or
 * rdma_destroy_id, and a server that waits for what that does to its
 * side. On Linux the kernel destroys the client's IDs when the process's
 * rdma_cm file closes, and the server gets RDMA_CM_EVENT_DISCONNECTED
 * (cm_destroy_id sends the DREQ); TestExecExitConnected holds the
 * drop-in to the same. The kernel does it for a process killed by a
 * signal too (its files close as it dies), hence -k.
 *
 *	exitconn -s PORT	the server: prints "established", then the
 *				next event's name, and exits 0 on DISCONNECTED
 *	exitconn -c ADDR PORT	the client: prints "established" and exits
 *	exitconn -k ADDR PORT	the client, killed by SIGKILL once connected
 *				(no exit handler, no destructor runs)
 */
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <arpa/inet.h>
#include <rdma/rdma_cma.h>

static struct rdma_cm_event *next(struct rdma_event_channel *ch)
{
	struct rdma_cm_event *ev;

	if (rdma_get_cm_event(ch, &ev)) {
		perror("rdma_get_cm_event");
		exit(2);
	}
	return ev;
}

static void qp_for(struct rdma_cm_id *id)
{
	struct ibv_qp_init_attr qa;

	memset(&qa, 0, sizeof(qa));
	qa.qp_type = IBV_QPT_RC;
	qa.cap.max_send_wr = qa.cap.max_recv_wr = qa.cap.max_send_sge = qa.cap.max_recv_sge = 1;
	if (rdma_create_qp(id, NULL, &qa)) { /* the device's PD, as librdmacm gives */
		perror("rdma_create_qp");
		exit(2);
	}
}

int main(int argc, char **argv)
{
	struct rdma_event_channel *ch = rdma_create_event_channel();
	struct rdma_conn_param cp;
	struct sockaddr_in sa;
	struct rdma_cm_event *ev;
	struct rdma_cm_id *id;

	if (argc < 3 || !ch || rdma_create_id(ch, &id, NULL, RDMA_PS_TCP)) {
		fprintf(stderr, "usage: exitconn -s PORT | -c ADDR PORT | -k ADDR PORT\n");
		return 2;
	}
	memset(&sa, 0, sizeof(sa));
	sa.sin_family = AF_INET;
	memset(&cp, 0, sizeof(cp));
	cp.responder_resources = cp.initiator_depth = 1;
	cp.retry_count = cp.rnr_retry_count = 7;
	if (!strcmp(argv[1], "-s")) {
		sa.sin_port = htons(atoi(argv[2]));
		if (rdma_bind_addr(id, (struct sockaddr *)&sa) || rdma_listen(id, 1)) {
			perror("listen");
			return 2;
		}
		for (;;) {
			ev = next(ch);
			printf("%s\n", rdma_event_str(ev->event));
			fflush(stdout);
			switch (ev->event) {
			case RDMA_CM_EVENT_CONNECT_REQUEST:
				qp_for(ev->id);
				if (rdma_accept(ev->id, &cp)) {
					perror("rdma_accept");
					return 2;
				}
				break;
			case RDMA_CM_EVENT_ESTABLISHED:
				break;
			case RDMA_CM_EVENT_DISCONNECTED:
				rdma_disconnect(ev->id);
				rdma_ack_cm_event(ev);
				return 0;
			default:
				return 1;
			}
			rdma_ack_cm_event(ev);
		}
	}
	if (argc < 4)
		return 2;
	sa.sin_port = htons(atoi(argv[3]));
	inet_pton(AF_INET, argv[2], &sa.sin_addr);
	if (rdma_resolve_addr(id, NULL, (struct sockaddr *)&sa, 2000))
		return 2;
	rdma_ack_cm_event(next(ch));
	if (rdma_resolve_route(id, 2000))
		return 2;
	rdma_ack_cm_event(next(ch));
	qp_for(id);
	if (rdma_connect(id, &cp))
		return 2;
	ev = next(ch);
	if (ev->event != RDMA_CM_EVENT_ESTABLISHED) {
		/* The words rocesim's tests take for a server not yet
		 * listening, as rping's. */
		fprintf(stderr, "cma event %s, error %d\n", rdma_event_str(ev->event), ev->status);
		return 1;
	}
	printf("established\n");
	if (!strcmp(argv[1], "-k")) {
		fflush(stdout);
		raise(SIGKILL);
	}
	return 0; /* connected: no rdma_disconnect, no rdma_destroy_id */
}
