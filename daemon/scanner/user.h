/* SPDX-License-Identifier: MIT */
/*
 * The scanner's part of a user, light enough for the user's accounting
 * (serve/users.h) to hold without the scanner's whole face.
 */
#ifndef CUFLAGD_SCANNER_USER_H
#define CUFLAGD_SCANNER_USER_H

#include <stdatomic.h>
#include <stdint.h>

#include "policy/budget.h"
#include "policy/fair-share.h"

struct scanner_slot;

/*
 * One user (uid) as the scanner sees it: what its eventfd writes cost and how
 * many of its slots are pending. Made and freed by the main thread (users.c),
 * which frees it only once no session of the scanner's refers to it; written
 * by the scanner only.
 */
struct scanner_user {
	struct write_budget budget;
	struct fair_share share;  /* its part of each pass (fair-share.h) */
	uint64_t cut_at_ns;       /* a write of this user's was cut short then */
	uint32_t pending;         /* its slots in the pending set */
	uint32_t hot;             /* of those, read by every pass (cold-sweep.h) */
	uint64_t swept_pass;      /* the pass swept_moved counts for, */
	uint32_t swept_moved;     /* slots of its the sweep made hot in it, their flags moved */
	uint32_t max_pending;     /* no more of its slots are pending at once */
	/* Slots with arms in flight that came with no room in the pending
	 * set (adopted after a restart, or freed before their flag landed):
	 * they wait here, oldest first, and move in as room frees up. Arms
	 * from the queue wait in the client's queue instead. */
	struct scanner_slot *wait_head, *wait_tail;
	uint32_t waiting;
	/* pending, for the main thread: what max_pending holds (its waiting
	 * slots, like its arms in the queue, wait for room) */
	_Atomic uint32_t n_pending;
};

#endif
