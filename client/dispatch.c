/* SPDX-License-Identifier: MIT */
/*
 * Driving the client from an event loop, without a thread and without
 * blocking it (libwayland's prepare_read / dispatch_pending is the model).
 *
 * The loop waits on one fd the library names, an epoll instance that holds
 * the daemon connection (for its hang-up) and, while the daemon is away, the
 * connection of a resume attempt (for the new daemon's answer); and it calls
 * cuflag_client_dispatch() when that fd is readable or when the timeout the
 * library names runs out. Everything else stays here: noticing the hang-up,
 * spacing the attempts, a HELLO sent without waiting for the answer (a
 * socket unit accepts while its daemon is still starting: the loop waits for
 * the answer, not the call), the rest of the resume once the daemon answers.
 *
 * While the daemon is away no eventfd is signalled: each look at the flags
 * (after sleeps growing as a blocking wait's) rings the doorbell of every
 * slot whose flag moved past the daemon's record, so that a loop waiting on
 * slot and group eventfds wakes and finds the value landed; and slots
 * signalled from CUDA are probed for a device fault, whose doorbell rings
 * too. A doorbell counts nothing: counts come from the daemon's record.
 *
 * The connection's state (SERVED, GONE, RESUMING, LOST, CLOSED: the picture
 * is in client-private.h) is kept here, and conn_move() is the one place it
 * changes.
 */
#include <assert.h>
#include <errno.h>
#include <poll.h>
#include <sys/epoll.h>
#include <unistd.h>

#include "client-private.h"
#include "clock.h"
#include "fd-util.h"
#include "timeline.h"

/* The epoll the loop waits on, made on first need (dispatch_lock held). */
static int dispatch_ep(struct cuflag_client *c)
{
	int ep = atomic_load(&c->dispatch_ep), rc;

	if (ep >= 0)
		return ep;
	ep = epoll_create1(EPOLL_CLOEXEC);
	if (ep < 0)
		return -errno;
	c->dispatch_gen = atomic_load(&c->conn_gen);
	rc = cuflag__epoll_watch(ep, c->sock);
	if (rc) {
		close(ep);
		return rc;
	}
	atomic_store(&c->dispatch_ep, ep);
	return ep;
}

static void ring(int efd)
{
	uint64_t one = 1;

	if (write(efd, &one, sizeof(one)) < 0)
		(void)0; /* a full counter is readable anyway */
}

/* While the daemon is away: ring the doorbell of every slot whose flag
 * moved past the daemon's record since the last look. Whether any rang. */
static int ring_moved(struct cuflag_client *c)
{
	int rang = 0;

	if (pthread_mutex_trylock(&c->slots_lock))
		return 1; /* a resume holds the slots: look again soon */
	for (struct cuflag_slot *s = c->slots; s; s = s->next_slot) {
		uint32_t f = __atomic_load_n(s->flag, __ATOMIC_ACQUIRE);
		uint32_t rec = __atomic_load_n(&c->states[s->id].signalled, __ATOMIC_ACQUIRE);
		if (f != s->rung && cuflag_tl_after(f, rec)) {
			s->rung = f;
			ring(cuflag__doorbell(s));
			rang = 1;
		}
	}
	pthread_mutex_unlock(&c->slots_lock);
	return rang;
}

/* Probe the streams of slots signalled from CUDA with work outstanding: a
 * device fault stops their flags for good, and rings their doorbells so
 * that their waits learn it. */
static void probe_faults(struct cuflag_client *c)
{
	if (pthread_mutex_trylock(&c->slots_lock))
		return; /* a resume holds the slots: at the next probe */
	for (struct cuflag_slot *s = c->slots; s; s = s->next_slot) {
		uint32_t f = __atomic_load_n(s->flag, __ATOMIC_ACQUIRE);
		if (s->cuda && !atomic_load(&s->fault) &&
		    !cuflag_tl_reached(f, atomic_load_explicit(&s->next, memory_order_relaxed)) &&
		    c->cuda_probe(s))
			ring(cuflag__doorbell(s));
	}
	pthread_mutex_unlock(&c->slots_lock);
}

static int readable(int fd)
{
	struct pollfd p = { .fd = fd, .events = POLLIN };

	return poll(&p, 1, 0) > 0;
}

/* The moves of the connection's state, as pictured in client-private.h. */
static const unsigned conn_moves[] = {
	[CUFLAG_CONN_SERVED] = 1u << CUFLAG_CONN_GONE | 1u << CUFLAG_CONN_LOST |
			       1u << CUFLAG_CONN_CLOSED,
	[CUFLAG_CONN_GONE] = 1u << CUFLAG_CONN_RESUMING | 1u << CUFLAG_CONN_SERVED |
			     1u << CUFLAG_CONN_CLOSED,
	[CUFLAG_CONN_RESUMING] = 1u << CUFLAG_CONN_GONE | 1u << CUFLAG_CONN_SERVED |
				 1u << CUFLAG_CONN_CLOSED,
	[CUFLAG_CONN_LOST] = 1u << CUFLAG_CONN_CLOSED,
	[CUFLAG_CONN_CLOSED] = 0,
};

/* The one place the connection's state moves (dispatch_lock held, or the
 * client being freed), each move asserted to be one of conn_moves. */
static void conn_move(struct cuflag_client *c, enum cuflag_conn_state to)
{
	int legal = (unsigned)c->conn_state < sizeof(conn_moves) / sizeof(conn_moves[0]) &&
		    conn_moves[c->conn_state] & 1u << to;

	assert(legal);
	(void)legal;
	c->conn_state = to;
}

/* An attempt failed: what its error says about the daemon that listens
 * spaces the next. */
static void attempt_failed(struct cuflag_client *c, int rc, uint64_t now)
{
	if (cuflag__resume_final(rc, CUFLAG_RESUME_BY_LOOP))
		c->refusal = rc;
	c->try_ns = now + (c->refusal ? RESUME_REFUSED_NS : RESUME_SPACING_NS);
}

/* RESUMING: finish the attempt once the daemon answered, or give it up
 * after a reply timeout. A resume (here or by another thread) is left to
 * the generation check that follows. */
static void step_resuming(struct cuflag_client *c, uint64_t now)
{
	struct cuflag_attempt *a = &c->attempt;
	int rc;

	if (readable(a->sock))
		rc = cuflag__attempt_finish(c, a);
	else if (now - a->sent_ns < CUFLAG_REPLY_TIMEOUT_S * 1000000000ull)
		return;
	else {
		a->sock = safe_close(a->sock); /* the daemon did not answer */
		rc = -ETIMEDOUT;
	}
	if (rc && rc != -EAGAIN) {
		conn_move(c, CUFLAG_CONN_GONE);
		attempt_failed(c, rc, now);
	}
}

/* GONE: start an attempt when the spacing allows. */
static void step_gone(struct cuflag_client *c, int ep, uint64_t now)
{
	struct cuflag_attempt *a = &c->attempt;
	int rc;

	if (now < c->try_ns)
		return;
	rc = cuflag__attempt_start(c, c->dispatch_gen, RESUME_SPACING_NS, a);
	if (rc == -EINPROGRESS) {
		conn_move(c, CUFLAG_CONN_RESUMING);
		a->sent_ns = now;
		if ((rc = cuflag__epoll_watch(ep, a->sock))) /* then the timeout finds the answer */
			c->try_ns = now + RESUME_SPACING_NS;
	} else if (rc && rc != -EAGAIN) {
		attempt_failed(c, rc, now);
	} else if (rc == -EAGAIN) {
		c->try_ns = now + RESUME_SPACING_NS / 5; /* another thread's turn */
	}
}

/* SERVED: whether a daemon still serves; if it hung up, the state and the
 * clocks of a connection without one. */
static int step_served(struct cuflag_client *c, uint64_t now)
{
	if (!cuflag__daemon_gone(c))
		return 1;
	conn_move(c, cuflag__resumable(c) ? CUFLAG_CONN_GONE : CUFLAG_CONN_LOST);
	c->gone_ns = now;
	c->try_ns = now;
	c->look_ns = now;
	c->look_us = GONE_SLEEP_FIRST_US;
	return 0;
}

/* Without a daemon: look at the flags, after sleeps that grow while none
 * moved. */
static void look(struct cuflag_client *c, uint64_t now)
{
	if (now < c->look_ns)
		return;
	if (ring_moved(c))
		c->look_us = GONE_SLEEP_FIRST_US;
	else if (c->look_us < GONE_SLEEP_MAX_US)
		c->look_us *= 2;
	c->look_ns = now + c->look_us * 1000ull;
}

/* One dispatch (dispatch_lock held): 0 while a daemon serves, else why not. */
static int step(struct cuflag_client *c)
{
	struct epoll_event ev[4];
	uint64_t now = cuflag_now_ns();
	int ep = dispatch_ep(c), timeout;

	if (ep < 0)
		return ep;
	assert(c->conn_state != CUFLAG_CONN_CLOSED);
	/* Take the edges: the fd stays quiet until the next change. */
	while (epoll_wait(ep, ev, 4, 0) == 4)
		;
	if (c->conn_state == CUFLAG_CONN_RESUMING)
		step_resuming(c, now);
	if (atomic_load(&c->conn_gen) != c->dispatch_gen) {
		/* Resumed, here or by another thread's call. */
		c->dispatch_gen = atomic_load(&c->conn_gen);
		c->attempt.sock = safe_close(c->attempt.sock);
		c->refusal = 0;
		if (c->conn_state != CUFLAG_CONN_SERVED)
			conn_move(c, CUFLAG_CONN_SERVED);
		cuflag__dispatch_watch(c);
	}
	/* Once the client signalled from CUDA, as often as a blocking wait
	 * probes: the loop does not say which slots it awaits. */
	if (c->cuda_probe && now >= c->probe_ns) {
		probe_faults(c);
		c->probe_ns = now + FAULT_PROBE_MS * 1000000ull;
	}
	if (c->conn_state == CUFLAG_CONN_SERVED && step_served(c, now))
		return 0;
	look(c, now);
	if (c->conn_state == CUFLAG_CONN_LOST)
		return -EOPNOTSUPP; /* its flags died with the daemon */
	if (c->conn_state == CUFLAG_CONN_GONE)
		step_gone(c, ep, now);
	if (atomic_load(&c->conn_gen) != c->dispatch_gen)
		return step(c); /* resumed just now */
	if (c->refusal)
		return c->refusal;
	timeout = atomic_load(&c->resume_timeout_ms);
	if (timeout >= 0 && now - c->gone_ns >= (uint64_t)timeout * 1000000u)
		return -ENOTCONN;
	return -EAGAIN;
}

CUFLAG_EXPORT int cuflag_client_dispatch_fd(cuflag_client *c)
{
	int ep;

	if (!c)
		return -EINVAL;
	if (cuflag__forked(c))
		return -ECHILD; /* the epoll watches the parent's connection */
	pthread_mutex_lock(&c->dispatch_lock);
	ep = dispatch_ep(c);
	pthread_mutex_unlock(&c->dispatch_lock);
	return ep;
}

CUFLAG_EXPORT int cuflag_client_dispatch(cuflag_client *c)
{
	int rc;

	if (!c)
		return -EINVAL;
	if (cuflag__forked(c))
		return -ECHILD;
	pthread_mutex_lock(&c->dispatch_lock);
	rc = step(c);
	pthread_mutex_unlock(&c->dispatch_lock);
	return rc;
}

/* Now until at, in whole milliseconds rounded up (0 when past). */
static int ms_until(uint64_t at, uint64_t now)
{
	uint64_t ms = at > now ? (at - now + 999999u) / 1000000u : 0;

	return ms > INT32_MAX ? INT32_MAX : (int)ms;
}

CUFLAG_EXPORT int cuflag_client_dispatch_timeout(cuflag_client *c, int *timeout_ms)
{
	uint64_t at = UINT64_MAX;

	if (!c || !timeout_ms)
		return -EINVAL;
	if (cuflag__forked(c))
		return -ECHILD;
	pthread_mutex_lock(&c->dispatch_lock);
	if (c->cuda_probe)
		at = c->probe_ns;
	if (c->conn_state != CUFLAG_CONN_SERVED) {
		at = c->look_ns < at ? c->look_ns : at;
		if (c->conn_state == CUFLAG_CONN_RESUMING) {
			uint64_t give_up = c->attempt.sent_ns + CUFLAG_REPLY_TIMEOUT_S * 1000000000ull;
			at = give_up < at ? give_up : at;
		} else if (c->try_ns < at) {
			at = c->try_ns;
		}
	}
	pthread_mutex_unlock(&c->dispatch_lock);
	*timeout_ms = at == UINT64_MAX ? -1 : ms_until(at, cuflag_now_ns());
	return 0;
}

void cuflag__resume_if_gone(struct cuflag_client *c)
{
	if (!cuflag__daemon_gone(c))
		return;
	/* Driven by an event loop: one step of its attempt, never a wait. */
	if (atomic_load(&c->dispatch_ep) >= 0) {
		if (!pthread_mutex_trylock(&c->dispatch_lock)) {
			(void)step(c);
			pthread_mutex_unlock(&c->dispatch_lock);
		}
		return;
	}
	(void)cuflag__resume(c, atomic_load(&c->conn_gen), 0);
}

void cuflag__dispatch_free(struct cuflag_client *c)
{
	int ep = atomic_load(&c->dispatch_ep);

	if (ep >= 0)
		close(ep);
	c->attempt.sock = safe_close(c->attempt.sock);
	conn_move(c, CUFLAG_CONN_CLOSED);
	pthread_mutex_destroy(&c->dispatch_lock);
}
