/* SPDX-License-Identifier: MIT */
/*
 * What one user's eventfd writes may cost the scanner.
 *
 * A slot's eventfd is a file the client holds too: it can register it in any
 * number of epoll instances, and every write by the scanner then runs one
 * kernel wake-up callback per watcher (about 70 ns each), inside the write,
 * with nothing to interrupt. So the scanner measures each write and charges
 * its cost to the user: a leaky bucket that drains at a tenth of real time
 * (a user may take 10 % of the scanner for ever) and holds at most cap_ns.
 *
 * What other clients wait for is a pass: the scanner writes a pass's
 * eventfds one after the other. So the charge is on a user's writes within
 * one pass, summed: each write may cost the allowance, and the pass as a
 * whole the pass allowance more, free. The sum catches many writes that are
 * each a little costly (256 epolls on each of 1024 eventfds); the pass
 * allowance lets one honest write that a busy machine made slow (a wake-up
 * that cost an inter-processor interrupt under virtualisation: 20-300 us
 * seen on a loaded 2-CPU virtual machine) go uncharged.
 *
 * Wall time alone would charge a write for the time the scanner thread was
 * preempted in it. So a write is timed on the cheap clock, and a pass that
 * looks costly is not charged but makes its user a suspect for a while: the
 * user's writes are then timed on the thread's CPU clock (a system call, only
 * for suspects), which preemption does not advance, and charged by that.
 */
#ifndef CUFLAGD_BUDGET_H
#define CUFLAGD_BUDGET_H

#include <stdint.h>

struct write_budget_cfg {
	uint64_t cap_ns;            /* --write-budget-us: most a user may run up */
	uint64_t allowance_ns;      /* each write may cost this, free */
	uint64_t pass_allowance_ns; /* and a user's writes in a pass this more */
	uint64_t suspect_for_ns;    /* a suspect is timed on the CPU clock this long */
};

/* A write to an eventfd with a watcher or two costs about 1 us of CPU; the
 * allowance leaves 20 times that, the pass allowance ten writes' worth more.
 * Sanitizer builds run every system call through interceptors, many times
 * slower: their allowances are scaled so that a test under them measures the
 * daemon, not the instrumentation. */
#if defined(__SANITIZE_THREAD__) || defined(__SANITIZE_ADDRESS__)
#define WRITE_BUDGET_SLOWDOWN 20
#else
#define WRITE_BUDGET_SLOWDOWN 1
#endif

#define WRITE_BUDGET_DEFAULTS(cap)                                                         \
	((struct write_budget_cfg){ .cap_ns = (cap) * WRITE_BUDGET_SLOWDOWN,               \
				    .allowance_ns = 20000 * WRITE_BUDGET_SLOWDOWN,         \
				    .pass_allowance_ns = 200000 * WRITE_BUDGET_SLOWDOWN,   \
				    .suspect_for_ns = 1000000000 })

/* Passes over by a quarter of the budget that come this often are charged,
 * cheap ones between them or not (below). */
#define WRITE_BUDGET_OFTEN 4
#define WRITE_BUDGET_OFTEN_NS 50000000ull

struct write_budget {
	uint64_t level_ns;         /* cost run up, draining */
	uint64_t at_ns;            /* when level_ns was brought up to date */
	uint64_t suspect_until_ns; /* writes measured on the CPU clock until then */
	/* The pass being summed: its number, what its writes cost (all on one
	 * clock: the sum starts again when the user becomes a suspect), how
	 * many, and how much of its cost over the allowances was charged. */
	uint64_t pass;
	uint64_t pass_cost_ns;
	uint64_t pass_charged_ns;
	uint32_t pass_writes;
	uint64_t pass_max_ns;      /* the costliest of them */
	uint8_t pass_cpu;          /* the sum is on the CPU clock */
	uint8_t pass_over;         /* it went over the allowances */
	uint8_t pass_big;          /* by a quarter of the budget */
	uint32_t streak;           /* CPU-timed passes over the allowances in a row */
	/* When the last WRITE_BUDGET_OFTEN CPU-timed passes over by a quarter
	 * of the budget were, cheap ones between them or not (a ring). */
	uint64_t costly_at_ns[WRITE_BUDGET_OFTEN];
	uint32_t costly_n;
	/* What the wall-clock pass that made the suspect cost over the
	 * allowances: charged too with the first CPU-timed pass that is
	 * charged, forgotten if one shows a pass within the allowances. */
	uint64_t unconfirmed_ns;
};

/* A pass is charged from the third costly one in a row, or the fourth over
 * by a quarter of the budget within WRITE_BUDGET_OFTEN_NS (cheap ones
 * between them: an attacker alternating a costly eventfd with a cheap one),
 * or at once when it is over by the whole budget without its costliest
 * write (with the wall-clock pass before that made the suspect): a costly
 * eventfd (epoll watchers) costs every write to it, while a virtual CPU the
 * host took away for a moment, or interrupts taken inside the write (their
 * time shows on the thread's CPU clock too), cost one write now and then. */
#define WRITE_BUDGET_STREAK 3

/* How many of the user's last WRITE_BUDGET_OFTEN passes over by a quarter of
 * the budget came within WRITE_BUDGET_OFTEN_NS before now_ns: all of them
 * is "often" (budget.c), and the log says how many. */
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
 * Charge one write, made in scanner pass number pass. cost_ns: its CPU time
 * if the user was a suspect, else its wall time; cpu_timed says which.
 * Returns 1 when the write took its user's pass over the allowances and the
 * user over its cap: the writer is to be dropped.
 */
int budget_charge(struct write_budget *b, const struct write_budget_cfg *cfg, uint64_t cost_ns,
		  int cpu_timed, uint64_t now_ns, uint64_t pass);

#endif
