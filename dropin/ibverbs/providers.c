/*
 * Stand-ins for rdma-core's provider interface (IBVERBS_PRIVATE_34):
 * the symbols the provider libraries Debian installs (libmlx5.so.1,
 * libefa.so.1) import from libibverbs. perftest's binaries link those
 * libraries directly (for mlx5dv_* and efadv_*, which they call only on
 * such a device), and the dynamic loader, binding every symbol at start
 * (Debian's -z now), refuses to run them unless libibverbs defines each
 * one. No provider is ever loaded or driven here, so none of these is
 * called in a run on the model; if one is, it fails as a verb the device
 * does not support: EOPNOTSUPP, or NULL with errno set, never a crash.
 * The version node's number follows the installed rdma-core (34: Debian
 * bookworm's 44.0); libibverbs.map lists the names.
 */
#include <errno.h>
#include <stdbool.h>
#include <stddef.h>

bool verbs_allow_disassociate_destroy;
void __verbs_log(void) {}
void *_verbs_init_and_alloc_context(void) { errno = EOPNOTSUPP; return NULL; }
int execute_ioctl(void) { return EOPNOTSUPP; }
int ibv_cmd_advise_mr(void) { return EOPNOTSUPP; }
int ibv_cmd_alloc_dm(void) { return EOPNOTSUPP; }
int ibv_cmd_alloc_mw(void) { return EOPNOTSUPP; }
int ibv_cmd_alloc_pd(void) { return EOPNOTSUPP; }
int ibv_cmd_attach_mcast(void) { return EOPNOTSUPP; }
int ibv_cmd_close_xrcd(void) { return EOPNOTSUPP; }
int ibv_cmd_create_ah(void) { return EOPNOTSUPP; }
int ibv_cmd_create_cq(void) { return EOPNOTSUPP; }
int ibv_cmd_create_qp(void) { return EOPNOTSUPP; }
int ibv_cmd_create_counters(void) { return EOPNOTSUPP; }
int ibv_cmd_create_cq_ex(void) { return EOPNOTSUPP; }
int ibv_cmd_create_flow(void) { return EOPNOTSUPP; }
int ibv_cmd_create_flow_action_esp(void) { return EOPNOTSUPP; }
int ibv_cmd_create_qp_ex(void) { return EOPNOTSUPP; }
int ibv_cmd_create_qp_ex2(void) { return EOPNOTSUPP; }
int ibv_cmd_create_rwq_ind_table(void) { return EOPNOTSUPP; }
int ibv_cmd_create_srq(void) { return EOPNOTSUPP; }
int ibv_cmd_create_srq_ex(void) { return EOPNOTSUPP; }
int ibv_cmd_create_wq(void) { return EOPNOTSUPP; }
int ibv_cmd_dealloc_mw(void) { return EOPNOTSUPP; }
int ibv_cmd_dealloc_pd(void) { return EOPNOTSUPP; }
int ibv_cmd_dereg_mr(void) { return EOPNOTSUPP; }
int ibv_cmd_destroy_ah(void) { return EOPNOTSUPP; }
int ibv_cmd_destroy_counters(void) { return EOPNOTSUPP; }
int ibv_cmd_destroy_cq(void) { return EOPNOTSUPP; }
int ibv_cmd_destroy_flow(void) { return EOPNOTSUPP; }
int ibv_cmd_destroy_flow_action(void) { return EOPNOTSUPP; }
int ibv_cmd_destroy_qp(void) { return EOPNOTSUPP; }
int ibv_cmd_destroy_rwq_ind_table(void) { return EOPNOTSUPP; }
int ibv_cmd_destroy_srq(void) { return EOPNOTSUPP; }
int ibv_cmd_destroy_wq(void) { return EOPNOTSUPP; }
int ibv_cmd_detach_mcast(void) { return EOPNOTSUPP; }
int ibv_cmd_free_dm(void) { return EOPNOTSUPP; }
int ibv_cmd_get_context(void) { return EOPNOTSUPP; }
int ibv_cmd_modify_cq(void) { return EOPNOTSUPP; }
int ibv_cmd_modify_flow_action_esp(void) { return EOPNOTSUPP; }
int ibv_cmd_modify_qp(void) { return EOPNOTSUPP; }
int ibv_cmd_modify_qp_ex(void) { return EOPNOTSUPP; }
int ibv_cmd_modify_srq(void) { return EOPNOTSUPP; }
int ibv_cmd_modify_wq(void) { return EOPNOTSUPP; }
int ibv_cmd_open_qp(void) { return EOPNOTSUPP; }
int ibv_cmd_open_xrcd(void) { return EOPNOTSUPP; }
int ibv_cmd_query_context(void) { return EOPNOTSUPP; }
int ibv_cmd_query_device_any(void) { return EOPNOTSUPP; }
int ibv_cmd_query_mr(void) { return EOPNOTSUPP; }
int ibv_cmd_query_port(void) { return EOPNOTSUPP; }
int ibv_cmd_query_qp(void) { return EOPNOTSUPP; }
int ibv_cmd_query_srq(void) { return EOPNOTSUPP; }
int ibv_cmd_read_counters(void) { return EOPNOTSUPP; }
int ibv_cmd_reg_dm_mr(void) { return EOPNOTSUPP; }
int ibv_cmd_reg_dmabuf_mr(void) { return EOPNOTSUPP; }
int ibv_cmd_reg_mr(void) { return EOPNOTSUPP; }
int ibv_cmd_rereg_mr(void) { return EOPNOTSUPP; }
int ibv_cmd_resize_cq(void) { return EOPNOTSUPP; }
int verbs_init_cq(void) { return EOPNOTSUPP; }
void *verbs_open_device(void) { errno = EOPNOTSUPP; return NULL; }
void verbs_register_driver_34(void) {}
void verbs_set_ops(void) {}
void verbs_uninit_context(void) {}

/* IBVERBS_1.1, used by libmlx5 to resolve a RoCE address for a kernel
 * device: no provider runs here. */
int ibv_resolve_eth_l2_from_gid(void) { return EOPNOTSUPP; }
