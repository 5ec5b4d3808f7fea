/* SPDX-License-Identifier: MIT */
#include "base/closer.h"

#include <errno.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "base/log.h"
#include "cuflag-proto.h"
#include "fdpass.h"

/* Threads pulling from one queue: a close that blocks (see closer.h) takes
 * one of them out until it returns; the others carry on with the rest. When
 * every one is busy and closes wait, another is started, up to the most. */
#define CLOSER_THREADS 4
#define CLOSER_THREADS_MAX 64
/* Messages taken off a client socket before it is closed (see disarm). */
#define DRAIN_MAX 256
/* Marks a queued fd as one of our connections, to be emptied before its
 * close (fds are far below it). */
#define DRAIN_BIT (1 << 30)

struct closer {
	pthread_mutex_t lock;
	pthread_cond_t more;
	int *fds;           /* a ring of queued fds */
	uint32_t cap, head, len;
	int stop;
	_Atomic uint64_t backlog;
	unsigned idle;      /* threads waiting for work */
	unsigned started;   /* threads that took their index */
	pthread_t threads[CLOSER_THREADS_MAX];
	_Atomic uint64_t busy_since[CLOSER_THREADS_MAX]; /* each one's close, or 0 */
	unsigned nthreads;
};

/* A close this long means a thread is held, not busy. */
#define STUCK_NS (100u * 1000000u)

static void disarm(int fd, int depth);

/* A socket's close must not linger: the peer's unsent data is dropped at
 * once (an abortive close) instead of holding this thread for the linger
 * time. Not a socket: nothing to do. */
static void no_linger(int fd)
{
	struct linger l = { .l_onoff = 1, .l_linger = 0 };
	(void)setsockopt(fd, SOL_SOCKET, SO_LINGER, &l, sizeof(l));
}

/* Take the messages still queued on a Unix socket off it, so that the fds
 * they carry are disarmed and closed here rather than released by the
 * socket's close (where a lingering one would block). */
static void drain_unix(int fd, int depth)
{
	int fds[CUFLAG_SCM_MAX_FD];
	char buf[CUFLAG_MSG_MAX];
	unsigned n;

	for (int k = 0; k < DRAIN_MAX; k++) {
		ssize_t r = cuflag_recv_msg_all(fd, buf, sizeof(buf), fds, &n, MSG_DONTWAIT);
		for (unsigned i = 0; i < n; i++)
			disarm(fds[i], depth + 1);
		if (r <= 0 && r != -EMSGSIZE && r != -EBADMSG && !n)
			break;
	}
}

/* Close fd so that it cannot block: sockets without linger. A connection
 * of ours (depth 0 with drain) is emptied first: what is queued on it the
 * client sent us. A Unix socket a client handed over is not: what is queued
 * on it may be someone else's to read (the client's own end of its
 * connection, say). */
static void disarm(int fd, int depth)
{
	struct stat st;

	if (fstat(fd, &st) == 0 && S_ISSOCK(st.st_mode)) {
		no_linger(fd);
		if (depth == 0 && (fd & DRAIN_BIT)) {
			fd &= ~DRAIN_BIT;
			drain_unix(fd, depth);
		}
	}
	close(fd & ~DRAIN_BIT);
}

static void *closer_main(void *arg)
{
	struct closer *cl = arg;
	unsigned me;

	pthread_mutex_lock(&cl->lock);
	me = cl->started++;
	for (;;) {
		cl->idle++;
		while (!cl->len && !cl->stop)
			pthread_cond_wait(&cl->more, &cl->lock);
		cl->idle--;
		if (!cl->len)
			break;
		int fd = cl->fds[cl->head];
		cl->head = (cl->head + 1) % cl->cap;
		cl->len--;
		pthread_mutex_unlock(&cl->lock);
		atomic_store(&cl->busy_since[me], cuflag_now_ns());
		disarm(fd, 0); /* may still block (a FUSE file): that is why it is here */
		atomic_store(&cl->busy_since[me], 0);
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

/* Whether every thread is held by one close for a while (lock held): busy
 * ones will be done soon, and more threads would only take CPU from the
 * scanner. */
static int all_stuck(struct closer *cl)
{
	uint64_t now = cuflag_now_ns();

	if (cl->idle || cl->started < cl->nthreads)
		return 0;
	for (unsigned i = 0; i < cl->started; i++) {
		uint64_t t = atomic_load(&cl->busy_since[i]);
		if (!t || now - t < STUCK_NS)
			return 0;
	}
	return 1;
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
		/* Every thread is held (by closes that block): one more. */
		if (all_stuck(cl) && cl->nthreads < CLOSER_THREADS_MAX &&
		    pthread_create(&cl->threads[cl->nthreads], NULL, closer_main, cl) == 0) {
			pthread_setname_np(cl->threads[cl->nthreads], "cuflagd-close");
			cl->nthreads++;
		}
	}
	pthread_mutex_unlock(&cl->lock);
	if (rc) {
		log_err("closer: out of memory; closing fd %d on the main thread", fd & ~DRAIN_BIT);
		close(fd & ~DRAIN_BIT);
	}
}

void closer_close_connection(struct closer *cl, int fd)
{
	if (fd >= 0)
		closer_close(cl, fd | DRAIN_BIT);
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
