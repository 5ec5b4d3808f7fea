/* SPDX-License-Identifier: MIT */
#include "serve/queries.h"

#include <dirent.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/stat.h>

#include "base/config.h"
#include "policy/latency-hist.h"
#include "serve/answer.h"
#include "serve/handler.h"
#include "serve/metrics.h"
#include "serve/server-state.h"
#include "serve/session-state.h"
#include "serve/stuck.h"

_Static_assert(LHIST_NBOUNDS == CUFLAG_HIST_BOUNDS, "the wire's bounds are the histogram's");
_Static_assert(CUFLAG_STUCK_MAX <= 64, "a STUCK answer fits a socket's buffer");

/* ---------------------------------------------------------------- */
/* The daemon's totals, and STATS                                    */
/* ---------------------------------------------------------------- */

static void add_totals(struct session *s, void *arg)
{
	struct daemon_totals *t = arg;

	t->clients++;
	t->slots += s->slots.nlive;
	for (uint32_t g = 0; g < s->slots.ngroups; g++)
		t->grouped += s->slots.group_live[g];
	t->pending += atomic_load_explicit(&s->scan->n_pending, memory_order_relaxed);
}

void daemon_totals_read(struct server *srv, struct daemon_totals *t)
{
	memset(t, 0, sizeof(*t));
	scanner_get_stats(srv->sc, &t->st);
	registry_each(&srv->reg, REG_ATTACHED, add_totals, t);
	t->uptime_ms = cuflag_now_ms() - srv->start_ms;
	t->dropped = srv->dropped;
}

/* The figures a STATS reply and a METRICS daemon record both carry, under
 * the same names: from the totals t into the record r, of either kind. */
#define TOTALS_TO_RECORD(r, t)                                                             \
	do {                                                                               \
		(r)->uptime_ms = (t)->uptime_ms;                                           \
		(r)->slots = (t)->slots;                                                   \
		(r)->dropped = (t)->dropped;                                               \
		(r)->scanner_state = (t)->st.state;                                        \
		(r)->armed = (t)->st.armed;                                                \
		(r)->completions = (t)->st.completions;                                    \
		(r)->wakes = (t)->st.wakes;                                                \
		(r)->passes = (t)->st.passes;                                              \
		(r)->parks = (t)->st.parks;                                                \
		(r)->bad_arms = (t)->st.bad_arms;                                          \
		(r)->scanner_cpu_ns = (t)->st.cpu_ns;                                      \
		(r)->parked_ns = (t)->st.parked_ns;                                        \
		(r)->sleeping_ns = (t)->st.sleeping_ns;                                    \
		(r)->spinning_ns = (t)->st.spinning_ns;                                    \
	} while (0)

int req_stats(struct server *srv, struct session *s, struct request *req)
{
	struct cuflag_msg_stats_reply r;
	struct daemon_totals t;

	daemon_totals_read(srv, &t);
	memset(&r, 0, sizeof(r));
	r.version = CUFLAG_PROTO_VERSION;
	r.slab = (uint32_t)srv->cfg->slab;
	r.epoch = srv->epoch;
	TOTALS_TO_RECORD(&r, &t);
	r.clients = t.clients;
	r.pending = t.pending;
	r.grouped_slots = t.grouped;
	r.max_clients = srv->cfg->max_clients;
	r.slots_per_client = srv->cfg->slots_per_client;
	r.spin_us = (uint32_t)srv->cfg->spin_us;
	r.scanner_mode = t.st.mode;
	r.scanner_wakeups = t.st.wakeups;
	r.scanner_sleeps = t.st.sleeps;
	r.timer_late_ns = t.st.timer_late_ns;
	snprintf(r.daemon_version, sizeof(r.daemon_version), "%s", CUFLAG_VERSION);
	/* Its totals walk every client once. */
	answer_charge(srv, s, &(struct loop_work){ .sessions = srv->users.total[USER_CONNS] });
	return req_reply_ok(s, req, &r, sizeof(r), NULL, 0);
}

/* ---------------------------------------------------------------- */
/* CLIENTS                                                           */
/* ---------------------------------------------------------------- */

/* Clients listed per step of a CLIENTS answer. */
#define CLIENTS_STEP 16u

/* Where a CLIENTS answer stands: the clients with ids up to after are sent. */
struct clients_answer {
	uint32_t after;
};

static void client_info(struct server *srv, const struct session *o,
			struct cuflag_msg_client_info *ci)
{
	memset(ci, 0, sizeof(*ci));
	ci->client_id = o->id;
	ci->pid = o->pid;
	ci->uid = o->uid;
	ci->gid = o->gid;
	ci->slots = o->slots.nlive;
	ci->armed = atomic_load_explicit(&o->scan->n_armed, memory_order_relaxed);
	ci->wakes = atomic_load_explicit(&o->scan->n_wakes, memory_order_relaxed);
	ci->pending = atomic_load_explicit(&o->scan->n_pending, memory_order_relaxed);
	ci->connected_ms = o->connected_ms - srv->start_ms;
	ci->age_s = (uint32_t)((cuflag_now_ms() - o->connected_ms) / 1000u);
}

/* The next clients after ca->after, or the end: one page a step. */
static int clients_build(struct server *srv, struct session *s, void *state, struct answer *a,
			 struct loop_work *w)
{
	struct clients_answer *ca = state;
	struct session *page[CLIENTS_STEP];
	struct cuflag_msg_client_info ci;
	uint32_t n = answer_page(srv, s, ca->after, UINT32_MAX, page, CLIENTS_STEP, w);
	int rc = 0;

	for (uint32_t i = 0; i < n && !rc; i++) {
		client_info(srv, page[i], &ci);
		rc = answer_emit(a, &ci, sizeof(ci));
		ca->after = page[i]->id;
	}
	if (rc || n == CLIENTS_STEP)
		return rc;
	memset(&ci, 0, sizeof(ci));
	rc = answer_emit(a, &ci, sizeof(ci));
	return rc ? rc : 1;
}

static const struct answer_ops clients_ops = { "CLIENTS", clients_build, free };

/* A user sees its own clients; root and the admin group see everyone's.
 * However many there are, they are sent a page at a time as the asker reads
 * them (answer.h): the wire is what it always was, one reply per client and
 * an empty one to end, so every reader of CLIENTS reads it as before. */
int req_clients(struct server *srv, struct session *s, struct request *req)
{
	return answer_start(srv, s, req, &clients_ops, calloc(1, sizeof(struct clients_answer)));
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
	 * charged to the daemon's memory cgroup, after the fd is closed, until
	 * reclaimed (docs/bench-log/2026-12-02-attack-defences-history.md, attack
	 * 14, has how much). */
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

struct stuck_sum {
	const struct session *asker;
	uint32_t stuck;
};

static void sum_stuck(struct session *o, void *arg)
{
	struct stuck_sum *v = arg;
	if (answer_sees(v->asker, o))
		v->stuck += o->met.stuck;
}

static int emit_daemon(struct server *srv, struct session *s, struct answer *a,
		       struct loop_work *w)
{
	struct cuflag_metrics_daemon d;
	struct stuck_sum v = { .asker = s };
	struct daemon_totals t;
	struct rlimit rl;

	memset(&d, 0, sizeof(d));
	daemon_totals_read(srv, &t);
	d.kind = CUFLAG_METRICS_DAEMON;
	d.flags = (srv->cfg->no_metrics ? 0 : CUFLAG_METRICS_F_TIMING) |
		  (s->admin ? CUFLAG_METRICS_F_ALL : 0) | CUFLAG_METRICS_F_SCAN_TIMES |
		  (srv->cfg->user_mode ? CUFLAG_METRICS_F_USER : 0);
	TOTALS_TO_RECORD(&d, &t);
	d.stuck_ms = srv->cfg->stuck_ms;
	d.connections = srv->users.total[USER_CONNS];
	d.regions = t.clients;
	d.pending = (uint32_t)t.pending;
	registry_each(&srv->reg, REG_ATTACHED, sum_stuck, &v);
	d.stuck = v.stuck;
	d.fds_open = fds_open();
	if (getrlimit(RLIMIT_NOFILE, &rl) == 0 && rl.rlim_cur != RLIM_INFINITY)
		d.fds_limit = rl.rlim_cur > UINT32_MAX ? UINT32_MAX : (uint32_t)rl.rlim_cur;
	for (unsigned i = 0; i < USERS_BUCKETS; i++)
		for (struct user *u = srv->users.bucket[i]; u; u = u->chain_next)
			d.users += u->held[USER_CONNS] > 0;
	d.nbounds = CUFLAG_HIST_BOUNDS;
	d.wakeups = t.st.wakeups;
	memcpy(d.bounds_ns, lhist_bounds_ns, sizeof(d.bounds_ns));
	/* Its totals and its count of stuck slots walk every client twice. */
	w->sessions += 2 * srv->users.total[USER_CONNS];
	return answer_emit(a, &d, sizeof(d));
}

/* Users sent per step, and clients looked at per step at most. */
#define USERS_STEP 8u
#define METRICS_CLIENTS_STEP 4u

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
	struct session *page[METRICS_CLIENTS_STEP];
	uint64_t bound = loop_step_slots(&answer_prices, LOOP_STEP_NS);
	uint32_t upto, n, i;
	int rc = 0;

	switch (ma->phase) {
	case PHASE_DAEMON:
		ma->phase = PHASE_USERS;
		ma->nuids = metrics_users_seen(srv, s, ma->uids);
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
			metrics_user_fill(&u, srv, uid, user_find(&srv->users, uid), cuflag_now_ms());
			rc = answer_emit(a, &u, sizeof(u));
		}
		if (ma->uid_at == ma->nuids)
			ma->phase = ma->want & CUFLAG_METRICS_WANT_TOTALS ? PHASE_TOTALS : PHASE_CLIENTS;
		return rc;
	case PHASE_TOTALS:
		if (!ma->totals && (ma->ntotals = metrics_totals_view(srv, s, &ma->totals, w)) < 0)
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
		n = answer_page(srv, s, ma->after, upto, page, METRICS_CLIENTS_STEP, w);
		for (i = 0; i < n && !rc && w->slots < bound; i++) {
			metrics_client_fill(&ma->rec, srv, page[i], &ma->snap, w);
			rc = answer_emit(a, &ma->rec, sizeof(ma->rec));
			ma->after = page[i]->id;
		}
		if (i == n && (n < METRICS_CLIENTS_STEP || ma->after == upto))
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

	if (!ma)
		return req_refuse(req, -ENOMEM, "out of memory");
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

/* ---------------------------------------------------------------- */
/* STUCK                                                             */
/* ---------------------------------------------------------------- */

/* Clients looked at per page of a STUCK walk. */
#define STUCK_PAGE 16u

/* A STUCK answer: the clients with ids up to after are walked. */
struct stuck_answer {
	struct stuck_list list;
	uint64_t now_ns; /* every wait is measured against the request's time */
	uint32_t after;
	int walked;
};

/* Walk the next clients, up to a step's worth of slots; once every client
 * is walked, the list and its end. */
static int stuck_build(struct server *srv, struct session *s, void *state, struct answer *a,
		       struct loop_work *w)
{
	struct stuck_answer *sa = state;
	uint64_t stuck_ns = srv->cfg->stuck_ms * 1000000u;
	uint64_t bound = loop_step_slots(&answer_prices, LOOP_STEP_NS);
	struct cuflag_msg_stuck_slot end;
	int rc = 0;

	while (!sa->walked && w->slots < bound) {
		struct session *page[STUCK_PAGE];
		uint32_t n = srv->cfg->no_metrics
				     ? 0
				     : answer_page(srv, s, sa->after, UINT32_MAX, page, STUCK_PAGE, w);
		uint32_t i;

		for (i = 0; i < n && w->slots < bound; i++) {
			stuck_list_client(&sa->list, page[i], sa->now_ns, stuck_ns, w);
			sa->after = page[i]->id;
		}
		sa->walked = i == n && n < STUCK_PAGE;
	}
	if (!sa->walked)
		return 0;
	for (uint32_t i = 0; i < sa->list.n && !rc; i++)
		rc = answer_emit(a, &sa->list.row[i], sizeof(sa->list.row[i]));
	if (rc)
		return rc;
	memset(&end, 0, sizeof(end));
	end.slot = sa->list.more;
	rc = answer_emit(a, &end, sizeof(end));
	return rc ? rc : 1;
}

static const struct answer_ops stuck_ops = { "STUCK", stuck_build, free };

int req_stuck(struct server *srv, struct session *s, struct request *req)
{
	struct stuck_answer *sa = calloc(1, sizeof(*sa));

	if (sa)
		sa->now_ns = cuflag_now_ns();
	return answer_start(srv, s, req, &stuck_ops, sa);
}
