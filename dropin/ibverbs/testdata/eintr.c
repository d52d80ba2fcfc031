/*
 * eintr: the library never interrupts the program's own system calls.
 *
 * With rdma-core's libibverbs nothing sends a signal to a program's
 * thread, so a program may treat poll(2) returning -1 as a timeout, as
 * cm6.c did. The drop-in library runs Go code on the program's thread
 * for every verb, and the Go runtime preempts a goroutine that runs too
 * long, or whose stack its collector must scan, with a signal to that
 * thread; one sent just before the verb returned lands in the program's
 * next system call instead, which fails with EINTR.
 *
 * The program makes and destroys a CQ (Go code that allocates, so the
 * collector runs often under GOGC=1) and then waits 1 ms in poll(2) on an
 * empty pipe, N times, and counts the polls that failed with EINTR.
 *
 * usage: eintr [N] ; prints "eintr: N polls, K interrupted" and exits 0
 * if K is 0, 1 otherwise, 2 if the verbs fail.
 */
#include <errno.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>
#include <infiniband/verbs.h>

int main(int argc, char **argv)
{
	int n = argc > 1 ? atoi(argv[1]) : 2000, interrupted = 0, fds[2];
	struct ibv_device **list = ibv_get_device_list(NULL);
	struct ibv_context *ctx;

	if (!list || !list[0]) {
		fprintf(stderr, "eintr: no device\n");
		return 2;
	}
	ctx = ibv_open_device(list[0]);
	if (!ctx || pipe(fds)) {
		perror("eintr: ibv_open_device or pipe");
		return 2;
	}
	for (int i = 0; i < n; i++) {
		struct ibv_cq *cq = ibv_create_cq(ctx, 64, NULL, NULL, 0);
		struct pollfd p = { .fd = fds[0], .events = POLLIN };

		if (!cq || ibv_destroy_cq(cq)) {
			perror("eintr: ibv_create_cq or ibv_destroy_cq");
			return 2;
		}
		if (poll(&p, 1, 1) < 0 && errno == EINTR)
			interrupted++;
	}
	printf("eintr: %d polls, %d interrupted\n", n, interrupted);
	ibv_close_device(ctx);
	ibv_free_device_list(list);
	return interrupted ? 1 : 0;
}
