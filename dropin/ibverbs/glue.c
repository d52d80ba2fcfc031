//go:build cgo && linux

/*
 * The exported ibv_* entry points of the drop-in libibverbs.so.1.
 *
 * Each verb allocates or frees the structure <infiniband/verbs.h>
 * defines and calls the Go side (exports.go, which holds the model and
 * one lock around it) with the handles it gave. As in rdma-core's
 * userspace rxe provider (providers/rxe/rxe.c), the context carries an
 * ops table: ibv_post_send, ibv_post_recv, ibv_poll_cq and
 * ibv_req_notify_cq are static inline in the header and call through
 * context->ops, and ibv_query_port goes through struct verbs_context,
 * so the context is a verbs_context marked extended.
 *
 * Errors follow libibverbs: a verb returning a pointer returns NULL with
 * errno set; one returning int returns the errno (or -1 with errno for
 * the few that libibverbs documents so: ibv_get_cq_event,
 * ibv_get_async_event, ibv_read_sysfs_file). A NULL object, where
 * libibverbs would crash, is EINVAL here.
 */

#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/eventfd.h>
#include <unistd.h>

#include "glue.h"
#include "_cgo_export.h"
#include "calls.h"

/* ibv_query_gid_type (IBVERBS_PRIVATE_34) is declared in rdma-core's
 * driver.h, which Debian does not install; ibv_devinfo -v calls it. */
enum ibv_gid_type_sysfs {
	IBV_GID_TYPE_SYSFS_IB_ROCE_V1,
	IBV_GID_TYPE_SYSFS_ROCE_V2,
};
int ibv_query_gid_type(struct ibv_context *context, uint8_t port_num,
		       unsigned int index, enum ibv_gid_type_sysfs *type);

/* A context: the Go side's handle, then the verbs_context the header's
 * inline verbs find by container_of from the ibv_context. */
struct rs_context {
	uint32_t handle;
	struct verbs_context vctx;
};

static struct rs_context *to_rctx(struct ibv_context *ctx)
{
	return container_of(container_of(ctx, struct verbs_context, context),
			    struct rs_context, vctx);
}

/* The calls of the Go side in progress (calls.h, threads.go). */
int rs_inside;

/* rs_entry and rs_leave for the drop-in librdmacm.so.1, whose calls of
 * rs_cm_* are counted as this library's own (rocesim_cm.h). */
void rs_cm_entry(void)
{
	rs_entry();
}

void rs_cm_leave_call(void)
{
	rs_leave();
}

/* fail sets errno to err (if not 0) and returns NULL. */
static void *fail(int err)
{
	errno = err ? err : EINVAL;
	return NULL;
}

/* ---- devices ---- */

static struct ibv_device **devices; /* one per model device, never freed */
static int num_devices;
static pthread_once_t devices_once = PTHREAD_ONCE_INIT;

static void make_devices(void)
{
	num_devices = rs_device_count();
	devices = calloc(num_devices + 1, sizeof(*devices));
	for (int i = 0; devices && i < num_devices; i++) {
		struct ibv_device *d = calloc(1, sizeof(*d));

		if (!d)
			break;
		/* As rxe: an RDMA device of the InfiniBand node type over the
		 * IB transport (RoCE), whose name the sysfs paths follow. The
		 * name is the model's (rocesim0, or after ROCESIM_DEVICE_PREFIX:
		 * rxe0 for scripts written for rxe). */
		d->node_type = IBV_NODE_CA;
		d->transport_type = IBV_TRANSPORT_IB;
		rs_device_name(i, d->name, sizeof(d->name));
		snprintf(d->dev_name, sizeof(d->dev_name), "uverbs%d", i);
		snprintf(d->dev_path, sizeof(d->dev_path),
			 "/sys/class/infiniband_verbs/uverbs%d", i);
		snprintf(d->ibdev_path, sizeof(d->ibdev_path),
			 "/sys/class/infiniband/%s", d->name);
		devices[i] = d;
	}
}

/* init_devices makes the devices once, whichever thread asks first. */
static void init_devices(void)
{
	pthread_once(&devices_once, make_devices);
}

static int device_index(struct ibv_device *dev)
{
	init_devices();
	for (int i = 0; i < num_devices; i++)
		if (devices && devices[i] == dev)
			return i;
	return -1;
}

struct ibv_device **ibv_get_device_list(int *num)
{
	struct ibv_device **list;

	init_devices();
	list = calloc(num_devices + 1, sizeof(*list));
	if (!list || !devices)
		return fail(ENOMEM);
	memcpy(list, devices, num_devices * sizeof(*list));
	if (num)
		*num = num_devices;
	return list;
}

void ibv_free_device_list(struct ibv_device **list)
{
	free(list);
}

const char *ibv_get_device_name(struct ibv_device *device)
{
	return device ? device->name : fail(EINVAL);
}

__be64 ibv_get_device_guid(struct ibv_device *device)
{
	int i = device_index(device);

	return i < 0 ? 0 : rs_device_guid(i);
}

int ibv_get_device_index(struct ibv_device *device)
{
	return device_index(device);
}

/* ---- contexts ---- */

static int rs_poll_cq_op(struct ibv_cq *cq, int num_entries, struct ibv_wc *wc);
static int rs_req_notify_cq_op(struct ibv_cq *cq, int solicited_only);
static int rs_post_send_op(struct ibv_qp *qp, struct ibv_send_wr *wr,
			   struct ibv_send_wr **bad_wr);
static int rs_post_recv_op(struct ibv_qp *qp, struct ibv_recv_wr *wr,
			   struct ibv_recv_wr **bad_wr);
static int rs_post_srq_recv_op(struct ibv_srq *srq, struct ibv_recv_wr *wr,
			       struct ibv_recv_wr **bad_wr);
static int rs_query_port_op(struct ibv_context *context, uint8_t port_num,
			    struct ibv_port_attr *port_attr, size_t port_attr_len);
static int rs_query_device_ex_op(struct ibv_context *context,
				 const struct ibv_query_device_ex_input *input,
				 struct ibv_device_attr_ex *attr, size_t attr_size);
static struct ibv_mw *rs_alloc_mw_op(struct ibv_pd *pd, enum ibv_mw_type type);
static int rs_dealloc_mw_op(struct ibv_mw *mw);
static int rs_bind_mw_op(struct ibv_qp *qp, struct ibv_mw *mw, struct ibv_mw_bind *mw_bind);

struct ibv_context *ibv_open_device(struct ibv_device *device)
{
	int i = device_index(device), err, async_fd;
	struct rs_context *r;
	struct ibv_context *ctx;
	uint32_t h;

	if (i < 0)
		return fail(ENODEV);
	r = calloc(1, sizeof(*r));
	if (!r)
		return fail(ENOMEM);
	err = rs_open(i, &h, &async_fd);
	if (err) {
		free(r);
		return fail(err);
	}
	r->handle = h;
	r->vctx.sz = sizeof(r->vctx);
	r->vctx.query_port = rs_query_port_op;
	r->vctx.query_device_ex = rs_query_device_ex_op;
	r->vctx.create_cq_ex = rs_create_cq_ex_op;
	r->vctx.create_qp_ex = rs_create_qp_ex_op;
	ctx = &r->vctx.context;
	ctx->device = device;
	/* On rxe, cmd_fd is the open /dev/infiniband/uverbsN, which a program
	 * may dup (rdma-core's tests do, for ibv_import_device) but never
	 * reads. Here it is an eventfd nobody signals: a real descriptor,
	 * never readable. */
	ctx->cmd_fd = eventfd(0, EFD_CLOEXEC);
	if (ctx->cmd_fd < 0) {
		err = errno;
		rs_close(h);
		free(r);
		return fail(err);
	}
	ctx->async_fd = async_fd;
	ctx->num_comp_vectors = 1;
	ctx->abi_compat = __VERBS_ABI_IS_EXTENDED;
	pthread_mutex_init(&ctx->mutex, NULL);
	ctx->ops.poll_cq = rs_poll_cq_op;
	ctx->ops.req_notify_cq = rs_req_notify_cq_op;
	ctx->ops.post_send = rs_post_send_op;
	ctx->ops.post_recv = rs_post_recv_op;
	ctx->ops.post_srq_recv = rs_post_srq_recv_op;
	ctx->ops.alloc_mw = rs_alloc_mw_op;
	ctx->ops.dealloc_mw = rs_dealloc_mw_op;
	ctx->ops.bind_mw = rs_bind_mw_op;
	/* The other verbs_context entries stay NULL: the header's inline
	 * wrappers then fail with EOPNOTSUPP (or ENOSYS), as libibverbs does
	 * for a provider without them. */
	return ctx;
}

int ibv_close_device(struct ibv_context *context)
{
	struct rs_context *r;
	int err;

	if (!context)
		return EINVAL;
	r = to_rctx(context);
	err = rs_close(r->handle);
	if (err)
		return err;
	close(context->cmd_fd);
	pthread_mutex_destroy(&context->mutex);
	free(r);
	return 0;
}

int ibv_get_async_event(struct ibv_context *context, struct ibv_async_event *event)
{
	int err;

	if (!context || !event) {
		errno = EINVAL;
		return -1;
	}
	err = rs_get_async_event(to_rctx(context)->handle,
				 (fcntl(context->async_fd, F_GETFL) & O_NONBLOCK) != 0, event);
	if (err) {
		errno = err;
		return -1;
	}
	return 0;
}

void ibv_ack_async_event(struct ibv_async_event *event)
{
	(void)event; /* events are not counted against destroy */
}

int ibv_query_device(struct ibv_context *context, struct ibv_device_attr *device_attr)
{
	if (!context || !device_attr)
		return EINVAL;
	memset(device_attr, 0, sizeof(*device_attr));
	return rs_query_device(to_rctx(context)->handle, device_attr);
}

/* The extended attributes: the legacy ones, and rxe's capability flags
 * again in device_cap_flags_ex (as `ibv_devinfo -v` shows on rxe); the
 * extensions the model has none of (ODP, TSO, RSS, tag matching, ...)
 * stay zero. */
static int rs_query_device_ex_op(struct ibv_context *context,
				 const struct ibv_query_device_ex_input *input,
				 struct ibv_device_attr_ex *attr, size_t attr_size)
{
	struct ibv_device_attr_ex a = {};
	int err;

	if (!context || !attr || (input && input->comp_mask))
		return EINVAL;
	err = ibv_query_device(context, &a.orig_attr);
	if (err)
		return err;
	a.device_cap_flags_ex = a.orig_attr.device_cap_flags;
	/* libibverbs fills it whatever the provider (ibv_cmd_query_device_any) */
	a.phys_port_cnt_ex = a.orig_attr.phys_port_cnt;
	memcpy(attr, &a, attr_size < sizeof(a) ? attr_size : sizeof(a));
	return 0;
}

static int rs_query_port_op(struct ibv_context *context, uint8_t port_num,
			    struct ibv_port_attr *port_attr, size_t port_attr_len)
{
	struct ibv_port_attr attr = {};
	int err;

	if (!context || !port_attr)
		return EINVAL;
	err = rs_query_port(to_rctx(context)->handle, port_num, &attr);
	if (err)
		return err;
	memcpy(port_attr, &attr, port_attr_len < sizeof(attr) ? port_attr_len : sizeof(attr));
	return 0;
}

/* The old entry point, for programs built before verbs_context had
 * query_port: it fills the fields that struct had. */
#undef ibv_query_port
int ibv_query_port(struct ibv_context *context, uint8_t port_num,
		   struct _compat_ibv_port_attr *port_attr)
{
	return rs_query_port_op(context, port_num, (struct ibv_port_attr *)port_attr,
				offsetof(struct ibv_port_attr, port_cap_flags2));
}

int ibv_query_gid(struct ibv_context *context, uint8_t port_num, int index,
		  union ibv_gid *gid)
{
	int err;

	if (!context || !gid)
		return -1;
	err = rs_query_gid(to_rctx(context)->handle, port_num, index, gid->raw);
	if (err) {
		errno = err;
		return -1;
	}
	return 0;
}

int ibv_query_gid_type(struct ibv_context *context, uint8_t port_num,
		       unsigned int index, enum ibv_gid_type_sysfs *type)
{
	union ibv_gid gid;

	if (!type || ibv_query_gid(context, port_num, index, &gid))
		return -1;
	*type = IBV_GID_TYPE_SYSFS_ROCE_V2; /* rxe's port speaks RoCE v2 only */
	return 0;
}

int _ibv_query_gid_ex(struct ibv_context *context, uint32_t port_num,
		      uint32_t gid_index, struct ibv_gid_entry *entry,
		      uint32_t flags, size_t entry_size)
{
	if (!context || !entry || flags || entry_size < sizeof(*entry) || port_num > 255)
		return EINVAL;
	static const union ibv_gid zero;

	memset(entry, 0, sizeof(*entry));
	if (ibv_query_gid(context, port_num, gid_index, &entry->gid))
		return errno; /* past the table */
	if (!memcmp(&entry->gid, &zero, sizeof(zero)))
		return ENODATA; /* as libibverbs for an empty entry */
	entry->gid_index = gid_index;
	entry->port_num = port_num;
	entry->gid_type = IBV_GID_TYPE_ROCE_V2;
	entry->ndev_ifindex = 0;
	return 0;
}

ssize_t _ibv_query_gid_table(struct ibv_context *context,
			     struct ibv_gid_entry *entries, size_t max_entries,
			     uint32_t flags, size_t entry_size)
{
	struct ibv_gid_entry spare;
	size_t n = 0;

	/* The kernel's QUERY_GID_TABLE refuses room for no entry, and a
	 * table with more valid entries than the room given (EINVAL from
	 * rdma_query_gid_table); the errno comes back negated. */
	if (!context || !entries || !max_entries || flags || entry_size < sizeof(*entries))
		return -EINVAL;
	for (uint32_t i = 0;; i++) {
		struct ibv_gid_entry *e = n < max_entries ?
			(struct ibv_gid_entry *)((char *)entries + n * entry_size) : &spare;
		int err = _ibv_query_gid_ex(context, 1, i, e, 0, sizeof(*e));

		if (err == ENODATA)
			continue;
		if (err)
			break; /* past the table */
		if (n == max_entries)
			return -EINVAL;
		n++;
	}
	return n;
}

int ibv_query_pkey(struct ibv_context *context, uint8_t port_num, int index,
		   __be16 *pkey)
{
	int err;

	if (!context || !pkey)
		return -1;
	err = rs_query_pkey(to_rctx(context)->handle, port_num, index, pkey);
	if (err) {
		errno = err;
		return -1;
	}
	return 0;
}

int ibv_get_pkey_index(struct ibv_context *context, uint8_t port_num, __be16 pkey)
{
	__be16 p;

	if (ibv_query_pkey(context, port_num, 0, &p) == 0 && p == pkey)
		return 0;
	return -1;
}

/* ---- protection domains, memory regions ---- */

struct ibv_pd *ibv_alloc_pd(struct ibv_context *context)
{
	struct ibv_pd *pd;
	int err;

	if (!context)
		return fail(EINVAL);
	pd = calloc(1, sizeof(*pd));
	if (!pd)
		return fail(ENOMEM);
	err = rs_alloc_pd(to_rctx(context)->handle, &pd->handle);
	if (err) {
		free(pd);
		return fail(err);
	}
	pd->context = context;
	return pd;
}

int ibv_dealloc_pd(struct ibv_pd *pd)
{
	int err;

	if (!pd)
		return EINVAL;
	err = rs_dealloc_pd(pd->handle);
	if (!err)
		free(pd);
	return err;
}

struct ibv_mr *ibv_reg_mr_iova2(struct ibv_pd *pd, void *addr, size_t length,
				uint64_t iova, unsigned int access)
{
	struct ibv_mr *mr;
	int err;

	if (!pd)
		return fail(EINVAL);
	mr = calloc(1, sizeof(*mr));
	if (!mr)
		return fail(ENOMEM);
	err = rs_reg_mr(pd->handle, addr, length, iova, access, &mr->handle,
			&mr->lkey, &mr->rkey);
	if (err) {
		free(mr);
		return fail(err);
	}
	mr->context = pd->context;
	mr->pd = pd;
	mr->addr = addr;
	mr->length = length;
	return mr;
}

#undef ibv_reg_mr
struct ibv_mr *ibv_reg_mr(struct ibv_pd *pd, void *addr, size_t length, int access)
{
	return ibv_reg_mr_iova2(pd, addr, length, (uintptr_t)addr, access);
}

#undef ibv_reg_mr_iova
struct ibv_mr *ibv_reg_mr_iova(struct ibv_pd *pd, void *addr, size_t length,
			       uint64_t iova, int access)
{
	return ibv_reg_mr_iova2(pd, addr, length, iova, access);
}

int ibv_rereg_mr(struct ibv_mr *mr, int flags, struct ibv_pd *pd, void *addr,
		 size_t length, int access)
{
	int err;

	/* libibverbs' own checks, before the kernel is asked. */
	if (!mr || (flags & ~IBV_REREG_MR_FLAGS_SUPPORTED) ||
	    ((flags & IBV_REREG_MR_CHANGE_TRANSLATION) && (!addr || !length))) {
		errno = EINVAL;
		return IBV_REREG_MR_ERR_INPUT;
	}
	/* The device's answer: rxe 6.1 has no rereg_user_mr, so under the
	 * rxe profile every call fails with EOPNOTSUPP (the conformance
	 * suite's TestReregMRMatchesRxe); the spec profile does it. */
	err = rs_rereg_mr(mr->handle, flags, pd ? pd->handle : 0, addr, length, access);
	if (err) {
		errno = err;
		return IBV_REREG_MR_ERR_CMD;
	}
	if (flags & IBV_REREG_MR_CHANGE_PD)
		mr->pd = pd;
	if (flags & IBV_REREG_MR_CHANGE_TRANSLATION) {
		mr->addr = addr;
		mr->length = length;
	}
	return 0;
}

int ibv_dereg_mr(struct ibv_mr *mr)
{
	int err;

	if (!mr)
		return EINVAL;
	err = rs_dereg_mr(mr->handle);
	if (!err)
		free(mr);
	return err;
}

/* ---- memory windows ---- */

static struct ibv_mw *rs_alloc_mw_op(struct ibv_pd *pd, enum ibv_mw_type type)
{
	struct ibv_mw *mw;
	int err;

	if (!pd)
		return fail(EINVAL);
	mw = calloc(1, sizeof(*mw));
	if (!mw)
		return fail(ENOMEM);
	err = rs_alloc_mw(pd->handle, type, &mw->handle, &mw->rkey);
	if (err) {
		free(mw);
		return fail(err);
	}
	mw->context = pd->context;
	mw->pd = pd;
	mw->type = type;
	return mw;
}

static int rs_dealloc_mw_op(struct ibv_mw *mw)
{
	int err;

	if (!mw)
		return EINVAL;
	err = rs_dealloc_mw(mw->handle);
	if (!err)
		free(mw);
	return err;
}

/* A type 1 bind (ibv_bind_mw): as rxe's provider, the window's R_Key
 * takes its next key byte, which the caller reads from mw->rkey. */
static int rs_bind_mw_op(struct ibv_qp *qp, struct ibv_mw *mw, struct ibv_mw_bind *mw_bind)
{
	struct ibv_mw_bind_info *b;

	if (!qp || !mw || !mw_bind)
		return EINVAL;
	b = &mw_bind->bind_info;
	return rs_bind_mw(qp->handle, mw->handle, mw_bind->wr_id, mw_bind->send_flags,
			  b->mr ? b->mr->handle : 0, b->addr, b->length, b->mw_access_flags,
			  &mw->rkey);
}

/* ---- completion channels and queues ---- */

struct ibv_comp_channel *ibv_create_comp_channel(struct ibv_context *context)
{
	struct ibv_comp_channel *ch;
	int err;

	if (!context)
		return fail(EINVAL);
	ch = calloc(1, sizeof(*ch));
	if (!ch)
		return fail(ENOMEM);
	err = rs_create_comp_channel(to_rctx(context)->handle, &ch->fd);
	if (err) {
		free(ch);
		return fail(err);
	}
	ch->context = context;
	return ch;
}

int ibv_destroy_comp_channel(struct ibv_comp_channel *channel)
{
	int err;

	if (!channel)
		return EINVAL;
	err = rs_destroy_comp_channel(channel->fd);
	if (!err)
		free(channel);
	return err;
}

struct ibv_cq *ibv_create_cq(struct ibv_context *context, int cqe, void *cq_context,
			     struct ibv_comp_channel *channel, int comp_vector)
{
	struct ibv_cq *cq;
	int err;

	if (!context)
		return fail(EINVAL);
	cq = calloc(1, sizeof(*cq));
	if (!cq)
		return fail(ENOMEM);
	err = rs_cq_init(cq, context, cqe, channel, comp_vector, cq_context);
	if (err) {
		free(cq);
		return fail(err);
	}
	return cq;
}

/* rs_cq_init makes the model's CQ for cq, plain or the ibv_cq part of an
 * extended one, and fills what libibverbs keeps in it; 0 or the errno. */
int rs_cq_init(struct ibv_cq *cq, struct ibv_context *context, int cqe,
	       struct ibv_comp_channel *channel, int comp_vector, void *cq_context)
{
	int err = rs_create_cq(to_rctx(context)->handle, cqe, channel ? channel->fd : -1,
			       comp_vector, cq, &cq->handle, &cq->cqe);

	if (err)
		return err;
	cq->context = context;
	cq->channel = channel;
	cq->cq_context = cq_context;
	pthread_mutex_init(&cq->mutex, NULL);
	pthread_cond_init(&cq->cond, NULL);
	return 0;
}

int ibv_resize_cq(struct ibv_cq *cq, int cqe)
{
	if (!cq)
		return EINVAL;
	return rs_resize_cq(cq->handle, cqe, &cq->cqe);
}

int ibv_destroy_cq(struct ibv_cq *cq)
{
	int err;

	if (!cq)
		return EINVAL;
	err = rs_destroy_cq(cq->handle);
	if (err)
		return err;
	pthread_cond_destroy(&cq->cond);
	pthread_mutex_destroy(&cq->mutex);
	free(cq);
	return 0;
}

static int rs_poll_cq_op(struct ibv_cq *cq, int num_entries, struct ibv_wc *wc)
{
	if (!cq || num_entries < 0 || (!wc && num_entries))
		return -EINVAL;
	return rs_poll_cq(cq->handle, num_entries, wc);
}

static int rs_req_notify_cq_op(struct ibv_cq *cq, int solicited_only)
{
	if (!cq)
		return EINVAL;
	return rs_req_notify_cq(cq->handle, solicited_only);
}

int ibv_get_cq_event(struct ibv_comp_channel *channel, struct ibv_cq **cq,
		     void **cq_context)
{
	void *p = NULL;
	int err;

	if (!channel || !cq || !cq_context) {
		errno = EINVAL;
		return -1;
	}
	err = rs_get_cq_event(channel->fd, (fcntl(channel->fd, F_GETFL) & O_NONBLOCK) != 0, &p);
	if (err) {
		errno = err;
		return -1;
	}
	*cq = p;
	*cq_context = (*cq)->cq_context;
	return 0;
}

void ibv_ack_cq_events(struct ibv_cq *cq, unsigned int nevents)
{
	if (cq)
		rs_ack_cq_events(cq->handle, nevents);
}

/* ---- shared receive queues ---- */

struct ibv_srq *ibv_create_srq(struct ibv_pd *pd, struct ibv_srq_init_attr *attr)
{
	struct ibv_srq *srq;
	int err;

	if (!pd || !attr)
		return fail(EINVAL);
	srq = calloc(1, sizeof(*srq));
	if (!srq)
		return fail(ENOMEM);
	err = rs_create_srq(pd->handle, &attr->attr, srq, &srq->handle);
	if (err) {
		free(srq);
		return fail(err);
	}
	srq->context = pd->context;
	srq->srq_context = attr->srq_context;
	srq->pd = pd;
	pthread_mutex_init(&srq->mutex, NULL);
	pthread_cond_init(&srq->cond, NULL);
	return srq;
}

int ibv_modify_srq(struct ibv_srq *srq, struct ibv_srq_attr *srq_attr, int srq_attr_mask)
{
	if (!srq || !srq_attr)
		return EINVAL;
	return rs_modify_srq(srq->handle, srq_attr, srq_attr_mask);
}

int ibv_query_srq(struct ibv_srq *srq, struct ibv_srq_attr *srq_attr)
{
	if (!srq || !srq_attr)
		return EINVAL;
	return rs_query_srq(srq->handle, srq_attr);
}

int ibv_destroy_srq(struct ibv_srq *srq)
{
	int err;

	if (!srq)
		return EINVAL;
	err = rs_destroy_srq(srq->handle);
	if (err)
		return err;
	pthread_cond_destroy(&srq->cond);
	pthread_mutex_destroy(&srq->mutex);
	free(srq);
	return 0;
}

static int rs_post_srq_recv_op(struct ibv_srq *srq, struct ibv_recv_wr *wr,
			       struct ibv_recv_wr **bad_wr)
{
	if (!srq || !bad_wr)
		return EINVAL;
	return rs_post_srq_recv(srq->handle, wr, bad_wr);
}

/* ---- queue pairs ---- */

struct ibv_qp *ibv_create_qp(struct ibv_pd *pd, struct ibv_qp_init_attr *attr)
{
	if (!pd || !attr)
		return fail(EINVAL);
	return rs_new_qp(pd, attr, 0, 0, 0);
}

/* rs_new_qp makes a QP, extended (ibv_create_qp_ex) or not. An extended
 * one has the work request builders for the send opcodes ops only when
 * it asked for send opcodes (builders: the attributes had
 * IBV_QP_INIT_ATTR_SEND_OPS_FLAGS); without, rxe leaves every builder,
 * ibv_wr_start included, NULL. */
struct ibv_qp *rs_new_qp(struct ibv_pd *pd, struct ibv_qp_init_attr *attr, int extended,
			 int builders, uint64_t ops)
{
	struct rs_qp *q;
	struct ibv_qp *qp;
	int err;

	q = calloc(1, sizeof(*q));
	if (!q)
		return fail(ENOMEM);
	qp = &q->qpx.qp_base;
	err = rs_create_qp(pd->handle, attr, qp, &qp->handle, &qp->qp_num);
	if (err) {
		free(q);
		return fail(err);
	}
	q->max_send_sge = attr->cap.max_send_sge;
	q->max_inline_data = attr->cap.max_inline_data;
	pthread_mutex_init(&q->batch_mu, NULL);
	pthread_cond_init(&q->batch_free, NULL);
	q->extended = extended;
	if (builders)
		rs_qp_ex_init(q, ops);
	qp->context = pd->context;
	qp->qp_context = attr->qp_context;
	qp->pd = pd;
	qp->send_cq = attr->send_cq;
	qp->recv_cq = attr->recv_cq;
	qp->srq = attr->srq;
	qp->qp_type = attr->qp_type;
	qp->state = IBV_QPS_RESET;
	pthread_mutex_init(&qp->mutex, NULL);
	pthread_cond_init(&qp->cond, NULL);
	return qp;
}

int ibv_modify_qp(struct ibv_qp *qp, struct ibv_qp_attr *attr, int attr_mask)
{
	int err, state;

	if (!qp || !attr)
		return EINVAL;
	err = rs_modify_qp(qp->handle, attr, attr_mask, &state);
	if (!err)
		qp->state = state;
	return err;
}

int ibv_query_qp(struct ibv_qp *qp, struct ibv_qp_attr *attr, int attr_mask,
		 struct ibv_qp_init_attr *init_attr)
{
	int err;

	if (!qp || !attr || !init_attr)
		return EINVAL;
	memset(attr, 0, sizeof(*attr));
	memset(init_attr, 0, sizeof(*init_attr));
	err = rs_query_qp(qp->handle, attr, attr_mask, init_attr);
	if (err)
		return err;
	init_attr->qp_context = qp->qp_context;
	init_attr->send_cq = qp->send_cq;
	init_attr->recv_cq = qp->recv_cq;
	init_attr->srq = qp->srq;
	init_attr->qp_type = qp->qp_type;
	qp->state = attr->qp_state;
	return 0;
}

int ibv_destroy_qp(struct ibv_qp *qp)
{
	struct rs_qp *q;
	int err;

	if (!qp)
		return EINVAL;
	err = rs_destroy_qp(qp->handle);
	if (err)
		return err;
	q = container_of(qp, struct rs_qp, qpx.qp_base);
	pthread_cond_destroy(&qp->cond);
	pthread_mutex_destroy(&qp->mutex);
	pthread_cond_destroy(&q->batch_free);
	pthread_mutex_destroy(&q->batch_mu);
	free(q->batch.wr);
	free(q->batch.sge);
	free(q->batch.inl);
	free(q);
	return 0;
}

static int rs_post_send_op(struct ibv_qp *qp, struct ibv_send_wr *wr,
			   struct ibv_send_wr **bad_wr)
{
	if (!qp || !bad_wr)
		return EINVAL;
	return rs_post_send(qp->handle, wr, bad_wr);
}

static int rs_post_recv_op(struct ibv_qp *qp, struct ibv_recv_wr *wr,
			   struct ibv_recv_wr **bad_wr)
{
	if (!qp || !bad_wr)
		return EINVAL;
	return rs_post_recv(qp->handle, wr, bad_wr);
}

/* rs_send_wr_ext reads the union members the opcode and the QP's type
 * (ud: a UD QP) use; the others may hold anything (a UD field read on an
 * RC QP is a remote address, not a pointer to follow). */
void rs_send_wr_ext(const struct ibv_send_wr *wr, int ud, struct rs_send_wr_ext *out)
{
	memset(out, 0, sizeof(*out));
	switch (wr->opcode) {
	case IBV_WR_ATOMIC_CMP_AND_SWP:
	case IBV_WR_ATOMIC_FETCH_AND_ADD:
		out->remote_addr = wr->wr.atomic.remote_addr;
		out->rkey = wr->wr.atomic.rkey;
		out->compare_add = wr->wr.atomic.compare_add;
		out->swap = wr->wr.atomic.swap;
		break;
	case IBV_WR_BIND_MW:
		out->mw = wr->bind_mw.mw ? wr->bind_mw.mw->handle : 0;
		out->bind_rkey = wr->bind_mw.rkey;
		out->bind_mr = wr->bind_mw.bind_info.mr ? wr->bind_mw.bind_info.mr->handle : 0;
		out->bind_addr = wr->bind_mw.bind_info.addr;
		out->bind_length = wr->bind_mw.bind_info.length;
		out->bind_access = wr->bind_mw.bind_info.mw_access_flags;
		break;
	default:
		if (ud) {
			out->ah = wr->wr.ud.ah ? wr->wr.ud.ah->handle : 0;
			out->remote_qpn = wr->wr.ud.remote_qpn;
			out->remote_qkey = wr->wr.ud.remote_qkey;
		} else {
			out->remote_addr = wr->wr.rdma.remote_addr;
			out->rkey = wr->wr.rdma.rkey;
		}
		break;
	}
	out->imm_data = be32toh(wr->imm_data);
	out->invalidate_rkey = wr->invalidate_rkey;
}

void rs_wc_set_imm(struct ibv_wc *wc, uint32_t imm, int invalidated)
{
	if (invalidated)
		wc->invalidated_rkey = imm;
	else
		wc->imm_data = htobe32(imm);
}

/* The extended view of a QP ibv_create_qp_ex made; NULL for one
 * ibv_create_qp made, as libibverbs answers for a QP without
 * VERBS_QP_EX. */
struct ibv_qp_ex *ibv_qp_to_qp_ex(struct ibv_qp *qp)
{
	struct rs_qp *q;

	if (!qp)
		return fail(EINVAL);
	q = container_of(qp, struct rs_qp, qpx.qp_base);
	return q->extended ? &q->qpx : NULL;
}

/* ---- address handles ---- */

struct ibv_ah *ibv_create_ah(struct ibv_pd *pd, struct ibv_ah_attr *attr)
{
	struct ibv_ah *ah;
	int err;

	if (!pd || !attr)
		return fail(EINVAL);
	ah = calloc(1, sizeof(*ah));
	if (!ah)
		return fail(ENOMEM);
	err = rs_create_ah(pd->handle, attr, &ah->handle);
	if (err) {
		free(ah);
		return fail(err);
	}
	ah->context = pd->context;
	ah->pd = pd;
	return ah;
}

int ibv_destroy_ah(struct ibv_ah *ah)
{
	int err;

	if (!ah)
		return EINVAL;
	err = rs_destroy_ah(ah->handle);
	if (!err)
		free(ah);
	return err;
}

void rs_set_async_event(struct ibv_async_event *ev, void *element, int port, int type)
{
	memset(ev, 0, sizeof(*ev));
	if (element)
		ev->element.qp = element; /* the union's members are all pointers */
	else
		ev->element.port_num = port;
	ev->event_type = type;
}

/* ---- multicast ---- */

/*
 * ibv_attach_mcast/ibv_detach_mcast: the model keeps the group table
 * (nic/mcast.go), as rxe_mcast.c does in the kernel; the LID means
 * nothing on RoCE. A NULL QP or GID gets EINVAL rather than the crash
 * libibverbs would give it.
 */
int ibv_attach_mcast(struct ibv_qp *qp, const union ibv_gid *gid, uint16_t lid)
{
	if (!qp || !gid)
		return EINVAL;
	return rs_mcast(qp->handle, (uint8_t *)gid->raw, lid, 1);
}

int ibv_detach_mcast(struct ibv_qp *qp, const union ibv_gid *gid, uint16_t lid)
{
	if (!qp || !gid)
		return EINVAL;
	return rs_mcast(qp->handle, (uint8_t *)gid->raw, lid, 0);
}

/* ---- an address handle from a received UD completion ---- */

/* gid_index returns the index of gid in the port's table, or -1. */
static int gid_index(struct ibv_context *context, uint8_t port_num, const union ibv_gid *gid)
{
	union ibv_gid g;

	for (int i = 0; ibv_query_gid(context, port_num, i, &g) == 0; i++)
		if (!memcmp(&g, gid, sizeof(g)))
			return i;
	return -1;
}

/* As libibverbs for a RoCE port: the GRH area of a UD receive holds the
 * IP header the packet came with, an IPv6 header, or an IPv4 header in
 * its last 20 bytes (RoCE v2 over IPv4, as rxe and the model fill it).
 * The sender's address becomes the AH's destination GID; the address it
 * was sent to picks our source GID index. */
int ibv_init_ah_from_wc(struct ibv_context *context, uint8_t port_num,
			struct ibv_wc *wc, struct ibv_grh *grh, struct ibv_ah_attr *ah_attr)
{
	union ibv_gid sgid = {}, dgid = {};
	uint32_t flow_label = 0;
	uint8_t tclass;
	int idx;

	if (!context || !wc || !grh || !ah_attr) {
		errno = EINVAL;
		return -1;
	}
	memset(ah_attr, 0, sizeof(*ah_attr));
	ah_attr->port_num = port_num;
	ah_attr->dlid = wc->slid;
	ah_attr->sl = wc->sl;
	ah_attr->src_path_bits = wc->dlid_path_bits;
	if (!(wc->wc_flags & IBV_WC_GRH)) {
		errno = EINVAL; /* RoCE has no path without a GRH */
		return -1;
	}
	const uint8_t *raw = (const uint8_t *)grh;
	if ((raw[0] >> 4) == 6) {
		uint32_t vtf = be32toh(grh->version_tclass_flow);

		sgid = grh->sgid;
		dgid = grh->dgid;
		tclass = (vtf >> 20) & 0xff;
		flow_label = vtf & 0xfffff;
	} else if ((raw[20] >> 4) == 4) {
		const uint8_t *ip = raw + 20;

		sgid.raw[10] = sgid.raw[11] = 0xff;
		memcpy(&sgid.raw[12], ip + 12, 4);
		dgid.raw[10] = dgid.raw[11] = 0xff;
		memcpy(&dgid.raw[12], ip + 16, 4);
		tclass = ip[1];
	} else {
		errno = EINVAL;
		return -1;
	}
	idx = gid_index(context, port_num, &dgid);
	if (idx < 0) {
		errno = ENOENT;
		return -1;
	}
	ah_attr->is_global = 1;
	ah_attr->grh.dgid = sgid;
	ah_attr->grh.sgid_index = idx;
	ah_attr->grh.hop_limit = 0xff;
	ah_attr->grh.traffic_class = tclass;
	ah_attr->grh.flow_label = flow_label;
	return 0;
}

struct ibv_ah *ibv_create_ah_from_wc(struct ibv_pd *pd, struct ibv_wc *wc,
				     struct ibv_grh *grh, uint8_t port_num)
{
	struct ibv_ah_attr attr;

	if (!pd)
		return fail(EINVAL);
	if (ibv_init_ah_from_wc(pd->context, port_num, wc, grh, &attr))
		return NULL;
	return ibv_create_ah(pd, &attr);
}

/* Importing objects of another process's context (they need a uverbs
 * command fd), dma-buf memory and ECE: not offered, failing as
 * libibverbs does where the provider or the kernel lacks them. */
struct ibv_context *ibv_import_device(int cmd_fd)
{
	(void)cmd_fd;
	return fail(EOPNOTSUPP);
}

struct ibv_pd *ibv_import_pd(struct ibv_context *context, uint32_t pd_handle)
{
	(void)context, (void)pd_handle;
	return fail(EOPNOTSUPP);
}

void ibv_unimport_pd(struct ibv_pd *pd)
{
	(void)pd;
}

struct ibv_mr *ibv_import_mr(struct ibv_pd *pd, uint32_t mr_handle)
{
	(void)pd, (void)mr_handle;
	return fail(EOPNOTSUPP);
}

void ibv_unimport_mr(struct ibv_mr *mr)
{
	(void)mr;
}

struct ibv_dm *ibv_import_dm(struct ibv_context *context, uint32_t dm_handle)
{
	(void)context, (void)dm_handle;
	return fail(EOPNOTSUPP);
}

void ibv_unimport_dm(struct ibv_dm *dm)
{
	(void)dm;
}

struct ibv_mr *ibv_reg_dmabuf_mr(struct ibv_pd *pd, uint64_t offset, size_t length,
				 uint64_t iova, int fd, int access)
{
	(void)pd, (void)offset, (void)length, (void)iova, (void)fd, (void)access;
	return fail(EOPNOTSUPP);
}

int ibv_set_ece(struct ibv_qp *qp, struct ibv_ece *ece)
{
	(void)qp, (void)ece;
	return EOPNOTSUPP;
}

int ibv_query_ece(struct ibv_qp *qp, struct ibv_ece *ece)
{
	(void)qp, (void)ece;
	return EOPNOTSUPP;
}

/* 0: the data of one message is not promised to land in order (as
 * libibverbs answers for a provider without the query). */
int ibv_query_qp_data_in_order(struct ibv_qp *qp, enum ibv_wr_opcode op, uint32_t flags)
{
	(void)qp, (void)op, (void)flags;
	return 0;
}

/* ---- process-wide calls with nothing to simulate ---- */

int ibv_fork_init(void)
{
	return 0; /* the model's memory is the program's own: nothing to pin */
}

enum ibv_fork_status ibv_is_fork_initialized(void)
{
	return IBV_FORK_UNNEEDED;
}

int ibv_dontfork_range(void *base, size_t size)
{
	(void)base, (void)size;
	return 0;
}

int ibv_dofork_range(void *base, size_t size)
{
	(void)base, (void)size;
	return 0;
}

/* ibv_read_sysfs_file reads dir/file as libibverbs does (without its
 * trailing newline); the model's devices have no sysfs files, so for
 * them it fails as for a missing file. */
int ibv_read_sysfs_file(const char *dir, const char *file, char *buf, size_t size)
{
	char path[512];
	ssize_t n;
	int fd;

	if (!dir || !file || !buf || !size) {
		errno = EINVAL;
		return -1;
	}
	snprintf(path, sizeof(path), "%s/%s", dir, file);
	fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return -1;
	n = read(fd, buf, size);
	close(fd);
	if (n < 0)
		return -1;
	if (n > 0 && buf[n - 1] == '\n')
		buf[--n] = '\0';
	else if ((size_t)n < size)
		buf[n] = '\0';
	else
		buf[size - 1] = '\0';
	return n;
}

int ibv_get_sysfs_path(char *buf, size_t size)
{
	if (!buf || !size)
		return -1;
	snprintf(buf, size, "/sys");
	return 0;
}

/* The capture and the trace are written when the program exits. */
__attribute__((destructor)) static void rs_fini(void)
{
	rs_exit();
}

/* ---- strings and rates: pure functions of libibverbs ---- */

const char *ibv_node_type_str(enum ibv_node_type node_type)
{
	static const char *const names[] = {
		[IBV_NODE_CA] = "InfiniBand channel adapter",
		[IBV_NODE_SWITCH] = "InfiniBand switch",
		[IBV_NODE_ROUTER] = "InfiniBand router",
		[IBV_NODE_RNIC] = "iWARP NIC",
		[IBV_NODE_USNIC] = "usNIC",
		[IBV_NODE_USNIC_UDP] = "usNIC UDP",
		[IBV_NODE_UNSPECIFIED] = "unspecified",
	};

	if (node_type < IBV_NODE_CA || node_type > IBV_NODE_UNSPECIFIED)
		return "unknown";
	return names[node_type];
}

const char *ibv_port_state_str(enum ibv_port_state port_state)
{
	static const char *const names[] = {
		[IBV_PORT_NOP] = "no state change (NOP)",
		[IBV_PORT_DOWN] = "down",
		[IBV_PORT_INIT] = "init",
		[IBV_PORT_ARMED] = "armed",
		[IBV_PORT_ACTIVE] = "active",
		[IBV_PORT_ACTIVE_DEFER] = "active defer",
	};

	if (port_state < IBV_PORT_NOP || port_state > IBV_PORT_ACTIVE_DEFER)
		return "unknown";
	return names[port_state];
}

const char *ibv_event_type_str(enum ibv_event_type event)
{
	static const char *const names[] = {
		[IBV_EVENT_CQ_ERR] = "CQ error",
		[IBV_EVENT_QP_FATAL] = "local work queue catastrophic error",
		[IBV_EVENT_QP_REQ_ERR] = "invalid request local work queue error",
		[IBV_EVENT_QP_ACCESS_ERR] = "local access violation work queue error",
		[IBV_EVENT_COMM_EST] = "communication established",
		[IBV_EVENT_SQ_DRAINED] = "send queue drained",
		[IBV_EVENT_PATH_MIG] = "path migrated",
		[IBV_EVENT_PATH_MIG_ERR] = "path migration request error",
		[IBV_EVENT_DEVICE_FATAL] = "local catastrophic error",
		[IBV_EVENT_PORT_ACTIVE] = "port active",
		[IBV_EVENT_PORT_ERR] = "port error",
		[IBV_EVENT_LID_CHANGE] = "LID change",
		[IBV_EVENT_PKEY_CHANGE] = "P_Key change",
		[IBV_EVENT_SM_CHANGE] = "SM change",
		[IBV_EVENT_SRQ_ERR] = "SRQ catastrophic error",
		[IBV_EVENT_SRQ_LIMIT_REACHED] = "SRQ limit reached",
		[IBV_EVENT_QP_LAST_WQE_REACHED] = "last WQE reached",
		[IBV_EVENT_CLIENT_REREGISTER] = "client reregistration",
		[IBV_EVENT_GID_CHANGE] = "GID table change",
		[IBV_EVENT_WQ_FATAL] = "WQ fatal",
	};

	if (event < IBV_EVENT_CQ_ERR || event > IBV_EVENT_WQ_FATAL)
		return "unknown";
	return names[event];
}

const char *ibv_wc_status_str(enum ibv_wc_status status)
{
	static const char *const names[] = {
		[IBV_WC_SUCCESS] = "success",
		[IBV_WC_LOC_LEN_ERR] = "local length error",
		[IBV_WC_LOC_QP_OP_ERR] = "local QP operation error",
		[IBV_WC_LOC_EEC_OP_ERR] = "local EE context operation error",
		[IBV_WC_LOC_PROT_ERR] = "local protection error",
		[IBV_WC_WR_FLUSH_ERR] = "Work Request Flushed Error",
		[IBV_WC_MW_BIND_ERR] = "memory management operation error",
		[IBV_WC_BAD_RESP_ERR] = "bad response error",
		[IBV_WC_LOC_ACCESS_ERR] = "local access error",
		[IBV_WC_REM_INV_REQ_ERR] = "remote invalid request error",
		[IBV_WC_REM_ACCESS_ERR] = "remote access error",
		[IBV_WC_REM_OP_ERR] = "remote operation error",
		[IBV_WC_RETRY_EXC_ERR] = "transport retry counter exceeded",
		[IBV_WC_RNR_RETRY_EXC_ERR] = "RNR retry counter exceeded",
		[IBV_WC_LOC_RDD_VIOL_ERR] = "local RDD violation error",
		[IBV_WC_REM_INV_RD_REQ_ERR] = "remote invalid RD request",
		[IBV_WC_REM_ABORT_ERR] = "aborted error",
		[IBV_WC_INV_EECN_ERR] = "invalid EE context number",
		[IBV_WC_INV_EEC_STATE_ERR] = "invalid EE context state",
		[IBV_WC_FATAL_ERR] = "fatal error",
		[IBV_WC_RESP_TIMEOUT_ERR] = "response timeout error",
		[IBV_WC_GENERAL_ERR] = "general error",
		[IBV_WC_TM_ERR] = "TM error",
		[IBV_WC_TM_RNDV_INCOMPLETE] = "TM software rendezvous",
	};

	if (status < IBV_WC_SUCCESS || status > IBV_WC_TM_RNDV_INCOMPLETE)
		return "unknown";
	return names[status];
}

/* The static rates of IBTA vol. 1 table 226 (Rate field of the path
 * record): multiples of 2.5 Gb/s and Mb/s. */
static const struct {
	enum ibv_rate rate;
	int mult;
	int mbps;
} rates[] = {
	{ IBV_RATE_2_5_GBPS, 1, 2500 },	{ IBV_RATE_5_GBPS, 2, 5000 },
	{ IBV_RATE_10_GBPS, 4, 10000 },	{ IBV_RATE_20_GBPS, 8, 20000 },
	{ IBV_RATE_30_GBPS, 12, 30000 },	{ IBV_RATE_40_GBPS, 16, 40000 },
	{ IBV_RATE_60_GBPS, 24, 60000 },	{ IBV_RATE_80_GBPS, 32, 80000 },
	{ IBV_RATE_120_GBPS, 48, 120000 },	{ IBV_RATE_14_GBPS, 0, 14062 },
	{ IBV_RATE_56_GBPS, 0, 56250 },	{ IBV_RATE_112_GBPS, 0, 112500 },
	{ IBV_RATE_168_GBPS, 0, 168750 },	{ IBV_RATE_25_GBPS, 10, 25781 },
	{ IBV_RATE_100_GBPS, 40, 103125 },	{ IBV_RATE_200_GBPS, 80, 206250 },
	{ IBV_RATE_300_GBPS, 120, 309375 },	{ IBV_RATE_28_GBPS, 11, 28125 },
	{ IBV_RATE_50_GBPS, 20, 53125 },	{ IBV_RATE_400_GBPS, 160, 425000 },
	{ IBV_RATE_600_GBPS, 240, 637500 },
};

int ibv_rate_to_mult(enum ibv_rate rate)
{
	for (size_t i = 0; i < sizeof(rates) / sizeof(rates[0]); i++)
		if (rates[i].rate == rate)
			return rates[i].mult ? rates[i].mult : -1;
	return -1;
}

enum ibv_rate mult_to_ibv_rate(int mult)
{
	for (size_t i = 0; i < sizeof(rates) / sizeof(rates[0]); i++)
		if (rates[i].mult && rates[i].mult == mult)
			return rates[i].rate;
	return IBV_RATE_MAX;
}

int ibv_rate_to_mbps(enum ibv_rate rate)
{
	for (size_t i = 0; i < sizeof(rates) / sizeof(rates[0]); i++)
		if (rates[i].rate == rate)
			return rates[i].mbps;
	return -1;
}

enum ibv_rate mbps_to_ibv_rate(int mbps)
{
	for (size_t i = 0; i < sizeof(rates) / sizeof(rates[0]); i++)
		if (rates[i].mbps == mbps)
			return rates[i].rate;
	return IBV_RATE_MAX;
}
