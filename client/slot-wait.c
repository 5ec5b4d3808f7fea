/* SPDX-License-Identifier: MIT */
/* Waiting for a slot's value, and counting its completions. */
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <sched.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <time.h>
#include <unistd.h>

#include "client-private.h"
#include "clock.h"
#include "fdpass.h"
#include "cpu-relax.h"
#include "timeline.h"

static int reached(const struct cuflag_slot *s, uint32_t target)
{
	return cuflag_tl_reached(__atomic_load_n(s->flag, __ATOMIC_ACQUIRE), target);
}

/*
 * An epoll instance watching the slot's eventfd edge-triggered: it reports
 * every new signal without anyone reading the counter. EPOLLOUT is asked for
 * too, on purpose: epoll re-checks readiness when it hands out an event, and
 * a consumer that drained the counter in between would make a POLLIN-only
 * edge vanish; an eventfd is always writable, so with EPOLLOUT every write
 * (and every read) reaches the waiter, which then looks at the flag.
 * The slot caches one instance; a second concurrent waiter makes its own.
 */
static int wait_ep_get(struct cuflag_slot *s, int *cached, uint32_t *gen)
{
	struct epoll_event ev = { .events = EPOLLIN | EPOLLOUT | EPOLLET };
	int ep;

	/* Read before s->efd: a bind in between shows as a changed generation. */
	*gen = atomic_load(&s->efd_gen);
	*cached = 0;
	if (!atomic_exchange(&s->wait_ep_busy, 1)) {
		*cached = 1;
		if (s->wait_ep >= 0 && s->wait_ep_gen == *gen)
			return s->wait_ep;
		if (s->wait_ep >= 0) /* made for an eventfd that was replaced */
			close(s->wait_ep);
		s->wait_ep = -1;
	}
	ep = epoll_create1(EPOLL_CLOEXEC);
	if (ep < 0)
		goto fail;
	ev.data.u32 = 0;
	if (epoll_ctl(ep, EPOLL_CTL_ADD, cuflag__doorbell(s), &ev) < 0) {
		close(ep);
		goto fail;
	}
	/* The daemon hanging up wakes us too (level-triggered, once handled). */
	ev.events = EPOLLRDHUP;
	ev.data.u32 = 1;
	if (epoll_ctl(ep, EPOLL_CTL_ADD, s->c->sock, &ev) < 0) {
		close(ep);
		goto fail;
	}
	if (*cached) {
		s->wait_ep = ep;
		s->wait_ep_gen = *gen;
	}
	return ep;
fail:
	if (*cached)
		atomic_store(&s->wait_ep_busy, 0);
	return -errno;
}

static void wait_ep_put(struct cuflag_slot *s, int ep, int cached)
{
	if (cached)
		atomic_store(&s->wait_ep_busy, 0);
	else
		close(ep);
}

/* Spin on the flag until spin_end (ns); whether the target was reached. */
static int spin_until(const struct cuflag_slot *s, uint32_t target, uint64_t spin_end)
{
	unsigned k = 0;

	while (!reached(s, target)) {
		cuflag_cpu_relax();
		if ((++k & 15) == 0 && cuflag_now_ns() >= spin_end)
			return reached(s, target);
	}
	return 1;
}

/* A waiter's view of the slot's eventfd and of the daemon connection. */
struct waiter {
	struct cuflag_slot *s;
	int ep, cached;
	uint32_t gen;       /* the slot's eventfd generation ep watches */
	unsigned conn_gen;  /* the client's connection generation then */
	int daemon_gone;
	unsigned backoff_us;
};

/* (Re)make the epoll for the slot's current eventfd and connection. */
static int waiter_watch(struct waiter *w)
{
	if (w->ep >= 0)
		wait_ep_put(w->s, w->ep, w->cached);
	w->conn_gen = atomic_load(&w->s->c->conn_gen);
	w->ep = wait_ep_get(w->s, &w->cached, &w->gen);
	w->daemon_gone = 0;
	w->backoff_us = GONE_SLEEP_FIRST_US;
	return w->ep < 0 ? w->ep : 0;
}

/*
 * With no daemon: resume if one listens again (or another thread did), and
 * go back to sleeping on the eventfd; else watch the flag with a growing
 * sleep. 0, or the error of making the epoll.
 */
static int waiter_without_daemon(struct waiter *w)
{
	if (!cuflag__resume(w->s->c, w->conn_gen, 0) ||
	    atomic_load(&w->s->c->conn_gen) != w->conn_gen)
		return waiter_watch(w);
	struct timespec ts = { 0, (long)w->backoff_us * 1000 };
	nanosleep(&ts, NULL);
	if (w->backoff_us < GONE_SLEEP_MAX_US)
		w->backoff_us *= 2;
	return 0;
}

/* Sleep on the eventfd up to ms: 0, or the error that ends the wait. */
static int waiter_sleep(struct waiter *w, int ms)
{
	struct epoll_event ev[2];
	int n = epoll_wait(w->ep, ev, 2, ms);

	if (n < 0 && errno != EINTR)
		return -errno;
	for (int i = 0; i < n; i++)
		if (ev[i].data.u32 == 1)
			w->daemon_gone = 1;
	/* The slot's eventfd was replaced: watch the new one. */
	if (atomic_load(&w->s->efd_gen) != w->gen) {
		int rc = waiter_watch(w);
		if (rc)
			return rc;
	}
	if (n == 0 && w->s->cuda && w->s->c->cuda_probe)
		return w->s->c->cuda_probe(w->s);
	return 0;
}

CUFLAG_EXPORT int cuflag_slot_wait_spin(cuflag_slot *s, uint32_t target, unsigned spin_us,
					int timeout_ms)
{
	struct waiter w = { .s = s, .ep = -1 };
	uint64_t start, deadline = UINT64_MAX;
	int rc;

	if (!s)
		return -EINVAL;
	if (cuflag__forked(s->c))
		return -ECHILD; /* its epoll and eventfd are the parent's too */
	/* An imported slot's values are its exporter's, reserved there. */
	if (!s->imported && !cuflag__slot_reserved(s, target))
		return -EINVAL;
	if (reached(s, target))
		return 0;
	if (cuflag__slot_gone(s))
		return -EPIPE;
	if (atomic_load_explicit(&s->fault, memory_order_relaxed))
		return atomic_load(&s->fault);
	if (timeout_ms == 0)
		return -ETIMEDOUT;
	start = cuflag_now_ns();
	if (timeout_ms > 0)
		deadline = start + (uint64_t)timeout_ms * 1000000u;
	if (spin_us && spin_until(s, target, start + (uint64_t)spin_us * 1000u))
		return 0;
	if ((rc = waiter_watch(&w)))
		return rc;
	for (;;) {
		uint64_t now;
		int ms;

		/* Checked after the epoll is armed: a signal in between is an edge. */
		if (reached(s, target)) {
			rc = 0;
			break;
		}
		if (cuflag__slot_gone(s)) {
			rc = -EPIPE;
			break;
		}
		if ((rc = atomic_load_explicit(&s->fault, memory_order_relaxed)))
			break;
		now = cuflag_now_ns();
		if (now >= deadline) {
			rc = -ETIMEDOUT;
			break;
		}
		ms = deadline == UINT64_MAX ? -1 : (int)((deadline - now + 999999u) / 1000000u);
		if (s->cuda && (ms < 0 || ms > FAULT_PROBE_MS))
			ms = FAULT_PROBE_MS; /* the CUDA binding probes its streams for faults */
		rc = w.daemon_gone ? waiter_without_daemon(&w) : waiter_sleep(&w, ms);
		if (rc || w.ep < 0)
			break;
	}
	if (w.ep >= 0)
		wait_ep_put(s, w.ep, w.cached);
	return rc;
}

CUFLAG_EXPORT int cuflag_slot_wait(cuflag_slot *s, uint32_t target, int timeout_ms)
{
	return cuflag_slot_wait_spin(s, target, 0, timeout_ms);
}

/*
 * The eventfd is the doorbell; the count is the daemon's record of what it
 * signalled, kept in the region and written before the doorbell rings. So a
 * daemon killed between the two, and its successor signalling from the
 * record, make no completion count twice; and a repeated doorbell counts
 * nothing.
 */
int cuflag__slot_take(struct cuflag_slot *s, uint64_t *n)
{
	uint32_t rec = __atomic_load_n(&s->c->states[s->id].signalled, __ATOMIC_ACQUIRE);
	uint32_t seen = atomic_load(&s->consumed);

	do {
		/* A record behind what was counted is a slot's earlier timeline,
		 * before the daemon has recorded the new start: nothing yet. */
		if (!cuflag_tl_after(rec, seen))
			return 0;
	} while (!atomic_compare_exchange_weak(&s->consumed, &seen, rec));
	*n = (uint32_t)(rec - seen);
	return 1;
}

CUFLAG_EXPORT int cuflag_slot_consume(cuflag_slot *s, uint64_t *completions)
{
	uint64_t v;

	if (!s || !completions)
		return -EINVAL;
	if (cuflag__forked(s->c))
		return -ECHILD;
	/* The doorbell; a group's is left to its drain. */
	if (!s->group && read(__atomic_load_n(&s->efd, __ATOMIC_ACQUIRE), &v, sizeof(v)) < 0 &&
	    errno != EAGAIN)
		return -errno;
	if (cuflag__slot_take(s, completions))
		return 0;
	if (cuflag__slot_gone(s))
		return -EPIPE;
	cuflag__resume_if_gone(s->c);
	return -EAGAIN;
}

CUFLAG_EXPORT int cuflag_slot_bind_eventfd(cuflag_slot *s, int efd)
{
	struct cuflag_msg_bind m = { .id = s ? s->id : 0 };
	uint8_t reply[CUFLAG_MSG_MAX];
	struct cuflag_call call = { .type = CUFLAG_MSG_BIND, .body = &m, .blen = sizeof(m),
				    .fds = &efd, .nfds = 1, .reply = reply };
	int mine, rc, old;

	if (!s || efd < 0)
		return -EINVAL;
	if (cuflag__forked(s->c))
		return -ECHILD;
	if (s->imported)
		return -EPERM;
	if (s->group)
		return -EOPNOTSUPP; /* a group's slots share its eventfd */
	mine = fcntl(efd, F_DUPFD_CLOEXEC, 0);
	if (mine < 0)
		return -errno;
	rc = cuflag__request(s->c, &call);
	if (rc) {
		close(mine);
		return rc;
	}
	/* Waiters watch the old fd: a new generation makes them move to the
	 * new one, and a write to the old one wakes those asleep right now
	 * (nobody counts on the old one any more). The old one stays open until
	 * the next bind: closed, it would leave their epoll sets with its
	 * pending wake, and a waiter about to sleep would miss it. */
	old = s->efd;
	/* The daemon has switched (it answers only then): completions it
	 * signalled on the old eventfd and nobody consumed move to the new one. */
	uint64_t left = 0, one = 1;
	if (read(old, &left, sizeof(left)) == sizeof(left) && left &&
	    write(mine, &left, sizeof(left)) != sizeof(left))
		(void)0; /* a full counter already wakes whoever polls it */
	__atomic_store_n(&s->efd, mine, __ATOMIC_RELEASE);
	atomic_fetch_add(&s->efd_gen, 1);
	if (write(old, &one, sizeof(one)) < 0)
		(void)0; /* a full counter wakes them as well */
	if (s->retired_efd >= 0)
		close(s->retired_efd);
	s->retired_efd = old;
	return 0;
}
