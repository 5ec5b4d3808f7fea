/* SPDX-License-Identifier: MIT */
#include "policy/budget.h"

int budget_charge(struct write_budget *b, const struct write_budget_cfg *cfg, uint64_t cost_ns,
		  int cpu_timed, uint64_t now_ns)
{
	uint64_t drained = now_ns > b->at_ns ? (now_ns - b->at_ns) / 10 : 0;

	b->level_ns = b->level_ns > drained ? b->level_ns - drained : 0;
	b->at_ns = now_ns;
	if (!b->level_ns)
		b->held = 0; /* costly writes that far apart are no attack */
	if (cost_ns <= cfg->allowance_ns) {
		/* Cheap, or a wake-up: the fair share bounds what it costs. */
		if (cpu_timed)
			b->streak = 0;
		return 0;
	}
	/* Slow on the wall clock, or preempted: only the CPU clock can tell.
	 * Watch it from the next write on. */
	b->suspect_until_ns = now_ns + cfg->suspect_for_ns;
	if (!cpu_timed)
		return 0;
	b->streak++;
	b->held++;
	b->last_costly_ns = cost_ns;
	b->costly_at_ns[b->costly_n++ % WRITE_BUDGET_OFTEN] = now_ns;
	b->level_ns += cost_ns - cfg->allowance_ns;
	b->repeat = b->dropped_at_ns && now_ns - b->dropped_at_ns < WRITE_BUDGET_REPEAT_NS;
	if (!b->repeat && !(b->level_ns > cfg->cap_ns && b->held >= WRITE_BUDGET_STREAK))
		return 0;
	b->dropped_at_ns = now_ns;
	if (b->suspect_until_ns < now_ns + WRITE_BUDGET_REPEAT_NS)
		b->suspect_until_ns = now_ns + WRITE_BUDGET_REPEAT_NS;
	return 1;
}
