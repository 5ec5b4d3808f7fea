/* SPDX-License-Identifier: MIT */
#include "budget.h"

int budget_charge(struct write_budget *b, const struct write_budget_cfg *cfg, uint64_t cost_ns,
		  int cpu_timed, uint64_t now_ns)
{
	uint64_t drained = now_ns > b->at_ns ? (now_ns - b->at_ns) / 10 : 0;

	b->level_ns = b->level_ns > drained ? b->level_ns - drained : 0;
	b->at_ns = now_ns;
	if (cost_ns <= cfg->allowance_ns) {
		if (cpu_timed)
			b->streak = 0;
		return 0;
	}
	if (!cpu_timed && cost_ns > cfg->suspect_ns) {
		/* Slow, or preempted: only the CPU clock can tell. Watch it. */
		b->suspect_until_ns = now_ns + cfg->suspect_for_ns;
		return 0;
	}
	if (cpu_timed) {
		b->suspect_until_ns = now_ns + cfg->suspect_for_ns;
		/* A write that took half the budget of CPU is charged at once:
		 * every other client waited that long, whatever came before. */
		if (++b->streak < WRITE_BUDGET_STREAK && cost_ns < cfg->cap_ns / 2)
			return 0;
	}
	b->level_ns += cost_ns - cfg->allowance_ns;
	return b->level_ns > cfg->cap_ns;
}
