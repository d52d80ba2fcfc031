"""loopback.py [GID [DEVICES]]: Debian's pyverbs (python3-pyverbs) on the
drop-in library, in one process: a device (or two, with DEVICES 2 and
ROCESIM_DEVICES=2), PD, MRs, CQs, two RC QPs to RTS, then SEND/RECV, RDMA
WRITE, RDMA READ, FETCH_ADD and CMP_SWAP, each completion polled and the
bytes checked; and a SEND that finds no receive posted (an RNR NAK, then
the retry once the receive is there); then the extended verbs: two QPEx
on CQEX, a WRITE with immediate and a SEND built with the work request
builders (wr_start, wr_rdma_write_imm, wr_set_sge, wr_complete), their
completions read with start_poll/next_poll/end_poll. Prints "pyverbs ok"
on success; raises otherwise.

Run by the Go test with /usr/bin/python3 and LD_LIBRARY_PATH naming the
drop-in library.
"""
import struct
import sys

import pyverbs.enums as e
from pyverbs.addr import AHAttr, GlobalRoute
from pyverbs.cq import CQ, CQEX, CqInitAttrEx, PollCqAttr
from pyverbs.device import Context
from pyverbs.mr import MR
from pyverbs.pd import PD
from pyverbs.qp import QP, QPAttr, QPCap, QPEx, QPInitAttr, QPInitAttrEx
from pyverbs.wr import SGE, RecvWR, SendWR

GID = int(sys.argv[1]) if len(sys.argv) > 1 else 0
DEVICES = int(sys.argv[2]) if len(sys.argv) > 2 else 1
SIZE = 4096
ACCESS = (e.IBV_ACCESS_LOCAL_WRITE | e.IBV_ACCESS_REMOTE_WRITE |
          e.IBV_ACCESS_REMOTE_READ | e.IBV_ACCESS_REMOTE_ATOMIC)


class End:
    """One QP with its device, PD, CQ and a registered buffer."""

    def __init__(self, ctx, psn, extended=False):
        self.ctx, self.psn = ctx, psn
        self.pd = PD(ctx)
        cap = QPCap(max_send_wr=16, max_recv_wr=16, max_send_sge=1, max_recv_sge=1)
        if extended:
            self.cq = CQEX(ctx, CqInitAttrEx(cqe=64, wc_flags=e.IBV_WC_STANDARD_FLAGS))
            self.qp = QPEx(ctx, QPInitAttrEx(qp_type=e.IBV_QPT_RC, scq=self.cq, rcq=self.cq, cap=cap, pd=self.pd,
                                             comp_mask=e.IBV_QP_INIT_ATTR_PD | e.IBV_QP_INIT_ATTR_SEND_OPS_FLAGS,
                                             send_ops_flags=e.IBV_QP_EX_WITH_SEND |
                                             e.IBV_QP_EX_WITH_RDMA_WRITE_WITH_IMM))
        else:
            self.cq = CQ(ctx, 64)
            self.qp = QP(self.pd, QPInitAttr(qp_type=e.IBV_QPT_RC, scq=self.cq, rcq=self.cq, cap=cap))
        self.mr = MR(self.pd, SIZE, ACCESS)
        self.gid = ctx.query_gid(1, GID)

    def connect(self, peer):
        def attr(**fields):
            a = QPAttr()
            for k, v in fields.items():
                setattr(a, k, v)
            return a
        self.qp.modify(attr(qp_state=e.IBV_QPS_INIT, pkey_index=0, port_num=1, qp_access_flags=ACCESS),
                       e.IBV_QP_STATE | e.IBV_QP_PKEY_INDEX | e.IBV_QP_PORT | e.IBV_QP_ACCESS_FLAGS)
        a = attr(qp_state=e.IBV_QPS_RTR, path_mtu=e.IBV_MTU_1024, dest_qp_num=peer.qp.qp_num,
                 rq_psn=peer.psn, max_dest_rd_atomic=1, min_rnr_timer=1)
        a.ah_attr = AHAttr(gr=GlobalRoute(dgid=peer.gid, sgid_index=GID), is_global=1, port_num=1)
        self.qp.modify(a, e.IBV_QP_STATE | e.IBV_QP_AV | e.IBV_QP_PATH_MTU | e.IBV_QP_DEST_QPN |
                       e.IBV_QP_RQ_PSN | e.IBV_QP_MAX_DEST_RD_ATOMIC | e.IBV_QP_MIN_RNR_TIMER)
        self.qp.modify(attr(qp_state=e.IBV_QPS_RTS, timeout=14, retry_cnt=7, rnr_retry=7, sq_psn=self.psn,
                            max_rd_atomic=1),
                       e.IBV_QP_STATE | e.IBV_QP_TIMEOUT | e.IBV_QP_RETRY_CNT | e.IBV_QP_RNR_RETRY |
                       e.IBV_QP_SQ_PSN | e.IBV_QP_MAX_QP_RD_ATOMIC)

    def sge(self, off, length):
        return SGE(self.mr.buf + off, length, self.mr.lkey)

    def recv(self, wr_id):
        self.qp.post_recv(RecvWR(wr_id=wr_id, num_sge=1, sg=[self.sge(0, SIZE)]))


def wait(cq, wr_id, opcode, byte_len=None):
    """Polls cq (each empty poll moves virtual time) until a completion."""
    for _ in range(10_000_000):
        n, wcs = cq.poll(1)
        if n:
            wc = wcs[0]
            if wc.status != e.IBV_WC_SUCCESS or wc.wr_id != wr_id or wc.opcode != opcode or \
                    (byte_len is not None and wc.byte_len != byte_len):
                raise SystemExit(f"pyverbs: wr {wc.wr_id}: status {wc.status} opcode {wc.opcode} "
                                 f"byte_len {wc.byte_len}; want wr {wr_id} opcode {opcode}")
            return
    raise SystemExit(f"pyverbs: no completion for wr {wr_id}")


def poll_ex(cq, want):
    """Reads want completions of an extended CQ, with start_poll, poll_next
    (ibv_next_poll) and end_poll, as (wr_id, status, opcode, byte_len,
    imm) tuples. start_poll and poll_next answer ENOENT when there is
    nothing (more)."""
    got = []
    for _ in range(10_000_000):
        if cq.start_poll(PollCqAttr()) != 0:
            continue
        while True:
            got.append((cq.wr_id, cq.status, cq.read_opcode(), cq.read_byte_len(), cq.read_imm_data()))
            if len(got) == want or cq.poll_next() != 0:
                break
        cq.end_poll()
        if len(got) == want:
            return got
    raise SystemExit(f"pyverbs: {len(got)} of {want} extended completions")


def extended(ctxs):
    a, b = End(ctxs[0], 300, True), End(ctxs[-1], 400, True)
    a.connect(b)
    b.connect(a)
    b.recv(20)
    b.recv(21)
    a.mr.write(b"built by wr_*", 13, 0)
    a.qp.wr_start()
    a.qp.wr_id, a.qp.wr_flags = 22, e.IBV_SEND_SIGNALED
    a.qp.wr_rdma_write_imm(b.mr.rkey, b.mr.buf + 100, 0x01020304)
    a.qp.wr_set_sge(a.sge(0, 13))
    a.qp.wr_id = 23
    a.qp.wr_send()
    a.qp.wr_set_sge(a.sge(0, 13))
    a.qp.wr_complete()
    sent = poll_ex(a.cq, 2)
    assert [(w, s, o) for w, s, o, _, _ in sent] == [(22, e.IBV_WC_SUCCESS, e.IBV_WC_RDMA_WRITE),
                                                    (23, e.IBV_WC_SUCCESS, e.IBV_WC_SEND)], sent
    got = poll_ex(b.cq, 2)
    assert [(w, s, o, n) for w, s, o, n, _ in got] == [(20, e.IBV_WC_SUCCESS, e.IBV_WC_RECV_RDMA_WITH_IMM, 13),
                                                       (21, e.IBV_WC_SUCCESS, e.IBV_WC_RECV, 13)], got
    assert b.mr.read(13, 100) == b"built by wr_*" and b.mr.read(13, 0) == b"built by wr_*"


def send_wr(wr_id, opcode, sge):
    return SendWR(wr_id=wr_id, opcode=opcode, num_sge=1, sg=[sge], send_flags=e.IBV_SEND_SIGNALED)


def main():
    ctxs = [Context(name=f"rocesim{i}") for i in range(DEVICES)]
    a, b = End(ctxs[0], 100), End(ctxs[-1], 200)
    a.connect(b)
    b.connect(a)

    # SEND/RECV
    b.recv(1)
    a.mr.write(b"hello from pyverbs", 18, 0)
    a.qp.post_send(send_wr(2, e.IBV_WR_SEND, a.sge(0, 18)))
    wait(a.cq, 2, e.IBV_WC_SEND)
    wait(b.cq, 1, e.IBV_WC_RECV, 18)
    assert b.mr.read(18, 0) == b"hello from pyverbs"

    # RDMA WRITE of 3000 bytes into b at 512
    data = bytes(i % 251 for i in range(3000))
    a.mr.write(data, 3000, 0)
    wr = send_wr(3, e.IBV_WR_RDMA_WRITE, a.sge(0, 3000))
    wr.set_wr_rdma(b.mr.rkey, b.mr.buf + 512)
    a.qp.post_send(wr)
    wait(a.cq, 3, e.IBV_WC_RDMA_WRITE)
    assert b.mr.read(3000, 512) == data

    # RDMA READ: b reads a's first 2000 bytes
    wr = send_wr(4, e.IBV_WR_RDMA_READ, b.sge(0, 2000))
    wr.set_wr_rdma(a.mr.rkey, a.mr.buf)
    b.qp.post_send(wr)
    wait(b.cq, 4, e.IBV_WC_RDMA_READ, 2000)
    assert b.mr.read(2000, 0) == data[:2000]

    # FETCH_ADD and CMP_SWAP on a word of b
    b.mr.write(struct.pack("<Q", 40), 8, 1024)
    wr = send_wr(5, e.IBV_WR_ATOMIC_FETCH_AND_ADD, a.sge(8, 8))
    wr.set_wr_atomic(b.mr.rkey, b.mr.buf + 1024, 2, 0)
    a.qp.post_send(wr)
    wait(a.cq, 5, e.IBV_WC_FETCH_ADD, 8)
    assert struct.unpack("<Q", a.mr.read(8, 8))[0] == 40
    assert struct.unpack("<Q", b.mr.read(8, 1024))[0] == 42
    wr = send_wr(6, e.IBV_WR_ATOMIC_CMP_AND_SWP, a.sge(16, 8))
    wr.set_wr_atomic(b.mr.rkey, b.mr.buf + 1024, 42, 7)
    a.qp.post_send(wr)
    wait(a.cq, 6, e.IBV_WC_COMP_SWAP, 8)
    assert struct.unpack("<Q", b.mr.read(8, 1024))[0] == 7

    # A SEND with no receive posted: b answers RNR NAK, a waits its RNR
    # timer and retries; the receive is posted after a few polls.
    a.qp.post_send(send_wr(7, e.IBV_WR_SEND, a.sge(0, 18)))
    for _ in range(4):
        n, _ = a.cq.poll(1)
        assert n == 0
    b.recv(8)
    wait(a.cq, 7, e.IBV_WC_SEND)
    wait(b.cq, 8, e.IBV_WC_RECV, 18)
    extended(ctxs)
    print("pyverbs ok")


main()
