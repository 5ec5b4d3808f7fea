/* SPDX-License-Identifier: MIT */
#include "serve/stuck.h"

#include <stdlib.h>
#include <string.h>

#include "base/config.h"
#include "serve/server-state.h"
#include "serve/session-state.h"

/* A slot's wait: since when (the scanner's stamp, scanner.h), 0 when it is
 * not waiting or not the client's (freed and retiring). */
static uint64_t wait_since(const struct session *o, uint32_t i)
{
	if (o->slots.state[i] != SLOT_LIVE)
		return 0;
	return atomic_load_explicit(&o->scan->slots[i].armed_at_ns, memory_order_relaxed);
}

void stuck_scan(const struct session *o, uint64_t now_ns, uint64_t stuck_ns, uint32_t *stuck,
		uint64_t *oldest_ns)
{
	*stuck = 0;
	*oldest_ns = 0;
	if (!o->scan || session_dead(o) || !atomic_load_explicit(&o->scan->n_pending, memory_order_relaxed))
		return;
	for (uint32_t i = 0; i < o->slots.n; i++) {
		uint64_t t = wait_since(o, i), w;
		if (!t || t > now_ns)
			continue;
		w = now_ns - t;
		if (w > stuck_ns)
			(*stuck)++;
		if (w > *oldest_ns)
			*oldest_ns = w;
	}
}

/*
 * What the region says of a slot, for a person to read: the scanner writes
 * these words while we read them. A value a pass old, or one the client
 * scribbled, only misleads the reader of that line (an aligned 32-bit load
 * is never torn); nothing is decided on it.
 */
__attribute__((no_sanitize("thread"))) static uint32_t shown(const volatile uint32_t *p)
{
	return *p;
}

static void log_stuck(struct session *o, uint32_t i, uint64_t wait_ns)
{
	const struct client_ident *id = &o->met.ident;

	slog(LOG_WARNING, o,
	     "slot %u stuck: armed %u, flag %u, waiting %.1f s (comm=%s%s%s%s%s)", i,
	     shown(&o->scan->states[i].armed), shown(&o->flags[i]), (double)wait_ns / 1e9,
	     id->comm[0] ? id->comm : "?", id->unit[0] ? " unit=" : "", id->unit,
	     id->pod[0] ? " pod=" : "", id->pod);
}

/* A stuck line of o's: at most a few a minute per client (the lines held
 * back are counted in a line that names it), and within its user's log
 * budget, so that many clients of one user cannot flood the journal. */
static int stuck_line_ok(struct session *o)
{
	unsigned held;
	int ok = cuflagd_ratelimit_take(&o->met.rl, &held);

	if (held)
		ulog(LOG_WARNING, o, "%u stuck-slot lines suppressed", held);
	return ok && user_log_ok(o->user, LOG_WARNING);
}

/* Count o's stuck slots; log each new one once (the wait it was seen in). */
static void tick_one(struct session *o, uint64_t now_ns, uint64_t stuck_ns)
{
	struct session_metrics *m = &o->met;
	uint64_t oldest;

	stuck_scan(o, now_ns, stuck_ns, &m->stuck, &oldest);
	if (!m->stuck)
		return;
	if (!m->stuck_logged && !(m->stuck_logged = calloc(o->slots.n, sizeof(uint64_t))))
		return; /* counted, not logged: out of memory */
	for (uint32_t i = 0; i < o->slots.n; i++) {
		uint64_t t = wait_since(o, i);
		if (!t || t > now_ns || now_ns - t <= stuck_ns || m->stuck_logged[i] == t)
			continue;
		m->stuck_logged[i] = t;
		if (stuck_line_ok(o))
			log_stuck(o, i, now_ns - t);
	}
}

struct stuck_walk {
	uint64_t now, stuck_ns;
};

static void tick_each(struct session *o, void *arg)
{
	struct stuck_walk *w = arg;
	tick_one(o, w->now, w->stuck_ns);
}

void stuck_tick(struct server *srv)
{
	struct stuck_walk w = { cuflag_now_ns(), srv->cfg->stuck_ms * 1000000u };

	if (!srv->cfg->no_metrics)
		registry_each(&srv->reg, REG_ATTACHED, tick_each, &w);
}

static void keep(struct stuck_list *l, const struct cuflag_msg_stuck_slot *r)
{
	uint32_t at = l->n;

	if (l->n == CUFLAG_STUCK_MAX) {
		l->more++;
		if (r->age_ms <= l->row[l->n - 1].age_ms)
			return;
		at = --l->n;
	}
	while (at > 0 && l->row[at - 1].age_ms < r->age_ms) {
		l->row[at] = l->row[at - 1];
		at--;
	}
	l->row[at] = *r;
	l->n++;
}

void stuck_list_client(struct stuck_list *l, const struct session *o, uint64_t now_ns,
		       uint64_t stuck_ns, struct loop_work *w)
{
	struct cuflag_msg_stuck_slot r;

	w->slots += o->slots.n;
	for (uint32_t i = 0; i < o->slots.n; i++) {
		uint64_t t = wait_since(o, i);
		if (!t || t > now_ns || now_ns - t <= stuck_ns)
			continue;
		memset(&r, 0, sizeof(r));
		r.client_id = o->id;
		r.pid = o->pid;
		r.uid = o->uid;
		r.slot = i;
		r.armed = shown(&o->scan->states[i].armed);
		r.signalled = shown(&o->scan->states[i].signalled);
		r.flag = shown(&o->flags[i]);
		r.group = o->slots.group[i];
		r.age_ms = (now_ns - t) / 1000000u;
		memcpy(r.comm, o->met.ident.comm, sizeof(r.comm));
		keep(l, &r);
	}
}
