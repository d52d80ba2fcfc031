/*
 * The calls of the library's Go side from glue.c and extended.c, each
 * counted while it runs, from the moment C makes it until it is back.
 *
 * Virtual time waits while a thread of the program is about to act
 * (threads.go). A thread on its way into the Go side, or on its way
 * back, may sleep for a moment on the Go runtime's own futexes (its
 * scheduler, its locks) with none of the call's Go code running: to the
 * kernel it then looks like a thread asleep in sem_wait. So C counts the
 * calls in progress (rs_inside), and the Go side, which knows which of
 * its threads wait in the library (threads.go's enterWait), takes the
 * rest for threads at work.
 *
 * Each function is wrapped by a macro of its own name (a macro does not
 * expand inside its own expansion), so the call sites read as plain
 * calls. Included after _cgo_export.h, which declares them; the Go
 * side's own files never include it. TestCallsCounted checks that every
 * export C calls is here.
 */
#ifndef ROCESIM_CALLS_H
#define ROCESIM_CALLS_H

#include "glue.h"

#define rs_ack_cq_events(...) do { rs_entry(); rs_ack_cq_events(__VA_ARGS__); rs_leave(); } while (0)
#define rs_alloc_mw(...) ({ rs_entry(); __typeof__(rs_alloc_mw(__VA_ARGS__)) r_ = rs_alloc_mw(__VA_ARGS__); rs_leave(); r_; })
#define rs_alloc_pd(...) ({ rs_entry(); __typeof__(rs_alloc_pd(__VA_ARGS__)) r_ = rs_alloc_pd(__VA_ARGS__); rs_leave(); r_; })
#define rs_bind_mw(...) ({ rs_entry(); __typeof__(rs_bind_mw(__VA_ARGS__)) r_ = rs_bind_mw(__VA_ARGS__); rs_leave(); r_; })
#define rs_close(...) ({ rs_entry(); __typeof__(rs_close(__VA_ARGS__)) r_ = rs_close(__VA_ARGS__); rs_leave(); r_; })
#define rs_create_ah(...) ({ rs_entry(); __typeof__(rs_create_ah(__VA_ARGS__)) r_ = rs_create_ah(__VA_ARGS__); rs_leave(); r_; })
#define rs_create_comp_channel(...) ({ rs_entry(); __typeof__(rs_create_comp_channel(__VA_ARGS__)) r_ = rs_create_comp_channel(__VA_ARGS__); rs_leave(); r_; })
#define rs_create_cq(...) ({ rs_entry(); __typeof__(rs_create_cq(__VA_ARGS__)) r_ = rs_create_cq(__VA_ARGS__); rs_leave(); r_; })
#define rs_create_qp(...) ({ rs_entry(); __typeof__(rs_create_qp(__VA_ARGS__)) r_ = rs_create_qp(__VA_ARGS__); rs_leave(); r_; })
#define rs_create_srq(...) ({ rs_entry(); __typeof__(rs_create_srq(__VA_ARGS__)) r_ = rs_create_srq(__VA_ARGS__); rs_leave(); r_; })
#define rs_dealloc_mw(...) ({ rs_entry(); __typeof__(rs_dealloc_mw(__VA_ARGS__)) r_ = rs_dealloc_mw(__VA_ARGS__); rs_leave(); r_; })
#define rs_dealloc_pd(...) ({ rs_entry(); __typeof__(rs_dealloc_pd(__VA_ARGS__)) r_ = rs_dealloc_pd(__VA_ARGS__); rs_leave(); r_; })
#define rs_dereg_mr(...) ({ rs_entry(); __typeof__(rs_dereg_mr(__VA_ARGS__)) r_ = rs_dereg_mr(__VA_ARGS__); rs_leave(); r_; })
#define rs_destroy_ah(...) ({ rs_entry(); __typeof__(rs_destroy_ah(__VA_ARGS__)) r_ = rs_destroy_ah(__VA_ARGS__); rs_leave(); r_; })
#define rs_destroy_comp_channel(...) ({ rs_entry(); __typeof__(rs_destroy_comp_channel(__VA_ARGS__)) r_ = rs_destroy_comp_channel(__VA_ARGS__); rs_leave(); r_; })
#define rs_destroy_cq(...) ({ rs_entry(); __typeof__(rs_destroy_cq(__VA_ARGS__)) r_ = rs_destroy_cq(__VA_ARGS__); rs_leave(); r_; })
#define rs_destroy_qp(...) ({ rs_entry(); __typeof__(rs_destroy_qp(__VA_ARGS__)) r_ = rs_destroy_qp(__VA_ARGS__); rs_leave(); r_; })
#define rs_destroy_srq(...) ({ rs_entry(); __typeof__(rs_destroy_srq(__VA_ARGS__)) r_ = rs_destroy_srq(__VA_ARGS__); rs_leave(); r_; })
#define rs_device_count(...) ({ rs_entry(); __typeof__(rs_device_count(__VA_ARGS__)) r_ = rs_device_count(__VA_ARGS__); rs_leave(); r_; })
#define rs_device_guid(...) ({ rs_entry(); __typeof__(rs_device_guid(__VA_ARGS__)) r_ = rs_device_guid(__VA_ARGS__); rs_leave(); r_; })
#define rs_device_name(...) ({ rs_entry(); __typeof__(rs_device_name(__VA_ARGS__)) r_ = rs_device_name(__VA_ARGS__); rs_leave(); r_; })
#define rs_exit(...) do { rs_entry(); rs_exit(__VA_ARGS__); rs_leave(); } while (0)
#define rs_get_async_event(...) ({ rs_entry(); __typeof__(rs_get_async_event(__VA_ARGS__)) r_ = rs_get_async_event(__VA_ARGS__); rs_leave(); r_; })
#define rs_get_cq_event(...) ({ rs_entry(); __typeof__(rs_get_cq_event(__VA_ARGS__)) r_ = rs_get_cq_event(__VA_ARGS__); rs_leave(); r_; })
#define rs_mcast(...) ({ rs_entry(); __typeof__(rs_mcast(__VA_ARGS__)) r_ = rs_mcast(__VA_ARGS__); rs_leave(); r_; })
#define rs_modify_qp(...) ({ rs_entry(); __typeof__(rs_modify_qp(__VA_ARGS__)) r_ = rs_modify_qp(__VA_ARGS__); rs_leave(); r_; })
#define rs_modify_srq(...) ({ rs_entry(); __typeof__(rs_modify_srq(__VA_ARGS__)) r_ = rs_modify_srq(__VA_ARGS__); rs_leave(); r_; })
#define rs_open(...) ({ rs_entry(); __typeof__(rs_open(__VA_ARGS__)) r_ = rs_open(__VA_ARGS__); rs_leave(); r_; })
#define rs_poll_cq(...) ({ rs_entry(); __typeof__(rs_poll_cq(__VA_ARGS__)) r_ = rs_poll_cq(__VA_ARGS__); rs_leave(); r_; })
#define rs_post_recv(...) ({ rs_entry(); __typeof__(rs_post_recv(__VA_ARGS__)) r_ = rs_post_recv(__VA_ARGS__); rs_leave(); r_; })
#define rs_post_send(...) ({ rs_entry(); __typeof__(rs_post_send(__VA_ARGS__)) r_ = rs_post_send(__VA_ARGS__); rs_leave(); r_; })
#define rs_post_srq_recv(...) ({ rs_entry(); __typeof__(rs_post_srq_recv(__VA_ARGS__)) r_ = rs_post_srq_recv(__VA_ARGS__); rs_leave(); r_; })
#define rs_query_device(...) ({ rs_entry(); __typeof__(rs_query_device(__VA_ARGS__)) r_ = rs_query_device(__VA_ARGS__); rs_leave(); r_; })
#define rs_query_gid(...) ({ rs_entry(); __typeof__(rs_query_gid(__VA_ARGS__)) r_ = rs_query_gid(__VA_ARGS__); rs_leave(); r_; })
#define rs_query_pkey(...) ({ rs_entry(); __typeof__(rs_query_pkey(__VA_ARGS__)) r_ = rs_query_pkey(__VA_ARGS__); rs_leave(); r_; })
#define rs_query_port(...) ({ rs_entry(); __typeof__(rs_query_port(__VA_ARGS__)) r_ = rs_query_port(__VA_ARGS__); rs_leave(); r_; })
#define rs_query_qp(...) ({ rs_entry(); __typeof__(rs_query_qp(__VA_ARGS__)) r_ = rs_query_qp(__VA_ARGS__); rs_leave(); r_; })
#define rs_query_srq(...) ({ rs_entry(); __typeof__(rs_query_srq(__VA_ARGS__)) r_ = rs_query_srq(__VA_ARGS__); rs_leave(); r_; })
#define rs_reg_mr(...) ({ rs_entry(); __typeof__(rs_reg_mr(__VA_ARGS__)) r_ = rs_reg_mr(__VA_ARGS__); rs_leave(); r_; })
#define rs_req_notify_cq(...) ({ rs_entry(); __typeof__(rs_req_notify_cq(__VA_ARGS__)) r_ = rs_req_notify_cq(__VA_ARGS__); rs_leave(); r_; })
#define rs_rereg_mr(...) ({ rs_entry(); __typeof__(rs_rereg_mr(__VA_ARGS__)) r_ = rs_rereg_mr(__VA_ARGS__); rs_leave(); r_; })
#define rs_resize_cq(...) ({ rs_entry(); __typeof__(rs_resize_cq(__VA_ARGS__)) r_ = rs_resize_cq(__VA_ARGS__); rs_leave(); r_; })
#define rs_wr_complete(...) ({ rs_entry(); __typeof__(rs_wr_complete(__VA_ARGS__)) r_ = rs_wr_complete(__VA_ARGS__); rs_leave(); r_; })

#endif
