/* SPDX-License-Identifier: MIT */
/* Arming: a slot's next value reserved and published to the scanner. */
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

/*
 * Wait for room in the arm queue, arm_lock held; 0 with it held, or an
 * error with it let go. The scanner drains the queue every pass: make sure
 * it is awake, then wait, yielding first and then sleeping so a busy node
 * leaves it the CPU. With no daemon the queue waits for the next one: resume,
 * up to the client's resume timeout (arms queued meanwhile are its first
 * work), with arm_lock let go for it, so that no resume runs under the lock
 * every arm of the client takes; the arm is written once there is room.
 */
static int wait_for_room(struct cuflag_client *c, uint32_t cap)
{
	for (unsigned k = 0; queue_full(c, cap); k++) {
		cuflag__wake_scanner(c);
		if ((k & 15) == 15 && cuflag__daemon_gone(c)) {
			unsigned gen = atomic_load(&c->conn_gen);
			int rc;

			pthread_mutex_unlock(&c->arm_lock);
			rc = cuflag__resume(c, gen, 1);
			/* As a request's: none came back within the resume
			 * timeout, unless no resume can mend it. */
			if (rc)
				return cuflag__resume_final(rc, CUFLAG_RESUME_BY_REQUEST) ? rc
											  : -ENOTCONN;
			pthread_mutex_lock(&c->arm_lock);
			continue;
		}
		if (k < 16) {
			sched_yield();
		} else {
			struct timespec ts = { 0, 20000 };
			nanosleep(&ts, NULL);
		}
	}
	return 0;
}

int cuflag__publish(struct cuflag_slot *s, uint32_t target)
{
	struct cuflag_client *c = s->c;
	uint32_t cap = c->layout.queue_cap;
	int rc;

	pthread_mutex_lock(&c->arm_lock);
	if ((rc = wait_for_room(c, cap)))
		return rc;
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
