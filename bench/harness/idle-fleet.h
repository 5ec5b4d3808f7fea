/* SPDX-License-Identifier: MIT */
/*
 * An idle fleet: P processes that connect to a daemon and acquire S slots
 * each when told, hold them without arming any, and disconnect when told;
 * the teller waits for every answer, never a fixed time. perf-scale measures
 * latency with the fleet connected against without it.
 */
#ifndef CUFLAG_PERF_IDLE_FLEET_H
#define CUFLAG_PERF_IDLE_FLEET_H

#include <sys/types.h>

struct fleet {
	unsigned n;
	pid_t *pid;
	int *ctl;  /* our end of each child's control pipe: 'c' connects, EOF quits */
	int ready; /* every child writes 2 bytes here: 'r' 0, or 'e' errno */
};

/* Fork n processes for S slots each on sock, unconnected, while this process
 * has no other thread (f zeroed, ready -1, first); 0 or -errno. */
int fleet_spawn(struct fleet *f, unsigned n, unsigned S, const char *sock);
/* Tell every process c (connect and acquire) or d (disconnect) and wait for
 * all (at most 120 s); 0, the first error one reported, or -ETIMEDOUT. */
int fleet_tell(struct fleet *f, char what);
/* Hang up every process and reap it. */
void fleet_stop(struct fleet *f);

#endif
