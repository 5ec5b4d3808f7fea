/* SPDX-License-Identifier: MIT */
/*
 * Resuming with the daemon after it restarted, by itself.
 *
 * The client keeps everything the daemon serves it with: the region (made
 * by the client), the wake eventfd and every slot's eventfd. When a call
 * finds the daemon gone, it connects to the daemon that listens now on the
 * same socket, hands it the region (ATTACH, announcing how many slots follow)
 * and the slots with their eventfds (ADOPT), and puts the new connection in
 * the old one's fd number. The new daemon continues from the record kept in
 * the region (what was armed and signalled per slot), so completions that
 * landed meanwhile are signalled and arms queued meanwhile are taken. One
 * resume runs at a time; attempts are spaced while nobody listens.
 */
#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <sys/time.h>
#include <time.h>
#include <unistd.h>

#include "client-private.h"
#include "clock.h"
#include "fd-util.h"
#include "unix-socket.h"
#include "timeline.h"
#include "user-daemon.h"

/* How long an attempt made on the way of a wait or a consume waits for each
 * answer: they go on watching the flags rather than wait for a daemon. */
#define QUICK_REPLY_US 100000

/* Both timeouts of sock, in microseconds. */
static int set_timeouts(int sock, long us)
{
	struct timeval tv = { .tv_sec = us / 1000000, .tv_usec = us % 1000000 };

	if (setsockopt(sock, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv)) < 0 ||
	    setsockopt(sock, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof(tv)) < 0)
		return -errno;
	return 0;
}

/*
 * The rest of an attempt whose HELLO (request hello_id) was sent on sock:
 * its reply, ATTACH, ADOPT, then the new connection in the old one's fd
 * number (with the reply timeouts of any connection, blocking). req_lock
 * and slots_lock held; sock stays the caller's.
 */
static int resume_finish(struct cuflag_client *c, int sock, uint32_t hello_id)
{
	struct cuflag_msg_attach m = { .epoch = c->epoch };
	struct cuflag_msg_hello_reply r;
	struct cuflag_region_layout offered;
	const struct cuflag_daemon_page *dp = NULL, *old;
	struct retired_page *ret;
	uint8_t reply[CUFLAG_MSG_MAX];
	int give[2] = { c->region_fd, c->wake_fd }, fd = -1, flags, rc;
	size_t dp_size = 0;
	struct cuflag_call call = { .type = CUFLAG_MSG_ATTACH, .body = &m, .blen = sizeof(m),
				    .fds = give, .nfds = 2, .reply = reply, .reply_fds = &fd,
				    .max_fds = 1 };

	ret = malloc(sizeof(*ret));
	if (!ret)
		return -ENOMEM;
	rc = cuflag__hello_recv(sock, hello_id, &r, &dp, &dp_size);
	if (rc)
		goto out;
	cuflag_region_layout_from_reply(&offered, &r);
	if (!cuflag_region_layout_equal(&c->layout, &offered) || (int)r.slab != c->slab) {
		rc = -ESTALE;
		goto out;
	}
	for (struct cuflag_slot *s = c->slots; s; s = s->next_slot)
		m.slots += !s->imported;
	rc = cuflag__request_on(c, sock, &call);
	safe_close(fd);
	if (!rc)
		rc = cuflag__handover(c, sock);
	/* The connection's settings are the new fd number's after dup2. */
	if (!rc && (flags = fcntl(sock, F_GETFL)) >= 0 && fcntl(sock, F_SETFL, flags & ~O_NONBLOCK) < 0)
		rc = -errno;
	if (!rc)
		rc = set_timeouts(sock, CUFLAG_REPLY_TIMEOUT_S * 1000000L);
	if (rc)
		goto out;
	/* From here on the new daemon serves us, on the same fd number. */
	if (dup2(sock, c->sock) < 0) {
		rc = -errno;
		goto out;
	}
	old = cuflag__dpage(c);
	*ret = (struct retired_page){ .page = old, .size = c->dpage_size, .next = c->retired };
	c->retired = ret;
	ret = NULL;
	__atomic_store_n(&c->dpage, dp, __ATOMIC_RELEASE);
	c->dpage_size = dp_size;
	dp = NULL;
	__atomic_store_n(&c->epoch, r.epoch, __ATOMIC_RELAXED);
	cuflag__ring_unread(c);
out:
	free(ret);
	if (dp)
		munmap((void *)dp, dp_size);
	return rc;
}

int cuflag__resumable(const struct cuflag_client *c)
{
	return c->slab == CUFLAG_SLAB_MEMFD && c->region_fd >= 0;
}

/*
 * -ESTALE is final wherever it comes: the daemon that listens has another
 * layout or found the region emptied, and only connecting anew mends it.
 * The other two differ on purpose:
 * - -EPROTONOSUPPORT (no protocol version in common) ends the blocking wait
 *   and is what the event loop is told; a request says -ENOTCONN instead:
 *   to its caller no daemon it can speak to came back, and the requests
 *   document no -EPROTONOSUPPORT.
 * - -EOPNOTSUPP is cuflag__resume() refusing, before any attempt, a client
 *   that cannot resume: a request passes it on and the event loop is told.
 *   The blocking wait's attempts are made only for a client that can; from
 *   a daemon it could only be an ATTACH refused for --slab cuda-ipc, which
 *   the slab check before ATTACH turns into -ESTALE first, so the wait does
 *   not look for it.
 */
int cuflag__resume_final(int rc, enum cuflag_resume_by by)
{
	switch (rc) {
	case -ESTALE:
		return 1;
	case -EPROTONOSUPPORT:
		return by != CUFLAG_RESUME_BY_REQUEST;
	case -EOPNOTSUPP:
		return by != CUFLAG_RESUME_BY_WAIT;
	default:
		return 0;
	}
}

/* One attempt, with req_lock and slots_lock held. */
static int resume_once(struct cuflag_client *c, int quick)
{
	uint32_t id;
	int sock, rc;

	sock = cuflag__reach_again(c, 0);
	if (sock < 0)
		return sock;
	/* An attempt on the way of a wait or a consume: a socket that accepts
	 * while its daemon is still starting must not hold it. */
	rc = quick ? set_timeouts(sock, QUICK_REPLY_US) : 0;
	if (!rc)
		rc = cuflag__hello_send(c, sock, &id);
	if (!rc)
		rc = resume_finish(c, sock, id);
	safe_close(sock);
	return rc;
}

/* Watch fd's readiness in ep, edge-triggered: the loop is woken once per
 * change, and a late reply left in the connection does not wake it again
 * and again. Already watched is fine. */
int cuflag__epoll_watch(int ep, int fd)
{
	struct epoll_event ev = { .events = EPOLLIN | EPOLLRDHUP | EPOLLET, .data.fd = fd };

	return epoll_ctl(ep, EPOLL_CTL_ADD, fd, &ev) < 0 && errno != EEXIST ? -errno : 0;
}

void cuflag__dispatch_watch(struct cuflag_client *c)
{
	int ep = atomic_load(&c->dispatch_ep);

	/* The old connection left the epoll when dup2 closed it. A failure
	 * here is mended by the next dispatch, which sees the new generation. */
	if (ep >= 0)
		(void)cuflag__epoll_watch(ep, c->sock);
}

/* A resume was made (resume_lock held): the waits and the event loop's
 * watch follow the new connection. */
static void resumed(struct cuflag_client *c)
{
	atomic_fetch_add(&c->conn_gen, 1);
	cuflag__forget_waits(c); /* their epolls watch the old connection */
	cuflag__dispatch_watch(c);
}

static int resume_locked(struct cuflag_client *c, int quick)
{
	int rc;

	c->last_try_ns = cuflag_now_ns();
	if (!quick)
		pthread_mutex_lock(&c->req_lock);
	else if (pthread_mutex_trylock(&c->req_lock))
		return -EAGAIN; /* a request is in flight: its caller will resume */
	pthread_mutex_lock(&c->slots_lock);
	rc = resume_once(c, quick);
	pthread_mutex_unlock(&c->slots_lock);
	pthread_mutex_unlock(&c->req_lock);
	if (!rc)
		resumed(c);
	return rc;
}

int cuflag__attempt_start(struct cuflag_client *c, unsigned gen, uint64_t spacing_ns,
			  struct cuflag_attempt *a)
{
	int rc = -EAGAIN;

	if (!cuflag__resumable(c))
		return -EOPNOTSUPP;
	if (pthread_mutex_trylock(&c->resume_lock))
		return -EAGAIN; /* another thread is resuming */
	if (atomic_load(&c->conn_gen) != gen) {
		rc = 0; /* resumed meanwhile */
	} else if (cuflag_now_ns() - c->last_try_ns >= spacing_ns &&
		   !pthread_mutex_trylock(&c->req_lock)) {
		c->last_try_ns = cuflag_now_ns();
		a->gen = gen;
		a->sock = cuflag__reach_again(c, 1);
		rc = a->sock < 0 ? a->sock : cuflag__hello_send(c, a->sock, &a->id);
		if (rc)
			a->sock = safe_close(a->sock);
		else
			rc = -EINPROGRESS;
		pthread_mutex_unlock(&c->req_lock);
	}
	pthread_mutex_unlock(&c->resume_lock);
	return rc;
}

int cuflag__attempt_finish(struct cuflag_client *c, struct cuflag_attempt *a)
{
	int rc = -EAGAIN;

	if (pthread_mutex_trylock(&c->resume_lock))
		return -EAGAIN;
	if (atomic_load(&c->conn_gen) != a->gen) {
		rc = 0; /* another thread resumed meanwhile */
	} else if (!pthread_mutex_trylock(&c->req_lock)) {
		/* The daemon answered: what follows is quick, as an attempt on
		 * the way of a consume is. */
		int flags = fcntl(a->sock, F_GETFL);
		rc = flags < 0 || fcntl(a->sock, F_SETFL, flags & ~O_NONBLOCK) < 0 ? -errno
			: set_timeouts(a->sock, QUICK_REPLY_US);
		pthread_mutex_lock(&c->slots_lock);
		if (!rc)
			rc = resume_finish(c, a->sock, a->id);
		pthread_mutex_unlock(&c->slots_lock);
		pthread_mutex_unlock(&c->req_lock);
		if (!rc)
			resumed(c);
	}
	pthread_mutex_unlock(&c->resume_lock);
	if (rc != -EAGAIN)
		a->sock = safe_close(a->sock);
	return rc;
}

int cuflag__resume(struct cuflag_client *c, unsigned gen, int wait)
{
	int timeout = atomic_load(&c->resume_timeout_ms);
	uint64_t deadline = timeout < 0 ? UINT64_MAX : cuflag_now_ns() + (uint64_t)timeout * 1000000u;
	int rc;

	if (!cuflag__resumable(c))
		return -EOPNOTSUPP;
	for (;;) {
		/* Without wait, never behind another thread's attempt. */
		if (!wait && pthread_mutex_trylock(&c->resume_lock))
			return atomic_load(&c->conn_gen) != gen ? 0 : -ENOTCONN;
		if (wait)
			pthread_mutex_lock(&c->resume_lock);
		if (atomic_load(&c->conn_gen) != gen) {
			pthread_mutex_unlock(&c->resume_lock);
			return 0; /* another thread resumed meanwhile */
		}
		uint64_t now = cuflag_now_ns();
		if (now - c->last_try_ns >= RESUME_SPACING_NS)
			rc = resume_locked(c, !wait);
		else
			rc = -EAGAIN;
		pthread_mutex_unlock(&c->resume_lock);
		if (!rc)
			return 0;
		if (!wait || cuflag_now_ns() >= deadline)
			return rc == -EAGAIN ? -ENOTCONN : rc;
		/* Refused while nobody listens, or the daemon is starting: space
		 * the attempts; not a refusal no attempt mends. */
		if (cuflag__resume_final(rc, CUFLAG_RESUME_BY_WAIT))
			return rc;
		struct timespec ts = { 0, RESUME_SPACING_NS / 5 };
		nanosleep(&ts, NULL);
	}
}

int cuflag__request_retry(struct cuflag_client *c,
			  int (*run)(struct cuflag_client *c, int sock, void *arg), void *arg)
{
	for (int tries = 0;; tries++) {
		unsigned gen = atomic_load(&c->conn_gen);
		int rc;

		pthread_mutex_lock(&c->req_lock);
		rc = run(c, c->sock, arg);
		pthread_mutex_unlock(&c->req_lock);
		/* The daemon went away: carry on with the one that listens now. */
		if (!cuflag__gone_error(rc) || tries)
			return rc;
		rc = cuflag__resume(c, gen, 1);
		if (rc)
			/* None came back within the resume timeout, unless no
			 * resume can mend it. */
			return cuflag__resume_final(rc, CUFLAG_RESUME_BY_REQUEST) ? rc : -ENOTCONN;
	}
}

static int request_run(struct cuflag_client *c, int sock, void *call)
{
	return cuflag__request_on(c, sock, call);
}

int cuflag__request(struct cuflag_client *c, struct cuflag_call *call)
{
	return cuflag__request_retry(c, request_run, call);
}

CUFLAG_EXPORT int cuflag_reconnect(cuflag_client *c)
{
	int rc;

	if (!c)
		return -EINVAL;
	if (cuflag__forked(c))
		return -ECHILD;
	if (!cuflag__resumable(c))
		return -EOPNOTSUPP;
	pthread_mutex_lock(&c->resume_lock);
	rc = resume_locked(c, 0);
	pthread_mutex_unlock(&c->resume_lock);
	return rc;
}
