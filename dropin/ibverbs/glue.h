//go:build cgo && linux

/*
 * The C side of the drop-in libibverbs.so.1: the structures
 * <infiniband/verbs.h> defines, allocated and filled here, and the few
 * helpers the Go side calls to reach the unions cgo cannot name.
 */
#ifndef ROCESIM_GLUE_H
#define ROCESIM_GLUE_H

#include <stdint.h>
#include <infiniband/verbs.h>

/* The union parts of an ibv_send_wr, flattened for Go. */
struct rs_send_wr_ext {
	uint64_t remote_addr;
	uint32_t rkey;
	uint64_t compare_add;
	uint64_t swap;
	uint32_t ah;		/* the AH's handle; 0 for none */
	uint32_t remote_qpn;
	uint32_t remote_qkey;
	uint32_t imm_data;	/* in host order */
	uint32_t invalidate_rkey;
	/* IBV_WR_BIND_MW: the window, its new R_Key, the region. */
	uint32_t mw;		/* the MW's handle */
	uint32_t bind_rkey;
	uint32_t bind_mr;	/* the MR's handle; 0 for none (an unbind) */
	uint64_t bind_addr;
	uint64_t bind_length;
	unsigned int bind_access;
};

void rs_send_wr_ext(const struct ibv_send_wr *wr, int ud, struct rs_send_wr_ext *out);
void rs_wc_set_imm(struct ibv_wc *wc, uint32_t imm, int invalidated);
void rs_set_async_event(struct ibv_async_event *ev, void *element, int port, int type);

#endif
