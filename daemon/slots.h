/* SPDX-License-Identifier: MIT */
/*
 * The slots of one client, as the main thread keeps them: each one's state,
 * its eventfd and where its next timeline starts, and a stack of free ids.
 */
#ifndef CUFLAGD_SLOTS_H
#define CUFLAGD_SLOTS_H

#include <stdint.h>

enum slot_state {
	SLOT_FREE = 0,
	SLOT_LIVE,     /* held by the client */
	SLOT_RETIRING, /* freed; the scanner hands it back once no write can land */
};

struct slot_table {
	uint32_t n;
	uint8_t *state;       /* enum slot_state */
	int *efd;             /* the slot's eventfd, or -1 (none, or grouped) */
	uint32_t *group;      /* 0, or the id + 1 of the slot's group */
	uint32_t *next_start; /* the start value of its next hand-out */
	uint32_t *free_stack; /* free ids, low ids on top */
	uint32_t *free_pos;   /* where each free id sits in free_stack */
	uint32_t nfree, nlive, nretiring;
	/* Groups: each one's eventfd (-1: not made) and live slots. */
	uint32_t ngroups;
	int *group_efd;
	uint32_t *group_live;
};

/* n free slots and ngroups groups not made. 0 or -ENOMEM (t is then empty). */
int slot_table_init(struct slot_table *t, uint32_t n, uint32_t ngroups);
void slot_table_free(struct slot_table *t);

/* Pop the lowest free id (nfree > 0), or take a given one (after a restart
 * the client names the ids it held), in constant time; give one back. */
uint32_t slot_table_take(struct slot_table *t);
void slot_table_take_id(struct slot_table *t, uint32_t id);
void slot_table_give(struct slot_table *t, uint32_t id);

/* Whether group (0, or an id + 1) names no group or one that was made. */
int slot_table_group_ok(const struct slot_table *t, uint32_t group);

/* Whether ids[0..count) name slots in state want, each once. */
int slot_table_all_in(const struct slot_table *t, const uint32_t *ids, uint32_t count,
		      enum slot_state want);

#endif
