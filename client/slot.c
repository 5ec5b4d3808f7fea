/* SPDX-License-Identifier: MIT */
/* Slots: acquire, release, arm, wait, consume. */
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


CUFLAG_EXPORT int cuflag_slot_fd(const cuflag_slot *s)
{
	if (!s)
		return -EINVAL;
	if (s->group)
		return -EOPNOTSUPP; /* its group's eventfd rings for it */
	return __atomic_load_n(&s->efd, __ATOMIC_ACQUIRE);
}

CUFLAG_EXPORT volatile uint32_t *cuflag_slot_flag(const cuflag_slot *s)
{
	return s ? s->flag : NULL;
}

CUFLAG_EXPORT int cuflag_slot_id(const cuflag_slot *s)
{
	return s ? (int)s->id : -EINVAL;
}

CUFLAG_EXPORT int cuflag_slot_set_data(cuflag_slot *s, void *data)
{
	if (!s)
		return -EINVAL;
	atomic_store_explicit(&s->data, data, memory_order_release);
	return 0;
}

CUFLAG_EXPORT void *cuflag_slot_data(const cuflag_slot *s)
{
	return s ? atomic_load_explicit(&((cuflag_slot *)s)->data, memory_order_acquire) : NULL;
}

/* Whether target lies in the slot's timeline as reserved so far: from its
 * starting value (or 2^31 behind the last reserved) up to the last reserved.
 * Any other value was never armed here: a wait for it would either never
 * end or answer from a timeline this slot never had. */
static int reserved(const struct cuflag_slot *s, uint32_t target)
{
	uint32_t next = atomic_load_explicit(&s->next, memory_order_relaxed);
	uint32_t first = atomic_load_explicit(&s->first, memory_order_relaxed);

	return (uint32_t)(next - target) <= (uint32_t)(next - first);
}

CUFLAG_EXPORT int cuflag_slot_complete(cuflag_slot *s, uint32_t value)
{
	if (s && s->imported)
		return -EPERM; /* its flag is the daemon's to write */
	if (!s || !reserved(s, value))
		return -EINVAL;
	/* What the device's posted write is: the work's results before the flag. */
	__atomic_store_n(s->flag, value, __ATOMIC_RELEASE);
	return 0;
}

void cuflag__forget_waits(struct cuflag_client *c)
{
	pthread_mutex_lock(&c->slots_lock);
	for (struct cuflag_slot *s = c->slots; s; s = s->next_slot) {
		if (atomic_exchange(&s->wait_ep_busy, 1))
			continue; /* a waiter holds it; it makes a fresh one next time */
		if (s->wait_ep >= 0)
			close(s->wait_ep);
		s->wait_ep = -1;
		atomic_store(&s->wait_ep_busy, 0);
	}
	pthread_mutex_unlock(&c->slots_lock);
}

void cuflag__slot_free(struct cuflag_slot *s)
{
	if (s->efd >= 0)
		close(s->efd);
	if (s->retired_efd >= 0)
		close(s->retired_efd);
	if (s->wait_ep >= 0)
		close(s->wait_ep);
	if (s->handle_fd >= 0)
		close(s->handle_fd);
	free(s->cuda);
	pthread_mutex_destroy(&s->lock);
	free(s);
}

void cuflag__slot_link(struct cuflag_client *c, struct cuflag_slot *s)
{
	pthread_mutex_lock(&c->slots_lock);
	c->by_id[s->id] = s;
	s->prev = NULL;
	s->next_slot = c->slots;
	if (c->slots)
		c->slots->prev = s;
	c->slots = s;
	pthread_mutex_unlock(&c->slots_lock);
}

static void slot_unlink_locked(struct cuflag_client *c, struct cuflag_slot *s)
{
	if (c->by_id[s->id] == s)
		c->by_id[s->id] = NULL;
	if (s->prev)
		s->prev->next_slot = s->next_slot;
	else
		c->slots = s->next_slot;
	if (s->next_slot)
		s->next_slot->prev = s->prev;
}

static void slot_unlink(struct cuflag_client *c, struct cuflag_slot *s)
{
	pthread_mutex_lock(&c->slots_lock);
	slot_unlink_locked(c, s);
	pthread_mutex_unlock(&c->slots_lock);
}

/* Tell the daemon to free ids (one batch). Never resumes: a daemon that went
 * away freed them, and a resume does not hand over slots no longer listed. */
static int free_ids_locked(struct cuflag_client *c, int sock, const uint32_t *ids, uint32_t n)
{
	struct cuflag_msg_free m = { .count = n };
	uint8_t reply[CUFLAG_MSG_MAX];
	struct cuflag_call call = {
		.type = CUFLAG_MSG_FREE, .body = &m,
		.blen = (uint32_t)(offsetof(struct cuflag_msg_free, ids) + n * sizeof(uint32_t)),
		.reply = reply,
	};

	memcpy(m.ids, ids, n * sizeof(uint32_t));
	return cuflag__request_on(c, sock, &call);
}

static int free_ids(struct cuflag_client *c, const uint32_t *ids, uint32_t n)
{
	int rc;

	pthread_mutex_lock(&c->req_lock);
	rc = free_ids_locked(c, c->sock, ids, n);
	pthread_mutex_unlock(&c->req_lock);
	return rc;
}

struct cuflag_slot *cuflag__slot_new(struct cuflag_client *c, const struct cuflag_slot_grant *g,
				     int efd)
{
	struct cuflag_slot *s = calloc(1, sizeof(*s));

	if (!s)
		return NULL;
	s->c = c;
	s->id = g->id;
	s->efd = efd;
	s->flag = c->flags + s->id;
	s->wait_ep = -1;
	s->retired_efd = -1;
	s->handle_fd = -1;
	pthread_mutex_init(&s->lock, NULL);
	atomic_store(&s->next, g->start);
	atomic_store(&s->first, g->start);
	atomic_store(&s->consumed, g->start);
	s->rung = g->start;
	return s;
}

/*
 * One ALLOC round trip for n (<= CUFLAG_BATCH_MAX) slots, on sock with
 * c->req_lock held (through cuflag__request_retry()). The slots are linked into the client's list before the
 * lock is let go: a resume (which holds it) hands the new daemon every slot
 * the old one granted.
 */
static int alloc_batch_locked(struct cuflag_client *c, int sock, struct cuflag_group *g,
			      unsigned n, struct cuflag_slot **out)
{
	struct cuflag_msg_alloc m = { .count = n, .group = g ? g->id + 1 : 0 };
	uint8_t reply[CUFLAG_MSG_MAX];
	struct cuflag_msg_alloc_reply r;
	int fds[CUFLAG_BATCH_MAX];
	uint32_t ids[CUFLAG_BATCH_MAX];
	unsigned nfds, i;
	struct cuflag_call call = { .type = CUFLAG_MSG_ALLOC, .body = &m, .blen = sizeof(m),
				    .reply = reply, .reply_fds = fds, .max_fds = CUFLAG_BATCH_MAX };
	int rc;

	rc = cuflag__request_on(c, sock, &call);
	nfds = call.reply_nfds;
	if (rc) {
		cuflag_close_fds(fds, nfds);
		return rc;
	}
	memset(&r, 0, sizeof(r));
	memcpy(&r, cuflag_call_body(&call), call.reply_len - sizeof(struct cuflag_msg_hdr));
	if (r.count != n || nfds != (g ? 0 : n))
		rc = -EBADMSG;
	for (i = 0; !rc && i < n; i++)
		if (r.grants[i].id >= c->layout.nslots)
			rc = -EBADMSG;
	for (i = 0; !rc && i < n; i++) {
		out[i] = cuflag__slot_new(c, &r.grants[i], g ? -1 : fds[i]);
		if (!out[i]) {
			rc = -ENOMEM;
		} else if (g) {
			out[i]->group = g;
		} else {
			fds[i] = -1;
		}
	}
	if (rc) {
		/* Give back what the daemon granted: all or nothing. */
		for (unsigned k = 0; k < i && out[k]; k++)
			cuflag__slot_free(out[k]);
		cuflag_close_fds(fds, nfds);
		for (unsigned k = 0; k < r.count && k < n; k++)
			ids[k] = r.grants[k].id;
		if (r.count == n)
			(void)free_ids_locked(c, sock, ids, n);
		return rc;
	}
	for (i = 0; i < n; i++)
		cuflag__slot_link(c, out[i]);
	return 0;
}

/* An ALLOC round trip's arguments, for cuflag__request_retry(). */
struct alloc_args {
	struct cuflag_group *g;
	unsigned n;
	struct cuflag_slot **out;
};

static int alloc_run(struct cuflag_client *c, int sock, void *arg)
{
	struct alloc_args *a = arg;

	return alloc_batch_locked(c, sock, a->g, a->n, a->out);
}

int cuflag__slots_acquire(struct cuflag_client *c, struct cuflag_group *g, unsigned n,
			  struct cuflag_slot **out)
{
	unsigned done = 0;
	int rc = 0;

	if (!c || !out || n == 0)
		return -EINVAL;
	if (cuflag__forked(c))
		return -ECHILD;
	while (done < n) {
		unsigned k = n - done > CUFLAG_BATCH_MAX ? CUFLAG_BATCH_MAX : n - done;
		struct alloc_args a = { .g = g, .n = k, .out = out + done };
		rc = cuflag__request_retry(c, alloc_run, &a);
		if (rc)
			break;
		done += k;
	}
	if (rc) {
		for (unsigned i = 0; i < done; i++) {
			cuflag_slot_release(out[i]);
			out[i] = NULL;
		}
		return rc;
	}
	return 0;
}

CUFLAG_EXPORT int cuflag_slots_acquire(cuflag_client *c, unsigned n, cuflag_slot **out)
{
	return cuflag__slots_acquire(c, NULL, n, out);
}

CUFLAG_EXPORT int cuflag_slot_acquire(cuflag_client *c, cuflag_slot **out)
{
	return cuflag__slots_acquire(c, NULL, 1, out);
}

CUFLAG_EXPORT void cuflag_slot_release(cuflag_slot *s)
{
	if (!s)
		return;
	if (cuflag__forked(s->c)) {
		/* The slot is the parent's: only this process's copies go. The lock
		 * may have been held by a thread that fork did not copy. */
		slot_unlink_locked(s->c, s);
		cuflag__slot_free(s);
		return;
	}
	slot_unlink(s->c, s);
	/* A daemon that is gone has freed it already: nothing to report (nor
	 * for an import no daemon took back). */
	if (!s->detached)
		(void)free_ids(s->c, &s->id, 1);
	cuflag__slot_free(s);
}

/* ---------------------------------------------------------------- */
/* Arming                                                            */
/* ---------------------------------------------------------------- */

void cuflag__wake_scanner(struct cuflag_client *c)
{
	uint64_t one = 1;

	/* Pairs with the scanner's park: store tail; fence; read state. */
	atomic_thread_fence(memory_order_seq_cst);
	if (atomic_load_explicit((_Atomic uint32_t *)&cuflag__dpage(c)->scanner_state,
				 memory_order_relaxed) == CUFLAG_SCANNER_PARKED) {
		/* A full counter is still readable: the wake is not lost. */
		ssize_t w = write(c->wake_fd, &one, sizeof(one));
		(void)w;
	}
}

/* Whether the arm queue has no room (under arm_lock). The head is read only
 * when the one last read says so: the daemon writes it every pass, so
 * reading it for each arm would move its line between CPUs each time, and
 * an old value only makes the queue look fuller than it is. */
static int queue_full(struct cuflag_client *c, uint32_t cap)
{
	if (c->tail_local - c->head_seen < cap)
		return 0;
	c->head_seen = atomic_load_explicit(c->head, memory_order_acquire);
	return c->tail_local - c->head_seen >= cap;
}

int cuflag__publish(struct cuflag_slot *s, uint32_t target)
{
	struct cuflag_client *c = s->c;
	uint32_t cap = c->layout.queue_cap;

	pthread_mutex_lock(&c->arm_lock);
	/* Full: the scanner drains every pass; make sure it is awake, then wait,
	 * yielding first and then sleeping so a busy node leaves it the CPU.
	 * With no daemon the queue waits for the next one: resume, up to the
	 * client's resume timeout (arms queued meanwhile are its first work). */
	for (unsigned k = 0; queue_full(c, cap); k++) {
		cuflag__wake_scanner(c);
		if ((k & 15) == 15 && cuflag__daemon_gone(c)) {
			int rc = cuflag__resume(c, atomic_load(&c->conn_gen), 1);
			if (rc) {
				pthread_mutex_unlock(&c->arm_lock);
				return rc == -ENOTCONN || rc == -ECONNREFUSED || rc == -ENOENT ||
						       rc == -ETIMEDOUT
					       ? -ENOTCONN
					       : rc;
			}
			continue;
		}
		if (k < 16) {
			sched_yield();
		} else {
			struct timespec ts = { 0, 20000 };
			nanosleep(&ts, NULL);
		}
	}
	struct cuflag_arm *e = &c->queue[c->tail_local & (cap - 1)];
	e->slot = s->id;
	e->target = target;
	c->tail_local++;
	/* Before the tail: the scanner that reads this tail reads this time
	 * or a later one, and learns durations from it (cuflag-proto.h). */
	atomic_store_explicit(c->arm_time, cuflag_now_ns(), memory_order_relaxed);
	atomic_store_explicit(c->tail, c->tail_local, memory_order_release);
	pthread_mutex_unlock(&c->arm_lock);
	cuflag__wake_scanner(c);
	return 0;
}

CUFLAG_EXPORT int cuflag_slot_arm(cuflag_slot *s, uint32_t *target)
{
	uint32_t t;
	int rc;

	if (!s || !target)
		return -EINVAL;
	if (cuflag__forked(s->c))
		return -ECHILD; /* one producer per arm queue: the parent */
	if (s->imported)
		return -EPERM; /* its exporter arms it */
	/* Reserved and published under the slot's lock: arms of one slot reach
	 * the daemon in the order of their values. */
	pthread_mutex_lock(&s->lock);
	t = atomic_load_explicit(&s->next, memory_order_relaxed) + 1;
	rc = cuflag__publish(s, t);
	if (rc == 0)
		cuflag__reserved(s, t);
	pthread_mutex_unlock(&s->lock);
	if (rc == 0)
		*target = t;
	return rc;
}

/* Values that may be reserved in one arm_many call. */
#define ARM_MANY_MAX (1u << 30)

/*
 * n values in one arm entry, of the last of them: the scanner keeps the
 * highest value armed and counts min(flag, highest) - signalled, so the n-1
 * values below it need no entry of their own, and a kernel storing them one
 * by one is counted at each store as if each had been armed.
 */
CUFLAG_EXPORT int cuflag_slot_arm_many(cuflag_slot *s, unsigned n, uint32_t *first)
{
	uint32_t next, last, rec, base;
	int rc;

	if (!s || !first || n == 0 || n > ARM_MANY_MAX)
		return -EINVAL;
	if (cuflag__forked(s->c))
		return -ECHILD;
	if (s->imported)
		return -EPERM;
	pthread_mutex_lock(&s->lock);
	next = atomic_load_explicit(&s->next, memory_order_relaxed);
	last = next + n;
	/* The daemon refuses an arm 2^31 or more past what it signalled (it
	 * could not tell it from a value behind): say so here instead of
	 * losing the arm. What it signalled is its record in the region, or
	 * what this slot counted, whichever is further on (a new slot's record
	 * may still be the previous owner's timeline). */
	rec = __atomic_load_n(&s->c->states[s->id].signalled, __ATOMIC_ACQUIRE);
	base = atomic_load(&s->consumed);
	if (cuflag_tl_after(rec, base))
		base = rec;
	if (last - base >= 0x80000000u) {
		pthread_mutex_unlock(&s->lock);
		return -EOVERFLOW;
	}
	rc = cuflag__publish(s, last);
	if (rc == 0)
		cuflag__reserved(s, last);
	pthread_mutex_unlock(&s->lock);
	if (rc == 0)
		*first = next + 1;
	return rc;
}

/* ---------------------------------------------------------------- */
/* Waiting                                                           */
/* ---------------------------------------------------------------- */

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
	if (!s->imported && !reserved(s, target))
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
