/* SPDX-License-Identifier: MIT */
/*
 * The slots of one client, as the main thread keeps them, and their life:
 *
 *   FREE --slot_open--> LIVE --slot_retire--> RETIRING --slot_reclaim--> FREE
 *
 * LIVE: held by the client (ALLOC, or ADOPT after a restart); RETIRING:
 * freed by the client, handed back by the scanner once no write of the old
 * timeline can land (then FREE, its next timeline further on). Every
 * transition is one of these functions, and so is every count that follows
 * from one: the table's own, and the fds its user holds (users.h): a slot of
 * its own eventfd costs one from slot_open until slot_reclaim, a grouped
 * slot none (slot_fd_cost), a made group one until it is unmade.
 */
#ifndef CUFLAGD_SLOTS_H
#define CUFLAGD_SLOTS_H

#include <stdint.h>

#include "users.h"

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
	/* Whose fds these are. */
	struct users *users;
	struct user *user;
};

/* n free slots and ngroups groups not made, of user u. 0 or -ENOMEM (t is
 * then empty). */
int slot_table_init(struct slot_table *t, uint32_t n, uint32_t ngroups, struct users *users,
		    struct user *u);
void slot_table_free(struct slot_table *t);

/* What opening count slots in group (0, or an id + 1) costs in fds. */
static inline uint32_t slot_fd_cost(uint32_t group, uint32_t count)
{
	return group ? 0 : count;
}

/* Whether the table's user may take nfds more fds (slot_fd_cost, or 1 for
 * a group): its quota and share (users_admit). 0, or -EDQUOT / -EMFILE with
 * *why set. */
int slot_fds_may_take(const struct slot_table *t, uint32_t nfds, const char **why);

/* FREE -> LIVE: the lowest free id (id SLOT_ANY, nfree > 0) or the one
 * named (a resume names the ids it held), in constant time, with its
 * eventfd (-1 in a group). Returns the id. */
#define SLOT_ANY UINT32_MAX
uint32_t slot_open(struct slot_table *t, uint32_t id, int efd, uint32_t group);
/* LIVE -> RETIRING. */
void slot_retire(struct slot_table *t, uint32_t id);
/* RETIRING -> FREE; its next hand-out starts at next_start. Returns its
 * eventfd (or -1), now the caller's to close. */
int slot_reclaim(struct slot_table *t, uint32_t id, uint32_t next_start);
/* A LIVE slot of its own signals efd from now on (BIND); the old eventfd
 * comes back from the scanner. -EOPNOTSUPP for a grouped slot. */
int slot_bind(struct slot_table *t, uint32_t id, int efd);

/* A group made with efd, or unmade (efd -1; it has no live slots). */
void slot_group_set(struct slot_table *t, uint32_t id, int efd);

/* Every eventfd of the table to close(arg, fd), and its user's count of
 * them down by as many (at a drop or at exit). */
void slot_table_release(struct slot_table *t, void (*close_fd)(void *arg, int fd), void *arg);

/* Whether group (0, or an id + 1) names no group or one that was made. */
int slot_table_group_ok(const struct slot_table *t, uint32_t group);

/* Whether ids[0..count) name slots in state want, each once. */
int slot_table_all_in(const struct slot_table *t, const uint32_t *ids, uint32_t count,
		      enum slot_state want);

#endif
