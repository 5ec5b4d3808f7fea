/* SPDX-License-Identifier: MIT */
#include "budget.h"

/* Start summing a new pass (or the same pass on the CPU clock). A CPU-timed
 * pass that stayed within the allowances ends the streak. */
static void pass_begin(struct write_budget *b, uint64_t pass, int cpu_timed)
{
	if (b->pass_cpu && !b->pass_over) {
		b->streak = 0;
		b->unconfirmed_ns = 0; /* that slow wall-clock pass was preemption */
	}
	b->pass = pass;
	b->pass_cost_ns = 0;
	b->pass_charged_ns = 0;
	b->pass_writes = 0;
	b->pass_max_ns = 0;
	b->pass_cpu = (uint8_t)cpu_timed;
	b->pass_over = 0;
	b->pass_big = 0;
}

int budget_charge(struct write_budget *b, const struct write_budget_cfg *cfg, uint64_t cost_ns,
		  int cpu_timed, uint64_t now_ns, uint64_t pass)
{
	uint64_t drained = now_ns > b->at_ns ? (now_ns - b->at_ns) / 10 : 0;
	uint64_t free_ns, over;

	b->level_ns = b->level_ns > drained ? b->level_ns - drained : 0;
	b->at_ns = now_ns;
	if (pass != b->pass || b->pass_cpu != !!cpu_timed)
		pass_begin(b, pass, !!cpu_timed);
	b->pass_cost_ns += cost_ns;
	b->pass_writes++;
	if (cost_ns > b->pass_max_ns)
		b->pass_max_ns = cost_ns;
	free_ns = cfg->pass_allowance_ns + (uint64_t)b->pass_writes * cfg->allowance_ns;
	if (b->pass_cost_ns <= free_ns)
		return 0;
	/* Slow on the wall clock, or preempted: only the CPU clock can tell.
	 * Watch it (the sum starts again on that clock with the next write). */
	b->suspect_until_ns = now_ns + cfg->suspect_for_ns;
	over = b->pass_cost_ns - free_ns;
	if (!cpu_timed) {
		if (over > b->unconfirmed_ns)
			b->unconfirmed_ns = over;
		return 0;
	}
	if (!b->pass_over) {
		b->pass_over = 1;
		b->streak++;
	}
	/* Often only counts passes over by a quarter of the budget: honest
	 * ones on a loaded VM go a little over many times a second (10 writes
	 * of 509 us in all, over by 109). */
	if (!b->pass_big && over >= cfg->cap_ns / 4) {
		b->pass_big = 1;
		b->costly_at_ns[b->costly_n++ % WRITE_BUDGET_OFTEN] = now_ns;
	}
	/* However costly, one write is no proof: an honest one has cost 2.3 ms
	 * of the thread's CPU right after a slow wall-clock one, on a loaded
	 * 2-CPU virtual machine (interrupts it took are charged to the thread),
	 * while watchers cost every write of theirs, again and again: in
	 * passes in a row, or in one pass (a round of the user's writes carried
	 * over many passes is summed as one, fair-share.h) that is over by the
	 * whole budget without its costliest write (honest rounds on that
	 * machine, loaded: 7 writes of 2.5 ms in all, 33 of 1 ms). */
	uint64_t rest = b->pass_cost_ns - b->pass_max_ns;
	uint64_t rest_over = rest > free_ns ? rest - free_ns : 0;
	if (b->streak < WRITE_BUDGET_STREAK && rest_over < cfg->cap_ns &&
	    budget_costly_lately(b, now_ns) < WRITE_BUDGET_OFTEN)
		return 0;
	if (b->unconfirmed_ns) {
		/* The slow wall-clock pass that made the suspect was this cost
		 * too, not preemption: charged now, up to what the CPU clock
		 * shows (the wall time may hold preemption as well). */
		b->level_ns += b->unconfirmed_ns < over ? b->unconfirmed_ns : over;
		b->unconfirmed_ns = 0;
	}
	b->level_ns += over - b->pass_charged_ns;
	b->pass_charged_ns = over;
	return b->level_ns > cfg->cap_ns;
}
