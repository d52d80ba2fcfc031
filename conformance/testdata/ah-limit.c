/*
 * ah-limit: creates address handles on rxe0 until the device refuses one,
 * and prints how many it made and the errno, then whether one more can be
 * made once one is destroyed. TestDeviceAttrMatchesRxe builds it with the
 * host's cc and runs it in the guest. Argument: the guest's own IPv4
 * address (the AHs point at it, so no neighbour has to answer ARP).
 */
#include <arpa/inet.h>
#include <errno.h>
#include <infiniband/verbs.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define MAX_TRY 40000

int main(int argc, char **argv)
{
	struct ibv_device **list;
	struct ibv_context *ctx;
	struct ibv_pd *pd;
	struct ibv_ah_attr attr;
	struct ibv_ah **ahs;
	char dgid[64];
	int n, i, gid_index, err;

	if (argc != 3) {
		fprintf(stderr, "usage: ah-limit IPV4 GID_INDEX\n");
		return 2;
	}
	gid_index = atoi(argv[2]);
	list = ibv_get_device_list(&n);
	if (!list || n < 1 || !(ctx = ibv_open_device(list[0])) || !(pd = ibv_alloc_pd(ctx))) {
		perror("ah-limit: open");
		return 1;
	}
	memset(&attr, 0, sizeof attr);
	attr.is_global = 1;
	attr.port_num = 1;
	attr.grh.sgid_index = gid_index;
	attr.grh.hop_limit = 64;
	snprintf(dgid, sizeof dgid, "::ffff:%s", argv[1]);
	if (inet_pton(AF_INET6, dgid, attr.grh.dgid.raw) != 1) {
		fprintf(stderr, "ah-limit: bad address %s\n", argv[1]);
		return 2;
	}
	ahs = calloc(MAX_TRY, sizeof *ahs);
	for (i = 0; i < MAX_TRY; i++)
		if (!(ahs[i] = ibv_create_ah(pd, &attr)))
			break;
	err = errno;
	printf("AH-LIMIT created=%d errno=%s\n", i, i < MAX_TRY ? (err == EINVAL ? "EINVAL" : err == ENOMEM ? "ENOMEM" : strerror(err)) : "none");
	if (i > 0 && ibv_destroy_ah(ahs[0]) == 0)
		printf("AH-LIMIT again=%d\n", ibv_create_ah(pd, &attr) != NULL);
	fflush(stdout);
	return 0;
}
