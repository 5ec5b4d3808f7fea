/* SPDX-License-Identifier: MIT */
/*
 * The scanner applies the main thread's commands: sessions and slots come
 * and go, eventfds and groups change. Called from the pass, in the scanner
 * thread only.
 */
#include <errno.h>
#include <string.h>
#include <sys/epoll.h>

#include "base/log.h"
#include "scanner/private.h"
#include "timeline.h"

static void add_session(struct scanner *sc, struct scanner_session *ss, uint32_t head)
{
	/* The park set is the scanner's alone: it adds and removes the
	 * session's wake fd itself, so it never polls one that the main thread
	 * has closed (and whose number may already be reused). Edge-triggered,
	 * and never read: the client shares the file description, so it can
	 * clear O_NONBLOCK and drain the counter between our epoll_wait and a
	 * read, which would then block the scanner for ever. Every write of the
	 * client is a new edge. */
	struct epoll_event ev = { .events = EPOLLIN | EPOLLET, .data.fd = ss->wake_fd };
	if (epoll_ctl(sc->park_ep, EPOLL_CTL_ADD, ss->wake_fd, &ev) < 0) {
		/* Its wakes would be lost: the main thread drops it. */
		log_err("scanner: cannot watch a wake eventfd: %s", strerror(errno));
		scanner_set_broken(sc, ss, BROKEN_WATCH);
	} else {
		ss->watched = 1;
	}
	ss->list_idx = sc->nsessions;
	/* Where the daemon before us stopped reading (0 for a new region), read
	 * once by the main thread; checked against the tail like any value the
	 * client could have written. */
	ss->head_local = head;
	ss->live = 1;
	sc->sessions[sc->nsessions++] = ss;
}

/* Its groups whose doorbell was carried to the next pass go with it. */
static void unring_session(struct scanner *sc, struct scanner_session *ss)
{
	uint64_t kept = 0;

	for (uint64_t i = 0; i < sc->nrang; i++)
		if (sc->rang[i]->sess != ss)
			sc->rang[kept++] = sc->rang[i];
	sc->nrang = kept;
}

static void del_session(struct scanner *sc, struct scanner_session *ss)
{
	if (ss->nlinked || ss->nowed)
		import_session_gone(sc, ss);
	if (sc->nrang)
		unring_session(sc, ss);
	if (ss->watched && epoll_ctl(sc->park_ep, EPOLL_CTL_DEL, ss->wake_fd, NULL) < 0)
		log_err("scanner: cannot unwatch a wake eventfd: %s", strerror(errno));
	/* Retiring slots are pending (or waiting) too: with none, there is
	 * nothing to let go of (a client that comes and goes costs no pass
	 * over its slots here, where every other client waits). */
	for (uint32_t i = 0; (ss->pending || ss->waiting) && i < ss->layout.nslots; i++) {
		pending_del(sc, &ss->slots[i]);
		/* A retiring slot's command goes back with the session's. */
		if (ss->slots[i].retire_cmd) {
			mailbox_done(sc, ss->slots[i].retire_cmd);
			ss->slots[i].retire_cmd = NULL;
		}
		ss->slots[i].owned = 0;
	}
	if (ss->live) {
		struct scanner_session *last = sc->sessions[--sc->nsessions];
		sc->sessions[ss->list_idx] = last;
		last->list_idx = ss->list_idx;
		ss->live = 0;
	}
}

static void add_slot(struct scanner *sc, struct scanner_session *ss, const struct scanner_cmd *c)
{
	struct scanner_slot *s = &ss->slots[c->slot];

	s->flag = ss->flags + c->slot;
	s->persist = ss->states + c->slot;
	s->efd = c->efd;
	s->group = c->group;
	s->signalled = s->base = c->start;
	s->armed = c->armed;
	s->pend_idx = SCAN_NOT_PENDING;
	memset(&s->timing, 0, sizeof(s->timing));
	/* Its kernels are likely its client's others. */
	if (ss->hint.lat_ns)
		predict_seed(&s->timing, &ss->hint);
	s->owned = 1;
	s->retiring = 0;
	s->sess = ss;
	s->persist->signalled = s->signalled;
	s->persist->armed = s->armed;
	/* Adopted with arms in flight: within its user's share like any arm. */
	if (s->armed != s->signalled)
		pending_add_or_wait(sc, s);
}

/* Returns 1 when the command goes back now, 0 when it waits for the flag. */
static int del_slot(struct scanner *sc, struct scanner_session *ss, struct scanner_cmd *c)
{
	struct scanner_slot *s = &ss->slots[c->slot];

	import_slot_gone(sc, s);
	/* Arms the client queued before it freed the slot still count (a session
	 * not added yet, still adopting its slots, has none read). */
	if (ss->live)
		scanner_drain_queue(sc, ss, 1);
	s->owned = 0;
	c->final_armed = s->armed;
	if (scanner_slot_settled(s)) {
		pending_del(sc, s);
		return 1;
	}
	/* A device write may still land: watch it, hand back when it has
	 * (within its user's share: a flag wound back keeps it here). */
	s->retiring = 1;
	s->retire_cmd = c;
	pending_add_or_wait(sc, s);
	return 0;
}

/* Apply one command; 1 when it goes back to the main thread now. */
static int apply_cmd(struct scanner *sc, struct scanner_cmd *c)
{
	struct scanner_session *ss = c->sess;

	switch (c->op) {
	case SCAN_ADD_SESSION:
		add_session(sc, ss, c->start);
		return 1;
	case SCAN_DEL_SESSION:
		del_session(sc, ss);
		return 1;
	case SCAN_ADD_SLOT:
		add_slot(sc, ss, c);
		return 1;
	case SCAN_DEL_SLOT:
		return del_slot(sc, ss, c);
	case SCAN_SET_EFD: {
		int old = ss->slots[c->slot].efd;
		ss->slots[c->slot].efd = c->efd;
		c->efd = old;
		return 1;
	}
	case SCAN_SET_GROUP: {
		struct scanner_group *g = &ss->groups[c->slot];
		int old = g->efd;
		/* Go on from the ring as it is (a resumed one from where the
		 * daemon before us stopped; read once, the client's head is
		 * checked against it at every record). */
		g->tail = g->ring->tail;
		g->overflows = g->ring->overflows;
		g->efd = c->efd;
		c->efd = old;
		return 1;
	}
	case SCAN_ADD_IMPORT:
		import_add(sc, c);
		return 1;
	case SCAN_LINK_IMPORT:
		import_link(sc, c);
		return 1;
	}
	return 1;
}

void scanner_apply_cmds(struct scanner *sc)
{
	struct scanner_cmd *list = mailbox_take(sc);

	while (list) {
		struct scanner_cmd *c = list;
		list = list->next;
		if (apply_cmd(sc, c))
			mailbox_done(sc, c);
	}
}
