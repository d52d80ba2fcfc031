/*
 * rocesim-agent: the in-VM verbs agent of the real-rxe conformance harness.
 *
 * It reads commands, one per line, from a script file named by the first
 * argument or from stdin, runs each against real libibverbs and prints one
 * JSON object per line on stdout. Blank lines and lines starting with '#'
 * are skipped. Arguments are key=value words; numbers take C syntax (0x...
 * for hex). Objects are named (name=...), so a script can hold several
 * memory regions and completion queues; one RC, UC or UD QP per agent.
 *
 *   open dev=rxe0                  open the device (default rxe0); prints its
 *                                  number of completion vectors
 *   pd                             allocate the protection domain
 *   srq [max_wr=N]                 create a shared receive queue (one per
 *                                  agent); a qp made with srq=1 uses it,
 *                                  and post_recv then posts to it
 *   cq [name=C] depth=N [vector=V] [channel=1]
 *                                  create a completion queue (default name cq,
 *                                  completion vector 0), on the completion
 *                                  channel with channel=1
 *   channel                        create the agent's completion channel
 *   raw_qp [cq=C]                  create (and destroy) a RAW_PACKET QP
 *   reset_post [cq=C]              post a SEND and a receive to an RC QP left
 *                                  in RESET: the returns and *bad_wr
 *   gid_table max=N                ibv_query_gid_table with room for N
 *                                  entries; prints how many it gave
 *   device_ex                      ibv_query_device_ex; prints phys_port_cnt
 *                                  and phys_port_cnt_ex
 *   cmd_fd                         dup(2) the context's cmd_fd
 *   notify [cq=C] [solicited=1]    ibv_req_notify_cq
 *   get_event [timeout_ms=N]       wait (poll(2), default 10 s) for an event
 *                                  on the channel and read it with
 *                                  ibv_get_cq_event; prints its CQ's name
 *   ack [cq=C] [n=N]               ibv_ack_cq_events of N (default: every
 *                                  event read and not yet acknowledged)
 *   destroy_qp                     ibv_destroy_qp; prints ret and errno
 *   destroy_cq [cq=C] [wait_ms=N]  ibv_destroy_cq in a thread: if it has not
 *                                  returned within N ms (default 2000) it
 *                                  prints blocked=1 and acknowledges the
 *                                  CQ's events read and not acknowledged
 *                                  (libibverbs waits for them), then prints
 *                                  ret and errno (and blocked) once it did
 *   mr [name=M] len=N [seed=S | fill=zero|seq|byte:V] [access=LIST]
 *                                  register N bytes (default name buf):
 *                                  seed=S gives byte i = (S + 7i) & 0xff,
 *                                  fill=seq byte i = i & 0xff; LIST is
 *                                  comma-separated lw,rw,rr,ra (default all)
 *                                  (mb: IBV_ACCESS_MW_BIND)
 *   mw name=W type=1|2             allocate a memory window (ibv_alloc_mw);
 *                                  prints its rkey
 *   bind mw=W wr_id=N [mr=M] off=N len=N [access=LIST] [signaled=0|1]
 *                                  bind W over [off, off+len) of MR M: a
 *                                  type 1 window with ibv_bind_mw, a type 2
 *                                  one by posting IBV_WR_BIND_MW with
 *                                  ibv_inc_rkey(rkey); either way the
 *                                  window's rkey is the new one after the
 *                                  post (prints it); len=0 binds no MR
 *   rereg [mr=M] flags=N [access=LIST] [newpd=1] [off=N len=N]
 *                                  ibv_rereg_mr of MR M with the flags given
 *                                  (1 CHANGE_TRANSLATION: the MR's buffer
 *                                  from off for len bytes; 2 CHANGE_PD: a
 *                                  second PD, made on first use, or the
 *                                  first again with newpd=0; 4
 *                                  CHANGE_ACCESS); prints the return value,
 *                                  errno and the MR's keys, and does not
 *                                  fail on an error (what is asked is what
 *                                  rxe does)
 *   poke [mr=M] off=N hex=HEX      set bytes of an MR
 *   qp send=N recv=N sge=N inline=N [psn=N] [send_cq=C recv_cq=C]
 *      [access=LIST] [sig_all=0|1] [type=rc|uc|ud] [qkey=N] [srq=1]
 *                                  create the QP (RC by default; UC keeps
 *                                  only remote write access and connects
 *                                  with UC's masks; UD takes a Q_Key,
 *                                  default 0x11111111, and its connect
 *                                  makes an address handle to the peer,
 *                                  which post_send then sends to) and
 *                                  move it RESET->INIT
 *                                  (port 1); access defaults to lw,rw,rr,ra;
 *                                  psn is its initial send PSN (default from
 *                                  /dev/urandom)
 *   info gid=IDX                   print local qpn, psn, gid, mr addr/rkey
 *   exchange peer=IP port=P role=server|client
 *                                  swap qpn, psn, gid (of the last info),
 *                                  mr addr and rkey with the peer over TCP
 *                                  (the client retries for up to 120 s)
 *   barrier                        one byte each way on the exchange socket
 *   connect gid=IDX [qpn=N psn=N dgid=IP|IPv6] [timeout=N retry=N
 *           rnr_retry=N min_rnr=N mtu=BYTES max_rd_atomic=N
 *           max_dest_rd_atomic=N]  INIT->RTR->RTS (path MTU default 1024);
 *                                  remote values default to the exchanged
 *   post_recv wr_id=N [mr=M] off=N len=N
 *   post_send wr_id=N op=send|send_imm|write|write_imm|read|cas|faa|
 *             send_inv|local_inv [inv=RKEY]
 *             [mr=M] off=N len=N imm=N [roff=N | raddr=N] [rkey=N]
 *             [compare=N swap=N | add=N] [signaled=0|1] [fence=1]
 *             [solicited=1] [inline=1]
 *             [defer=1]
 *                                  raddr defaults to the peer's MR address
 *                                  plus roff, rkey to the peer's rkey;
 *                                  atomics use len=8; defer=1 holds the
 *                                  work request for post_flush
 *   post_flush                     post the held work requests as one
 *                                  list (one ibv_post_send, one doorbell)
 *   poll [cq=C] n=N timeout_ms=N   poll until N completions, printing each
 *   drain [cq=C]                   print every completion queued now
 *   async                          print the asynchronous events queued now
 *   dump [mr=M] off=N len=N        hex of an MR range
 *   crc [mr=M] off=N len=N         CRC-32 (IEEE) of an MR range
 *   quit                           exit 0
 *
 * From a script the first failure prints {"event":"error",...} and exits
 * 1. Several commands may share a line, separated by ';': they run back to
 * back. Interactive (no argument): the agent turns off the terminal's echo,
 * prints {"event":"hello"}, and ends every line with {"event":"ok"} or
 * {"event":"error"} carrying the line's sequence number in "line", so a
 * host driving it over a serial console knows when a line is done;
 * failures do not stop it. A poll that times out prints the completions it
 * got, then the error.
 */
#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <infiniband/verbs.h>
#include <netinet/in.h>
#include <poll.h>
#include <pthread.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <termios.h>
#include <time.h>
#include <unistd.h>

#define MAXARGS 24
#define MAXOBJ 16
#define XCHG_LEN 128
#define LINE_MAX_LEN 65536

struct mrobj {
	char name[32];
	struct ibv_mr *mr;
	unsigned char *buf;
	size_t len;
};

struct mwobj {
	char name[32];
	struct ibv_mw *mw;
};

struct cqobj {
	char name[32];
	struct ibv_cq *cq; /* NULL once destroyed */
	unsigned unacked;  /* events read (ibv_get_cq_event), not acknowledged */
};

static struct ibv_context *ctx;
static struct ibv_pd *pd;
static struct ibv_qp *qp;
static struct ibv_srq *srq; /* made by "srq"; a QP made with srq=1 receives from it */
static struct ibv_comp_channel *channel; /* made by "channel" */
static struct mrobj mrs[MAXOBJ];
static struct cqobj cqs[MAXOBJ];
static struct mwobj mws[MAXOBJ];
static int nmrs, ncqs, nmws;
static uint32_t local_psn;
static union ibv_gid local_gid;
static int sock = -1;
static int lineno;
static int interactive;
static jmp_buf failed;

static struct {
	int have;
	uint32_t qpn, psn, rkey;
	uint64_t addr;
	union ibv_gid gid;
} peer;

/* A UD QP's destination: set by connect. */
static struct ibv_ah *ud_ah;
static uint32_t ud_qpn, ud_qkey;

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
	if (interactive)
		longjmp(failed, 1);
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

static const char *event_name(enum ibv_event_type t)
{
	switch (t) {
	case IBV_EVENT_CQ_ERR: return "IBV_EVENT_CQ_ERR";
	case IBV_EVENT_QP_FATAL: return "IBV_EVENT_QP_FATAL";
	case IBV_EVENT_QP_REQ_ERR: return "IBV_EVENT_QP_REQ_ERR";
	case IBV_EVENT_QP_ACCESS_ERR: return "IBV_EVENT_QP_ACCESS_ERR";
	case IBV_EVENT_COMM_EST: return "IBV_EVENT_COMM_EST";
	case IBV_EVENT_SQ_DRAINED: return "IBV_EVENT_SQ_DRAINED";
	case IBV_EVENT_PATH_MIG: return "IBV_EVENT_PATH_MIG";
	case IBV_EVENT_PATH_MIG_ERR: return "IBV_EVENT_PATH_MIG_ERR";
	case IBV_EVENT_DEVICE_FATAL: return "IBV_EVENT_DEVICE_FATAL";
	case IBV_EVENT_PORT_ACTIVE: return "IBV_EVENT_PORT_ACTIVE";
	case IBV_EVENT_PORT_ERR: return "IBV_EVENT_PORT_ERR";
	case IBV_EVENT_LID_CHANGE: return "IBV_EVENT_LID_CHANGE";
	case IBV_EVENT_PKEY_CHANGE: return "IBV_EVENT_PKEY_CHANGE";
	case IBV_EVENT_SM_CHANGE: return "IBV_EVENT_SM_CHANGE";
	case IBV_EVENT_SRQ_ERR: return "IBV_EVENT_SRQ_ERR";
	case IBV_EVENT_SRQ_LIMIT_REACHED: return "IBV_EVENT_SRQ_LIMIT_REACHED";
	case IBV_EVENT_QP_LAST_WQE_REACHED: return "IBV_EVENT_QP_LAST_WQE_REACHED";
	case IBV_EVENT_CLIENT_REREGISTER: return "IBV_EVENT_CLIENT_REREGISTER";
	case IBV_EVENT_GID_CHANGE: return "IBV_EVENT_GID_CHANGE";
	default: return "IBV_EVENT_UNKNOWN";
	}
}

static void need(const char *cmd, const void *p, const char *what)
{
	if (!p)
		fail(cmd, "no %s yet", what);
}

/* lookup_mr returns the MR named by key= (default: the first one). */
static struct mrobj *lookup_mr(const char *cmd, const char *key)
{
	const char *n = arg(key);

	if (nmrs == 0)
		fail(cmd, "no mr yet");
	if (!n)
		return &mrs[0];
	for (int i = 0; i < nmrs; i++)
		if (strcmp(mrs[i].name, n) == 0)
			return &mrs[i];
	fail(cmd, "no mr named %s", n);
	return NULL;
}

/* lookup_cqobj returns the CQ named by key= (default: the first one). */
static struct cqobj *lookup_cqobj(const char *cmd, const char *key)
{
	const char *n = arg(key);

	if (ncqs == 0)
		fail(cmd, "no cq yet");
	for (int i = 0; i < ncqs; i++)
		if (!n || strcmp(cqs[i].name, n) == 0) {
			if (!cqs[i].cq)
				fail(cmd, "cq %s is destroyed", cqs[i].name);
			return &cqs[i];
		}
	fail(cmd, "no cq named %s", n);
	return NULL;
}

static struct ibv_cq *lookup_cq(const char *cmd, const char *key)
{
	return lookup_cqobj(cmd, key)->cq;
}

static void range(const char *cmd, struct mrobj *m, uint64_t off, uint64_t len)
{
	if (off > m->len || len > m->len - off)
		fail(cmd, "range %llu+%llu outside the %zu-byte mr %s",
		     (unsigned long long)off, (unsigned long long)len, m->len, m->name);
}

static int access_flags(const char *cmd, const char *key, int def)
{
	const char *v = arg(key);
	char list[128], *save, *w;
	int f = 0;

	if (!v)
		return def;
	snprintf(list, sizeof list, "%s", v);
	for (w = strtok_r(list, ",", &save); w; w = strtok_r(NULL, ",", &save)) {
		if (strcmp(w, "lw") == 0)
			f |= IBV_ACCESS_LOCAL_WRITE;
		else if (strcmp(w, "rw") == 0)
			f |= IBV_ACCESS_REMOTE_WRITE;
		else if (strcmp(w, "rr") == 0)
			f |= IBV_ACCESS_REMOTE_READ;
		else if (strcmp(w, "ra") == 0)
			f |= IBV_ACCESS_REMOTE_ATOMIC;
		else if (strcmp(w, "mb") == 0)
			f |= IBV_ACCESS_MW_BIND;
		else if (strcmp(w, "none") != 0)
			fail(cmd, "bad access %s (lw,rw,rr,ra,mb or none)", w);
	}
	return f;
}

#define ALL_ACCESS (IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE | \
		    IBV_ACCESS_REMOTE_READ | IBV_ACCESS_REMOTE_ATOMIC)

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
		 nmrs ? (unsigned long long)(uintptr_t)mrs[0].buf : 0ULL, nmrs ? mrs[0].mr->rkey : 0);
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

static enum ibv_mtu mtu_enum(const char *cmd, uint64_t bytes)
{
	switch (bytes) {
	case 256: return IBV_MTU_256;
	case 512: return IBV_MTU_512;
	case 1024: return IBV_MTU_1024;
	case 2048: return IBV_MTU_2048;
	case 4096: return IBV_MTU_4096;
	}
	fail(cmd, "bad mtu=%llu", (unsigned long long)bytes);
	return IBV_MTU_1024;
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
	if (qp->qp_type == IBV_QPT_UD) {
		/* No connection: RTR and RTS, and an address handle to the peer. */
		struct ibv_ah_attr ah;
		memset(&a, 0, sizeof a);
		a.qp_state = IBV_QPS_RTR;
		if ((e = ibv_modify_qp(qp, &a, IBV_QP_STATE)))
			fail(cmd, "modify to RTR: %s", strerror(e));
		a.qp_state = IBV_QPS_RTS;
		a.sq_psn = local_psn;
		if ((e = ibv_modify_qp(qp, &a, IBV_QP_STATE | IBV_QP_SQ_PSN)))
			fail(cmd, "modify to RTS: %s", strerror(e));
		memset(&ah, 0, sizeof ah);
		ah.is_global = 1;
		ah.port_num = 1;
		ah.grh.dgid = dgid;
		ah.grh.sgid_index = num(cmd, "gid", 1, 0);
		ah.grh.hop_limit = 64;
		if (!(ud_ah = ibv_create_ah(pd, &ah)))
			fail(cmd, "ibv_create_ah: %s", strerror(errno));
		ud_qpn = num(cmd, "qpn", 0, peer.qpn);
		printf("{\"event\":\"connect\",\"dest_qpn\":%u,\"sq_psn\":%u}\n", ud_qpn, local_psn);
		return;
	}
	memset(&a, 0, sizeof a);
	a.qp_state = IBV_QPS_RTR;
	a.path_mtu = mtu_enum(cmd, num(cmd, "mtu", 0, 1024));
	a.dest_qp_num = num(cmd, "qpn", 0, peer.qpn);
	a.rq_psn = num(cmd, "psn", 0, peer.psn);
	a.max_dest_rd_atomic = num(cmd, "max_dest_rd_atomic", 0, 1);
	a.min_rnr_timer = num(cmd, "min_rnr", 0, 12);
	a.ah_attr.is_global = 1;
	a.ah_attr.port_num = 1;
	a.ah_attr.grh.dgid = dgid;
	a.ah_attr.grh.sgid_index = num(cmd, "gid", 1, 0);
	a.ah_attr.grh.hop_limit = 64;
	if (qp->qp_type == IBV_QPT_UC)
		e = ibv_modify_qp(qp, &a, IBV_QP_STATE | IBV_QP_AV | IBV_QP_PATH_MTU | IBV_QP_DEST_QPN |
				  IBV_QP_RQ_PSN);
	else
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
	a.max_rd_atomic = num(cmd, "max_rd_atomic", 0, 1);
	if (qp->qp_type == IBV_QPT_UC)
		e = ibv_modify_qp(qp, &a, IBV_QP_STATE | IBV_QP_SQ_PSN);
	else
		e = ibv_modify_qp(qp, &a, IBV_QP_STATE | IBV_QP_TIMEOUT | IBV_QP_RETRY_CNT |
				  IBV_QP_RNR_RETRY | IBV_QP_SQ_PSN | IBV_QP_MAX_QP_RD_ATOMIC);
	if (e)
		fail(cmd, "modify to RTS: %s", strerror(e));
	printf("{\"event\":\"connect\",\"dest_qpn\":%u,\"rq_psn\":%u,\"sq_psn\":%u}\n",
	       (unsigned)num(cmd, "qpn", 0, peer.qpn), (unsigned)num(cmd, "psn", 0, peer.psn), local_psn);
}

/* Work requests held by post_send defer=1 until post_flush. */
#define MAXDEFER 64
static struct ibv_send_wr deferred[MAXDEFER];
static struct ibv_sge deferred_sge[MAXDEFER];
static int ndeferred;

static void do_post_flush(const char *cmd)
{
	struct ibv_send_wr *bad;
	int e, n = ndeferred;

	if (n == 0)
		return;
	for (int i = 0; i < n; i++) {
		deferred[i].sg_list = &deferred_sge[i];
		deferred[i].next = i + 1 < n ? &deferred[i + 1] : NULL;
	}
	ndeferred = 0;
	e = ibv_post_send(qp, &deferred[0], &bad);
	if (e)
		fail(cmd, "ibv_post_send of %d work requests: %s (at wr_id %llu)", n, strerror(e),
		     (unsigned long long)bad->wr_id);
	for (int i = 0; i < n; i++)
		printf("{\"event\":\"post_send\",\"wr_id\":%llu}\n", (unsigned long long)deferred[i].wr_id);
}

static void do_post_send(const char *cmd)
{
	const char *op = arg("op");
	uint64_t off = num(cmd, "off", 0, 0), len = num(cmd, "len", 1, 0);
	struct mrobj *m;
	struct ibv_sge sge;
	struct ibv_send_wr wr, *bad;
	int e, atomic = 0;

	need(cmd, qp, "qp");
	m = lookup_mr(cmd, "mr");
	range(cmd, m, off, len);
	memset(&wr, 0, sizeof wr);
	wr.wr_id = num(cmd, "wr_id", 1, 0);
	wr.sg_list = &sge;
	wr.num_sge = len ? 1 : 0;
	if (num(cmd, "signaled", 0, 1))
		wr.send_flags |= IBV_SEND_SIGNALED;
	if (num(cmd, "fence", 0, 0))
		wr.send_flags |= IBV_SEND_FENCE;
	if (num(cmd, "solicited", 0, 0))
		wr.send_flags |= IBV_SEND_SOLICITED;
	if (num(cmd, "inline", 0, 0))
		wr.send_flags |= IBV_SEND_INLINE;
	sge.addr = (uintptr_t)m->buf + off;
	sge.length = len;
	sge.lkey = m->mr->lkey;
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
	else if (strcmp(op, "cas") == 0)
		wr.opcode = IBV_WR_ATOMIC_CMP_AND_SWP, atomic = 1;
	else if (strcmp(op, "faa") == 0)
		wr.opcode = IBV_WR_ATOMIC_FETCH_AND_ADD, atomic = 1;
	else if (strcmp(op, "send_inv") == 0)
		wr.opcode = IBV_WR_SEND_WITH_INV;
	else if (strcmp(op, "local_inv") == 0)
		wr.opcode = IBV_WR_LOCAL_INV;
	else
		fail(cmd, "bad op=%s", op);
	if (wr.opcode == IBV_WR_SEND_WITH_INV || wr.opcode == IBV_WR_LOCAL_INV)
		wr.invalidate_rkey = num(cmd, "inv", 1, 0);
	if (wr.opcode == IBV_WR_SEND_WITH_IMM || wr.opcode == IBV_WR_RDMA_WRITE_WITH_IMM)
		wr.imm_data = htonl(num(cmd, "imm", 1, 0));
	if (qp->qp_type == IBV_QPT_UD) {
		if (!ud_ah)
			fail(cmd, "UD QP not connected: no address handle");
		wr.wr.ud.ah = ud_ah;
		wr.wr.ud.remote_qpn = ud_qpn;
		wr.wr.ud.remote_qkey = num(cmd, "qkey", 0, ud_qkey);
	}
	if (wr.opcode != IBV_WR_SEND && wr.opcode != IBV_WR_SEND_WITH_IMM &&
	    wr.opcode != IBV_WR_SEND_WITH_INV && wr.opcode != IBV_WR_LOCAL_INV) {
		uint64_t raddr;
		uint32_t rkey;
		if (!peer.have && !(arg("raddr") && arg("rkey")))
			fail(cmd, "no exchange: give raddr= rkey=");
		raddr = num(cmd, "raddr", 0, peer.addr + num(cmd, "roff", 0, 0));
		rkey = num(cmd, "rkey", 0, peer.rkey);
		if (atomic) {
			wr.wr.atomic.remote_addr = raddr;
			wr.wr.atomic.rkey = rkey;
			if (wr.opcode == IBV_WR_ATOMIC_CMP_AND_SWP) {
				wr.wr.atomic.compare_add = num(cmd, "compare", 1, 0);
				wr.wr.atomic.swap = num(cmd, "swap", 1, 0);
			} else {
				wr.wr.atomic.compare_add = num(cmd, "add", 1, 0);
			}
		} else {
			wr.wr.rdma.remote_addr = raddr;
			wr.wr.rdma.rkey = rkey;
		}
	}
	if (num(cmd, "defer", 0, 0)) {
		if (ndeferred == MAXDEFER)
			fail(cmd, "more than %d deferred work requests", MAXDEFER);
		deferred_sge[ndeferred] = sge;
		deferred[ndeferred++] = wr;
		return;
	}
	e = ibv_post_send(qp, &wr, &bad);
	if (e)
		fail(cmd, "ibv_post_send: %s", strerror(e));
	printf("{\"event\":\"post_send\",\"wr_id\":%llu}\n", (unsigned long long)wr.wr_id);
}

static void print_wc(const struct ibv_wc *wc)
{
	/*
	 * wc_flags as the provider left them, and the union after byte_len
	 * raw (ex: the invalidated R_Key of a SEND WITH INVALIDATE). rxe's
	 * do_complete sets the kernel's IB_WC_WITH_INVALIDATE (1 << 2) in
	 * wc_flags, which libibverbs reads as IBV_WC_IP_CSUM_OK, so the flag
	 * a program would test (IBV_WC_WITH_INV, 1 << 3) is never set.
	 */
	printf("{\"event\":\"wc\",\"wr_id\":%llu,\"status\":\"%s\",\"opcode\":\"%s\",\"byte_len\":%u,\"imm\":%u,\"wc_flags\":%u,\"ex\":%u,\"qp_num\":%u}\n",
	       (unsigned long long)wc->wr_id, status_name(wc->status), opcode_name(wc->opcode),
	       wc->byte_len, (wc->wc_flags & IBV_WC_WITH_IMM) ? ntohl(wc->imm_data) : 0,
	       wc->wc_flags, wc->invalidated_rkey, wc->qp_num);
}

static void do_poll(const char *cmd)
{
	int want = num(cmd, "n", 1, 0), got = 0;
	uint64_t ms = num(cmd, "timeout_ms", 0, 10000);
	struct ibv_cq *cq = lookup_cq(cmd, "cq");
	struct timespec t0, t;

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
		print_wc(&wc);
	}
}

static void do_drain(const char *cmd)
{
	struct ibv_cq *cq = lookup_cq(cmd, "cq");
	struct ibv_wc wc;
	int n;

	while ((n = ibv_poll_cq(cq, 1, &wc)) > 0)
		print_wc(&wc);
	if (n < 0)
		fail(cmd, "ibv_poll_cq: %d", n);
}

static void do_get_event(const char *cmd)
{
	struct pollfd pfd;
	struct ibv_cq *cq;
	void *cq_ctx;
	int n;

	need(cmd, channel, "channel");
	pfd.fd = channel->fd;
	pfd.events = POLLIN;
	n = poll(&pfd, 1, num(cmd, "timeout_ms", 0, 10000));
	if (n < 0)
		fail(cmd, "poll: %s", strerror(errno));
	if (n == 0)
		fail(cmd, "timeout: no event on the channel");
	if (ibv_get_cq_event(channel, &cq, &cq_ctx))
		fail(cmd, "ibv_get_cq_event: %s", strerror(errno));
	for (int i = 0; i < ncqs; i++)
		if (cqs[i].cq == cq) {
			cqs[i].unacked++;
			printf("{\"event\":\"cq_event\",\"name\":\"%s\"}\n", cqs[i].name);
			return;
		}
	fail(cmd, "an event of an unknown cq");
}

struct destroy_job {
	struct ibv_cq *cq;
	int ret, done;
	pthread_mutex_t mu;
};

static void *destroy_thread(void *p)
{
	struct destroy_job *j = p;
	int ret = ibv_destroy_cq(j->cq);

	pthread_mutex_lock(&j->mu);
	j->ret = ret;
	j->done = 1;
	pthread_mutex_unlock(&j->mu);
	return NULL;
}

static void do_destroy_cq(const char *cmd)
{
	struct cqobj *c = lookup_cqobj(cmd, "cq");
	uint64_t ms = num(cmd, "wait_ms", 0, 2000);
	struct destroy_job j = {.cq = c->cq, .mu = PTHREAD_MUTEX_INITIALIZER};
	pthread_t th;
	int blocked = 0, done = 0;

	if (pthread_create(&th, NULL, destroy_thread, &j))
		fail(cmd, "pthread_create failed");
	for (uint64_t waited = 0; !done && waited < ms; waited++) {
		usleep(1000);
		pthread_mutex_lock(&j.mu);
		done = j.done;
		pthread_mutex_unlock(&j.mu);
	}
	if (!done) {
		/* libibverbs waits for the events read to be acknowledged. */
		blocked = 1;
		printf("{\"event\":\"destroy_cq\",\"name\":\"%s\",\"blocked\":1}\n", c->name);
		ibv_ack_cq_events(c->cq, c->unacked);
		c->unacked = 0;
	}
	pthread_join(th, NULL);
	printf("{\"event\":\"destroy_cq\",\"name\":\"%s\",\"ret\":%d,\"errno\":%d,\"blocked\":%d}\n", c->name, j.ret,
	       j.ret ? errno : 0, blocked);
	if (j.ret == 0)
		c->cq = NULL;
}

static void do_async(const char *cmd)
{
	struct ibv_async_event ev;
	int fl;

	need(cmd, ctx, "device");
	fl = fcntl(ctx->async_fd, F_GETFL);
	fcntl(ctx->async_fd, F_SETFL, fl | O_NONBLOCK);
	while (ibv_get_async_event(ctx, &ev) == 0) {
		uint32_t qpn = 0;
		if (ev.event_type == IBV_EVENT_QP_FATAL || ev.event_type == IBV_EVENT_QP_REQ_ERR ||
		    ev.event_type == IBV_EVENT_QP_ACCESS_ERR || ev.event_type == IBV_EVENT_COMM_EST ||
		    ev.event_type == IBV_EVENT_SQ_DRAINED || ev.event_type == IBV_EVENT_QP_LAST_WQE_REACHED)
			qpn = ev.element.qp->qp_num;
		printf("{\"event\":\"async\",\"type\":\"%s\",\"qpn\":%u}\n", event_name(ev.event_type), qpn);
		ibv_ack_async_event(&ev);
	}
	fcntl(ctx->async_fd, F_SETFL, fl);
}

static void do_mr(const char *cmd)
{
	struct mrobj *m;
	const char *fill = arg("fill"), *name = arg("name");
	size_t len = num(cmd, "len", 1, 0);

	need(cmd, pd, "pd");
	if (nmrs == MAXOBJ)
		fail(cmd, "too many mrs");
	m = &mrs[nmrs];
	snprintf(m->name, sizeof m->name, "%s", name ? name : "buf");
	for (int i = 0; i < nmrs; i++)
		if (strcmp(mrs[i].name, m->name) == 0)
			fail(cmd, "mr %s exists", m->name);
	m->len = len;
	if (!(m->buf = aligned_alloc(4096, (len + 4095) / 4096 * 4096 + 4096)))
		fail(cmd, "out of memory");
	if (arg("seed")) {
		uint64_t seed = num(cmd, "seed", 1, 0);
		for (size_t i = 0; i < len; i++)
			m->buf[i] = (seed + i * 7) & 0xff;
	} else if (!fill || strcmp(fill, "zero") == 0) {
		memset(m->buf, 0, len);
	} else if (strcmp(fill, "seq") == 0) {
		for (size_t i = 0; i < len; i++)
			m->buf[i] = i & 0xff;
	} else if (strncmp(fill, "byte:", 5) == 0) {
		memset(m->buf, strtoul(fill + 5, NULL, 0), len);
	} else {
		fail(cmd, "bad fill=%s", fill);
	}
	m->mr = ibv_reg_mr(pd, m->buf, len, access_flags(cmd, "access", ALL_ACCESS));
	if (!m->mr)
		fail(cmd, "ibv_reg_mr: %s", strerror(errno));
	nmrs++;
	printf("{\"event\":\"mr\",\"name\":\"%s\",\"addr\":%llu,\"len\":%zu,\"lkey\":%u,\"rkey\":%u}\n",
	       m->name, (unsigned long long)(uintptr_t)m->buf, len, m->mr->lkey, m->mr->rkey);
}

static struct mwobj *lookup_mw(const char *cmd)
{
	const char *n = arg("mw");

	for (int i = 0; n && i < nmws; i++)
		if (strcmp(mws[i].name, n) == 0)
			return &mws[i];
	fail(cmd, "no mw named %s", n ? n : "(none: give mw=)");
	return NULL;
}

/*
 * Deallocate the memory windows before the process exits: rxe 6.1 refuses
 * to deregister an MR that a window is bound to (rxe_dereg_mr: -EINVAL),
 * and the kernel's cleanup of an exiting process that still holds both
 * then never finishes (the next agent on the guest hung). Registered with
 * atexit.
 */
static void release_mws(void)
{
	for (int i = nmws - 1; i >= 0; i--)
		if (mws[i].mw)
			ibv_dealloc_mw(mws[i].mw);
	nmws = 0;
}

static void do_mw(const char *cmd)
{
	struct mwobj *w;
	const char *name = arg("name");
	int type = num(cmd, "type", 1, 0);

	need(cmd, pd, "pd");
	if (nmws == MAXOBJ)
		fail(cmd, "too many mws");
	if (!name)
		fail(cmd, "missing name=");
	w = &mws[nmws];
	snprintf(w->name, sizeof w->name, "%s", name);
	w->mw = ibv_alloc_mw(pd, type == 1 ? IBV_MW_TYPE_1 : IBV_MW_TYPE_2);
	if (!w->mw)
		fail(cmd, "ibv_alloc_mw: %s", strerror(errno));
	nmws++;
	printf("{\"event\":\"mw\",\"name\":\"%s\",\"rkey\":%u}\n", w->name, w->mw->rkey);
}

static void do_bind(const char *cmd)
{
	struct mwobj *w = lookup_mw(cmd);
	uint64_t off = num(cmd, "off", 0, 0), len = num(cmd, "len", 0, 0);
	struct ibv_mw_bind_info info;
	struct mrobj *m = NULL;
	int e;

	need(cmd, qp, "qp");
	memset(&info, 0, sizeof info);
	if (len) {
		m = lookup_mr(cmd, "mr");
		range(cmd, m, off, len);
		info.mr = m->mr;
		info.addr = (uintptr_t)m->buf + off;
		info.length = len;
	}
	info.mw_access_flags = access_flags(cmd, "access", 0);
	if (w->mw->type == IBV_MW_TYPE_1) {
		struct ibv_mw_bind b;

		memset(&b, 0, sizeof b);
		b.wr_id = num(cmd, "wr_id", 1, 0);
		b.send_flags = num(cmd, "signaled", 0, 1) ? IBV_SEND_SIGNALED : 0;
		b.bind_info = info;
		e = ibv_bind_mw(qp, w->mw, &b);
		if (e)
			fail(cmd, "ibv_bind_mw: %s", strerror(e));
	} else {
		struct ibv_send_wr wr, *bad;

		memset(&wr, 0, sizeof wr);
		wr.wr_id = num(cmd, "wr_id", 1, 0);
		wr.opcode = IBV_WR_BIND_MW;
		wr.send_flags = num(cmd, "signaled", 0, 1) ? IBV_SEND_SIGNALED : 0;
		wr.bind_mw.mw = w->mw;
		wr.bind_mw.rkey = ibv_inc_rkey(w->mw->rkey);
		wr.bind_mw.bind_info = info;
		e = ibv_post_send(qp, &wr, &bad);
		if (e)
			fail(cmd, "ibv_post_send: %s", strerror(e));
		w->mw->rkey = wr.bind_mw.rkey; /* what a program does after a successful bind */
	}
	printf("{\"event\":\"bind\",\"name\":\"%s\",\"rkey\":%u}\n", w->name, w->mw->rkey);
}

static struct ibv_pd *pd2;

static void do_rereg(const char *cmd)
{
	struct mrobj *m = lookup_mr(cmd, "mr");
	int flags = num(cmd, "flags", 1, 0), ret;
	uint64_t off = num(cmd, "off", 0, 0), len = num(cmd, "len", 0, 0);
	struct ibv_pd *npd = pd;

	if (num(cmd, "newpd", 0, 1) && (flags & IBV_REREG_MR_CHANGE_PD)) {
		if (!pd2 && !(pd2 = ibv_alloc_pd(ctx)))
			fail(cmd, "ibv_alloc_pd: %s", strerror(errno));
		npd = pd2;
	}
	if (off + len > m->len)
		fail(cmd, "off+len past mr %s", m->name);
	errno = 0;
	ret = ibv_rereg_mr(m->mr, flags, npd, m->buf + off, len, access_flags(cmd, "access", 0));
	printf("{\"event\":\"rereg\",\"ret\":%d,\"errno\":%d,\"lkey\":%u,\"rkey\":%u}\n",
	       ret, ret ? errno : 0, m->mr->lkey, m->mr->rkey);
}

static void do_poke(const char *cmd)
{
	struct mrobj *m = lookup_mr(cmd, "mr");
	uint64_t off = num(cmd, "off", 0, 0);
	const char *h = arg("hex");
	size_t n;

	if (!h || strlen(h) % 2)
		fail(cmd, "hex= needs an even number of digits");
	n = strlen(h) / 2;
	range(cmd, m, off, n);
	for (size_t i = 0; i < n; i++) {
		unsigned v;
		if (sscanf(h + 2 * i, "%2x", &v) != 1)
			fail(cmd, "bad hex at %zu", 2 * i);
		m->buf[off + i] = v;
	}
	printf("{\"event\":\"poke\",\"off\":%llu,\"len\":%zu}\n", (unsigned long long)off, n);
}

static void do_qp(const char *cmd)
{
	struct ibv_qp_init_attr ia;
	struct ibv_qp_attr a;
	int e;

	need(cmd, pd, "pd");
	if (qp)
		fail(cmd, "one qp per agent");
	memset(&ia, 0, sizeof ia);
	ia.send_cq = lookup_cq(cmd, "send_cq");
	ia.recv_cq = lookup_cq(cmd, "recv_cq");
	ia.qp_type = IBV_QPT_RC;
	if (arg("type") && strcmp(arg("type"), "uc") == 0)
		ia.qp_type = IBV_QPT_UC;
	else if (arg("type") && strcmp(arg("type"), "ud") == 0)
		ia.qp_type = IBV_QPT_UD;
	else if (arg("type") && strcmp(arg("type"), "rc") != 0)
		fail(cmd, "bad type=%s (rc, uc or ud)", arg("type"));
	ia.sq_sig_all = num(cmd, "sig_all", 0, 0);
	ia.cap.max_send_wr = num(cmd, "send", 0, 16);
	ia.cap.max_recv_wr = num(cmd, "recv", 0, 16);
	ia.cap.max_send_sge = ia.cap.max_recv_sge = num(cmd, "sge", 0, 1);
	ia.cap.max_inline_data = num(cmd, "inline", 0, 0);
	if (num(cmd, "srq", 0, 0)) {
		need(cmd, srq, "srq");
		ia.srq = srq;
		ia.cap.max_recv_wr = 0;
	}
	if (!(qp = ibv_create_qp(pd, &ia)))
		fail(cmd, "ibv_create_qp: %s", strerror(errno));
	memset(&a, 0, sizeof a);
	a.qp_state = IBV_QPS_INIT;
	a.port_num = 1;
	a.qp_access_flags = access_flags(cmd, "access", ALL_ACCESS) & ~IBV_ACCESS_LOCAL_WRITE;
	if (ia.qp_type == IBV_QPT_UC) /* UC has no READ or atomics */
		a.qp_access_flags &= IBV_ACCESS_REMOTE_WRITE;
	if (ia.qp_type == IBV_QPT_UD) {
		a.qkey = ud_qkey = num(cmd, "qkey", 0, 0x11111111);
		e = ibv_modify_qp(qp, &a, IBV_QP_STATE | IBV_QP_PKEY_INDEX | IBV_QP_PORT | IBV_QP_QKEY);
	} else
		e = ibv_modify_qp(qp, &a, IBV_QP_STATE | IBV_QP_PKEY_INDEX | IBV_QP_PORT | IBV_QP_ACCESS_FLAGS);
	if (e)
		fail(cmd, "modify to INIT: %s", strerror(e));
	/*
	 * Guests boot identically, so pid and time would give both sides one
	 * PSN; the kernel's entropy differs.
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
}

/* run runs one command (a line holds one or more, separated by ';'). */
static void run(char *line)
{
	char *cmd, *save, *w;
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
		printf("{\"event\":\"open\",\"dev\":\"%s\",\"comp_vectors\":%d}\n", name, ctx->num_comp_vectors);
	} else if (strcmp(cmd, "pd") == 0) {
		need(cmd, ctx, "device");
		if (!(pd = ibv_alloc_pd(ctx)))
			fail(cmd, "ibv_alloc_pd: %s", strerror(errno));
		printf("{\"event\":\"pd\"}\n");
	} else if (strcmp(cmd, "cq") == 0) {
		const char *name = arg("name");
		need(cmd, ctx, "device");
		if (ncqs == MAXOBJ)
			fail(cmd, "too many cqs");
		snprintf(cqs[ncqs].name, sizeof cqs[ncqs].name, "%s", name ? name : "cq");
		if (num(cmd, "channel", 0, 0))
			need(cmd, channel, "channel");
		if (!(cqs[ncqs].cq = ibv_create_cq(ctx, num(cmd, "depth", 1, 0), NULL, num(cmd, "channel", 0, 0) ? channel : NULL,
						   num(cmd, "vector", 0, 0))))
			fail(cmd, "ibv_create_cq: %s", strerror(errno));
		printf("{\"event\":\"cq\",\"name\":\"%s\",\"cqe\":%d}\n", cqs[ncqs].name, cqs[ncqs].cq->cqe);
		ncqs++;
	} else if (strcmp(cmd, "raw_qp") == 0) {
		/* A raw packet QP, created and destroyed: what the device says. */
		struct ibv_qp_init_attr ia = { .qp_type = IBV_QPT_RAW_PACKET,
					       .cap = { .max_send_wr = 1, .max_recv_wr = 1,
							.max_send_sge = 1, .max_recv_sge = 1 } };
		struct ibv_qp *raw;

		need(cmd, pd, "pd");
		ia.send_cq = ia.recv_cq = lookup_cq(cmd, "cq");
		if (!(raw = ibv_create_qp(pd, &ia)))
			fail(cmd, "ibv_create_qp: %s", strerror(errno));
		ibv_destroy_qp(raw);
		printf("{\"event\":\"raw_qp\"}\n");
	} else if (strcmp(cmd, "reset_post") == 0) {
		/* An RC QP left in RESET: what ibv_post_send and ibv_post_recv
		 * return, and where they leave *bad_wr (NULL, the WR, or
		 * untouched). */
		struct ibv_qp_init_attr ia = { .qp_type = IBV_QPT_RC,
					       .cap = { .max_send_wr = 4, .max_recv_wr = 4,
							.max_send_sge = 1, .max_recv_sge = 1 } };
		struct ibv_sge sge = { 0 };
		struct ibv_send_wr swr2 = { .wr_id = 3, .opcode = IBV_WR_SEND, .sg_list = &sge, .num_sge = 2 };
		struct ibv_send_wr swr = { .wr_id = 1, .opcode = IBV_WR_SEND }, *sbad = (void *)1, *cbad = (void *)1;
		struct ibv_recv_wr rwr = { .wr_id = 2 }, *rbad = (void *)1;
		struct ibv_qp *q;
		int sret, rret, cret;

		need(cmd, pd, "pd");
		ia.send_cq = ia.recv_cq = lookup_cq(cmd, "cq");
		if (!(q = ibv_create_qp(pd, &ia)))
			fail(cmd, "ibv_create_qp: %s", strerror(errno));
		sret = ibv_post_send(q, &swr, &sbad);
		rret = ibv_post_recv(q, &rwr, &rbad);
		/* A good WR, then one with 2 SGEs where max_send_sge is 1. */
		swr.next = &swr2;
		cret = ibv_post_send(q, &swr, &cbad);
		ibv_destroy_qp(q);
		printf("{\"event\":\"reset_post\",\"detail\":\"send %d bad_wr %s, recv %d bad_wr %s, "
		       "send of a good WR then one over max_send_sge %d bad_wr %s\"}\n",
		       sret, !sbad ? "NULL" : sbad == &swr ? "wr" : "untouched",
		       rret, !rbad ? "NULL" : rbad == &rwr ? "wr" : "untouched",
		       cret, !cbad ? "NULL" : cbad == &swr ? "first" : cbad == &swr2 ? "second" : "untouched");
	} else if (strcmp(cmd, "gid_table") == 0) {
		/* ibv_query_gid_table with room for max= entries. */
		long max = num(cmd, "max", 0, 0);
		struct ibv_gid_entry *entries = calloc(max ? max : 1, sizeof(*entries));
		ssize_t n;

		if (!entries)
			fail(cmd, "out of memory");
		n = ibv_query_gid_table(ctx, max ? entries : NULL, max, 0);
		free(entries);
		if (n < 0)
			fail(cmd, "ibv_query_gid_table: %s", strerror(-n));
		printf("{\"event\":\"gid_table\",\"n\":%zd}\n", n);
	} else if (strcmp(cmd, "device_ex") == 0) {
		struct ibv_device_attr_ex ax;

		need(cmd, ctx, "device");
		memset(&ax, 0, sizeof(ax));
		if ((e = ibv_query_device_ex(ctx, NULL, &ax)))
			fail(cmd, "ibv_query_device_ex: %s", strerror(e));
		printf("{\"event\":\"device_ex\",\"ports\":%d,\"ports_ex\":%d}\n",
		       ax.orig_attr.phys_port_cnt, ax.phys_port_cnt_ex);
	} else if (strcmp(cmd, "cmd_fd") == 0) {
		/* Is the context's command descriptor an open file (dup works)? */
		int fd;

		need(cmd, ctx, "device");
		if ((fd = dup(ctx->cmd_fd)) < 0)
			fail(cmd, "dup(cmd_fd %d): %s", ctx->cmd_fd, strerror(errno));
		close(fd);
		printf("{\"event\":\"cmd_fd\"}\n");
	} else if (strcmp(cmd, "channel") == 0) {
		need(cmd, ctx, "device");
		if (channel)
			fail(cmd, "one channel per agent");
		if (!(channel = ibv_create_comp_channel(ctx)))
			fail(cmd, "ibv_create_comp_channel: %s", strerror(errno));
		printf("{\"event\":\"channel\"}\n");
	} else if (strcmp(cmd, "notify") == 0) {
		struct cqobj *c = lookup_cqobj(cmd, "cq");
		if ((e = ibv_req_notify_cq(c->cq, num(cmd, "solicited", 0, 0))))
			fail(cmd, "ibv_req_notify_cq: %s", strerror(e));
		printf("{\"event\":\"notify\",\"name\":\"%s\"}\n", c->name);
	} else if (strcmp(cmd, "get_event") == 0) {
		do_get_event(cmd);
	} else if (strcmp(cmd, "ack") == 0) {
		struct cqobj *c = lookup_cqobj(cmd, "cq");
		unsigned n = num(cmd, "n", 0, c->unacked);
		ibv_ack_cq_events(c->cq, n);
		c->unacked -= n < c->unacked ? n : c->unacked;
		printf("{\"event\":\"ack\",\"name\":\"%s\"}\n", c->name);
	} else if (strcmp(cmd, "destroy_cq") == 0) {
		do_destroy_cq(cmd);
	} else if (strcmp(cmd, "destroy_qp") == 0) {
		need(cmd, qp, "qp");
		e = ibv_destroy_qp(qp);
		if (e == 0)
			qp = NULL;
		printf("{\"event\":\"destroy_qp\",\"ret\":%d,\"errno\":%d}\n", e, e ? errno : 0);
	} else if (strcmp(cmd, "srq") == 0) {
		struct ibv_srq_init_attr sa;
		need(cmd, pd, "pd");
		if (srq)
			fail(cmd, "one srq per agent");
		memset(&sa, 0, sizeof sa);
		sa.attr.max_wr = num(cmd, "max_wr", 0, 16);
		sa.attr.max_sge = 1;
		if (!(srq = ibv_create_srq(pd, &sa)))
			fail(cmd, "ibv_create_srq: %s", strerror(errno));
		printf("{\"event\":\"srq\"}\n");
	} else if (strcmp(cmd, "qp") == 0) {
		do_qp(cmd);
	} else if (strcmp(cmd, "mr") == 0) {
		do_mr(cmd);
	} else if (strcmp(cmd, "mw") == 0) {
		do_mw(cmd);
	} else if (strcmp(cmd, "bind") == 0) {
		do_bind(cmd);
	} else if (strcmp(cmd, "rereg") == 0) {
		do_rereg(cmd);
	} else if (strcmp(cmd, "poke") == 0) {
		do_poke(cmd);
	} else if (strcmp(cmd, "info") == 0) {
		char g[40];
		need(cmd, qp, "qp");
		e = ibv_query_gid(ctx, 1, num(cmd, "gid", 1, 0), &local_gid);
		if (e)
			fail(cmd, "ibv_query_gid: %s", strerror(errno));
		gid_str(&local_gid, g);
		printf("{\"event\":\"info\",\"qpn\":%u,\"psn\":%u,\"gid\":\"%s\",\"addr\":%llu,\"rkey\":%u}\n",
		       qp->qp_num, local_psn, g, nmrs ? (unsigned long long)(uintptr_t)mrs[0].buf : 0ULL,
		       nmrs ? mrs[0].mr->rkey : 0);
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
		struct mrobj *m;
		struct ibv_sge sge;
		struct ibv_recv_wr wr, *bad;
		need(cmd, qp, "qp");
		m = lookup_mr(cmd, "mr");
		range(cmd, m, off, len);
		memset(&wr, 0, sizeof wr);
		wr.wr_id = num(cmd, "wr_id", 1, 0);
		wr.sg_list = &sge;
		wr.num_sge = len ? 1 : 0; /* an SGE of length 0 would mean 2^31 bytes */
		sge.addr = (uintptr_t)m->buf + off;
		sge.length = len;
		sge.lkey = m->mr->lkey;
		if (qp->srq)
			e = ibv_post_srq_recv(qp->srq, &wr, &bad);
		else
			e = ibv_post_recv(qp, &wr, &bad);
		if (e)
			fail(cmd, "ibv_post_recv: %s", strerror(e));
		printf("{\"event\":\"post_recv\",\"wr_id\":%llu}\n", (unsigned long long)wr.wr_id);
	} else if (strcmp(cmd, "post_send") == 0) {
		do_post_send(cmd);
	} else if (strcmp(cmd, "post_flush") == 0) {
		need(cmd, qp, "qp");
		do_post_flush(cmd);
	} else if (strcmp(cmd, "poll") == 0) {
		do_poll(cmd);
	} else if (strcmp(cmd, "drain") == 0) {
		do_drain(cmd);
	} else if (strcmp(cmd, "async") == 0) {
		do_async(cmd);
	} else if (strcmp(cmd, "dump") == 0) {
		struct mrobj *m = lookup_mr(cmd, "mr");
		uint64_t off = num(cmd, "off", 0, 0), len = num(cmd, "len", 1, 0);
		range(cmd, m, off, len);
		printf("{\"event\":\"dump\",\"off\":%llu,\"len\":%llu,\"hex\":\"", (unsigned long long)off,
		       (unsigned long long)len);
		for (uint64_t i = 0; i < len; i++)
			printf("%02x", m->buf[off + i]);
		printf("\"}\n");
	} else if (strcmp(cmd, "crc") == 0) {
		struct mrobj *m = lookup_mr(cmd, "mr");
		uint64_t off = num(cmd, "off", 0, 0), len = num(cmd, "len", 1, 0);
		range(cmd, m, off, len);
		printf("{\"event\":\"crc\",\"off\":%llu,\"len\":%llu,\"crc32\":%u}\n",
		       (unsigned long long)off, (unsigned long long)len, crc32_ieee(m->buf + off, len));
	} else if (strcmp(cmd, "quit") == 0) {
		printf("{\"event\":\"ok\",\"line\":%d,\"cmd\":\"quit\"}\n", lineno);
		exit(0);
	} else {
		fail(cmd, "unknown command");
	}
}

int main(int argc, char **argv)
{
	static char line[LINE_MAX_LEN];
	FILE *in = stdin;

	atexit(release_mws);
	setvbuf(stdout, NULL, _IOLBF, 0);
	if (argc > 1 && !(in = fopen(argv[1], "r"))) {
		perror(argv[1]);
		return 2;
	}
	if (argc <= 1) {
		struct termios t;
		interactive = 1;
		/* The host types on the serial console: do not echo it back. */
		if (tcgetattr(0, &t) == 0) {
			t.c_lflag &= ~(ECHO | ECHONL);
			tcsetattr(0, TCSANOW, &t);
		}
		printf("{\"event\":\"hello\"}\n");
	}
	while (fgets(line, sizeof line, in)) {
		char *part, *save;

		lineno++;
		if (interactive && setjmp(failed))
			continue;
		/*
		 * Commands on one line run back to back, with no round trip to
		 * the host between them: work requests a scenario posts at
		 * one instant reach the device together.
		 */
		for (part = strtok_r(line, ";", &save); part; part = strtok_r(NULL, ";", &save))
			run(part);
		if (interactive)
			printf("{\"event\":\"ok\",\"line\":%d}\n", lineno);
	}
	printf("{\"event\":\"done\"}\n");
	return 0;
}
