/* SPDX-License-Identifier: MIT */
/*
 * The pending set: the slots a pass looks at, a dense array with O(1)
 * insert and remove, and per user the wait list of slots with arms in flight
 * that found no room in the user's share of it. Every way into the set (an
 * arm from the queue, an adoption after a restart, a freed slot whose flag
 * has not landed) keeps to the share. Only pending slots cost a pass, and
 * of those only the hot ones every pass: cold ones wait in a compact array
 * that a sweep reads a slice at a time (cold-sweep.h, scanner/cold.c).
 * The main thread reads a session's pending + waiting (its slots in flight)
 * and a user's pending alone: what its limit holds, as its arms waiting in
 * the queue are not counted either.
 */
#include <assert.h>

#include "scanner/private.h"

static void publish(struct scanner_session *ss, struct scanner_user *u)
{
	atomic_store_explicit(&ss->n_pending, ss->pending + ss->waiting, memory_order_relaxed);
	atomic_store_explicit(&u->n_pending, u->pending, memory_order_relaxed);
}

int pending_user_full(const struct scanner_user *u)
{
	return u->pending >= u->max_pending;
}

/* max_pending covers every slot that can exist, so neither array can
 * overflow. */
static void hot_add(struct scanner *sc, struct scanner_slot *s)
{
	s->cold = 0;
	s->pend_idx = (uint32_t)sc->npending;
	sc->pending[sc->npending++] = s;
	s->sess->user->hot++;
}

static void hot_del(struct scanner *sc, struct scanner_slot *s)
{
	struct scanner_slot *last = sc->pending[--sc->npending];

	assert(!s->cold && sc->pending[s->pend_idx] == s);
	sc->pending[s->pend_idx] = last;
	last->pend_idx = s->pend_idx;
	s->pend_idx = SCAN_NOT_PENDING;
	s->sess->user->hot--;
}

static void cold_put(struct scanner *sc, uint64_t i, const struct cold_entry *e)
{
	sc->cold[i] = *e;
	e->slot->pend_idx = (uint32_t)i;
}

/* Appended: not read by this sweep yet, so it will be. */
static void cold_add(struct scanner *sc, struct scanner_slot *s, uint32_t seen, uint64_t wake_at)
{
	struct cold_entry e = { .flag = s->flag, .slot = s, .wake_at = wake_at, .seen = seen };

	s->cold = 1;
	cold_put(sc, sc->ncold++, &e);
}

/* Keeps the sweep's order: cold[0, pos) read by this sweep, [pos, end) to be
 * read by it, the rest by the next. A hole moves to the end of each part
 * after its own, filled by that part's last entry, until it is the set's
 * last (cold-sweep.h). */
static void cold_del(struct scanner *sc, struct scanner_slot *s)
{
	uint64_t *bound[2] = { &sc->sweep.pos, &sc->sweep.end };
	uint64_t i = s->pend_idx, last = sc->ncold - 1;

	assert(s->cold && sc->cold[i].slot == s);
	for (int k = 0; k < 2; k++) {
		if (i >= *bound[k])
			continue;
		uint64_t j = --*bound[k];
		if (j != i)
			cold_put(sc, i, &sc->cold[j]);
		i = j;
	}
	if (i != last)
		cold_put(sc, i, &sc->cold[last]);
	sc->ncold--;
	s->cold = 0;
	s->pend_idx = SCAN_NOT_PENDING;
}

void pending_go_cold(struct scanner *sc, struct scanner_slot *s, uint32_t seen, uint64_t wake_at)
{
	hot_del(sc, s);
	cold_add(sc, s, seen, wake_at);
}

void pending_go_hot(struct scanner *sc, struct scanner_slot *s, int flag_moved)
{
	cold_del(sc, s);
	hot_add(sc, s);
	s->swept = (uint8_t)(flag_moved != 0);
}

void pending_add(struct scanner *sc, struct scanner_slot *s)
{
	pending_add_at(sc, s, sc->now);
}

void pending_add_at(struct scanner *sc, struct scanner_slot *s, uint64_t arm_ns)
{
	struct scanner_user *u = s->sess->user;

	if (s->pend_idx != SCAN_NOT_PENDING || s->waiting)
		return;
	if (!pending_count(sc))
		idle_note_armed_from_empty(&sc->idle, arm_ns);
	predict_armed(&s->timing, arm_ns);
	/* The metrics' arm -> done and stuck waits count from the arm: the
	 * client's word for it, which arm_time() keeps only within the daemon's
	 * own clock since the pass before (an arm waits in its queue through a
	 * nap, up to a backstop; counted from when the scanner took it, steady
	 * work would read as shorter than it is by the nap). */
	if (sc->cfg.metrics)
		atomic_store_explicit(&s->armed_at_ns, arm_ns, memory_order_relaxed);
	/* Hot: it may land soon. */
	hot_add(sc, s);
	s->sess->pending++;
	if (!u->pending++)
		sc->busy_users++;
	publish(s->sess, u);
}

void pending_add_or_wait(struct scanner *sc, struct scanner_slot *s)
{
	struct scanner_user *u = s->sess->user;

	if (s->pend_idx != SCAN_NOT_PENDING || s->waiting)
		return;
	if (!pending_user_full(u)) {
		pending_add(sc, s);
		return;
	}
	s->waiting = 1;
	LIST_APPEND(wait, u->wait_head, u->wait_tail, s);
	u->waiting++;
	s->sess->waiting++;
	publish(s->sess, u);
}

static void unwait(struct scanner_slot *s)
{
	struct scanner_user *u = s->sess->user;

	LIST_REMOVE_LAST(wait, u->wait_head, u->wait_tail, s);
	s->waiting = 0;
	u->waiting--;
	s->sess->waiting--;
}

void pending_del(struct scanner *sc, struct scanner_slot *s)
{
	struct scanner_user *u = s->sess->user;
	uint32_t i = s->pend_idx;

	if (s->waiting) {
		unwait(s);
		publish(s->sess, u);
		return;
	}
	if (i == SCAN_NOT_PENDING)
		return;
	if (s->cold)
		cold_del(sc, s);
	else
		hot_del(sc, s);
	atomic_store_explicit(&s->armed_at_ns, 0, memory_order_relaxed);
	s->sess->pending--;
	if (!--u->pending)
		sc->busy_users--;
	publish(s->sess, u);
	/* Room in the user's share: the oldest waiting slot moves in. */
	if (u->wait_head && !pending_user_full(u)) {
		struct scanner_slot *w = u->wait_head;
		unwait(w);
		pending_add(sc, w);
	} else if (!pending_count(sc)) {
		idle_note_empty(&sc->idle, sc->now);
	}
}
