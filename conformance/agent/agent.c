/*
 * rocesim-agent: the in-VM verbs agent of the real-rxe conformance harness.
 *
 * It reads a script (a file named by the first argument, or stdin), one
 * command per line, and runs each against real libibverbs, printing one
 * JSON object per line on stdout. Blank lines and lines starting with '#'
 * are skipped. Arguments are key=value words; numbers take C syntax
 * (0x... for hex).
 *
 *   open dev=rxe0                  open the device (default rxe0)
 *   pd                             allocate the protection domain
 *   cq depth=N                     create the completion queue
 *   qp send=N recv=N sge=N inline=N [psn=N]
 *                                  create an RC QP and move it RESET->INIT
 *                                  (port 1, local write/remote write/read);
 *                                  psn is its initial send PSN (default
 *                                  from /dev/urandom)
 *   mr len=N seed=S                register N bytes, byte i = (S + i*7) & 0xff
 *   info gid=IDX                   print local qpn, psn, gid, mr addr/rkey
 *   exchange peer=IP port=P role=server|client
 *                                  swap qpn, psn, gid (of the last info),
 *                                  mr addr and rkey with the peer over TCP
 *                                  (the client retries for up to 120 s)
 *   barrier                        one byte each way on the exchange socket
 *   connect gid=IDX [qpn=N psn=N dgid=IP|IPv6] timeout=N retry=N
 *           rnr_retry=N min_rnr=N  INIT->RTR->RTS, path MTU 1024; remote
 *                                  values default to the exchanged ones
 *   post_recv wr_id=N off=N len=N
 *   post_send wr_id=N op=send|send_imm|write|write_imm|read off=N len=N
 *             imm=N roff=N [raddr=N rkey=N]
 *                                  raddr defaults to the peer's MR address
 *                                  plus roff, rkey to the peer's rkey
 *   poll n=N timeout_ms=N          poll until N completions, printing each
 *   dump off=N len=N               hex of an MR range
 *   crc off=N len=N                CRC-32 (IEEE) of an MR range
 *
 * The first failure prints {"event":"error",...} and exits 1; a poll that
 * times out prints the completions it got, then the error.
 */
#include <arpa/inet.h>
#include <errno.h>
#include <infiniband/verbs.h>
#include <netinet/in.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#define MAXARGS 16
#define XCHG_LEN 128

static struct ibv_context *ctx;
static struct ibv_pd *pd;
static struct ibv_cq *cq;
static struct ibv_qp *qp;
static struct ibv_mr *mr;
static unsigned char *buf;
static size_t buflen;
static uint32_t local_psn;
static union ibv_gid local_gid;
static int sock = -1;
static int lineno;

static struct {
	int have;
	uint32_t qpn, psn, rkey;
	uint64_t addr;
	union ibv_gid gid;
} peer;

static char *keys[MAXARGS], *vals[MAXARGS];
static int nargs;

static void fail(const char *cmd, const char *fmt, ...)
{
	char msg[256];
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(msg, sizeof msg, fmt, ap);
	va_end(ap);
	for (char *p = msg; *p; p++)
		if (*p == '"' || *p == '\\')
			*p = '\'';
	printf("{\"event\":\"error\",\"line\":%d,\"cmd\":\"%s\",\"error\":\"%s\"}\n", lineno, cmd, msg);
	exit(1);
}

static const char *arg(const char *key)
{
	for (int i = 0; i < nargs; i++)
		if (strcmp(keys[i], key) == 0)
			return vals[i];
	return NULL;
}

static uint64_t num(const char *cmd, const char *key, int required, uint64_t def)
{
	const char *v = arg(key);
	char *end;
	unsigned long long n;

	if (!v) {
		if (required)
			fail(cmd, "missing %s=", key);
		return def;
	}
	errno = 0;
	n = strtoull(v, &end, 0);
	if (errno || *end || end == v)
		fail(cmd, "bad number %s=%s", key, v);
	return n;
}

static void gid_str(const union ibv_gid *g, char *out)
{
	for (int i = 0; i < 8; i++)
		sprintf(out + 5 * i, "%02x%02x%s", g->raw[2 * i], g->raw[2 * i + 1], i < 7 ? ":" : "");
}

static const char *status_name(enum ibv_wc_status s)
{
	static const char *names[] = {
		"IBV_WC_SUCCESS", "IBV_WC_LOC_LEN_ERR", "IBV_WC_LOC_QP_OP_ERR",
		"IBV_WC_LOC_EEC_OP_ERR", "IBV_WC_LOC_PROT_ERR", "IBV_WC_WR_FLUSH_ERR",
		"IBV_WC_MW_BIND_ERR", "IBV_WC_BAD_RESP_ERR", "IBV_WC_LOC_ACCESS_ERR",
		"IBV_WC_REM_INV_REQ_ERR", "IBV_WC_REM_ACCESS_ERR", "IBV_WC_REM_OP_ERR",
		"IBV_WC_RETRY_EXC_ERR", "IBV_WC_RNR_RETRY_EXC_ERR", "IBV_WC_LOC_RDD_VIOL_ERR",
		"IBV_WC_REM_INV_RD_REQ_ERR", "IBV_WC_REM_ABORT_ERR", "IBV_WC_INV_EECN_ERR",
		"IBV_WC_INV_EEC_STATE_ERR", "IBV_WC_FATAL_ERR", "IBV_WC_RESP_TIMEOUT_ERR",
		"IBV_WC_GENERAL_ERR", "IBV_WC_TM_ERR", "IBV_WC_TM_RNDV_INCOMPLETE",
	};
	if ((unsigned)s < sizeof names / sizeof names[0])
		return names[s];
	return "IBV_WC_UNKNOWN";
}

static const char *opcode_name(enum ibv_wc_opcode op)
{
	switch (op) {
	case IBV_WC_SEND: return "IBV_WC_SEND";
	case IBV_WC_RDMA_WRITE: return "IBV_WC_RDMA_WRITE";
	case IBV_WC_RDMA_READ: return "IBV_WC_RDMA_READ";
	case IBV_WC_COMP_SWAP: return "IBV_WC_COMP_SWAP";
	case IBV_WC_FETCH_ADD: return "IBV_WC_FETCH_ADD";
	case IBV_WC_BIND_MW: return "IBV_WC_BIND_MW";
	case IBV_WC_LOCAL_INV: return "IBV_WC_LOCAL_INV";
	case IBV_WC_RECV: return "IBV_WC_RECV";
	case IBV_WC_RECV_RDMA_WITH_IMM: return "IBV_WC_RECV_RDMA_WITH_IMM";
	default: return "IBV_WC_UNKNOWN";
	}
}

static void need(const char *cmd, const void *p, const char *what)
{
	if (!p)
		fail(cmd, "no %s yet", what);
}

static void range(const char *cmd, uint64_t off, uint64_t len)
{
	need(cmd, mr, "mr");
	if (off > buflen || len > buflen - off)
		fail(cmd, "range %llu+%llu outside the %zu-byte mr",
		     (unsigned long long)off, (unsigned long long)len, buflen);
}

static uint32_t crc32_ieee(const unsigned char *p, size_t n)
{
	uint32_t c = 0xffffffff;

	while (n--) {
		c ^= *p++;
		for (int k = 0; k < 8; k++)
			c = (c >> 1) ^ (0xedb88320 & -(c & 1));
	}
	return ~c;
}

static void full_io(const char *cmd, int wr, void *p, size_t n)
{
	char *c = p;

	while (n > 0) {
		ssize_t r = wr ? write(sock, c, n) : read(sock, c, n);
		if (r <= 0)
			fail(cmd, "%s: %s", wr ? "write" : "read", r == 0 ? "peer closed" : strerror(errno));
		c += r;
		n -= r;
	}
}

static void do_exchange(const char *cmd)
{
	const char *ip = arg("peer"), *role = arg("role");
	int port = num(cmd, "port", 1, 0);
	struct sockaddr_in sa = { .sin_family = AF_INET, .sin_port = htons(port) };
	char msg[XCHG_LEN], gid[40];
	unsigned long long addr;
	unsigned qpn, psn, rkey;

	need(cmd, qp, "qp");
	if (!role || (strcmp(role, "server") && strcmp(role, "client")))
		fail(cmd, "role=server|client");
	if (strcmp(role, "server") == 0) {
		int one = 1, l = socket(AF_INET, SOCK_STREAM, 0);
		setsockopt(l, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
		sa.sin_addr.s_addr = htonl(INADDR_ANY);
		if (bind(l, (struct sockaddr *)&sa, sizeof sa) || listen(l, 1))
			fail(cmd, "listen: %s", strerror(errno));
		sock = accept(l, NULL, NULL);
		if (sock < 0)
			fail(cmd, "accept: %s", strerror(errno));
		close(l);
	} else {
		if (!ip || inet_pton(AF_INET, ip, &sa.sin_addr) != 1)
			fail(cmd, "peer=IPv4 address");
		for (int i = 0;; i++) {
			sock = socket(AF_INET, SOCK_STREAM, 0);
			if (connect(sock, (struct sockaddr *)&sa, sizeof sa) == 0)
				break;
			close(sock);
			if (i >= 1200)
				fail(cmd, "connect %s:%d: %s", ip, port, strerror(errno));
			usleep(100000);
		}
	}
	gid_str(&local_gid, gid);
	memset(msg, 0, sizeof msg);
	snprintf(msg, sizeof msg, "%06x %06x %s %016llx %08x", qp->qp_num, local_psn, gid,
		 (unsigned long long)(uintptr_t)buf, mr ? mr->rkey : 0);
	full_io(cmd, 1, msg, sizeof msg);
	full_io(cmd, 0, msg, sizeof msg);
	msg[sizeof msg - 1] = 0;
	if (sscanf(msg, "%x %x %39s %llx %x", &qpn, &psn, gid, &addr, &rkey) != 5)
		fail(cmd, "bad peer message");
	peer.qpn = qpn;
	peer.psn = psn;
	peer.addr = addr;
	peer.rkey = rkey;
	for (int i = 0; i < 8; i++) {
		unsigned w;
		sscanf(gid + 5 * i, "%4x", &w);
		peer.gid.raw[2 * i] = w >> 8;
		peer.gid.raw[2 * i + 1] = w & 0xff;
	}
	peer.have = 1;
	printf("{\"event\":\"exchange\",\"qpn\":%u,\"psn\":%u,\"gid\":\"%s\",\"addr\":%llu,\"rkey\":%u}\n",
	       qpn, psn, gid, addr, rkey);
}

static void do_connect(const char *cmd)
{
	const char *dg = arg("dgid");
	struct ibv_qp_attr a;
	union ibv_gid dgid = peer.gid;
	int e;

	need(cmd, qp, "qp");
	if (!peer.have && !(arg("qpn") && arg("psn") && dg))
		fail(cmd, "no exchange: give qpn= psn= dgid=");
	if (dg) {
		struct in_addr v4;
		memset(&dgid, 0, sizeof dgid);
		if (inet_pton(AF_INET, dg, &v4) == 1) {
			/* RoCE v2 GID of an IPv4 address: ::ffff:a.b.c.d. */
			dgid.raw[10] = dgid.raw[11] = 0xff;
			memcpy(&dgid.raw[12], &v4, 4);
		} else if (inet_pton(AF_INET6, dg, dgid.raw) != 1) {
			fail(cmd, "bad dgid=%s", dg);
		}
	}
	memset(&a, 0, sizeof a);
	a.qp_state = IBV_QPS_RTR;
	a.path_mtu = IBV_MTU_1024;
	a.dest_qp_num = num(cmd, "qpn", 0, peer.qpn);
	a.rq_psn = num(cmd, "psn", 0, peer.psn);
	a.max_dest_rd_atomic = 1;
	a.min_rnr_timer = num(cmd, "min_rnr", 0, 12);
	a.ah_attr.is_global = 1;
	a.ah_attr.port_num = 1;
	a.ah_attr.grh.dgid = dgid;
	a.ah_attr.grh.sgid_index = num(cmd, "gid", 1, 0);
	a.ah_attr.grh.hop_limit = 64;
	e = ibv_modify_qp(qp, &a, IBV_QP_STATE | IBV_QP_AV | IBV_QP_PATH_MTU | IBV_QP_DEST_QPN |
			  IBV_QP_RQ_PSN | IBV_QP_MAX_DEST_RD_ATOMIC | IBV_QP_MIN_RNR_TIMER);
	if (e)
		fail(cmd, "modify to RTR: %s", strerror(e));
	memset(&a, 0, sizeof a);
	a.qp_state = IBV_QPS_RTS;
	a.timeout = num(cmd, "timeout", 0, 14);
	a.retry_cnt = num(cmd, "retry", 0, 7);
	a.rnr_retry = num(cmd, "rnr_retry", 0, 7);
	a.sq_psn = local_psn;
	a.max_rd_atomic = 1;
	e = ibv_modify_qp(qp, &a, IBV_QP_STATE | IBV_QP_TIMEOUT | IBV_QP_RETRY_CNT |
			  IBV_QP_RNR_RETRY | IBV_QP_SQ_PSN | IBV_QP_MAX_QP_RD_ATOMIC);
	if (e)
		fail(cmd, "modify to RTS: %s", strerror(e));
	printf("{\"event\":\"connect\",\"dest_qpn\":%u,\"rq_psn\":%u,\"sq_psn\":%u}\n",
	       (unsigned)num(cmd, "qpn", 0, peer.qpn), (unsigned)num(cmd, "psn", 0, peer.psn), local_psn);
}

static void do_post_send(const char *cmd)
{
	const char *op = arg("op");
	uint64_t off = num(cmd, "off", 0, 0), len = num(cmd, "len", 1, 0);
	struct ibv_sge sge;
	struct ibv_send_wr wr, *bad;
	int e;

	need(cmd, qp, "qp");
	range(cmd, off, len);
	memset(&wr, 0, sizeof wr);
	wr.wr_id = num(cmd, "wr_id", 1, 0);
	wr.sg_list = &sge;
	wr.num_sge = 1;
	wr.send_flags = IBV_SEND_SIGNALED;
	sge.addr = (uintptr_t)buf + off;
	sge.length = len;
	sge.lkey = mr->lkey;
	if (!op)
		fail(cmd, "missing op=");
	if (strcmp(op, "send") == 0)
		wr.opcode = IBV_WR_SEND;
	else if (strcmp(op, "send_imm") == 0)
		wr.opcode = IBV_WR_SEND_WITH_IMM;
	else if (strcmp(op, "write") == 0)
		wr.opcode = IBV_WR_RDMA_WRITE;
	else if (strcmp(op, "write_imm") == 0)
		wr.opcode = IBV_WR_RDMA_WRITE_WITH_IMM;
	else if (strcmp(op, "read") == 0)
		wr.opcode = IBV_WR_RDMA_READ;
	else
		fail(cmd, "bad op=%s", op);
	if (wr.opcode == IBV_WR_SEND_WITH_IMM || wr.opcode == IBV_WR_RDMA_WRITE_WITH_IMM)
		wr.imm_data = htonl(num(cmd, "imm", 1, 0));
	if (wr.opcode != IBV_WR_SEND && wr.opcode != IBV_WR_SEND_WITH_IMM) {
		if (!peer.have && !(arg("raddr") && arg("rkey")))
			fail(cmd, "no exchange: give raddr= rkey=");
		wr.wr.rdma.remote_addr = num(cmd, "raddr", 0, peer.addr + num(cmd, "roff", 0, 0));
		wr.wr.rdma.rkey = num(cmd, "rkey", 0, peer.rkey);
	}
	e = ibv_post_send(qp, &wr, &bad);
	if (e)
		fail(cmd, "ibv_post_send: %s", strerror(e));
	printf("{\"event\":\"post_send\",\"wr_id\":%llu}\n", (unsigned long long)wr.wr_id);
}

static void do_poll(const char *cmd)
{
	int want = num(cmd, "n", 1, 0), got = 0;
	uint64_t ms = num(cmd, "timeout_ms", 0, 10000);
	struct timespec t0, t;

	need(cmd, cq, "cq");
	clock_gettime(CLOCK_MONOTONIC, &t0);
	while (got < want) {
		struct ibv_wc wc;
		int n = ibv_poll_cq(cq, 1, &wc);
		if (n < 0)
			fail(cmd, "ibv_poll_cq: %d", n);
		if (n == 0) {
			clock_gettime(CLOCK_MONOTONIC, &t);
			if ((uint64_t)(t.tv_sec - t0.tv_sec) * 1000 + (t.tv_nsec - t0.tv_nsec) / 1000000 > ms)
				fail(cmd, "timeout: %d of %d completions", got, want);
			usleep(1000);
			continue;
		}
		got++;
		printf("{\"event\":\"wc\",\"wr_id\":%llu,\"status\":\"%s\",\"opcode\":\"%s\",\"byte_len\":%u,\"imm\":%u,\"qp_num\":%u}\n",
		       (unsigned long long)wc.wr_id, status_name(wc.status), opcode_name(wc.opcode),
		       wc.byte_len, (wc.wc_flags & IBV_WC_WITH_IMM) ? ntohl(wc.imm_data) : 0, wc.qp_num);
	}
}

static void run(char *line)
{
	char *cmd, *save, *w;
	struct ibv_qp_attr a;
	int e;

	nargs = 0;
	cmd = strtok_r(line, " \t\r\n", &save);
	if (!cmd || cmd[0] == '#')
		return;
	while ((w = strtok_r(NULL, " \t\r\n", &save)) != NULL) {
		char *eq = strchr(w, '=');
		if (!eq || nargs == MAXARGS)
			fail(cmd, "bad argument %s (want key=value)", w);
		*eq = 0;
		keys[nargs] = w;
		vals[nargs++] = eq + 1;
	}
	if (strcmp(cmd, "open") == 0) {
		const char *name = arg("dev") ? arg("dev") : "rxe0";
		struct ibv_device **list = ibv_get_device_list(NULL);
		for (int i = 0; list && list[i]; i++)
			if (strcmp(ibv_get_device_name(list[i]), name) == 0)
				ctx = ibv_open_device(list[i]);
		if (!ctx)
			fail(cmd, "cannot open %s", name);
		printf("{\"event\":\"open\",\"dev\":\"%s\"}\n", name);
	} else if (strcmp(cmd, "pd") == 0) {
		need(cmd, ctx, "device");
		if (!(pd = ibv_alloc_pd(ctx)))
			fail(cmd, "ibv_alloc_pd: %s", strerror(errno));
		printf("{\"event\":\"pd\"}\n");
	} else if (strcmp(cmd, "cq") == 0) {
		need(cmd, ctx, "device");
		if (!(cq = ibv_create_cq(ctx, num(cmd, "depth", 1, 0), NULL, NULL, 0)))
			fail(cmd, "ibv_create_cq: %s", strerror(errno));
		printf("{\"event\":\"cq\",\"cqe\":%d}\n", cq->cqe);
	} else if (strcmp(cmd, "qp") == 0) {
		struct ibv_qp_init_attr ia;
		need(cmd, pd, "pd");
		need(cmd, cq, "cq");
		memset(&ia, 0, sizeof ia);
		ia.send_cq = ia.recv_cq = cq;
		ia.qp_type = IBV_QPT_RC;
		ia.cap.max_send_wr = num(cmd, "send", 0, 16);
		ia.cap.max_recv_wr = num(cmd, "recv", 0, 16);
		ia.cap.max_send_sge = ia.cap.max_recv_sge = num(cmd, "sge", 0, 1);
		ia.cap.max_inline_data = num(cmd, "inline", 0, 0);
		if (!(qp = ibv_create_qp(pd, &ia)))
			fail(cmd, "ibv_create_qp: %s", strerror(errno));
		memset(&a, 0, sizeof a);
		a.qp_state = IBV_QPS_INIT;
		a.port_num = 1;
		a.qp_access_flags = IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE | IBV_ACCESS_REMOTE_READ;
		e = ibv_modify_qp(qp, &a, IBV_QP_STATE | IBV_QP_PKEY_INDEX | IBV_QP_PORT | IBV_QP_ACCESS_FLAGS);
		if (e)
			fail(cmd, "modify to INIT: %s", strerror(e));
		/*
		 * Guests boot identically, so pid and time would give both
		 * sides one PSN; the kernel's entropy differs.
		 */
		if (arg("psn")) {
			local_psn = num(cmd, "psn", 1, 0) & 0xffffff;
		} else {
			FILE *r = fopen("/dev/urandom", "r");
			if (!r || fread(&local_psn, sizeof local_psn, 1, r) != 1)
				fail(cmd, "/dev/urandom: %s", strerror(errno));
			fclose(r);
			local_psn &= 0xffffff;
		}
		printf("{\"event\":\"qp\",\"qpn\":%u,\"psn\":%u}\n", qp->qp_num, local_psn);
	} else if (strcmp(cmd, "mr") == 0) {
		uint64_t seed = num(cmd, "seed", 0, 0);
		need(cmd, pd, "pd");
		buflen = num(cmd, "len", 1, 0);
		if (!(buf = aligned_alloc(4096, (buflen + 4095) / 4096 * 4096)))
			fail(cmd, "out of memory");
		for (size_t i = 0; i < buflen; i++)
			buf[i] = (seed + i * 7) & 0xff;
		mr = ibv_reg_mr(pd, buf, buflen, IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE |
				IBV_ACCESS_REMOTE_READ);
		if (!mr)
			fail(cmd, "ibv_reg_mr: %s", strerror(errno));
		printf("{\"event\":\"mr\",\"addr\":%llu,\"len\":%zu,\"lkey\":%u,\"rkey\":%u}\n",
		       (unsigned long long)(uintptr_t)buf, buflen, mr->lkey, mr->rkey);
	} else if (strcmp(cmd, "info") == 0) {
		char g[40];
		need(cmd, qp, "qp");
		e = ibv_query_gid(ctx, 1, num(cmd, "gid", 1, 0), &local_gid);
		if (e)
			fail(cmd, "ibv_query_gid: %s", strerror(errno));
		gid_str(&local_gid, g);
		printf("{\"event\":\"info\",\"qpn\":%u,\"psn\":%u,\"gid\":\"%s\",\"addr\":%llu,\"rkey\":%u}\n",
		       qp->qp_num, local_psn, g, (unsigned long long)(uintptr_t)buf, mr ? mr->rkey : 0);
	} else if (strcmp(cmd, "exchange") == 0) {
		do_exchange(cmd);
	} else if (strcmp(cmd, "barrier") == 0) {
		char c = 'b';
		if (sock < 0)
			fail(cmd, "no exchange socket");
		full_io(cmd, 1, &c, 1);
		full_io(cmd, 0, &c, 1);
		printf("{\"event\":\"barrier\"}\n");
	} else if (strcmp(cmd, "connect") == 0) {
		do_connect(cmd);
	} else if (strcmp(cmd, "post_recv") == 0) {
		uint64_t off = num(cmd, "off", 0, 0), len = num(cmd, "len", 1, 0);
		struct ibv_sge sge;
		struct ibv_recv_wr wr, *bad;
		need(cmd, qp, "qp");
		range(cmd, off, len);
		memset(&wr, 0, sizeof wr);
		wr.wr_id = num(cmd, "wr_id", 1, 0);
		wr.sg_list = &sge;
		wr.num_sge = 1;
		sge.addr = (uintptr_t)buf + off;
		sge.length = len;
		sge.lkey = mr->lkey;
		e = ibv_post_recv(qp, &wr, &bad);
		if (e)
			fail(cmd, "ibv_post_recv: %s", strerror(e));
		printf("{\"event\":\"post_recv\",\"wr_id\":%llu}\n", (unsigned long long)wr.wr_id);
	} else if (strcmp(cmd, "post_send") == 0) {
		do_post_send(cmd);
	} else if (strcmp(cmd, "poll") == 0) {
		do_poll(cmd);
	} else if (strcmp(cmd, "dump") == 0) {
		uint64_t off = num(cmd, "off", 0, 0), len = num(cmd, "len", 1, 0);
		range(cmd, off, len);
		printf("{\"event\":\"dump\",\"off\":%llu,\"hex\":\"", (unsigned long long)off);
		for (uint64_t i = 0; i < len; i++)
			printf("%02x", buf[off + i]);
		printf("\"}\n");
	} else if (strcmp(cmd, "crc") == 0) {
		uint64_t off = num(cmd, "off", 0, 0), len = num(cmd, "len", 1, 0);
		range(cmd, off, len);
		printf("{\"event\":\"crc\",\"off\":%llu,\"len\":%llu,\"crc32\":%u}\n",
		       (unsigned long long)off, (unsigned long long)len, crc32_ieee(buf + off, len));
	} else {
		fail(cmd, "unknown command");
	}
}

int main(int argc, char **argv)
{
	FILE *in = stdin;
	char line[1024];

	setvbuf(stdout, NULL, _IOLBF, 0);
	if (argc > 1 && !(in = fopen(argv[1], "r"))) {
		perror(argv[1]);
		return 2;
	}
	while (fgets(line, sizeof line, in)) {
		lineno++;
		run(line);
	}
	printf("{\"event\":\"done\"}\n");
	return 0;
}
