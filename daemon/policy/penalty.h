/* SPDX-License-Identifier: MIT */
/*
 * Users whose clients made the scanner's eventfd writes block. Such a write
 * costs every other client a stall (up to the scanner's 2 ms tick), and a
 * client can set one up again on every new connection. One or two of them
 * are let go (the client is dropped, that is all); from the third within a
 * minute of the one before, the user's new connections are refused for a
 * while: 1 s, doubling with every further one up to 60 s. The connections
 * the user already has are left alone.
 */
#ifndef CUFLAGD_PENALTY_H
#define CUFLAGD_PENALTY_H

#include <stdint.h>
#include <sys/types.h>

#define PENALTY_USERS 32

struct uid_penalties {
	struct {
		uid_t uid;
		uint32_t strikes;
		uint64_t until_ms, last_ms; /* last_ms 0: entry unused */
	} e[PENALTY_USERS];
};

/* Count one against uid at now_ms; returns how long the user's new
 * connections are refused from now, in ms (0: not refused). */
uint64_t penalty_strike(struct uid_penalties *p, uid_t uid, uint64_t now_ms);
/* How long uid is still refused at now_ms (0: not). */
uint64_t penalty_left_ms(const struct uid_penalties *p, uid_t uid, uint64_t now_ms);

#endif
