/* SPDX-License-Identifier: MIT */
#include "policy/penalty.h"

#define FREE_STRIKES 2u /* let go: one mistake, or a test, is not an attack */
#define FIRST_MS 1000u
#define MAX_MS 60000u
#define FORGET_MS 60000u /* strikes further apart than this start over */

uint64_t penalty_strike(struct uid_penalties *p, uid_t uid, uint64_t now_ms)
{
	unsigned pick = 0;
	uint64_t ms;

	/* The user's entry, else the one used longest ago (a fixed table: a
	 * flood of users cannot make the daemon allocate). */
	for (unsigned i = 0; i < PENALTY_USERS; i++) {
		if (p->e[i].last_ms && p->e[i].uid == uid) {
			pick = i;
			break;
		}
		if (p->e[i].last_ms < p->e[pick].last_ms)
			pick = i;
	}
	if (!p->e[pick].last_ms || p->e[pick].uid != uid ||
	    now_ms - p->e[pick].last_ms > FORGET_MS)
		p->e[pick].strikes = 0;
	p->e[pick].uid = uid;
	p->e[pick].strikes++;
	if (p->e[pick].strikes <= FREE_STRIKES)
		ms = 0;
	else if (p->e[pick].strikes - FREE_STRIKES > 7)
		ms = MAX_MS;
	else
		ms = (uint64_t)FIRST_MS << (p->e[pick].strikes - FREE_STRIKES - 1);
	if (ms > MAX_MS)
		ms = MAX_MS;
	p->e[pick].until_ms = now_ms + ms;
	p->e[pick].last_ms = now_ms ? now_ms : 1;
	return ms;
}

uint64_t penalty_left_ms(const struct uid_penalties *p, uid_t uid, uint64_t now_ms)
{
	for (unsigned i = 0; i < PENALTY_USERS; i++)
		if (p->e[i].last_ms && p->e[i].uid == uid)
			return p->e[i].until_ms > now_ms ? p->e[i].until_ms - now_ms : 0;
	return 0;
}
