/* SPDX-License-Identifier: MIT */
#include "metrics.h"

#include <dirent.h>
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <time.h>

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

/* Why the scanner stopped serving a client, as a drop reason. */
static enum cuflag_drop_reason broken_reason(int broken)
{
	switch (broken) {
	case BROKEN_QUEUE:
		return CUFLAG_DROP_QUEUE;
	case BROKEN_STALL:
		return CUFLAG_DROP_STALL;
	case BROKEN_FULL:
		return CUFLAG_DROP_FULL;
	case BROKEN_COST:
		return CUFLAG_DROP_COST;
	case BROKEN_WATCH:
		return CUFLAG_DROP_WATCH;
	default:
		return CUFLAG_DROP_PROTOCOL;
	}
}

static enum cuflag_drop_reason drop_reason(const struct session *s, int err)
{
	int broken = s->scan ? atomic_load(&s->scan->broken) : BROKEN_NONE;

	if (broken)
		return broken_reason(broken);
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

static int sees(const struct session *asker, const struct session *o)
{
	return asker->admin || o->uid == asker->uid;
}

static void sum_stuck(struct session *o, void *arg)
{
	struct visible *v = arg;
	if (sees(v->asker, o))
		v->stuck += o->met.stuck;
}

static void sum_slots(struct session *o, void *arg)
{
	struct visible *v = arg;
	if (o->uid == v->uid)
		v->slots += o->slots.nlive;
}

static int send_daemon(struct server *srv, struct session *s, struct request *req)
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
	return req_reply_ok(s, req, &d, sizeof(d), NULL, 0);
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
 * connected first, at most DROP_USERS in all. */
static int send_users(struct server *srv, struct session *s, struct request *req)
{
	struct cuflag_metrics_user r;
	uint64_t now = cuflag_now_ms();
	unsigned sent = 0;
	int rc = 0;

	if (!s->admin) {
		fill_user(&r, srv, s->uid, user_find(&srv->users, s->uid), now);
		return req_reply_ok(s, req, &r, sizeof(r), NULL, 0);
	}
	for (unsigned i = 0; i < USERS_BUCKETS && !rc; i++)
		for (struct user *u = srv->users.bucket[i]; u && !rc && sent < DROP_USERS;
		     u = u->next, sent++) {
			fill_user(&r, srv, u->uid, u, now);
			rc = req_reply_ok(s, req, &r, sizeof(r), NULL, 0);
		}
	for (unsigned i = 0; i < DROP_USERS && !rc && sent < DROP_USERS; i++) {
		const struct drop_table_entry *e = &srv->drops.e[i];
		if (!e->last_ms || user_find(&srv->users, e->uid))
			continue;
		fill_user(&r, srv, e->uid, NULL, now);
		rc = req_reply_ok(s, req, &r, sizeof(r), NULL, 0);
		sent++;
	}
	return rc;
}

static void fill_client(struct cuflag_metrics_client *r, struct server *srv,
			const struct session *o, struct lhist_snap *snap)
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

/* A page being chosen: the visible clients with the lowest ids above after. */
struct page {
	const struct session *asker;
	uint32_t after, n;
	const struct session *out[CUFLAG_METRICS_PAGE];
};

static void page_take(struct session *o, void *arg)
{
	struct page *p = arg;
	uint32_t at;

	if (o->id <= p->after || !sees(p->asker, o))
		return;
	if (p->n == CUFLAG_METRICS_PAGE && o->id > p->out[p->n - 1]->id)
		return;
	at = p->n < CUFLAG_METRICS_PAGE ? p->n++ : p->n - 1;
	while (at > 0 && p->out[at - 1]->id > o->id) {
		p->out[at] = p->out[at - 1];
		at--;
	}
	p->out[at] = o;
}

/* Up to CUFLAG_METRICS_PAGE visible clients with ids above after, lowest
 * first, into p; returns where the next page starts (0: none). */
static uint32_t page_of(struct server *srv, struct page *p)
{
	registry_each(&srv->reg, REG_ATTACHED, page_take, p);
	return p->n == CUFLAG_METRICS_PAGE ? p->out[p->n - 1]->id : 0;
}

int req_metrics(struct server *srv, struct session *s, struct request *req)
{
	struct page page = { .asker = s };
	struct cuflag_msg_metrics m;
	struct cuflag_metrics_client *r = malloc(sizeof(*r));
	struct lhist_snap *snap = malloc(sizeof(*snap));
	struct cuflag_metrics_end end = { .kind = CUFLAG_METRICS_END };
	int rc = 0;

	if (!r || !snap) {
		free(r);
		free(snap);
		req->why = "out of memory";
		return REQ_REFUSE(-ENOMEM);
	}
	memcpy(&m, req->body, sizeof(m));
	if (!m.after_id && !(rc = send_daemon(srv, s, req)))
		rc = send_users(srv, s, req);
	page.after = m.after_id;
	end.next_after = page_of(srv, &page);
	for (uint32_t i = 0; i < page.n && !rc; i++) {
		fill_client(r, srv, page.out[i], snap);
		rc = req_reply_ok(s, req, r, sizeof(*r), NULL, 0);
	}
	if (!rc)
		rc = req_reply_ok(s, req, &end, sizeof(end), NULL, 0);
	free(r);
	free(snap);
	return rc;
}
