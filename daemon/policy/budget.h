/* SPDX-License-Identifier: MIT */
/*
 * When one user's eventfd writes are an attack on the scanner.
 *
 * A slot's eventfd is a file the client holds too: it can register it in any
 * number of epoll instances, and every write by the scanner then runs one
 * kernel wake-up callback per watcher, inside the write, with nothing to
 * interrupt. What a write costs is also the machine's: a write that wakes a
 * thread blocked on another CPU sends an inter-processor interrupt, which
 * under virtualisation can cost the writer more than many watchers do
 * (docs/bench-log/2026-12-01-write-budget.md has the figures).
 * Per-write cost alone cannot tell a few hundred watchers from such a
 * wake-up, and need not: many writes that are each moderately costly are
 * bounded by the fair share (fair-share.h: a quantum of write time per user
 * per pass, the rest carried to the next), whoever makes them costly.
 *
 * What the share cannot bound is one write: it runs to its end, however
 * long, while every other client waits. So a write is costly only when it
 * costs more than the allowance, set far beyond what any wake-up costs; a
 * costly write charges what it cost over the allowance to its user's level,
 * a leaky bucket that drains at a tenth of real time, and a user whose level
 * goes over cap_ns (--write-budget-us) is dropped, provided the level holds
 * WRITE_BUDGET_STREAK costly writes or more (it was not empty between them):
 * one write is no proof (a loaded virtual machine has charged an honest one
 * milliseconds of the thread's CPU, interrupts taken inside it included, and
 * a host without steal accounting charges the time the scanner's virtual CPU
 * was away; so the client whose write it was must also have made costly
 * writes by its own count: budget_own_costly),
 * while watchers cost every write to their eventfd, again and again. A user
 * dropped so is proven: for WRITE_BUDGET_REPEAT_NS its writes are timed on
 * the CPU clock and its first costly one drops again (a new connection with
 * the same watchers costs the others one write, not three).
 *
 * Wall time alone would charge a write for the time the scanner thread was
 * preempted in it. So a write is timed on the cheap clock, and a write over
 * the allowance is not charged but makes its user a suspect for a while: the
 * user's writes are then timed on the thread's CPU clock (a system call, only
 * for suspects), which preemption does not advance, and charged by that.
 */
#ifndef CUFLAGD_BUDGET_H
#define CUFLAGD_BUDGET_H

#include <stdint.h>

#include "slowdown.h"

struct write_budget_cfg {
	uint64_t cap_ns;         /* --write-budget-us: most a user's level may hold */
	uint64_t allowance_ns;   /* a write may cost this, free */
	uint64_t suspect_for_ns; /* a suspect is timed on the CPU clock this long */
};

/* The allowance is several times the costliest wake-up measured on a 2-CPU
 * virtual machine (tests/wake-cost.c; figures in
 * docs/bench-log/2026-12-01-write-budget.md), and a fraction of what an
 * eventfd in tens of thousands of epolls costs a write. Sanitizer builds
 * scale it (shared/slowdown.h). */
#define WRITE_BUDGET_ALLOWANCE_NS (250000ull * CUFLAG_SLOWDOWN)

#define WRITE_BUDGET_DEFAULTS(cap)                                                         \
	((struct write_budget_cfg){ .cap_ns = (cap) * CUFLAG_SLOWDOWN,                     \
				    .allowance_ns = WRITE_BUDGET_ALLOWANCE_NS,             \
				    .suspect_for_ns = 1000000000 })

/* Costly writes a level must hold before its user is dropped. */
#define WRITE_BUDGET_STREAK 3
/* How long a user dropped for its writes is dropped at its first costly
 * one (as long as the daemon keeps a user after its last connection). */
#define WRITE_BUDGET_REPEAT_NS 10000000000ull
/* The log says how many of the user's last WRITE_BUDGET_OFTEN costly writes
 * came within WRITE_BUDGET_OFTEN_NS (budget_costly_lately). */
#define WRITE_BUDGET_OFTEN 4
#define WRITE_BUDGET_OFTEN_NS 50000000ull

struct write_budget {
	uint64_t level_ns;         /* cost over the allowance run up, draining */
	uint64_t at_ns;            /* when level_ns was brought up to date */
	uint64_t suspect_until_ns; /* writes measured on the CPU clock until then */
	uint32_t held;             /* costly writes since the level was empty */
	uint32_t streak;           /* CPU-timed costly writes in a row */
	uint64_t last_costly_ns;   /* what the last costly write cost */
	uint64_t dropped_at_ns;    /* when its writes last dropped it (0: never) */
	int repeat;                /* the last drop was by WRITE_BUDGET_REPEAT_NS */
	/* When the last WRITE_BUDGET_OFTEN costly writes were (a ring). */
	uint64_t costly_at_ns[WRITE_BUDGET_OFTEN];
	uint32_t costly_n;
};

/* One client's own writes, cheap and costly (CPU-timed over the allowance),
 * for the verdict (budget_own_costly). */
struct write_tally {
	uint64_t cheap, costly;
};

/* A write of the client's was charged cost_ns (its CPU time when costly). */
static inline void budget_tally(struct write_tally *t, uint64_t cost_ns, uint64_t allowance_ns)
{
	if (cost_ns > allowance_ns)
		t->costly++;
	else
		t->cheap++;
}

/* Share of a client's writes that must be costly by its own count before
 * its user's budget may drop it (1 in WRITE_BUDGET_OWN_SHARE or more). */
#define WRITE_BUDGET_OWN_SHARE 16

/*
 * Whether a client whose write took its user over the budget is to be
 * dropped, by its own writes: it made WRITE_BUDGET_STREAK costly ones (one,
 * where repeat: its user was dropped for its writes lately, budget.h's
 * WRITE_BUDGET_REPEAT_NS), and at least one in WRITE_BUDGET_OWN_SHARE of its
 * writes was costly. A thread's CPU clock runs on while a virtual CPU is
 * descheduled on a host that accounts no steal time: a client whose writes
 * are cheap by its own count, with a few of them charged for the scanner's
 * time away, is no attacker and stays, however its user's level stands;
 * an eventfd in many epolls makes every write to it costly.
 */
static inline int budget_own_costly(const struct write_tally *t, int repeat)
{
	return t->costly >= (repeat ? 1u : (uint64_t)WRITE_BUDGET_STREAK) &&
	       t->costly * WRITE_BUDGET_OWN_SHARE >= t->cheap;
}

/* How many of the user's last WRITE_BUDGET_OFTEN costly writes came within
 * WRITE_BUDGET_OFTEN_NS before now_ns (for the log). */
static inline uint32_t budget_costly_lately(const struct write_budget *b, uint64_t now_ns)
{
	uint32_t n = 0;

	for (uint32_t i = 0; i < WRITE_BUDGET_OFTEN && i < b->costly_n; i++)
		n += now_ns - b->costly_at_ns[i] <= WRITE_BUDGET_OFTEN_NS;
	return n;
}

/* Whether the next write of this user is to be timed on the CPU clock. */
static inline int budget_suspect(const struct write_budget *b, uint64_t now_ns)
{
	return now_ns < b->suspect_until_ns;
}

/*
 * Charge one write. cost_ns: its CPU time if the user was a suspect, else
 * its wall time; cpu_timed says which. Returns 1 when the write took its
 * user over the cap with WRITE_BUDGET_STREAK costly writes or more, or was
 * costly within WRITE_BUDGET_REPEAT_NS of such a drop: the writer is to be
 * dropped.
 */
int budget_charge(struct write_budget *b, const struct write_budget_cfg *cfg, uint64_t cost_ns,
		  int cpu_timed, uint64_t now_ns);

#endif
