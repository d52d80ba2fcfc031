/*
 * The private interface between the drop-in librdmacm.so.1 (this
 * directory, plain C) and the drop-in libibverbs.so.1 (dropin/ibverbs,
 * Go), where the model runs: the rs_cm_* functions, exported by
 * libibverbs.so.1 under the version node ROCESIM_PRIVATE. Each returns
 * 0 or an errno; the librdmacm side turns that into -1 and errno.
 *
 * IDs are named by handles the Go side gives; an event channel by its
 * file descriptor, as libibverbs' completion channels are.
 */
#ifndef ROCESIM_CM_H
#define ROCESIM_CM_H

#include <stdint.h>

struct ibv_qp_attr;

/* What rdma_get_cm_event needs of one event. */
struct rs_cm_event {
	uint32_t id;		/* the event's ID */
	uint32_t listen_id;	/* CONNECT_REQUEST: the listener, else 0 */
	void *id_ptr;		/* the ID's rdma_cm_id, NULL for a new one */
	void *listen_ptr;	/* the listener's rdma_cm_id */
	int event;		/* enum rdma_cm_event_type */
	int status;
	uint8_t responder_resources;
	uint8_t initiator_depth;
	uint8_t retry_count;
	uint8_t rnr_retry_count;
	uint32_t qp_num;
	uint8_t private_data_len;
	uint8_t private_data[224];
	/* A UD ID's ESTABLISHED (struct rdma_ud_param): the peer's Q_Key
	 * (its QPN is qp_num) and the address handle's attributes. */
	uint32_t qkey;
	uint8_t ah_dgid[16];
	uint32_t ah_flow_label;
	uint8_t ah_sgid_index, ah_hop_limit, ah_traffic_class, ah_port_num;
	/* MULTICAST_JOIN, _ERROR: the context rdma_join_multicast got. */
	void *join_context;
};

/* rs_cm_get_event's modes: return EAGAIN at once without an event
 * (O_NONBLOCK); or wait for one a slice of wall time at most, then
 * return ETIMEDOUT (the caller loops, a cancellation point between).
 * ECANCELED: the channel was destroyed, or the process is exiting, while
 * the caller waited (it blocks on, as a read(2) of the fd would). */
enum { RS_CM_NONBLOCK = 1, RS_CM_SLICE = 2 };

/* An ID's addresses, network order, ports in host order: IPv4 in the
 * first 4 bytes of src and dst (v6 0), or IPv6 in all 16 (v6 1). */
struct rs_cm_addrs {
	uint8_t src[16], dst[16];
	uint16_t sport, dport;
	int v6;			/* AF_INET6 (else AF_INET) */
	int bound;		/* src names the device (not INADDR_ANY) */
};

#ifndef ROCESIM_CM_TYPES_ONLY /* the Go side declares its exports itself */
int rs_cm_create_channel(int *fd);
int rs_cm_destroy_channel(int fd);
int rs_cm_create_id(int fd, int ps, uint32_t *id);
int rs_cm_set_ptr(uint32_t id, void *ptr);
int rs_cm_destroy_id(uint32_t id);
int rs_cm_addrs(uint32_t id, struct rs_cm_addrs *out);
int rs_cm_bind_addr(uint32_t id, const uint8_t *addr, int alen, uint16_t port);
int rs_cm_listen(uint32_t id, int backlog);
int rs_cm_resolve_addr(uint32_t id, const uint8_t *src, int slen, const uint8_t *dst, int dlen,
		       uint16_t port, int timeout_ms);
int rs_cm_resolve_route(uint32_t id, int timeout_ms);
int rs_cm_set_qp(uint32_t id, uint32_t qp);
/* qpn: the QP a program made itself (ibv_create_qp) names, when the ID
 * has none of rdma_create_qp's; 0 otherwise. */
int rs_cm_connect(uint32_t id, const void *priv, int len, int resp, int init, int retry, int rnr, uint32_t qpn);
int rs_cm_accept(uint32_t id, const void *priv, int len, int resp, int init, uint32_t qpn);
/* rdma_init_qp_attr and rdma_establish, for such a QP. */
int rs_cm_init_qp_attr(uint32_t id, int state, struct ibv_qp_attr *attr, int *mask);
int rs_cm_establish(uint32_t id);
int rs_cm_reject(uint32_t id, const void *priv, int len);
int rs_cm_disconnect(uint32_t id);
/* RDMA_OPTION_ID_REUSEADDR or _AFONLY: value, checked against the ID's
 * state as the kernel checks it. */
int rs_cm_set_option(uint32_t id, int optname, int value);
int rs_cm_get_event(int fd, int mode, struct rs_cm_event *out);
int rs_cm_migrate(uint32_t id, int fd);
/* rdma_join_multicast(_ex) and rdma_leave_multicast: addr is the group's
 * IPv4 or IPv6 address (alen 4 or 16). */
int rs_cm_join(uint32_t id, const uint8_t *addr, int alen, int send_only, void *context);
int rs_cm_leave(uint32_t id, const uint8_t *addr, int alen);

/* Each call is counted while it runs, as libibverbs' own calls of its Go
 * side are (dropin/ibverbs/calls.h): rs_cm_entry before, rs_cm_leave_call
 * once it is back. A macro of the function's own name wraps each, so the
 * calls read plainly. */
void rs_cm_entry(void);
void rs_cm_leave_call(void);
#define rs_cm_create_channel(...) ({ rs_cm_entry(); int r_ = rs_cm_create_channel(__VA_ARGS__); rs_cm_leave_call(); r_; })
#define rs_cm_destroy_channel(...) ({ rs_cm_entry(); int r_ = rs_cm_destroy_channel(__VA_ARGS__); rs_cm_leave_call(); r_; })
#define rs_cm_create_id(...) ({ rs_cm_entry(); int r_ = rs_cm_create_id(__VA_ARGS__); rs_cm_leave_call(); r_; })
#define rs_cm_set_ptr(...) ({ rs_cm_entry(); int r_ = rs_cm_set_ptr(__VA_ARGS__); rs_cm_leave_call(); r_; })
#define rs_cm_destroy_id(...) ({ rs_cm_entry(); int r_ = rs_cm_destroy_id(__VA_ARGS__); rs_cm_leave_call(); r_; })
#define rs_cm_addrs(...) ({ rs_cm_entry(); int r_ = rs_cm_addrs(__VA_ARGS__); rs_cm_leave_call(); r_; })
#define rs_cm_bind_addr(...) ({ rs_cm_entry(); int r_ = rs_cm_bind_addr(__VA_ARGS__); rs_cm_leave_call(); r_; })
#define rs_cm_listen(...) ({ rs_cm_entry(); int r_ = rs_cm_listen(__VA_ARGS__); rs_cm_leave_call(); r_; })
#define rs_cm_resolve_addr(...) ({ rs_cm_entry(); int r_ = rs_cm_resolve_addr(__VA_ARGS__); rs_cm_leave_call(); r_; })
#define rs_cm_resolve_route(...) ({ rs_cm_entry(); int r_ = rs_cm_resolve_route(__VA_ARGS__); rs_cm_leave_call(); r_; })
#define rs_cm_set_qp(...) ({ rs_cm_entry(); int r_ = rs_cm_set_qp(__VA_ARGS__); rs_cm_leave_call(); r_; })
#define rs_cm_connect(...) ({ rs_cm_entry(); int r_ = rs_cm_connect(__VA_ARGS__); rs_cm_leave_call(); r_; })
#define rs_cm_accept(...) ({ rs_cm_entry(); int r_ = rs_cm_accept(__VA_ARGS__); rs_cm_leave_call(); r_; })
#define rs_cm_init_qp_attr(...) ({ rs_cm_entry(); int r_ = rs_cm_init_qp_attr(__VA_ARGS__); rs_cm_leave_call(); r_; })
#define rs_cm_establish(...) ({ rs_cm_entry(); int r_ = rs_cm_establish(__VA_ARGS__); rs_cm_leave_call(); r_; })
#define rs_cm_reject(...) ({ rs_cm_entry(); int r_ = rs_cm_reject(__VA_ARGS__); rs_cm_leave_call(); r_; })
#define rs_cm_disconnect(...) ({ rs_cm_entry(); int r_ = rs_cm_disconnect(__VA_ARGS__); rs_cm_leave_call(); r_; })
#define rs_cm_set_option(...) ({ rs_cm_entry(); int r_ = rs_cm_set_option(__VA_ARGS__); rs_cm_leave_call(); r_; })
#define rs_cm_get_event(...) ({ rs_cm_entry(); int r_ = rs_cm_get_event(__VA_ARGS__); rs_cm_leave_call(); r_; })
#define rs_cm_migrate(...) ({ rs_cm_entry(); int r_ = rs_cm_migrate(__VA_ARGS__); rs_cm_leave_call(); r_; })
#define rs_cm_join(...) ({ rs_cm_entry(); int r_ = rs_cm_join(__VA_ARGS__); rs_cm_leave_call(); r_; })
#define rs_cm_leave(...) ({ rs_cm_entry(); int r_ = rs_cm_leave(__VA_ARGS__); rs_cm_leave_call(); r_; })
#endif

#endif
