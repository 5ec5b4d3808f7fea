/* SPDX-License-Identifier: MIT */
/*
 * Stuck work: a slot that has waited (since it was armed, or completed last)
 * longer than --stuck-ms. A stream that will never finish, a hung kernel, a
 * client that armed and never enqueued the write: only the client can tell
 * which, but the daemon sees that it waits. The main loop looks every tick,
 * counts each client's stuck slots and logs each one once per wait, at most
 * a few lines per client a minute; cuflagctl stuck lists them.
 */
#ifndef CUFLAGD_STUCK_H
#define CUFLAGD_STUCK_H

#include <stdint.h>

struct server;
struct session;
struct request;

/* How long client o's slots have waited, now: how many longer than
 * stuck_ns, and the longest wait (0: none waits). */
void stuck_scan(const struct session *o, uint64_t now_ns, uint64_t stuck_ns, uint32_t *stuck,
		uint64_t *oldest_ns);

/* Every tick: count and log stuck slots (nothing with --no-metrics). */
void stuck_tick(struct server *srv);

/* The STUCK request (request.h's handler contract). */
int req_stuck(struct server *srv, struct session *s, struct request *req);

#endif
