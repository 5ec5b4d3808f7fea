/* SPDX-License-Identifier: MIT */
/* Slots: their life (acquire, release, what a slot says of itself). Arming
 * is in slot-arm.c, waiting and counting in slot-wait.c. */
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

/* From its starting value (or 2^31 behind the last reserved) up to the last
 * reserved: any other value was never armed here. */
int cuflag__slot_reserved(const struct cuflag_slot *s, uint32_t target)
{
	uint32_t next = atomic_load_explicit(&s->next, memory_order_relaxed);
	uint32_t first = atomic_load_explicit(&s->first, memory_order_relaxed);

	return (uint32_t)(next - target) <= (uint32_t)(next - first);
}

CUFLAG_EXPORT int cuflag_slot_complete(cuflag_slot *s, uint32_t value)
{
	if (s && s->imported)
		return -EPERM; /* its flag is the daemon's to write */
	if (!s || !cuflag__slot_reserved(s, value))
		return -EINVAL;
	/* What the device's posted write is: the work's results before the flag. */
	__atomic_store_n(s->flag, value, __ATOMIC_RELEASE);
	return 0;
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
