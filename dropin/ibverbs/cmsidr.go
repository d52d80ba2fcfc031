//go:build cgo && linux

package main

// RDMA_PS_UDP through the drop-in librdmacm.so.1 (udaddy's port space):
// the UD fields of an event (struct rdma_ud_param), which rdma_get_cm_event
// (dropin/rdmacm/shim/rdmacm.c) puts in event->param.ud for a UD ID.

/*
#cgo CFLAGS: -I${SRCDIR}/../rdmacm/shim
#define ROCESIM_CM_TYPES_ONLY
#include <stdint.h>
#include "rocesim_cm.h"
*/
import "C"

import "github.com/rocesim/rocesim/rdmacm"

// udEvent copies a UD ESTABLISHED's Q_Key and address into out (its
// QPN went in qp_num). The DGID is the peer's GID (its IPv4 address
// mapped into IPv6, or its IPv6 address), as the kernel's
// ib_init_ah_attr_from_path gives it on RoCE v2.
func udEvent(out *C.struct_rs_cm_event, ud *rdmacm.UDParam) {
	out.qkey = C.uint32_t(ud.QKey)
	if !ud.AHAttr.GRH.DGID.IsValid() {
		return
	}
	for i, b := range ud.AHAttr.GRH.DGID.As16() {
		out.ah_dgid[i] = C.uint8_t(b)
	}
	out.ah_flow_label = C.uint32_t(ud.AHAttr.GRH.FlowLabel)
	out.ah_sgid_index = C.uint8_t(ud.AHAttr.GRH.SGIDIndex)
	out.ah_hop_limit = C.uint8_t(ud.AHAttr.GRH.HopLimit)
	out.ah_traffic_class = C.uint8_t(ud.AHAttr.GRH.TrafficClass)
	out.ah_port_num = C.uint8_t(ud.AHAttr.PortNum)
}
