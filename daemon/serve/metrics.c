/* SPDX-License-Identifier: MIT */
#include "serve/metrics.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "base/config.h"
#include "policy/latency-hist.h"
#include "serve/answer.h"
#include "serve/server-state.h"
#include "serve/session-state.h"
#include "serve/stuck.h"

void metrics_session_init(struct session_metrics *m, int sock, pid_t pid)
{
	memset(m, 0, sizeof(*m));
	client_ident_read(&m->ident, sock, pid);
	m->rl = (struct cuflagd_ratelimit){ .interval_ms = 60000, .burst = 5 };
}

void metrics_session_free(struct session_metrics *m)
{
	free(m->stuck_logged);
	m->stuck_logged = NULL;
}

/* ---------------------------------------------------------------- */
/* Drops and cool-downs per user                                     */
/* ---------------------------------------------------------------- */

/* The entry of uid, made (in place of the one unused longest) if need be. */
static struct drop_table_entry *drop_entry(struct drop_table *t, uid_t uid, uint64_t now)
{
	unsigned oldest = 0;

	for (unsigned i = 0; i < DROP_USERS; i++) {
		if (t->e[i].last_ms && t->e[i].uid == uid) {
			t->e[i].last_ms = now;
			return &t->e[i];
		}
		if (t->e[i].last_ms < t->e[oldest].last_ms)
			oldest = i;
	}
	memset(&t->e[oldest], 0, sizeof(t->e[oldest]));
	t->e[oldest].uid = uid;
	t->e[oldest].last_ms = now;
	return &t->e[oldest];
}

static const struct drop_table_entry *drop_find(const struct drop_table *t, uid_t uid)
{
	for (unsigned i = 0; i < DROP_USERS; i++)
		if (t->e[i].last_ms && t->e[i].uid == uid)
			return &t->e[i];
	return NULL;
}

static enum cuflag_drop_reason drop_reason(const struct session *s, int err)
{
	int broken = s->scan ? atomic_load(&s->scan->broken) : BROKEN_NONE;

	if (broken)
		return broken_kind(broken)->drop;
	if (!s->scan && err == -ETIMEDOUT)
		return CUFLAG_DROP_HELLO_TIMEOUT;
	return CUFLAG_DROP_PROTOCOL;
}

void metrics_on_drop(struct server *srv, const struct session *s, int err)
{
	drop_entry(&srv->drops, s->uid, cuflag_now_ms())->drops[drop_reason(s, err)]++;
}

void metrics_on_cooldown(struct server *srv, const struct session *s)
{
	drop_entry(&srv->drops, s->uid, cuflag_now_ms())->cooldowns[drop_reason(s, 0)]++;
}

/* ---------------------------------------------------------------- */
/* Totals per user                                                   */
/* ---------------------------------------------------------------- */

static int by_uid(const void *a, const void *b)
{
	uid_t x = ((const struct user_total *)a)->uid, y = ((const struct user_total *)b)->uid;

	return x < y ? -1 : x > y;
}

/* uid's entry in the sorted array v of n, or NULL. */
static struct user_total *total_find(struct user_total *v, uint32_t n, uid_t uid)
{
	struct user_total key = { .uid = uid };

	/* bsearch must not be handed a NULL array, even of no entries. */
	return n ? bsearch(&key, v, n, sizeof(*v), by_uid) : NULL;
}

/* uid's entry in the sorted array v of n (room for one more), made in its
 * place if need be. */
static struct user_total *total_in(struct user_total *v, uint32_t *n, uid_t uid)
{
	struct user_total key = { .uid = uid };
	struct user_total *e = total_find(v, *n, uid);
	uint32_t at = 0;

	if (e)
		return e;
	while (at < *n && v[at].uid < uid)
		at++;
	memmove(&v[at + 1], &v[at], (size_t)(*n - at) * sizeof(*v));
	v[at] = key;
	(*n)++;
	return &v[at];
}

/* uid's totals, made if need be: those of the users past the table's room
 * (or past memory) are summed in others. */
static struct user_total *total_of(struct user_totals *t, uid_t uid)
{
	struct user_total *e = total_find(t->v, t->n, uid);

	if (e)
		return e;
	if (t->n == t->cap && t->cap < USER_TOTALS_MAX) {
		uint32_t cap = t->cap ? t->cap * 2 : 16;
		struct user_total *v = realloc(t->v, cap * sizeof(*v));
		if (v) {
			t->v = v;
			t->cap = cap;
		}
	}
	if (t->n == t->cap) {
		t->others.uid = CUFLAG_UID_OTHERS;
		return &t->others;
	}
	return total_in(t->v, &t->n, uid);
}

/* What a client counted so far. */
static void add_counts(struct user_total *e, const struct session *o)
{
	e->arms += atomic_load_explicit(&o->scan->n_armed, memory_order_relaxed);
	e->completions += atomic_load_explicit(&o->scan->n_done, memory_order_relaxed);
	e->clients++;
}

void metrics_on_gone(struct server *srv, struct session *s)
{
	if (s->met.folded)
		return;
	s->met.folded = 1;
	add_counts(total_of(&srv->totals, s->uid), s);
}

void metrics_totals_free(struct user_totals *t)
{
	free(t->v);
	memset(t, 0, sizeof(*t));
}

/* The walk of metrics_totals_view(). */
struct totals_view {
	const struct session *asker;
	struct user_total *v;
	uint32_t n;
	struct loop_work *w;
};

static void view_add(struct session *o, void *arg)
{
	struct totals_view *tv = arg;

	tv->w->sessions++;
	if (!o->scan || o->met.folded || !answer_sees(tv->asker, o))
		return;
	add_counts(total_in(tv->v, &tv->n, o->uid), o);
}

int metrics_totals_view(struct server *srv, const struct session *s, struct user_total **out,
			struct loop_work *w)
{
	const struct user_totals *t = &srv->totals;
	/* Room for every entry, every live user, and the others. */
	size_t room = (size_t)t->n + srv->users.count + 1;
	struct totals_view tv = { .asker = s, .v = calloc(room, sizeof(*tv.v)), .w = w };

	if (!tv.v)
		return -ENOMEM;
	for (uint32_t i = 0; i < t->n; i++)
		if (s->admin || t->v[i].uid == s->uid)
			tv.v[tv.n++] = t->v[i];
	registry_each(&srv->reg, REG_ALL, view_add, &tv);
	if (s->admin && t->others.clients)
		tv.v[tv.n++] = t->others;
	*out = tv.v;
	return (int)tv.n;
}

/* ---------------------------------------------------------------- */
/* Records of the METRICS answer                                     */
/* ---------------------------------------------------------------- */

/* The slots uid's clients hold. */
struct user_slots {
	uid_t uid;
	uint32_t slots;
};

static void sum_slots(struct session *o, void *arg)
{
	struct user_slots *v = arg;
	if (o->uid == v->uid)
		v->slots += o->slots.nlive;
}

void metrics_user_fill(struct cuflag_metrics_user *r, struct server *srv, uid_t uid,
		       const struct user *u, uint64_t now_ms)
{
	const struct drop_table_entry *e = drop_find(&srv->drops, uid);

	memset(r, 0, sizeof(*r));
	r->kind = CUFLAG_METRICS_USER;
	r->uid = uid;
	if (u) {
		struct user_slots v = { .uid = uid };
		registry_each(&srv->reg, REG_ATTACHED, sum_slots, &v);
		r->connections = u->held[USER_CONNS];
		r->regions = u->held[USER_REGIONS];
		r->slots = v.slots;
		r->pending = atomic_load_explicit(&u->scan.n_pending, memory_order_relaxed);
	}
	r->cooldown_left_ms = penalty_left_ms(&srv->penalties, uid, now_ms);
	if (e) {
		memcpy(r->drops, e->drops, sizeof(r->drops));
		memcpy(r->cooldowns, e->cooldowns, sizeof(r->cooldowns));
	}
}

uint32_t metrics_users_seen(struct server *srv, const struct session *s, uid_t *uids)
{
	uint32_t n = 0;

	if (!s->admin) {
		uids[n++] = s->uid;
		return n;
	}
	for (unsigned i = 0; i < USERS_BUCKETS; i++)
		for (struct user *u = srv->users.bucket[i]; u && n < DROP_USERS; u = u->chain_next)
			uids[n++] = u->uid;
	for (unsigned i = 0; i < DROP_USERS && n < DROP_USERS; i++) {
		const struct drop_table_entry *e = &srv->drops.e[i];
		if (e->last_ms && !user_find(&srv->users, e->uid))
			uids[n++] = e->uid;
	}
	return n;
}

void metrics_client_fill(struct cuflag_metrics_client *r, struct server *srv,
			 const struct session *o, struct lhist_snap *snap, struct loop_work *w)
{
	const struct client_ident *id = &o->met.ident;
	uint64_t now = cuflag_now_ns(), oldest;

	memset(r, 0, sizeof(*r));
	r->kind = CUFLAG_METRICS_CLIENT;
	r->client_id = o->id;
	r->pid = o->pid;
	r->uid = o->uid;
	r->gid = o->gid;
	r->slots = o->slots.nlive;
	for (uint32_t g = 0; g < o->slots.ngroups; g++) {
		r->grouped += o->slots.group_live[g];
		r->groups += o->slots.group_efd[g] >= 0;
	}
	r->in_flight = atomic_load_explicit(&o->scan->n_pending, memory_order_relaxed);
	r->age_ms = now / 1000000u - o->connected_ms;
	r->armed = atomic_load_explicit(&o->scan->n_armed, memory_order_relaxed);
	r->completions = atomic_load_explicit(&o->scan->n_done, memory_order_relaxed);
	r->wakes = atomic_load_explicit(&o->scan->n_wakes, memory_order_relaxed);
	if (!srv->cfg->no_metrics) {
		w->slots += o->slots.n;
		stuck_scan(o, now, srv->cfg->stuck_ms * 1000000u, &r->stuck, &oldest);
		r->oldest_wait_ms = oldest / 1000000u;
	}
	lhist_snapshot(&o->scan->done_hist, snap);
	r->p50_ns = lhist_quantile(snap, 0.5);
	r->p99_ns = lhist_quantile(snap, 0.99);
	r->sum_ns = snap->sum_ns;
	memcpy(r->buckets, snap->fixed, sizeof(r->buckets));
	memcpy(r->comm, id->comm, sizeof(r->comm));
	memcpy(r->unit, id->unit, sizeof(r->unit));
	memcpy(r->pod, id->pod, sizeof(r->pod));
	memcpy(r->container, id->container, sizeof(r->container));
	memcpy(r->cgroup, id->cgroup, sizeof(r->cgroup));
}
