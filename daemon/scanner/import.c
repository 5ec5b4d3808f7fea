/* SPDX-License-Identifier: MIT */
/*
 * Completions across processes, the scanner's side: an exported slot keeps
 * the list of the slots that import it (each in its importer's own region),
 * and every time its signalled value advances each of them follows: its flag
 * (written by the daemon only) becomes the exporter's value, its record in
 * its region counts the new completions, and its doorbell rings. When the
 * exporter's slot goes, every importer is marked gone in its record and rung
 * once more. The records are written in the pass that sees the exporter's
 * completion; an importer's own eventfd is rung at the pass's end under its
 * user's share, a pass later where that is spent. Called from the pass and from the commands, in the scanner
 * thread only; the lists are the scanner's alone.
 */
#include <stdatomic.h>

#include "scanner/private.h"
#include "timeline.h"

static void link_to(struct scanner_slot *imp, struct scanner_slot *src)
{
	imp->imp_src = src;
	LIST_PREPEND(imp, src->imp_first, imp);
	imp->sess->nlinked++;
	src->sess->nlinked++;
}

static void unlink_from(struct scanner_slot *imp)
{
	struct scanner_slot *src = imp->imp_src;

	if (!src)
		return;
	LIST_REMOVE(imp, src->imp_first, imp);
	imp->imp_src = NULL;
	imp->sess->nlinked--;
	src->sess->nlinked--;
}

/* The doorbells owed: a list through the importers themselves (the loop
 * allocates nothing), each importer on it once, its count summed. */
static void owed_add(struct scanner *sc, struct scanner_slot *imp, uint64_t n)
{
	imp->owed += n;
	if (imp->owed_queued)
		return;
	imp->owed_queued = 1;
	imp->owed_next = NULL;
	imp->owed_prev = sc->owed_tail;
	if (sc->owed_tail)
		sc->owed_tail->owed_next = imp;
	else
		sc->owed_head = imp;
	sc->owed_tail = imp;
	imp->sess->nowed++;
}

static void owed_del(struct scanner *sc, struct scanner_slot *imp)
{
	if (!imp->owed_queued)
		return;
	if (imp->owed_prev)
		imp->owed_prev->owed_next = imp->owed_next;
	else
		sc->owed_head = imp->owed_next;
	if (imp->owed_next)
		imp->owed_next->owed_prev = imp->owed_prev;
	else
		sc->owed_tail = imp->owed_prev;
	imp->owed_prev = imp->owed_next = NULL;
	imp->owed_queued = 0;
	imp->owed = 0;
	imp->sess->nowed--;
}

/* Ring an importer's doorbell: its group's ring (rung once a pass under its
 * user's share, scanner/pass.c), or its own eventfd, owed until the pass's
 * end and written then under the importer's user's share and write budget,
 * as any slot's: one exported slot's many importers cost the pass no more
 * than their users' shares. */
static void ring(struct scanner *sc, struct scanner_slot *imp, uint64_t n)
{
	if (imp->group)
		ring_push(sc, imp);
	else
		owed_add(sc, imp, n);
}

void import_ring_owed(struct scanner *sc)
{
	struct scanner_slot *imp = sc->owed_head, *next;

	for (; imp; imp = next) {
		struct scanner_session *ss = imp->sess;
		enum scanner_broken why;

		next = imp->owed_next;
		if (atomic_load_explicit(&ss->broken, memory_order_relaxed)) {
			owed_del(sc, imp);
			continue;
		}
		if (!scan_may_write(sc, ss->user)) {
			scan_drop_if_over_share(sc, ss);
			continue; /* the next pass, which comes at once */
		}
		why = efd_write(sc, ss, imp->efd, imp->owed);
		owed_del(sc, imp);
		/* A costly importer is dropped as any costly writer is. */
		if (why != BROKEN_NONE)
			scanner_set_broken(sc, ss, why);
	}
}

/* Bring one importer up to its exporter's signalled value: the flag first
 * (a waiter that sees the record sees the value), then the record (before
 * the doorbell, as for any slot: a daemon killed in between counts nothing
 * twice), then the doorbell. */
static void follow(struct scanner *sc, struct scanner_slot *imp, uint32_t value)
{
	uint32_t due;

	if (!cuflag_tl_after(value, imp->signalled) ||
	    atomic_load_explicit(&imp->sess->broken, memory_order_relaxed))
		return;
	due = value - imp->signalled;
	__atomic_store_n(imp->flag, value, __ATOMIC_RELEASE);
	imp->persist->signalled = value;
	imp->signalled = imp->armed = value;
	atomic_fetch_add_explicit(&imp->sess->n_done, due, memory_order_relaxed);
	atomic_fetch_add_explicit(&imp->sess->n_wakes, 1, memory_order_relaxed);
	ring(sc, imp, due);
}

void import_fanout(struct scanner *sc, struct scanner_slot *src, uint32_t value)
{
	for (struct scanner_slot *imp = src->imp_first; imp; imp = imp->imp_next)
		follow(sc, imp, value);
}

/* The exporter's slot went: the importer's record says so, and its doorbell
 * rings so that a waiter looks. */
static void mark_gone(struct scanner *sc, struct scanner_slot *imp)
{
	unlink_from(imp);
	imp->persist->armed = CUFLAG_IMPORT_GONE;
	if (!atomic_load_explicit(&imp->sess->broken, memory_order_relaxed))
		ring(sc, imp, 1);
}

/* Whether src may be watched: held by a client the scanner still serves. */
static int src_alive(const struct scanner_slot *src)
{
	return src->owned && !src->retiring && !src->imported &&
	       !atomic_load_explicit(&src->sess->broken, memory_order_relaxed);
}

void import_add(struct scanner *sc, struct scanner_cmd *c)
{
	struct scanner_session *ss = c->sess;
	struct scanner_slot *s = &ss->slots[c->slot];
	struct scanner_slot *src = c->src_sess ? &c->src_sess->slots[c->src_slot] : NULL;

	s->flag = ss->flags + c->slot;
	s->persist = ss->states + c->slot;
	s->efd = c->efd;
	s->group = c->group;
	s->pend_idx = SCAN_NOT_PENDING;
	/* Not owned: arms the client queues for it are refused, never pending. */
	s->owned = 0;
	s->retiring = 0;
	s->sess = ss;
	s->imported = 1;
	s->imp_src = s->imp_prev = s->imp_next = NULL;
	if (!c->resume)
		c->start = src && src_alive(src) ? src->signalled : 0;
	s->signalled = s->armed = c->start;
	__atomic_store_n(s->flag, c->start, __ATOMIC_RELEASE);
	s->persist->signalled = c->start;
	s->persist->armed = CUFLAG_IMPORT_LINKED;
	if (!c->resume || src)
		import_link(sc, c);
}

void import_link(struct scanner *sc, struct scanner_cmd *c)
{
	struct scanner_slot *s = &c->sess->slots[c->slot];
	struct scanner_slot *src = c->src_sess ? &c->src_sess->slots[c->src_slot] : NULL;

	/* Freed again meanwhile: nothing to link. */
	if (!s->imported || s->imp_src)
		return;
	if (!src || !src_alive(src)) {
		mark_gone(sc, s);
		return;
	}
	/* A resumed importer's record names where it stopped: no earlier than
	 * the exporter's own record when this daemon took the exporter over
	 * (records of importers are written before their exporter's), no
	 * later than the exporter armed. One outside that was not written by
	 * a daemon: it starts from now, and is owed nothing. */
	if (cuflag_tl_after(src->base, s->signalled) || cuflag_tl_after(s->signalled, src->armed)) {
		s->signalled = s->armed = src->signalled;
		__atomic_store_n(s->flag, s->signalled, __ATOMIC_RELEASE);
		s->persist->signalled = s->signalled;
	}
	link_to(s, src);
	/* What the exporter completed while no daemon linked them. */
	follow(sc, s, src->signalled);
}

void import_slot_gone(struct scanner *sc, struct scanner_slot *s)
{
	owed_del(sc, s);
	if (s->imported) {
		unlink_from(s);
		s->imported = 0;
	}
	while (s->imp_first)
		mark_gone(sc, s->imp_first);
}

void import_session_gone(struct scanner *sc, struct scanner_session *ss)
{
	for (uint32_t i = 0; (ss->nlinked || ss->nowed) && i < ss->layout.nslots; i++)
		import_slot_gone(sc, &ss->slots[i]);
}
