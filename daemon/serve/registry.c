/* SPDX-License-Identifier: MIT */
#include "serve/registry.h"

#include <stdint.h>

#include "serve/session-state.h"

void registry_link(struct registry *r, struct session *s)
{
	LIST_PREPEND(reg, r->head, s);
}

void registry_bury(struct registry *r, struct session *s)
{
	LIST_REMOVE(reg, r->head, s);
	LIST_PREPEND(reg, r->graveyard, s);
}

struct session *registry_unbury(struct registry *r)
{
	struct session *s = r->graveyard;

	if (s)
		LIST_REMOVE(reg, r->graveyard, s);
	return s;
}

static int is_which(const struct session *s, enum registry_which which)
{
	switch (which) {
	case REG_ALL:
		return 1;
	case REG_LIVE:
		return !session_dead(s);
	case REG_ATTACHED:
		return s->state == SESSION_ADOPTING || s->state == SESSION_REGION;
	}
	return 0;
}

void registry_each(struct registry *r, enum registry_which which,
		   void (*fn)(struct session *s, void *arg), void *arg)
{
	for (struct session *s = r->head, *n; s; s = n) {
		n = s->reg_next; /* fn may take s out of the list */
		if (is_which(s, which))
			fn(s, arg);
	}
}

struct session *registry_find_region(struct registry *r, dev_t dev, ino_t ino)
{
	/* A dropped session counts until the scanner has let go of its region
	 * (it is buried then): a resume attempt that gave up on its connection
	 * and tries again must not have its slots adopted, and its queue read,
	 * while the scanner may still signal them and read that queue for the
	 * session before. */
	for (struct session *s = r->head; s; s = s->reg_next)
		if (s->scan && s->region.dev == dev && s->region.ino == ino)
			return s;
	return NULL;
}

struct session *registry_find_addr(struct registry *r, const void *addr)
{
	uintptr_t a = (uintptr_t)addr;

	for (struct session *s = r->head; s; s = s->reg_next)
		if (s->scan && s->region.map && a >= (uintptr_t)s->region.map &&
		    a - (uintptr_t)s->region.map < s->region.size)
			return s;
	return NULL;
}
