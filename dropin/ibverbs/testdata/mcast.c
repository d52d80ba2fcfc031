/*
 * mcast: multicast, run the same on the model and on real rxe (conformance
 * TestMcastRxe compares the two outputs line by line).
 *
 * Part A, verbs only: what ibv_attach_mcast and ibv_detach_mcast accept
 * and refuse on one device, destroying a QP still attached, the number of
 * QPs one group takes, and the device's multicast limits.
 * Part B, rdma_cm as mckey does it on the device's 10.0.0.1: two receivers
 * and a sender join 224.0.0.5 (each with a UD QP, receives posted), the
 * join events' every field, three SENDs to the group and what each QP
 * gets (the sender's own included, with the IPv4 header rxe leaves in the
 * last 20 bytes of the GRH area), a leave, and joins that are refused.
 *
 * One line per case, "name: result": a verb's code as an errno name ("0",
 * "EINVAL", ...), a librdmacm call's as "-1 ERRNO"; nothing that differs
 * between runs (a QPN only as a relation: src_qp=sender). Every wait is
 * bounded. Prints "mcast done" at the end; always exits 0 (a step the
 * rest needs failing prints "mcast: stopped: ..." instead), so that the
 * test runs the other side too.
 */
#include <arpa/inet.h>
#include <errno.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>
#include <infiniband/verbs.h>
#include <rdma/rdma_cma.h>

#define GRH 40		/* a UD receive's first bytes: the GRH, or rxe's IPv4 header in its last 20 */
#define MSG 100		/* the message */
#define SLOT 256
#define NRECV 8
#define NSEND 4
#define LIMIT 57	/* one past rxe's max_mcast_qp_attach */

static const char *ename(int e)
{
	static char s[16];

	switch (e) {
	case 0: return "0";
	case EINVAL: return "EINVAL";
	case ENOMEM: return "ENOMEM";
	case EBUSY: return "EBUSY";
	case ENOENT: return "ENOENT";
	case ENODEV: return "ENODEV";
	case ENOSYS: return "ENOSYS";
	case ENODATA: return "ENODATA";
	case EEXIST: return "EEXIST";
	case EPERM: return "EPERM";
	case EOPNOTSUPP: return "EOPNOTSUPP";
	case EAFNOSUPPORT: return "EAFNOSUPPORT";
	case EADDRNOTAVAIL: return "EADDRNOTAVAIL";
	case ETIMEDOUT: return "ETIMEDOUT";
	default:
		snprintf(s, sizeof(s), "%d", e);	/* 524: the kernel's ENOTSUPP */
		return s;
	}
}

/* code prints a call's result: a verb returns the errno, librdmacm -1 and
 * sets errno. */
static int code(const char *name, int r)
{
	if (r == -1)
		printf("%s: -1 %s\n", name, ename(errno));
	else
		printf("%s: %s\n", name, ename(r));
	fflush(stdout);
	return r;
}

static void stop(const char *what)
{
	printf("mcast: stopped: %s %s\n", what, ename(errno));
	exit(0);
}

static union ibv_gid gid(const char *text)
{
	union ibv_gid g;

	inet_pton(AF_INET6, text, g.raw);
	return g;
}

static struct sockaddr_in sin4(const char *ip)
{
	struct sockaddr_in s = { .sin_family = AF_INET };

	inet_pton(AF_INET, ip, &s.sin_addr);
	return s;
}

static struct ibv_qp *ud_qp(struct ibv_pd *pd, struct ibv_cq *cq, enum ibv_qp_type type)
{
	struct ibv_qp_init_attr qa = {
		.send_cq = cq, .recv_cq = cq, .qp_type = type,
		.cap = { .max_send_wr = 1, .max_recv_wr = 1, .max_send_sge = 1, .max_recv_sge = 1 },
	};

	return ibv_create_qp(pd, &qa);
}

/* to_rts takes a UD QP to RTS with Q_Key qkey. */
static int to_rts(struct ibv_qp *qp, uint32_t qkey)
{
	struct ibv_qp_attr a = { .qp_state = IBV_QPS_INIT, .port_num = 1, .qkey = qkey };

	if (ibv_modify_qp(qp, &a, IBV_QP_STATE | IBV_QP_PKEY_INDEX | IBV_QP_PORT | IBV_QP_QKEY))
		return -1;
	a.qp_state = IBV_QPS_RTR;
	if (ibv_modify_qp(qp, &a, IBV_QP_STATE))
		return -1;
	a.qp_state = IBV_QPS_RTS;
	return ibv_modify_qp(qp, &a, IBV_QP_STATE | IBV_QP_SQ_PSN);
}

/*
 * deliver: a QP attached with ibv_attach_mcast alone, no rdma_cm join,
 * and a datagram from a QP of the same device to the group. On Linux the
 * host takes a group's datagrams only once its IP layer has joined the
 * group (rdma_join_multicast's IGMP join); every host is in the
 * all-hosts group 224.0.0.1 from the start.
 */
static void deliver(struct ibv_pd *pd, struct ibv_cq *cq, const char *name, const char *group)
{
	union ibv_gid g = gid(group);
	struct ibv_qp *r = ud_qp(pd, cq, IBV_QPT_UD), *s = ud_qp(pd, cq, IBV_QPT_UD);
	static char buf[512];
	struct ibv_mr *mr = ibv_reg_mr(pd, buf, sizeof(buf), IBV_ACCESS_LOCAL_WRITE);
	struct ibv_ah_attr aa = { .is_global = 1, .port_num = 1,
				  .grh = { .dgid = g, .sgid_index = 1, .hop_limit = 64 } };
	struct ibv_ah *ah;
	struct ibv_sge rs, ss;
	struct ibv_recv_wr rw = { .wr_id = 1, .sg_list = &rs, .num_sge = 1 }, *rbad;
	struct ibv_send_wr sw = { .wr_id = 2, .sg_list = &ss, .num_sge = 1, .opcode = IBV_WR_SEND,
				  .send_flags = IBV_SEND_SIGNALED }, *sbad;
	struct ibv_wc wc;
	struct timespec t0, t;
	int sends = 0, recvs = 0;

	if (!r || !s || !mr || to_rts(r, 0x11) || to_rts(s, 0x11) || !(ah = ibv_create_ah(pd, &aa)))
		stop("deliver set-up");
	rs = (struct ibv_sge){ .addr = (uintptr_t)buf, .length = 256, .lkey = mr->lkey };
	ss = (struct ibv_sge){ .addr = (uintptr_t)buf + 256, .length = 8, .lkey = mr->lkey };
	sw.wr.ud.ah = ah;
	sw.wr.ud.remote_qpn = 0xffffff;
	sw.wr.ud.remote_qkey = 0x11;
	if (ibv_post_recv(r, &rw, &rbad) || ibv_attach_mcast(r, &g, 0) || ibv_post_send(s, &sw, &sbad))
		stop("deliver post");
	clock_gettime(CLOCK_MONOTONIC, &t0);
	do {
		while (ibv_poll_cq(cq, 1, &wc) == 1) {
			if (wc.status == IBV_WC_SUCCESS && wc.opcode == IBV_WC_SEND)
				sends++;
			else if (wc.status == IBV_WC_SUCCESS && wc.opcode == IBV_WC_RECV)
				recvs++;
		}
		clock_gettime(CLOCK_MONOTONIC, &t);
	} while ((t.tv_sec - t0.tv_sec) * 1000 + (t.tv_nsec - t0.tv_nsec) / 1000000 < 1000);
	printf("%s: sent %d received %d\n", name, sends, recvs);
	if (ibv_detach_mcast(r, &g, 0) || ibv_destroy_ah(ah) || ibv_destroy_qp(r) || ibv_destroy_qp(s) || ibv_dereg_mr(mr))
		printf("%s: cleanup failed\n", name);
}

/* Part A: QPs in RESET, one device opened directly. */
static void verbs_only(void)
{
	struct ibv_device **list = ibv_get_device_list(NULL);
	struct ibv_context *ctx;
	struct ibv_pd *pd;
	struct ibv_cq *cq;
	struct ibv_qp *ud, *rc, *many[LIMIT];
	struct ibv_device_attr da;
	union ibv_gid g5 = gid("::ffff:224.0.0.5"), g6 = gid("ff0e::1"), g7 = gid("::ffff:224.0.0.7"),
		      g9 = gid("::ffff:224.0.0.9"), uni = gid("::ffff:10.0.0.1");
	int attached[LIMIT], n, r, first = -1, err = 0, bad = 0;

	if (!list || !list[0] || !(ctx = ibv_open_device(list[0])))
		stop("open_device");
	if (!(pd = ibv_alloc_pd(ctx)) || !(cq = ibv_create_cq(ctx, 64, NULL, NULL, 0)))
		stop("alloc_pd/create_cq");
	if (!(ud = ud_qp(pd, cq, IBV_QPT_UD)) || !(rc = ud_qp(pd, cq, IBV_QPT_RC)))
		stop("create_qp");
	code("attach_ud_reset", ibv_attach_mcast(ud, &g5, 0));
	code("attach_again", ibv_attach_mcast(ud, &g5, 0));
	code("attach_unicast_gid", ibv_attach_mcast(ud, &uni, 0));
	code("attach_ipv6_group", ibv_attach_mcast(ud, &g6, 0));
	code("attach_rc", ibv_attach_mcast(rc, &g5, 0));
	code("detach_never_attached", ibv_detach_mcast(ud, &g7, 0));
	code("detach", ibv_detach_mcast(ud, &g5, 0));
	code("detach_again", ibv_detach_mcast(ud, &g5, 0));
	/* Still in ff0e::1: the kernel keeps the QP. */
	if (code("destroy_attached_qp", ibv_destroy_qp(ud)) == 0) {
		printf("detach_ipv6_group: no QP\ndestroy_detached_qp: no QP\n");
	} else {
		code("detach_ipv6_group", ibv_detach_mcast(ud, &g6, 0));
		code("destroy_detached_qp", ibv_destroy_qp(ud));
	}
	code("destroy_rc", ibv_destroy_qp(rc));

	/* One group, LIMIT QPs: the first refusal. */
	for (n = 0; n < LIMIT; n++) {
		if (!(many[n] = ud_qp(pd, cq, IBV_QPT_UD)))
			stop("create_qp for the group limit");
		r = ibv_attach_mcast(many[n], &g9, 0);
		attached[n] = r == 0;
		if (r && first < 0) {
			first = n;
			err = r;
		}
	}
	if (first < 0)
		printf("group_limit: all %d attached\n", LIMIT);
	else
		printf("group_limit: qp %d refused %s\n", first, ename(err));
	for (n = 0; n < LIMIT; n++) {
		if (attached[n] && ibv_detach_mcast(many[n], &g9, 0))
			bad++;
		if (ibv_destroy_qp(many[n]))
			bad++;
	}
	printf("group_cleanup: %d failed\n", bad);

	deliver(pd, cq, "attach_only", "::ffff:224.0.0.11");
	deliver(pd, cq, "all_hosts", "::ffff:224.0.0.1");

	code("query_device", ibv_query_device(ctx, &da));
	printf("max_mcast_grp: %d\nmax_mcast_qp_attach: %d\nmax_total_mcast_qp_attach: %d\n",
	       da.max_mcast_grp, da.max_mcast_qp_attach, da.max_total_mcast_qp_attach);
	bad = !!ibv_destroy_cq(cq) + !!ibv_dealloc_pd(pd) + !!ibv_close_device(ctx);
	printf("verbs_cleanup: %d failed\n", bad);
	ibv_free_device_list(list);
}

/* Part B: one end of the group, an rdma_cm ID with a UD QP of its own. */
struct end {
	const char *name;
	struct rdma_cm_id *id;
	struct ibv_cq *scq, *rcq;
	struct ibv_mr *mr;
	struct ibv_ah *ah;	/* the sender's, to the group */
	uint32_t rqpn, rqkey;	/* from the join event */
	char buf[(NRECV + NSEND) * SLOT];
	char lines[16][192];	/* a round's completions */
	int nlines, got;
};

static struct rdma_event_channel *ch;
static struct ibv_pd *pd;
static struct end recv1 = { .name = "recv1" }, recv2 = { .name = "recv2" }, sender = { .name = "sender" };
static struct end *ends[] = { &recv1, &recv2, &sender };

/* next_event waits at most 5 s for the channel's next event. */
static struct rdma_cm_event *next_event(const char *name)
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
	return ev;
}

/* join_event prints a join's event, every field of its ud param, and
 * keeps what a sender needs; 0 if it is MULTICAST_JOIN. */
static int join_event(struct end *e, const char *name, void *context, struct ibv_ah_attr *ah)
{
	struct rdma_cm_event *ev = next_event(name);
	struct rdma_ud_param *u;
	char g[INET6_ADDRSTRLEN];
	int ok;

	if (!ev)
		return -1;
	u = &ev->param.ud;
	ok = ev->event == RDMA_CM_EVENT_MULTICAST_JOIN;
	printf("%s: %s status=%d id=%s context=%s private_data_len=%d qp_num=%#x qkey=%#x\n", name,
	       rdma_event_str(ev->event), ev->status, ev->id == e->id ? "own" : "other",
	       u->private_data == context ? "given" : "other", u->private_data_len, u->qp_num, u->qkey);
	if (ok) {
		inet_ntop(AF_INET6, u->ah_attr.grh.dgid.raw, g, sizeof(g));
		printf("%s ah: is_global=%d dgid=%s sgid_index=%d hop_limit=%d traffic_class=%d flow_label=%#x dlid=%#x sl=%d port_num=%d\n",
		       name, u->ah_attr.is_global, g, u->ah_attr.grh.sgid_index, u->ah_attr.grh.hop_limit,
		       u->ah_attr.grh.traffic_class, u->ah_attr.grh.flow_label, u->ah_attr.dlid,
		       u->ah_attr.sl, u->ah_attr.port_num);
		if (ah)
			*ah = u->ah_attr;
		e->rqpn = u->qp_num;
		e->rqkey = u->qkey;
	}
	rdma_ack_cm_event(ev);
	return ok ? 0 : -1;
}

static void post_recv(struct end *e, int slot)
{
	struct ibv_sge sge = { .addr = (uintptr_t)e->buf + slot * SLOT, .length = GRH + MSG, .lkey = e->mr->lkey };
	struct ibv_recv_wr wr = { .wr_id = slot, .sg_list = &sge, .num_sge = 1 }, *bad;

	if (ibv_post_recv(e->id->qp, &wr, &bad))
		stop("post_recv");
}

/* join makes e's ID, resolves 10.0.0.1 -> 224.0.0.5, makes its QP, posts
 * its receives and joins the group, as mckey does. */
static void join(struct end *e, struct sockaddr_in *grp, struct ibv_ah_attr *ah)
{
	struct sockaddr_in src = sin4("10.0.0.1");
	struct ibv_qp_init_attr qa = {
		.qp_type = IBV_QPT_UD,
		.cap = { .max_send_wr = NSEND, .max_recv_wr = NRECV, .max_send_sge = 1, .max_recv_sge = 1 },
	};
	struct rdma_cm_event *ev;
	char name[64];
	int i;

	if (rdma_create_id(ch, &e->id, e, RDMA_PS_UDP))
		stop("rdma_create_id");
	if (e == &recv1)
		code("recv1 join_unbound", rdma_join_multicast(e->id, (struct sockaddr *)grp, e));
	snprintf(name, sizeof(name), "%s resolve_addr", e->name);
	code(name, rdma_resolve_addr(e->id, (struct sockaddr *)&src, (struct sockaddr *)grp, 2000));
	snprintf(name, sizeof(name), "%s resolve_event", e->name);
	if (!(ev = next_event(name)))
		stop(name);
	printf("%s: %s status=%d\n", name, rdma_event_str(ev->event), ev->status);
	rdma_ack_cm_event(ev);
	if (!pd && !(pd = ibv_alloc_pd(e->id->verbs)))
		stop("alloc_pd");
	if (!(e->scq = ibv_create_cq(e->id->verbs, 16, NULL, NULL, 0)) ||
	    !(e->rcq = ibv_create_cq(e->id->verbs, 16, NULL, NULL, 0)))
		stop("create_cq");
	if (!(e->mr = ibv_reg_mr(pd, e->buf, sizeof(e->buf), IBV_ACCESS_LOCAL_WRITE)))
		stop("reg_mr");
	qa.send_cq = e->scq;
	qa.recv_cq = e->rcq;
	snprintf(name, sizeof(name), "%s create_qp", e->name);
	if (code(name, rdma_create_qp(e->id, pd, &qa)))
		stop(name);
	for (i = 0; i < NRECV; i++)
		post_recv(e, i);
	snprintf(name, sizeof(name), "%s join", e->name);
	code(name, rdma_join_multicast(e->id, (struct sockaddr *)grp, e));
	snprintf(name, sizeof(name), "%s join_event", e->name);
	if (join_event(e, name, e, ah) && ah)
		stop(name);
}

static void send_msg(struct end *s, int i)
{
	char *p = s->buf + (NRECV + i) * SLOT, name[32];
	struct ibv_sge sge = { .addr = (uintptr_t)p, .length = MSG, .lkey = s->mr->lkey };
	struct ibv_send_wr wr = {
		.wr_id = 100 + i, .sg_list = &sge, .num_sge = 1, .opcode = IBV_WR_SEND,
		.send_flags = IBV_SEND_SIGNALED,
		.wr.ud = { .ah = s->ah, .remote_qpn = s->rqpn, .remote_qkey = s->rqkey },
	}, *bad;

	memset(p, 0, MSG);
	snprintf(p, MSG, "msg %d", i);
	snprintf(name, sizeof(name), "sender send_%d", i);
	code(name, ibv_post_send(s->id->qp, &wr, &bad));
}

static const char *who(uint32_t qpn)
{
	if (qpn == sender.id->qp->qp_num)
		return "sender";
	if (qpn == recv1.id->qp->qp_num)
		return "recv1";
	return "other";
}

/* take polls one CQ of e and keeps a line for each completion. */
static void take(struct end *e, struct ibv_cq *cq, const char *kind)
{
	struct ibv_wc wc;
	char *l, ip[80] = "";
	const unsigned char *p;

	while (ibv_poll_cq(cq, 1, &wc) == 1) {
		e->got++;
		if (e->nlines == 16)
			continue;
		l = e->lines[e->nlines++];
		if (wc.status != IBV_WC_SUCCESS) {
			snprintf(l, 192, "%s %s: wr_id=%d %s", e->name, kind, (int)wc.wr_id,
				 ibv_wc_status_str(wc.status));
			continue;
		}
		if (wc.opcode != IBV_WC_RECV || wc.wr_id >= NRECV) {
			snprintf(l, 192, "%s %s: wr_id=%d success %s byte_len=%u", e->name, kind, (int)wc.wr_id,
				 wc.opcode == IBV_WC_SEND ? "SEND" : wc.opcode == IBV_WC_RECV ? "RECV" : "other",
				 wc.byte_len);
			continue;
		}
		p = (const unsigned char *)e->buf + wc.wr_id * SLOT;
		if ((p[20] >> 4) == 4) {	/* rxe: an IPv4 header in bytes 20-39 */
			char d[16], s[16];

			inet_ntop(AF_INET, p + 36, d, sizeof(d));
			inet_ntop(AF_INET, p + 32, s, sizeof(s));
			snprintf(ip, sizeof(ip), " ip_dst=%s ip_src=%s ttl=%d", d, s, p[28]);
		} else {	/* a GRH: its DGID */
			inet_ntop(AF_INET6, p + 24, ip + 10, sizeof(ip) - 10);
			memcpy(ip, " grh_dgid=", 10);
		}
		snprintf(l, 192, "%s %s: wr_id=%d success RECV byte_len=%u src_qp=%s wc_flags=%#x msg=\"%.8s\"%s",
			 e->name, kind, (int)wc.wr_id, wc.byte_len, who(wc.src_qp), wc.wc_flags,
			 (const char *)p + GRH, ip);
		post_recv(e, wc.wr_id);
	}
}

/* collect polls every end's CQs for ms milliseconds, then prints end by
 * end what each got: send completions, then receives. */
static void collect(const char *round, int ms)
{
	struct timespec t0, t;
	unsigned i;
	int j;

	for (i = 0; i < 3; i++)
		ends[i]->nlines = ends[i]->got = 0;
	clock_gettime(CLOCK_MONOTONIC, &t0);
	do {
		for (i = 0; i < 3; i++) {
			take(ends[i], ends[i]->scq, "send");
			take(ends[i], ends[i]->rcq, "recv");
		}
		usleep(1000);
		clock_gettime(CLOCK_MONOTONIC, &t);
	} while ((t.tv_sec - t0.tv_sec) * 1000 + (t.tv_nsec - t0.tv_nsec) / 1000000 < ms);
	for (i = 0; i < 3; i++) {
		for (j = 0; j < ends[i]->nlines; j++)
			printf("%s %s\n", round, ends[i]->lines[j]);
		printf("%s %s: %d completions\n", round, ends[i]->name, ends[i]->got);
	}
}

static void rdma_cm(void)
{
	struct sockaddr_in grp = sin4("224.0.0.5"), uni = sin4("10.0.0.2");
	struct sockaddr_in6 v6 = { .sin6_family = AF_INET6 }, mapped = { .sin6_family = AF_INET6 };
	struct ibv_ah_attr ah;
	unsigned i;
	int bad = 0;

	inet_pton(AF_INET6, "ff0e::1", &v6.sin6_addr);
	inet_pton(AF_INET6, "::ffff:224.0.0.5", &mapped.sin6_addr);
	if (!(ch = rdma_create_event_channel()))
		stop("rdma_create_event_channel");
	join(&recv1, &grp, NULL);
	join(&recv2, &grp, NULL);
	join(&sender, &grp, &ah);
	if (!(sender.ah = ibv_create_ah(pd, &ah)))
		stop("sender create_ah");
	printf("sender create_ah: ok\n");

	for (i = 0; i < 3; i++)
		send_msg(&sender, i);
	collect("round1", 2000);

	code("recv1 leave", rdma_leave_multicast(recv1.id, (struct sockaddr *)&grp));
	code("recv1 leave_again", rdma_leave_multicast(recv1.id, (struct sockaddr *)&grp));
	send_msg(&sender, 3);
	collect("round2", 2000);

	/* Groups the kernel refuses or cannot attach: IPv6 on a RoCE v2
	 * IPv4 ID, a unicast address. */
	if (code("recv2 join_ipv6_group", rdma_join_multicast(recv2.id, (struct sockaddr *)&v6, &v6)) == 0) {
		join_event(&recv2, "recv2 join_ipv6_group_event", &v6, NULL);
		code("recv2 leave_ipv6_group", rdma_leave_multicast(recv2.id, (struct sockaddr *)&v6));
	}
	/* The same IPv4 group, given as an AF_INET6 address. */
	if (code("recv2 join_v4mapped", rdma_join_multicast(recv2.id, (struct sockaddr *)&mapped, &mapped)) == 0) {
		join_event(&recv2, "recv2 join_v4mapped_event", &mapped, NULL);
		code("recv2 leave_v4mapped", rdma_leave_multicast(recv2.id, (struct sockaddr *)&mapped));
	}
	if (code("recv2 join_unicast", rdma_join_multicast(recv2.id, (struct sockaddr *)&uni, &uni)) == 0) {
		join_event(&recv2, "recv2 join_unicast_event", &uni, NULL);
		code("recv2 leave_unicast", rdma_leave_multicast(recv2.id, (struct sockaddr *)&uni));
	}

	code("recv2 leave", rdma_leave_multicast(recv2.id, (struct sockaddr *)&grp));
	code("sender leave", rdma_leave_multicast(sender.id, (struct sockaddr *)&grp));
	bad += !!ibv_destroy_ah(sender.ah);
	for (i = 0; i < 3; i++) {
		rdma_destroy_qp(ends[i]->id);
		bad += !!ibv_dereg_mr(ends[i]->mr) + !!ibv_destroy_cq(ends[i]->scq) + !!ibv_destroy_cq(ends[i]->rcq);
	}
	bad += !!ibv_dealloc_pd(pd);
	for (i = 0; i < 3; i++)
		bad += !!rdma_destroy_id(ends[i]->id);
	rdma_destroy_event_channel(ch);
	printf("rdma_cm_cleanup: %d failed\n", bad);
}

int main(void)
{
	setvbuf(stdout, NULL, _IOLBF, 0);
	verbs_only();
	rdma_cm();
	printf("mcast done\n");
	return 0;
}
