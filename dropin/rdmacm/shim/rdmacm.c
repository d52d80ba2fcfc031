/*
 * rocesim's drop-in librdmacm.so.1: the rdma_* entry points with the
 * prototypes of rdma-core's <rdma/rdma_cma.h>, over the drop-in
 * libibverbs.so.1 (dropin/ibverbs), where the model runs. Plain C, no Go:
 * a second Go c-shared library in the process would be a second Go
 * runtime, which Go does not support; so the connection manager runs in
 * libibverbs.so.1's runtime and this library reaches it through the
 * rs_cm_* functions (rocesim_cm.h, version node ROCESIM_PRIVATE_3).
 *
 * As rdma-core's librdmacm (cma.c), this library is a libibverbs client:
 * it opens the device with ibv_open_device once and gives every ID that
 * context as id->verbs; rdma_create_qp creates the QP with ibv_create_qp
 * and hands it to the model's ID, which moves it to INIT, and to RTR and
 * RTS when the connection is made (the kernel's ib_cm does that for
 * rdma-core's librdmacm through ucma; here package rdmacm does).
 *
 * Flow of an event: the model posts it on the channel and makes the
 * channel's fd (an eventfd) readable; rdma_get_cm_event calls
 * rs_cm_get_event, which runs the world until an event waits, and wraps
 * it in a struct rdma_cm_event (a CONNECT_REQUEST's new ID gets its
 * struct rdma_cm_id here); rdma_ack_cm_event frees it.
 *
 * An ID made without a channel is synchronous (rdma_create_ep's): each
 * call that produces an event waits for it, as librdmacm's ucma_complete.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <netdb.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <infiniband/verbs.h>
#include <infiniband/sa.h>
#include <rdma/rdma_cma.h>
#include <rdma/rdma_verbs.h>
#include <rdma/rsocket.h>

#include "rocesim_cm.h"

#define EXPORT __attribute__((visibility("default")))

/* An rdma_cm_id and what this library keeps with it. */
struct rs_id {
	struct rdma_cm_id id;
	uint32_t handle;
	int sync;		/* made without a channel: calls wait */
	/* The CONNECT_REQUEST's resources, as rdma_accept(NULL) uses them. */
	uint8_t req_resp, req_init;
	/* Events handed out and not yet acked (rdma_destroy_id waits). */
	int events;
	pthread_mutex_t mu;
	pthread_cond_t acked;
	struct ibv_sa_path_rec path;
	int own_pd;		/* rdma_create_ep allocated id->pd */
	/* A passive rdma_create_ep's QP attributes: rdma_get_request makes
	 * each new ID's QP with them, as librdmacm does. */
	struct ibv_qp_init_attr *qp_init_attr;
};

struct rs_event {
	struct rdma_cm_event ev;
	struct rs_id *owner;
	uint8_t private_data[224];
};

static pthread_once_t init_once = PTHREAD_ONCE_INIT;
static struct ibv_device **devices;
static struct ibv_context *verbs;	/* rocesim0, shared by every ID */
/* The device's PD of its own, id->pd of every ID bound to it, which
 * rdma_create_qp(id, NULL, ...) and rdma_reg_msgs use, as librdmacm's
 * ucma_get_device gives each ID its device's default PD. It lives as
 * long as the process. */
static struct ibv_pd *default_pd;

static void init(void)
{
	int n = 0;

	devices = ibv_get_device_list(&n);
	if (devices && n > 0)
		verbs = ibv_open_device(devices[0]);
	if (verbs)
		default_pd = ibv_alloc_pd(verbs);
}

/* ready opens the device on first use: ENODEV without one, as
 * librdmacm's ucma_init says when no RDMA device is there. */
static int ready(void)
{
	pthread_once(&init_once, init);
	if (!verbs) {
		errno = ENODEV;
		return 0;
	}
	return 1;
}

static struct rs_id *to_rs(struct rdma_cm_id *id)
{
	return (struct rs_id *)id;
}

/* fail sets errno to err and returns -1 (0 for err 0). */
static int fail(int err)
{
	if (!err)
		return 0;
	errno = err;
	return -1;
}

/* zoneless_link_local: sa is an IPv6 link-local address with no scope
 * (sin6_scope_id 0), which the kernel will not bind (cma_check_linklocal:
 * EINVAL): rping -a fe80::...%eth0 names the interface. The model takes
 * any scope; it has one interface per device. */
static int zoneless_link_local(const struct sockaddr *sa)
{
	const struct sockaddr_in6 *s = (const struct sockaddr_in6 *)sa;

	return sa && sa->sa_family == AF_INET6 && IN6_IS_ADDR_LINKLOCAL(&s->sin6_addr) && !s->sin6_scope_id;
}

/* sockaddr_bytes takes the address and port of sa: 4 bytes for IPv4,
 * 16 for IPv6; 0 for none. */
static int sockaddr_bytes(const struct sockaddr *sa, const uint8_t **addr, uint16_t *port)
{
	*addr = NULL;
	*port = 0;
	if (!sa)
		return 0;
	if (sa->sa_family == AF_INET) {
		const struct sockaddr_in *s = (const struct sockaddr_in *)sa;
		*addr = (const uint8_t *)&s->sin_addr;
		*port = ntohs(s->sin_port);
		return 4;
	}
	if (sa->sa_family == AF_INET6) {
		const struct sockaddr_in6 *s = (const struct sockaddr_in6 *)sa;
		*addr = (const uint8_t *)&s->sin6_addr;
		*port = ntohs(s->sin6_port);
		return 16;
	}
	return -1;
}

/* gid_of: the RoCE v2 GID of an address, as rxe's GID table holds it:
 * an IPv4 address mapped into IPv6 (::ffff:a.b.c.d), an IPv6 one as is. */
static void gid_of(union ibv_gid *gid, const uint8_t *ip, int v6)
{
	memset(gid, 0, sizeof(*gid));
	if (v6) {
		memcpy(gid->raw, ip, 16);
		return;
	}
	gid->raw[10] = gid->raw[11] = 0xff;
	memcpy(&gid->raw[12], ip, 4);
}

/* set_sockaddr fills the ID's sockaddr storage sa with an address of
 * the model's (4 or 16 bytes as v6 says) and a port. */
static void set_sockaddr(struct sockaddr_storage *sa, const uint8_t *ip, uint16_t port, int v6)
{
	memset(sa, 0, sizeof(*sa));
	if (v6) {
		struct sockaddr_in6 *s = (struct sockaddr_in6 *)sa;

		s->sin6_family = AF_INET6;
		memcpy(&s->sin6_addr, ip, 16);
		s->sin6_port = htons(port);
		return;
	}
	struct sockaddr_in *s = (struct sockaddr_in *)sa;

	s->sin_family = AF_INET;
	memcpy(&s->sin_addr, ip, 4);
	s->sin_port = htons(port);
}

/* refresh copies the model's view of the ID into the struct: its
 * addresses, the device once bound, the path once resolved. */
static void refresh(struct rs_id *r)
{
	struct rs_cm_addrs a;

	if (rs_cm_addrs(r->handle, &a))
		return;
	set_sockaddr(&r->id.route.addr.src_storage, a.src, a.sport, a.v6);
	set_sockaddr(&r->id.route.addr.dst_storage, a.dst, a.dport, a.v6);
	if (a.bound) {
		r->id.verbs = verbs;
		if (!r->id.pd)
			r->id.pd = default_pd;
		r->id.port_num = 1;
		gid_of(&r->id.route.addr.addr.ibaddr.sgid, a.src, a.v6);
		r->id.route.addr.addr.ibaddr.pkey = htons(0xffff);
	}
	if (a.dport) {
		gid_of(&r->id.route.addr.addr.ibaddr.dgid, a.dst, a.v6);
		/* The path rdma_cm builds itself on RoCE (cma_resolve_iboe_route). */
		r->path.sgid = r->id.route.addr.addr.ibaddr.sgid;
		r->path.dgid = r->id.route.addr.addr.ibaddr.dgid;
		r->path.pkey = htons(0xffff);
		r->path.hop_limit = 64;
		r->path.mtu = IBV_MTU_1024;
		r->path.reversible = 1;
		r->path.numb_path = 1;
		r->id.route.path_rec = &r->path;
		r->id.route.num_paths = 1;
	}
}

static struct rs_id *new_id(struct rdma_event_channel *ch, void *context, enum rdma_port_space ps)
{
	struct rs_id *r = calloc(1, sizeof(*r));

	if (!r)
		return NULL;
	r->id.channel = ch;
	r->id.context = context;
	r->id.ps = ps;
	r->id.qp_type = ps == RDMA_PS_UDP || ps == RDMA_PS_IPOIB ? IBV_QPT_UD : IBV_QPT_RC;
	pthread_mutex_init(&r->mu, NULL);
	pthread_cond_init(&r->acked, NULL);
	return r;
}

EXPORT struct rdma_event_channel *rdma_create_event_channel(void)
{
	struct rdma_event_channel *ch;
	int err;

	if (!ready())
		return NULL;
	ch = calloc(1, sizeof(*ch));
	if (!ch) {
		errno = ENOMEM;
		return NULL;
	}
	err = rs_cm_create_channel(&ch->fd);
	if (err) {
		free(ch);
		errno = err;
		return NULL;
	}
	return ch;
}

EXPORT void rdma_destroy_event_channel(struct rdma_event_channel *channel)
{
	if (!channel)
		return;
	rs_cm_destroy_channel(channel->fd);
	free(channel);
}

EXPORT int rdma_create_id(struct rdma_event_channel *channel, struct rdma_cm_id **id,
			  void *context, enum rdma_port_space ps)
{
	struct rdma_event_channel *ch = channel;
	struct rs_id *r;
	int err;

	if (!id)
		return fail(EINVAL);
	if (!ready())
		return -1;
	if (!ch) {
		ch = rdma_create_event_channel();
		if (!ch)
			return -1;
	}
	r = new_id(ch, context, ps);
	if (!r) {
		err = ENOMEM;
		goto out;
	}
	r->sync = !channel;
	err = rs_cm_create_id(ch->fd, ps, &r->handle);
	if (err)
		goto out;
	rs_cm_set_ptr(r->handle, r);
	*id = &r->id;
	return 0;
out:
	free(r);
	if (!channel)
		rdma_destroy_event_channel(ch);
	return fail(err);
}

EXPORT int rdma_destroy_id(struct rdma_cm_id *id)
{
	struct rs_id *r;
	int err;

	if (!id)
		return fail(EINVAL);
	r = to_rs(id);
	if (id->event)
		rdma_ack_cm_event(id->event);
	err = rs_cm_destroy_id(r->handle);
	if (err)
		return fail(err);
	/* As librdmacm's rdma_destroy_id, wait until every event handed out
	 * about the ID has been acked: the program may still read it. */
	pthread_mutex_lock(&r->mu);
	while (r->events > 0)
		pthread_cond_wait(&r->acked, &r->mu);
	pthread_mutex_unlock(&r->mu);
	if (r->sync)
		rdma_destroy_event_channel(id->channel);
	free(r->qp_init_attr);
	free(r);
	return 0;
}

/* ud_event fills a UD ID's event->param.ud (struct rdma_ud_param) in
 * place of param.conn, as librdmacm's ucma_copy_ud_event: the private
 * data, and for ESTABLISHED the peer's QPN, Q_Key and address handle
 * attributes (a SIDR_REP's; rdmacm/sidr.go). */
static void ud_event(struct rdma_cm_event *ev, const struct rs_cm_event *out, uint8_t *priv)
{
	struct ibv_ah_attr *ah = &ev->param.ud.ah_attr;

	memset(&ev->param, 0, sizeof(ev->param));
	ev->param.ud.private_data = priv;
	ev->param.ud.private_data_len = out->private_data_len;
	if (out->event == RDMA_CM_EVENT_MULTICAST_JOIN || out->event == RDMA_CM_EVENT_MULTICAST_ERROR)
		ev->param.ud.private_data = out->join_context; /* the join's context */
	else if (out->event != RDMA_CM_EVENT_ESTABLISHED)
		return;
	ev->param.ud.qp_num = out->qp_num;
	ev->param.ud.qkey = out->qkey;
	memcpy(ah->grh.dgid.raw, out->ah_dgid, sizeof(ah->grh.dgid.raw));
	ah->grh.flow_label = out->ah_flow_label;
	ah->grh.sgid_index = out->ah_sgid_index;
	ah->grh.hop_limit = out->ah_hop_limit;
	ah->grh.traffic_class = out->ah_traffic_class;
	ah->is_global = 1;
	ah->port_num = out->ah_port_num;
}

EXPORT int rdma_get_cm_event(struct rdma_event_channel *channel, struct rdma_cm_event **event)
{
	struct rs_cm_event out;
	struct rs_event *e;
	struct rs_id *r;
	int fd, flags, err, waited = 0;

	if (!channel || !event)
		return fail(EINVAL);
	/* librdmacm's first act here is a read(2) of the channel's fd, a
	 * cancellation point: a cancel already pending acts before the fd
	 * is looked at. rping's main thread ends its CM thread with
	 * pthread_cancel and destroys the channel; if that thread was
	 * still handling its last event, it comes back here cancelled, and
	 * must go, not find the fd closed (EBADF: its perror and exit 255,
	 * seen in CI). */
	pthread_testcancel();
	fd = channel->fd; /* the channel may be freed while this waits */
	flags = fcntl(fd, F_GETFL);
	if (flags < 0)
		return -1;
	/* A blocking wait goes to the model a slice at a time, with a
	 * cancellation point between slices: librdmacm's read(2) of the fd
	 * is one, and rping ends its CM thread with pthread_cancel while it
	 * blocks here. */
	for (;;) {
		memset(&out, 0, sizeof(out));
		err = rs_cm_get_event(fd, (flags & O_NONBLOCK) ? RS_CM_NONBLOCK : RS_CM_SLICE, &out);
		/* A cancel that came while this waited acts here, also when
		 * the channel went away meanwhile (the program destroys it
		 * after cancelling, and read(2) would not have returned). */
		pthread_testcancel();
		/* The channel went away, or the process is exiting, while
		 * this waited: librdmacm's read(2) would go on blocking, so
		 * this does (until cancelled or the end). EINVAL, no such
		 * channel, after a slice means the same: it went between two
		 * slices, while this thread was still blocked in the call
		 * (rping's server exited 255 when its CM thread returned it),
		 * and so does EINVAL with the channel's fd closed since this
		 * call began: it went while this thread waited for the
		 * library's lock, before its first slice (rping's client
		 * exited 255 so, over UDP, its main thread destroying the
		 * channel as its CM thread came back for the next event). */
		if (err == ECANCELED || (err == EINVAL && (waited || fcntl(fd, F_GETFD) < 0))) {
			for (;;)
				pause();
		}
		if (err != ETIMEDOUT)
			break;
		waited = 1;
	}
	if (err)
		return fail(err);
	e = calloc(1, sizeof(*e));
	if (!e)
		return fail(ENOMEM);
	r = out.id_ptr;
	if (!r) {
		/* A CONNECT_REQUEST's new ID: on the listener's channel, with
		 * its context, as librdmacm's ucma_process_conn_req makes it. */
		struct rs_id *l = out.listen_ptr;

		r = new_id(l ? l->id.channel : channel, l ? l->id.context : NULL,
			   l ? l->id.ps : RDMA_PS_TCP);
		if (!r) {
			free(e);
			return fail(ENOMEM);
		}
		r->handle = out.id;
		rs_cm_set_ptr(r->handle, r);
	}
	refresh(r);
	e->owner = r;
	e->ev.id = &r->id;
	e->ev.listen_id = out.listen_ptr;
	e->ev.event = out.event;
	e->ev.status = out.status;
	memcpy(e->private_data, out.private_data, out.private_data_len);
	e->ev.param.conn.private_data = e->private_data;
	e->ev.param.conn.private_data_len = out.private_data_len;
	/* The kernel gives each side the peer's resources from its own view
	 * (cm_format_req_event, cm_format_rep_event): the peer's initiator
	 * depth is this side's responder resources, and the reverse. */
	e->ev.param.conn.responder_resources = out.initiator_depth;
	e->ev.param.conn.initiator_depth = out.responder_resources;
	e->ev.param.conn.retry_count = out.retry_count;
	e->ev.param.conn.rnr_retry_count = out.rnr_retry_count;
	e->ev.param.conn.qp_num = out.qp_num;
	if (r->id.qp_type == IBV_QPT_UD)
		ud_event(&e->ev, &out, e->private_data);
	if (out.event == RDMA_CM_EVENT_CONNECT_REQUEST) {
		r->req_resp = e->ev.param.conn.responder_resources;
		r->req_init = e->ev.param.conn.initiator_depth;
	}
	pthread_mutex_lock(&r->mu);
	r->events++;
	pthread_mutex_unlock(&r->mu);
	*event = &e->ev;
	return 0;
}

EXPORT int rdma_ack_cm_event(struct rdma_cm_event *event)
{
	struct rs_event *e = (struct rs_event *)event;
	struct rs_id *r;

	if (!event)
		return fail(EINVAL);
	r = e->owner;
	pthread_mutex_lock(&r->mu);
	r->events--;
	pthread_cond_broadcast(&r->acked);
	pthread_mutex_unlock(&r->mu);
	free(e);
	return 0;
}

/* complete waits for a synchronous ID's event and fails with the error
 * it reports (librdmacm's ucma_complete); for an ID on a channel it
 * returns 0 at once. */
static int complete(struct rs_id *r)
{
	struct rdma_cm_event *ev;

	if (!r->sync)
		return 0;
	if (r->id.event) {
		rdma_ack_cm_event(r->id.event);
		r->id.event = NULL;
	}
	if (rdma_get_cm_event(r->id.channel, &ev))
		return -1;
	r->id.event = ev;
	if (ev->status) {
		/* REJECTED carries the REJ's reason: librdmacm reports
		 * ECONNREFUSED then, and the negated errno otherwise. */
		errno = ev->event == RDMA_CM_EVENT_REJECTED ? ECONNREFUSED : -ev->status;
		return -1;
	}
	switch (ev->event) {
	case RDMA_CM_EVENT_ADDR_ERROR:
	case RDMA_CM_EVENT_ROUTE_ERROR:
	case RDMA_CM_EVENT_CONNECT_ERROR:
	case RDMA_CM_EVENT_UNREACHABLE:
	case RDMA_CM_EVENT_REJECTED:
		errno = ECONNREFUSED;
		return -1;
	default:
		return 0;
	}
}

EXPORT int rdma_bind_addr(struct rdma_cm_id *id, struct sockaddr *addr)
{
	const uint8_t *a;
	uint16_t port;
	int n, err;

	if (!id || !addr || zoneless_link_local(addr))
		return fail(EINVAL);
	n = sockaddr_bytes(addr, &a, &port);
	if (n < 0)
		return fail(EAFNOSUPPORT);
	err = rs_cm_bind_addr(to_rs(id)->handle, a, n, port);
	if (err)
		return fail(err);
	refresh(to_rs(id));
	return 0;
}

EXPORT int rdma_listen(struct rdma_cm_id *id, int backlog)
{
	int err;

	if (!id)
		return fail(EINVAL);
	err = rs_cm_listen(to_rs(id)->handle, backlog);
	if (err)
		return fail(err);
	/* An unbound ID was bound by the listen: its port, as librdmacm's
	 * rdma_listen queries the address the kernel gave it. */
	refresh(to_rs(id));
	return 0;
}

EXPORT int rdma_resolve_addr(struct rdma_cm_id *id, struct sockaddr *src_addr,
			     struct sockaddr *dst_addr, int timeout_ms)
{
	const uint8_t *s, *d;
	uint16_t sport, dport;
	int sn, dn, err;

	/* A link-local src needs a scope, as rdma_bind_addr's does; a
	 * link-local dst does not (real rxe resolves one without:
	 * conformance TestCM6Rxe). */
	if (!id || !dst_addr || zoneless_link_local(src_addr))
		return fail(EINVAL);
	sn = sockaddr_bytes(src_addr, &s, &sport);
	dn = sockaddr_bytes(dst_addr, &d, &dport);
	if (sn < 0 || dn <= 0)
		return fail(EAFNOSUPPORT);
	if (sport) {
		/* A source port asks for a bind first, as librdmacm does. */
		err = rs_cm_bind_addr(to_rs(id)->handle, s, sn, sport);
		if (err)
			return fail(err);
	}
	err = rs_cm_resolve_addr(to_rs(id)->handle, s, sn, d, dn, dport, timeout_ms);
	if (err)
		return fail(err);
	refresh(to_rs(id));
	return complete(to_rs(id));
}

/*
 * Multicast, as librdmacm does it on a RoCE port: the join goes to the
 * CM (rdmacm/mcast.go), whose MULTICAST_JOIN event carries the group's
 * address vector; taking that event attaches the ID's QP to the group
 * (ucma_process_join), and leaving detaches it. Only an IPv4 group is
 * joined: the kernel refuses IPv6 ones on RoCE v2.
 */
static int join(struct rdma_cm_id *id, struct sockaddr *addr, uint32_t flags, void *context)
{
	const uint8_t *a;
	uint16_t port;
	int n, err;

	if (!id)
		return fail(EINVAL);
	n = sockaddr_bytes(addr, &a, &port);
	if (n <= 0)
		return fail(EINVAL);
	err = rs_cm_join(to_rs(id)->handle, a, n, flags == RDMA_MC_JOIN_FLAG_SENDONLY_FULLMEMBER, context);
	return fail(err);
}

EXPORT int rdma_join_multicast(struct rdma_cm_id *id, struct sockaddr *addr, void *context)
{
	return join(id, addr, RDMA_MC_JOIN_FLAG_FULLMEMBER, context);
}

EXPORT int rdma_join_multicast_ex(struct rdma_cm_id *id, struct rdma_cm_join_mc_attr_ex *attr, void *context)
{
	if (!attr)
		return fail(EINVAL);
	if (attr->comp_mask >= RDMA_CM_JOIN_MC_ATTR_RESERVED)
		return fail(EOPNOTSUPP);
	if (!(attr->comp_mask & RDMA_CM_JOIN_MC_ATTR_ADDRESS) ||
	    !(attr->comp_mask & RDMA_CM_JOIN_MC_ATTR_JOIN_FLAGS) ||
	    attr->join_flags >= RDMA_MC_JOIN_FLAG_RESERVED)
		return fail(EINVAL);
	return join(id, attr->addr, attr->join_flags, context);
}

EXPORT int rdma_leave_multicast(struct rdma_cm_id *id, struct sockaddr *addr)
{
	const uint8_t *a;
	uint16_t port;
	int n;

	if (!id)
		return fail(EINVAL);
	n = sockaddr_bytes(addr, &a, &port);
	if (n <= 0)
		return fail(EINVAL);
	return fail(rs_cm_leave(to_rs(id)->handle, a, n));
}

EXPORT int rdma_resolve_route(struct rdma_cm_id *id, int timeout_ms)
{
	int err;

	if (!id)
		return fail(EINVAL);
	err = rs_cm_resolve_route(to_rs(id)->handle, timeout_ms);
	if (err)
		return fail(err);
	refresh(to_rs(id));
	return complete(to_rs(id));
}

/* make_cq makes a completion channel and a CQ of n entries on it. */
static struct ibv_cq *make_cq(struct rdma_cm_id *id, struct ibv_comp_channel **ch, uint32_t n)
{
	*ch = ibv_create_comp_channel(id->verbs);
	if (!*ch)
		return NULL;
	return ibv_create_cq(id->verbs, n ? n : 1, id, *ch, 0);
}

/* create_cqs makes the ID's completion channels and CQs where the
 * attributes name none (librdmacm's ucma_create_cqs, for
 * rdma_create_ep's users, which wait with rdma_get_send_comp). */
static int create_cqs(struct rdma_cm_id *id, struct ibv_qp_init_attr *attr)
{
	if (!attr->recv_cq) {
		id->recv_cq = make_cq(id, &id->recv_cq_channel, attr->cap.max_recv_wr);
		if (!id->recv_cq)
			return -1;
		attr->recv_cq = id->recv_cq;
	}
	if (!attr->send_cq) {
		id->send_cq = make_cq(id, &id->send_cq_channel, attr->cap.max_send_wr);
		if (!id->send_cq)
			return -1;
		attr->send_cq = id->send_cq;
	}
	return 0;
}

static void destroy_cqs(struct rdma_cm_id *id)
{
	if (id->recv_cq) {
		ibv_destroy_cq(id->recv_cq);
		id->recv_cq = NULL;
	}
	if (id->recv_cq_channel) {
		ibv_destroy_comp_channel(id->recv_cq_channel);
		id->recv_cq_channel = NULL;
	}
	if (id->send_cq) {
		ibv_destroy_cq(id->send_cq);
		id->send_cq = NULL;
	}
	if (id->send_cq_channel) {
		ibv_destroy_comp_channel(id->send_cq_channel);
		id->send_cq_channel = NULL;
	}
}

/* create_qp makes the ID's QP from attr, and its CQs first where attr
 * names none, as librdmacm does: through ibv_create_qp_ex, which is
 * ibv_create_qp when attr asks for nothing but the PD, and an extended
 * QP (send opcodes for the ibv_wr_* builders) when it asks for more. A
 * missing PD is the ID's. */
static int create_qp(struct rdma_cm_id *id, struct ibv_qp_init_attr_ex *attr)
{
	struct ibv_qp *qp;
	int err;

	if (!id->verbs)
		return fail(EINVAL); /* not bound to a device yet */
	if (id->qp)
		return fail(EINVAL);
	if (!(attr->comp_mask & IBV_QP_INIT_ATTR_PD) || !attr->pd) {
		attr->comp_mask |= IBV_QP_INIT_ATTR_PD;
		attr->pd = id->pd;
	}
	if (!attr->pd || attr->pd->context != id->verbs)
		return fail(EINVAL);
	/* An ibv_qp_init_attr_ex begins with an ibv_qp_init_attr's fields. */
	if (create_cqs(id, (struct ibv_qp_init_attr *)attr)) {
		err = errno;
		destroy_cqs(id);
		return fail(err);
	}
	qp = ibv_create_qp_ex(id->verbs, attr);
	if (!qp) {
		err = errno;
		destroy_cqs(id);
		return fail(err);
	}
	err = rs_cm_set_qp(to_rs(id)->handle, qp->handle);
	if (err) {
		ibv_destroy_qp(qp);
		destroy_cqs(id);
		return fail(err);
	}
	id->qp = qp;
	id->pd = attr->pd;
	return 0;
}

EXPORT int rdma_create_qp(struct rdma_cm_id *id, struct ibv_pd *pd, struct ibv_qp_init_attr *qp_init_attr)
{
	struct ibv_qp_init_attr_ex attr;

	if (!id || !qp_init_attr)
		return fail(EINVAL);
	memset(&attr, 0, sizeof(attr));
	memcpy(&attr, qp_init_attr, sizeof(*qp_init_attr));
	attr.comp_mask = IBV_QP_INIT_ATTR_PD;
	attr.pd = pd;
	if (create_qp(id, &attr))
		return -1;
	qp_init_attr->cap = attr.cap;
	qp_init_attr->send_cq = attr.send_cq;
	qp_init_attr->recv_cq = attr.recv_cq;
	return 0;
}

EXPORT int rdma_create_qp_ex(struct rdma_cm_id *id, struct ibv_qp_init_attr_ex *qp_init_attr)
{
	if (!id || !qp_init_attr)
		return fail(EINVAL);
	return create_qp(id, qp_init_attr);
}

EXPORT void rdma_destroy_qp(struct rdma_cm_id *id)
{
	if (!id || !id->qp)
		return;
	rs_cm_set_qp(to_rs(id)->handle, 0);
	ibv_destroy_qp(id->qp);
	id->qp = NULL;
	destroy_cqs(id);
}

EXPORT int rdma_connect(struct rdma_cm_id *id, struct rdma_conn_param *p)
{
	int err;

	if (!id)
		return fail(EINVAL);
	if (p && p->private_data_len && !p->private_data)
		return fail(EINVAL);
	/* A QP the program made itself is named by the parameter, which
	 * must be there then (ucma_valid_param). */
	if (!id->qp && id->qp_type != IBV_QPT_UD && !p)
		return fail(EINVAL);
	if (p)
		err = rs_cm_connect(to_rs(id)->handle, p->private_data, p->private_data_len,
				    p->responder_resources, p->initiator_depth, p->retry_count, p->rnr_retry_count,
				    id->qp ? 0 : p->qp_num);
	else
		/* librdmacm's defaults without a parameter: no RDMA reads
		 * either way, retries 7. */
		err = rs_cm_connect(to_rs(id)->handle, NULL, 0, 0, 0, 7, 7, 0);
	if (err)
		return fail(err);
	return complete(to_rs(id));
}

EXPORT int rdma_accept(struct rdma_cm_id *id, struct rdma_conn_param *p)
{
	struct rs_id *r;
	int resp, init, err;

	if (!id)
		return fail(EINVAL);
	if (p && p->private_data_len && !p->private_data)
		return fail(EINVAL);
	r = to_rs(id);
	/* A QP the program made itself is named by the parameter (librdmacm
	 * reads it without a check, and would crash without one). */
	if (!id->qp && id->qp_type != IBV_QPT_UD && !p)
		return fail(EINVAL);
	/* Without a parameter, or with RDMA_MAX_*, librdmacm takes what the
	 * CONNECT_REQUEST offered (ucma_valid_param, rdma_accept). */
	resp = !p || p->responder_resources == RDMA_MAX_RESP_RES ? r->req_resp : p->responder_resources;
	init = !p || p->initiator_depth == RDMA_MAX_INIT_DEPTH ? r->req_init : p->initiator_depth;
	err = rs_cm_accept(r->handle, p ? p->private_data : NULL, p ? p->private_data_len : 0, resp, init,
			   id->qp || !p ? 0 : p->qp_num);
	if (err)
		return fail(err);
	return complete(r);
}

/* rdma_init_qp_attr: the attributes that take a QP the program made
 * itself (ibv_create_qp) to attr->qp_state, as the kernel's
 * rdma_init_qp_attr gives them through ucma; *mask says which are set.
 * The model's ID answers (rdmacm.CMID.InitQPAttr). */
EXPORT int rdma_init_qp_attr(struct rdma_cm_id *id, struct ibv_qp_attr *qp_attr, int *qp_attr_mask)
{
	if (!id || !qp_attr || !qp_attr_mask)
		return fail(EINVAL);
	return fail(rs_cm_init_qp_attr(to_rs(id)->handle, qp_attr->qp_state, qp_attr, qp_attr_mask));
}

/* rdma_establish: the RTU of a connection whose QP the program made and
 * moved to RTS after RDMA_CM_EVENT_CONNECT_RESPONSE. EINVAL for an ID
 * with rdma_create_qp's QP, as librdmacm says. */
EXPORT int rdma_establish(struct rdma_cm_id *id)
{
	if (!id || id->qp)
		return fail(EINVAL);
	return fail(rs_cm_establish(to_rs(id)->handle));
}

EXPORT int rdma_reject(struct rdma_cm_id *id, const void *private_data, uint8_t private_data_len)
{
	if (!id)
		return fail(EINVAL);
	if (private_data_len && !private_data)
		return fail(EINVAL);
	return fail(rs_cm_reject(to_rs(id)->handle, private_data, private_data_len));
}

EXPORT int rdma_disconnect(struct rdma_cm_id *id)
{
	if (!id)
		return fail(EINVAL);
	return fail(rs_cm_disconnect(to_rs(id)->handle));
}

EXPORT int rdma_get_request(struct rdma_cm_id *listen, struct rdma_cm_id **id)
{
	struct rdma_cm_event *ev;
	struct rs_id *l;

	if (!listen || !id)
		return fail(EINVAL);
	l = to_rs(listen);
	if (!l->sync)
		return fail(EINVAL); /* librdmacm: only for a synchronous listener */
	for (;;) {
		if (rdma_get_cm_event(listen->channel, &ev))
			return -1;
		if (ev->event == RDMA_CM_EVENT_CONNECT_REQUEST)
			break;
		rdma_ack_cm_event(ev);
	}
	/* The new ID is synchronous too, on a channel of its own; it keeps
	 * the event as id->event, and the listener's PD and QP attributes
	 * are not known here: the caller creates its QP. */
	{
		struct rs_id *r = to_rs(ev->id);
		struct rdma_event_channel *ch = rdma_create_event_channel();

		if (!ch) {
			rdma_ack_cm_event(ev);
			return -1;
		}
		/* Move the ID's future events to its own channel. */
		r->id.channel = ch;
		r->sync = 1;
		if (rs_cm_migrate(r->handle, ch->fd)) {
			rdma_ack_cm_event(ev);
			return -1;
		}
		r->id.event = ev;
		/* The listener's PD if it has one; a listener on the any
		 * address has none (no device), and the new ID keeps its
		 * device's default one. */
		if (l->id.pd)
			r->id.pd = l->id.pd;
		if (l->qp_init_attr) {
			struct ibv_qp_init_attr attr = *l->qp_init_attr;

			if (rdma_create_qp(&r->id, l->id.pd, &attr)) {
				int err = errno;

				rdma_destroy_id(&r->id);
				return fail(err);
			}
		}
		*id = &r->id;
	}
	return 0;
}

EXPORT int rdma_notify(struct rdma_cm_id *id, enum ibv_event_type event)
{
	if (!id)
		return fail(EINVAL);
	return 0; /* the model's passive side is established by the RTU */
}

EXPORT struct ibv_context **rdma_get_devices(int *num_devices)
{
	struct ibv_context **list;

	if (!ready()) {
		if (num_devices)
			*num_devices = 0;
		return NULL;
	}
	list = calloc(2, sizeof(*list));
	if (!list) {
		errno = ENOMEM;
		return NULL;
	}
	list[0] = verbs;
	if (num_devices)
		*num_devices = 1;
	return list;
}

EXPORT void rdma_free_devices(struct ibv_context **list)
{
	free(list);
}

EXPORT const char *rdma_event_str(enum rdma_cm_event_type event)
{
	/* The names librdmacm gives (cma.c). */
	static const char *const names[] = {
		"RDMA_CM_EVENT_ADDR_RESOLVED", "RDMA_CM_EVENT_ADDR_ERROR",
		"RDMA_CM_EVENT_ROUTE_RESOLVED", "RDMA_CM_EVENT_ROUTE_ERROR",
		"RDMA_CM_EVENT_CONNECT_REQUEST", "RDMA_CM_EVENT_CONNECT_RESPONSE",
		"RDMA_CM_EVENT_CONNECT_ERROR", "RDMA_CM_EVENT_UNREACHABLE",
		"RDMA_CM_EVENT_REJECTED", "RDMA_CM_EVENT_ESTABLISHED",
		"RDMA_CM_EVENT_DISCONNECTED", "RDMA_CM_EVENT_DEVICE_REMOVAL",
		"RDMA_CM_EVENT_MULTICAST_JOIN", "RDMA_CM_EVENT_MULTICAST_ERROR",
		"RDMA_CM_EVENT_ADDR_CHANGE", "RDMA_CM_EVENT_TIMEWAIT_EXIT",
	};

	if ((unsigned)event < sizeof(names) / sizeof(names[0]))
		return names[event];
	return "UNKNOWN EVENT";
}

EXPORT int rdma_set_option(struct rdma_cm_id *id, int level, int optname, void *optval, size_t optlen)
{
	if (!id || (optlen && !optval))
		return fail(EINVAL);
	if (level != RDMA_OPTION_ID)
		return fail(ENOSYS);
	/* Type of service, address reuse, IPv6-only, ACK timeout: each
	 * with the size the kernel wants, the ACK timeout for a connected
	 * (RC) ID only (ucma_set_option_id, rdma_set_ack_timeout), address
	 * reuse and IPv6-only in the ID states the kernel takes them
	 * (rdma_set_reuseaddr, rdma_set_afonly: the model's CM checks);
	 * none changes the model's single-path fabric (conformance
	 * TestRdmacmMisuseRxe). */
	switch (optname) {
	case RDMA_OPTION_ID_TOS:
		return optlen == sizeof(uint8_t) ? 0 : fail(EINVAL);
	case RDMA_OPTION_ID_REUSEADDR:
	case RDMA_OPTION_ID_AFONLY:
		if (optlen != sizeof(int))
			return fail(EINVAL);
		return fail(rs_cm_set_option(to_rs(id)->handle, optname, *(int *)optval));
	case RDMA_OPTION_ID_ACK_TIMEOUT:
		if (optlen != sizeof(uint8_t) || id->ps != RDMA_PS_TCP)
			return fail(EINVAL);
		return 0;
	}
	return fail(ENOSYS);
}

EXPORT int rdma_migrate_id(struct rdma_cm_id *id, struct rdma_event_channel *channel)
{
	int err;

	if (!id || !channel)
		return fail(EINVAL);
	err = rs_cm_migrate(to_rs(id)->handle, channel->fd);
	if (err)
		return fail(err);
	if (to_rs(id)->sync)
		rdma_destroy_event_channel(id->channel);
	to_rs(id)->sync = 0;
	id->channel = channel;
	return 0;
}

/* ---- rdma_getaddrinfo ----
 *
 * The family is the hints' (AF_INET or AF_INET6); without one, an IPv6
 * literal ("fd00::1") is IPv6 and anything else IPv4 first: a name with
 * addresses of both families ("localhost") resolves to its IPv4 one,
 * where librdmacm would take whichever getaddrinfo(3) sorts first (often
 * ::1, which no device of the model has). */

EXPORT int rdma_getaddrinfo(const char *node, const char *service, const struct rdma_addrinfo *hints,
			    struct rdma_addrinfo **res)
{
	struct addrinfo h, *ai;
	struct rdma_addrinfo *r;
	struct sockaddr_storage *sa;
	int passive = hints && (hints->ai_flags & RAI_PASSIVE);
	int ret;

	if (!res || (!node && !service))
		return fail(EINVAL);
	memset(&h, 0, sizeof(h));
	h.ai_family = AF_INET;
	if (hints && (hints->ai_family == AF_INET || hints->ai_family == AF_INET6))
		h.ai_family = hints->ai_family;
	else if (node && strchr(node, ':'))
		h.ai_family = AF_INET6;
	h.ai_flags = AI_NUMERICSERV | (passive ? AI_PASSIVE : 0) |
		     (hints && (hints->ai_flags & RAI_NUMERICHOST) ? AI_NUMERICHOST : 0);
	ret = getaddrinfo(node, service, &h, &ai);
	if (ret)
		return ret; /* getaddrinfo's error code, as librdmacm returns it */
	r = calloc(1, sizeof(*r));
	sa = calloc(1, sizeof(*sa));
	if (!r || !sa) {
		freeaddrinfo(ai);
		free(r);
		free(sa);
		return EAI_MEMORY;
	}
	memcpy(sa, ai->ai_addr, ai->ai_addrlen);
	r->ai_flags = hints ? hints->ai_flags : 0;
	r->ai_family = ai->ai_family;
	r->ai_qp_type = hints && hints->ai_qp_type ? hints->ai_qp_type : IBV_QPT_RC;
	r->ai_port_space = hints && hints->ai_port_space ? hints->ai_port_space : RDMA_PS_TCP;
	if (passive) {
		r->ai_src_addr = (struct sockaddr *)sa;
		r->ai_src_len = ai->ai_addrlen;
	} else {
		r->ai_dst_addr = (struct sockaddr *)sa;
		r->ai_dst_len = ai->ai_addrlen;
	}
	freeaddrinfo(ai);
	*res = r;
	return 0;
}

EXPORT void rdma_freeaddrinfo(struct rdma_addrinfo *res)
{
	while (res) {
		struct rdma_addrinfo *next = res->ai_next;

		free(res->ai_src_addr);
		free(res->ai_dst_addr);
		free(res->ai_src_canonname);
		free(res->ai_dst_canonname);
		free(res->ai_route);
		free(res->ai_connect);
		free(res);
		res = next;
	}
}

EXPORT int rdma_create_ep(struct rdma_cm_id **id, struct rdma_addrinfo *res, struct ibv_pd *pd,
			  struct ibv_qp_init_attr *qp_init_attr)
{
	struct rdma_cm_id *cm_id;

	if (!id || !res)
		return fail(EINVAL);
	if (rdma_create_id(NULL, &cm_id, NULL, res->ai_port_space))
		return -1;
	if (res->ai_flags & RAI_PASSIVE) {
		if (rdma_bind_addr(cm_id, res->ai_src_addr))
			goto err;
	} else {
		if (rdma_resolve_addr(cm_id, res->ai_src_addr, res->ai_dst_addr, 2000) ||
		    rdma_resolve_route(cm_id, 2000))
			goto err;
	}
	if (!pd && cm_id->verbs) {
		cm_id->pd = ibv_alloc_pd(cm_id->verbs);
		if (!cm_id->pd)
			goto err;
		to_rs(cm_id)->own_pd = 1;
	} else if (pd)
		cm_id->pd = pd;
	if (qp_init_attr) {
		/* The QP's type is the address's (librdmacm's rdma_create_ep). */
		qp_init_attr->qp_type = res->ai_qp_type;
		if (res->ai_flags & RAI_PASSIVE) {
			to_rs(cm_id)->qp_init_attr = malloc(sizeof(*qp_init_attr));
			if (!to_rs(cm_id)->qp_init_attr) {
				errno = ENOMEM;
				goto err;
			}
			*to_rs(cm_id)->qp_init_attr = *qp_init_attr;
		} else if (rdma_create_qp(cm_id, pd, qp_init_attr))
			goto err;
	}
	*id = cm_id;
	return 0;
err:
	rdma_destroy_ep(cm_id);
	return -1;
}

EXPORT void rdma_destroy_ep(struct rdma_cm_id *id)
{
	struct ibv_pd *pd;
	int own;

	if (!id)
		return;
	rdma_destroy_qp(id);
	pd = id->pd;
	own = to_rs(id)->own_pd;
	rdma_destroy_id(id);
	if (own && pd)
		ibv_dealloc_pd(pd);
}

/* ---- what the model does not offer: librdmacm's answer for an
 * unsupported operation (ENOSYS), so that programs that link them load. ---- */

EXPORT int rdma_create_srq(struct rdma_cm_id *id, struct ibv_pd *pd, struct ibv_srq_init_attr *a) { return fail(ENOSYS); }
EXPORT int rdma_create_srq_ex(struct rdma_cm_id *id, struct ibv_srq_init_attr_ex *a) { return fail(ENOSYS); }
EXPORT void rdma_destroy_srq(struct rdma_cm_id *id) {}
EXPORT int rdma_set_local_ece(struct rdma_cm_id *id, struct ibv_ece *e) { return fail(EOPNOTSUPP); }
EXPORT int rdma_get_remote_ece(struct rdma_cm_id *id, struct ibv_ece *e) { return fail(EOPNOTSUPP); }
EXPORT int rdma_reject_ece(struct rdma_cm_id *id, const void *d, uint8_t n) { return fail(EOPNOTSUPP); }

EXPORT __be16 rdma_get_src_port(struct rdma_cm_id *id)
{
	/* sin_port and sin6_port are at one offset; as librdmacm, read the
	 * one of the address's family. */
	if (id && id->route.addr.src_addr.sa_family == AF_INET6)
		return id->route.addr.src_sin6.sin6_port;
	return id ? id->route.addr.src_sin.sin_port : 0;
}

EXPORT __be16 rdma_get_dst_port(struct rdma_cm_id *id)
{
	if (id && id->route.addr.dst_addr.sa_family == AF_INET6)
		return id->route.addr.dst_sin6.sin6_port;
	return id ? id->route.addr.dst_sin.sin_port : 0;
}

/* rsockets: not modelled. */
EXPORT int rsocket(int d, int t, int p) { return fail(ENOSYS); }
EXPORT int rbind(int s, const struct sockaddr *a, socklen_t l) { return fail(ENOSYS); }
EXPORT int rlisten(int s, int b) { return fail(ENOSYS); }
EXPORT int raccept(int s, struct sockaddr *a, socklen_t *l) { return fail(ENOSYS); }
EXPORT int rconnect(int s, const struct sockaddr *a, socklen_t l) { return fail(ENOSYS); }
EXPORT int rshutdown(int s, int h) { return fail(ENOSYS); }
EXPORT int rclose(int s) { return fail(ENOSYS); }
EXPORT ssize_t rrecv(int s, void *b, size_t n, int f) { return fail(ENOSYS); }
EXPORT ssize_t rrecvfrom(int s, void *b, size_t n, int f, struct sockaddr *a, socklen_t *l) { return fail(ENOSYS); }
EXPORT ssize_t rrecvmsg(int s, struct msghdr *m, int f) { return fail(ENOSYS); }
EXPORT ssize_t rsend(int s, const void *b, size_t n, int f) { return fail(ENOSYS); }
EXPORT ssize_t rsendto(int s, const void *b, size_t n, int f, const struct sockaddr *a, socklen_t l) { return fail(ENOSYS); }
EXPORT ssize_t rsendmsg(int s, const struct msghdr *m, int f) { return fail(ENOSYS); }
EXPORT ssize_t rread(int s, void *b, size_t n) { return fail(ENOSYS); }
EXPORT ssize_t rreadv(int s, const struct iovec *v, int n) { return fail(ENOSYS); }
EXPORT ssize_t rwrite(int s, const void *b, size_t n) { return fail(ENOSYS); }
EXPORT ssize_t rwritev(int s, const struct iovec *v, int n) { return fail(ENOSYS); }
EXPORT int rpoll(struct pollfd *f, nfds_t n, int t) { return fail(ENOSYS); }
EXPORT int rselect(int n, fd_set *r, fd_set *w, fd_set *e, struct timeval *t) { return fail(ENOSYS); }
EXPORT int rgetpeername(int s, struct sockaddr *a, socklen_t *l) { return fail(ENOSYS); }
EXPORT int rgetsockname(int s, struct sockaddr *a, socklen_t *l) { return fail(ENOSYS); }
EXPORT int rsetsockopt(int s, int l, int o, const void *v, socklen_t n) { return fail(ENOSYS); }
EXPORT int rgetsockopt(int s, int l, int o, void *v, socklen_t *n) { return fail(ENOSYS); }
EXPORT int rfcntl(int s, int c, ...) { return fail(ENOSYS); }
EXPORT off_t riomap(int s, void *b, size_t n, int p, int f, off_t o) { return fail(ENOSYS); }
EXPORT int riounmap(int s, void *b, size_t n) { return fail(ENOSYS); }
EXPORT size_t riowrite(int s, const void *b, size_t n, off_t o, int f) { errno = ENOSYS; return 0; }
