/* SPDX-License-Identifier: MIT */
#include "metrics.h"

#include <dirent.h>
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <time.h>

#include "answer.h"
#include "latency-hist.h"
#include "request.h"
#include "server.h"
#include "session.h"
#include "stuck.h"

_Static_assert(LHIST_NBOUNDS == CUFLAG_HIST_BOUNDS, "the wire's bounds are the histogram's");
_Static_assert(CUFLAG_STUCK_MAX <= 64, "a STUCK answer fits a socket's buffer");

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

/* The totals an asker may see, as of now: the table's (a user: its own
 * entry) and the counts of the clients not added to it yet, live or
 * dropped and not let go by the scanner (so that no total ever goes back). */
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

/* Into *out (malloc'ed, sorted by uid, the others' last): their count, or
 * -ENOMEM. */
static int totals_view(struct server *srv, const struct session *s, struct user_total **out,
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
/* METRICS                                                           */
/* ---------------------------------------------------------------- */

static uint32_t fds_open(void)
{
	struct stat st;
	DIR *d;
	uint32_t n = 0;

	/* Since Linux 6.2 the directory's size is its count of fds: no entry
	 * of it is looked up. Reading it instead leaves a cached entry per fd
	 * charged to the daemon's memory cgroup (about 900 bytes each, after
	 * the fd is closed: 13.7 MB for 15 000 fds, until reclaimed). */
	if (stat("/proc/self/fd", &st) == 0 && st.st_size > 0)
		return (uint32_t)st.st_size;
	d = opendir("/proc/self/fd");
	if (!d)
		return 0;
	for (struct dirent *e; (e = readdir(d));)
		if (e->d_name[0] != '.')
			n++;
	closedir(d);
	return n ? n - 1 : 0; /* not the directory's own fd */
}

/* What the daemon sums over the clients an asker may see. */
struct visible {
	const struct session *asker;
	uint32_t stuck;
	uid_t uid;      /* visible_slots: whose */
	uint32_t slots;
};

static void sum_stuck(struct session *o, void *arg)
{
	struct visible *v = arg;
	if (answer_sees(v->asker, o))
		v->stuck += o->met.stuck;
}

static void sum_slots(struct session *o, void *arg)
{
	struct visible *v = arg;
	if (o->uid == v->uid)
		v->slots += o->slots.nlive;
}

static int emit_daemon(struct server *srv, struct session *s, struct answer *a,
		       struct loop_work *w)
{
	struct cuflag_metrics_daemon d;
	struct visible v = { .asker = s };
	struct scanner_stats st;
	struct rlimit rl;
	uint64_t pending;

	memset(&d, 0, sizeof(d));
	scanner_get_stats(srv->sc, &st);
	d.kind = CUFLAG_METRICS_DAEMON;
	d.flags = (srv->cfg->no_metrics ? 0 : CUFLAG_METRICS_F_TIMING) |
		  (s->admin ? CUFLAG_METRICS_F_ALL : 0) | CUFLAG_METRICS_F_SCAN_TIMES;
	d.uptime_ms = cuflag_now_ms() - srv->start_ms;
	d.stuck_ms = srv->cfg->stuck_ms;
	d.connections = srv->users.total[USER_CONNS];
	server_totals(srv, &d.regions, &d.slots, &pending);
	d.pending = (uint32_t)pending;
	registry_each(&srv->reg, REG_ATTACHED, sum_stuck, &v);
	d.stuck = v.stuck;
	d.fds_open = fds_open();
	if (getrlimit(RLIMIT_NOFILE, &rl) == 0 && rl.rlim_cur != RLIM_INFINITY)
		d.fds_limit = rl.rlim_cur > UINT32_MAX ? UINT32_MAX : (uint32_t)rl.rlim_cur;
	for (unsigned i = 0; i < USERS_BUCKETS; i++)
		for (struct user *u = srv->users.bucket[i]; u; u = u->next)
			d.users += u->held[USER_CONNS] > 0;
	d.scanner_state = st.state;
	d.nbounds = CUFLAG_HIST_BOUNDS;
	d.armed = st.armed;
	d.completions = st.completions;
	d.wakes = st.wakes;
	d.passes = st.passes;
	d.parks = st.parks;
	d.bad_arms = st.bad_arms;
	d.dropped = srv->dropped;
	d.scanner_cpu_ns = st.cpu_ns;
	d.wakeups = st.wakeups;
	d.parked_ns = st.parked_ns;
	d.sleeping_ns = st.sleeping_ns;
	d.spinning_ns = st.spinning_ns;
	memcpy(d.bounds_ns, lhist_bounds_ns, sizeof(d.bounds_ns));
	/* Its totals walk every client three times. */
	w->sessions += 3 * srv->users.total[USER_CONNS];
	return answer_emit(a, &d, sizeof(d));
}

static void fill_user(struct cuflag_metrics_user *r, struct server *srv, uid_t uid,
		      const struct user *u, uint64_t now_ms)
{
	const struct drop_table_entry *e = drop_find(&srv->drops, uid);

	memset(r, 0, sizeof(*r));
	r->kind = CUFLAG_METRICS_USER;
	r->uid = uid;
	if (u) {
		struct visible v = { .uid = uid };
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

/* The users the asker may see (itself; root and the admin group: all), those
 * connected first, at most DROP_USERS in all, into uids. */
static uint32_t users_seen(struct server *srv, const struct session *s, uid_t *uids)
{
	uint32_t n = 0;

	if (!s->admin) {
		uids[n++] = s->uid;
		return n;
	}
	for (unsigned i = 0; i < USERS_BUCKETS; i++)
		for (struct user *u = srv->users.bucket[i]; u && n < DROP_USERS; u = u->next)
			uids[n++] = u->uid;
	for (unsigned i = 0; i < DROP_USERS && n < DROP_USERS; i++) {
		const struct drop_table_entry *e = &srv->drops.e[i];
		if (e->last_ms && !user_find(&srv->users, e->uid))
			uids[n++] = e->uid;
	}
	return n;
}

static void fill_client(struct cuflag_metrics_client *r, struct server *srv,
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

/* Users sent per step, and clients looked at per step at most. */
#define USERS_STEP 8u
#define CLIENTS_STEP 4u

/* Where a METRICS answer stands. */
enum metrics_phase { PHASE_DAEMON, PHASE_USERS, PHASE_TOTALS, PHASE_CLIENTS, PHASE_END };

struct metrics_answer {
	enum metrics_phase phase;
	uint32_t want;       /* CUFLAG_METRICS_WANT_* */
	struct user_total *totals; /* PHASE_TOTALS: what is left to send */
	int ntotals, total_at;
	uint32_t after;      /* the page's clients with ids up to this are sent */
	uint32_t next_after; /* where the next page starts (0: none); its last id */
	uint32_t nuids, uid_at;
	uid_t uids[DROP_USERS];
	struct cuflag_metrics_client rec;
	struct lhist_snap snap;
};

/* The page: up to CUFLAG_METRICS_PAGE visible clients with ids above after,
 * lowest first. Chosen when the answer starts (its last id bounds it), sent
 * a few clients a step: one that leaves meanwhile is left out, one that
 * comes has a higher id than any and waits for the next page. */
static int metrics_build(struct server *srv, struct session *s, void *state, struct answer *a,
			 struct loop_work *w)
{
	struct metrics_answer *ma = state;
	struct cuflag_metrics_user u;
	struct cuflag_metrics_end end = { .kind = CUFLAG_METRICS_END };
	struct session *page[CLIENTS_STEP];
	uint64_t bound = loop_step_slots(&answer_prices, LOOP_STEP_NS);
	uint32_t upto, n, i;
	int rc = 0;

	switch (ma->phase) {
	case PHASE_DAEMON:
		ma->phase = PHASE_USERS;
		ma->nuids = users_seen(srv, s, ma->uids);
		rc = emit_daemon(srv, s, a, w);
		if (!rc && (ma->want & CUFLAG_METRICS_WANT_PROCESS)) {
			struct cuflag_metrics_process p = { .kind = CUFLAG_METRICS_PROCESS,
							    .start_unix_ms = srv->start_unix_ms };
			rc = answer_emit(a, &p, sizeof(p));
		}
		return rc;
	case PHASE_USERS:
		for (uint32_t k = 0; k < USERS_STEP && ma->uid_at < ma->nuids && !rc; k++) {
			uid_t uid = ma->uids[ma->uid_at++];
			w->sessions += srv->users.total[USER_CONNS];
			fill_user(&u, srv, uid, user_find(&srv->users, uid), cuflag_now_ms());
			rc = answer_emit(a, &u, sizeof(u));
		}
		if (ma->uid_at == ma->nuids)
			ma->phase = ma->want & CUFLAG_METRICS_WANT_TOTALS ? PHASE_TOTALS : PHASE_CLIENTS;
		return rc;
	case PHASE_TOTALS:
		if (!ma->totals && (ma->ntotals = totals_view(srv, s, &ma->totals, w)) < 0)
			return ma->ntotals;
		for (uint32_t k = 0; k < USERS_STEP * 2 && ma->total_at < ma->ntotals && !rc; k++) {
			const struct user_total *e = &ma->totals[ma->total_at++];
			struct cuflag_metrics_user_totals r = { .kind = CUFLAG_METRICS_USER_TOTALS,
								.uid = e->uid, .arms = e->arms,
								.completions = e->completions,
								.clients = e->clients };
			rc = answer_emit(a, &r, sizeof(r));
		}
		if (ma->total_at == ma->ntotals)
			ma->phase = PHASE_CLIENTS;
		return rc;
	case PHASE_CLIENTS:
		upto = ma->next_after ? ma->next_after : UINT32_MAX;
		n = answer_page(srv, s, ma->after, upto, page, CLIENTS_STEP, w);
		for (i = 0; i < n && !rc && w->slots < bound; i++) {
			fill_client(&ma->rec, srv, page[i], &ma->snap, w);
			rc = answer_emit(a, &ma->rec, sizeof(ma->rec));
			ma->after = page[i]->id;
		}
		if (i == n && (n < CLIENTS_STEP || ma->after == upto))
			ma->phase = PHASE_END;
		return rc;
	case PHASE_END:
		end.next_after = ma->next_after;
		rc = answer_emit(a, &end, sizeof(end));
		return rc ? rc : 1;
	}
	return -EINVAL;
}

static void metrics_fini(void *state)
{
	struct metrics_answer *ma = state;

	free(ma->totals);
	free(ma);
}

static const struct answer_ops metrics_ops = { "METRICS", metrics_build, metrics_fini };

int req_metrics(struct server *srv, struct session *s, struct request *req)
{
	struct metrics_answer *ma = calloc(1, sizeof(*ma));
	struct session *page[CUFLAG_METRICS_PAGE];
	struct cuflag_msg_metrics m;
	struct loop_work w = { 0 };

	if (!ma) {
		req->why = "out of memory";
		return REQ_REFUSE(-ENOMEM);
	}
	memcpy(&m, req->body, sizeof(m));
	ma->phase = m.after_id ? PHASE_CLIENTS : PHASE_DAEMON;
	ma->want = m.want;
	ma->after = m.after_id;
	if (answer_page(srv, s, m.after_id, UINT32_MAX, page, CUFLAG_METRICS_PAGE, &w) ==
	    CUFLAG_METRICS_PAGE)
		ma->next_after = page[CUFLAG_METRICS_PAGE - 1]->id;
	answer_charge(srv, s, &w);
	return answer_start(srv, s, req, &metrics_ops, ma);
}
