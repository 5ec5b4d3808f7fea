/* SPDX-License-Identifier: MIT */
/*
 * Every connection the daemon has, live or dying, and the ones dropped in
 * the event batch being handled (the graveyard: freed after it, since an
 * event for one may still wait in the batch). The rest of the daemon reaches
 * sessions through these calls, never through the list itself.
 */
#ifndef CUFLAGD_REGISTRY_H
#define CUFLAGD_REGISTRY_H

#include <sys/types.h>

struct session;

struct registry {
	struct session *head;      /* every connection, live or dying */
	struct session *graveyard; /* unlinked, freed after the current event batch */
};

/* Which sessions registry_each() visits. */
enum registry_which {
	REG_ALL,      /* every one, dying ones included (at exit) */
	REG_LIVE,     /* not dropped */
	REG_ATTACHED, /* not dropped, holding a region */
};

void registry_link(struct registry *r, struct session *s);
/* Out of the list and into the graveyard. */
void registry_bury(struct registry *r, struct session *s);
/* The first session of the graveyard, taken out of it; NULL when empty. */
struct session *registry_unbury(struct registry *r);

/* fn(s, arg) for each session of which; fn may drop or bury s. */
void registry_each(struct registry *r, enum registry_which which,
		   void (*fn)(struct session *s, void *arg), void *arg);

/* The session holding the region of file (dev, ino), or NULL: a live one, or
 * a dropped one the scanner has not let go of yet. */
struct session *registry_find_region(struct registry *r, dev_t dev, ino_t ino);
/* The live session whose region mapping holds addr, or NULL. */
struct session *registry_find_addr(struct registry *r, const void *addr);

#endif
