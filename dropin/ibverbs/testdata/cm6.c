/*
 * cm6: rdma_cm over IPv6, run the same on the model and on real rxe
 * (conformance TestCM6Rxe compares the two outputs line by line; the
 * drop-in's TestCM6 compares the model's with the recorded rxe output,
 * testdata/cm6.rxe).
 *
 * The device's IPv6 address is its first IPv6 GID that is not link-local
 * (the guest's fd00::1: rxe's kernel resolves none of its own link-local
 * addresses, ENETUNREACH), else its GID 0 (the model's node has only its
 * link-local fe80::ff:fe00:i, given its interface as the scope where
 * there is one, as rping -a fe80::...%eth0 does). The process connects
 * to itself, one ID listening and one connecting, as rxe loops a
 * connection to its own address back.
 *
 * Part A: a connection over IPv6: every event, the IDs' addresses, the
 * path and the QPs' address vectors (as relations: "self", "hashed"), a
 * SEND, a disconnect. Part B: which listener takes which request (an
 * IPv4 listener on 0.0.0.0 and an IPv6 request; an IPv6 listener on ::
 * and an IPv4 request). Part D: the same for UD (SIDR): a request no
 * listener takes, and the address handle of one taken. Part C: the
 * families must agree. Part E: both sides disconnect at once and the
 * server's ID is destroyed at once: the client's DISCONNECTED, status 0.
 *
 * One line per case, "name: result"; a librdmacm call's result as "0" or
 * "-1 ERRNO"; nothing that differs between runs. Every wait is bounded.
 * Prints "cm6 done" at the end; always exits 0 (a step the rest needs
 * failing prints "cm6: stopped: ..." instead).
 */
#include <arpa/inet.h>
#include <errno.h>
#include <net/if.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <infiniband/verbs.h>
#include <rdma/rdma_cma.h>

#define MSG "hello over ipv6"	/* 16 bytes with its NUL */

static const char *ename(int e)
{
	static char s[16];

	switch (e) {
	case 0: return "0";
	case EINVAL: return "EINVAL";
	case EAFNOSUPPORT: return "EAFNOSUPPORT";
	case EADDRNOTAVAIL: return "EADDRNOTAVAIL";
	case EADDRINUSE: return "EADDRINUSE";
	case ENETUNREACH: return "ENETUNREACH";
	case EHOSTUNREACH: return "EHOSTUNREACH";
	case ENODEV: return "ENODEV";
	case ETIMEDOUT: return "ETIMEDOUT";
	default:
		snprintf(s, sizeof(s), "%d", e);
		return s;
	}
}

/* code prints a librdmacm call's result (-1 and errno, or 0). */
static int code(const char *name, int r)
{
	printf("%s: %s%s\n", name, r ? "-1 " : "", r ? ename(errno) : "0");
	fflush(stdout);
	return r;
}

static void stop(const char *what)
{
	printf("cm6: stopped: %s %s\n", what, ename(errno));
	exit(0);
}

static struct rdma_event_channel *srv_ch, *cli_ch;
static struct sockaddr_in6 self6;	/* the device's IPv6 address, port 0 */

/* next_event waits at most 5 s for ch's next event and prints it. */
static struct rdma_cm_event *next_event(struct rdma_event_channel *ch, const char *name)
{
	struct pollfd p = { .fd = ch->fd, .events = POLLIN };
	struct rdma_cm_event *ev;

	if (poll(&p, 1, 5000) != 1) {
		printf("%s: timeout\n", name);
		return NULL;
	}
	if (rdma_get_cm_event(ch, &ev)) {
		printf("%s: get_cm_event -1 %s\n", name, ename(errno));
		return NULL;
	}
	printf("%s: %s status=%d\n", name, rdma_event_str(ev->event), ev->status);
	fflush(stdout);
	return ev;
}

/* expect takes ch's next event, acks it, and says whether it is want. */
static int expect(struct rdma_event_channel *ch, const char *name, enum rdma_cm_event_type want)
{
	struct rdma_cm_event *ev = next_event(ch, name);
	int ok;

	if (!ev)
		return 0;
	ok = ev->event == want;
	rdma_ack_cm_event(ev);
	return ok;
}

static const char *family(const struct sockaddr *sa)
{
	return sa->sa_family == AF_INET6 ? "AF_INET6" : sa->sa_family == AF_INET ? "AF_INET" : "other";
}

/* is_self: "self" when sa is the device's address (its IPv6 one, or
 * 10.0.0.1), "any" for the unspecified address, else "other". */
static const char *is_self(const struct sockaddr *sa)
{
	const struct sockaddr_in6 *s6 = (const void *)sa;
	const struct sockaddr_in *s4 = (const void *)sa;

	if (sa->sa_family == AF_INET6) {
		if (IN6_IS_ADDR_UNSPECIFIED(&s6->sin6_addr))
			return "any";
		return !memcmp(&s6->sin6_addr, &self6.sin6_addr, 16) ? "self" : "other";
	}
	if (sa->sa_family == AF_INET) {
		if (s4->sin_addr.s_addr == htonl(INADDR_ANY))
			return "any";
		return s4->sin_addr.s_addr == htonl(0x0a000001) ? "self" : "other";
	}
	return "other";
}

static const char *gid_self(const union ibv_gid *g)
{
	return !memcmp(g->raw, &self6.sin6_addr, 16) ? "self" : "other";
}

/* port_str: a port as the program chose it (below 32768), or
 * "ephemeral" (the kernel's pick). */
static const char *port_str(__be16 p)
{
	static char s[2][16];
	static int i;

	if (ntohs(p) >= 32768)
		return "ephemeral";
	i ^= 1;
	snprintf(s[i], sizeof(s[i]), "%u", ntohs(p));
	return s[i];
}

/* addrs prints an ID's two addresses as relations. */
static void addrs(const char *name, struct rdma_cm_id *id)
{
	struct sockaddr *s = rdma_get_local_addr(id), *d = rdma_get_peer_addr(id);

	printf("%s: local=%s %s port=%s peer=%s %s port=%s\n", name, family(s), is_self(s),
	       port_str(rdma_get_src_port(id)), family(d), is_self(d), port_str(rdma_get_dst_port(id)));
}

/* av prints a QP's address vector as relations: the GID at its
 * sgid_index, its destination GID, the flow label against rdma_cm's
 * hash of the ports. */
static void av(const char *name, struct rdma_cm_id *id, unsigned sport, unsigned dport)
{
	struct ibv_qp_attr a;
	struct ibv_qp_init_attr ia;
	union ibv_gid sg;
	unsigned fl = (sport * 31 + dport) & 0xfffff;

	if (ibv_query_qp(id->qp, &a, IBV_QP_STATE | IBV_QP_AV | IBV_QP_PATH_MTU, &ia)) {
		printf("%s: query_qp failed\n", name);
		return;
	}
	memset(&sg, 0, sizeof(sg));
	ibv_query_gid(id->verbs, 1, a.ah_attr.grh.sgid_index, &sg);
	printf("%s: state=%d is_global=%d sgid=%s dgid=%s hop_limit=%d traffic_class=%d flow_label=%s path_mtu=%d\n",
	       name, a.qp_state, a.ah_attr.is_global, gid_self(&sg), gid_self(&a.ah_attr.grh.dgid),
	       a.ah_attr.grh.hop_limit, a.ah_attr.grh.traffic_class,
	       a.ah_attr.grh.flow_label == fl ? "hashed" : "other", a.path_mtu);
}

/* self_scope: the interface of rxe's GID 0 (eth0) as the scope of a
 * link-local address; where there is none (the model, which takes any
 * interface) lo's. */
static unsigned self_scope(struct ibv_context *ctx)
{
	char path[256], nd[IF_NAMESIZE + 2] = "";
	FILE *f;

	snprintf(path, sizeof(path), "/sys/class/infiniband/%s/ports/1/gid_attrs/ndevs/0",
		 ibv_get_device_name(ctx->device));
	f = fopen(path, "r");
	if (!f)
		return if_nametoindex("lo");
	if (!fgets(nd, sizeof(nd), f))
		nd[0] = 0;
	fclose(f);
	nd[strcspn(nd, "\n")] = 0;
	return if_nametoindex(nd);
}

static struct sockaddr_in6 at6(int port)
{
	struct sockaddr_in6 s = self6;

	s.sin6_port = htons(port);
	return s;
}

static struct sockaddr_in at4(const char *ip, int port)
{
	struct sockaddr_in s = { .sin_family = AF_INET, .sin_port = htons(port) };

	inet_pton(AF_INET, ip, &s.sin_addr);
	return s;
}

static struct rdma_cm_id *listener_ps(const char *name, struct sockaddr *sa, enum rdma_port_space ps)
{
	struct rdma_cm_id *l;
	char n[64];
	int r;

	if (rdma_create_id(srv_ch, &l, NULL, ps))
		stop("create_id");
	snprintf(n, sizeof(n), "%s_bind", name);
	/* A link-local address is tentative for a second or two after the
	 * guest's eth0 comes up (duplicate address detection): bound only
	 * then. The model's is not. */
	for (int i = 0;; i++) {
		r = rdma_bind_addr(l, sa);
		if (!r || errno != EADDRNOTAVAIL || i == 50)
			break;
		usleep(100000);
	}
	if (code(n, r))
		return l;
	snprintf(n, sizeof(n), "%s_listen", name);
	code(n, rdma_listen(l, 4));
	return l;
}

static struct rdma_cm_id *listener(const char *name, struct sockaddr *sa)
{
	return listener_ps(name, sa, RDMA_PS_TCP);
}

/* dial_ps resolves sa on a new client ID of port space ps, makes its
 * QP (RC for RDMA_PS_TCP, UD for RDMA_PS_UDP) and connects (a REQ, or
 * a SIDR_REQ); NULL if a step failed. */
static struct rdma_cm_id *dial_ps(const char *name, struct sockaddr *sa, struct ibv_pd *pd, struct ibv_cq *cq,
				  enum rdma_port_space ps)
{
	struct rdma_cm_id *c;
	struct ibv_qp_init_attr qa = { .send_cq = cq, .recv_cq = cq,
				       .qp_type = ps == RDMA_PS_UDP ? IBV_QPT_UD : IBV_QPT_RC,
				       .cap = { .max_send_wr = 4, .max_recv_wr = 4, .max_send_sge = 1, .max_recv_sge = 1 } };
	struct rdma_conn_param cp = { .responder_resources = 1, .initiator_depth = 1, .retry_count = 7, .rnr_retry_count = 7 };
	char n[64];

	if (rdma_create_id(cli_ch, &c, NULL, ps))
		stop("create_id");
	snprintf(n, sizeof(n), "%s_resolve_addr", name);
	if (code(n, rdma_resolve_addr(c, NULL, sa, 2000)))
		return NULL;
	if (!expect(cli_ch, n, RDMA_CM_EVENT_ADDR_RESOLVED))
		return NULL;
	snprintf(n, sizeof(n), "%s_resolve_route", name);
	if (code(n, rdma_resolve_route(c, 2000)) || !expect(cli_ch, n, RDMA_CM_EVENT_ROUTE_RESOLVED))
		return NULL;
	snprintf(n, sizeof(n), "%s_create_qp", name);
	if (code(n, rdma_create_qp(c, pd, &qa)))
		return NULL;
	snprintf(n, sizeof(n), "%s_connect", name);
	if (code(n, rdma_connect(c, ps == RDMA_PS_UDP ? &(struct rdma_conn_param){ 0 } : &cp)))
		return NULL;
	return c;
}

static struct rdma_cm_id *dial(const char *name, struct sockaddr *sa, struct ibv_pd *pd, struct ibv_cq *cq)
{
	return dial_ps(name, sa, pd, cq, RDMA_PS_TCP);
}

static int poll_one(struct ibv_cq *cq, struct ibv_wc *wc)
{
	for (int i = 0; i < 5000000; i++) {
		int n = ibv_poll_cq(cq, 1, wc);

		if (n)
			return n;
	}
	return 0;
}

int main(void)
{
	struct ibv_device **list;
	struct ibv_context *ctx;
	struct ibv_pd *pd;
	struct ibv_cq *ccq, *scq;
	struct ibv_mr *cmr, *smr;
	union ibv_gid g0;
	static char cbuf[64], sbuf[64];
	struct rdma_cm_id *l, *c, *s;
	struct rdma_cm_event *ev;
	struct ibv_wc wc;
	unsigned sport;

	list = ibv_get_device_list(NULL);
	if (!list || !list[0])
		stop("no device");
	ctx = ibv_open_device(list[0]);
	if (!ctx || ibv_query_gid(ctx, 1, 0, &g0))
		stop("open_device or query_gid");
	printf("gid0: %s\n", IN6_IS_ADDR_LINKLOCAL((struct in6_addr *)g0.raw) ? "link-local" : "other");
	/* The first IPv6 GID that is not link-local (rxe resolves none of
	 * its own link-local addresses: ENETUNREACH), else GID 0. */
	self6.sin6_family = AF_INET6;
	memcpy(&self6.sin6_addr, g0.raw, 16);
	self6.sin6_scope_id = self_scope(ctx);
	for (int i = 1; i < 16; i++) {
		union ibv_gid g;

		if (ibv_query_gid(ctx, 1, i, &g))
			break;
		if (!IN6_IS_ADDR_LINKLOCAL((struct in6_addr *)g.raw) && !IN6_IS_ADDR_V4MAPPED((struct in6_addr *)g.raw) &&
		    !IN6_IS_ADDR_UNSPECIFIED((struct in6_addr *)g.raw)) {
			memcpy(&self6.sin6_addr, g.raw, 16);
			self6.sin6_scope_id = 0;
			break;
		}
	}
	srv_ch = rdma_create_event_channel();
	cli_ch = rdma_create_event_channel();
	if (!srv_ch || !cli_ch)
		stop("create_event_channel");

	/* Part A: one connection over IPv6. The listener, bound to the
	 * device's address, has librdmacm's context of the device: the PD
	 * and CQs are made on it. */
	struct sockaddr_in6 la = at6(7471);

	l = listener("a", (struct sockaddr *)&la);
	addrs("a_listener", l);
	if (!l->verbs)
		stop("the listener has no device");
	pd = ibv_alloc_pd(l->verbs);	/* rdma_create_qp wants a PD of the ID's own context */
	ccq = ibv_create_cq(l->verbs, 8, NULL, NULL, 0);
	scq = ibv_create_cq(l->verbs, 8, NULL, NULL, 0);
	cmr = pd ? ibv_reg_mr(pd, cbuf, sizeof(cbuf), IBV_ACCESS_LOCAL_WRITE) : NULL;
	smr = pd ? ibv_reg_mr(pd, sbuf, sizeof(sbuf), IBV_ACCESS_LOCAL_WRITE) : NULL;
	if (!pd || !ccq || !scq || !cmr || !smr)
		stop("resources");
	c = dial("a", (struct sockaddr *)&la, pd, ccq);
	if (!c)
		stop("dial");
	addrs("a_client", c);
	printf("a_client path: num_paths=%d sgid=%s dgid=%s hop_limit=%d\n", c->route.num_paths,
	       gid_self(&c->route.addr.addr.ibaddr.sgid), gid_self(&c->route.addr.addr.ibaddr.dgid),
	       c->route.num_paths ? c->route.path_rec->hop_limit : -1);
	sport = ntohs(rdma_get_src_port(c));
	ev = next_event(srv_ch, "a_connect_request");
	if (!ev || ev->event != RDMA_CM_EVENT_CONNECT_REQUEST)
		stop("connect_request");
	s = ev->id;
	printf("a_connect_request: listen_id=%s\n", ev->listen_id == l ? "listener" : "other");
	rdma_ack_cm_event(ev);
	addrs("a_server", s);
	{
		struct ibv_qp_init_attr qa = { .send_cq = scq, .recv_cq = scq, .qp_type = IBV_QPT_RC,
					       .cap = { .max_send_wr = 4, .max_recv_wr = 4, .max_send_sge = 1, .max_recv_sge = 1 } };
		struct rdma_conn_param cp = { .responder_resources = 1, .initiator_depth = 1 };
		struct ibv_sge sge = { .addr = (uintptr_t)sbuf, .length = sizeof(sbuf), .lkey = smr->lkey };
		struct ibv_recv_wr rw = { .wr_id = 2, .sg_list = &sge, .num_sge = 1 }, *bad;

		if (code("a_server_create_qp", rdma_create_qp(s, pd, &qa)))
			stop("server qp");
		code("a_post_recv", ibv_post_recv(s->qp, &rw, &bad) ? -1 : 0);
		code("a_accept", rdma_accept(s, &cp));
	}
	if (!expect(cli_ch, "a_client", RDMA_CM_EVENT_ESTABLISHED) || !expect(srv_ch, "a_server", RDMA_CM_EVENT_ESTABLISHED))
		stop("establish");
	av("a_client qp", c, sport, 7471);
	av("a_server qp", s, sport, 7471);
	{
		struct ibv_sge sge = { .addr = (uintptr_t)cbuf, .length = sizeof(MSG), .lkey = cmr->lkey };
		struct ibv_send_wr sw = { .wr_id = 1, .sg_list = &sge, .num_sge = 1, .opcode = IBV_WR_SEND,
					  .send_flags = IBV_SEND_SIGNALED }, *bad;

		strcpy(cbuf, MSG);
		code("a_post_send", ibv_post_send(c->qp, &sw, &bad) ? -1 : 0);
		if (poll_one(ccq, &wc))
			printf("a_send: %s\n", ibv_wc_status_str(wc.status));
		else
			printf("a_send: no completion\n");
		if (poll_one(scq, &wc))
			printf("a_recv: %s byte_len=%u data=%s\n", ibv_wc_status_str(wc.status), wc.byte_len,
			       wc.status == IBV_WC_SUCCESS ? sbuf : "-");
		else
			printf("a_recv: no completion\n");
	}
	code("a_disconnect", rdma_disconnect(c));
	expect(srv_ch, "a_server", RDMA_CM_EVENT_DISCONNECTED);
	code("a_server_disconnect", rdma_disconnect(s));
	expect(cli_ch, "a_client", RDMA_CM_EVENT_DISCONNECTED);
	rdma_destroy_qp(c);
	rdma_destroy_qp(s);
	rdma_destroy_id(c);
	rdma_destroy_id(s);
	rdma_destroy_id(l);

	/* Part B: which listener takes which request. */
	struct sockaddr_in any4 = at4("0.0.0.0", 7472), v4 = at4("10.0.0.1", 7473);
	struct sockaddr_in6 to6 = at6(7472), any6 = { .sin6_family = AF_INET6, .sin6_port = htons(7473) };

	l = listener("b_any4", (struct sockaddr *)&any4);
	addrs("b_any4 listener", l);
	printf("b_any4 listener: verbs=%s\n", l->verbs ? "set" : "null");
	c = dial("b_v6_to_any4", (struct sockaddr *)&to6, pd, ccq);
	if (c) {
		expect(cli_ch, "b_v6_to_any4", RDMA_CM_EVENT_REJECTED);
		rdma_destroy_qp(c);
		rdma_destroy_id(c);
	}
	rdma_destroy_id(l);
	l = listener("b_any6", (struct sockaddr *)&any6);
	addrs("b_any6 listener", l);
	printf("b_any6 listener: verbs=%s\n", l->verbs ? "set" : "null");
	c = dial("b_v4_to_any6", (struct sockaddr *)&v4, pd, ccq);
	if (c) {
		ev = next_event(srv_ch, "b_v4_to_any6");
		if (ev && ev->event == RDMA_CM_EVENT_CONNECT_REQUEST) {
			s = ev->id;
			rdma_ack_cm_event(ev);
			addrs("b_v4_to_any6 server", s);
			code("b_reject", rdma_reject(s, NULL, 0));
			rdma_destroy_id(s);
		} else if (ev) {
			rdma_ack_cm_event(ev);
		}
		expect(cli_ch, "b_v4_to_any6 client", RDMA_CM_EVENT_REJECTED);
		rdma_destroy_qp(c);
		rdma_destroy_id(c);
	}
	rdma_destroy_id(l);

	/* Part D: UD (RDMA_PS_UDP, SIDR) over IPv6: a request no listener
	 * of its port takes, then one a :: listener takes, and the address
	 * handle the client's ESTABLISHED carries. */
	struct sockaddr_in any4u = at4("0.0.0.0", 7475);
	struct sockaddr_in6 to6u = at6(7475), any6u = { .sin6_family = AF_INET6, .sin6_port = htons(7476) },
			    to6u2 = at6(7476);

	l = listener_ps("d_any4", (struct sockaddr *)&any4u, RDMA_PS_UDP);
	c = dial_ps("d_v6_to_any4", (struct sockaddr *)&to6u, pd, ccq, RDMA_PS_UDP);
	if (c) {
		expect(cli_ch, "d_v6_to_any4", RDMA_CM_EVENT_UNREACHABLE);
		rdma_destroy_qp(c);
		rdma_destroy_id(c);
	}
	rdma_destroy_id(l);
	l = listener_ps("d_any6", (struct sockaddr *)&any6u, RDMA_PS_UDP);
	c = dial_ps("d_v6_to_any6", (struct sockaddr *)&to6u2, pd, ccq, RDMA_PS_UDP);
	if (c) {
		ev = next_event(srv_ch, "d_v6_to_any6");
		if (ev && ev->event == RDMA_CM_EVENT_CONNECT_REQUEST) {
			struct ibv_qp_init_attr qa = { .send_cq = scq, .recv_cq = scq, .qp_type = IBV_QPT_UD,
						       .cap = { .max_send_wr = 4, .max_recv_wr = 4, .max_send_sge = 1, .max_recv_sge = 1 } };
			struct rdma_conn_param cp = { 0 };

			s = ev->id;
			rdma_ack_cm_event(ev);
			addrs("d_v6_to_any6 server", s);
			code("d_server_create_qp", rdma_create_qp(s, pd, &qa));
			code("d_accept", rdma_accept(s, &cp));
			ev = next_event(cli_ch, "d_v6_to_any6 client");
			if (ev && ev->event == RDMA_CM_EVENT_ESTABLISHED) {
				struct rdma_ud_param *u = &ev->param.ud;
				union ibv_gid sg;

				memset(&sg, 0, sizeof(sg));
				ibv_query_gid(c->verbs, 1, u->ah_attr.grh.sgid_index, &sg);
				printf("d ah: qp_num=%s qkey=%#x is_global=%d sgid=%s dgid=%s hop_limit=%d\n",
				       u->qp_num == s->qp->qp_num ? "server's" : "other", u->qkey, u->ah_attr.is_global,
				       gid_self(&sg), gid_self(&u->ah_attr.grh.dgid), u->ah_attr.grh.hop_limit);
			}
			if (ev)
				rdma_ack_cm_event(ev);
			rdma_destroy_qp(s);
			rdma_destroy_id(s);
		} else if (ev) {
			rdma_ack_cm_event(ev);
		}
		rdma_destroy_qp(c);
		rdma_destroy_id(c);
	}
	rdma_destroy_id(l);

	/* Part C: the families must agree; an address no interface has. */
	{
		struct sockaddr_in b4 = at4("10.0.0.1", 0);
		struct sockaddr_in6 b6 = { .sin6_family = AF_INET6 }, to = at6(7474), off = { .sin6_family = AF_INET6,
											 .sin6_port = htons(7474) };
		struct sockaddr_in to4 = at4("10.0.0.1", 7474);
		struct sockaddr_in6 foreign = { .sin6_family = AF_INET6 }, ll = { .sin6_family = AF_INET6 };

		inet_pton(AF_INET6, "fd01::1", &off.sin6_addr);
		inet_pton(AF_INET6, "fd00::99", &foreign.sin6_addr);
		if (rdma_create_id(cli_ch, &c, NULL, RDMA_PS_TCP))
			stop("create_id");
		code("c_bind_ipv4", rdma_bind_addr(c, (struct sockaddr *)&b4));
		code("c_ipv4_id_resolves_ipv6", rdma_resolve_addr(c, NULL, (struct sockaddr *)&to, 2000));
		rdma_destroy_id(c);
		if (rdma_create_id(cli_ch, &c, NULL, RDMA_PS_TCP))
			stop("create_id");
		code("c_bind_any6", rdma_bind_addr(c, (struct sockaddr *)&b6));
		code("c_ipv6_id_resolves_ipv4", rdma_resolve_addr(c, NULL, (struct sockaddr *)&to4, 2000));
		rdma_destroy_id(c);
		if (rdma_create_id(cli_ch, &c, NULL, RDMA_PS_TCP))
			stop("create_id");
		code("c_src_ipv4_dst_ipv6", rdma_resolve_addr(c, (struct sockaddr *)&b4, (struct sockaddr *)&to, 2000));
		/* Did the refused resolve leave the ID bound to its src? */
		code("c_then_dst_ipv6", rdma_resolve_addr(c, NULL, (struct sockaddr *)&to, 2000));
		rdma_destroy_id(c);
		if (rdma_create_id(cli_ch, &c, NULL, RDMA_PS_TCP))
			stop("create_id");
		code("c_resolve_off_net", rdma_resolve_addr(c, NULL, (struct sockaddr *)&off, 2000));
		rdma_destroy_id(c);
		if (rdma_create_id(cli_ch, &c, NULL, RDMA_PS_TCP))
			stop("create_id");
		code("c_bind_foreign", rdma_bind_addr(c, (struct sockaddr *)&foreign));
		/* GID 0's link-local address with no scope: the kernel
		 * binds none (cma_check_linklocal), yet takes one to
		 * resolve (what follows is not waited for here). */
		memcpy(&ll.sin6_addr, g0.raw, 16);
		code("c_bind_link_local_no_scope", rdma_bind_addr(c, (struct sockaddr *)&ll));
		ll.sin6_port = htons(7474);
		code("c_resolve_link_local_no_scope", rdma_resolve_addr(c, NULL, (struct sockaddr *)&ll, 2000));
		rdma_destroy_id(c);
	}

	/* Part E: both sides disconnect at once, and the server's ID is
	 * destroyed at once, as by a server that exits: the client's
	 * DISCONNECTED comes at once with status 0 (the server's DREQ
	 * crossing its own, or the server's DREP), not after its DREQ's
	 * retries have run out (status -110). Fresh channels: part C's
	 * last resolve is not waited for. */
	{
		struct sockaddr_in6 da = at6(7475);
		struct rdma_event_channel *srv_old = srv_ch, *cli_old = cli_ch;

		srv_ch = rdma_create_event_channel();
		cli_ch = rdma_create_event_channel();
		if (!srv_ch || !cli_ch)
			stop("create_event_channel");
		l = listener("e", (struct sockaddr *)&da);
		c = dial("e", (struct sockaddr *)&da, pd, ccq);
		if (!c)
			stop("dial");
		ev = next_event(srv_ch, "e_connect_request");
		if (!ev || ev->event != RDMA_CM_EVENT_CONNECT_REQUEST)
			stop("connect_request");
		s = ev->id;
		rdma_ack_cm_event(ev);
		{
			struct ibv_qp_init_attr qa = { .send_cq = scq, .recv_cq = scq, .qp_type = IBV_QPT_RC,
						       .cap = { .max_send_wr = 4, .max_recv_wr = 4, .max_send_sge = 1,
								.max_recv_sge = 1 } };
			struct rdma_conn_param cp = { .responder_resources = 1, .initiator_depth = 1 };

			if (code("e_server_create_qp", rdma_create_qp(s, pd, &qa)))
				stop("server qp");
			code("e_accept", rdma_accept(s, &cp));
		}
		if (!expect(cli_ch, "e_client", RDMA_CM_EVENT_ESTABLISHED) ||
		    !expect(srv_ch, "e_server", RDMA_CM_EVENT_ESTABLISHED))
			stop("establish");
		code("e_client_disconnect", rdma_disconnect(c));
		code("e_server_disconnect", rdma_disconnect(s));
		rdma_destroy_qp(s);
		code("e_server_destroy", rdma_destroy_id(s));
		expect(cli_ch, "e_client", RDMA_CM_EVENT_DISCONNECTED);
		rdma_destroy_qp(c);
		rdma_destroy_id(c);
		rdma_destroy_id(l);
		rdma_destroy_event_channel(srv_ch);
		rdma_destroy_event_channel(cli_ch);
		srv_ch = srv_old;
		cli_ch = cli_old;
	}
	ibv_dereg_mr(cmr);
	ibv_dereg_mr(smr);
	ibv_destroy_cq(ccq);
	ibv_destroy_cq(scq);
	ibv_dealloc_pd(pd);
	rdma_destroy_event_channel(srv_ch);
	rdma_destroy_event_channel(cli_ch);
	ibv_close_device(ctx);
	ibv_free_device_list(list);
	printf("cm6 done\n");
	return 0;
}
