/*
 * chanclose: a thread blocks in rdma_get_cm_event on a channel nobody
 * will signal; the main thread destroys the channel after a while, then
 * exits. With librdmacm the blocked read(2) of the channel's fd never
 * returns (the thread holds the file), so the process ends with exit 0,
 * as rping does when its server has finished. The waiting thread must
 * not come back with an error: rping's CM thread exits the process with
 * its error code when it does.
 *
 * usage: chanclose [UDP address] ; prints "chanclose ok" and exits 0, or
 * says what the waiting thread got and exits 1.
 */
#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <rdma/rdma_cma.h>

static struct rdma_event_channel *ch;
static volatile int returned, err;

static void *waiter(void *arg)
{
	struct rdma_cm_event *ev;
	int ret;

	(void)arg;
	ret = rdma_get_cm_event(ch, &ev);
	err = ret ? errno : 0;
	returned = 1;
	return NULL;
}

int main(void)
{
	pthread_t t;

	ch = rdma_create_event_channel();
	if (!ch) {
		perror("rdma_create_event_channel");
		return 2;
	}
	if (pthread_create(&t, NULL, waiter, NULL)) {
		perror("pthread_create");
		return 2;
	}
	/* Long enough for the waiter to be blocked, and more. */
	usleep(200 * 1000);
	rdma_destroy_event_channel(ch);
	usleep(300 * 1000);
	if (returned) {
		printf("rdma_get_cm_event returned after its channel was destroyed: %s\n",
		       err ? strerror(err) : "an event");
		return 1;
	}
	printf("chanclose ok\n");
	return 0;
}
