/* SPDX-License-Identifier: MIT */
#include "serve/registry.h"

#include <stdint.h>

#include "serve/session-state.h"

void registry_link(struct registry *r, struct session *s)
{
	s->prev = NULL;
	s->next = r->head;
	if (r->head)
		r->head->prev = s;
	r->head = s;
}

void registry_bury(struct registry *r, struct session *s)
{
	if (s->prev)
		s->prev->next = s->next;
	else
		r->head = s->next;
	if (s->next)
		s->next->prev = s->prev;
	s->next = r->graveyard;
	r->graveyard = s;
}

struct session *registry_unbury(struct registry *r)
{
	struct session *s = r->graveyard;

	if (s)
		r->graveyard = s->next;
	return s;
}

static int is_which(const struct session *s, enum registry_which which)
{
	switch (which) {
	case REG_ALL:
		return 1;
	case REG_LIVE:
		return !s->dead;
	case REG_ATTACHED:
		return !s->dead && s->scan;
	}
	return 0;
}

void registry_each(struct registry *r, enum registry_which which,
		   void (*fn)(struct session *s, void *arg), void *arg)
{
	for (struct session *s = r->head, *n; s; s = n) {
		n = s->next; /* fn may take s out of the list */
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
	for (struct session *s = r->head; s; s = s->next)
		if (s->scan && s->region.dev == dev && s->region.ino == ino)
			return s;
	return NULL;
}

struct session *registry_find_addr(struct registry *r, const void *addr)
{
	uintptr_t a = (uintptr_t)addr;

	for (struct session *s = r->head; s; s = s->next)
		if (s->scan && s->region.map && a >= (uintptr_t)s->region.map &&
		    a - (uintptr_t)s->region.map < s->region.size)
			return s;
	return NULL;
}
