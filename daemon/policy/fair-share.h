/* SPDX-License-Identifier: MIT */
/*
 * Each user's share of a scanner pass: deficit round-robin over users.
 * What other clients wait for is a pass, and a pass writes one eventfd after
 * the other; so no user's writes may take more of a pass than a quantum of
 * write time. Each pass in which a user has writes tops its credit up by one
 * quantum (a credit left over is not hoarded: it starts again at one
 * quantum); each write is charged what it cost, with no free allowance (on
 * the wall clock, or the CPU clock for a suspect of the write budget: the
 * scanner preempted is no user's cost; write-police.h). A user out of credit has the rest of its writes carried to
 * the next pass (its flags stay advanced: nothing is lost, its completions
 * just come a pass later), and a write that cost more than the credit is
 * paid back over the passes that follow, while everyone else is served.
 * So one user's many cheap writes (or few costly ones) delay another user's
 * wake by about a quantum per pass, however many slots it holds, and this
 * bounds writes that are each moderately costly whatever makes them so: a
 * few hundred epoll watchers on each eventfd, or a machine whose wake-ups
 * are costly (an inter-processor interrupt under virtualisation). Neither
 * is dropped for it: their writes cost alike, and the share is what keeps
 * them from taking the pass. One write beyond any wake-up is the budget's
 * (budget.h).
 *
 * A user whose writes have wanted more than its share for FAIR_SHARE_DROP_NS
 * in a row (every pass carrying some), at FAIR_SHARE_DROP_WRITE_NS a write
 * or more on average, is dropped as a costly writer: as costly on average
 * as a write the budget calls costly, it holds the scanner for seconds
 * however its writes are spread. Many writes alone are no fault: one user
 * streaming hundreds of thousands of completions a second from thousands of
 * slots, or waking threads on other CPUs of a virtual machine, wants more
 * than a quantum of every pass for as long as it streams, and is served in
 * full, a share a pass (docs/RELIABILITY.md).
 */
#ifndef CUFLAGD_FAIR_SHARE_H
#define CUFLAGD_FAIR_SHARE_H

#include <stdint.h>

#include "policy/budget.h"
#include "slowdown.h"

/* Scaled like the write budget's allowances in sanitizer builds, where
 * every write runs through interceptors many times slower (slowdown.h). */
#define FAIR_SHARE_QUANTUM_NS (50000 * CUFLAG_SLOWDOWN)
#define FAIR_SHARE_DROP_NS (2000000000ull * CUFLAG_SLOWDOWN)
#define FAIR_SHARE_DROP_WRITE_NS WRITE_BUDGET_ALLOWANCE_NS

struct fair_share {
	int64_t credit_ns;
	uint64_t pass;  /* the pass credit_ns was topped up for */
	int carried;    /* a write of this pass was carried to the next */
	uint64_t carried_since_ns; /* every pass since then carried some (0: not) */
	uint64_t carried_cost_ns;  /* what its writes cost since then, and how */
	uint64_t carried_writes;   /* many (set when carried_since_ns is) */
};

/* Whether the user may make a write in pass number pass. */
static inline int share_may_write(struct fair_share *s, uint64_t pass, int64_t quantum_ns)
{
	if (s->pass != pass) {
		/* Passes in between without a write of this user served it. */
		if (!s->carried || s->pass + 1 != pass)
			s->carried_since_ns = 0;
		s->carried = 0;
		s->pass = pass;
		s->credit_ns = s->credit_ns < 0 ? s->credit_ns + quantum_ns : quantum_ns;
	}
	if (s->credit_ns > 0)
		return 1;
	s->carried = 1;
	return 0;
}

/* A write of the user's was carried at now_ns: whether it has wanted more
 * than its share for too long, with writes costly on average. */
static inline int share_carried_too_long(struct fair_share *s, uint64_t now_ns)
{
	if (!s->carried_since_ns) {
		s->carried_since_ns = now_ns;
		s->carried_cost_ns = s->carried_writes = 0;
	}
	return now_ns - s->carried_since_ns > FAIR_SHARE_DROP_NS && s->carried_writes &&
	       s->carried_cost_ns >= s->carried_writes * FAIR_SHARE_DROP_WRITE_NS;
}

/* A write of the user's cost cost_ns. */
static inline void share_charge(struct fair_share *s, uint64_t cost_ns)
{
	s->credit_ns -= cost_ns > INT64_MAX / 2 ? INT64_MAX / 2 : (int64_t)cost_ns;
	if (s->carried_since_ns) {
		s->carried_cost_ns += cost_ns;
		s->carried_writes++;
	}
}

#endif
