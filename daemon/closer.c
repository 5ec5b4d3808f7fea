/* SPDX-License-Identifier: MIT */
#include "closer.h"

#include <errno.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "log.h"

/* Threads pulling from one queue: a close that blocks (see closer.h) takes
 * one of them out until it returns; the others carry on with the rest. */
#define CLOSER_THREADS 4

struct closer {
	pthread_mutex_t lock;
	pthread_cond_t more;
	int *fds;           /* a ring of queued fds */
	uint32_t cap, head, len;
	int stop;
	_Atomic uint64_t backlog;
	pthread_t threads[CLOSER_THREADS];
	unsigned nthreads;
};

static void *closer_main(void *arg)
{
	struct closer *cl = arg;

	pthread_mutex_lock(&cl->lock);
	for (;;) {
		while (!cl->len && !cl->stop)
			pthread_cond_wait(&cl->more, &cl->lock);
		if (!cl->len)
			break;
		int fd = cl->fds[cl->head];
		cl->head = (cl->head + 1) % cl->cap;
		cl->len--;
		pthread_mutex_unlock(&cl->lock);
		close(fd); /* may block: that is why it is here */
		atomic_fetch_sub_explicit(&cl->backlog, 1, memory_order_relaxed);
		pthread_mutex_lock(&cl->lock);
	}
	pthread_mutex_unlock(&cl->lock);
	return NULL;
}

int closer_start(struct closer **out)
{
	struct closer *cl = calloc(1, sizeof(*cl));
	int rc;

	if (!cl)
		return -ENOMEM;
	pthread_mutex_init(&cl->lock, NULL);
	pthread_cond_init(&cl->more, NULL);
	for (; cl->nthreads < CLOSER_THREADS; cl->nthreads++) {
		rc = -pthread_create(&cl->threads[cl->nthreads], NULL, closer_main, cl);
		if (rc) {
			closer_stop(cl);
			return rc;
		}
		pthread_setname_np(cl->threads[cl->nthreads], "cuflagd-close");
	}
	*out = cl;
	return 0;
}

/* Make room for one more (called with the lock held). */
static int grow_locked(struct closer *cl)
{
	uint32_t cap = cl->cap ? cl->cap * 2 : 256;
	int *fds;

	if (cl->len < cl->cap)
		return 0;
	fds = malloc(sizeof(int) * cap);
	if (!fds)
		return -ENOMEM;
	for (uint32_t i = 0; i < cl->len; i++)
		fds[i] = cl->fds[(cl->head + i) % cl->cap];
	free(cl->fds);
	cl->fds = fds;
	cl->cap = cap;
	cl->head = 0;
	return 0;
}

void closer_close(struct closer *cl, int fd)
{
	int rc;

	if (fd < 0)
		return;
	pthread_mutex_lock(&cl->lock);
	rc = grow_locked(cl);
	if (!rc) {
		cl->fds[(cl->head + cl->len) % cl->cap] = fd;
		cl->len++;
		atomic_fetch_add_explicit(&cl->backlog, 1, memory_order_relaxed);
		pthread_cond_signal(&cl->more);
	}
	pthread_mutex_unlock(&cl->lock);
	if (rc) {
		log_err("closer: out of memory; closing fd %d on the main thread", fd);
		close(fd);
	}
}

void closer_close_fds(struct closer *cl, int *fds, unsigned n)
{
	for (unsigned i = 0; i < n; i++) {
		closer_close(cl, fds[i]);
		fds[i] = -1;
	}
}

uint64_t closer_backlog(struct closer *cl)
{
	return atomic_load_explicit(&cl->backlog, memory_order_relaxed);
}

void closer_stop(struct closer *cl)
{
	struct timespec until;
	unsigned joined = 0;

	if (!cl)
		return;
	pthread_mutex_lock(&cl->lock);
	cl->stop = 1;
	pthread_cond_broadcast(&cl->more);
	pthread_mutex_unlock(&cl->lock);
	/* The threads close what is queued, then exit. One blocked in a
	 * lingering close must not hold SIGTERM up for its linger time: after a
	 * second it is left behind, and the exit of the process ends it. */
	clock_gettime(CLOCK_REALTIME, &until);
	until.tv_sec += 1;
	for (unsigned i = 0; i < cl->nthreads; i++)
		if (pthread_timedjoin_np(cl->threads[i], NULL, &until) == 0)
			joined++;
	if (joined < cl->nthreads) {
		log_warn("closer: %u close(s) still blocked at exit; leaving them",
			 cl->nthreads - joined);
		return;
	}
	pthread_cond_destroy(&cl->more);
	pthread_mutex_destroy(&cl->lock);
	free(cl->fds);
	free(cl);
}
