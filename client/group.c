/* SPDX-License-Identifier: MIT */
/*
 * Groups: many slots, one eventfd, one completion ring. The scanner appends
 * the id of each grouped slot it signals to the group's ring in our region
 * and rings the group's eventfd once per pass; a drain reads the ring and
 * counts each listed slot from the daemon's record (the same count as
 * cuflag_slot_consume(), so a completion is handed out once whoever asks).
 * When the ring was full the daemon counted an overflow instead: the drain
 * then looks at every slot of the group.
 */
#include <errno.h>
#include <stdlib.h>
#include <sys/eventfd.h>
#include <unistd.h>

#include "client-private.h"
#include "fd-util.h"

CUFLAG_EXPORT int cuflag_group_fd(const cuflag_group *g)
{
	return g ? g->efd : -EINVAL;
}

/* Whether a slot of g is still held (slots_lock held). */
static int group_held_locked(const struct cuflag_group *g)
{
	for (const struct cuflag_slot *s = g->c->slots; s; s = s->next_slot)
		if (s->group == g)
			return 1;
	return 0;
}

void cuflag__group_free(struct cuflag_group *g)
{
	if (!g)
		return;
	safe_close(g->efd);
	pthread_mutex_destroy(&g->lock);
	free(g);
}

/* A group object for the first free id (slots_lock held), or NULL. */
static struct cuflag_group *group_new(struct cuflag_client *c, int *err)
{
	struct cuflag_group *g;
	uint32_t id = 0;

	while (id < c->layout.ngroups && c->groups[id])
		id++;
	if (id == c->layout.ngroups) {
		*err = -ENOSPC;
		return NULL;
	}
	g = calloc(1, sizeof(*g));
	if (!g) {
		*err = -ENOMEM;
		return NULL;
	}
	g->c = c;
	g->id = id;
	g->ring = (volatile struct cuflag_group_ring *)(c->region + c->layout.groups_off +
							(size_t)id * c->layout.ring_size);
	/* Records of an earlier group of this id are none of ours. */
	g->head = __atomic_load_n(&g->ring->tail, __ATOMIC_ACQUIRE);
	__atomic_store_n(&g->ring->head, g->head, __ATOMIC_RELEASE);
	g->overflows_seen = __atomic_load_n(&g->ring->overflows, __ATOMIC_ACQUIRE);
	pthread_mutex_init(&g->lock, NULL);
	g->efd = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
	if (g->efd < 0) {
		*err = -errno;
		cuflag__group_free(g);
		return NULL;
	}
	return g;
}

/* Making a group: listed first (a resume makes every listed group again),
 * then announced; run again after a resume, which announced it already. */
struct create_args {
	struct cuflag_group *g;
	int runs;
};

static int create_run(struct cuflag_client *c, int sock, void *arg)
{
	struct create_args *a = arg;
	int rc = 0;

	if (a->runs++)
		return 0; /* the resume told the new daemon of it */
	pthread_mutex_lock(&c->slots_lock);
	a->g = group_new(c, &rc);
	if (a->g)
		c->groups[a->g->id] = a->g;
	pthread_mutex_unlock(&c->slots_lock);
	return a->g ? cuflag__group_announce(c, sock, a->g) : rc;
}

CUFLAG_EXPORT int cuflag_group_create(cuflag_client *c, cuflag_group **out)
{
	struct create_args a = { 0 };
	int rc;

	if (!c || !out)
		return -EINVAL;
	if (cuflag__forked(c))
		return -ECHILD;
	rc = cuflag__request_retry(c, create_run, &a);
	if (rc && a.g) {
		pthread_mutex_lock(&c->slots_lock);
		c->groups[a.g->id] = NULL;
		pthread_mutex_unlock(&c->slots_lock);
		cuflag__group_free(a.g);
		return rc;
	}
	if (!rc)
		*out = a.g;
	return rc;
}

CUFLAG_EXPORT int cuflag_group_destroy(cuflag_group *g)
{
	struct cuflag_msg_group m;
	uint8_t reply[CUFLAG_MSG_MAX];
	int rc;

	if (!g)
		return 0;
	m = (struct cuflag_msg_group){ .id = g->id };
	if (!cuflag__forked(g->c)) {
		struct cuflag_call call = { .type = CUFLAG_MSG_UNGROUP, .body = &m,
					    .blen = sizeof(m), .reply = reply };
		/* A group with slots held stays whole, for a destroy once they are
		 * released (the daemon refuses it as well). */
		pthread_mutex_lock(&g->c->req_lock);
		pthread_mutex_lock(&g->c->slots_lock);
		rc = group_held_locked(g) ? -EBUSY : 0;
		pthread_mutex_unlock(&g->c->slots_lock);
		/* A daemon that is gone let the group go with the connection. */
		if (!rc && cuflag__request_on(g->c, g->c->sock, &call) == -EBUSY)
			rc = -EBUSY;
		pthread_mutex_unlock(&g->c->req_lock);
		if (rc)
			return rc;
		pthread_mutex_lock(&g->c->slots_lock);
		g->c->groups[g->id] = NULL;
		pthread_mutex_unlock(&g->c->slots_lock);
	} else {
		g->c->groups[g->id] = NULL; /* the parent's; only our copy goes */
	}
	cuflag__group_free(g);
	return 0;
}

CUFLAG_EXPORT int cuflag_group_slot_acquire(cuflag_group *g, cuflag_slot **out)
{
	return g ? cuflag__slots_acquire(g->c, g, 1, out) : -EINVAL;
}

CUFLAG_EXPORT int cuflag_group_slots_acquire(cuflag_group *g, unsigned n, cuflag_slot **out)
{
	return g ? cuflag__slots_acquire(g->c, g, n, out) : -EINVAL;
}

/* Add s's new completions to out, if any; whether a record was filled. */
static int take_into(struct cuflag_slot *s, struct cuflag_completion *out)
{
	uint64_t n;

	if (!cuflag__slot_take(s, &n)) {
		/* An import whose exporter went: one record of none, so that
		 * the loop learns it (its consume says -EPIPE from now on). */
		if (!cuflag__slot_gone(s) || s->gone_told)
			return 0;
		s->gone_told = 1;
		n = 0;
	}
	*out = (struct cuflag_completion){ .slot = s, .completions = n };
	return 1;
}

/* Records from the ring, up to max (slots_lock held). */
static unsigned drain_ring(struct cuflag_group *g, struct cuflag_completion *out, unsigned max)
{
	struct cuflag_client *c = g->c;
	uint32_t cap = c->layout.ring_cap;
	uint32_t tail = __atomic_load_n(&g->ring->tail, __ATOMIC_ACQUIRE);
	unsigned n = 0;

	/* A tail more than the ring away is not the daemon's: look at all. */
	if (tail - g->head > cap) {
		g->head = tail;
		atomic_store(&g->rescan, 1);
	}
	for (; g->head != tail && n < max; g->head++) {
		uint32_t id = g->ring->slot[g->head & (cap - 1)];
		struct cuflag_slot *s = id < c->layout.nslots ? c->by_id[id] : NULL;
		if (s && s->group == g)
			n += take_into(s, &out[n]);
	}
	__atomic_store_n(&g->ring->head, g->head, __ATOMIC_RELEASE);
	return n;
}

/* Records from every slot of the group, up to max (slots_lock held);
 * whether all were looked at. */
static int drain_all(struct cuflag_group *g, struct cuflag_completion *out, unsigned max,
		     unsigned *n)
{
	for (struct cuflag_slot *s = g->c->slots; s; s = s->next_slot) {
		if (s->group != g)
			continue;
		if (*n == max)
			return 0;
		*n += take_into(s, &out[*n]);
	}
	return 1;
}

CUFLAG_EXPORT int cuflag_group_drain(cuflag_group *g, struct cuflag_completion *out,
				     unsigned max)
{
	struct cuflag_client *c;
	uint64_t v, one = 1;
	uint32_t ov;
	unsigned n;
	int more;

	if (!g || (!out && max))
		return -EINVAL;
	c = g->c;
	if (cuflag__forked(c))
		return -ECHILD;
	if (!max)
		return 0;
	pthread_mutex_lock(&g->lock);
	if (read(g->efd, &v, sizeof(v)) < 0 && errno != EAGAIN)
		(void)0; /* the records say what there is */
	ov = __atomic_load_n(&g->ring->overflows, __ATOMIC_ACQUIRE);
	if (ov != g->overflows_seen) {
		g->overflows_seen = ov;
		atomic_store(&g->rescan, 1);
	}
	pthread_mutex_lock(&c->slots_lock);
	n = drain_ring(g, out, max);
	if (atomic_load(&g->rescan) && drain_all(g, out, max, &n))
		atomic_store(&g->rescan, 0);
	more = g->head != __atomic_load_n(&g->ring->tail, __ATOMIC_ACQUIRE) ||
	       atomic_load(&g->rescan);
	pthread_mutex_unlock(&c->slots_lock);
	/* Records left for the next drain: keep the fd readable. */
	if (more && write(g->efd, &one, sizeof(one)) < 0)
		(void)0;
	pthread_mutex_unlock(&g->lock);
	/* Nothing: resume if the daemon is gone, as a consume does; a program
	 * that only polls group fds carries on too. */
	if (!n)
		cuflag__resume_if_gone(c);
	return (int)n;
}
