/* SPDX-License-Identifier: MIT */
/*
 * Stuck work: a slot that has waited (since it was armed, or completed last)
 * longer than --stuck-ms. A stream that will never finish, a hung kernel, a
 * client that armed and never enqueued the write: only the client can tell
 * which, but the daemon sees that it waits. The main loop looks every tick,
 * counts each client's stuck slots and logs each one once per wait, at most
 * a few lines per client a minute; cuflagctl stuck lists them (the STUCK
 * answer: queries.c).
 */
#ifndef CUFLAGD_STUCK_H
#define CUFLAGD_STUCK_H

#include <stdint.h>

#include "cuflag-proto.h"
#include "policy/loop-price.h"

struct server;
struct session;

/* How long client o's slots have waited, now: how many longer than
 * stuck_ns, and the longest wait (0: none waits). */
void stuck_scan(const struct session *o, uint64_t now_ns, uint64_t stuck_ns, uint32_t *stuck,
		uint64_t *oldest_ns);

/* Every tick: count and log stuck slots (nothing with --no-metrics). */
void stuck_tick(struct server *srv);

/* The longest waits seen so far, longest first; how many more there were. */
struct stuck_list {
	struct cuflag_msg_stuck_slot row[CUFLAG_STUCK_MAX];
	uint32_t n, more;
};

/* Client o's slots that waited longer than stuck_ns at now_ns into l; the
 * slots read are added to *w. */
void stuck_list_client(struct stuck_list *l, const struct session *o, uint64_t now_ns,
		       uint64_t stuck_ns, struct loop_work *w);

#endif
